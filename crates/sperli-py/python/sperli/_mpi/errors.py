"""Error classes and codes, ``MPI.Exception``, and the mapping of the
package's ``SperliError`` onto them."""

from .. import _sperli as _s

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
        self.ierr = int(ierr) if int(ierr) >= 0 else ERR_UNKNOWN  # as mpi4py: no negative code
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

    def __lt__(self, other):
        return int(self) < int(other) if isinstance(other, (int, Exception)) else NotImplemented

    def __le__(self, other):
        return int(self) <= int(other) if isinstance(other, (int, Exception)) else NotImplemented

    def __gt__(self, other):
        return int(self) > int(other) if isinstance(other, (int, Exception)) else NotImplemented

    def __ge__(self, other):
        return int(self) >= int(other) if isinstance(other, (int, Exception)) else NotImplemented

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
    elif getattr(e, "check", None) == "revoked":
        cls = ERR_REVOKED  # a call on a revoked communicator (protocol §18.8.1)
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
    """Wraps the public methods of `cls` (`_wrap`). Private helpers are
    not wrapped: every path from user code enters through a public method,
    which converts, and a second wrapper per helper call doubled the cost
    of a point-to-point call's argument checks."""
    for name, v in list(vars(cls).items()):
        if isinstance(v, (staticmethod, classmethod)):
            if not getattr(v.__func__, "_mpi_wrapped", False):
                setattr(cls, name, type(v)(_wrap(v.__func__)))
        elif callable(v) and not name.startswith("_") and not getattr(v, "_mpi_wrapped", False) \
                and not isinstance(v, type):
            setattr(cls, name, _wrap(v))
    return cls
