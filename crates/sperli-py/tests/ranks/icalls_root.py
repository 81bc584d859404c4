"""The root of Igather gives a receive buffer of the wrong length, a check
only it can make: it ends the job at the call (JobError H1618 there,
ABORT reason 3), the other ranks' requests raise JobError H1612 at Wait
(or H1613 when a peer that saw the ABORT left first), never hang. Prints `root check <rank> <code>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size
try:
    # Every rank's set-up is done before the ABORT (which a rank may see
    # in this barrier already).
    comm.Barrier()
    rq = comm.Igather(np.zeros(2), np.zeros(2 * n - 1) if r == 0 else None, root=0)
    rq.Wait()
    comm.Barrier()
except sperli.JobError as e:
    assert e.job_ended, repr(e)
    print(f"root check {r} {e.code}", flush=True)
