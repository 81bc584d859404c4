"""Refused calls: each raises ArgumentError (H1618) with a clear message,
and the job goes on (a correct call afterwards works). Then a check only
the root can make ends the job on every rank (JobError, no hang).
Prints `errors ok <rank>` and, at 2+ ranks, `job ended <code>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


def refused(words, fn, *args, **kw):
    """fn(*args) raises ArgumentError H1618 whose message has `words`."""
    try:
        fn(*args, **kw)
    except sperli.ArgumentError as e:
        check(e.code == 1618 and e.hcode == "H1618" and not e.job_ended, f"attributes of {e!r}")
        check(isinstance(e, sperli.SperliError), "ArgumentError is a SperliError")
        check(words in str(e), f"message {str(e)!r} lacks {words!r}")
        return e
    raise AssertionError(f"rank {r}: {fn.__name__}{args} did not raise")


def job_goes_on():
    y = np.empty(3)
    comm.Allreduce(np.ones(3), y)
    check((y == n).all(), "a correct call after a refused one")


x = np.ones(4)
y = np.empty(4)
refused("sendbuf is float64 but recvbuf is float32", comm.Allreduce, x, np.empty(4, dtype=np.float32))
job_goes_on()
# Lengths of the two buffers: the Rust API's own check (H1618, counted).
refused("operands of 32 and 40 bytes", comm.Allreduce, x, np.empty(5))
job_goes_on()
refused("not C-contiguous", comm.Allreduce, np.ones((4, 4))[:, 0], y)
refused("not C-contiguous", comm.Send, np.ones((4, 4))[:, 1], dest=0)
job_goes_on()
ro = np.empty(4)
ro.flags.writeable = False
refused("recvbuf is read-only", comm.Allreduce, x, ro)
refused("buf is read-only", comm.Recv, b"1234", source=0)
job_goes_on()
refused("dtype float16 is not one of the seven", comm.Allreduce, np.ones(2, np.float16), np.empty(2, np.float16))
refused("dtype float16", comm.Send, np.ones(2, np.float16), dest=0)
refused("dtype >int32", comm.Send, np.ones(2, ">i4"), dest=0)
refused("dtype >float64", comm.Send, np.ones(2, ">f8"), dest=0)
refused("not aligned for float64", comm.Send, np.frombuffer(bytearray(40), np.float64, 4, 1), dest=0)
refused("a float object has no buffer", comm.Allreduce, 3.0, y)
refused("reduction sum is not allowed on u8", comm.Allreduce, np.ones(2, np.uint8), np.empty(2, np.uint8), op=sperli.SUM)
refused("op must be a sperli.Op", comm.Allreduce, x, y, op="sum")
job_goes_on()
refused(f"rank {n} is not below size {n}", comm.Send, x, dest=n)
refused("dest -3 is not a rank", comm.Send, x, dest=-3)
refused("tag 2147483648 is reserved", comm.Send, x, dest=0, tag=2**31)
refused("tag -5 is not", comm.Send, x, dest=0, tag=-5)
refused("dest cannot be ANY_SOURCE", comm.Send, x, dest=sperli.ANY_SOURCE)
refused(f"root {n} is not below size {n}", comm.Bcast, y, root=n)
refused("recvbuf has 3 elements, the call needs", comm.Allgather, x, np.empty(3))
refused("cannot be reduced", comm.allreduce, "text")
job_goes_on()
# A message longer than the receive buffer is dropped with H1618; the next one arrives.
comm.Send(np.ones(8), dest=r, tag=3)
refused("does not fit the receive buffer", comm.Recv, np.empty(4), source=r, tag=3)
comm.Send(np.full(2, 7.0), dest=r, tag=3)
z = np.zeros(2)
comm.Recv(z, source=r, tag=3)
check((z == 7).all(), "the message after a dropped one")
job_goes_on()
print("errors ok", r, flush=True)

if n > 1:
    # Only the root can see its recvbuf is too short: the job ends on
    # every rank with JobError (root H1618, the others H1612), never a hang.
    # Every other rank has its last result before rank 0 ends the job
    # (an ABORT that arrives first makes a pending call fail).
    if r == 0:
        for q in range(1, n):
            comm.recv(source=q, tag=99)
    else:
        comm.send("done", dest=0, tag=99)
    rb = np.empty(3) if r == 0 else None
    try:
        comm.Gather(x, rb, root=0)
        # A sender's part of Gather completes locally (as in MPI): the
        # job's end reaches it in its next call.
        comm.Barrier()
        raise AssertionError(f"rank {r}: Gather with a bad root recvbuf did not end the job")
    except sperli.JobError as e:
        check(e.job_ended and e.code == (1618 if r == 0 else 1612), f"JobError {e!r}")
        check(r == 0 or e.peer == 0, f"peer of {e!r}")
        print("job ended", e.code, flush=True)
    try:
        comm.Barrier()
        raise AssertionError(f"rank {r}: a call after the job ended did not raise")
    except sperli.JobError:
        pass
