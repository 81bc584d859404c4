"""Shared helpers: every multi-rank test starts a real job with the
`sperli` launcher of this tree (ranks on 127.0.0.1, TLS 1.3 between
them) running a rank script of tests/ranks/ with this interpreter."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
RANKS = HERE / "ranks"
ROOT = HERE.parents[2]


def sperli_bin():
    """The launcher: $SPERLI_BIN, else target/{debug,release}/sperli."""
    env = os.environ.get("SPERLI_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "sperli"
        if p.is_file():
            return str(p)
    pytest.skip("no sperli launcher: cargo build -p sperli-launch, or set SPERLI_BIN")


def run_job(n, script, *args, flags=(), timeout=120, env=None):
    """`sperli run -n N FLAGS -- python3 tests/ranks/SCRIPT ARGS`; returns
    the CompletedProcess (text stdout and stderr)."""
    cmd = [sperli_bin(), "run", "-n", str(n), *flags, "--", sys.executable, str(RANKS / script), *args]
    e = dict(os.environ)
    if env:
        e.update(env)
    try:
        return subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
            env=e,
        )
    except subprocess.TimeoutExpired as t:
        out = t.stdout.decode() if isinstance(t.stdout, bytes) else (t.stdout or "")
        err = t.stderr.decode() if isinstance(t.stderr, bytes) else (t.stderr or "")
        pytest.fail(f"{' '.join(cmd)} hung for {timeout} s\n--- stdout\n{out}\n--- stderr\n{err}")


def describe(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def lines_of(p, word):
    """The stdout lines (prefix `[rank] ` kept) that contain `word`."""
    return [l for l in p.stdout.splitlines() if word in l]
