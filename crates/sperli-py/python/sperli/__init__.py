"""sperli: mpi4py's calls over SPERLI, every byte between ranks over
mutually authenticated TLS 1.3.

Start a program with the launcher, as mpirun starts an mpi4py program::

    sperli run -n 4 -- python3 script.py

and use it as mpi4py::

    import numpy as np
    import sperli

    comm = sperli.COMM_WORLD               # joins the job on first use
    x = np.full(1000, comm.rank, dtype=np.float64)
    out = np.empty_like(x)
    comm.Allreduce(x, out, op=sperli.SUM)  # numpy memory, no copy
    total = comm.allreduce(comm.rank)      # Python objects (pickled)

Uppercase calls (``Send``, ``Recv``, ``Isend``, ``Irecv``, ``Sendrecv``,
``Bcast``, ``Reduce``, ``Allreduce``, ``Gather``, ``Scatter``,
``Allgather``, ``Alltoall``, ``Reduce_scatter_block``, ``Barrier``,
``Probe``, ``Iprobe``, the non-blocking ``Ibarrier``, ``Ibcast``,
``Ireduce``, ``Iallreduce``, ``Igather``, ``Iscatter``, ``Iallgather``, and
the v forms ``Gatherv``, ``Scatterv``, ``Allgatherv``, ``Alltoallv`` with
``[buf, counts(, displs)]`` as in mpi4py) take
anything with the buffer protocol of one of the seven element types
(``sperli.DTYPES``). Lowercase calls (``send``, ``recv``, ``isend``,
``irecv``, ``bcast``, ``gather``, ``scatter``, ``allgather``,
``allreduce``, ``reduce``, ``barrier``) take Python objects.
``comm.Split(color, key)`` and ``comm.Dup()`` make communicators.

Errors are ``sperli.SperliError`` with the H-code in ``.code``;
``sperli.JobError`` when this rank's job step is over (a lost peer, an
ABORT: never a hang), ``sperli.ArgumentError`` (H1618) when a call was
refused before anything was sent and the job goes on.

mpi4py programs run with one changed import, ``from sperli import MPI``:
``sperli.MPI`` is mpi4py's ``MPI`` module spelled over this package.

See docs/python.md in the repository.
"""

import atexit as _atexit
import sys as _sys
import threading as _threading
import time as _time

from ._sperli import (
    ANY_SOURCE,
    ANY_TAG,
    BAND,
    BOR,
    BXOR,
    MAXLOC,
    MINLOC,
    DTYPES,
    ERRORS_ARE_FATAL,
    ERRORS_RETURN,
    IN_PLACE,
    LAND,
    LOR,
    LXOR,
    MAX,
    MIN,
    PROD,
    SUM,
    UNDEFINED,
    ArgumentError,
    Checkpointer,
    Comm,
    JobError,
    Mailbox,
    MailboxServer,
    Op,
    Reply,
    Request,
    SperliError,
    Status,
    Task,
    TaskFailedError,
    __version__,
)

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "BAND",
    "BOR",
    "BXOR",
    "MAXLOC",
    "MINLOC",
    "COMM_WORLD",
    "DTYPES",
    "ERRORS_ARE_FATAL",
    "ERRORS_RETURN",
    "IN_PLACE",
    "LAND",
    "LOR",
    "LXOR",
    "MAX",
    "MIN",
    "PROD",
    "SUM",
    "UNDEFINED",
    "ArgumentError",
    "Checkpointer",
    "Comm",
    "JobError",
    "Mailbox",
    "MailboxServer",
    "Op",
    "Reply",
    "Request",
    "SperliError",
    "Status",
    "Task",
    "TaskFailedError",
    "Wtime",
    "finalize",
    "init",
    "is_initialized",
]

_lock = _threading.Lock()
_world = None
_uncaught = None


def init(errors=ERRORS_RETURN):
    """The world communicator: joins the job on the first call (the job
    description is read from stdin, as ``sperli run`` writes it), then
    returns the same object. ``sperli.COMM_WORLD`` calls it.

    ``errors``: ``sperli.ERRORS_RETURN`` (the default, as mpi4py): a
    failure of the job step (a lost peer, an ABORT) is raised as
    ``JobError``; ``sperli.ERRORS_ARE_FATAL``: the process ends at once
    with status H-code - 1600. Later: ``comm.Set_errhandler(...)``."""
    global _world
    with _lock:
        if _world is None:
            _world = Comm.from_stdin(errors)
            _atexit.register(_at_exit)
        return _world


def is_initialized():
    """Whether this process joined its job."""
    return _world is not None


def finalize():
    """Ends this rank's job step normally (BYE to every peer). Runs at
    exit by itself; a call after it raises."""
    if _world is not None:
        _world.Finalize()


def Wtime():
    """Seconds on a monotonic clock (MPI's `Wtime`)."""
    return _time.perf_counter()


def __getattr__(name):
    if name == "COMM_WORLD":
        return init()
    raise AttributeError(f"module 'sperli' has no attribute {name!r}")


_previous_hook = _sys.excepthook


def _excepthook(kind, value, tb):
    global _uncaught
    _uncaught = (kind, value)
    _previous_hook(kind, value, tb)


_sys.excepthook = _excepthook


def _at_exit():
    # An uncaught exception ends the job with ABORT (reason 2, application)
    # so the other ranks raise JobError at once instead of waiting for a
    # rank that is gone; a normal end says BYE.
    world = _world
    if world is None or world.Is_finalized():
        return
    if _uncaught is not None:
        kind, value = _uncaught
        try:
            world._abort_job(1, f"uncaught {kind.__name__}: {value}"[:1024])
        except SperliError:
            pass
        return
    try:
        world.Finalize()
    except SperliError as e:
        print(f"sperli: rank {world.rank}: {e}", file=_sys.stderr)
