"""``Info`` and the classes of features not offered (``Message``, ``Win``,
``File``, ``Session``: only their null handles)."""

from .errors import ERR_ARG, ERR_INFO, ERR_INFO_NOKEY, Exception
from .handles import _HandleModel, _reduce


class Info(_HandleModel):
    """Info objects: keys and values as strings (no hint changes
    anything); the dict-like calls of mpi4py (`keys`, `values`, `items`
    as lists, `update`, `copy`, `pop`, `popitem`, `clear`)."""

    def __new__(cls, info=None):
        if info is not None and not isinstance(info, Info):
            raise TypeError(f"expected an Info, not {type(info).__name__}")
        self = object.__new__(cls)
        self._d = None if info is None else info._d
        return self

    def _key(self):
        return self._d

    def _null(self):
        self._d = None

    def __init__(self, info=None):
        pass

    @classmethod
    def Create(cls, items=None):
        """A new Info (of `items`: a mapping or (key, value) pairs)."""
        i = cls()
        i._d = {}
        if items is not None:
            i.update(items)
        return i

    @classmethod
    def Create_env(cls, args=None):
        """The Info of the process's start: command, argv, maxprocs,
        thread_level (MPI 4's MPI_INFO_ENV keys that apply)."""
        import sys
        from .state import flags
        argv = list(sys.argv if args is None else args)
        i = cls.Create()
        if argv:
            i.Set("command", argv[0])
            if argv[1:]:
                i.Set("argv", " ".join(argv[1:]))
        i.Set("maxprocs", str(_world_size()))
        i.Set("thread_level", ("MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                               "MPI_THREAD_MULTIPLE")[flags["thread"]])
        return i

    def _info(self):
        if self._d is None:
            raise Exception(ERR_INFO, "INFO_NULL")
        return self._d

    def __reduce__(self):
        if self._d is None:
            return _reduce(self, True)
        if self is INFO_ENV:
            return _reduce(self, False)
        return (_info_of, (type(self), self.items()))

    def Free(self):
        """Frees it."""
        self._info()
        self._d = None

    def Dup(self):
        """A copy, of the same class."""
        return type(self).Create(self._info())

    copy = Dup

    def Get(self, key):
        """The value of key, or None."""
        return self._info().get(key)

    def Set(self, key, value):
        """Sets a key (both strings)."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("Info keys and values are strings")
        self._info()[key] = value

    def Delete(self, key):
        """Deletes a key."""
        d = self._info()
        if key not in d:
            raise Exception(ERR_INFO_NOKEY)
        del d[key]

    def Get_nkeys(self):
        """Number of keys."""
        return len(self._info())

    def Get_nthkey(self, n):
        """The nth key."""
        keys = list(self._info())
        if not 0 <= n < len(keys):
            raise Exception(ERR_ARG, f"no key {n} of {len(keys)}")
        return keys[n]

    def __len__(self):
        return len(self._d) if self._d is not None else 0

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, k):
        if self._d is None:
            raise KeyError(k)
        return self._d[k]

    def __setitem__(self, k, v):
        self.Set(k, v)

    def __delitem__(self, k):
        if self._d is None or k not in self._d:
            raise KeyError(k)
        del self._d[k]

    def __contains__(self, k):
        return self._d is not None and k in self._d

    def __eq__(self, other):
        return isinstance(other, Info) and self._d is other._d

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __bool__(self):
        return self._d is not None

    def keys(self):
        """Its keys (a list)."""
        return list(self._d) if self._d is not None else []

    def values(self):
        """Its values (a list)."""
        return list(self._d.values()) if self._d is not None else []

    def items(self):
        """Its (key, value) pairs (a list)."""
        return list(self._d.items()) if self._d is not None else []

    def get(self, k, default=None):
        """As dict.get."""
        return self._d.get(k, default) if self._d is not None else default

    def update(self, other=(), **kwds):
        """As dict.update."""
        self._info()
        items = other.items() if hasattr(other, "items") else other
        for k, v in list(items) + list(kwds.items()):
            self.Set(k, v)

    def pop(self, k, *default):
        """As dict.pop."""
        if self._d is None or k not in self._d:
            if default:
                return default[0]
            raise KeyError(k)
        return self._d.pop(k)

    def popitem(self):
        """As dict.popitem."""
        if not self._d:
            raise KeyError("popitem(): info is empty")
        return self._d.popitem()

    def clear(self):
        """Deletes every key."""
        self._info().clear()


def _info_of(cls, items):
    """An unpickled Info: a new one of `cls` with `items`."""
    return cls.Create(items)


def _world_size():
    from .state import world
    return world.Get_size() if world is not None else 1


Info._family = Info
INFO_NULL = Info()
INFO_ENV = Info.Create()  # filled at start-up (environment._start)


def _absent(name, feature):
    """A class of a feature sperli does not offer: its null handle exists
    (X()), every constructor or call raises NotImplementedError naming it."""

    class Absent(_HandleModel):
        def __new__(cls, other=None):
            if other is not None and not isinstance(other, Absent):
                raise TypeError(f"expected a {name}, not {type(other).__name__}")
            return object.__new__(cls)

        def _key(self):
            return None  # only the null handle exists

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

    Absent._family = Absent
    for ctor in ("Create", "Allocate", "Allocate_shared", "Create_dynamic", "Open", "Init",
                 "Probe", "Iprobe", "Create_keyval", "Free_keyval", "Create_errhandler",
                 "Delete", "Attach_buffer", "Detach_buffer"):
        setattr(Absent, ctor, Absent._refuse)
    Absent.__name__ = Absent.__qualname__ = name
    Absent.__doc__ = f"{feature.capitalize()}: not offered by sperli (only the null handle exists)."
    return Absent


Win = _absent("Win", "one-sided communication windows (Win)")
File = _absent("File", "parallel I/O files (File)")
Session = _absent("Session", "sessions (Session)")
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
