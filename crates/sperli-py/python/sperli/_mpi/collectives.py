"""Collective calls of ``Comm`` (buffers and objects, blocking and not)."""

import pickle as _pickle
import sys as _sys
import threading as _threading

from .. import _sperli as _s
from .alltoallw import alltoallw as _alltoallw
from .constants import IN_PLACE, _TAG_MAX
from .errors import ERR_ARG, ERR_COUNT, ERR_OP, ERR_ROOT, Exception
from .msgspec import _copy_of, _crecv, _csend, _first, _int_arg, _msg, _pair, _rmsg, _rvmsg, _view, _vmsg
from . import ops as _ops
from .ops import Op, _spec_datatype, _user
from .requests import Request, _done


# A reserved tag of the alltoall of objects (the top of the tag range).
_A2A_TAG = _TAG_MAX


class _Collectives:
    """The collective calls of Comm."""

    # collectives on buffers

    def Barrier(self):
        """Waits for every rank."""
        self._c.Barrier()

    def Bcast(self, buf, root=0):
        """Broadcasts."""
        self._c.Bcast(_msg(buf), self._root(root))

    def _root(self, root):
        root = _int_arg(root)
        if not isinstance(root, int) or not 0 <= root < self.Get_size():
            raise Exception(ERR_ROOT, f"root {root} is not a rank")
        return root

    def _op(self, op):
        if op is None:
            return _s.SUM
        if isinstance(op, _s.Op):
            return op
        if not isinstance(op, Op):
            raise Exception(ERR_OP, f"{op!r} is not an op")
        return op._native()

    def Reduce(self, sendbuf, recvbuf, op=None, root=0):
        """Reduces to root."""
        root = self._root(root)
        me = self.Get_rank() == root
        sb, rb = _pair(_csend(sendbuf), _rmsg(recvbuf) if me else None, True)
        if _user(op):
            return self._user_call("reduce", sendbuf, recvbuf, sb, rb, op, root)
        self._c.Reduce(sb, rb, self._op(op), root)

    def _user_call(self, call, sendbuf, recvbuf, sb, rb, op, root=0):
        """A reduction with a user-defined op (the Rust API's fold,
        protocol §17.4): the op's function sees the spec's datatype."""
        spec, view = (recvbuf, rb) if sb is IN_PLACE else (sendbuf, sb)
        fold = op._fold(_spec_datatype(spec, view))
        self._c._user_reduce(None if sb is IN_PLACE else sb, rb, fold, call, root)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        """Reduces to every rank."""
        sb, rb = _pair(_csend(sendbuf), _rmsg(recvbuf), True)
        if _user(op):
            return self._user_call("allreduce", sendbuf, recvbuf, sb, rb, op)
        self._c.Allreduce(sb, rb, self._op(op))

    def Gather(self, sendbuf, recvbuf, root=0):
        """Gathers to root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Gather(*_pair(_csend(sendbuf), _rmsg(recvbuf, self.Get_size()) if me else None), root)

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Scatters from root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Scatter(*_pair(_msg(sendbuf, self.Get_size()) if me else None, _crecv(recvbuf)), root)

    def Allgather(self, sendbuf, recvbuf):
        """Gathers to every rank."""
        self._c.Allgather(*_pair(_csend(sendbuf), _rmsg(recvbuf, self.Get_size())))

    def Alltoall(self, sendbuf, recvbuf):
        """Every rank's block to every rank."""
        n = self.Get_size()
        if sendbuf is None or sendbuf is IN_PLACE:
            rb = _rmsg(recvbuf, n)
            sb = _copy_of(rb)  # in place: the send data is recvbuf's, copied
        else:
            sb, rb = _pair(_msg(sendbuf, n), _rmsg(recvbuf, n))
        self._c.Alltoall(sb, rb)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Reduces and scatters equal blocks (IN_PLACE: recvbuf holds every
        block and gets this rank's in its first block; sent from a copy)."""
        n = self.Get_size()
        if sendbuf is None or sendbuf is IN_PLACE:
            full = _rmsg(recvbuf)
            sb = _copy_of(full)
            rb = _first(full, len(_view(full)) // n if n else 0)
        else:
            sb, rb = _pair(_msg(sendbuf, n), _rmsg(recvbuf))
        if _user(op):
            # The whole fold on every rank, this rank's block copied out.
            full = _copy_of(sb)
            self._user_call("allreduce", sendbuf, full, sb, full, op)
            k = len(_view(rb))
            if k:
                me = self.Get_rank()
                _view(rb)[:k] = _view(full)[me * k:(me + 1) * k]
            return
        self._c.Reduce_scatter_block(sb, rb, self._op(op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Reduces and scatters blocks of `recvcounts` (default: each rank's
        recvbuf length): the package's Allreduce into a buffer of every
        block, this rank's block copied out."""
        n, me = self.Get_size(), self.Get_rank()
        rb = _rmsg(recvbuf)
        if recvcounts is None:
            if sendbuf is None or sendbuf is IN_PLACE:
                raise Exception(ERR_COUNT, "IN_PLACE Reduce_scatter needs recvcounts")
            recvcounts = self.allgather(len(_view(rb)))
        counts = [int(c) for c in recvcounts]
        if len(counts) != n:
            raise Exception(ERR_COUNT, f"{len(counts)} recvcounts for {n} ranks")
        start, total = sum(counts[:me]), sum(counts)
        if sendbuf is None or sendbuf is IN_PLACE:
            if len(_view(rb)) < total:
                raise ValueError(f"message: IN_PLACE recvbuf of {len(_view(rb))} for recvcounts of {total}")
            sb = _copy_of(_first(rb, total))  # recvbuf holds every block; the rest stays
        else:
            sb = _pair(_msg(sendbuf), rb)[0]
            if len(_view(sb)) != total:
                raise ValueError(f"message: sendbuf of {len(_view(sb))} for recvcounts of {total}")
            if len(_view(rb)) < counts[me]:
                raise ValueError(f"message: recvbuf of {len(_view(rb))} for a block of {counts[me]}")
        full = _copy_of(sb)
        if _user(op):
            self._user_call("allreduce", sendbuf, full, sb, full, op)
        else:
            self._c.Allreduce(sb, full, self._op(op))
        if counts[me]:
            _view(rb)[:counts[me]] = _view(full)[start:start + counts[me]]

    def Scan(self, sendbuf, recvbuf, op=None):
        """Inclusive prefix reduction."""
        sb, rb = _pair(_csend(sendbuf), _rmsg(recvbuf), True)
        if _user(op):
            return self._user_call("scan", sendbuf, recvbuf, sb, rb, op)
        self._c.Scan(sb, rb, self._op(op))

    def Exscan(self, sendbuf, recvbuf, op=None):
        """Exclusive prefix reduction."""
        sb, rb = _pair(_csend(sendbuf), _rmsg(recvbuf), True)
        if _user(op):
            return self._user_call("exscan", sendbuf, recvbuf, sb, rb, op)
        self._c.Exscan(sb, rb, self._op(op))

    def Gatherv(self, sendbuf, recvbuf, root=0):
        """Gathers blocks of any length to root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Gatherv(_csend(sendbuf), _rvmsg(recvbuf, self.Get_size()) if me else None, root)

    def Scatterv(self, sendbuf, recvbuf, root=0):
        """Scatters blocks of any length from root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Scatterv(_vmsg(sendbuf, self.Get_size()) if me else None, _crecv(recvbuf), root)

    def Allgatherv(self, sendbuf, recvbuf):
        """Gathers blocks of any length to every rank."""
        self._c.Allgatherv(_csend(sendbuf), _rvmsg(recvbuf, self.Get_size()))

    def Alltoallv(self, sendbuf, recvbuf):
        """Blocks of any length from every rank to every rank."""
        rb = _rvmsg(recvbuf, self.Get_size())
        if sendbuf is None or sendbuf is IN_PLACE:
            # in place: the send data is recvbuf's blocks, from a copy
            sb = [_copy_of(rb[0])] + rb[1:] if isinstance(rb, list) else _copy_of(rb)
        else:
            sb = _vmsg(sendbuf, self.Get_size())
        self._c.Alltoallv(sb, rb)

    def Alltoallw(self, sendbuf, recvbuf):
        """Blocks of any predefined datatype, count and byte displacement
        per peer (moved as one Alltoallv of their bytes)."""
        peers = self.Get_remote_size() if self.Is_inter() else self.Get_size()
        _alltoallw(self, sendbuf, recvbuf, peers)

    def Ialltoallw(self, sendbuf, recvbuf):
        """Alltoallw, complete at the call."""
        self.Alltoallw(sendbuf, recvbuf)
        return _done()

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Reduce_scatter, complete at the call."""
        self.Reduce_scatter(sendbuf, recvbuf, recvcounts, op)
        return _done()

    # The non-blocking forms the Rust API lacks run the blocking call at
    # once and return a completed request (collectives are issued in the
    # same order on every rank, so they match as the blocking calls do).

    def Ialltoall(self, sendbuf, recvbuf):
        """Alltoall, complete at the call."""
        self.Alltoall(sendbuf, recvbuf)
        return _done()

    def Ialltoallv(self, sendbuf, recvbuf):
        """Alltoallv, complete at the call."""
        self.Alltoallv(sendbuf, recvbuf)
        return _done()

    def Igatherv(self, sendbuf, recvbuf, root=0):
        """Gatherv, complete at the call."""
        self.Gatherv(sendbuf, recvbuf, root)
        return _done()

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        """Scatterv, complete at the call."""
        self.Scatterv(sendbuf, recvbuf, root)
        return _done()

    def Iallgatherv(self, sendbuf, recvbuf):
        """Allgatherv, complete at the call."""
        self.Allgatherv(sendbuf, recvbuf)
        return _done()

    def Iscan(self, sendbuf, recvbuf, op=None):
        """Scan, complete at the call."""
        self.Scan(sendbuf, recvbuf, op)
        return _done()

    def Iexscan(self, sendbuf, recvbuf, op=None):
        """Exscan, complete at the call."""
        self.Exscan(sendbuf, recvbuf, op)
        return _done()

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Reduce_scatter_block, complete at the call."""
        self.Reduce_scatter_block(sendbuf, recvbuf, op)
        return _done()

    # non-blocking collectives

    def Ibarrier(self):
        """A barrier request."""
        return Request._of(self._c.Ibarrier())

    def Ibcast(self, buf, root=0):
        """A broadcast request."""
        return Request._of(self._c.Ibcast(_msg(buf), self._root(root)))

    def Ireduce(self, sendbuf, recvbuf, op=None, root=0):
        """A reduce request."""
        root = self._root(root)
        if _user(op):
            self.Reduce(sendbuf, recvbuf, op, root)  # complete at once
            return _done()
        me = self.Get_rank() == root
        return Request._of(self._c.Ireduce(_csend(sendbuf), _rmsg(recvbuf) if me else None,
                                           self._op(op), root))

    def Iallreduce(self, sendbuf, recvbuf, op=None):
        """An allreduce request."""
        if _user(op):
            self.Allreduce(sendbuf, recvbuf, op)  # complete at once
            return _done()
        return Request._of(self._c.Iallreduce(_csend(sendbuf), _rmsg(recvbuf), self._op(op)))

    def Igather(self, sendbuf, recvbuf, root=0):
        """A gather request."""
        root = self._root(root)
        me = self.Get_rank() == root
        return Request._of(self._c.Igather(_csend(sendbuf),
                                           _rmsg(recvbuf, self.Get_size()) if me else None, root))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """A scatter request."""
        root = self._root(root)
        me = self.Get_rank() == root
        return Request._of(self._c.Iscatter(_msg(sendbuf, self.Get_size()) if me else None,
                                            _crecv(recvbuf), root))

    def Iallgather(self, sendbuf, recvbuf):
        """An allgather request."""
        return Request._of(self._c.Iallgather(_csend(sendbuf), _rmsg(recvbuf, self.Get_size())))

    # collectives on objects

    def _lock(self, name):
        """The lock of a lowercase collective on this communicator (mpi4py's
        comm lock table: one such call at a time per name and
        communicator, whatever the threads)."""
        table = self._handle().locks
        lock = table.get(name)
        if lock is None:
            lock = table.setdefault(name, _threading.Lock())
        return lock

    def barrier(self):
        """Waits for every rank."""
        self._c.barrier()

    def bcast(self, obj, root=0):
        """Broadcasts an object."""
        with self._lock('bcast'):
            return self._c.bcast(obj, self._root(root))

    def gather(self, sendobj, root=0):
        """Gathers objects to root."""
        with self._lock('gather'):
            return self._c.gather(sendobj, self._root(root))

    def scatter(self, sendobj, root=0):
        """Scatters objects from root."""
        with self._lock('scatter'):
            return self._c.scatter(sendobj, self._root(root))

    def allgather(self, sendobj):
        """Gathers objects to every rank."""
        with self._lock('allgather'):
            return self._c.allgather(sendobj)

    def alltoall(self, sendobj):
        """Object i to rank i (pairs of sends and receives)."""
        with self._lock("alltoall"):
            return self._alltoall(sendobj)

    def _alltoall(self, sendobj):
        n, me = self.Get_size(), self.Get_rank()
        if sendobj is None or len(sendobj) != n:
            raise Exception(ERR_ARG, f"alltoall needs {n} items")
        wire = self._tag_arg(_A2A_TAG)
        reqs = [self._c.irecv(None, i, wire) for i in range(n) if i != me]
        for i in range(n):
            if i != me:
                self._c.send(sendobj[i], i, wire)
        out, k = [], 0
        for i in range(n):
            if i == me:
                out.append(_pickle.loads(_pickle.dumps(sendobj[i])))
            else:
                out.append(reqs[k].wait())
                k += 1
        return out

    def _object_op(self, what, sendobj, op):
        """The Op to fold `sendobj` with as a Python object (mpi4py's
        op(x, y) at the root), or None where the Rust API reduces it: a
        predefined op of the ten of protocol §8.3 on a bool, int or float
        (and for reduce and allreduce a numpy scalar or array)."""
        if op is None:
            op = _ops.SUM
        elif isinstance(op, _s.Op):
            op = getattr(_ops, op.name)
        if not isinstance(op, Op):
            raise Exception(ERR_OP, f"{op!r} is not an op")
        if op._user is not None or op._o is None or op._name in ("MAXLOC", "MINLOC"):
            return op
        if type(sendobj) in (bool, int, float):
            return None
        np = _sys.modules.get("numpy")
        numpy_value = np is not None and isinstance(sendobj, (np.generic, np.ndarray))
        if numpy_value and what in ("reduce", "allreduce"):
            return None
        return op

    def _reduce_obj(self, what, sendobj, op, root=0):
        with self._lock(what):
            obj_op = self._object_op(what, sendobj, op)
            if obj_op is not None:
                return self._c._fold_objects(sendobj, obj_op, what, root)
            if what in ("allreduce", "scan", "exscan"):
                return getattr(self._c, what)(sendobj, self._op(op))
            return self._c.reduce(sendobj, self._op(op), root)

    def allreduce(self, sendobj, op=None):
        """Reduces to every rank: numbers and numpy values with the Rust
        API's reductions, any other object (and MAXLOC, MINLOC, REPLACE,
        NO_OP, user ops) folded by op(x, y) in ascending rank order."""
        return self._reduce_obj('allreduce', sendobj, op)

    def reduce(self, sendobj, op=None, root=0):
        """Reduces to root (as allreduce folds)."""
        return self._reduce_obj('reduce', sendobj, op, self._root(root))

    def scan(self, sendobj, op=None):
        """Inclusive prefix reduction (as allreduce folds)."""
        return self._reduce_obj('scan', sendobj, op)

    def exscan(self, sendobj, op=None):
        """Exclusive prefix reduction (None on rank 0)."""
        return self._reduce_obj('exscan', sendobj, op)

    def ibarrier(self):
        """A barrier request."""
        return self.Ibarrier()
