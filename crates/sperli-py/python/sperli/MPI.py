"""mpi4py's ``MPI`` module over SPERLI: ``from sperli import MPI``.

Programs written for mpi4py run with one changed import. This module only
maps mpi4py's names and argument forms onto the calls of the ``sperli``
package (the Rust API): it passes no message and reduces nothing itself.
What it maps (docs/python.md, "mpi4py's MPI module"):

- message specs as mpi4py parses them: a bare buffer, ``[buf, MPI.DOUBLE]``,
  ``[buf, count, MPI.DOUBLE]``, ``[buf, (count, displ), MPI.DOUBLE]``, the
  v forms ``[buf, (counts, displs), MPI.DOUBLE]``, empty buffers; a
  buffer named by ``__cuda_array_interface__`` or ``__dlpack__`` (host
  memory) is viewed where it is;
- ``PROC_NULL``: a send to it or a receive from it completes at once
  (one place: ``_proc_null``);
- ``COMM_SELF``: ``COMM_WORLD.Split(rank)``, a real one-rank communicator
  made once at import (collective over the world, as ``MPI_Init``);
- communicators' messages: with HELLO feature bit 3 (protocol §16, the
  default) a message names its communicator, so every communicator has
  its own messages and tags 0..=TAG_UB, ANY_SOURCE works on each, and
  ``Ssend``/``Issend`` complete once matched, ``Mprobe``/``Improbe`` give
  a ``Message``; without it each communicator's tags travel as wire tag
  (communicator id % 2048) * 2^20 + tag (protocol §15.2);
- ``Status``, ``Request``, ``Group`` (rank lists), error classes and
  ``MPI.Exception``, errhandlers, attributes and keyvals, the environment
  calls.

Datatypes: a predefined type of one of the seven element types of the
protocol (uint8, int32, uint32, int64, uint64, float32, float64) is a
``Datatype``; C types SPERLI does not carry (``SHORT``, ``SIGNED_CHAR``,
``C_BOOL``, ``LONG_DOUBLE``, the complex types...) are
``MPI.DATATYPE_NULL``, as mpi4py makes a type its MPI library lacks;
``INT8_T``, ``INT16_T``, ``UINT16_T``, ``BOOL`` are named types whose calls
are refused (``ERR_TYPE``).

The parts live in the private package ``sperli._mpi``, one module per
concern (constants, errors, handles, datatypes, buffers, msgspec, status,
requests, groups, attributes, comm with its p2p and collectives mixins,
info, ops, environment, state); this module re-exports their public
names as ``sperli.MPI``'s own, and importing it joins the job.
"""

from ._mpi import (
    attributes as _attributes, buffers as _buffers, collectives as _collectives, comm as _comm,
    constants as _constants, datatypes as _datatypes, environment as _environment,
    errors as _errors, groups as _groups, info as _info, intercomm as _intercomm,
    message as _message,
    msgspec as _msgspec, ops as _ops, p2p as _p2p, requests as _requests, status as _status,
    topo as _topo,
)
from ._mpi.handles import _BY_SPEC, _PREDEFINED, _PREDEFINED_KEYS
from ._mpi.comm import _comm_lock_table  # noqa: F401 (mpi4py's MPI._comm_lock_table)
from ._mpi.handles import _addressof, _handleof, _sizeof  # noqa: F401 (mpi4py's MPI._handleof...)

# Every public name of the parts is this module's: classes and functions
# say so (mpi4py's say `mpi4py.MPI`; pickle finds them here).
for _m in (_constants, _errors, _datatypes, _buffers, _status, _requests, _groups, _attributes,
           _comm, _intercomm, _info, _message, _ops, _environment, _topo):
    for _n, _v in vars(_m).items():
        if _n.startswith("_") or isinstance(_v, type(_m)):
            continue
        if getattr(_v, "__module__", None) == _m.__name__ and getattr(_v, "__name__", None) == _n:
            _v.__module__ = __name__
        globals()[_n] = _v

# A SperliError out of any method is an MPI.Exception of its class.
for _cls in (Comm, Intracomm, Intercomm, Datatype, Status, Request, Group, Errhandler, Info, Op, Message,
             _p2p._PointToPoint, _collectives._Collectives, _topo._Cart):
    _errors._wrap_class(_cls)

_environment._start()  # joins the job, as mpi4py's import runs MPI_Init

# The predefined handles pickle as their names (the same object back).
for _n, _v in list(globals().items()):
    _handles = (Comm, Datatype, Group, Errhandler, Request, Info, Op, Message, Win, File, Session)
    if isinstance(_v, _handles) and id(_v) not in _PREDEFINED:
        _PREDEFINED[id(_v)] = _n
        if _v._key() is not None:
            _PREDEFINED_KEYS[_v._ident()] = _v
        if isinstance(_v, Datatype) and _v._d is not None:
            _BY_SPEC.setdefault(_v._d, _v)

del _m, _n, _v, _cls, _handles, _msgspec
