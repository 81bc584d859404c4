"""``Status`` and PROC_NULL's one place (``_proc_null``)."""

from .constants import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED, _TAG_MAX
from .datatypes import BYTE
from .errors import SUCCESS


class Status:
    """A receive's status, compared by value (unhashable, as mpi4py's)."""

    def __new__(cls, status=None):
        self = object.__new__(cls)
        Status._fill_from(self, status)
        return self

    def __init__(self, status=None):
        pass

    def _fill_from(self, status=None):
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"expected a Status, not {type(status).__name__}")
        if status is None:
            self.source, self.tag, self.error = ANY_SOURCE, ANY_TAG, SUCCESS
            self._count, self.cancelled = 0, False
        else:
            self.source, self.tag, self.error = status.source, status.tag, status.error
            self._count, self.cancelled = status._count, status.cancelled

    def __eq__(self, other):
        if not isinstance(other, Status):
            return NotImplemented
        return (self.source, self.tag, self.error, self._count, self.cancelled) == \
            (other.source, other.tag, other.error, other._count, other.cancelled)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return f"<MPI.Status source={self.source} tag={self.tag} count={self._count}>"

    def __reduce__(self):
        return (_status_from, (type(self), self.source, self.tag, self.error, self._count, self.cancelled))

    def _set(self, source, tag, count):
        self.source, self.tag, self.error, self._count = source, tag, SUCCESS, count

    def _from(self, st, base=0):
        tag = st.tag
        if base <= tag <= base + _TAG_MAX:
            tag -= base
        self._set(st.source, tag, st.count)

    def Get_source(self):
        """The sender's rank."""
        return self.source

    def Set_source(self, source):
        """Sets the source."""
        self.source = source

    def Get_tag(self):
        """The message's tag."""
        return self.tag

    def Set_tag(self, tag):
        """Sets the tag."""
        self.tag = tag

    def Get_error(self):
        """The error class (SUCCESS)."""
        return self.error

    def Set_error(self, error):
        """Sets the error."""
        self.error = error

    def Get_count(self, datatype=BYTE):
        """Elements of `datatype` received (UNDEFINED if not whole)."""
        size = datatype.Get_size()
        return self._count // size if self._count % size == 0 else UNDEFINED

    def _set_count(self, value):
        self._count = value

    count = property(lambda self: self._count, _set_count)

    def Get_elements(self, datatype):
        """As Get_count for a predefined type."""
        return self.Get_count(datatype)

    def Set_elements(self, datatype, count):
        """Sets the count in elements of `datatype`."""
        self._count = count * datatype.Get_size()

    def Is_cancelled(self):
        """Whether the request was cancelled."""
        return self.cancelled

    def Set_cancelled(self, flag):
        """Sets the cancelled flag."""
        self.cancelled = bool(flag)

    def py2f(self):
        """The status as integers."""
        return [self.source, self.tag, self.error, self._count, int(self.cancelled)]

    @classmethod
    def f2py(cls, arg):
        """A status from py2f's integers."""
        s = cls()
        s.source, s.tag, s.error, s._count, c = arg
        s.cancelled = bool(c)
        return s


def _status_from(cls, source, tag, error, count, cancelled):
    s = cls()
    s.source, s.tag, s.error, s._count, s.cancelled = source, tag, error, count, cancelled
    return s


def _fill(status, st, base=0):
    if status is not None:
        status._from(st, base)


def _buf_unused(buf):
    """The buffer argument of recv/irecv: the package unpickles from the
    transport, so a buffer given is not used (said once per call)."""
    if buf is not None:
        import warnings
        warnings.warn("sperli.MPI: the buf argument of recv/irecv is not used", UserWarning, stacklevel=4)


def _proc_null(status):
    """PROC_NULL, the one place: a send to it or a receive from it completes
    at once; the receive's status says source PROC_NULL, tag ANY_TAG,
    count 0."""
    if status is not None:
        status._set(PROC_NULL, ANY_TAG, 0)
