"""One call for any length: Bcast, Reduce, Allreduce and allreduce of 100
MiB, and Gather, Scatter, Allgather, Alltoall and Reduce_scatter_block of
17 MiB blocks, at 2 and 3 ranks
(tests/ranks/any_length.py), with HELLO feature bit 1 (one pipelined call
each where protocol §14.5 says so) and in a v1 job (the v1 split inside the
call)."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("features", [None, "1"])
def test_100_mib_in_one_call(n, features):
    env = {"SPERLI_FEATURES": features} if features else None
    p = run_job(n, "any_length.py", env=env, timeout=300)
    assert p.returncode == 0, describe(p)
    ok = lines_of(p, "any length ok")
    assert len(ok) == n, describe(p)
    seqs = {int(l.split()[-1]) for l in ok}
    # One call each with bit 1; in a v1 job ceil(100 MiB / 16777200) = 7.
    assert seqs == ({4} if features is None else {4 * 7}), ok
    # Gather, Scatter, Allgather, Alltoall and Reduce_scatter_block of 17
    # MiB blocks, one call each.
    assert len(lines_of(p, "blocks ok")) == n, describe(p)
