"""Ranks disagree on the dtype of an Allreduce: a rank that takes the
other's frame finds it (H1617) and ends the job; every rank raises
JobError. At two ranks with HELLO feature bit 6 both take a frame
(protocol §19.3): each finds it, or has the other's ABORT first (H1612).
Each prints `mismatch <code>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
dt = np.float64 if comm.rank == 0 else np.float32
try:
    comm.Allreduce(np.ones(4, dt), np.empty(4, dt))
    comm.Barrier()
    raise AssertionError("no error")
except sperli.JobError as e:
    assert e.code in (1612, 1617), repr(e)
    print("mismatch", e.code, flush=True)
