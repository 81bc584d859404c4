"""comm.Abort(5) on rank 1 while rank 0 waits in a Recv from it: rank 0
raises JobError H1612 carrying code 5; rank 1's process exits 5."""

import sys

import numpy as np

import sperli

comm = sperli.COMM_WORLD
if comm.rank == 1:
    # Once rank 0 says it goes into the Recv.
    comm.Recv(np.empty(1), source=0, tag=1)
    comm.Abort(5, "stopping on purpose")
comm.Send(np.zeros(1), dest=1, tag=1)
try:
    comm.Recv(np.empty(1), source=1)
    sys.exit(1)
except sperli.JobError as e:
    assert e.code == 1612 and e.peer == 1, repr(e)
    assert "reason 2, code 5: stopping on purpose" in str(e), str(e)
    print("raised", e.code, flush=True)
    sys.exit(3)
