"""Split and Dup in a job without HELLO feature bit 2 (SPERLI_FEATURES=3):
every rank raises SperliError before anything is sent, without an H-code,
and the job goes on. Prints `no communicators ok <rank>`."""

import sperli

comm = sperli.COMM_WORLD
for call in (lambda: comm.Split(comm.rank % 2), comm.Dup):
    try:
        call()
        raise AssertionError("a communicator without feature bit 2")
    except sperli.SperliError as e:
        assert not isinstance(e, sperli.JobError) and e.code is None, repr(e)
        assert "feature bit 2" in str(e), str(e)
assert comm.allreduce(1) == comm.size
print("no communicators ok", comm.rank, flush=True)
