"""The base of mpi4py's handle objects and their pickling as predefined names."""


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
    raise ValueError(f"cannot pickle {type(obj).__name__} handles")
