"""Every call at 1, 2 and 4 ranks (tests/ranks/calls.py checks each
against a serial computation)."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2, 4])
def test_every_call(n):
    p = run_job(n, "calls.py")
    assert p.returncode == 0, describe(p)
    ok = lines_of(p, "calls ok")
    assert len(ok) == n, describe(p)
    # Every rank made the same number of collective calls.
    assert len({l.split()[-1] for l in ok}) == 1, ok
