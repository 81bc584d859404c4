"""Message specs as mpi4py parses them, read into views of the buffers
where they are (nothing is copied but where an in-place call needs a
send buffer)."""

import array as _array
import operator as _operator
import sys as _sys

from .buffers import _address, _raw_view, _view, buffer
from .constants import IN_PLACE
from .datatypes import Datatype, _BY_CHAR
from .errors import ERR_TYPE, Exception


def _native(fmt):
    if len(fmt) == 2 and fmt[0] in "@=<" and (fmt[0] == "@" or _sys.byteorder == "little"):
        return fmt[1]
    return fmt or "B"


def _empty(char):
    """An aligned empty buffer of `char` (a zero-length buffer is never
    refused as "not aligned")."""
    try:
        import numpy
        return numpy.empty(0, dtype=char)
    except (ImportError, TypeError):
        return _array.array(char if char in "bBhHiIlLqQfd" else "B")


def _index(x, what):
    """An integer argument as mpi4py takes it (an int, a numpy integer or
    0-d integer array; TypeError for a float)."""
    try:
        return _operator.index(x)
    except TypeError:
        raise TypeError(f"message: {what} must be an integer, not {type(x).__name__}") from None


def _int_arg(x):
    """A rank, root or tag as mpi4py's `int` parameters take it: an int,
    or an integer of another type (a numpy integer, anything with
    `__index__`) as its int; anything else unchanged, for the caller's
    check to refuse."""
    if type(x) is int:
        return x
    try:
        return _operator.index(x)
    except TypeError:
        return x


def _datatype(x):
    """The Datatype of a spec's type item: a Datatype or a type character
    (KeyError for an unknown one, as mpi4py's typecode lookup)."""
    if isinstance(x, Datatype):
        return x
    t = _BY_CHAR.get(str(x))
    if t is None:
        raise KeyError(f"message: unknown datatype code {x!r}")
    return t


def _typed(obj, datatype=None, count=None, displ=0, writable=False, blocks=1):
    """The buffer of a spec: `count` elements of `datatype` from element
    `displ` of `obj` (None: all of it; the buffer's own element type), as
    mpi4py checks a spec (ValueError for a count or displacement out of
    the buffer, BufferError for a read-only receive buffer)."""
    if count is not None and count < 0:
        raise ValueError(f"message: negative count {count}")
    if displ < 0:
        raise ValueError(f"message: negative displacement {displ}")
    if obj is None:
        if count:
            raise ValueError(f"message: buffer is None but count is {count}")
        obj = b""  # mpi4py: a None buffer is an empty message
        writable = False
    mv = _view(obj)
    if writable and mv.readonly:
        raise BufferError("message: a receive buffer must be writable (this one is read-only)")
    if not mv.c_contiguous:
        if not mv.contiguous:
            raise BufferError("message: the buffer is not contiguous")
        # Fortran order: its bytes in memory order, where they are
        mv = _raw_view(_address(mv), mv.nbytes, mv.readonly, _native(mv.format), mv)
    if datatype is not None:
        datatype = _datatype(datatype)
    if datatype is None:
        fmt = mv.format
        order = fmt[:1] if fmt[:1] in ("<", ">", "!") else None
        if order and order != ("<" if _sys.byteorder == "little" else ">") and mv.itemsize > 1:
            raise BufferError(f"message: format {fmt!r} is not in the machine's byte order")
        char = _native(fmt)
        size = mv.itemsize
        wire = char
    elif datatype._d is None:
        if mv.nbytes or count or displ:
            raise ValueError("message: the datatype is DATATYPE_NULL")
        return _empty("B")
    else:
        _name, char, size, wire = datatype._spec()
        if wire is None:
            raise Exception(ERR_TYPE, f"{_name} is not one of the element types of sperli")
    nbytes = mv.nbytes
    if count is None and displ == 0 and datatype is None:
        if nbytes == 0:
            return _empty(wire)
        return mv
    start = displ * size
    if count is None:
        if (nbytes - start) % size or start > nbytes:
            raise ValueError(f"message: buffer length {nbytes} is not a multiple of the datatype's extent {size}"
                             if start <= nbytes else f"message: displacement {displ} out of the buffer")
        stop = nbytes
        if ((nbytes - start) // size) % blocks:
            raise ValueError(f"message: {(nbytes - start) // size} elements are not {blocks} equal blocks")
    else:
        stop = start + count * size
    if stop > nbytes:
        raise ValueError(f"message: the spec needs bytes {start}..{stop} of a buffer of {nbytes}")
    if stop == start:
        return _empty(wire)
    flat = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    part = flat[start:stop]
    if wire.startswith("T{"):
        return _pairs(part, wire)
    return part.cast(wire) if wire != "B" else part


def _pairs(part, wire):
    """The bytes `part` as packed value-index pairs of struct format
    `wire` (MINLOC and MAXLOC, protocol §17.2): a numpy structured view of
    the same memory (memoryview cannot cast to a struct format)."""
    import numpy
    return numpy.frombuffer(part, dtype=numpy.dtype([("v", "<" + wire[3]), ("i", "<i4")]))


def _dtype_item(x):
    return isinstance(x, Datatype) or isinstance(x, str)


def _msg(spec, blocks=1, writable=False):
    """A buffer spec of a point-to-point or block call, as mpi4py parses
    it: bare, [buf, dtype], [buf, count], [buf, (count, displ)],
    [buf, count, dtype], [buf, (count, displ), dtype], [buf, count, displ,
    dtype]; `blocks` multiplies `count` (the per-rank count of a Gather
    receive or a Scatter send); `writable`: a receive buffer."""
    if spec is IN_PLACE:
        return spec
    if not isinstance(spec, (list, tuple)):
        if spec is None:
            return _typed(None)
        return _typed(spec, writable=writable)
    items = list(spec)
    buf, datatype, count, displ = items[0] if items else None, None, None, None
    if len(items) == 1:
        pass
    elif len(items) == 2:
        x = items[1]
        if x is None or _dtype_item(x):
            datatype = x
        else:
            count = x
    elif len(items) == 3:
        count, datatype = items[1], items[2]
    elif len(items) == 4:
        count, displ, datatype = items[1], items[2], items[3]
    else:
        raise ValueError(f"message: expecting 1 to 4 items, not {len(items)}")
    if len(items) in (2, 3) and isinstance(count, (list, tuple)):
        if len(count) != 2:
            raise ValueError(f"message: a (count, displ) of {len(count)} items")
        count, displ = count
    count = None if count is None else _index(count, "count") * blocks
    displ = 0 if displ is None else _index(displ, "displacement") * blocks
    return _typed(buf, datatype, count, displ, writable, blocks)


def _plain(obj, writable=False):
    """The view `_msg(obj)` (`_rmsg` when `writable`) gives a bare
    buffer, cheaply, when the checks of `_typed` would pass it unchanged:
    a C-contiguous, non-empty buffer in native byte order (and writable
    for a receive); None when the full parse must decide (a spec, a
    `buffer`, an empty, strided, byte-swapped or read-only buffer). The
    fast path of Send and Recv."""
    if isinstance(obj, (list, tuple, buffer)) or obj is None or obj is IN_PLACE:
        return None
    try:
        mv = memoryview(obj)
    except TypeError:
        return None
    if not mv.c_contiguous or not mv.nbytes or mv.format[0] in "<>!" or (writable and mv.readonly):
        return None
    return mv


def _rmsg(spec, blocks=1):
    """A receive buffer spec (the buffer must be writable)."""
    return _msg(spec, blocks, writable=True)


def _vmsg(spec, size, writable=False):
    """A v spec as mpi4py reads it: bare, [buf, dtype], [buf, counts],
    [buf, counts, dtype], [buf, (counts, displs), dtype], [buf, counts,
    displs], [buf, counts, displs, dtype]; an int count is every rank's
    count, an int displacement the stride between blocks; counts None:
    the buffer in equal blocks. Returns what the package's v-calls take:
    [buf, counts, displs]."""
    if spec is None or spec is IN_PLACE:
        return spec
    if not isinstance(spec, (list, tuple)):
        return _typed(spec, writable=writable)
    items = list(spec)
    buf, datatype, counts, displs = items[0] if items else None, None, None, None
    if len(items) == 1:
        pass
    elif len(items) == 2:
        x = items[1]
        if x is None or _dtype_item(x):
            datatype = x
        else:
            counts = x
    elif len(items) == 3:
        x, y = items[1], items[2]
        if y is None or _dtype_item(y):
            counts, datatype = x, y
        else:
            counts, displs = x, y
    elif len(items) == 4:
        counts, displs, datatype = items[1], items[2], items[3]
    else:
        raise ValueError(f"message: expecting 1 to 4 items, not {len(items)}")
    if len(items) in (2, 3) and isinstance(counts, tuple) and len(counts) == 2 and displs is None:
        counts, displs = counts
    b = _typed(buf, datatype, writable=writable)
    if counts is None and displs is None:
        return b
    n = len(_view(b))
    if counts is None:
        counts = n // size if size else 0
    if isinstance(counts, (list, tuple)) or hasattr(counts, "__len__") and getattr(counts, "ndim", 1) != 0:
        counts = [_index(c, "count") for c in counts]
    else:
        counts = [_index(counts, "count")] * size
    if displs is None:
        displs = [sum(counts[:i]) for i in range(len(counts))]
    elif isinstance(displs, (list, tuple)) or hasattr(displs, "__len__") and getattr(displs, "ndim", 1) != 0:
        displs = [_index(d, "displacement") for d in displs]
    else:
        displs = [_index(displs, "displacement") * i for i in range(size)]
    for c, d in zip(counts, displs):
        if c < 0 or d < 0:
            raise ValueError(f"message: negative count {c} or displacement {d}")
        if c and d + c > n:
            raise ValueError(f"message: a block of {c} at {d} is past the buffer of {n}")
    return [b, counts, displs]


def _rvmsg(spec, size):
    """A receive v spec (the buffer must be writable)."""
    return _vmsg(spec, size, writable=True)


def _copy_of(buf):
    """A new buffer of buf's elements (a local copy: the send side of an
    in-place call the Rust API takes from two buffers)."""
    v = _view(buf)
    try:
        import numpy
        return numpy.array(v, copy=True).reshape(-1)
    except ImportError:
        return memoryview(bytearray(v.tobytes())).cast(v.format)


def _first(buf, k):
    """The first k elements of buf (a view)."""
    v = _view(buf)
    return v[:k] if k else _empty(_native(v.format))


def _pair(sb, rb, same_count=False):
    """mpi4py's local check of a collective's two buffers: the same
    element type (and, for a reduction, the same count), else ValueError
    before anything is sent."""
    if sb is None or rb is None or sb is IN_PLACE or rb is IN_PLACE:
        return sb, rb
    a, b = _view(sb), _view(rb)
    if (_native(a.format), a.itemsize) != (_native(b.format), b.itemsize) and a.nbytes and b.nbytes:
        raise ValueError(f"mismatch in send and receive MPI datatypes ({a.format} and {b.format})")
    if same_count and a.nbytes != b.nbytes:
        raise ValueError(f"mismatch in send count {a.nbytes // a.itemsize} and receive count {b.nbytes // b.itemsize}")
    return sb, rb


def _csend(spec, blocks=1):
    """A collective's send buffer: None is IN_PLACE, as in mpi4py."""
    return IN_PLACE if spec is None else _msg(spec, blocks)


def _crecv(spec):
    """A Scatter's receive buffer: None is IN_PLACE, as in mpi4py."""
    return IN_PLACE if spec is None else _rmsg(spec)
