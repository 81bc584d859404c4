"""Error handlers, keyvals and attributes."""

import builtins as _builtins
import traceback as _traceback

from .constants import (
    ANY_SOURCE, APPNUM, HOST, IO, KEYVAL_INVALID, LASTUSEDCODE, PROC_NULL, TAG_UB,
    UNIVERSE_SIZE, WTIME_IS_GLOBAL, _TAG_MAX,
)
from .errors import ERR_ARG, ERR_KEYVAL, ERR_OTHER, Exception, _last_used
from .handles import _Handled, _NONE, _PREDEFINED


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
            _callback(fns[1], self, keyval, value)

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
            out = _callback(copy_fn, self, k, v)
            if out is not NotImplemented:
                dst[k] = out

    def _delete_attrs(self):
        for k in list(self._attrs()):
            self.Delete_attr(k)


def _callback(fn, *args):
    """A user's attribute callback, as MPI calls it: an exception it
    raises is printed (its traceback on stderr) and the call fails with
    ERR_OTHER."""
    try:
        return fn(*args)
    except _builtins.Exception as e:
        _traceback.print_exc()
        raise Exception(ERR_OTHER, f"an attribute callback raised {type(e).__name__}") from e


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
