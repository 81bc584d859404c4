"""Where a message's memory is: a memoryview of the buffer protocol, or of
host memory an exporter names by ``__cuda_array_interface__``,
``__dlpack__`` or ``__array_interface__`` (checked as mpi4py checks
them), ``MPI.buffer`` and ``MPI.Get_address``. Nothing here copies."""

import ctypes as _ctypes
import errno as _errno
import mmap as _mmap
import operator as _operator
import os as _os
import sys as _sys
import warnings as _warnings
import weakref as _weakref


_TYPESTR = {"i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "u2": "H",
            "u4": "I", "u8": "Q", "f4": "f", "f8": "d", "b1": "?"}
_NATIVE = "<" if _sys.byteorder == "little" else ">"
_kDLCPU, _kDLCUDAHost = 1, 3


def _raw_view(addr, nbytes, readonly, char, owner, release=None):
    """A memoryview of `nbytes` at `addr` as elements `char`; the view
    keeps `owner` (the memory's exporter) alive as long as it lives, so a
    request's buffer cannot be freed under it, and calls `release` (a
    DLPack deleter) when it goes."""
    if nbytes == 0:
        if release is not None:
            release()
        mv = memoryview(bytearray()).cast(char)
    else:
        raw = (_ctypes.c_char * nbytes).from_address(addr)
        raw._owner = owner
        if release is not None:
            _weakref.finalize(raw, release)
        mv = memoryview(raw).cast("B")
        if char != "B":
            mv = mv.cast(char)
    return mv.toreadonly() if readonly else mv


class _IOVec(_ctypes.Structure):
    _fields_ = [("base", _ctypes.c_void_p), ("len", _ctypes.c_size_t)]


_libc = _ctypes.CDLL(None, use_errno=True)
_PAGE = _mmap.PAGESIZE
_IOV_MAX = 1024


def _readable(addr, nbytes):
    """Whether the CPU may read every page of the `nbytes` at `addr`: one
    byte of each page read by ``process_vm_readv`` on this process (which
    fails where the pages are not mapped readable, as device memory is:
    CUDA reserves its unified addresses without access rights). None when
    the call is not allowed here."""
    first, last = addr // _PAGE, (addr + nbytes - 1) // _PAGE
    pages = [max(addr, p * _PAGE) for p in range(first, last + 1)]
    pid = _os.getpid()
    for i in range(0, len(pages), _IOV_MAX):
        chunk = pages[i:i + _IOV_MAX]
        scratch = (_ctypes.c_char * len(chunk))()
        local = _IOVec(_ctypes.cast(scratch, _ctypes.c_void_p), len(chunk))
        remote = (_IOVec * len(chunk))(*[_IOVec(p, 1) for p in chunk])
        got = _libc.process_vm_readv(pid, _ctypes.byref(local), 1, remote, len(chunk), 0)
        if got < 0 and _ctypes.get_errno() in (_errno.ENOSYS, _errno.EPERM):
            return None
        if got != len(chunk):
            return False
    return True


def _mapped_readable(addr, nbytes):
    """_readable from /proc/self/maps (slower: where process_vm_readv is
    not allowed)."""
    end = addr + nbytes
    try:
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return False
    spans = []
    for line in maps:
        fields = line.split()
        if fields[1][0] == "r":
            spans.append(tuple(int(x, 16) for x in fields[0].split("-")))
    at = addr
    for lo, hi in sorted(spans):
        if lo <= at < hi:
            at = hi
            if at >= end:
                return True
    return False


def _host_memory(addr, nbytes):
    """Whether the `nbytes` at `addr` are memory of this process the CPU
    may read: host memory an exporter calls device memory is (mpi4py hands
    either to MPI as it is); a device pointer is not. Whether it may be
    written is the exporter's read-only flag, as for every buffer."""
    if nbytes == 0:
        return True
    if addr == 0:
        return False
    ok = _readable(addr, nbytes)
    return _mapped_readable(addr, nbytes) if ok is None else ok


def _device(obj):
    """Whether `obj` says its memory is device memory (mpi4py's test:
    a ``__dlpack_device__`` other than CPU, or a ``__cuda_array_interface__``
    without the buffer protocol)."""
    if hasattr(obj, "__dlpack_device__"):
        return _operator.index(obj.__dlpack_device__()[0]) not in (_kDLCPU, _kDLCUDAHost)
    if hasattr(obj, "__cuda_array_interface__"):
        try:
            memoryview(obj)
            return False
        except TypeError:
            return True
    return False


def _contiguous(shape, strides, itemsize):
    """Whether strides (in bytes) lay out shape C- or Fortran-contiguously
    (dimensions of one element skipped, as mpi4py)."""
    for order in (range(len(shape) - 1, -1, -1), range(len(shape))):
        expect, ok = itemsize, True
        for i in order:
            if shape[i] == 1:
                continue
            if strides[i] != expect:
                ok = False
                break
            expect *= shape[i]
        if ok:
            return True
    return False


def _cai_view(obj):
    """The view of a ``__cuda_array_interface__`` (read as host memory)."""
    d = obj.__cuda_array_interface__
    if not isinstance(d, dict):
        raise TypeError(f"__cuda_array_interface__: expecting a dict, got {type(d).__name__}")
    data = d["data"]
    if not isinstance(data, tuple):
        raise TypeError(f"__cuda_array_interface__: 'data' is a {type(data).__name__}, not a tuple")
    if len(data) != 2:
        raise ValueError(f"__cuda_array_interface__: 'data' has {len(data)} items, not 2")
    addr, readonly = data
    if d.get("mask") is not None:
        raise BufferError("__cuda_array_interface__: cannot handle masked arrays")
    typestr = d["typestr"]
    if not isinstance(typestr, str):
        raise TypeError(f"__cuda_array_interface__: 'typestr' is a {type(typestr).__name__}")
    shape = d["shape"]
    if not isinstance(shape, tuple):
        raise TypeError(f"__cuda_array_interface__: 'shape' is a {type(shape).__name__}, not a tuple")
    strides = d.get("strides")
    if strides is not None and not isinstance(strides, tuple):
        raise TypeError(f"__cuda_array_interface__: 'strides' is a {type(strides).__name__}")
    descr = d.get("descr")
    if descr is not None and not isinstance(descr, list):
        raise TypeError(f"__cuda_array_interface__: 'descr' is a {type(descr).__name__}, not a list")
    byteorder, kind, itemsize = typestr[:1], typestr[1:2], int(typestr[2:])
    if byteorder not in ("<", ">", "|", "="):
        raise BufferError(f"__cuda_array_interface__: byte order {byteorder!r}")
    if byteorder in "<>" and byteorder != _NATIVE and itemsize > 1:
        raise BufferError("__cuda_array_interface__: not the machine's byte order")
    n = 1
    for s in shape:
        if _operator.index(s) < 0:
            raise BufferError(f"__cuda_array_interface__: shape {shape}")
        n *= s
    if strides is not None and not _contiguous(shape, strides, itemsize):
        raise BufferError("__cuda_array_interface__: the buffer is not contiguous")
    char = _TYPESTR.get(typestr[1:], "B")
    if kind == "V" and descr is not None and len(descr) > 1:
        _warnings.warn(f"__cuda_array_interface__: typestr {typestr!r} with {len(descr)} fields "
                       "in descr: the buffer is read as bytes", RuntimeWarning, stacklevel=4)
    if not _host_memory(addr, n * itemsize):
        raise BufferError("__cuda_array_interface__: the memory is not host memory of this process")
    return _raw_view(addr, n * itemsize, bool(readonly), char, obj)


def _array_interface_view(d, owner):
    """The view of an ``__array_interface__`` of a contiguous array."""
    addr, readonly = d["data"]
    shape = d.get("shape", ())
    itemsize = int(d["typestr"][2:])
    n = 1
    for s in shape:
        n *= s
    strides = d.get("strides")
    if strides not in (None, ()) and not _contiguous(shape, strides, itemsize):
        raise BufferError("__array_interface__: the buffer is not contiguous")
    return _raw_view(addr, n * itemsize, bool(readonly), _TYPESTR.get(d["typestr"][1:], "B"), owner)


class _DLTensor(_ctypes.Structure):
    _fields_ = [("data", _ctypes.c_void_p), ("device_type", _ctypes.c_int32),
                ("device_id", _ctypes.c_int32), ("ndim", _ctypes.c_int32),
                ("code", _ctypes.c_uint8), ("bits", _ctypes.c_uint8), ("lanes", _ctypes.c_uint16),
                ("shape", _ctypes.POINTER(_ctypes.c_int64)),
                ("strides", _ctypes.POINTER(_ctypes.c_int64)), ("byte_offset", _ctypes.c_uint64)]


_api = _ctypes.pythonapi
_api.PyCapsule_IsValid.restype = _ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [_ctypes.py_object, _ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = _ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [_ctypes.py_object, _ctypes.c_char_p]
_api.PyCapsule_SetName.restype = _ctypes.c_int
_api.PyCapsule_SetName.argtypes = [_ctypes.py_object, _ctypes.c_char_p]
_DELETER = _ctypes.CFUNCTYPE(None, _ctypes.c_void_p)
_USED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}


def _dlpack_view(obj):
    """The view of a DLPack exporter of host memory (a CPU device, or any
    device whose pointer is host memory of this process). Its capsule is consumed
    as the protocol asks (renamed "used_..."); the tensor's deleter runs
    when the view goes (the view keeps the exporter and the capsule
    alive until then)."""
    device = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_kDLCPU, 0)
    device_type, device_id = device
    device_type, device_id = _operator.index(device_type), _operator.index(device_id)
    # mpi4py's stream: none for host memory, -1 (no synchronisation) for
    # a device's.
    stream = None if device_type in (_kDLCPU, _kDLCUDAHost) else -1
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        capsule = obj.__dlpack__(stream=stream)
    name = next((n for n in _USED if capsule is not None and _api.PyCapsule_IsValid(capsule, n)), None)
    if name is None:
        raise BufferError("dlpack: expecting a DLPack capsule (not used before)")
    managed = _api.PyCapsule_GetPointer(capsule, name)
    readonly = False
    if name == b"dltensor_versioned":
        # version (2 x u32), manager_ctx, deleter, flags (u64), then the tensor
        major = _ctypes.c_uint32.from_address(managed).value
        if major != 1:
            raise BufferError(f"dlpack: version {major} (expecting 1)")
        deleter = _ctypes.c_void_p.from_address(managed + 16).value
        readonly = bool(_ctypes.c_uint64.from_address(managed + 24).value & 1)
        t = _DLTensor.from_address(managed + 32)
    else:
        # the tensor, then manager_ctx, deleter
        t = _DLTensor.from_address(managed)
        deleter = _ctypes.c_void_p.from_address(managed + _ctypes.sizeof(_DLTensor) + 8).value
    if t.ndim < 0:
        raise BufferError(f"dlpack: {t.ndim} dimensions")
    if t.ndim > 0 and not t.shape:
        raise BufferError("dlpack: no shape")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if any(s < 0 for s in shape):
        raise BufferError(f"dlpack: shape {shape}")
    itemsize = (t.bits * t.lanes + 7) // 8
    if t.strides:
        strides = tuple(t.strides[i] for i in range(t.ndim))
        if any(s < 0 for s in strides):
            raise BufferError(f"dlpack: strides {strides}")
        if not _contiguous(shape, strides, 1):
            raise BufferError("dlpack: the buffer is not contiguous")
    n = 1
    for s in shape:
        n *= s
    kind = {0: "i", 1: "u", 2: "f"}.get(t.code) if t.lanes == 1 else None
    char = _TYPESTR.get(f"{kind}{itemsize}", "B") if kind else "B"  # else: bytes
    addr = (t.data or 0) + t.byte_offset
    # Memory an exporter calls device memory is read where it is when it
    # is host memory of this process (as mpi4py hands any DLPack pointer
    # to MPI), refused otherwise: SPERLI reads host memory only.
    if device_type not in (_kDLCPU, _kDLCUDAHost) and \
            not _host_memory(addr, n * itemsize):
        raise BufferError(f"dlpack: device type {device_type}: the memory is not host memory")
    _api.PyCapsule_SetName(capsule, _USED[name])

    def release(capsule=capsule, managed=managed, deleter=deleter):
        if deleter:
            _DELETER(deleter)(managed)

    return _raw_view(addr, n * itemsize, readonly, char, obj, release)


def _view(obj):
    """`obj` as a memoryview: the buffer protocol, else an array
    interface (`__cuda_array_interface__` of host memory, `__dlpack__`
    of a CPU array, `__array_interface__`); TypeError for an object with
    none of them."""
    if isinstance(obj, memoryview):
        return obj
    if isinstance(obj, buffer):
        return obj._view()
    try:
        return memoryview(obj)
    except TypeError:
        pass
    if hasattr(obj, "__dlpack__"):
        return _dlpack_view(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai_view(obj)
    d = getattr(obj, "__array_interface__", None)
    if isinstance(d, dict):
        return _array_interface_view(d, obj)
    raise TypeError(f"a {type(obj).__name__} object is not a buffer")


class _Py_buffer(_ctypes.Structure):
    _fields_ = [("buf", _ctypes.c_void_p), ("obj", _ctypes.py_object), ("len", _ctypes.c_ssize_t),
                ("itemsize", _ctypes.c_ssize_t), ("readonly", _ctypes.c_int), ("ndim", _ctypes.c_int),
                ("format", _ctypes.c_char_p), ("shape", _ctypes.c_void_p), ("strides", _ctypes.c_void_p),
                ("suboffsets", _ctypes.c_void_p), ("internal", _ctypes.c_void_p)]


_api.PyObject_GetBuffer.argtypes = [_ctypes.py_object, _ctypes.POINTER(_Py_buffer), _ctypes.c_int]
_api.PyBuffer_Release.argtypes = [_ctypes.POINTER(_Py_buffer)]


def _address(mv):
    """The address of a memoryview's first byte."""
    b = _Py_buffer()
    _api.PyObject_GetBuffer(mv, _ctypes.byref(b), 0x98)  # PyBUF_ANY_CONTIGUOUS
    try:
        return b.buf or 0
    finally:
        _api.PyBuffer_Release(_ctypes.byref(b))


def Get_address(location):
    """The address of a buffer's memory (any buffer a message takes)."""
    if location is None:
        return 0
    return _address(_view(location))


class buffer:
    """mpi4py's ``MPI.buffer``: bytes of memory where they are (a buffer,
    an allocation, an address), with its address, size and elements."""

    def __init__(self, obj=None):
        if obj is None:
            self._mv = memoryview(b"")
        elif isinstance(obj, buffer):
            self._mv = obj._view()
        else:
            self._mv = _view(obj)
        self._mv = self._mv.cast("B") if self._mv.format != "B" or self._mv.ndim != 1 else self._mv
        self._obj = obj
        # As mpi4py's: the bytes of memory its exporter calls device memory
        # are not read or written through the buffer object.
        self._on_device = obj._on_device if isinstance(obj, buffer) else _device(obj)

    _on_device = False

    def _host_view(self):
        if self._on_device:
            raise BufferError("the buffer's exporter says it is device memory")
        return self._view()

    def _view(self):
        if self._mv is None:
            raise ValueError("operation forbidden on released buffer object")
        return self._mv

    @staticmethod
    def allocate(nbytes, clear=False):
        """A new buffer of `nbytes` of its own (zeroed: always)."""
        if nbytes < 0:
            raise ValueError(f"negative buffer size {nbytes}")
        return _Allocated(nbytes)

    @staticmethod
    def frombuffer(obj, readonly=False):
        """The buffer of an object (its memory where it is)."""
        b = buffer(obj)
        if not readonly and b._mv.readonly:
            raise BufferError("the object's buffer is read-only")
        return b

    @staticmethod
    def fromaddress(address, nbytes, readonly=False):
        """The `nbytes` at `address`."""
        if nbytes < 0:
            raise ValueError(f"negative buffer size {nbytes}")
        if address == 0 and nbytes > 0:
            raise ValueError("a null address of a non-empty buffer")
        b = buffer()
        b._mv = _raw_view(address, nbytes, readonly, "B", None)
        b._obj = None
        return b

    address = property(lambda self: _address(self._view()), doc="The address of the first byte.")
    nbytes = property(lambda self: self._view().nbytes, doc="Its size in bytes.")
    readonly = property(lambda self: self._view().readonly, doc="Whether it is read-only.")
    obj = property(lambda self: self._obj, doc="The object it views.")
    format = property(lambda self: "B", doc="Bytes.")
    itemsize = property(lambda self: 1, doc="One byte.")

    def cast(self, format, shape=None):
        """A memoryview of its bytes as `format` (and `shape`)."""
        v = self._host_view()
        return v.cast(format) if shape is None else v.cast(format, shape)

    def tobytes(self, order=None):
        """Its bytes."""
        return self._host_view().tobytes()

    def toreadonly(self):
        """A read-only buffer of the same memory."""
        b = buffer(self)
        b._mv = self._view().toreadonly()
        return b

    def release(self):
        """Drops the view."""
        if self._mv is not None:
            self._mv.release()
        self._mv = None

    def __len__(self):
        return self._view().nbytes

    def __getitem__(self, i):
        r = self._host_view()[i]
        return buffer(r) if isinstance(r, memoryview) else r

    def __setitem__(self, i, v):
        self._host_view()[i] = v._view() if isinstance(v, buffer) else v

    def __buffer__(self, flags):  # Python >= 3.12
        return self._view()

    def __repr__(self):
        return f"<MPI.buffer of {len(self)} bytes>" if self._mv is not None else "<MPI.buffer released>"

    @property
    def __array_interface__(self):
        v = self._view()
        return {"data": (_address(v), v.readonly), "shape": (v.nbytes,), "typestr": "|u1",
                "version": 3}


class _Allocated(bytearray, buffer):
    """An MPI.buffer of memory of its own (`buffer.allocate`,
    `MPI.Alloc_mem`): a bytearray too, so that `memoryview(mem)` and
    `numpy.frombuffer(mem)` work on every Python (a Python class has no
    buffer protocol of its own before 3.12)."""

    def _view(self):
        return memoryview(self)

    obj = property(lambda self: None, doc="None: the memory is its own.")

    def release(self):
        """Nothing to drop: the memory is its own."""

    def toreadonly(self):
        """A read-only buffer of the same memory."""
        b = buffer(self)
        b._mv = b._mv.toreadonly()
        return b
