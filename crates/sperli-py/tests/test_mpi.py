"""sperli.MPI (mpi4py's spelling) at 1, 2 and 4 ranks: tests/ranks/mpi_calls.py
checks every mapped argument form against a serial computation."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2, 4])
def test_mpi_module(n):
    p = run_job(n, "mpi_calls.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "mpi ok")) == n, describe(p)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_mpi_intercomm(n):
    p = run_job(n, "mpi_intercomm.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "inter ok")) == n, describe(p)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_mpi_ulfm(n):
    p = run_job(n, "mpi_ulfm.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "ulfm ok")) == n, describe(p)


@pytest.mark.parametrize("n", [2, 4])
def test_mpi_ulfm_after_a_lost_rank(n):
    p = run_job(n, "mpi_ulfm_kill.py", flags=("--recover", "shrink"))
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "ulfm kill ok")) == n - 1, describe(p)
    assert "shrunk to" in p.stderr, describe(p)
