#!/usr/bin/env python3
"""Runs mpi4py 4.0.3's own test suite on SPERLI.

    python3 scripts/mpi4py-suite.py [-n 1,2,4] [--timeout S] [--total-timeout S]
        [--expect FILE] [--write-expected FILE] [--baseline] [MODULE ...]

What it does:

1. `pip download --no-deps --no-binary mpi4py mpi4py==4.0.3` into
   target/mpi4py-suite/cache (once; mpi4py's files are never part of the
   repository) and extracts only the sdist's test/ folder.
2. Makes a two-line `mpi4py` package in target/mpi4py-suite/shim whose
   `MPI` is `sperli.MPI` (with `--baseline`: the `sperli` package itself,
   the names-only mapping the suite was first tried with).
3. Runs each chosen module (default: the list below) under
   `target/debug/sperli run -n N -- PYTHON driver MODULE` for each N,
   with a per-run timeout (a hang is reported as HANG, not waited on), and
   prints unittest's own counts (rank 0's; "ranks differ" when another
   rank counted otherwise), then the totals. Each rank's unittest report
   (tracebacks) is kept in target/mpi4py-suite/logs/MODULE-nN-rR.txt.

The exit code is 1 when a run hung (timed out), a rank crashed or gave no
result, or the ranks of a run counted differently; with `--expect FILE`
(CI: scripts/mpi4py-expected.txt), also when a module's passed count at a
rank count fell below the file's minimum or its failed count (unittest's
failures + errors) rose above the file's maximum, or a run has no line
there: the counts can only ratchet up. `--write-expected FILE` writes the
counts measured as that file (when a change passes more: commit it).
`--total-timeout S` stops starting runs after S seconds (the runs not made
are failures), so a step that hangs everywhere is still bounded.

mpiunittest's vendor skip decorator (`skipMPI`, which skips a test on
named MPI libraries) is neutralised; no test body is changed.

Environment: PYTHON (default target/python-env/bin/python, else this
interpreter), SPERLI_BIN (default target/debug/sperli).
"""

import argparse
import os
import pathlib
import re
import signal
import subprocess
import sys
import tarfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORK = ROOT / "target" / "mpi4py-suite"
VERSION = "4.0.3"

DEFAULT_MODULES = [
    "p2p_buf", "p2p_obj", "p2p_buf_matched", "p2p_obj_matched", "cco_buf",
    "cco_obj", "cco_nb_buf", "cco_vec", "cco_nb_vec", "comm", "request",
    "status", "op", "exceptions", "msgspec", "msgzero", "environ",
    "errhandler", "errorcode", "group", "pickle", "objmodel", "attributes",
    "subclass", "comm_topo", "comm_inter", "cco_buf_inter", "cco_obj_inter", "cco_vec_inter",
    "ulfm",
]

# Runs inside every rank: the test module under unittest, its counts as one
# line on stdout, its report in a log file.
DRIVER = r'''
import io, sys, unittest, importlib
testdir, module, log = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, testdir)
import mpiunittest
mpiunittest.skipMPI = lambda predicate, *conditions: unittest.skipIf(False, "")
from mpi4py import MPI
rank = MPI.COMM_WORLD.Get_rank()
stream = io.StringIO()
try:
    mod = importlib.import_module("test_" + module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    result = unittest.TextTestRunner(stream=stream, verbosity=2).run(suite)
    ids = lambda items: {getattr(t, "test_case", t).id() for t, _ in items}
    failed, errored = ids(result.failures), ids(result.errors)
    skipped = ids(result.skipped) - failed - errored
    failed -= errored
    counts = (result.testsRun, len(failed), len(errored), len(skipped))
except BaseException as e:  # an import that fails is the whole module's error
    import traceback
    traceback.print_exc(file=stream)
    counts = (1, 0, 1, 0)
with open(log.replace("RANK", str(rank)), "w") as f:
    f.write(stream.getvalue())
run, failed, errors, skipped = counts
passed = run - failed - errors - skipped
print(f"SUITE-RESULT {rank} {passed} {failed} {errors} {skipped}", flush=True)
'''


def fetch_tests(python):
    """The extracted test/ folder of mpi4py's sdist."""
    cache = WORK / "cache"
    tests = cache / f"mpi4py-{VERSION}" / "test"
    if tests.is_dir():
        return tests
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"mpi4py-{VERSION}.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [python, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
             "--no-binary", "mpi4py", f"mpi4py=={VERSION}", "-d", str(cache)],
            check=True,
        )
    prefix = f"mpi4py-{VERSION}/test/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        tar.extractall(cache, members=members, filter="data")
    return tests


def make_shim(baseline):
    """The `mpi4py` package that re-exports sperli's MPI."""
    shim = WORK / ("shim-baseline" if baseline else "shim") / "mpi4py"
    shim.mkdir(parents=True, exist_ok=True)
    if baseline:
        (shim / "__init__.py").write_text("import sperli as MPI\n")
        (shim / "MPI.py").write_text("from sperli import *\nfrom sperli import COMM_WORLD\n")
    else:
        (shim / "__init__.py").write_text("from sperli import MPI\n")
        (shim / "MPI.py").write_text(
            "import sys, sperli.MPI\nsys.modules[__name__] = sperli.MPI\n")
    return shim.parent


def run_one(sperli, python, tests, shim, module, n, timeout):
    """(status, [(rank, passed, failed, errors, skipped)], tail of output)."""
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    driver = WORK / "driver.py"
    driver.write_text(DRIVER)
    log = logs / f"{module}-n{n}-rRANK.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(shim)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # ULFM's module runs as a ULFM program would: with the launcher's
    # control channel (feature bit 5), so a revoke reaches every member
    # (protocol 18.8.1).
    recover = ["--recover", "shrink"] if module == "ulfm" else []
    cmd = [sperli, "run", "-n", str(n), *recover, "--", python, str(driver), str(tests), module, str(log)]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        status = "HANG"
    rows = []
    for line in out.splitlines():
        m = re.search(r"SUITE-RESULT (\d+) (\d+) (\d+) (\d+) (\d+)", line)
        if m:
            rows.append(tuple(int(x) for x in m.groups()))
    (logs / f"{module}-n{n}.out").write_text(out)
    return status, sorted(rows), out[-2000:]


def read_expected(path):
    """{(module, ranks): (min passed, max failed)} of an expectation file."""
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            module, ranks, passed, failed = line
            out[(module, int(ranks))] = (int(passed), int(failed))
    return out


def write_expected(path, results):
    lines = [
        "# The mpi4py suite's expected counts on SPERLI (scripts/mpi4py-suite.py --expect):",
        "# module, ranks, minimum passed, maximum failed (unittest failures + errors).",
        "# CI fails when a count is worse; rewrite with --write-expected when it is better.",
    ]
    for (module, n), counts in results.items():
        lines.append(f"{module:<18} {n} {counts[0]:>4} {counts[1] + counts[2]:>4}")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("-n", default="1,2,4", help="rank counts, comma-separated")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per run")
    ap.add_argument("--total-timeout", type=float, default=None,
                    help="seconds after which no run is started (the rest fail)")
    ap.add_argument("--expect", help="file of minimum passed / maximum failed counts to hold")
    ap.add_argument("--write-expected", help="write the counts measured as an expectation file")
    ap.add_argument("--baseline", action="store_true",
                    help="map mpi4py.MPI to the sperli package by names only")
    args = ap.parse_args()
    venv = ROOT / "target" / "python-env" / "bin" / "python"
    python = os.environ.get("PYTHON") or (str(venv) if venv.is_file() else sys.executable)
    sperli = os.environ.get("SPERLI_BIN") or str(ROOT / "target" / "debug" / "sperli")
    tests = fetch_tests(python)
    shim = make_shim(args.baseline)
    ns = [int(x) for x in args.n.split(",")]
    expected = read_expected(args.expect) if args.expect else None
    total = {n: [0, 0, 0, 0] for n in ns}
    results = {}
    problems, better = [], []
    start = time.monotonic()
    print(f"{'module':<18}" + "".join(f"{'n=' + str(n) + ' pass/fail/err/skip':>28}" for n in ns))
    for module in args.modules:
        cells = []
        for n in ns:
            t0 = time.monotonic()
            if args.total_timeout is not None and t0 - start > args.total_timeout:
                cells.append("not run")
                problems.append(f"{module} n={n}: not run (--total-timeout {args.total_timeout:.0f} s)")
                continue
            status, rows, tail = run_one(sperli, python, tests, shim, module, n, args.timeout)
            rank0 = next((r for r in rows if r[0] == 0), None)
            if rank0 is None:
                cell = f"{status} (no result)"
                problems.append(f"{module} n={n}: {status}, no result")
            else:
                counts = rank0[1:]
                results[(module, n)] = counts
                for i in range(4):
                    total[n][i] += counts[i]
                cell = "/".join(str(c) for c in counts)
                if any(r[1:] != counts for r in rows) or len(rows) != n:
                    cell += "*"
                    problems.append(f"{module} n={n}: the ranks counted differently {rows}")
                if status != "ok":
                    cell += f" {status}"
                    problems.append(f"{module} n={n}: {status}")
                if expected is not None:
                    want = expected.get((module, n))
                    passed, failed = counts[0], counts[1] + counts[2]
                    if want is None:
                        problems.append(f"{module} n={n}: no line in {args.expect}")
                    elif passed < want[0] or failed > want[1]:
                        problems.append(f"{module} n={n}: {passed} passed, {failed} failed "
                                        f"(expected at least {want[0]} passed, at most {want[1]} failed)")
                    elif passed > want[0] or failed < want[1]:
                        better.append(f"{module} n={n}: {passed} passed, {failed} failed "
                                      f"(expected {want[0]}, {want[1]})")
            cells.append(f"{cell} ({time.monotonic() - t0:.0f}s)")
        print(f"{module:<18}" + "".join(f"{c:>28}" for c in cells), flush=True)
    print(f"{'total':<18}" + "".join(f"{'/'.join(map(str, total[n])):>28}" for n in ns))
    print("* = another rank counted otherwise, or a rank gave no result; "
          f"reports in {WORK / 'logs'}; {time.monotonic() - start:.0f} s in all")
    if args.write_expected:
        write_expected(args.write_expected, results)
        print(f"wrote {args.write_expected}")
    if better:
        print("better than expected (raise the expectations: --write-expected):")
        for b in better:
            print("  " + b)
    if problems:
        print("FAILED:")
        for p in problems:
            print("  " + p)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
