"""The last rank SIGKILLs itself while the others wait on it (rank 0 in
an Allreduce, the others in a Recv from it): each survivor raises
JobError (H1612 or H1613) within the silence limit, never hangs.
Survivors print `raised <code> after <s> s` and exit 3.

With `--nonblocking` the survivors wait in an Iallreduce's `Wait`
instead.

With `--fatal` (sperli.ERRORS_ARE_FATAL) the survivors compute (sleep
30 s) instead: the transport ends their processes within the silence
limit; `still computing` is never printed."""

import os
import signal
import sys
import time

import numpy as np

import sperli

fatal = "--fatal" in sys.argv
nonblocking = "--nonblocking" in sys.argv
comm = sperli.init(errors=sperli.ERRORS_ARE_FATAL if fatal else sperli.ERRORS_RETURN)
r, n = comm.rank, comm.size
victim = n - 1
comm.Barrier()
if r == victim:
    # Once every survivor says it goes into its wait (or computation).
    for s in range(n - 1):
        comm.Recv(np.empty(1), source=s, tag=1)
    os.kill(os.getpid(), signal.SIGKILL)
comm.Send(np.zeros(1), dest=victim, tag=1)
if fatal:
    # protocol §7.4: the transport ends a computing rank's process within
    # the silence limit (2 s here) plus 1 s; this computation lasts longer.
    time.sleep(30)
    print("still computing", flush=True)
    sys.exit(1)
t = time.monotonic()
try:
    if nonblocking:
        y = np.empty(1 << 16)
        comm.Iallreduce(np.ones(1 << 16), y).Wait()
    elif r == 0:
        y = np.empty(1 << 16)
        comm.Allreduce(np.ones(1 << 16), y)
    else:
        comm.Recv(np.empty(4), source=victim, tag=0)
    print("no error", flush=True)
    sys.exit(1)
except sperli.JobError as e:
    assert e.job_ended and e.code in (1612, 1613), repr(e)
    print(f"raised {e.code} after {time.monotonic() - t:.1f} s: {e}", flush=True)
    sys.exit(3)
