"""Intercommunicators: ``Intercomm`` (``Intracomm.Create_intercomm``,
``Merge``, ``Dup``, ``Split``, the remote group) and its collectives across
the two groups, with mpi4py's root conventions (``ROOT`` at the root,
``PROC_NULL`` at the other ranks of its group, the root's remote rank in
the other group). Every call is the package's (the Rust ``Intercomm``,
protocol §15.6); the reductions of objects are the local group's own
``reduce`` followed by the package's gather of its result."""

from . import state as _state
from .comm import Comm, Intracomm, _Handle
from .constants import PROC_NULL, ROOT, UNDEFINED
from .errors import ERR_ARG, ERR_COMM, ERR_COUNT, ERR_ROOT, Exception
from .groups import Group
from .msgspec import _int_arg, _msg, _rmsg, _rvmsg, _view, _vmsg
from .requests import _done


def _inter_handle(c, errhandler):
    """The handle of the package's intercommunicator `c`: its local
    members, the remote group's, and the local group as an Intracomm
    (freed with it)."""
    local, remote = c.Inter_groups()
    h = _Handle(c, local)
    h.remote = tuple(remote)
    h.errhandler = errhandler
    lh = _Handle(c.Inter_local(), local)
    lh.errhandler = errhandler
    h.local = object.__new__(Intracomm)
    h.local._h = lh
    return h


class Intercomm(Comm):
    """An intercommunicator: two disjoint groups; point-to-point ranks are
    the remote group's, collectives run across the groups."""

    def __new__(cls, comm=None):
        if comm is not None and not isinstance(comm, Intercomm) and isinstance(comm, Comm) \
                and comm._h is not None:
            raise TypeError(f"expected an Intercomm, not {type(comm).__name__}")
        return Comm.__new__(cls, comm)

    @classmethod
    def _made(cls, parent, c):
        new = object.__new__(cls)
        new._h = _inter_handle(c, parent._handle().errhandler)
        return new

    def _peer_size(self):
        return len(self._handle().remote)

    def Is_inter(self):
        """True."""
        self._handle()
        return True

    is_inter = property(Is_inter)

    def Is_intra(self):
        """False."""
        self._handle()
        return False

    is_intra = property(Is_intra)

    def Get_remote_size(self):
        """The size of the remote group."""
        return self._peer_size()

    remote_size = property(Get_remote_size)

    def Get_remote_group(self):
        """The remote group."""
        return Group._of(self._handle().remote)

    remote_group = property(Get_remote_group)

    def Merge(self, high=False):
        """One intracommunicator of both groups (the group passing
        high=False first)."""
        h = self._handle()
        c = h.c.Merge(bool(high))
        return self._new(c, c.allgather(_state.world_rank()), Intracomm)

    def Dup(self, info=None):
        """A new intercommunicator of the same groups (attributes copied)."""
        new = Intercomm._made(self, self._handle().c.Inter_dup())
        try:
            self._copy_attrs(new)
        except BaseException:
            new.Free()
            raise
        return new

    Clone = Dup

    def _failed_ranks(self):
        remote = self._handle().remote
        return [remote[r] for r in self._c.Get_failed()]

    def Shrink(self):
        """A new intercommunicator of both groups' members that have not
        failed (all of them while none failed)."""
        return Intercomm._made(self, self._handle().c.Shrink())

    def Split(self, color=0, key=0):
        """The ranks of each group with one color, against the other
        group's ranks of that color; COMM_NULL for UNDEFINED or a color the
        other group lacks."""
        c = self._handle().c.Inter_split(color, key)
        return Intercomm() if c is None else Intercomm._made(self, c)

    def Split_type(self, split_type, key=0, info=None):
        """COMM_TYPE_SHARED (as every type but UNDEFINED, as
        Intracomm.Split_type): the ranks of each host (by processor name) in
        each group, against the other group's ranks of that host (a Split
        whose color is the host's place among the names of both groups,
        which two allgathers across give every rank alike); UNDEFINED:
        COMM_NULL."""
        self._handle()
        if split_type == UNDEFINED:
            return self.Split(UNDEFINED, key)
        from .environment import Get_processor_name
        me = Get_processor_name()
        remote = self.allgather(me)  # the other group's names
        local = self.allgather(remote)[0]  # ours, as the other group saw them
        hosts = sorted(set(local) | set(remote))
        return self.Split(hosts.index(me), key)

    @classmethod
    def Create_from_groups(cls, *args, **kwargs):
        """Not offered (sessions)."""
        raise NotImplementedError("Intercomm.Create_from_groups (sessions) is not offered by sperli")

    def Create(self, group):
        """Not offered on an intercommunicator."""
        self._handle()  # ERR_COMM on COMM_NULL
        raise NotImplementedError("Create on an intercommunicator is not offered by sperli")

    Create_group = Create

    # collectives across the groups

    def _iroot(self, root):
        root = _int_arg(root)
        if root == ROOT or root == PROC_NULL:
            return root
        if not isinstance(root, int) or not 0 <= root < self.Get_remote_size():
            raise Exception(ERR_ROOT, f"root {root} is not ROOT, PROC_NULL or a remote rank")
        return root

    def Barrier(self):
        """Waits for every rank of both groups."""
        self._c.Inter_Barrier()

    def Bcast(self, buf, root=0):
        """The root's buf into buf of every remote rank."""
        r = self._iroot(root)
        b = None if r == PROC_NULL else _msg(buf) if r == ROOT else _rmsg(buf)
        self._c.Inter_Bcast(b, r)

    def Gather(self, sendbuf, recvbuf, root=0):
        """The remote group's blocks into the root's recvbuf."""
        r = self._iroot(root)
        rb = _rmsg(recvbuf, self.Get_remote_size()) if r == ROOT else None
        self._c.Inter_Gather(_msg(sendbuf) if r >= 0 else None, rb, r)

    def Gatherv(self, sendbuf, recvbuf, root=0):
        """Gather of blocks of any length."""
        r = self._iroot(root)
        rb = _rvmsg(recvbuf, self.Get_remote_size()) if r == ROOT else None
        self._c.Inter_Gatherv(_msg(sendbuf) if r >= 0 else None, rb, r)

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Block i of the root's sendbuf into recvbuf of remote rank i."""
        r = self._iroot(root)
        sb = _msg(sendbuf, self.Get_remote_size()) if r == ROOT else None
        self._c.Inter_Scatter(sb, _rmsg(recvbuf) if r >= 0 else None, r)

    def Scatterv(self, sendbuf, recvbuf, root=0):
        """Scatter of blocks of any length."""
        r = self._iroot(root)
        sb = _vmsg(sendbuf, self.Get_remote_size()) if r == ROOT else None
        self._c.Inter_Scatterv(sb, _rmsg(recvbuf) if r >= 0 else None, r)

    def Allgather(self, sendbuf, recvbuf):
        """The remote group's blocks, in its rank order."""
        self._c.Inter_Allgather(_msg(sendbuf), _rmsg(recvbuf, self.Get_remote_size()))

    def Allgatherv(self, sendbuf, recvbuf):
        """Allgather of blocks of any length."""
        self._c.Inter_Allgatherv(_msg(sendbuf), _rvmsg(recvbuf, self.Get_remote_size()))

    def Alltoall(self, sendbuf, recvbuf):
        """Block j to remote rank j; one block from each remote rank."""
        n = self.Get_remote_size()
        self._c.Inter_Alltoall(_msg(sendbuf, n), _rmsg(recvbuf, n))

    def Alltoallv(self, sendbuf, recvbuf):
        """Alltoall of blocks of any length."""
        n = self.Get_remote_size()
        self._c.Inter_Alltoallv(_vmsg(sendbuf, n), _rvmsg(recvbuf, n))

    def Reduce(self, sendbuf, recvbuf, op=None, root=0):
        """The remote group's data reduced (in its rank order) at the root."""
        r = self._iroot(root)
        rb = _rmsg(recvbuf) if r == ROOT else None
        self._c.Inter_Reduce(_msg(sendbuf) if r >= 0 else None, rb, self._op(op), r)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        """The remote group's data reduced, on every rank."""
        self._c.Inter_Allreduce(_msg(sendbuf), _rmsg(recvbuf), self._op(op))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """The remote group's data reduced, scattered over this group in
        equal blocks."""
        self._c.Inter_Reduce_scatter_block(_msg(sendbuf), _rmsg(recvbuf), self._op(op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """The remote group's data reduced, scattered over this group in
        blocks of recvcounts (default: each local rank's recvbuf length)."""
        rb = _rmsg(recvbuf)
        if recvcounts is None:
            recvcounts = self._handle().local.allgather(len(_view(rb)))
        counts = [int(c) for c in recvcounts]
        if len(counts) != self.Get_size():
            raise Exception(ERR_COUNT, f"{len(counts)} recvcounts for {self.Get_size()} ranks")
        self._c.Inter_Reduce_scatter(_msg(sendbuf), rb, counts, self._op(op))

    def _intra_only(self, *args, **kwargs):
        self._handle()
        raise Exception(ERR_COMM, "an intracommunicator call on an intercommunicator")

    Scan = Exscan = Iscan = Iexscan = scan = exscan = _intra_only
    Create_intercomm = Create_cart = Create_graph = Create_dist_graph = _intra_only
    Create_dist_graph_adjacent = _intra_only

    def Ibarrier(self):
        """Barrier, complete at the call."""
        self.Barrier()
        return _done()

    def Ibcast(self, buf, root=0):
        """Bcast, complete at the call."""
        self.Bcast(buf, root)
        return _done()

    def Ireduce(self, sendbuf, recvbuf, op=None, root=0):
        """Reduce, complete at the call."""
        self.Reduce(sendbuf, recvbuf, op, root)
        return _done()

    def Iallreduce(self, sendbuf, recvbuf, op=None):
        """Allreduce, complete at the call."""
        self.Allreduce(sendbuf, recvbuf, op)
        return _done()

    def Igather(self, sendbuf, recvbuf, root=0):
        """Gather, complete at the call."""
        self.Gather(sendbuf, recvbuf, root)
        return _done()

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Scatter, complete at the call."""
        self.Scatter(sendbuf, recvbuf, root)
        return _done()

    def Iallgather(self, sendbuf, recvbuf):
        """Allgather, complete at the call."""
        self.Allgather(sendbuf, recvbuf)
        return _done()

    # collectives on objects

    def barrier(self):
        """Waits for every rank of both groups."""
        self._c.Inter_Barrier()

    def bcast(self, obj, root=0):
        """The root's object on every remote rank (None in its group)."""
        r = self._iroot(root)
        with self._lock('bcast'):
            return self._c.Inter_bcast(obj, r)

    def gather(self, sendobj, root=0):
        """The remote group's objects as a list at the root."""
        r = self._iroot(root)
        with self._lock('gather'):
            return self._c.Inter_gather(sendobj, r)

    def scatter(self, sendobj, root=0):
        """Item i of the root's sequence on remote rank i."""
        r = self._iroot(root)
        with self._lock('scatter'):
            return self._c.Inter_scatter(sendobj, r)

    def allgather(self, sendobj):
        """The remote group's objects as a list."""
        with self._lock('allgather'):
            return self._c.Inter_allgather(sendobj)

    def alltoall(self, sendobj):
        """Item j to remote rank j; a list of one object from each."""
        n = self.Get_remote_size()
        if sendobj is None or len(sendobj) != n:
            raise Exception(ERR_ARG, f"alltoall needs {n} items")
        with self._lock('alltoall'):
            return self._c.Inter_alltoall(list(sendobj))

    def reduce(self, sendobj, op=None, root=0):
        """The remote group's objects reduced (its own reduce to its rank
        0, whose result goes to the root)."""
        r = self._iroot(root)
        with self._lock('reduce'):
            if r == ROOT:
                return self._c.Inter_gather(None, r)[0]
            if r >= 0:
                local = self._handle().local
                v = local.reduce(sendobj, op, 0)
                self._c.Inter_gather(v if local.Get_rank() == 0 else None, r)
            return None

    def allreduce(self, sendobj, op=None):
        """The remote group's objects reduced, on every rank."""
        with self._lock('allreduce'):
            local = self._handle().local
            v = local.reduce(sendobj, op, 0)
            return self._c.Inter_allgather(v if local.Get_rank() == 0 else None)[0]

    def ibarrier(self):
        """A completed barrier request."""
        return self.Ibarrier()


def _create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0):
    """MPI's Intercomm_create: this communicator's ranks and the group led
    by `remote_leader` of `peer_comm` (which matters at the local leader)."""
    h = self._handle()
    n = self.Get_size()
    if not isinstance(local_leader, int) or not 0 <= local_leader < n:
        raise Exception(ERR_ARG, f"local_leader {local_leader} is not a rank of {n}")
    peer = peer_comm._handle()
    if self.Get_rank() == local_leader and not 0 <= remote_leader < len(peer.members):
        raise Exception(ERR_ARG, f"remote_leader {remote_leader} is not a rank of the peer")
    c = h.c.Create_intercomm(local_leader, peer.c, max(0, remote_leader), tag)
    return Intercomm._made(self, c)


Intracomm.Create_intercomm = _create_intercomm
