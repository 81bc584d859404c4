#!/usr/bin/env python3
"""Runs mpi4py 4.0.3's demo programs on SPERLI.

    python3 scripts/mpi4py-demos.py [-n 4] [--timeout S]

Takes `demo/helloworld.py` and `demo/mandelbrot/mandelbrot.py` from the
mpi4py sdist that scripts/mpi4py-suite.py downloads into
target/mpi4py-suite/cache (nothing of it enters the repository), and runs
each unchanged under `target/debug/sperli run -n N -- PYTHON DEMO` with the
suite's two-line `mpi4py` package (whose `MPI` is `sperli.MPI`) first on
the path. Each must exit 0 and print what it prints under mpirun: every
rank's hello line; the root's timing summary after the Bcast, Gather and
Gatherv of the Mandelbrot image.

The third demo, `demo/compute-pi/cpi-cco.py`, reads the number of
intervals from rank 0's standard input (which `sperli run` forwards to
rank 0, as mpirun does): it gets 100, then 1000, then 0, which ends its
loop, and must print pi as the job computes it for each (every rank's
partial sum, folded in ascending rank order) and nothing else. Its siblings
need Win (`cpi-rma.py`) and Spawn (`cpi-dpm.py`), out of scope.

Exit status 1 when a demo fails, hangs or prints something else; the
closing line says how many passed and failed.

Environment: PYTHON (default target/python-env/bin/python), SPERLI_BIN
(default target/debug/sperli).
"""

import argparse
import importlib.util
import math
import os
import pathlib
import re
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("suite", ROOT / "scripts" / "mpi4py-suite.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def fetch_demos(python):
    """The extracted demo/ folder of mpi4py's sdist."""
    tests = suite.fetch_tests(python)
    base = tests.parent
    demo = base / "demo"
    if not (demo / "helloworld.py").is_file():
        sdist = suite.WORK / "cache" / f"mpi4py-{suite.VERSION}.tar.gz"
        if not sdist.is_file():
            subprocess.run(
                [python, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                 "--no-binary", "mpi4py", f"mpi4py=={suite.VERSION}", "-d", str(sdist.parent)],
                check=True,
            )
        prefix = f"mpi4py-{suite.VERSION}/demo/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            tar.extractall(suite.WORK / "cache", members=members, filter="data")
    return demo


def expect_hello(out, n):
    got = sorted(int(m.group(1)) for m in re.finditer(
        r"Hello, World! I am process (\d+) of " + str(n) + r" on ", out))
    return got == list(range(n)), f"hello lines of ranks {got}"


def expect_mandelbrot(out, n):
    tasks = sorted(int(m.group(1)) for m in re.finditer(r"wall clock time: .* \(task (\d+)\)", out))
    ok = tasks == list(range(n)) and "all tasks, sum:" in out
    return ok, f"timings of tasks {tasks}"


CPI_INPUT = "100\n1000\n0\n"


def cpi_expected(intervals, nprocs):
    """The pi line cpi-cco.py prints for `intervals`: its comp_pi on every
    rank, the partial sums folded in ascending rank order as SPERLI's
    Reduce folds them."""
    def comp_pi(n, myrank):
        h = 1.0 / n
        s = 0.0
        for i in range(myrank + 1, n + 1, nprocs):
            x = h * (i - 0.5)
            s += 4.0 / (1.0 + x**2)
        return s * h
    pi = comp_pi(intervals, 0)
    for r in range(1, nprocs):
        pi = pi + comp_pi(intervals, r)
    return "pi is approximately %.16f, error is %.16f" % (pi, abs(pi - math.pi))


def expect_cpi(out, n):
    got = re.findall(r"pi is approximately \S+, error is \S+", out)
    want = [cpi_expected(int(k), n) for k in CPI_INPUT.split() if int(k) > 0]
    return got == want, f"pi lines {got}"


# (name, demo file, check, rank 0's standard input)
DEMOS = [
    ("helloworld", "helloworld.py", expect_hello, ""),
    ("mandelbrot", "mandelbrot/mandelbrot.py", expect_mandelbrot, ""),
    ("compute-pi", "compute-pi/cpi-cco.py", expect_cpi, CPI_INPUT),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4, help="ranks")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per demo")
    args = ap.parse_args()
    python = os.environ.get("PYTHON") or str(ROOT / "target" / "python-env" / "bin" / "python")
    sperli = os.environ.get("SPERLI_BIN") or str(ROOT / "target" / "debug" / "sperli")
    demo = fetch_demos(python)
    shim = suite.make_shim(False)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(shim)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["MPLBACKEND"] = "Agg"
    passed = failed = 0
    for name, path, expect, stdin in DEMOS:
        cmd = [sperli, "run", "-n", str(args.n), "--", python, str(demo / path)]
        try:
            p = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                               env=env, timeout=args.timeout)
            out = p.stdout + p.stderr
            ok, what = expect(out, args.n)
            ok = ok and p.returncode == 0
            verdict = f"exit {p.returncode}, {what}"
        except subprocess.TimeoutExpired:
            ok, verdict, out = False, f"HANG (over {args.timeout:.0f} s)", ""
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {verdict}", flush=True)
        if not ok:
            print(out[-3000:])
        passed += ok
        failed += not ok
    print(f"demos: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
