"""The base of mpi4py's handle objects and their pickling as predefined names."""


# The handle model: `obj.handle` is an integer naming the object's MPI
# handle (0: the null one) and `cls.fromhandle(h)` a new object for it.
# _HANDLES keeps one object of each handle named so far (so the identity
# behind it, and the integer, stay unique).
_HANDLES = {}
_HANDLE_OF = {}
_PREDEFINED_KEYS = {}  # (family, id(key)) of a predefined handle: that object


class _HandleModel:
    """`handle`, `fromhandle`, `py2f`, `f2py` and the safe `free` of an
    mpi4py handle class: its `_key()` (None: null) names the handle within
    its `_family`, `_null()` makes this object the null handle."""

    _family = object

    def _ident(self):
        return (self._family, id(self._key()))

    @property
    def handle(self):
        """The handle as an integer (0 for the null handle)."""
        if self._key() is None:
            return 0
        ident = self._ident()
        h = _HANDLE_OF.get(ident)
        # A number whose object no longer names this handle was another
        # handle's, freed, whose key had the same id(): a new number.
        if h is None or _HANDLES[h]._key() is not self._key():
            h = _HANDLE_OF[ident] = len(_HANDLES) + 1
            _HANDLES[h] = self
        return h

    @classmethod
    def fromhandle(cls, handle):
        """A new object of this class for the handle `handle`."""
        if handle == 0:
            return cls()
        obj = _HANDLES.get(handle)
        if obj is None or not isinstance(obj, cls._family):
            raise ValueError(f"{handle} is not a {cls.__name__} handle")
        return cls(obj)

    def py2f(self):
        """The handle as an integer."""
        return self.handle

    @classmethod
    def f2py(cls, arg):
        """The object of an integer of py2f."""
        return cls.fromhandle(arg)

    def free(self):
        """mpi4py's safe free: nothing for a null or predefined handle; an
        object for a predefined handle becomes null; any other is freed."""
        if self._key() is None or id(self) in _PREDEFINED:
            return
        if self._ident() in _PREDEFINED_KEYS:
            self._null()
        else:
            self.Free()
            self._null()


def _handleof(obj):
    """mpi4py's MPI._handleof: the integer of a handle object (a Status's
    address)."""
    if isinstance(obj, _HandleModel):
        return obj.handle
    from .status import Status
    if isinstance(obj, Status):
        return id(obj)
    raise TypeError(f"not an MPI object: {type(obj).__name__}")


def _addressof(obj):
    """mpi4py's MPI._addressof: where the object's handle is (here: the
    object)."""
    _handleof(obj)
    return id(obj)


def _sizeof(arg):
    """mpi4py's MPI._sizeof: bytes of the MPI object of a handle class or
    object (a handle: 8; a Status: its five fields of 8)."""
    from .status import Status
    cls = arg if isinstance(arg, type) else type(arg)
    if issubclass(cls, Status):
        return 40
    if issubclass(cls, _HandleModel):
        return 8
    raise TypeError(f"not an MPI object or class: {arg!r}")


class _Handled(_HandleModel):
    """An mpi4py handle: equal by `_key()` within its `_family`, null (false)
    when the key is None, unhashable, pickled by `_reduce`."""

    _family = object
    _slot = "_v"  # the attribute holding the handle's value (None: null)

    def __new__(cls, other=None):
        if other is not None and not isinstance(other, cls._family):
            raise TypeError(f"expected a {cls._family.__name__}, not {type(other).__name__}")
        self = object.__new__(cls)
        setattr(self, cls._slot, None if other is None else getattr(other, cls._slot))
        return self

    def _null(self):
        setattr(self, self._slot, None)

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


_NONE = object()
_PREDEFINED = {}
_BY_SPEC = {}


def _reduce(obj, null):
    """Pickles a predefined handle as its name (the same object back), a
    null handle as a new null one; others cannot travel."""
    name = _PREDEFINED.get(id(obj))
    if name is not None:
        return name
    if null:
        return (type(obj), ())
    pre = _PREDEFINED_KEYS.get(obj._ident()) if isinstance(obj, _HandleModel) else None
    if pre is not None:
        return (type(obj), (pre,))  # a new object for the predefined handle
    raise ValueError(f"cannot pickle {type(obj).__name__} handles")
