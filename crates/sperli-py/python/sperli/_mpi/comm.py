"""Communicators: the handle shared by Comm objects, the Comm class
(its point-to-point and collective calls come from mixins), Intracomm,
the classes not offered, and the predefined communicators."""

from .. import _sperli as _s
from . import state as _state
from .attributes import ERRORS_RETURN, Errhandler, _AttrMixin, _predefined_attr
from .collectives import _Collectives
from .constants import CONGRUENT, IDENT, SIMILAR, UNDEFINED, UNEQUAL, _TAG_BITS
from .errors import ERR_ARG, ERR_COMM, Exception, SUCCESS
from .groups import Group
from .handles import _Handled, _reduce
from .info import Info
from .p2p import _PointToPoint
from .requests import _done
from . import topo as _topo


class _Handle:
    """One communicator: the package's Comm, its members (job ranks), its
    attributes, errhandler and name. Python Comm objects share it."""

    def __init__(self, c, members, name=""):
        self.c = c
        self.members = tuple(members)
        self.attrs = {}
        self.errhandler = ERRORS_RETURN
        self.name = name
        self.freed = False
        self.topo = None
        self.locks = {}  # lowercase collective name: its lock (MPI._comm_lock_table)
        self.attached = [None]  # Attach_buffer's buffer (BUFFER_AUTOMATIC: None)
        # With HELLO feature bit 3 a message names its communicator
        # (protocol §16): every communicator has the tags 0..=TAG_UB of its
        # own. Without it the tag spaces of constants.py keep them apart.
        self.p2p = bool(getattr(c, "p2p_communicators", False))
        self.base = 0 if self.p2p else (getattr(c, "comm_id", 0) % 2048) << _TAG_BITS


class Comm(_Handled, _AttrMixin, _PointToPoint, _Collectives):
    """A communicator. `Comm(comm)` is a new object for the same one."""

    def __new__(cls, comm=None):
        if comm is not None and not isinstance(comm, Comm):
            raise TypeError(f"expected a Comm, not {type(comm).__name__}")
        self = object.__new__(cls)
        self._h = None if comm is None else comm._h
        return self

    def _key(self):
        return self._h  # compared by identity (a _Handle has no __eq__)

    def _null(self):
        self._h = None

    def __repr__(self):
        return f"<{type(self).__name__} {self._h.name if self._h else 'COMM_NULL'}>"

    def _attrs(self):
        return self._handle().attrs

    def _predefined(self, keyval):
        self._handle()
        return _predefined_attr(keyval)

    def _handle(self):
        if self._h is None:
            raise Exception(ERR_COMM, "COMM_NULL")
        if self._h.freed:
            raise Exception(ERR_COMM, "the communicator was freed")
        return self._h

    @property
    def _c(self):
        return self._handle().c

    # size, rank, group

    def Get_size(self):
        """Number of ranks."""
        return len(self._handle().members)

    size = property(Get_size)

    def Get_rank(self):
        """This rank."""
        return self._handle().members.index(_state.world_rank())

    rank = property(Get_rank)

    def Get_group(self):
        """Its group."""
        return Group._of(self._handle().members)

    group = property(Get_group)

    @classmethod
    def fromhandle(cls, handle):
        """A new object for the handle `handle`; asked of Comm (`f2py`), an
        Intercomm for an intercommunicator's, and asked of Comm or
        Intracomm a Cartcomm for a Cartesian communicator's, as mpi4py's."""
        from .handles import _HANDLES
        from .intercomm import Intercomm
        if cls is Comm and isinstance(_HANDLES.get(handle), Intercomm):
            cls = Intercomm
        obj = super(Comm, cls).fromhandle.__func__(cls, handle)
        if cls in (Comm, Intracomm) and obj._h is not None and obj._h.topo is not None:
            return Cartcomm(obj)
        return obj

    def _peer_size(self):
        """The number of ranks point-to-point calls name (an
        intercommunicator's: the remote group's)."""
        return self.Get_size()

    def Is_inter(self):
        """False (Intercomm says True)."""
        self._handle()
        return False

    is_inter = property(Is_inter)

    def Is_intra(self):
        """True (Intercomm says False)."""
        self._handle()
        return True

    is_intra = property(Is_intra)

    def Get_topology(self):
        """UNDEFINED (no topologies)."""
        self._handle()
        return UNDEFINED

    topology = property(Get_topology)
    is_topo = property(lambda self: False)

    def Get_name(self):
        """Its name."""
        if self._h is None:
            return "MPI_COMM_NULL"
        return self._handle().name

    def Set_name(self, name):
        """Names it."""
        self._handle().name = str(name)

    name = property(Get_name, Set_name)

    def Compare(comm1, comm2):
        """IDENT, CONGRUENT, SIMILAR or UNEQUAL."""
        comm1._handle(), comm2._handle()
        if comm1 == comm2:
            return IDENT
        a, b = comm1._handle().members, comm2._handle().members
        if a == b:
            return CONGRUENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    def Get_errhandler(self):
        """Its error handler."""
        return Errhandler(self._handle().errhandler)

    def Set_errhandler(self, errhandler):
        """ERRORS_RETURN (exceptions) or ERRORS_ARE_FATAL/ERRORS_ABORT (the
        package's fatal mode: the job ends on a failure)."""
        h = self._handle()
        if not isinstance(errhandler, Errhandler) or errhandler._e is None:
            raise Exception(ERR_ARG, "not an errhandler")
        h.errhandler = Errhandler(errhandler)
        if h.c is not None and hasattr(h.c, "Set_errhandler"):
            h.c.Set_errhandler(_s.ERRORS_RETURN if errhandler._e == "return" else _s.ERRORS_ARE_FATAL)

    def Call_errhandler(self, errorcode):
        """Calls the error handler with `errorcode`: ERRORS_RETURN returns
        (as MPI's); ERRORS_ARE_FATAL and ERRORS_ABORT end the job."""
        h = self._handle()
        if errorcode != SUCCESS and h.errhandler._e != "return":
            h.c.Abort(errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        """Not offered: an errhandler is ERRORS_RETURN or ERRORS_ARE_FATAL."""
        raise NotImplementedError("user errhandlers are not offered by sperli")

    def Get_info(self):
        """An empty Info."""
        self._handle()
        return Info.Create()

    def Set_info(self, info):
        """Accepted and ignored (no hints)."""
        self._handle()

    info = property(Get_info, Set_info)

    # communicators

    def _new(self, c, members, cls=None):
        h = _Handle(c, members)
        new = object.__new__(cls or type(self))
        new._h = h
        h.errhandler = Errhandler(self._handle().errhandler)
        return new

    def Dup(self, info=None):
        """A new communicator of the same ranks (attributes copied)."""
        h = self._handle()
        new = self._new(h.c.Dup(), h.members)
        new._h.topo = h.topo
        try:
            self._copy_attrs(new)
        except BaseException:
            new.Free()  # a copy_fn failed: no new communicator
            raise
        return new

    def Dup_with_info(self, info):
        """As Dup."""
        return self.Dup()

    Clone = Dup

    def Idup_with_info(self, info):
        """As Idup."""
        return self.Idup()

    @classmethod
    def Create_from_group(cls, group, stringtag="", info=None, errhandler=None):
        """Not offered (sessions)."""
        raise NotImplementedError("Comm.Create_from_group (sessions) is not offered by sperli")

    def __reduce__(self):
        return _reduce(self, self._h is None)

    def Idup(self, info=None):
        """Dup, complete at once: (comm, request)."""
        return (self.Dup(), _done())

    def Split(self, color=0, key=0):
        """The package's Split; COMM_NULL for color UNDEFINED."""
        h = self._handle()
        c = h.c.Split(color, key)
        if c is None:
            return Intracomm()
        members = c.allgather(_state.world_rank())
        return self._new(c, members)

    def Split_type(self, split_type, key=0, info=None):
        """COMM_TYPE_SHARED: the ranks of this host (by processor name)."""
        from .environment import Get_processor_name
        names = self.allgather(Get_processor_name())
        if split_type == UNDEFINED:
            return self.Split(UNDEFINED, key)
        return self.Split(names.index(Get_processor_name()), key)

    def Create(self, group):
        """The members of `group` (a Split over this communicator)."""
        g = group._ranks()
        me = _state.world_rank()
        return self.Split(0 if me in g else UNDEFINED, g.index(me) if me in g else 0)

    def Create_group(self, group, tag=0):
        """A Split when `group` holds every rank of this communicator (then
        every rank makes the call); a call over a part of them alone is not
        offered (NotImplementedError)."""
        h = self._handle()
        g = group._ranks()
        if sorted(g) != sorted(h.members):
            raise NotImplementedError(
                "Comm.Create_group of a part of the communicator is not offered by sperli (use Create)")
        return self.Split(0, g.index(_state.world_rank()))

    def Free(self):
        """Frees it."""
        h = self._handle()
        if self is COMM_WORLD or h is _state.world_h or h is _state.self_h:
            raise Exception(ERR_COMM, "a predefined communicator cannot be freed")
        self._delete_attrs()
        if hasattr(h.c, "Free"):
            h.c.Free()
        h.freed = True
        self._h = None

    def Disconnect(self):
        """As Free."""
        self.Free()

    # ULFM (MPI 5's fault tolerance; protocol §18.8.1)

    def Revoke(self):
        """Revokes the communicator: from now on its calls on this rank
        raise ERR_REVOKED, except Agree, Iagree, Shrink, Ishrink,
        Get_failed, Ack_failed and Free."""
        self._c.Revoke()

    def Is_revoked(self):
        """Whether the communicator is revoked."""
        return self._c.Is_revoked()

    def _check_revoked(self):
        """ERR_REVOKED for a call that completes without reaching the
        package (a send to or receive from PROC_NULL)."""
        self._c._check_revoked()

    def _failed_ranks(self):
        """The job ranks of the failed members Get_failed reports."""
        members = self._handle().members
        return [members[r] for r in self._c.Get_failed()]

    def Get_failed(self):
        """The group of the members that failed (GROUP_EMPTY's ranks while
        none did)."""
        return Group._of(self._failed_ranks())

    def Ack_failed(self, num_to_ack=None):
        """Acknowledges the first `num_to_ack` failed members (all of them
        when None); the number acknowledged."""
        if num_to_ack is None:
            num_to_ack = self.Get_size()
        return self._c.Ack_failed(max(0, int(num_to_ack)))

    def Agree(self, flag):
        """The bitwise AND of every member's `flag` (a C int)."""
        return self._c.Agree(int(flag))

    def Iagree(self, flag):
        """Starts Agree of `flag`, a buffer of one C int that gets the
        result when the request completes (not before every member called
        Iagree)."""
        import struct
        try:
            view = memoryview(flag)
        except TypeError:
            raise TypeError(f"Iagree takes a buffer of one C int, not {type(flag).__name__}") from None
        size = struct.calcsize("i")
        if view.nbytes != size or not view.c_contiguous:
            raise ValueError(f"Iagree takes a buffer of one C int ({size} bytes), not {view.nbytes} bytes")
        ints = view.cast("B").cast("i")
        from .requests import Request
        return Request._of(self._c.Iagree(ints, ints[0]))

    def Shrink(self):
        """A new communicator of the members that have not failed, in
        their order (all of them while none failed)."""
        h = self._handle()
        c = h.c.Shrink()
        gone = set(self._failed_ranks())
        return self._new(c, [m for m in h.members if m not in gone])

    def Ishrink(self):
        """Shrink, complete at the call: (comm, request)."""
        return (self.Shrink(), _done())

    def Attach_buffer(self, buf):
        """Keeps `buf` until Detach_buffer (buffered sends are sends: the
        memory is not used)."""
        from .environment import _attach
        _attach(self._handle().attached, buf)

    def Detach_buffer(self):
        """The buffer attached (an MPI.buffer; BUFFER_AUTOMATIC if none)."""
        from .environment import _detach
        return _detach(self._handle().attached)

    def Flush_buffer(self):
        """Nothing to flush."""
        self._handle()

    def Iflush_buffer(self):
        """Flush_buffer, complete at the call."""
        self._handle()
        return _done()

    def Abort(self, errorcode=0):
        """Ends the job."""
        self._c.Abort(errorcode)

    def Create_intercomm(self, *args, **kwargs):
        """Not offered here: Intracomm.Create_intercomm makes one."""
        raise NotImplementedError("spawned jobs and ports are not offered by sperli")

    def Create_cart(self, dims, periods=None, reorder=False):
        """A Cartesian grid on the first ranks (collective; topo.py);
        COMM_NULL beyond its places."""
        return _topo._create_cart(self, dims, periods, reorder)

    def Cart_map(self, dims, periods=None):
        """This rank's place in such a grid (UNDEFINED beyond it)."""
        return _topo._cart_map(self, dims, periods)

    def Create_graph(self, *args, **kwargs):
        """Not offered: graph topologies."""
        raise NotImplementedError("graph topologies are not offered by sperli")

    Create_dist_graph = Create_dist_graph_adjacent = Graph_map = Create_graph
    Spawn = Spawn_multiple = Accept = Connect = Create_intercomm

    @classmethod
    def Get_parent(cls):
        """COMM_NULL (no spawned jobs)."""
        from .intercomm import Intercomm
        return Intercomm()


Comm._family = Comm


class Intracomm(Comm):
    """An intracommunicator."""

    def __new__(cls, comm=None):
        from .intercomm import Intercomm
        if isinstance(comm, Intercomm) and comm._h is not None:
            raise TypeError("expected an Intracomm, not Intercomm")
        return Comm.__new__(cls, comm)


class Topocomm(Intracomm):
    """A communicator with a topology: `Topocomm(comm)` of a Cartcomm is a
    new object for it; of another, TypeError (as mpi4py)."""

    _kind = None

    def __new__(cls, comm=None):
        if comm is not None and isinstance(comm, Comm) and comm._h is not None:
            topo = comm._handle().topo
            if cls._kind is None or topo is None or topo[0] != cls._kind:
                raise TypeError(f"expecting a {cls.__name__} communicator")
        return super().__new__(cls, comm)


class Cartcomm(_topo._Cart, Topocomm):
    """A Cartesian topology (topo.py)."""

    _kind = "cart"


class Graphcomm(Topocomm):
    """Graph topologies: not offered."""


class Distgraphcomm(Topocomm):
    """Distributed graph topologies: not offered."""


def _comm_lock_table(comm):
    """mpi4py's MPI._comm_lock_table: the locks of a communicator's
    lowercase collectives, by name."""
    return comm._handle().locks


COMM_NULL = Intracomm()
COMM_WORLD = Intracomm()  # its handle: environment._start
COMM_SELF = Intracomm()
COMM_TYPE_SHARED = 1
COMM_TYPE_HW_GUIDED = COMM_TYPE_HW_UNGUIDED = COMM_TYPE_RESOURCE_GUIDED = UNDEFINED
