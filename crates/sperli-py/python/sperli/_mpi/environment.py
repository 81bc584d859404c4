"""The environment: Init/Finalize, versions, clocks, ``MPI.pickle``."""

import pickle as _pickle
import socket as _socket
import time as _time

import sperli as _sp
from .. import _sperli as _s
from . import state as _state
from .buffers import Get_address, buffer  # noqa: F401 (MPI.Get_address, MPI.buffer)
from .comm import COMM_SELF, COMM_WORLD, _Handle
from .constants import BUFFER_AUTOMATIC, SUBVERSION, THREAD_MULTIPLE, VERSION
from .info import INFO_ENV, INFO_NULL, Info
from .requests import _done


class Pickle:
    """mpi4py's `MPI.pickle`: `dumps`/`loads` with a protocol. The package's
    lowercase calls pickle with the standard pickle module (this object's
    settings do not change what travels)."""

    def __init__(self, dumps=None, loads=None, protocol=None):
        self._dumps = dumps or _pickle.dumps
        self._loads = loads or _pickle.loads
        # mpi4py's rule: the pickle module's highest protocol by default; a
        # dumps given without a protocol is called without one.
        if dumps is None or dumps is _pickle.dumps:
            if protocol is None or protocol < 0:
                protocol = _pickle.HIGHEST_PROTOCOL
        self.PROTOCOL = protocol
        self.THRESHOLD = 1024 ** 2

    def dumps(self, obj):
        """Bytes of obj."""
        if self.PROTOCOL is None:
            return self._dumps(obj)
        return self._dumps(obj, self.PROTOCOL)

    def dumps_oob(self, obj):
        """(bytes, buffers)."""
        return self.dumps(obj), []

    def loads(self, data):
        """The object of bytes."""
        return self._loads(data)

    def loads_oob(self, data, buffers):
        """The object of bytes."""
        return self.loads(data)


pickle = Pickle()


def Init():
    """Joins the job (done at import)."""
    _start()


def Init_thread(required=THREAD_MULTIPLE):
    """Joins the job; the thread level given is THREAD_SERIALIZED."""
    _start()
    return _state.flags["thread"]


def Query_thread():
    """THREAD_SERIALIZED: the calls of one communicator run one at a time."""
    return _state.flags["thread"]


def Is_thread_main():
    """Whether this is the main thread."""
    import threading
    return threading.current_thread() is threading.main_thread()


def Is_initialized():
    """Whether the job was joined."""
    return _state.flags["initialized"]


def Is_finalized():
    """Whether Finalize ran."""
    return _state.flags["finalized"]


def Finalize():
    """Ends this rank's job step (BYE)."""
    if not _state.flags["finalized"]:
        _state.flags["finalized"] = True
        _sp.finalize()


def Get_version():
    """(3, 1): the MPI level of the calls offered."""
    return (VERSION, SUBVERSION)


def Get_library_version():
    """The package's name and version."""
    return f"SPERLI {_s.__version__} (sperli.MPI: mpi4py's MPI over TLS 1.3)"


def get_vendor():
    """("SPERLI", version)."""
    v = tuple(int(x) for x in _s.__version__.split(".")[:3] if x.isdigit())
    return ("SPERLI", (v + (0, 0, 0))[:3])


def Get_processor_name():
    """The host's name."""
    return _socket.gethostname()


def Wtime():
    """Seconds on a monotonic clock."""
    return _time.perf_counter()


def Wtick():
    """The clock's resolution."""
    return _time.get_clock_info("perf_counter").resolution


_attached = [BUFFER_AUTOMATIC]


def _attach(holder, buf):
    holder[0] = buf if buf is BUFFER_AUTOMATIC else buffer(buf)


def _detach(holder):
    buf, holder[0] = holder[0], BUFFER_AUTOMATIC
    return buf


def Attach_buffer(buf):
    """Keeps `buf` until Detach_buffer (buffered sends are sends: the
    memory is not used)."""
    _attach(_attached, buf)


def Detach_buffer():
    """The buffer attached (an MPI.buffer; BUFFER_AUTOMATIC if none)."""
    return _detach(_attached)


def Flush_buffer():
    """Nothing to flush (buffered sends are sends)."""


def Iflush_buffer():
    """Flush_buffer, complete at the call."""
    return _done()


def Get_hw_resource_info():
    """An Info of the hardware resources known (none: an empty Info)."""
    return Info.Create()


def Pcontrol(level):
    """Ignored."""


def Alloc_mem(size, info=INFO_NULL):
    """An MPI.buffer of `size` new bytes."""
    return buffer.allocate(size)


def Free_mem(mem):
    """Drops it."""


def _start():
    """Joins the job (once): COMM_WORLD, and COMM_SELF as a Split of it."""
    if _state.world is not None:
        return
    world = _state.world = _sp.init()
    _state.flags["initialized"] = True
    _state.world_h = COMM_WORLD._h = _Handle(world, range(world.Get_size()), "MPI_COMM_WORLD")
    try:
        me = world.Split(world.Get_rank(), 0)
        _state.self_h = _Handle(me, [world.Get_rank()], "MPI_COMM_SELF")
    except _s.SperliError:
        _state.self_h = None
    COMM_SELF._h = _state.self_h
    INFO_ENV.update(Info.Create_env())
