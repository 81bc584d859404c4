"""A rank killed mid-call, and a rank dying of an uncaught exception:
the others raise JobError, none hangs."""

import time

from conftest import describe, lines_of, run_job


def test_a_rank_killed_mid_call_raises_on_every_survivor():
    t = time.monotonic()
    p = run_job(3, "kill.py", flags=("--silence-ms", "2000"), timeout=90)
    took = time.monotonic() - t
    assert p.returncode == 128 + 9, describe(p)  # the root cause: rank 2, SIGKILL
    raised = lines_of(p, "raised")
    assert len(raised) == 2, describe(p)
    for line in raised:
        code, secs = line.split()[2], float(line.split()[4])
        assert code in ("1612", "1613") and secs < 2 + 2, line  # within the silence limit
    assert took < 60, f"the job took {took:.0f} s"


def test_a_rank_killed_mid_nonblocking_call_raises_at_wait():
    p = run_job(3, "kill.py", "--nonblocking", flags=("--silence-ms", "2000"), timeout=90)
    assert p.returncode == 128 + 9, describe(p)
    raised = lines_of(p, "raised")
    assert len(raised) == 2, describe(p)
    for line in raised:
        assert line.split()[2] in ("1612", "1613"), line


def test_errors_are_fatal_ends_computing_ranks():
    t = time.monotonic()
    p = run_job(3, "kill.py", "--fatal", flags=("--silence-ms", "2000"), timeout=90)
    took = time.monotonic() - t
    assert p.returncode == 128 + 9, describe(p)
    assert not lines_of(p, "still computing") and not lines_of(p, "raised"), describe(p)
    assert took < 25, f"the job took {took:.0f} s (the survivors slept 30 s)"


def test_an_uncaught_exception_ends_the_job_at_once():
    p = run_job(2, "uncaught.py", timeout=60)
    assert p.returncode != 0, describe(p)
    raised = lines_of(p, "raised 1612")
    assert len(raised) == 1 and float(raised[0].split()[-2]) < 5, describe(p)
    assert "deliberately uncaught" in p.stderr or "deliberately uncaught" in p.stdout


def test_abort_ends_the_job_with_its_code():
    p = run_job(2, "abort.py", timeout=60)
    assert p.returncode == 5, describe(p)  # the root cause's exit code
    assert len(lines_of(p, "raised 1612")) == 1, describe(p)
