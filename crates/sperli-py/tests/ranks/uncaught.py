"""Rank 1 dies of an uncaught exception while rank 0 waits in a Barrier:
the exit hook ends the job with ABORT (reason 2), so rank 0 raises
JobError H1612 naming rank 1 at once. Rank 0 prints `raised ...`."""

import sys
import time

import numpy as np

import sperli

comm = sperli.COMM_WORLD
if comm.rank == 1:
    # Once rank 0 says it goes into the Barrier.
    comm.Recv(np.empty(1), source=0, tag=1)
    raise ValueError("deliberately uncaught")
comm.Send(np.zeros(1), dest=1, tag=1)
t = time.monotonic()
try:
    comm.Barrier()
    sys.exit(1)
except sperli.JobError as e:
    assert e.code == 1612 and e.peer == 1, repr(e)
    assert "uncaught ValueError: deliberately uncaught" in str(e), str(e)
    print(f"raised {e.code} after {time.monotonic() - t:.1f} s", flush=True)
    sys.exit(3)
