"""``Info`` and the classes of features not offered (``Message``, ``Win``,
``File``, ``Session``: only their null handles)."""

from .errors import ERR_INFO, ERR_INFO_NOKEY, Exception
from .handles import _reduce


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
