"""Ranks disagree on the dtype of an Allreduce: the root finds it in the
frame (H1617) and ends the job; every rank raises JobError. Each prints
`mismatch <code>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
dt = np.float64 if comm.rank == 0 else np.float32
try:
    comm.Allreduce(np.ones(4, dt), np.empty(4, dt))
    comm.Barrier()
    raise AssertionError("no error")
except sperli.JobError as e:
    assert e.code == (1617 if comm.rank == 0 else 1612), repr(e)
    print("mismatch", e.code, flush=True)
