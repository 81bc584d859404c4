"""Message specs as mpi4py parses them, read into views of the buffers
where they are (nothing is copied but where an in-place call needs a
send buffer)."""

import array as _array
import sys as _sys

from .constants import IN_PLACE
from .datatypes import Datatype, _BY_CHAR
from .errors import ERR_ARG, ERR_BUFFER, ERR_TYPE, Exception

_TYPESTR = {"i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "u2": "H",
            "u4": "I", "u8": "Q", "f4": "f", "f8": "d", "b1": "?"}


def _interface_view(d, owner):
    """A memoryview of host memory described as an array interface; the
    view keeps `owner` (the memory's exporter) alive as long as it lives,
    so a request's buffer cannot be freed under it."""
    import ctypes
    addr, readonly = d["data"]
    shape = d.get("shape", ())
    n = 1
    for s in shape:
        n *= s
    char = _TYPESTR.get(d["typestr"][1:], "B")
    nbytes = n * int(d["typestr"][2:])
    if d.get("strides") not in (None, ()) and len(shape) == 1 and d["strides"][0] != int(d["typestr"][2:]):
        raise Exception(ERR_BUFFER, "a strided buffer (not C-contiguous)")
    if nbytes == 0:
        mv = memoryview(bytearray()).cast(char)
    else:
        raw = (ctypes.c_char * nbytes).from_address(addr)
        raw._owner = owner
        mv = memoryview(raw).cast("B").cast(char)
    return mv.toreadonly() if readonly else mv


def _dlpack_interface(obj):
    """The array interface of a DLPack exporter of CPU memory, read from its
    capsule without consuming it (the capsule's own destructor releases
    it; the memory stays the exporter's, which the view keeps alive)."""
    import ctypes

    class Tensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_uint32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsule = obj.__dlpack__()
    name = api.PyCapsule_GetName(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise BufferError(f"a DLPack capsule named {name!r}")
    ptr = api.PyCapsule_GetPointer(capsule, name)
    readonly = False
    if name == b"dltensor_versioned":
        # version (2 x u32), manager_ctx, deleter, flags (u64), then the tensor
        flags = ctypes.c_uint64.from_address(ptr + 24).value
        readonly = bool(flags & 1)
        ptr += 32
    t = Tensor.from_address(ptr)
    if t.device_type not in (1, 3):  # kDLCPU, kDLCUDAHost
        raise BufferError(f"DLPack device type {t.device_type} is not host memory")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    kind = {0: "i", 1: "u", 2: "f", 6: "b"}.get(t.code)
    if kind is None or t.lanes != 1:
        raise BufferError(f"DLPack dtype code {t.code} lanes {t.lanes}")
    size = t.bits // 8
    if t.strides:
        expect = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expect:
                raise BufferError("a DLPack tensor that is not C-contiguous")
            expect *= shape[i]
    return {"data": ((t.data or 0) + t.byte_offset, readonly), "shape": shape,
            "typestr": f"<{kind}{size}"}


def _view(obj):
    """`obj` as a memoryview: the buffer protocol, else an array
    interface (`__cuda_array_interface__` of host memory, `__dlpack__`
    of a CPU array, `__array_interface__`)."""
    if isinstance(obj, memoryview):
        return obj
    try:
        return memoryview(obj)
    except TypeError:
        pass
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        d = getattr(obj, attr, None)
        if isinstance(d, dict):
            return _interface_view(d, obj)
    if hasattr(obj, "__dlpack__"):
        return _interface_view(_dlpack_interface(obj), obj)
    raise Exception(ERR_BUFFER, f"a {type(obj).__name__} object has no buffer")


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


def _typed(obj, datatype=None, count=None, displ=0):
    """The buffer of a spec: `count` elements of `datatype` from element
    `displ` of `obj` (None: all of it; the buffer's own element type)."""
    if obj is None:
        obj = b""  # mpi4py: a None buffer is an empty message
    mv = _view(obj)
    if datatype is not None and not isinstance(datatype, Datatype):
        datatype = _BY_CHAR.get(str(datatype))
        if datatype is None:
            raise Exception(ERR_TYPE, f"no datatype {datatype!r}")
    if datatype is None:
        char = _native(mv.format)
        size = mv.itemsize
        wire = char
    else:
        _name, char, size, wire = datatype._spec()
        if wire is None:
            raise Exception(ERR_TYPE, f"{_name} is not one of the seven element types of sperli")
    if not mv.c_contiguous:
        raise Exception(ERR_BUFFER, "the buffer is not C-contiguous")
    nbytes = mv.nbytes
    if count is None and displ == 0 and datatype is None:
        if nbytes == 0:
            return _empty(wire)
        return mv
    start = displ * size
    if count is None:
        stop = nbytes
    else:
        stop = start + count * size
    if stop > nbytes or start < 0:
        raise Exception(ERR_BUFFER, f"the spec needs bytes {start}..{stop} of a buffer of {nbytes}")
    if stop == start:
        return _empty(wire)
    flat = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
    part = flat[start:stop]
    if (stop - start) % size:
        raise Exception(ERR_BUFFER, f"{stop - start} bytes are not whole elements of {size}")
    return part.cast(wire) if wire != "B" else part


def _dtype_item(x):
    return isinstance(x, Datatype) or (isinstance(x, str) and len(x) <= 2)


def _msg(spec, blocks=1):
    """A buffer spec of a point-to-point or block call: bare, [buf],
    [buf, dtype], [buf, count], [buf, count, dtype], [buf, (count, displ),
    dtype]; `blocks` multiplies `count` (the per-rank count of a Gather
    receive or a Scatter send)."""
    if spec is IN_PLACE:
        return spec
    if not isinstance(spec, (list, tuple)):
        return _typed(spec)
    items = list(spec)
    if not items:
        raise Exception(ERR_ARG, "an empty message spec")
    buf, rest = items[0], items[1:]
    datatype, count, displ = None, None, 0

    def is_type(x):
        return x is None or _dtype_item(x)

    def count_displ(c):
        if isinstance(c, (list, tuple)):
            if len(c) != 2:
                raise Exception(ERR_ARG, f"a (count, displ) of {len(c)} items")
            return c[0], c[1]
        return c, 0

    if len(rest) == 1:
        if _dtype_item(rest[0]):
            datatype = rest[0]
        else:
            count, displ = count_displ(rest[0])
    elif len(rest) == 2:
        if is_type(rest[1]):
            (count, displ), datatype = count_displ(rest[0]), rest[1]
        else:
            count, displ = rest
    elif len(rest) == 3:
        count, displ, datatype = rest
    elif rest:
        raise Exception(ERR_ARG, f"a message spec of {len(items)} items")
    displ = 0 if displ is None else displ
    for x in (count, displ):
        if x is not None and not isinstance(x, int):
            x = int(x)
    if count is not None:
        count = int(count) * blocks
    displ = int(displ) * blocks
    return _typed(buf, datatype, count, displ)


def _vmsg(spec, size):
    """A v spec as mpi4py reads it: bare, [buf, counts], [buf, counts,
    displs], [buf, (counts, displs)], each with the dtype last; an int count
    is every rank's count, an int displacement the stride between blocks.
    Returns what the package's v-calls take: [buf, counts, displs]."""
    if spec is None or spec is IN_PLACE:
        return spec
    if not isinstance(spec, (list, tuple)):
        return _typed(spec)
    items = list(spec)
    buf, rest = items[0], items[1:]
    datatype = None
    if rest and _dtype_item(rest[-1]):
        datatype = rest.pop()
    counts = displs = None
    if len(rest) == 1:
        c = rest[0]
        if isinstance(c, tuple) and len(c) == 2:
            counts, displs = c
        else:
            counts = c
    elif len(rest) == 2:
        counts, displs = rest
    elif rest:
        raise Exception(ERR_ARG, f"a v message spec of {len(items)} items")
    b = _typed(buf, datatype)
    if counts is None:
        return b
    if isinstance(counts, int):
        counts = [counts] * size
    counts = [int(x) for x in counts]
    if displs is None:
        displs = [sum(counts[:i]) for i in range(len(counts))]
    elif isinstance(displs, int):
        displs = [displs * i for i in range(size)]
    return [b, counts, [int(x) for x in displs]]


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
