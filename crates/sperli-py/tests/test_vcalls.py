"""Gatherv, Scatterv, Allgatherv and Alltoallv at 1, 2 and 4 ranks
(tests/ranks/vcalls.py checks each against a serial computation, then
the refusals: ArgumentError H1618 and the job goes on)."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2, 4])
def test_every_v_call(n):
    p = run_job(n, "vcalls.py")
    assert p.returncode == 0, describe(p)
    ok = lines_of(p, "vcalls ok")
    assert len(ok) == n, describe(p)
    # Every rank made the same number of collective calls.
    assert len({l.split()[-1] for l in ok}) == 1, ok


def test_gatherv_counts_that_differ_from_what_was_sent_end_the_job():
    p = run_job(2, "vcalls_mismatch.py")
    assert p.returncode == 0, describe(p)
    codes = sorted(l.split()[-1] for l in lines_of(p, "mismatch"))
    assert codes == ["1612", "1618"], describe(p)
