"""Datatypes: the predefined types of the element types (protocol §8.3,
and bool, int8, int16, uint16 of feature bit 4, §17.2), the named
types whose calls are refused, and DATATYPE_NULL for the C types SPERLI
does not carry."""

from .attributes import _AttrMixin, _type_keyvals
from .errors import ERR_TYPE, Exception
from .handles import _BY_SPEC, _Handled, _PREDEFINED, _reduce


class Datatype(_Handled):
    """A predefined datatype: `size`, `extent`, `lb`, `ub`, `typechar`,
    `name`; `DATATYPE_NULL` is the null handle."""

    def __new__(cls, datatype=None):
        if datatype is not None and not isinstance(datatype, Datatype):
            raise TypeError(f"expected a Datatype, not {type(datatype).__name__}")
        self = object.__new__(cls)
        if datatype is None:
            self._d = self._tok = None
        else:
            self._d, self._tok = datatype._d, datatype._tok
        return self

    def _key(self):
        # One handle: the predefined type, or one Dup of it.
        return self._tok

    def _null(self):
        self._d = self._tok = None

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
    # With HELLO feature bit 4 (protocol §17.2); refused with H1618 in a
    # job where a rank lacks it.
    "INT8_T": ("b", 1, "b"), "INT16_T": ("h", 2, "h"), "UINT16_T": ("H", 2, "H"),
    "BOOL": ("?", 1, "?"),
    # The value-index pairs of MINLOC and MAXLOC (bit 4, protocol §17.2):
    # packed, value then int32 index, as numpy's structured dtype
    # [("v", value), ("i", "<i4")] exports them.
    "FLOAT_INT": ("T{<f:v:<i:i:}", 8, "T{<f:v:<i:i:}"),
    "DOUBLE_INT": ("T{<d:v:<i:i:}", 12, "T{<d:v:<i:i:}"),
    "LONG_INT": ("T{<q:v:<i:i:}", 12, "T{<q:v:<i:i:}"),
    "TWOINT": ("T{<i:v:<i:i:}", 8, "T{<i:v:<i:i:}"),
    "INT_INT": ("T{<i:v:<i:i:}", 8, "T{<i:v:<i:i:}"),
    "SHORT_INT": ("T{<h:v:<i:i:}", 6, "T{<h:v:<i:i:}"),
}
for _n, (_c, _z, _w) in _TYPES.items():
    globals()[_n] = _dt("MPI_" + _n, _c, _z, _w)
# Types SPERLI does not carry: DATATYPE_NULL (mpi4py's "not in this MPI").
for _n in ["UNSIGNED_CHAR", "SIGNED_CHAR", "SHORT", "UNSIGNED_SHORT", "C_BOOL", "LONG_DOUBLE",
           "WCHAR", "SIGNED_SHORT", "C_COMPLEX", "C_FLOAT_COMPLEX",
           "C_DOUBLE_COMPLEX", "C_LONG_DOUBLE_COMPLEX", "CXX_BOOL",
           "CXX_FLOAT_COMPLEX", "CXX_DOUBLE_COMPLEX", "CXX_LONG_DOUBLE_COMPLEX",
           "LONG_DOUBLE_INT", "UB", "LB", "CHARACTER",
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


class _TypeAttrs(_AttrMixin):
    """Attributes of a datatype (one dict per predefined type)."""


_TypeAttrs._kv = _type_keyvals
_TypeAttrs._attrs = lambda self: (self._spec(), self.__dict__.setdefault("_attrd", {}))[1]
for _name in ("Create_keyval", "Free_keyval", "Set_attr", "Get_attr", "Delete_attr",
              "_predefined", "_copy_attrs", "_delete_attrs", "_attrs", "_kv"):
    setattr(Datatype, _name, _TypeAttrs.__dict__.get(_name, getattr(_TypeAttrs, _name)))
