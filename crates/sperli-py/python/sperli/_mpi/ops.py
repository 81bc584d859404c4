"""Reduction ops: the package's predefined ones and user-defined ones
(Op.Create), applied to Python objects (op(x, y)) and to local buffers
(Reduce_local) as mpi4py applies them."""

from .. import _sperli as _s
from .buffers import _Allocated, buffer
from .datatypes import BYTE, Datatype, _BY_CHAR
from .errors import ERR_OP, Exception
from .handles import _Handled, _PREDEFINED, _reduce
from .msgspec import _datatype, _msg, _native, _pair, _rmsg, _view

# mpi4py's limit of live user-defined ops (its table of C callbacks).
_MAX_USER_OPS = 32
_USER_SLOTS = [None] * _MAX_USER_OPS


class _UserFn:
    """One user-defined op: its function, commutative flag and slot (the
    handle every Op object of it shares)."""

    def __init__(self, function, commute, slot):
        self.function, self.commute, self.slot = function, bool(commute), slot


def _maxloc(x, y):
    (u, i), (v, j) = x, y
    if u > v:
        return u, i
    if v > u:
        return v, j
    return (v, j) if j < i else (u, i)


def _minloc(x, y):
    (u, i), (v, j) = x, y
    if u < v:
        return u, i
    if v < u:
        return v, j
    return (v, j) if j < i else (u, i)


# mpi4py's predefined ops on Python objects (x the left operand).
_ON_OBJECTS = {
    "MAX": lambda x, y: y if y > x else x,
    "MIN": lambda x, y: y if y < x else x,
    "SUM": lambda x, y: x + y,
    "PROD": lambda x, y: x * y,
    "LAND": lambda x, y: bool(x) & bool(y),
    "BAND": lambda x, y: x & y,
    "LOR": lambda x, y: bool(x) | bool(y),
    "BOR": lambda x, y: x | y,
    "LXOR": lambda x, y: bool(x) ^ bool(y),
    "BXOR": lambda x, y: x ^ y,
    "MAXLOC": _maxloc,
    "MINLOC": _minloc,
    "REPLACE": lambda x, y: y,
    "NO_OP": lambda x, y: x,
}


def _spec_datatype(spec, view):
    """The Datatype a buffer spec names (its type item), else the one of
    the buffer's format (BYTE when none fits)."""
    if isinstance(spec, (list, tuple)):
        for x in list(spec)[1:]:
            if isinstance(x, (Datatype, str)):
                return _datatype(x)
    return _BY_CHAR.get(_native(_view(view).format), BYTE)


def _copy(data):
    """An MPI.buffer of its own holding `data`'s bytes."""
    b = _Allocated(len(data))
    b[:] = data
    return b


class Op(_Handled):
    """A reduction: the package's predefined ops (SUM, PROD, MIN, MAX, LAND,
    LOR, LXOR, BAND, BOR, BXOR; MAXLOC and MINLOC on the value-index pair
    datatypes, HELLO feature bit 4; REPLACE and NO_OP on Python objects
    and refused with ERR_OP on buffers) and user-defined ones
    (Op.Create), which the Rust API folds in ascending rank order
    (protocol §17.4)."""

    def __new__(cls, op=None):
        if op is not None and not isinstance(op, Op):
            raise TypeError(f"expected an Op, not {type(op).__name__}")
        self = object.__new__(cls)
        if op is None:
            self._o = self._name = self._user = None
        else:
            self._o, self._name, self._user = op._o, op._name, op._user
        self._picklable = True
        return self

    @classmethod
    def _of(cls, native, name):
        op = cls()
        op._o, op._name = native, name
        return op

    def _key(self):
        return self._name if self._user is None else self._user

    def _null(self):
        self._o = self._name = self._user = None

    def __repr__(self):
        if self._user is not None:
            return f"<MPI.Op user-defined {self._user.function!r}>"
        return f"<MPI.Op {self._name or 'OP_NULL'}>"

    @classmethod
    def fromhandle(cls, handle):
        """A new object for the handle `handle` (a user-defined op's cannot
        be pickled, as in mpi4py)."""
        op = super().fromhandle(handle)
        op._picklable = False
        return op

    def __reduce__(self):
        if self._user is not None:
            if not self._picklable:
                raise ValueError("cannot pickle user-defined reduction operation")
            return (type(self).Create, (self._user.function, self._user.commute))
        if id(self) in _PREDEFINED or self._name is None:
            return _reduce(self, self._name is None)
        return (Op, (globals()[self._name],))

    def _native(self):
        if self._o is None:
            what = "a user-defined op" if self._user is not None else f"MPI.{self._name or 'OP_NULL'}"
            raise Exception(ERR_OP, f"{what} is not offered by sperli here")
        return self._o

    def Is_commutative(self):
        """Whether the op commutes: every predefined op but REPLACE and
        NO_OP; a user op as created."""
        if self._user is not None:
            return self._user.commute
        if self._name is None:
            raise Exception(ERR_OP, "OP_NULL")
        return self._name not in ("REPLACE", "NO_OP")

    is_commutative = property(Is_commutative)

    def Is_predefined(self):
        """False for a user-defined op."""
        return self._user is None

    is_predefined = property(Is_predefined)

    def Free(self):
        """Frees a user-defined op (its every copy becomes OP_NULL's
        equal); refused for a predefined op."""
        if self._user is None:
            raise Exception(ERR_OP, "a predefined op cannot be freed")
        if _USER_SLOTS[self._user.slot] is self._user:
            _USER_SLOTS[self._user.slot] = None
        self._null()

    @classmethod
    def Create(cls, function, commute=False):
        """A user-defined op: `function(inbuf, inoutbuf, datatype)` leaves
        `inbuf op inoutbuf` in `inoutbuf` (inbuf the left operand, the
        lower ranks' partial); on Python objects `op(x, y)` returns
        `function(x, y, None)`. At most 32 live at once (RuntimeError
        beyond, as mpi4py). Every call folds in ascending rank order,
        whatever `commute` says (protocol §17.4)."""
        if not callable(function):
            raise TypeError(f"expected a callable, not {type(function).__name__}")
        try:
            slot = _USER_SLOTS.index(None)
        except ValueError:
            raise RuntimeError("cannot create too many user-defined reduction operations") from None
        op = cls()
        op._user = _USER_SLOTS[slot] = _UserFn(function, commute, slot)
        return op

    def _fold(self, datatype):
        """The user function as the fold of the Rust API: `fold(acc,
        right)` leaves `acc op right` in the bytearray `acc`."""
        function = self._user.function

        def fold(acc, right):
            inbuf, inoutbuf = _copy(acc), _copy(right)
            function(inbuf, inoutbuf, datatype)
            acc[:] = inoutbuf

        return fold

    def Reduce_local(self, inbuf, inoutbuf):
        """`inoutbuf = inbuf op inoutbuf` on this rank's buffers (one
        datatype and count, else ValueError)."""
        a, b = _pair(_msg(inbuf), _rmsg(inoutbuf), True)
        if self._user is None:
            _s._reduce_local(a, b, self._native())
            return
        datatype = _spec_datatype(inoutbuf, b)
        dst = _view(b).cast("B") if _view(b).format != "B" else _view(b)
        left, result = _copy(_view(a).cast("B")), _copy(dst)
        self._user.function(left, result, datatype)
        dst[:] = result

    def __call__(self, x, y):
        """The op on Python objects, as mpi4py applies it (x the left
        operand): MAXLOC and MINLOC on (value, index) pairs, ties to the
        smaller index; a user op calls its function with datatype None."""
        if self._user is not None:
            return self._user.function(x, y, None)
        if self._name is None:
            raise ValueError("cannot call user-defined operation")
        return _ON_OBJECTS[self._name](x, y)


def _user(op):
    """Whether `op` is a user-defined Op."""
    return isinstance(op, Op) and op._user is not None


Op._family = Op
OP_NULL = Op()
for _n in ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
           "MAXLOC", "MINLOC"):
    globals()[_n] = Op._of(getattr(_s, _n), _n)
for _n in ("REPLACE", "NO_OP"):
    globals()[_n] = Op._of(None, _n)
