"""mpi4py's ``MPI`` module over SPERLI: ``from sperli import MPI``.

Programs written for mpi4py run with one changed import. This module only
maps mpi4py's names and argument forms onto the calls of the ``sperli``
package (the Rust API): it passes no message and reduces nothing itself.
What it maps (docs/python.md, "mpi4py's MPI module"):

- message specs as mpi4py parses them: a bare buffer, ``[buf, MPI.DOUBLE]``,
  ``[buf, count, MPI.DOUBLE]``, ``[buf, (count, displ), MPI.DOUBLE]``, the
  v forms ``[buf, (counts, displs), MPI.DOUBLE]``, empty buffers; a
  buffer named by ``__cuda_array_interface__`` or ``__dlpack__`` (host
  memory) is viewed where it is;
- ``PROC_NULL``: a send to it or a receive from it completes at once
  (one place: ``_proc_null``);
- ``COMM_SELF``: ``COMM_WORLD.Split(rank)``, a real one-rank communicator
  made once at import (collective over the world, as ``MPI_Init``);
- tag spaces: each communicator's tags 0..=TAG_UB travel as wire tag
  (communicator id % 2048) * 2^20 + tag (protocol §15.2: a message
  carries no communicator), so a message on COMM_SELF or a Dup is not
  received on another communicator by a receive naming its tag;
- ``Status``, ``Request``, ``Group`` (rank lists), error classes and
  ``MPI.Exception``, errhandlers, attributes and keyvals, the environment
  calls.

Datatypes: a predefined type of one of the seven element types of the
protocol (uint8, int32, uint32, int64, uint64, float32, float64) is a
``Datatype``; C types SPERLI does not carry (``SHORT``, ``SIGNED_CHAR``,
``C_BOOL``, ``LONG_DOUBLE``, the complex types...) are
``MPI.DATATYPE_NULL``, as mpi4py makes a type its MPI library lacks;
``INT8_T``, ``INT16_T``, ``UINT16_T``, ``BOOL`` are named types whose calls
are refused (``ERR_TYPE``).
"""

import array as _array
import builtins as _builtins
import os as _os
import pickle as _pickle
import socket as _socket
import sys as _sys
import time as _time

import sperli as _sp
from . import _sperli as _s

# -- constants --------------------------------------------------------------

ANY_SOURCE = _s.ANY_SOURCE
ANY_TAG = _s.ANY_TAG
UNDEFINED = _s.UNDEFINED
PROC_NULL = -2
ROOT = -3
# Tag spaces: a message carries no communicator (protocol §15.2), so each
# communicator's tags 0..=_TAG_MAX travel as wire tag (id % 2048) * 2^20 +
# tag, its id being the protocol's communicator id (the same on every
# member; the world's is 0: its tags are the package's own).
_TAG_BITS = 20
_TAG_MAX = (1 << _TAG_BITS) - 1
IN_PLACE = _s.IN_PLACE
BOTTOM = None
BSEND_OVERHEAD = 0
BUFFER_AUTOMATIC = None
KEYVAL_INVALID = -1
MAX_PROCESSOR_NAME = 256
MAX_ERROR_STRING = 512
MAX_OBJECT_NAME = 128
MAX_LIBRARY_VERSION_STRING = 256
MAX_PORT_NAME = 1024
MAX_INFO_KEY = 255
MAX_INFO_VAL = 1024
VERSION = 3
SUBVERSION = 1

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3

# Predefined attribute keyvals (their values: _predefined_attr).
TAG_UB, HOST, IO, WTIME_IS_GLOBAL, UNIVERSE_SIZE, APPNUM, LASTUSEDCODE = range(101, 108)

# -- error classes and MPI.Exception ----------------------------------------

_ERRORS = [
    "SUCCESS", "ERR_BUFFER", "ERR_COUNT", "ERR_TYPE", "ERR_TAG", "ERR_COMM",
    "ERR_RANK", "ERR_REQUEST", "ERR_ROOT", "ERR_GROUP", "ERR_OP",
    "ERR_TOPOLOGY", "ERR_DIMS", "ERR_ARG", "ERR_UNKNOWN", "ERR_TRUNCATE",
    "ERR_OTHER", "ERR_INTERN", "ERR_IN_STATUS", "ERR_PENDING", "ERR_KEYVAL",
    "ERR_NO_MEM", "ERR_BASE", "ERR_INFO_KEY", "ERR_INFO_VALUE",
    "ERR_INFO_NOKEY", "ERR_SPAWN", "ERR_PORT", "ERR_SERVICE", "ERR_NAME",
    "ERR_WIN", "ERR_SIZE", "ERR_DISP", "ERR_INFO", "ERR_LOCKTYPE",
    "ERR_ASSERT", "ERR_RMA_CONFLICT", "ERR_RMA_SYNC", "ERR_FILE",
    "ERR_NOT_SAME", "ERR_AMODE", "ERR_UNSUPPORTED_DATAREP",
    "ERR_UNSUPPORTED_OPERATION", "ERR_NO_SUCH_FILE", "ERR_FILE_EXISTS",
    "ERR_BAD_FILE", "ERR_ACCESS", "ERR_NO_SPACE", "ERR_QUOTA",
    "ERR_READ_ONLY", "ERR_FILE_IN_USE", "ERR_DUP_DATAREP", "ERR_CONVERSION",
    "ERR_IO", "ERR_RMA_RANGE", "ERR_RMA_ATTACH", "ERR_RMA_SHARED",
    "ERR_RMA_FLAVOR", "ERR_SESSION", "ERR_PROC_ABORTED", "ERR_VALUE_TOO_LARGE",
    "ERR_REVOKED", "ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING",
    "ERR_ERRHANDLER",
]
for _i, _n in enumerate(_ERRORS):
    globals()[_n] = _i
ERR_LASTCODE = len(_ERRORS) - 1
_user_codes = {}
_user_classes = set()
_last_used = [ERR_LASTCODE]


class Exception(RuntimeError):
    """MPI's error: ``Get_error_code()``, ``Get_error_class()``,
    ``Get_error_string()``; ``sperli`` (the ``SperliError`` behind it, if
    any) keeps the H-code."""

    def __init__(self, ierr=SUCCESS, message=None, sperli=None):
        self.ierr = int(ierr)
        self.sperli = sperli
        self._message = message
        RuntimeError.__init__(self, self.ierr)

    def __eq__(self, other):
        return int(self) == int(other) if isinstance(other, (int, Exception)) else NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(self.ierr)

    def __int__(self):
        return self.ierr

    def __bool__(self):
        return self.ierr != SUCCESS

    def __repr__(self):
        return f"MPI.Exception({self.ierr})"

    def __str__(self):
        s = Get_error_string(self.ierr)
        return f"{s}: {self._message}" if self._message else s

    def Get_error_code(self):
        """The error code."""
        return self.ierr

    error_code = property(Get_error_code)

    def Get_error_class(self):
        """The error class of the code."""
        return Get_error_class(self.ierr)

    error_class = property(Get_error_class)

    def Get_error_string(self):
        """The text of the code."""
        return Get_error_string(self.ierr)

    error_string = property(Get_error_string)


def Get_error_class(errorcode):
    """The class of an error code."""
    if 0 <= errorcode <= ERR_LASTCODE or errorcode in _user_classes:
        return errorcode
    if errorcode in _user_codes:
        return _user_codes[errorcode][0]
    raise Exception(ERR_ARG)


def Get_error_string(errorcode):
    """The text of an error code."""
    if errorcode in _user_codes and _user_codes[errorcode][1]:
        return _user_codes[errorcode][1]
    if 0 <= errorcode <= ERR_LASTCODE:
        return "MPI_" + _ERRORS[errorcode].replace("ERR_", "ERR_")
    if errorcode in _user_classes or errorcode in _user_codes:
        return ""
    raise Exception(ERR_ARG)


def Add_error_class():
    """A new error class."""
    _last_used[0] += 1
    _user_classes.add(_last_used[0])
    return _last_used[0]


def Add_error_code(errorclass):
    """A new error code of `errorclass`."""
    Get_error_class(errorclass)
    _last_used[0] += 1
    _user_codes[_last_used[0]] = [errorclass, ""]
    return _last_used[0]


def Add_error_string(errorcode, string):
    """Names an added error code or class."""
    if errorcode in _user_codes:
        _user_codes[errorcode][1] = string
    elif errorcode in _user_classes:
        _user_codes[errorcode] = [errorcode, string]
        _user_classes.add(errorcode)
    else:
        raise Exception(ERR_ARG)


def Remove_error_class(errorclass):
    """Removes an added error class."""
    raise NotImplementedError("MPI.Remove_error_class (MPI 4.1) is not offered by sperli")


Remove_error_code = Remove_error_string = Remove_error_class

# The error class of each refusal of the package (its texts, errors.rs).
_CLASS_OF = [
    ("does not fit the receive buffer", "ERR_TRUNCATE"),
    ("not a whole number", "ERR_TRUNCATE"),
    ("is not a tag", "ERR_TAG"), ("tag ", "ERR_TAG"),
    ("root", "ERR_ROOT"),
    ("is not a rank", "ERR_RANK"), ("ANY_SOURCE", "ERR_RANK"),
    ("op must be", "ERR_OP"), ("not defined for", "ERR_OP"),
    ("dtype", "ERR_TYPE"), ("element type", "ERR_TYPE"),
    ("freed", "ERR_COMM"),
    ("has no buffer", "ERR_BUFFER"), ("read-only", "ERR_BUFFER"),
    ("contiguous", "ERR_BUFFER"), ("aligned", "ERR_BUFFER"),
    ("elements, the call needs", "ERR_COUNT"), ("count", "ERR_COUNT"),
]


def _from_sperli(e):
    """The MPI.Exception of a SperliError (its class from the H-code and
    the refusal; the SperliError kept as `.sperli`)."""
    text = str(e)
    cls = ERR_OTHER
    if isinstance(e, _s.ArgumentError) or e.code == 1618:
        cls = ERR_ARG
        for word, name in _CLASS_OF:
            if word in text:
                cls = globals()[name]
                break
    elif e.code == 1617:
        cls = ERR_ARG
    elif e.code in (1612, 1613):
        cls = ERR_PROC_ABORTED if e.code == 1612 else ERR_PROC_FAILED
    elif e.code is None:
        cls = ERR_OTHER
    return Exception(cls, text, e)


def _wrap(fn):
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _s.SperliError as e:
            raise _from_sperli(e) from e
    call.__name__ = fn.__name__
    call.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
    call.__doc__ = fn.__doc__
    call._mpi_wrapped = True
    return call


def _wrap_class(cls):
    for name, v in list(vars(cls).items()):
        if isinstance(v, (staticmethod, classmethod)):
            if not getattr(v.__func__, "_mpi_wrapped", False):
                setattr(cls, name, type(v)(_wrap(v.__func__)))
        elif callable(v) and not name.startswith("__") and not getattr(v, "_mpi_wrapped", False) \
                and not isinstance(v, type):
            setattr(cls, name, _wrap(v))
    return cls


# -- datatypes --------------------------------------------------------------

class _Handled:
    """An mpi4py handle: equal by `_key()` within its `_family`, null (false)
    when the key is None, unhashable, pickled by `_reduce`."""

    _family = object
    _slot = "_v"  # the attribute holding the handle's value (None: null)

    def __new__(cls, other=None):
        self = object.__new__(cls)
        setattr(self, cls._slot, None if other is None else getattr(other, cls._slot))
        return self

    @classmethod
    def _of(cls, value):
        h = cls()
        setattr(h, cls._slot, value)
        return h

    def _key(self):
        return getattr(self, self._slot)

    def __eq__(self, other):
        return isinstance(other, self._family) and self._key() == other._key()

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __bool__(self):
        return self._key() is not None

    def __reduce__(self):
        return _reduce(self, self._key() is None)


class Datatype(_Handled):
    """A predefined datatype: `size`, `extent`, `lb`, `ub`, `typechar`,
    `name`; `DATATYPE_NULL` is the null handle."""

    def __new__(cls, datatype=None):
        self = object.__new__(cls)
        if datatype is None:
            self._d = self._tok = None
        else:
            self._d, self._tok = datatype._d, datatype._tok
        return self

    def _key(self):
        # One handle: the predefined type, or one Dup of it.
        return self._tok

    def __reduce__(self):
        if id(self) in _PREDEFINED or self._d is None:
            return _reduce(self, True)
        return (type(self), (_BY_SPEC[self._d],))

    def __repr__(self):
        return f"<MPI.Datatype {self._d[0] if self._d else 'DATATYPE_NULL'}>"

    def _spec(self):
        if self._d is None:
            raise Exception(ERR_TYPE, "DATATYPE_NULL")
        return self._d

    def Get_size(self):
        """Bytes of one element."""
        return self._spec()[2]

    size = property(Get_size)

    def Get_extent(self):
        """(lb, extent)."""
        return (0, self._spec()[2])

    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: 0 if self._spec() else 0)
    ub = property(lambda self: self._spec()[2])

    def Get_true_extent(self):
        """(true lb, true extent)."""
        return self.Get_extent()

    true_extent = property(lambda self: self.Get_extent()[1])
    true_lb = property(lambda self: 0)
    true_ub = property(lambda self: self._spec()[2])

    def Get_name(self):
        """MPI's name, e.g. MPI_DOUBLE."""
        return self._spec()[0] if self._d else "MPI_DATATYPE_NULL"

    name = property(Get_name)

    def Get_typechar(self):
        """The struct-module character."""
        return self._spec()[1]

    typechar = property(Get_typechar)

    def Is_predefined(self):
        """Always true: only predefined types exist."""
        return True

    is_predefined = property(Is_predefined)

    def Get_envelope(self):
        """(0, 0, 0, COMBINER_NAMED)."""
        return (0, 0, 0, COMBINER_NAMED)

    combiner = property(lambda self: COMBINER_NAMED)

    def Dup(self):
        """The same type, its attributes copied (copy_fn)."""
        self._spec()
        new = type(self)(self)
        new._tok = object()
        self._copy_attrs(new)
        return new

    def Commit(self):
        """Nothing to do for a predefined type."""
        self._spec()
        return self

    def Free(self):
        """Frees a Dup (refused for a predefined type)."""
        self._spec()
        if self._tok == self._d:
            raise Exception(ERR_TYPE, "a predefined datatype cannot be freed")
        self._delete_attrs()
        self._d = self._tok = None

    free = Free

    def _derived(self, *args, **kwargs):
        raise NotImplementedError("derived datatypes are not offered by sperli (predefined types only)")

    Create_contiguous = Create_vector = Create_hvector = Create_indexed = _derived
    Create_hindexed = Create_indexed_block = Create_hindexed_block = _derived
    Create_struct = Create_subarray = Create_darray = Create_resized = _derived

    def tocode(self):
        """The struct-module character."""
        return self._spec()[1]

    @classmethod
    def fromcode(cls, code):
        """The predefined type of a struct-module character or numpy name."""
        names = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i",
                 "uint32": "I", "int64": "q", "uint64": "Q", "float32": "f", "float64": "d",
                 "bool": "?", "c": "c", "i1": "b", "u1": "B", "i4": "i", "u4": "I",
                 "i8": "q", "u8": "Q", "f4": "f", "f8": "d", "b": "b"}
        t = _BY_CHAR.get(names.get(code, code))
        if t is None:
            raise ValueError(f"cannot map code {code!r} to a datatype")
        return t

    def Pack_size(self, count, comm):
        """Bytes of `count` packed elements."""
        return count * self.Get_size()


COMBINER_NAMED = 0
Datatype._family = Datatype
DATATYPE_NULL = Datatype()


def _dt(name, char, size, wire):
    d = Datatype()
    d._d = d._tok = (name, char, size, wire)
    return d


# (mpi4py name, struct char, size, wire char or None when refused)
_TYPES = {
    "BYTE": ("B", 1, "B"), "PACKED": ("B", 1, "B"), "CHAR": ("c", 1, "B"),
    "UINT8_T": ("B", 1, "B"),
    "INT": ("i", 4, "i"), "INT32_T": ("i", 4, "i"),
    "UNSIGNED": ("I", 4, "I"), "UNSIGNED_INT": ("I", 4, "I"), "UINT32_T": ("I", 4, "I"),
    "LONG": ("l", 8, "l"), "LONG_LONG": ("q", 8, "q"), "LONG_LONG_INT": ("q", 8, "q"),
    "INT64_T": ("q", 8, "q"), "AINT": ("q", 8, "q"), "OFFSET": ("q", 8, "q"),
    "COUNT": ("q", 8, "q"),
    "UNSIGNED_LONG": ("L", 8, "L"), "UNSIGNED_LONG_LONG": ("Q", 8, "Q"),
    "UINT64_T": ("Q", 8, "Q"),
    "FLOAT": ("f", 4, "f"), "DOUBLE": ("d", 8, "d"),
    "INT8_T": ("b", 1, None), "INT16_T": ("h", 2, None), "UINT16_T": ("H", 2, None),
    "BOOL": ("?", 1, None),
}
for _n, (_c, _z, _w) in _TYPES.items():
    globals()[_n] = _dt("MPI_" + _n, _c, _z, _w)
# Types SPERLI does not carry: DATATYPE_NULL (mpi4py's "not in this MPI").
for _n in ["UNSIGNED_CHAR", "SIGNED_CHAR", "SHORT", "UNSIGNED_SHORT", "C_BOOL", "LONG_DOUBLE",
           "WCHAR", "SIGNED_SHORT", "C_COMPLEX", "C_FLOAT_COMPLEX",
           "C_DOUBLE_COMPLEX", "C_LONG_DOUBLE_COMPLEX", "CXX_BOOL",
           "CXX_FLOAT_COMPLEX", "CXX_DOUBLE_COMPLEX", "CXX_LONG_DOUBLE_COMPLEX",
           "SHORT_INT", "INT_INT", "TWOINT", "LONG_INT", "FLOAT_INT",
           "DOUBLE_INT", "LONG_DOUBLE_INT", "UB", "LB", "CHARACTER",
           "LOGICAL", "INTEGER", "REAL", "DOUBLE_PRECISION", "COMPLEX",
           "DOUBLE_COMPLEX", "LOGICAL1", "LOGICAL2", "LOGICAL4", "LOGICAL8",
           "INTEGER1", "INTEGER2", "INTEGER4", "INTEGER8", "INTEGER16",
           "REAL2", "REAL4", "REAL8", "REAL16", "COMPLEX4", "COMPLEX8",
           "COMPLEX16", "COMPLEX32", "F_BOOL", "F_INT", "F_FLOAT", "F_DOUBLE",
           "F_COMPLEX", "F_FLOAT_COMPLEX", "F_DOUBLE_COMPLEX", "SIGNED_INT",
           "SIGNED_LONG", "SIGNED_LONG_LONG", "UNSIGNED_INT8", "UNSIGNED_SHORT_INT"]:
    globals()[_n] = DATATYPE_NULL

_BY_CHAR = {"b": INT8_T, "B": UINT8_T, "h": INT16_T, "H": UINT16_T,
            "i": INT, "I": UNSIGNED, "l": LONG, "L": UNSIGNED_LONG,
            "q": LONG_LONG, "Q": UNSIGNED_LONG_LONG, "f": FLOAT, "d": DOUBLE,
            "c": CHAR, "?": BOOL}

# -- message specs ----------------------------------------------------------

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


# -- status -----------------------------------------------------------------

class Status:
    """A receive's status, compared by value (unhashable, as mpi4py's)."""

    def __new__(cls, status=None):
        self = object.__new__(cls)
        Status._fill_from(self, status)
        return self

    def __init__(self, status=None):
        pass

    def _fill_from(self, status=None):
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"expected a Status, not {type(status).__name__}")
        if status is None:
            self.source, self.tag, self.error = ANY_SOURCE, ANY_TAG, SUCCESS
            self._count, self.cancelled = 0, False
        else:
            self.source, self.tag, self.error = status.source, status.tag, status.error
            self._count, self.cancelled = status._count, status.cancelled

    def __eq__(self, other):
        if not isinstance(other, Status):
            return NotImplemented
        return (self.source, self.tag, self.error, self._count, self.cancelled) == \
            (other.source, other.tag, other.error, other._count, other.cancelled)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return f"<MPI.Status source={self.source} tag={self.tag} count={self._count}>"

    def __reduce__(self):
        return (_status_from, (self.source, self.tag, self.error, self._count, self.cancelled))

    def _set(self, source, tag, count):
        self.source, self.tag, self.error, self._count = source, tag, SUCCESS, count

    def _from(self, st, base=0):
        tag = st.tag
        if base <= tag <= base + _TAG_MAX:
            tag -= base
        self._set(st.source, tag, st.count)

    def Get_source(self):
        """The sender's rank."""
        return self.source

    def Set_source(self, source):
        """Sets the source."""
        self.source = source

    def Get_tag(self):
        """The message's tag."""
        return self.tag

    def Set_tag(self, tag):
        """Sets the tag."""
        self.tag = tag

    def Get_error(self):
        """The error class (SUCCESS)."""
        return self.error

    def Set_error(self, error):
        """Sets the error."""
        self.error = error

    def Get_count(self, datatype=BYTE):
        """Elements of `datatype` received (UNDEFINED if not whole)."""
        size = datatype.Get_size()
        return self._count // size if self._count % size == 0 else UNDEFINED

    def _set_count(self, value):
        self._count = value

    count = property(lambda self: self._count, _set_count)

    def Get_elements(self, datatype):
        """As Get_count for a predefined type."""
        return self.Get_count(datatype)

    def Set_elements(self, datatype, count):
        """Sets the count in elements of `datatype`."""
        self._count = count * datatype.Get_size()

    def Is_cancelled(self):
        """Whether the request was cancelled."""
        return self.cancelled

    def Set_cancelled(self, flag):
        """Sets the cancelled flag."""
        self.cancelled = bool(flag)

    def py2f(self):
        """The status as integers."""
        return [self.source, self.tag, self.error, self._count, int(self.cancelled)]

    @classmethod
    def f2py(cls, arg):
        """A status from py2f's integers."""
        s = cls()
        s.source, s.tag, s.error, s._count, c = arg
        s.cancelled = bool(c)
        return s


def _status_from(source, tag, error, count, cancelled):
    s = Status()
    s.source, s.tag, s.error, s._count, s.cancelled = source, tag, error, count, cancelled
    return s


def _fill(status, st, base=0):
    if status is not None:
        status._from(st, base)


def _buf_unused(buf):
    """The buffer argument of recv/irecv: the package unpickles from the
    transport, so a buffer given is not used (said once per call)."""
    if buf is not None:
        import warnings
        warnings.warn("sperli.MPI: the buf argument of recv/irecv is not used", UserWarning, stacklevel=4)


def _proc_null(status):
    """PROC_NULL, the one place: a send to it or a receive from it completes
    at once; the receive's status says source PROC_NULL, tag ANY_TAG,
    count 0."""
    if status is not None:
        status._set(PROC_NULL, ANY_TAG, 0)


# -- requests ---------------------------------------------------------------

class Request:
    """A request: `Wait`, `Test`, `wait`, `test`, `Free`, and the static
    `Waitall`, `Waitany`, `Waitsome`, `Testall`, `Testany`, `Testsome`.
    `Request()` is REQUEST_NULL; a completed request becomes null."""

    def __new__(cls, request=None):
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
        self._r = _INACTIVE if isinstance(self, Prequest) else None
        return value

    def _parts(self):
        r = self._r
        return [] if r is True or r is None or r is _INACTIVE else (r if isinstance(r, list) else [r])

    def _open(self):
        return self._r is not None and self._r is not _INACTIVE

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
        done = all(p.done for p in self._parts())
        if done and status is not None:
            self._finish_peek(status)
        return done

    def _finish_peek(self, status):
        st = self._st
        if st is None:
            status._set(ANY_SOURCE, ANY_TAG, 0)
        elif isinstance(st, tuple):
            status._set(*st)
        else:
            status._from(st, self._base)

    def get_status(self, status=None):
        """As Get_status."""
        return self.Get_status(status)

    def Free(self):
        """Drops the handle (the operation runs to its end)."""
        self._r = None

    def free(self):
        """As Free."""
        self.Free()

    def Cancel(self):
        """Not offered: a message once posted runs to its end."""
        raise NotImplementedError("MPI.Request.Cancel is not offered by sperli")

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


REQUEST_NULL = Request()
_INACTIVE = object()  # a persistent request between Wait and Start


class Prequest(Request):
    """A persistent request: `Start` issues the Isend/Irecv it was made
    with (Send_init, Recv_init), `Wait` completes it."""

    def __new__(cls, request=None):
        self = Request.__new__(cls, request)
        self._start = getattr(request, "_start", None)
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
    return p


class Grequest(Request):
    """Generalized requests: not offered."""

    @classmethod
    def Start(cls, *args, **kwargs):
        """Not offered."""
        raise NotImplementedError("generalized requests are not offered by sperli")


def _done(st=None, value=None):
    """A request complete at once (a send to PROC_NULL, ...)."""
    q = Request._of(True, st)
    q._value = value
    return q


# -- groups -----------------------------------------------------------------

class Group(_Handled):
    """A group: an ordered list of job ranks (set operations on the list;
    no message is sent)."""

    _slot = "_g"

    @classmethod
    def _of(cls, ranks):
        return _Handled._of.__func__(cls, tuple(ranks))

    def _ranks(self):
        if self._g is None:
            raise Exception(ERR_GROUP, "GROUP_NULL")
        return self._g

    def Get_size(self):
        """Number of members."""
        return len(self._ranks())

    size = property(Get_size)

    def Get_rank(self):
        """This process's rank in it, or UNDEFINED."""
        me = _world_rank()
        g = self._ranks()
        return g.index(me) if me in g else UNDEFINED

    rank = property(Get_rank)

    def Translate_ranks(self, ranks=None, group=None):
        """The ranks in `group` of `ranks` of this group."""
        g1, ranks1, group2 = self._ranks(), ranks, group
        if ranks1 is None:
            ranks1 = range(len(g1))
        out = []
        for r in ranks1:
            if r == PROC_NULL:
                out.append(PROC_NULL)
                continue
            if not 0 <= r < len(g1):
                raise Exception(ERR_RANK)
            if group2 is None:
                out.append(g1[r])
            else:
                g2 = group2._ranks()
                out.append(g2.index(g1[r]) if g1[r] in g2 else UNDEFINED)
        return out

    def Compare(self, other):
        """IDENT, SIMILAR or UNEQUAL."""
        a, b = self._ranks(), other._ranks()
        if a == b:
            return IDENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    compare = Compare

    @staticmethod
    def Union(group1, group2):
        """group1's members, then group2's others."""
        a, b = group1._ranks(), group2._ranks()
        return Group._of(list(a) + [r for r in b if r not in a])

    @staticmethod
    def Intersection(group1, group2):
        """group1's members also in group2."""
        b = group2._ranks()
        return Group._of([r for r in group1._ranks() if r in b])

    Intersect = Intersection

    @staticmethod
    def Difference(group1, group2):
        """group1's members not in group2."""
        b = group2._ranks()
        return Group._of([r for r in group1._ranks() if r not in b])

    def Incl(self, ranks):
        """The members at `ranks`."""
        g = self._ranks()
        for r in ranks:
            if not 0 <= r < len(g):
                raise Exception(ERR_RANK)
        if len(set(ranks)) != len(ranks):
            raise Exception(ERR_RANK)
        return Group._of([g[r] for r in ranks])

    def Excl(self, ranks):
        """The members not at `ranks`."""
        g = self._ranks()
        for r in ranks:
            if not 0 <= r < len(g):
                raise Exception(ERR_RANK)
        return Group._of([x for i, x in enumerate(g) if i not in set(ranks)])

    @staticmethod
    def _range(ranges):
        out = []
        for first, last, stride in ranges:
            if stride == 0:
                raise Exception(ERR_ARG)
            out.extend(range(first, last + (1 if stride > 0 else -1), stride))
        return out

    def Range_incl(self, ranks):
        """The members in the (first, last, stride) ranges."""
        return self.Incl(self._range(ranks))

    def Range_excl(self, ranks):
        """The members outside the ranges."""
        return self.Excl(self._range(ranks))

    def Dup(self):
        """A copy."""
        return Group._of(self._ranks())

    def Free(self):
        """Frees it (GROUP_EMPTY cannot be freed)."""
        if self._g is None:
            raise Exception(ERR_GROUP)
        self._g = None

    def Create_from_session_pset(self, *a):
        """Not offered."""
        raise NotImplementedError("sessions are not offered by sperli")


Group._family = Group
GROUP_NULL = Group()
GROUP_EMPTY = Group._of(())


def _world_rank():
    return _world.Get_rank() if _world is not None else 0


# -- errhandlers, keyvals ---------------------------------------------------

class Errhandler(_Handled):
    """An error handler: ERRORS_RETURN (exceptions), ERRORS_ARE_FATAL and
    ERRORS_ABORT (the process ends, through the package's fatal mode)."""

    _slot = "_e"

    def Free(self):
        """Drops the handle (predefined handlers stay)."""
        if self._e is None:
            raise Exception(ERR_ARG, "ERRHANDLER_NULL")
        if id(self) not in _PREDEFINED:
            self._e = None



Errhandler._family = Errhandler
ERRHANDLER_NULL = Errhandler()
ERRORS_RETURN = Errhandler._of("return")
ERRORS_ARE_FATAL = Errhandler._of("fatal")
ERRORS_ABORT = Errhandler._of("abort")


class _Keyvals:
    """Keyvals of one kind of object: copy and delete callbacks."""

    def __init__(self):
        self.next = 1000
        self.fns = {}

    def create(self, copy_fn, delete_fn):
        self.next += 1
        self.fns[self.next] = (copy_fn, delete_fn)
        return self.next

    def free(self, keyval):
        if keyval not in self.fns:
            raise Exception(ERR_KEYVAL)
        del self.fns[keyval]
        return KEYVAL_INVALID


_comm_keyvals = _Keyvals()
_type_keyvals = _Keyvals()
_win_keyvals = _Keyvals()


class _AttrMixin:
    _kv = _comm_keyvals

    def _attrs(self):
        raise NotImplementedError

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """A new keyval (`copy_fn(obj, keyval, value)` for Dup,
        `delete_fn(obj, keyval, value)` when an attribute goes)."""
        return cls._kv.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval):
        """Frees a keyval; returns KEYVAL_INVALID."""
        return cls._kv.free(keyval)

    def Set_attr(self, keyval, attrval):
        """Sets an attribute (deleting the old one)."""
        if keyval not in self._kv.fns:
            raise Exception(ERR_KEYVAL)
        a = self._attrs()
        if keyval in a:
            self.Delete_attr(keyval)
        a[keyval] = attrval

    def Get_attr(self, keyval):
        """The attribute, or None."""
        pre = self._predefined(keyval)
        if pre is not _NONE:
            return pre
        if keyval not in self._kv.fns and keyval not in self._attrs():
            raise Exception(ERR_KEYVAL)
        return self._attrs().get(keyval)

    def Delete_attr(self, keyval):
        """Deletes an attribute (calling its delete_fn)."""
        a = self._attrs()
        if keyval not in a:
            raise Exception(ERR_KEYVAL)
        value = a.pop(keyval)
        fns = self._kv.fns.get(keyval)
        if fns and fns[1] is not None:
            fns[1](self, keyval, value)

    def _predefined(self, keyval):
        return _NONE

    def _copy_attrs(self, new):
        dst = new._attrs()
        for k, v in list(self._attrs().items()):
            fns = self._kv.fns.get(k)
            copy_fn = fns[0] if fns else None
            if copy_fn is None or copy_fn is False:
                continue
            if copy_fn is True:
                dst[k] = v
                continue
            out = copy_fn(self, k, v)
            if out is not NotImplemented:
                dst[k] = out

    def _delete_attrs(self):
        for k in list(self._attrs()):
            self.Delete_attr(k)


_NONE = object()
_PREDEFINED = {}
_BY_SPEC = {}


def _comm_named(cls, name):
    """A new object for a predefined communicator (unpickling a copy)."""
    return cls(globals()[name])


def _reduce(obj, null):
    """Pickles a predefined handle as its name (the same object back), a
    null handle as a new null one; others cannot travel."""
    name = _PREDEFINED.get(id(obj))
    if name is not None:
        return name
    if null:
        return (type(obj), ())
    raise ValueError(f"cannot pickle {type(obj).__name__} handles")

# -- communicators ----------------------------------------------------------


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
        self.base = (getattr(c, "comm_id", 0) % 2048) << _TAG_BITS


def _predefined_attr(keyval):
    return {
        TAG_UB: _TAG_MAX,
        HOST: PROC_NULL,
        IO: ANY_SOURCE,
        WTIME_IS_GLOBAL: False,
        UNIVERSE_SIZE: None,
        APPNUM: None,
        LASTUSEDCODE: _last_used[0],
    }.get(keyval, _NONE)


class _TypeAttrs(_AttrMixin):
    """Attributes of a datatype (one dict per predefined type)."""


_TypeAttrs._kv = _type_keyvals
_TypeAttrs._attrs = lambda self: (self._spec(), self.__dict__.setdefault("_attrd", {}))[1]
for _name in ("Create_keyval", "Free_keyval", "Set_attr", "Get_attr", "Delete_attr",
              "_predefined", "_copy_attrs", "_delete_attrs", "_attrs", "_kv"):
    setattr(Datatype, _name, _TypeAttrs.__dict__.get(_name, getattr(_TypeAttrs, _name)))


class Comm(_Handled, _AttrMixin):
    """A communicator. `Comm(comm)` is a new object for the same one."""

    def __new__(cls, comm=None):
        if comm is not None and not isinstance(comm, Comm):
            raise TypeError(f"expected a Comm, not {type(comm).__name__}")
        self = object.__new__(cls)
        self._h = None if comm is None else comm._h
        return self

    def _key(self):
        return self._h  # compared by identity (a _Handle has no __eq__)

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
        return self._handle().members.index(_world_rank())

    rank = property(Get_rank)

    def Get_group(self):
        """Its group."""
        return Group._of(self._handle().members)

    group = property(Get_group)

    def Is_inter(self):
        """False: only intracommunicators exist."""
        self._handle()
        return False

    is_inter = property(Is_inter)

    def Is_intra(self):
        """True."""
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
        """Raises errorcode as MPI.Exception (ERRORS_RETURN)."""
        self._handle()
        if errorcode != SUCCESS:
            raise Exception(errorcode)

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
        self._copy_attrs(new)
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
        if id(self) not in _PREDEFINED and self._h is not None:
            for name in ("COMM_WORLD", "COMM_SELF"):
                if self._h is globals()[name]._h:
                    return (_comm_named, (type(self), name))
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
        members = c.allgather(_world_rank())
        return self._new(c, members)

    def Split_type(self, split_type, key=0, info=None):
        """COMM_TYPE_SHARED: the ranks of this host (by processor name)."""
        names = self.allgather(Get_processor_name())
        if split_type == UNDEFINED:
            return self.Split(UNDEFINED, key)
        return self.Split(names.index(Get_processor_name()), key)

    def Create(self, group):
        """The members of `group` (a Split over this communicator)."""
        g = group._ranks()
        me = _world_rank()
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
        return self.Split(0, g.index(_world_rank()))

    def Free(self):
        """Frees it."""
        h = self._handle()
        if self is COMM_WORLD or h is _world_h or h is _self_h:
            raise Exception(ERR_COMM, "a predefined communicator cannot be freed")
        self._delete_attrs()
        if hasattr(h.c, "Free"):
            h.c.Free()
        h.freed = True
        self._h = None

    def Disconnect(self):
        """As Free."""
        self.Free()

    def Attach_buffer(self, buf):
        """Accepted: buffered sends are sends."""
        self._handle()

    def Detach_buffer(self):
        """Nothing was attached."""
        self._handle()
        return None

    def Flush_buffer(self):
        """Nothing to flush."""
        self._handle()

    def Abort(self, errorcode=0):
        """Ends the job."""
        self._c.Abort(errorcode)

    def Create_intercomm(self, *args, **kwargs):
        """Not offered: intercommunicators."""
        raise NotImplementedError("intercommunicators are not offered by sperli")

    def Create_cart(self, *args, **kwargs):
        """Not offered: topologies."""
        raise NotImplementedError("process topologies are not offered by sperli")

    Create_graph = Create_dist_graph = Create_dist_graph_adjacent = Create_cart
    Cart_map = Graph_map = Create_cart
    Spawn = Spawn_multiple = Accept = Connect = Create_intercomm

    @classmethod
    def Get_parent(cls):
        """COMM_NULL (no spawned jobs)."""
        return Intercomm()

    # point-to-point

    def _rank_arg(self, r, what="rank"):
        n = self.Get_size()
        if r == PROC_NULL:
            return r
        if not isinstance(r, int) or not 0 <= r < n:
            raise Exception(ERR_RANK, f"{what} {r} is not a rank of {n}")
        return r

    def _source_arg(self, source):
        if source == ANY_SOURCE:
            if self.Get_size() == 1:
                return 0
            if self._handle() is not _world_h:
                raise Exception(ERR_UNSUPPORTED_OPERATION,
                                "a receive from ANY_SOURCE is offered on COMM_WORLD only")
            return source
        return self._rank_arg(source, "source")

    def _tag_arg(self, tag, recv=False):
        if recv and tag == ANY_TAG:
            return tag
        if not isinstance(tag, int) or not 0 <= tag <= _TAG_MAX:
            raise Exception(ERR_TAG, f"tag {tag} is not 0..={_TAG_MAX}")
        return tag + self._handle().base  # the wire tag

    def Send(self, buf, dest, tag=0):
        """Sends."""
        dest = self._rank_arg(dest, "dest")
        tag = self._tag_arg(tag)
        b = _msg(buf)
        if dest == PROC_NULL:
            return
        self._c.Send(b, dest, tag)

    Ssend = Bsend = Rsend = Send

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receives."""
        b = _msg(buf)
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
        """Not offered: a synchronous send request completes when the
        receive matched it, which the Rust API cannot tell (an Isend
        completes earlier; mapping one onto the other leaves unreceived
        messages behind a Cancel that cannot be had)."""
        raise NotImplementedError("synchronous send requests (Issend) are not offered by sperli")

    issend = Issend

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """A receive request."""
        source = self._source_arg(source)
        tag = self._tag_arg(tag, True)
        b = _msg(buf)
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
        sb, rb = _msg(sendbuf), _msg(recvbuf)
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
        b = _msg(buf)
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
        b = _msg(buf)
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

    def Mprobe(self, *a, **k):
        """Not offered: matched probes."""
        raise NotImplementedError("matched probes (Message) are not offered by sperli")

    Improbe = mprobe = improbe = Mprobe

    def Send_init(self, buf, dest, tag=0):
        """A persistent send (each Start is an Isend)."""
        self._rank_arg(dest, "dest")
        self._tag_arg(tag)
        return _persistent(lambda: self.Isend(buf, dest, tag))

    Ssend_init = Bsend_init = Rsend_init = Send_init

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

    ssend = bsend = send

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

    # collectives on buffers

    def Barrier(self):
        """Waits for every rank."""
        self._c.Barrier()

    def Bcast(self, buf, root=0):
        """Broadcasts."""
        self._c.Bcast(_msg(buf), self._root(root))

    def _root(self, root):
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
        sb, rb = _pair(_csend(sendbuf), _msg(recvbuf) if me else None, True)
        self._c.Reduce(sb, rb, self._op(op), root)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        """Reduces to every rank."""
        self._c.Allreduce(*_pair(_csend(sendbuf), _msg(recvbuf), True), self._op(op))

    def Gather(self, sendbuf, recvbuf, root=0):
        """Gathers to root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Gather(*_pair(_csend(sendbuf), _msg(recvbuf, self.Get_size()) if me else None), root)

    def Scatter(self, sendbuf, recvbuf, root=0):
        """Scatters from root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Scatter(*_pair(_msg(sendbuf, self.Get_size()) if me else None, _csend(recvbuf)), root)

    def Allgather(self, sendbuf, recvbuf):
        """Gathers to every rank."""
        self._c.Allgather(*_pair(_csend(sendbuf), _msg(recvbuf, self.Get_size())))

    def Alltoall(self, sendbuf, recvbuf):
        """Every rank's block to every rank."""
        n = self.Get_size()
        if sendbuf is None or sendbuf is IN_PLACE:
            rb = _msg(recvbuf, n)
            sb = _copy_of(rb)  # in place: the send data is recvbuf's, copied
        else:
            sb, rb = _pair(_msg(sendbuf, n), _msg(recvbuf, n))
        self._c.Alltoall(sb, rb)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None):
        """Reduces and scatters equal blocks (IN_PLACE: recvbuf holds every
        block and gets this rank's in its first block; sent from a copy)."""
        n = self.Get_size()
        if sendbuf is None or sendbuf is IN_PLACE:
            full = _msg(recvbuf)
            sb = _copy_of(full)
            rb = _first(full, len(_view(full)) // n if n else 0)
        else:
            sb, rb = _pair(_msg(sendbuf, n), _msg(recvbuf))
        self._c.Reduce_scatter_block(sb, rb, self._op(op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None):
        """Reduces and scatters blocks of `recvcounts` (default: each rank's
        recvbuf length): the package's Allreduce into a buffer of every
        block, this rank's block copied out."""
        n, me = self.Get_size(), self.Get_rank()
        rb = _msg(recvbuf)
        if recvcounts is None:
            if sendbuf is None or sendbuf is IN_PLACE:
                raise Exception(ERR_COUNT, "IN_PLACE Reduce_scatter needs recvcounts")
            recvcounts = self.allgather(len(_view(rb)))
        counts = [int(c) for c in recvcounts]
        if len(counts) != n:
            raise Exception(ERR_COUNT, f"{len(counts)} recvcounts for {n} ranks")
        start = sum(counts[:me])
        if sendbuf is None or sendbuf is IN_PLACE:
            sb = _copy_of(rb)  # recvbuf holds every block; the rest stays
        else:
            sb = _pair(_msg(sendbuf), rb)[0]
        full = _copy_of(sb)
        self._c.Allreduce(sb, full, self._op(op))
        if counts[me]:
            _view(rb)[:counts[me]] = _view(full)[start:start + counts[me]]

    def Scan(self, sendbuf, recvbuf, op=None):
        """Inclusive prefix reduction."""
        self._c.Scan(*_pair(_csend(sendbuf), _msg(recvbuf), True), self._op(op))

    def Exscan(self, sendbuf, recvbuf, op=None):
        """Exclusive prefix reduction."""
        self._c.Exscan(*_pair(_csend(sendbuf), _msg(recvbuf), True), self._op(op))

    def Gatherv(self, sendbuf, recvbuf, root=0):
        """Gathers blocks of any length to root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Gatherv(_csend(sendbuf), _vmsg(recvbuf, self.Get_size()) if me else None, root)

    def Scatterv(self, sendbuf, recvbuf, root=0):
        """Scatters blocks of any length from root."""
        root = self._root(root)
        me = self.Get_rank() == root
        self._c.Scatterv(_vmsg(sendbuf, self.Get_size()) if me else None, _csend(recvbuf), root)

    def Allgatherv(self, sendbuf, recvbuf):
        """Gathers blocks of any length to every rank."""
        self._c.Allgatherv(_csend(sendbuf), _vmsg(recvbuf, self.Get_size()))

    def Alltoallv(self, sendbuf, recvbuf):
        """Blocks of any length from every rank to every rank."""
        rb = _vmsg(recvbuf, self.Get_size())
        if sendbuf is None or sendbuf is IN_PLACE:
            # in place: the send data is recvbuf's blocks, from a copy
            sb = [_copy_of(rb[0])] + rb[1:] if isinstance(rb, list) else _copy_of(rb)
        else:
            sb = _vmsg(sendbuf, self.Get_size())
        self._c.Alltoallv(sb, rb)

    def _no(self, *a, **k):
        raise NotImplementedError("this collective is not offered by sperli")

    Alltoallw = Ialltoallw = _no

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
        me = self.Get_rank() == root
        return Request._of(self._c.Ireduce(_csend(sendbuf), _msg(recvbuf) if me else None,
                                           self._op(op), root))

    def Iallreduce(self, sendbuf, recvbuf, op=None):
        """An allreduce request."""
        return Request._of(self._c.Iallreduce(_csend(sendbuf), _msg(recvbuf), self._op(op)))

    def Igather(self, sendbuf, recvbuf, root=0):
        """A gather request."""
        root = self._root(root)
        me = self.Get_rank() == root
        return Request._of(self._c.Igather(_csend(sendbuf),
                                           _msg(recvbuf, self.Get_size()) if me else None, root))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """A scatter request."""
        root = self._root(root)
        me = self.Get_rank() == root
        return Request._of(self._c.Iscatter(_msg(sendbuf, self.Get_size()) if me else None,
                                            _csend(recvbuf), root))

    def Iallgather(self, sendbuf, recvbuf):
        """An allgather request."""
        return Request._of(self._c.Iallgather(_csend(sendbuf), _msg(recvbuf, self.Get_size())))

    # collectives on objects

    def barrier(self):
        """Waits for every rank."""
        self._c.barrier()

    def bcast(self, obj, root=0):
        """Broadcasts an object."""
        return self._c.bcast(obj, self._root(root))

    def gather(self, sendobj, root=0):
        """Gathers objects to root."""
        return self._c.gather(sendobj, self._root(root))

    def scatter(self, sendobj, root=0):
        """Scatters objects from root."""
        return self._c.scatter(sendobj, self._root(root))

    def allgather(self, sendobj):
        """Gathers objects to every rank."""
        return self._c.allgather(sendobj)

    def alltoall(self, sendobj):
        """Object i to rank i (pairs of sends and receives)."""
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

    def allreduce(self, sendobj, op=None):
        """Reduces an int, float, bool or numpy array to every rank."""
        return self._c.allreduce(sendobj, self._op(op))

    def reduce(self, sendobj, op=None, root=0):
        """Reduces to root."""
        return self._c.reduce(sendobj, self._op(op), self._root(root))

    def scan(self, sendobj, op=None):
        """Inclusive prefix reduction of an int, float or bool."""
        return self._c.scan(sendobj, self._op(op))

    def exscan(self, sendobj, op=None):
        """Exclusive prefix reduction (None on rank 0)."""
        return self._c.exscan(sendobj, self._op(op))

    def ibarrier(self):
        """A barrier request."""
        return self.Ibarrier()

    # the package's extras

    def py2f(self):
        """An integer for the handle."""
        return id(self._h) if self._h else 0


# A reserved tag of the alltoall of objects (the top of the tag range).
_A2A_TAG = _TAG_MAX


Comm._family = Comm


class Intracomm(Comm):
    """An intracommunicator."""


class Topocomm(Intracomm):
    """Topologies: not offered."""

    def __new__(cls, comm=None):
        if comm is None:
            return object.__new__(cls)
        raise NotImplementedError("process topologies are not offered by sperli")


class Cartcomm(Topocomm):
    """Cartesian topologies: not offered."""


class Graphcomm(Topocomm):
    """Graph topologies: not offered."""


class Distgraphcomm(Topocomm):
    """Distributed graph topologies: not offered."""


class Intercomm(Comm):
    """Intercommunicators: not offered (only COMM_NULL of this class)."""

    def __new__(cls, comm=None):
        if comm is None or comm._h is None:
            return Comm.__new__(cls)
        raise NotImplementedError("intercommunicators are not offered by sperli")


class Info:
    """Info objects: a dict (no hint changes anything)."""

    def __new__(cls, info=None):
        self = object.__new__(cls)
        self._d = None if info is None else info._d
        return self

    def __init__(self, info=None):
        pass

    @classmethod
    def Create(cls, items=None):
        """A new, empty Info."""
        i = cls()
        i._d = dict(items or {})
        return i

    def _info(self):
        if self._d is None:
            raise Exception(ERR_INFO, "INFO_NULL")
        return self._d

    def Free(self):
        """Frees it."""
        self._info()
        self._d = None

    def Dup(self):
        """A copy."""
        return Info.Create(self._info())

    def Get(self, key):
        """The value of key, or None."""
        return self._info().get(key)

    def Set(self, key, value):
        """Sets a key."""
        self._info()[key] = value

    def Delete(self, key):
        """Deletes a key."""
        if key not in self._d:
            raise Exception(ERR_INFO_NOKEY)
        del self._info()[key]

    def Get_nkeys(self):
        """Number of keys."""
        return len(self._info())

    def Get_nthkey(self, n):
        """The nth key."""
        return list(self._info())[n]

    def __len__(self):
        return len(self._info())

    def __iter__(self):
        return iter(self._info())

    def __getitem__(self, k):
        return self._info()[k]

    def __setitem__(self, k, v):
        self._info()[k] = v

    def __delitem__(self, k):
        del self._info()[k]

    def __contains__(self, k):
        return k in self._d

    def __eq__(self, other):
        return isinstance(other, Info) and self._d is other._d

    __hash__ = None

    def __bool__(self):
        return self._d is not None

    def keys(self):
        """Its keys."""
        return self._info().keys()

    def values(self):
        """Its values."""
        return self._info().values()

    def items(self):
        """Its items."""
        return self._info().items()

    def get(self, k, default=None):
        """As dict.get."""
        return self._info().get(k, default)


INFO_NULL = Info()
INFO_ENV = Info.Create()


def _absent(name, feature):
    """A class of a feature sperli does not offer: its null handle exists
    (X()), every constructor or call raises NotImplementedError naming it."""

    class Absent:
        def __new__(cls, other=None):
            if other is not None and bool(other):
                raise NotImplementedError(f"{feature} are not offered by sperli")
            return object.__new__(cls)

        def __bool__(self):
            return False

        def __eq__(self, other):
            return isinstance(other, Absent)

        def __ne__(self, other):
            return not self.__eq__(other)

        __hash__ = None

        def __reduce__(self):
            return _reduce(self, True)

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            raise NotImplementedError(f"{feature} are not offered by sperli ({name}.{attr})")

        @classmethod
        def _refuse(cls, *a, **k):
            raise NotImplementedError(f"{feature} are not offered by sperli")

    for ctor in ("Create", "Allocate", "Allocate_shared", "Create_dynamic", "Open", "Init",
                 "Probe", "Iprobe", "Create_keyval", "Free_keyval", "Create_errhandler",
                 "Delete", "Attach_buffer", "Detach_buffer"):
        setattr(Absent, ctor, Absent._refuse)
    Absent.__name__ = Absent.__qualname__ = name
    Absent.__doc__ = f"{feature.capitalize()}: not offered by sperli (only the null handle exists)."
    return Absent


Message = _absent("Message", "matched probes (Message)")
Win = _absent("Win", "one-sided communication windows (Win)")
File = _absent("File", "parallel I/O files (File)")
Session = _absent("Session", "sessions (Session)")
MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message()
WIN_NULL = Win()
FILE_NULL = File()
SESSION_NULL = Session()
(MODE_RDONLY, MODE_WRONLY, MODE_RDWR, MODE_CREATE, MODE_EXCL, MODE_DELETE_ON_CLOSE,
 MODE_UNIQUE_OPEN, MODE_SEQUENTIAL, MODE_APPEND) = (2, 4, 8, 1, 64, 16, 32, 256, 128)
(MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED) = (
    1024, 2048, 4096, 8192, 16384)
LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL = range(201, 206)
WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 2
SEEK_SET, SEEK_CUR, SEEK_END = 600, 602, 604
DISPLACEMENT_CURRENT = -54278278


class Pickle:
    """mpi4py's `MPI.pickle`: `dumps`/`loads` with a protocol. The package's
    lowercase calls pickle with the standard pickle module (this object's
    settings do not change what travels)."""

    def __init__(self, dumps=None, loads=None, protocol=None):
        self._dumps = dumps or _pickle.dumps
        self._loads = loads or _pickle.loads
        self.PROTOCOL = _pickle.HIGHEST_PROTOCOL if protocol is None else protocol
        if self.PROTOCOL < 0:
            self.PROTOCOL = _pickle.HIGHEST_PROTOCOL
        self.THRESHOLD = 1024 ** 2

    def dumps(self, obj):
        """Bytes of obj."""
        if self._dumps is _pickle.dumps:
            return _pickle.dumps(obj, self.PROTOCOL)
        return self._dumps(obj, self.PROTOCOL)

    def dumps_oob(self, obj):
        """(bytes, buffers)."""
        return self.dumps(obj), []

    def loads(self, data):
        """The object of bytes."""
        return self._loads(data)

    def loads_oob(self, data, buffers):
        """The object of bytes."""
        return self.loads(data)


pickle = Pickle()

# -- ops --------------------------------------------------------------------

class Op(_Handled):
    """A reduction: the package's ops (SUM, PROD, MIN, MAX, LAND, LOR,
    LXOR, BAND, BOR, BXOR). MAXLOC, MINLOC, REPLACE and NO_OP exist and are
    refused with ERR_OP where an op is taken; user ops (Op.Create) and
    applying an op locally (op(x, y), Reduce_local) are not offered: the
    Rust API does the reductions."""

    def __new__(cls, op=None):
        if op is not None and not isinstance(op, Op):
            raise TypeError(f"expected an Op, not {type(op).__name__}")
        self = object.__new__(cls)
        self._o, self._name = (None, None) if op is None else (op._o, op._name)
        return self

    @classmethod
    def _of(cls, native, name):
        op = cls()
        op._o, op._name = native, name
        return op

    def _key(self):
        return self._name

    def __repr__(self):
        return f"<MPI.Op {self._name or 'OP_NULL'}>"

    def __reduce__(self):
        if id(self) in _PREDEFINED or self._name is None:
            return _reduce(self, self._name is None)
        return (Op, (globals()[self._name],))

    def _native(self):
        if self._o is None:
            raise Exception(ERR_OP, f"MPI.{self._name or 'OP_NULL'} is not offered by sperli")
        return self._o

    def Is_commutative(self):
        """True: every predefined op commutes."""
        if self._name is None:
            raise Exception(ERR_OP, "OP_NULL")
        return self._name not in ("REPLACE", "NO_OP")

    is_commutative = property(Is_commutative)

    def Is_predefined(self):
        """True: only predefined ops exist."""
        return True

    is_predefined = property(Is_predefined)

    def Free(self):
        """Refused for a predefined op."""
        raise Exception(ERR_OP, "a predefined op cannot be freed")

    @classmethod
    def Create(cls, function, commute=False):
        """Not offered: user-defined reductions."""
        raise NotImplementedError("user-defined ops (Op.Create) are not offered by sperli")

    def Reduce_local(self, inbuf, inoutbuf):
        """Not offered: a local reduction."""
        raise NotImplementedError("Op.Reduce_local is not offered by sperli (the Rust API reduces)")

    def __call__(self, x, y):
        raise NotImplementedError("applying an op locally is not offered by sperli (the Rust API reduces)")


Op._family = Op
OP_NULL = Op()
for _n in ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
    globals()[_n] = Op._of(getattr(_s, _n), _n)
for _n in ("MAXLOC", "MINLOC", "REPLACE", "NO_OP"):
    globals()[_n] = Op._of(None, _n)

# -- the environment --------------------------------------------------------

_world = None
_world_h = None
_self_h = None
_state = {"initialized": False, "finalized": False, "thread": THREAD_SERIALIZED}


def Init():
    """Joins the job (done at import)."""
    _start()


def Init_thread(required=THREAD_MULTIPLE):
    """Joins the job; the thread level given is THREAD_SERIALIZED."""
    _start()
    return _state["thread"]


def Query_thread():
    """THREAD_SERIALIZED: the calls of one communicator run one at a time."""
    return _state["thread"]


def Is_thread_main():
    """Whether this is the main thread."""
    import threading
    return threading.current_thread() is threading.main_thread()


def Is_initialized():
    """Whether the job was joined."""
    return _state["initialized"]


def Is_finalized():
    """Whether Finalize ran."""
    return _state["finalized"]


def Finalize():
    """Ends this rank's job step (BYE)."""
    if not _state["finalized"]:
        _state["finalized"] = True
        _sp.finalize()


def Get_version():
    """(3, 1): the MPI level of the calls offered."""
    return (VERSION, SUBVERSION)


def Get_library_version():
    """The package's name and version."""
    return f"SPERLI {_s.__version__} (sperli.MPI: mpi4py's MPI over TLS 1.3)"


def get_vendor():
    """("SPERLI", version)."""
    v = tuple(int(x) for x in _s.__version__.split(".")[:3] if x.isdigit())
    return ("SPERLI", (v + (0, 0, 0))[:3])


def Get_processor_name():
    """The host's name."""
    return _socket.gethostname()


def Wtime():
    """Seconds on a monotonic clock."""
    return _time.perf_counter()


def Wtick():
    """The clock's resolution."""
    return _time.get_clock_info("perf_counter").resolution


def Get_address(location):
    """Not offered (no derived datatypes)."""
    raise NotImplementedError("MPI.Get_address is not offered by sperli")


def Attach_buffer(buf):
    """Accepted: buffered sends are sends."""


def Detach_buffer():
    """Nothing was attached."""
    return None


def Pcontrol(level):
    """Ignored."""


def Alloc_mem(size, info=INFO_NULL):
    """A bytearray of `size`."""
    return memoryview(bytearray(size))


def Free_mem(mem):
    """Drops it."""


def buffer(obj):
    """A memoryview of obj."""
    return memoryview(obj)


def _start():
    global _world, _world_h, _self_h
    if _world is not None:
        return
    _world = _sp.init()
    _state["initialized"] = True
    _world_h = _Handle(_world, range(_world.Get_size()), "MPI_COMM_WORLD")
    COMM_WORLD._h = _world_h
    try:
        me = _world.Split(_world.Get_rank(), 0)
        _self_h = _Handle(me, [_world.Get_rank()], "MPI_COMM_SELF")
    except _s.SperliError:
        _self_h = None
    COMM_SELF._h = _self_h


for _cls in (Comm, Intracomm, Datatype, Status, Request, Group, Errhandler, Info, Op):
    _wrap_class(_cls)
for _f in list(globals().values()):
    pass

COMM_NULL = Intracomm()
COMM_WORLD = Intracomm()
COMM_SELF = Intracomm()
COMM_TYPE_SHARED = 1
COMM_TYPE_HW_GUIDED = COMM_TYPE_HW_UNGUIDED = COMM_TYPE_RESOURCE_GUIDED = UNDEFINED
for _n, _v in list(globals().items()):
    if isinstance(_v, (Comm, Datatype, Group, Errhandler, Request, Info, Op)) and id(_v) not in _PREDEFINED:
        _PREDEFINED[id(_v)] = _n
        if isinstance(_v, Datatype) and _v._d is not None:
            _BY_SPEC.setdefault(_v._d, _v)
_start()

del _i, _n, _v, _c, _z, _w, _f, _cls
