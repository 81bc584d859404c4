"""A numpy state checkpointed every 3 steps survives a restart: in the
first incarnation rank 1 SIGKILLs itself after step 7 (epoch 2 holds step
6); `sperli run --restart-max 1` starts the job again, every rank resumes
step 6 with its array, dtype and shape, and the result equals the serial
computation. Prints `resumed <step>` and `result ok <incarnation>`."""

import os
import signal

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size
ck = sperli.Checkpointer(comm)
STEPS = 10


def step(x, k):
    # x <- x/2 + (sum over ranks of x)/n + k: an allreduce per step.
    s = np.empty_like(x)
    comm.Allreduce(x, s)
    return x / 2 + s / n + k


state = ck.resume()
if state is None and n > 1:
    # An open Irecv refuses the checkpoint on every rank (H1624); the job goes on.
    buf = np.empty(1)
    rq = comm.Irecv(buf, source=(r - 1) % n, tag=77)
    try:
        ck.checkpoint(b"never")
        raise AssertionError("a checkpoint with an open request")
    except sperli.SperliError as e:
        assert e.code == 1624 and not e.job_ended, repr(e)
    comm.Send(np.ones(1), dest=(r + 1) % n, tag=77)
    rq.Wait()
    assert ck.epoch == 0
if state is None:
    assert ck.incarnation == 1 and ck.epoch == 0
    k0, x, meta = 0, np.arange(6, dtype=np.float64).reshape(2, 3) + r, {"rank": r, "tag": b"\x00\xff"}
else:
    k0, x, meta = state
    assert ck.incarnation == 2 and ck.epoch == 2, (ck.incarnation, ck.epoch)
    assert x.dtype == np.float64 and x.shape == (2, 3) and x.flags.writeable
    assert meta == {"rank": r, "tag": b"\x00\xff"}, meta
    print("resumed", k0, flush=True)
for k in range(k0, STEPS):
    x = step(x, k)
    if (k + 1) % 3 == 0:
        ck.checkpoint((k + 1, x, meta))
    if k + 1 == 7 and ck.incarnation == 1 and r == 1:
        os.kill(os.getpid(), signal.SIGKILL)

# The serial computation of every rank's x.
xs = [np.arange(6, dtype=np.float64).reshape(2, 3) + q for q in range(n)]
for k in range(STEPS):
    tot = sum(xs)
    xs = [v / 2 + tot / n + k for v in xs]
assert np.array_equal(x, xs[r]), (x, xs[r])
print("result ok", ck.incarnation, flush=True)
