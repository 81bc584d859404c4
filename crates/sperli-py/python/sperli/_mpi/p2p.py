"""Point-to-point calls of ``Comm`` (buffers and objects)."""

from .. import _sperli as _s
from . import state as _state
from .constants import ANY_SOURCE, ANY_TAG, PROC_NULL, _TAG_MAX
from .errors import ERR_RANK, ERR_TAG, ERR_UNSUPPORTED_OPERATION, Exception
from .msgspec import _copy_of, _int_arg, _msg, _plain, _rmsg
from .requests import Request, _done, _persistent
from .status import _buf_unused, _fill, _proc_null


class _PointToPoint:
    """The point-to-point calls of Comm."""

    # point-to-point

    def _rank_arg(self, r, what="rank"):
        r = _int_arg(r)
        n = self._peer_size()
        if r == PROC_NULL:
            self._check_revoked()  # the call completes here (protocol §18.8.1)
            return r
        if not isinstance(r, int) or not 0 <= r < n:
            raise Exception(ERR_RANK, f"{what} {r} is not a rank of {n}")
        return r

    def _source_arg(self, source):
        source = _int_arg(source)
        if source == ANY_SOURCE:
            if self._peer_size() == 1:
                return 0
            h = self._handle()
            if h is not _state.world_h and not h.p2p:
                raise Exception(ERR_UNSUPPORTED_OPERATION,
                                "a receive from ANY_SOURCE is offered on COMM_WORLD only in a "
                                "job without HELLO feature bit 3")
            return source
        return self._rank_arg(source, "source")

    def _tag_arg(self, tag, recv=False):
        tag = _int_arg(tag)
        if recv and tag == ANY_TAG:
            return tag
        if not isinstance(tag, int) or not 0 <= tag <= _TAG_MAX:
            raise Exception(ERR_TAG, f"tag {tag} is not 0..={_TAG_MAX}")
        return tag + self._handle().base  # the wire tag

    def Send(self, buf, dest, tag=0):
        """Sends."""
        h = self._h
        # The fast path: int rank and tag in range, a bare buffer (`_plain`);
        # it passes the package exactly what the checks below would.
        if type(dest) is int and type(tag) is int and h is not None and not h.freed \
                and 0 <= tag <= _TAG_MAX and 0 <= dest < self._peer_size():
            b = _plain(buf)
            if b is not None:
                h.c.Send(b, dest, tag + h.base)
                return
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        b = _msg(buf)
        if dest == PROC_NULL:
            return
        self._c.Send(b, dest, tag)

    Bsend = Rsend = Send

    def Ssend(self, buf, dest, tag=0):
        """A synchronous send: returns once the receiver matched the message
        (protocol §16.5). In a job without HELLO feature bit 3 a Send."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        b = _msg(buf)
        if dest == PROC_NULL:
            return
        if self._handle().p2p:
            self._c.Ssend(b, dest, tag)
        else:
            self._c.Send(b, dest, tag)

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receives."""
        h = self._h
        # The fast path (see Send): a named source, a tag or ANY_TAG.
        if type(source) is int and type(tag) is int and h is not None and not h.freed \
                and (0 <= tag <= _TAG_MAX or tag == ANY_TAG) and 0 <= source < self._peer_size():
            b = _plain(buf, True)
            if b is not None:
                st = None if status is None else _s.Status()
                h.c.Recv(b, source, tag if tag == ANY_TAG else tag + h.base, st)
                _fill(status, st, h.base)
                return
        b = _rmsg(buf)
        self._receive(lambda *a: self._c.Recv(b, *a), source, tag, status, None)

    def Isend(self, buf, dest, tag=0):
        """A send request."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        b = _msg(buf)
        if dest == PROC_NULL:
            return _done()
        return Request._of(self._c.Isend(b, dest, tag))

    Ibsend = Irsend = Isend

    def Issend(self, buf, dest, tag=0):
        """A synchronous send request: complete once the receiver matched
        the message (protocol §16.5). Needs HELLO feature bit 3 (without
        it the completion cannot be told: NotImplementedError)."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        b = _msg(buf)
        if dest == PROC_NULL:
            return _done()
        if not self._handle().p2p:
            raise NotImplementedError("Issend needs HELLO feature bit 3 on every rank")
        return Request._of(self._c.Issend(b, dest, tag))

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """A receive request."""
        source = self._source_arg(source)
        tag = self._tag_arg(tag, True)
        b = _rmsg(buf)
        if source == PROC_NULL:
            return _done((PROC_NULL, ANY_TAG, 0))
        return Request._of(self._c.Irecv(b, source, tag), base=self._handle().base)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Sends and receives."""
        dest = self._rank_arg(dest, "dest")
        source = self._source_arg(source)
        stag = self._tag_arg(sendtag)
        rtag = self._tag_arg(recvtag, True)
        sb, rb = _msg(sendbuf), _rmsg(recvbuf)
        if dest == PROC_NULL and source == PROC_NULL:
            return _proc_null(status)
        if dest == PROC_NULL:
            return self.Recv(rb, source, recvtag, status)
        if source == PROC_NULL:
            self.Send(sb, dest, sendtag)
            return _proc_null(status)
        st = _s.Status()
        self._c.Sendrecv(sb, dest, stag, rb, source, rtag, st)
        _fill(status, st, self._handle().base)

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG,
                         status=None):
        """Sends buf and receives into it (the send data copied first)."""
        b = _rmsg(buf)
        self.Sendrecv(_copy_of(b), dest, sendtag, b, source, recvtag, status)

    def Isendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                  recvtag=ANY_TAG):
        """Irecv and Isend as one request."""
        rq = self.Irecv(recvbuf, source, recvtag)
        sq = self.Isend(sendbuf, dest, sendtag)
        parts = rq._parts() + sq._parts()
        if not parts:
            return _done(rq._st)
        return Request._of(parts, rq._st, rq._base)

    def Isendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG):
        """Isendrecv with buf's data copied first."""
        b = _rmsg(buf)
        return self.Isendrecv(_copy_of(b), dest, sendtag, b, source, recvtag)

    def _receive(self, call, source, tag, status, on_null=True, found=lambda out: True):
        """A receive or probe: the checks, PROC_NULL, the status filled
        (when `found(result)`) in this communicator's tag space."""
        source = self._source_arg(source)
        tag = self._tag_arg(tag, True)
        if source == PROC_NULL:
            _proc_null(status)
            return on_null
        st = _s.Status()
        out = call(source, tag, st)
        if found(out):
            _fill(status, st, self._handle().base)
        return out

    def Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Waits for a matching message; True."""
        return self._receive(lambda *a: self._c.Probe(*a) or True, source, tag, status)

    def Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Whether a matching message waits."""
        return self._receive(self._c.Iprobe, source, tag, status, found=bool)

    def Mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """A matched probe: waits for a matching message and takes it for
        the returned ``Message`` alone (protocol §16.3)."""
        return self._matched(self._c._mprobe, source, tag, status)

    def Improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """As Mprobe without waiting: None when no such message is there."""
        return self._matched(self._c._improbe, source, tag, status)

    mprobe, improbe = Mprobe, Improbe

    def _matched(self, probe, source, tag, status):
        from .message import MESSAGE_NO_PROC, Message
        source = self._source_arg(source)
        tag = self._tag_arg(tag, True)
        if source == PROC_NULL:
            _proc_null(status)
            return Message(MESSAGE_NO_PROC)
        st = _s.Status()
        mid = probe(source, tag, st)
        if mid is None:
            return None
        base = self._handle().base
        _fill(status, st, base)
        return Message._of((self._c, mid, base))

    def Send_init(self, buf, dest, tag=0):
        """A persistent send (each Start is an Isend)."""
        self._rank_arg(dest, "dest")
        self._tag_arg(tag)
        return _persistent(lambda: self.Isend(buf, dest, tag))

    Bsend_init = Rsend_init = Send_init

    def Ssend_init(self, buf, dest, tag=0):
        """A persistent synchronous send (each Start is an Issend)."""
        self._rank_arg(dest, "dest")
        self._tag_arg(tag)
        return _persistent(
            lambda: (self.Issend if self._handle().p2p else self.Isend)(buf, dest, tag))

    def Recv_init(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """A persistent receive (each Start is an Irecv)."""
        self._source_arg(source)
        self._tag_arg(tag, True)
        return _persistent(lambda: self.Irecv(buf, source, tag))

    def Psend_init(self, *a, **k):
        """Not offered: partitioned communication."""
        raise NotImplementedError("partitioned communication is not offered by sperli")

    Precv_init = Psend_init

    # objects

    def send(self, obj, dest, tag=0):
        """Sends a Python object."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        if dest != PROC_NULL:
            self._c.send(obj, dest, tag)

    bsend = send

    def ssend(self, obj, dest, tag=0):
        """A synchronous send of a Python object (see Ssend)."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        if dest == PROC_NULL:
            return
        if self._handle().p2p:
            self._c.ssend(obj, dest, tag)
        else:
            self._c.send(obj, dest, tag)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receives a Python object (a `buf` is not used: UserWarning)."""
        _buf_unused(buf)
        return self._receive(lambda *a: self._c.recv(None, *a), source, tag, status, None)

    def isend(self, obj, dest, tag=0):
        """A request sending a Python object."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        if dest == PROC_NULL:
            return _done()
        return Request._of(self._c.isend(obj, dest, tag))

    ibsend = isend

    def issend(self, obj, dest, tag=0):
        """A synchronous send request of a Python object (see Issend)."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        if dest == PROC_NULL:
            return _done()
        if not self._handle().p2p:
            raise NotImplementedError("issend needs HELLO feature bit 3 on every rank")
        return Request._of(self._c.issend(obj, dest, tag))

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        """A request receiving a Python object (`wait()` returns it; a `buf`
        is not used: UserWarning)."""
        _buf_unused(buf)
        source = self._source_arg(source)
        tag = self._tag_arg(tag, True)
        if source == PROC_NULL:
            return _done((PROC_NULL, ANY_TAG, 0))
        return Request._of(self._c.irecv(None, source, tag), base=self._handle().base)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Sends an object and receives one."""
        self._rank_arg(dest, "dest")
        self._source_arg(source)
        self._tag_arg(sendtag)
        self._tag_arg(recvtag, True)
        rq = self.irecv(None, source, recvtag)
        self.send(sendobj, dest, sendtag)
        return rq.wait(status)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """As Probe."""
        return self.Probe(source, tag, status)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """As Iprobe."""
        return self.Iprobe(source, tag, status)
