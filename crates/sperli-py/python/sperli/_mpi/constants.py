"""Constants: ranks, tags, limits, comparison results, thread levels,
predefined attribute keyvals."""

from .. import _sperli as _s

ANY_SOURCE = _s.ANY_SOURCE
ANY_TAG = _s.ANY_TAG
UNDEFINED = _s.UNDEFINED
PROC_NULL = -2
ROOT = -3
# Tags 0..=_TAG_MAX (TAG_UB). With HELLO feature bit 3 (protocol §16, the
# default) a message names its communicator and travels with its own tag.
# Without it a message carries no communicator (protocol §15.2), so each
# communicator's tags travel as wire tag (id % 2048) * 2^20 + tag, its id
# being the protocol's communicator id (the same on every member; the
# world's is 0: its tags are the package's own).
_TAG_BITS = 20
_TAG_MAX = (1 << _TAG_BITS) - 1
IN_PLACE = _s.IN_PLACE
BOTTOM = None
BSEND_OVERHEAD = 0
BUFFER_AUTOMATIC = None
KEYVAL_INVALID = -1
MAX_PROCESSOR_NAME = 256
MAX_ERROR_STRING = 512
MAX_OBJECT_NAME = 128
MAX_LIBRARY_VERSION_STRING = 256
MAX_PORT_NAME = 1024
MAX_INFO_KEY = 255
MAX_INFO_VAL = 1024
VERSION = 3
SUBVERSION = 1

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3

# Predefined attribute keyvals (their values: _predefined_attr).
TAG_UB, HOST, IO, WTIME_IS_GLOBAL, UNIVERSE_SIZE, APPNUM, LASTUSEDCODE = range(101, 108)
