"""A warm job's rank program: Python task handlers served through the
mailbox (started by tests/test_mailbox.py with sperli.Mailbox.start_job)."""

import numpy as np

import sperli

server = sperli.MailboxServer()
kept = []


@server.task("sum")
def total(task):
    # GROUP: every rank runs it; the collectives go over task.comm.
    v = np.frombuffer(task.payload, dtype=np.uint64).astype(np.int64)
    out = np.empty_like(v)
    task.comm.Allreduce(v * (task.rank + 1), out)
    return out.tobytes()


@server.task("square")
def square(task):
    # PER_RANK: rank i gets payload i.
    x = int.from_bytes(task.payload, "little")
    assert task.target == "per_rank" and task.comm.size == task.size
    return (x * x + task.comm.allreduce(1)).to_bytes(8, "little")


@server.task("where")
def where(task):
    # A RANK request: one rank, no communicator.
    assert task.comm is None and isinstance(task.target, int)
    return f"rank {task.rank} of {task.size}, seq {task.sequence}".encode()


@server.task("fail")
def fail(task):
    if task.rank == 1:
        raise KeyError("only rank 1 fails")
    return b"fine"


@server.task("keep")
def keep(task):
    kept.append(task.comm)
    return b""


@server.task("stale")
def stale(task):
    # A communicator kept from an earlier task is closed.
    try:
        kept[0].barrier()
    except sperli.SperliError as e:
        return str(e).encode()
    return b"not closed"


@server.task("close_early")
def close_early(task):
    # A sub-communicator of the task's, then Finalize on the task's own
    # communicator inside the handler: the server keeps its communicator.
    sub = task.comm.Dup()
    n = sub.allreduce(1)
    task.comm.Finalize()
    try:
        task.comm.barrier()
        return b"still open"
    except sperli.SperliError:
        pass
    return n.to_bytes(8, "little")


@server.task("ring")
def ring(task):
    # Blocking point-to-point works in a task; a request that outlives
    # the call does not.
    c = task.comm
    got = np.empty(1, dtype=np.int64)
    c.Sendrecv(np.array([task.rank], dtype=np.int64), dest=(c.rank + 1) % c.size,
               recvbuf=got, source=(c.rank - 1) % c.size)
    try:
        c.Isend(got, dest=0)
        return b"Isend worked"
    except sperli.ArgumentError as e:
        assert "no Isend/Irecv" in str(e), str(e)
    return got.tobytes()


server.serve()
