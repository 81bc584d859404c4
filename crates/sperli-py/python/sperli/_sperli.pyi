"""Type stubs of the extension module sperli._sperli (re-exported by sperli)."""

from os import PathLike
from typing import Any, Callable, Final, List, Optional, Sequence, Tuple, Union

from typing_extensions import Buffer

__version__: Final[str]

ANY_SOURCE: Final[int]
"""A receive or probe that matches every source (on COMM_WORLD only)."""
ANY_TAG: Final[int]
"""A receive that matches every tag."""
UNDEFINED: Final[int]
"""A Split color that joins no communicator (Split returns None); what
Request.Waitany returns when no request is open."""
ERRORS_RETURN: Final[str]
"""Failures of the job step are raised as JobError (the default)."""
ERRORS_ARE_FATAL: Final[str]
"""A failure of the job step ends the process (status H-code - 1600)."""
DTYPES: Final[tuple[str, ...]]
"""The seven element types of the buffer calls, numpy's names."""

class Op:
    """A reduction; which element types each takes is the table of protocol §8.3."""

    @property
    def name(self) -> str: ...
    @property
    def code(self) -> int: ...

SUM: Final[Op]
PROD: Final[Op]
MIN: Final[Op]
MAX: Final[Op]
LAND: Final[Op]
LOR: Final[Op]
LXOR: Final[Op]
BAND: Final[Op]
BOR: Final[Op]
BXOR: Final[Op]
# On value-index pair buffers (HELLO feature bit 4, protocol §17.2).
MAXLOC: Final[Op]
MINLOC: Final[Op]

class InPlace: ...

IN_PLACE: Final[InPlace]
"""As a send buffer (Allreduce, Reduce/Gather at the root, Allgather) or
the root's receive buffer of Scatter: the data is in the other buffer."""

class SperliError(Exception):
    """Every error of sperli."""

    code: Optional[int]
    """The H number (e.g. 1618), or None for a local failure."""
    hcode: Optional[str]
    """"H1618", or None."""
    job_ended: bool
    """Whether this rank's job step is over (every later call fails)."""
    peer: Optional[int]
    """The rank an H1612/H1613 names."""
    check: Optional[str]
    """The check word of a failure of protocol section 18 ("revoked": a call
    on a revoked communicator), or None."""
    replies: list[Reply]
    """TaskFailedError: every rank's reply; else empty."""

class JobError(SperliError):
    """This rank's job step is over."""

class ArgumentError(SperliError):
    """H1618: refused before anything was sent; the job goes on."""

class TaskFailedError(SperliError):
    """H1642: a mailbox task failed on some rank; the group goes on."""

class Status:
    """What a completed receive reports."""

    source: int
    tag: int
    count: int
    """The message length in bytes."""
    def __init__(self) -> None: ...
    def Get_source(self) -> int: ...
    def Get_tag(self) -> int: ...
    def Get_count(self, datatype: Any = None) -> int:
        """Elements of `datatype` (a numpy dtype), or bytes without one."""

class Request:
    """A started Isend/Irecv/isend/irecv, or a non-blocking collective
    (Ibarrier, Iallreduce, ...: its receive buffer is written when Wait or
    the Test that completes it returns)."""

    @property
    def done(self) -> bool: ...
    def Wait(self, status: Optional[Status] = None) -> None: ...
    def Test(self, status: Optional[Status] = None) -> bool: ...
    def wait(self, status: Optional[Status] = None) -> Any:
        """The object an irecv received, else None."""
    def test(self, status: Optional[Status] = None) -> tuple[bool, Any]: ...
    def Get_status_ready(self) -> bool:
        """Whether it can complete now without waiting, left open."""
    def Cancel(self) -> bool:
        """A receive that has not matched is cancelled (True); else False."""
    @staticmethod
    def Waitall(requests: Sequence[Request], statuses: Optional[Sequence[Status]] = None) -> list[Any]: ...
    @staticmethod
    def Waitany(requests: Sequence[Request], status: Optional[Status] = None) -> int:
        """The index of a request that completed (UNDEFINED: none open)."""
    @staticmethod
    def Testall(requests: Sequence[Request], statuses: Optional[Sequence[Status]] = None) -> bool:
        """True and every request completed, or False and none completed."""

_Buf = Buffer
_RecvBuf = Union[Buffer, InPlace]
_Counts = Sequence[int]
_VBuf = Union[
    Buffer,
    Sequence[Union[Buffer, _Counts, tuple[_Counts, _Counts], None, Any]],
]
"""A v-call buffer as mpi4py allows: a buffer (`size` equal blocks),
`[buf, counts]`, `[buf, counts, displs]`, `[buf, (counts, displs)]`, each
with an optional last item naming the buffer's dtype ("float64",
numpy.float64); counts and displacements in elements, one per rank."""

class Comm:
    """A communicator: this rank's view of its job. Calls on one
    communicator run one at a time; each releases the GIL while it waits."""

    @staticmethod
    def from_stdin(errors: str = ...) -> Comm:
        """Joins the job `sperli run` started this process in."""
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def comm_id(self) -> int:
        """The communicator's id (protocol §15.2): 0 for the job's, 1..=2147483647 for one made by Split or Dup, the same on every member."""
    @property
    def p2p_communicators(self) -> bool:
        """Whether messages name their communicator (HELLO feature bit 3 on every rank, protocol §16): each communicator has its own messages and tags, ANY_SOURCE works on every one, Ssend/Issend exist."""
    @property
    def incarnation(self) -> int: ...
    @property
    def sequence(self) -> int: ...
    def Get_rank(self) -> int: ...
    def Get_size(self) -> int: ...
    def Set_errhandler(self, errors: str) -> None: ...
    def Abort(self, errorcode: int = 1, message: Optional[str] = None) -> None: ...
    def Finalize(self) -> None: ...
    def Is_finalized(self) -> bool: ...
    # communicators (HELLO feature bit 2)
    def Split(self, color: int = 0, key: int = 0) -> Optional[Comm]:
        """The ranks of one color as a new communicator, ranked by key;
        None for color=UNDEFINED."""
    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool], reorder: bool = False) -> Optional[Comm]:
        """The communicator of a Cartesian grid on the first ranks, in
        their order; None beyond its places (a Split)."""
    def Cart_sub(self, dims: Sequence[int], periods: Sequence[bool], remain_dims: Sequence[bool]) -> Comm:
        """This rank's sub-grid of the grid this communicator is (a Split)."""
    def Dup(self) -> Comm:
        """A new communicator of the same ranks."""
    def Free(self) -> None:
        """Frees a communicator made by Split/Dup."""
    def Create_intercomm(self, local_leader: int, peer: Comm, remote_leader: int, tag: int = 0) -> Comm:
        """MPI's Intercomm_create (protocol §15.6): this communicator's ranks
        and the disjoint group led by remote_leader of peer."""
    def Merge(self, high: bool = False) -> Comm:
        """An intercommunicator's two groups as one communicator."""
    def Inter_dup(self) -> Comm:
        """An intercommunicator of the same groups, a new id."""
    def Inter_split(self, color: int = 0, key: int = 0) -> Optional[Comm]:
        """An intercommunicator's split: each group's ranks of one color."""
    def Inter_groups(self) -> Tuple[List[int], List[int]]:
        """An intercommunicator's local and remote job ranks."""
    def Inter_local(self) -> Comm:
        """An intercommunicator's local communicator."""
    def Inter_Barrier(self) -> None:
        """Barrier of both groups of an intercommunicator."""
    def Inter_Bcast(self, buf: Optional[_Buf], root: int) -> None:
        """Bcast across (root: -3 ROOT, -2 PROC_NULL, or a remote rank)."""
    def Inter_Gather(self, sendbuf: Optional[_Buf], recvbuf: Optional[_RecvBuf], root: int) -> None:
        """Gather of the remote group's blocks at the root."""
    def Inter_Gatherv(self, sendbuf: Optional[_Buf], recvbuf: Optional[_VBuf], root: int) -> None:
        """Gatherv of the remote group's blocks at the root."""
    def Inter_Scatter(self, sendbuf: Optional[_Buf], recvbuf: Optional[_RecvBuf], root: int) -> None:
        """Scatter of the root's blocks over the remote group."""
    def Inter_Scatterv(self, sendbuf: Optional[_VBuf], recvbuf: Optional[_RecvBuf], root: int) -> None:
        """Scatterv of the root's blocks over the remote group."""
    def Inter_Allgather(self, sendbuf: _Buf, recvbuf: _RecvBuf) -> None:
        """The remote group's blocks on every rank."""
    def Inter_Allgatherv(self, sendbuf: _Buf, recvbuf: _VBuf) -> None:
        """The remote group's blocks of any length on every rank."""
    def Inter_Alltoall(self, sendbuf: _Buf, recvbuf: _RecvBuf) -> None:
        """Block j to remote rank j, one block from each."""
    def Inter_Alltoallv(self, sendbuf: _VBuf, recvbuf: _VBuf) -> None:
        """Alltoall of blocks of any length."""
    def Inter_Reduce(self, sendbuf: Optional[_Buf], recvbuf: Optional[_RecvBuf], op: Any, root: int) -> None:
        """The remote group's reduction (its rank order) at the root."""
    def Inter_Allreduce(self, sendbuf: _Buf, recvbuf: _RecvBuf, op: Any = None) -> None:
        """The remote group's reduction on every rank."""
    def Inter_Reduce_scatter_block(self, sendbuf: _Buf, recvbuf: _RecvBuf, op: Any = None) -> None:
        """The remote group's reduction scattered in equal blocks."""
    def Inter_Reduce_scatter(self, sendbuf: _Buf, recvbuf: _RecvBuf, recvcounts: List[int], op: Any = None) -> None:
        """The remote group's reduction scattered in blocks of recvcounts."""
    def Inter_bcast(self, obj: Any, root: int) -> Any:
        """An object from the root to every remote rank (None in its group)."""
    def Inter_gather(self, obj: Any, root: int) -> Optional[List[Any]]:
        """The remote group's objects at the root."""
    def Inter_scatter(self, obj: Optional[Sequence[Any]], root: int) -> Any:
        """Item i of the root's sequence on remote rank i."""
    def Inter_allgather(self, obj: Any) -> List[Any]:
        """The remote group's objects on every rank."""
    def Inter_alltoall(self, obj: Sequence[Any]) -> List[Any]:
        """Item j to remote rank j; one object from each."""
    # point-to-point on buffers
    def Send(self, buf: _Buf, dest: int, tag: int = 0) -> None: ...
    def Recv(self, buf: _Buf, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> None: ...
    def Isend(self, buf: _Buf, dest: int, tag: int = 0) -> Request: ...
    def Ssend(self, buf: _Buf, dest: int, tag: int = 0) -> None:
        """As Send, returning once dest matched the message (HELLO feature bit 3)."""
    def Issend(self, buf: _Buf, dest: int, tag: int = 0) -> Request:
        """As Isend; the request completes once dest matched the message (HELLO feature bit 3)."""
    def _mprobe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> int:
        """A matched probe: the id of the message taken for one _imrecv."""
    def _improbe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> Optional[int]: ...
    def _imrecv(self, id: int, buf: Optional[_Buf] = None) -> Request:
        """The request receiving message `id` into buf (None: as an object)."""
    def Irecv(self, buf: _Buf, source: int = ..., tag: int = ...) -> Request: ...
    def Sendrecv(
        self,
        sendbuf: _Buf,
        dest: int,
        sendtag: int = 0,
        recvbuf: Optional[_Buf] = None,
        source: int = ...,
        recvtag: int = ...,
        status: Optional[Status] = None,
    ) -> None: ...
    def Probe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> bool:
        """Waits for a matching message and fills status; returns True."""
    def Iprobe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> bool:
        """Whether a matching message has arrived (status filled then)."""
    # collectives on buffers
    def Barrier(self) -> None: ...
    def Bcast(self, buf: _Buf, root: int = 0) -> None: ...
    def Reduce(self, sendbuf: _RecvBuf, recvbuf: Optional[_Buf] = None, op: Optional[Op] = None, root: int = 0) -> None: ...
    def Allreduce(self, sendbuf: _RecvBuf, recvbuf: _Buf, op: Optional[Op] = None) -> None: ...
    def Gather(self, sendbuf: _RecvBuf, recvbuf: Optional[_Buf] = None, root: int = 0) -> None: ...
    def Scatter(self, sendbuf: Optional[_Buf], recvbuf: _RecvBuf, root: int = 0) -> None: ...
    def Allgather(self, sendbuf: _RecvBuf, recvbuf: _Buf) -> None: ...
    def Alltoall(self, sendbuf: _Buf, recvbuf: _Buf) -> None: ...
    def Reduce_scatter_block(self, sendbuf: _Buf, recvbuf: _Buf, op: Optional[Op] = None) -> None: ...
    def Scan(self, sendbuf: _RecvBuf, recvbuf: _Buf, op: Optional[Op] = None) -> None:
        """Rank i's recvbuf: the fold of ranks 0..=i (IN_PLACE: the data is in recvbuf)."""
    def Exscan(self, sendbuf: _RecvBuf, recvbuf: _Buf, op: Optional[Op] = None) -> None:
        """Rank i's recvbuf: the fold of ranks 0..i; rank 0's is left as it is."""
    def Gatherv(self, sendbuf: _RecvBuf, recvbuf: Optional[_VBuf] = None, root: int = 0) -> None:
        """Every rank's sendbuf (any length) into block i of the root's
        recvbuf = [buf, counts(, displs)]; counts that differ from what a
        rank sent end the job (JobError H1618)."""
    def Scatterv(self, sendbuf: Optional[_VBuf], recvbuf: _RecvBuf, root: int = 0) -> None:
        """Block i of the root's sendbuf = [buf, counts(, displs)] into
        rank i's recvbuf (exactly counts[i] elements); a refused root spec
        is ArgumentError H1618 on every rank and the job goes on."""
    def Allgatherv(self, sendbuf: _RecvBuf, recvbuf: _VBuf) -> None:
        """Every rank's sendbuf (any length) into block i of every rank's
        recvbuf = [buf, counts(, displs)]."""
    def Alltoallv(self, sendbuf: _VBuf, recvbuf: _VBuf) -> None:
        """Block j of sendbuf = [buf, counts(, displs)] to rank j; block i
        of recvbuf from rank i."""
    # non-blocking collectives: the send data is copied at the call, the
    # receive buffer written at Wait
    def Ibarrier(self) -> Request: ...
    def Ibcast(self, buf: _Buf, root: int = 0) -> Request: ...
    def Ireduce(self, sendbuf: _RecvBuf, recvbuf: Optional[_Buf] = None, op: Optional[Op] = None, root: int = 0) -> Request: ...
    def Iallreduce(self, sendbuf: _RecvBuf, recvbuf: _Buf, op: Optional[Op] = None) -> Request: ...
    def Igather(self, sendbuf: _RecvBuf, recvbuf: Optional[_Buf] = None, root: int = 0) -> Request: ...
    def Iscatter(self, sendbuf: Optional[_Buf], recvbuf: _RecvBuf, root: int = 0) -> Request: ...
    def Iallgather(self, sendbuf: _RecvBuf, recvbuf: _Buf) -> Request: ...
    # ULFM (protocol section 18.8.1)
    def Revoke(self) -> None: ...
    def Is_revoked(self) -> bool: ...
    def Agree(self, flag: int) -> int: ...
    def Iagree(self, buf: _Buf, flag: int) -> Request: ...
    def Shrink(self) -> Comm: ...
    def Get_failed(self) -> list[int]: ...
    def Ack_failed(self, num_to_ack: int) -> int: ...
    # objects (pickled)
    def send(self, obj: Any, dest: int, tag: int = 0) -> None: ...
    def recv(self, buf: Any = None, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> Any: ...
    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request: ...
    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None: ...
    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request: ...
    def irecv(self, buf: Any = None, source: int = ..., tag: int = ...) -> Request: ...
    def probe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> bool:
        """Probe for an object message (status.count: its first frame's bytes)."""
    def iprobe(self, source: int = ..., tag: int = ..., status: Optional[Status] = None) -> bool: ...
    def barrier(self) -> None: ...
    def bcast(self, obj: Any = None, root: int = 0) -> Any: ...
    def gather(self, sendobj: Any, root: int = 0) -> Optional[list[Any]]: ...
    def scatter(self, sendobj: Optional[Sequence[Any]] = None, root: int = 0) -> Any: ...
    def allgather(self, sendobj: Any) -> list[Any]: ...
    def allreduce(self, sendobj: Any, op: Optional[Op] = None) -> Any:
        """An int (int64), float, bool, numpy scalar or array."""
    def reduce(self, sendobj: Any, op: Optional[Op] = None, root: int = 0) -> Any: ...
    def scan(self, sendobj: Union[bool, int, float], op: Optional[Op] = None) -> Union[bool, int, float]: ...
    def exscan(self, sendobj: Union[bool, int, float], op: Optional[Op] = None) -> Optional[Union[bool, int, float]]:
        """None at rank 0."""
    def _user_reduce(
        self,
        sendbuf: Optional[Buffer],
        recvbuf: Optional[Buffer],
        fold: Callable[[bytearray, bytes], None],
        call: str,
        root: int = 0,
    ) -> None:
        """A user-defined reduction (protocol §17.4) of buffers, `call`
        "reduce", "allreduce", "scan" or "exscan": `fold(acc, right)`
        leaves `acc op right` in `acc` (sperli.MPI's Op.Create)."""
    def _fold_objects(self, sendobj: Any, op: Callable[[Any, Any], Any], call: str, root: int = 0) -> Any:
        """Objects gathered to the root and folded with `op(x, y)` in
        ascending rank order (sperli.MPI's lowercase reductions)."""

def _reduce_local(inbuf: Buffer, inoutbuf: Buffer, op: Op) -> None:
    """`inoutbuf = inbuf op inoutbuf`, element by element (sperli.MPI's
    Op.Reduce_local)."""

# Cartesian grids (sperli-collective's cart module), for sperli.MPI's Cartcomm.
cart_coords: Callable[[Sequence[int], Sequence[bool], int], list[int]]
"""MPI_Cart_coords of a grid: (dims, periods, rank)."""
cart_rank: Callable[[Sequence[int], Sequence[bool], Sequence[int]], int]
"""MPI_Cart_rank of a grid (periodic dimensions wrap): (dims, periods, coords)."""
cart_shift: Callable[[Sequence[int], Sequence[bool], int, int, int], tuple[Optional[int], Optional[int]]]
"""MPI_Cart_shift of place rank: (dims, periods, rank, direction, disp) to
(source, dest), None past an edge."""
cart_sub_grid: Callable[[Sequence[int], Sequence[bool], Sequence[bool]], tuple[list[int], list[bool]]]
"""The extents and periods of MPI_Cart_sub's grid: (dims, periods, remain_dims)."""
dims_create: Callable[[int, Sequence[int]], list[int]]
"""MPI_Dims_create: (nnodes, dims) with the zero entries of dims filled."""

State = Any
"""bytes, numpy arrays, str, int, float, bool, None, and tuples, lists
and dicts of them."""

class Checkpointer:
    """Signed, buddy-replicated checkpoints of a Python state, with resume."""

    def __init__(self, comm: Optional[Comm] = None, dir: Optional[Union[str, PathLike[str]]] = None) -> None: ...
    def resume(self) -> Optional[State]: ...
    def checkpoint(self, state: State) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def incarnation(self) -> int: ...
    @property
    def dir(self) -> str: ...

class Reply:
    """One rank's answer to a mailbox request."""

    rank: int
    ok: bool
    data: Optional[bytes]
    error_type: Optional[str]
    error: Optional[str]

class Task:
    """What a Python mailbox handler gets."""

    payload: bytes
    rank: int
    size: int
    sequence: int
    handler: int
    opcode: str
    target: Union[str, int]
    comm: Optional[Comm]
    """The task's communicator (GROUP, PER_RANK), valid until the handler returns."""

_Target = Union[None, str, int]
_Payload = Union[None, Buffer, Sequence[Buffer]]

class Mailbox:
    """The client of a warm job's mailbox."""

    @staticmethod
    def create(name: str, world_size: int) -> Mailbox: ...
    @staticmethod
    def attach(name: str) -> Mailbox: ...
    @staticmethod
    def start_job(
        name: str,
        sperli: Union[str, PathLike[str]],
        ranks: int,
        program: Sequence[str],
        hosts: Optional[str] = None,
        launcher_args: Sequence[str] = ...,
        setup_timeout: float = 60.0,
        inherit_output: bool = True,
    ) -> Mailbox: ...
    def wait_ready(self, timeout: float = 30.0) -> None: ...
    def set_timeout(self, seconds: float) -> None: ...
    def submit(self, handler: Union[str, int], payload: _Payload = None, target: _Target = None) -> list[Reply]: ...
    def control(self, handler: Union[str, int], payload: _Payload = None, target: _Target = None) -> list[Reply]: ...
    def ping(self) -> list[Reply]: ...
    def shutdown(self) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def world_size(self) -> int: ...

_Handler = Callable[[Task], Optional[Buffer]]

class MailboxServer:
    """The rank side of a mailbox job, with Python handlers."""

    def __init__(self) -> None: ...
    def task(self, name: str, handler: Optional[_Handler] = None) -> Any: ...
    def control(self, name: str, handler: Optional[_Handler] = None) -> Any: ...
    def serve(self, comm: Optional[Comm] = None) -> None: ...
