"""Matched probes: ``Message`` (mpi4py's ``MPI.Message``), over the
package's claim of a message for one later receive (protocol §16.3:
``Comm._mprobe``/``_improbe`` take it, ``Comm._imrecv`` receives it)."""

from .constants import ANY_SOURCE, ANY_TAG, PROC_NULL
from .errors import ERR_ARG, Exception
from .handles import _Handled, _PREDEFINED
from .msgspec import _rmsg
from .requests import Request, _done

_NO_PROC = ("no proc",)  # the value of MESSAGE_NO_PROC (a probe from PROC_NULL)


class Message(_Handled):
    """A message taken by a matched probe (``Comm.Mprobe``, ``Improbe``,
    ``Message.Probe``...): exactly one ``Recv``/``Irecv``/``recv``/``irecv``
    receives it, after which this object is ``MESSAGE_NULL``. A probe from
    ``PROC_NULL`` gives ``MESSAGE_NO_PROC``, whose receive completes at once
    with no data."""

    _slot = "_m"  # None, _NO_PROC, or (package comm, open id, tag base)

    @classmethod
    def Probe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``comm.Mprobe``."""
        return comm.Mprobe(source, tag, status)

    @classmethod
    def Iprobe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """``comm.Improbe``."""
        return comm.Improbe(source, tag, status)

    probe, iprobe = Probe, Iprobe

    def _take(self):
        """The message's value; this object becomes MESSAGE_NULL (the
        predefined MESSAGE_NO_PROC stays as it is)."""
        m = self._m
        if m is None:
            raise Exception(ERR_ARG, "receive of MESSAGE_NULL")
        if id(self) not in _PREDEFINED:
            self._m = None
        return m

    def Irecv(self, buf):
        """The request receiving the message into ``buf``."""
        m = self._take()
        if m is _NO_PROC:
            return _done((PROC_NULL, ANY_TAG, 0))
        c, mid, base = m
        return Request._of(c._imrecv(mid, _rmsg(buf)), base=base)

    def Recv(self, buf, status=None):
        """Receives the message into ``buf``."""
        self.Irecv(buf).Wait(status)

    def irecv(self):
        """The request receiving the message as a Python object."""
        m = self._take()
        if m is _NO_PROC:
            return _done((PROC_NULL, ANY_TAG, 0))
        c, mid, base = m
        return Request._of(c._imrecv(mid, None), base=base)

    def recv(self, status=None):
        """Receives the message as a Python object."""
        return self.irecv().wait(status)


Message._family = Message
MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message._of(_NO_PROC)
