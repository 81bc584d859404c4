"""``Alltoallw``: blocks of any predefined datatype, count and byte
displacement per peer, as one ``Alltoallv`` of the blocks' bytes (so the
Rust API moves them: no second collective in Python)."""

from .buffers import _view
from .constants import BOTTOM, IN_PLACE
from .datatypes import BYTE, Datatype


def _ints(what, v, blocks):
    """mpi4py's chkarray: `blocks` integers (a sequence), else ValueError."""
    try:
        out = [int(x) for x in v]
    except TypeError:
        raise ValueError(f"message: {what} must be a sequence of {blocks} integers") from None
    if len(out) != blocks:
        raise ValueError(f"message: expecting {blocks} {what}, not {len(out)}")
    return out


def _types(v, blocks):
    """One Datatype for every peer, or a sequence of `blocks` of them."""
    if isinstance(v, Datatype):
        return [v] * blocks
    out = list(v)
    if len(out) != blocks or not all(isinstance(t, Datatype) for t in out):
        raise ValueError(f"message: expecting {blocks} datatypes")
    return out


def _wspec(msg, blocks, writable):
    """mpi4py's vector-W message: [buf, types], [buf, (counts, displs),
    types] or [buf, counts, displs, types]; displacements in bytes; counts
    and displacements both None: one element at displacement 0 for every
    peer. Returns (bytes view, counts, displs, types)."""
    if not isinstance(msg, (list, tuple)):
        raise ValueError("message: expecting 2 to 4 items")
    if len(msg) == 2:
        buf, types = msg
        counts = displs = None
    elif len(msg) == 3:
        buf, (counts, displs), types = msg
    elif len(msg) == 4:
        buf, counts, displs, types = msg
    else:
        raise ValueError("message: expecting 2 to 4 items")
    if buf is BOTTOM:
        if counts is None:
            raise ValueError("message: BOTTOM requires counts")
        if displs is None:
            raise ValueError("message: BOTTOM requires displs")
        raise NotImplementedError("BOTTOM (absolute addresses) needs derived datatypes, not offered by sperli")
    view = _view(buf)
    if view.nbytes == 0:
        view = memoryview(b"" if view.readonly else bytearray())  # cast refuses a 0 in the shape
    elif view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    if writable and view.readonly:
        raise ValueError("message: the receive buffer is read-only")
    if counts is None and displs is None:
        counts, displs = [1] * blocks, [0] * blocks
    else:
        counts, displs = _ints("counts", counts, blocks), _ints("displacements", displs, blocks)
    types = _types(types, blocks)
    sizes = [c * t.Get_size() for c, t in zip(counts, types)]
    for d, z in zip(displs, sizes):
        if d < 0 or z < 0 or d + z > view.nbytes:
            raise ValueError(f"message: a block of {z} bytes at {d} is outside a buffer of {view.nbytes}")
    return view, sizes, displs


def alltoallw(comm, sendbuf, recvbuf, blocks):
    """MPI_Alltoallw over `comm` (whose `Alltoallv` is the byte mover):
    block j of the send message goes to peer j; block i of the receive
    message comes from peer i. `blocks`: the number of peers."""
    rview, rsizes, rdispls = _wspec(recvbuf, blocks, True)
    if sendbuf is IN_PLACE or sendbuf is None:
        # in place: the send blocks are the receive blocks, from a copy
        sview, ssizes, sdispls = memoryview(bytes(rview)), rsizes, rdispls
    else:
        sview, ssizes, sdispls = _wspec(sendbuf, blocks, False)
    out = bytearray().join(sview[d:d + z] for d, z in zip(sdispls, ssizes))
    got = bytearray(sum(rsizes))
    comm.Alltoallv([out, ssizes, BYTE], [got, rsizes, BYTE])
    at = 0
    for d, z in zip(rdispls, rsizes):
        rview[d:d + z] = got[at:at + z]
        at += z
