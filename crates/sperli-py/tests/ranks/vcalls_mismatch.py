"""The root of Gatherv gives counts that differ from what rank 1 sends:
it ends the job (JobError H1618 there, ABORT reason 3), rank 1 gets
JobError H1612 on its next call. Prints `mismatch <rank> <code>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r = comm.rank
try:
    out = np.zeros(4)
    comm.Gatherv(np.zeros(2), [out, [2, 2]] if r == 0 else None, root=0)
    if r == 1:
        out = np.zeros(4)
        comm.Gatherv(np.zeros(3), None, root=0)
    else:
        comm.Gatherv(np.zeros(2), [out, [2, 2]], root=0)
    comm.Barrier()
except sperli.JobError as e:
    print(f"mismatch {r} {e.code}", flush=True)
