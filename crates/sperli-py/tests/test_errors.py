"""Dtype and shape mismatches, non-contiguous, read-only and misaligned
buffers, bad ranks, tags and ops: each a clear ArgumentError (H1618) and
the job goes on; a root-only check and a dtype that differs between ranks
end the job with JobError on every rank."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2])
def test_refused_calls_and_the_job_goes_on(n):
    p = run_job(n, "errors.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "errors ok")) == n, describe(p)
    if n > 1:
        ended = sorted(l.split()[-1] for l in lines_of(p, "job ended"))
        assert ended == ["1612"] * (n - 1) + ["1618"], describe(p)


def test_dtypes_that_differ_between_ranks_end_the_job():
    p = run_job(2, "mismatch.py")
    assert p.returncode == 0, describe(p)
    codes = sorted(l.split()[-1] for l in lines_of(p, "mismatch"))
    assert codes in (["1612", "1617"], ["1617", "1617"]), describe(p)
