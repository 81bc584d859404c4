"""Requests: ``Request``, ``Prequest`` (persistent), completion calls."""

import time as _time

from .. import _sperli as _s
from .constants import ANY_SOURCE, ANY_TAG, UNDEFINED
from .errors import ERR_REQUEST, Exception
from .handles import _HandleModel, _reduce
from .status import Status


class Request(_HandleModel):
    """A request: `Wait`, `Test`, `wait`, `test`, `Free`, and the static
    `Waitall`, `Waitany`, `Waitsome`, `Testall`, `Testany`, `Testsome`.
    `Request()` is REQUEST_NULL; a completed request becomes null."""

    def __new__(cls, request=None):
        if request is not None and not isinstance(request, Request):
            raise TypeError(f"expected a Request, not {type(request).__name__}")
        self = object.__new__(cls)
        if isinstance(request, Request):
            self._r, self._value, self._st = request._r, request._value, request._st
            self._base = request._base
        else:
            self._r, self._value, self._st, self._base = None, None, None, 0
        return self

    def __eq__(self, other):
        if not isinstance(other, Request):
            return NotImplemented
        return self._r is other._r if self._r is not None or other._r is not None else True

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __bool__(self):
        return self._r is not None

    def _key(self):
        return self._r

    def _null(self):
        self._r = None

    @classmethod
    def _of(cls, r, st=None, base=0):
        q = cls()
        q._r = r  # a sperli.Request, a list of them, or True (done already)
        q._st = st
        q._base = base  # the tag space of its communicator
        return q

    def _finish(self, status, value=None):
        if status is not None:
            self._finish_peek(status)
        # A persistent request stays, inactive, until Free.
        self._r = getattr(self, "_idle", None)
        return value

    def _parts(self):
        r = self._r
        return [] if r is True or r is None or isinstance(r, _Inactive) else (r if isinstance(r, list) else [r])

    def _open(self):
        return self._r is not None and not isinstance(self._r, _Inactive)

    def Wait(self, status=None):
        """Waits for completion."""
        Request._wait(self, status)
        return True

    def wait(self, status=None):
        """Waits; the received object (lowercase irecv) or None."""
        return Request._wait(self, status)

    def _wait(self, status=None):
        if not self._open():
            if status is not None:
                status._set(ANY_SOURCE, ANY_TAG, 0)
            return None
        value = None
        for p in self._parts():
            st = _s.Status()
            value = p.wait(st)
            if self._st is None or not isinstance(self._st, tuple):
                self._st = st if st.source != ANY_SOURCE or self._st is None else self._st
        return self._finish(status, value)

    def Test(self, status=None):
        """Completes it if it can; whether it did."""
        return Request._test(self, status)[0]

    def test(self, status=None):
        """(done, object)."""
        return Request._test(self, status)

    def _test(self, status=None):
        if self._open() and not all(p.done or p.Test() for p in self._parts()):
            return (False, None)
        return (True, Request._wait(self, status))

    def Get_status(self, status=None):
        """Whether it completed, without completing it."""
        if self._r is None or self._r is True:
            if status is not None:
                self._finish_peek(status)
            return True
        done = all(p.done or p.Get_status_ready() for p in self._parts())
        if done and status is not None:
            self._finish_peek(status)
        return done

    def _finish_peek(self, status):
        st = self._st
        if st is None:
            status._set(ANY_SOURCE, ANY_TAG, 0)
        elif isinstance(st, tuple):
            status._set(*st[:3])
            status.cancelled = len(st) > 3 and st[3]
        else:
            status._from(st, self._base)

    def get_status(self, status=None):
        """As Get_status."""
        return self.Get_status(status)

    def Free(self):
        """Drops the handle (the operation runs to its end); ERR_REQUEST
        for REQUEST_NULL."""
        if self._r is None:
            raise Exception(ERR_REQUEST, "REQUEST_NULL")
        self._r = None

    def Cancel(self):
        """MPI's cancel: a receive that has not matched a message is
        cancelled (it completes, its status says so); a send or a receive
        that matched is not and completes as usual (ERR_REQUEST for
        REQUEST_NULL)."""
        if self._r is None:
            raise Exception(ERR_REQUEST, "REQUEST_NULL")
        parts = self._parts()
        if len(parts) == 1 and parts[0].Cancel():
            self._r = True
            self._st = (ANY_SOURCE, ANY_TAG, 0, True)

    cancel = Cancel

    def __reduce__(self):
        return _reduce(self, self._r is None)

    @staticmethod
    def Waitall(requests, statuses=None):
        """Waits for every request."""
        Request.waitall(requests, statuses)
        return True

    @staticmethod
    def waitall(requests, statuses=None):
        """Waits for every request; their objects."""
        out = []
        for i, r in enumerate(requests):
            st = None
            if statuses is not None:
                if i >= len(statuses) and isinstance(statuses, list):
                    statuses.append(Status())
                st = statuses[i] if i < len(statuses) else None
            out.append(Request._wait(r, st))
        return out

    @staticmethod
    def Waitany(requests, status=None):
        """The index of one completed request (UNDEFINED when none is open)."""
        return Request.waitany(requests, status)[0]

    @staticmethod
    def waitany(requests, status=None):
        """(index, object)."""
        requests = list(requests)
        while True:
            open_ = [i for i, r in enumerate(requests) if r._open()]
            if not open_:
                if status is not None:
                    status._set(ANY_SOURCE, ANY_TAG, 0)
                return (UNDEFINED, None)
            for i in open_:
                r = requests[i]
                if r._r is True or all(p.done for p in r._parts()):
                    return (i, Request._wait(r, status))
            single = [i for i in open_ if len(requests[i]._parts()) == 1]
            if len(single) == len(open_):
                j = _s.Request.Waitany([requests[i]._parts()[0] for i in single])
                if j != UNDEFINED and j is not None:
                    i = single[j]
                    return (i, Request._wait(requests[i], status))
            else:
                for i in open_:
                    done, v = Request._test(requests[i], status)
                    if done:
                        return (i, v)
                _time.sleep(0.0005)

    @staticmethod
    def Waitsome(requests, statuses=None):
        """Indices of completed requests (None when none is open)."""
        return Request.waitsome(requests, statuses)[0]

    @staticmethod
    def waitsome(requests, statuses=None):
        """(indices, objects): one request waited for, then every other
        that completed too (None, None when none is open)."""
        if not any(r._open() for r in requests):
            return (None, None)
        st = Status()
        i, v = Request.waitany(requests, st)
        idx, objs, sts = [i], [v], [st]
        for j, r in enumerate(requests):
            if j != i and r._open():
                st = Status()
                done, v = Request._test(r, st)
                if done:
                    idx.append(j)
                    objs.append(v)
                    sts.append(st)
        if statuses is not None:
            statuses[:] = sts
        return (idx, objs)

    @staticmethod
    def Testall(requests, statuses=None):
        """Whether every request completed (then all are)."""
        return Request.testall(requests, statuses)[0]

    @staticmethod
    def testall(requests, statuses=None):
        """(flag, objects or None)."""
        for r in requests:
            if r._r is not None and r._r is not True and not all(p.done or p.Test() for p in r._parts()):
                return (False, None)
        return (True, Request.waitall(requests, statuses))

    @staticmethod
    def Testany(requests, status=None):
        """(index or UNDEFINED, flag)."""
        i, flag, _ = Request.testany(requests, status)
        return (i, flag)

    @staticmethod
    def testany(requests, status=None):
        """(index, flag, object)."""
        open_ = [i for i, r in enumerate(requests) if r._open()]
        if not open_:
            if status is not None:
                status._set(ANY_SOURCE, ANY_TAG, 0)
            return (UNDEFINED, True, None)
        for i in open_:
            done, v = Request._test(requests[i], status)
            if done:
                return (i, True, v)
        return (UNDEFINED, False, None)

    @staticmethod
    def Testsome(requests, statuses=None):
        """Indices of requests completed now (None when none is open)."""
        return Request.testsome(requests, statuses)[0]

    @staticmethod
    def testsome(requests, statuses=None):
        """(indices, objects) of the requests completed now, their statuses
        in `statuses` (None, None when none is open)."""
        open_ = [i for i, r in enumerate(requests) if r._open()]
        if not open_:
            return (None, None)
        idx, objs, sts = [], [], []
        for i in open_:
            st = Status()
            done, v = Request._test(requests[i], st)
            if done:
                idx.append(i)
                objs.append(v)
                sts.append(st)
        if statuses is not None:
            statuses[:] = sts
        return (idx, objs)

    @staticmethod
    def Get_status_all(requests, statuses=None):
        """Not offered (MPI 4.1)."""
        raise NotImplementedError("MPI.Request.Get_status_all (MPI 4.1) is not offered by sperli")

    Get_status_any = Get_status_some = Get_status_all
    get_status_all = get_status_any = get_status_some = Get_status_all

    @staticmethod
    def Startall(requests):
        """Not offered (persistent requests)."""
        raise NotImplementedError("persistent requests are not offered by sperli")


Request._family = Request
REQUEST_NULL = Request()


class _Inactive:
    """The state of one persistent request before Start and between Wait
    and Start (its own object: the request's identity while inactive)."""


class Prequest(Request):
    """A persistent request: `Start` issues the Isend/Irecv it was made
    with (Send_init, Recv_init), `Wait` completes it."""

    def __new__(cls, request=None):
        if request and not isinstance(request, Prequest):
            raise TypeError(f"expected a Prequest, not {type(request).__name__}")
        self = Request.__new__(cls, request)
        self._start = getattr(request, "_start", None)
        self._idle = getattr(request, "_idle", None)
        return self

    def Start(self):
        """Issues the operation again."""
        q = self._start()
        self._r, self._st, self._base = (q._r if q._r is not None else True), q._st, q._base

    def start(self):
        """As Start."""
        self.Start()

    @staticmethod
    def Startall(requests):
        """Starts each."""
        for r in requests:
            r.Start()


def _persistent(start):
    p = Prequest()
    p._start = start
    p._idle = p._r = _Inactive()  # a persistent request is not null
    return p


class Grequest(Request):
    """Generalized requests: not offered."""

    def __new__(cls, request=None):
        if request is not None and (request or isinstance(request, Prequest)) \
                and not isinstance(request, Grequest):
            raise TypeError(f"expected a Grequest, not {type(request).__name__}")
        return Request.__new__(cls, request)

    @classmethod
    def Start(cls, *args, **kwargs):
        """Not offered."""
        raise NotImplementedError("generalized requests are not offered by sperli")


def _done(st=None, value=None):
    """A request complete at once (a send to PROC_NULL, ...)."""
    q = Request._of(True, st)
    q._value = value
    return q
