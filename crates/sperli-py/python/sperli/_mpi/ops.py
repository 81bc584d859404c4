"""Reduction ops: the package's own."""

from .. import _sperli as _s
from .errors import ERR_OP, Exception
from .handles import _Handled, _PREDEFINED, _reduce


class Op(_Handled):
    """A reduction: the package's ops (SUM, PROD, MIN, MAX, LAND, LOR,
    LXOR, BAND, BOR, BXOR; MAXLOC and MINLOC on the value-index pair
    datatypes, HELLO feature bit 4). REPLACE and NO_OP exist and are
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

    def _null(self):
        self._o = self._name = None

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
for _n in ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
           "MAXLOC", "MINLOC"):
    globals()[_n] = Op._of(getattr(_s, _n), _n)
for _n in ("REPLACE", "NO_OP"):
    globals()[_n] = Op._of(None, _n)
