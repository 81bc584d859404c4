"""sperli.MPI, mpi4py's spelling: every mapped argument form checked
against a serial computation; runs at any job size. Prints
`mpi ok <rank>`."""

import array
import pickle

import numpy as np

from sperli import MPI

comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
nxt, prv = (r + 1) % n, (r - 1) % n
assert isinstance(comm, MPI.Intracomm) and comm.rank == r and comm.size == n


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


# ---- message specs -------------------------------------------------------

a = np.arange(6, dtype="d") + r
b = np.full(6, -1.0)
st = MPI.Status()
comm.Sendrecv([a, MPI.DOUBLE], nxt, 3, [b, MPI.DOUBLE], prv, 3, st)
check((b == np.arange(6) + prv).all(), "[buf, DOUBLE]")
check(st.Get_source() == prv and st.Get_tag() == 3 and st.Get_count(MPI.DOUBLE) == 6, st)
b[:] = -1
comm.Sendrecv([a, 4, MPI.DOUBLE], nxt, 4, [b, 6, MPI.DOUBLE], prv, 4, st)
check((b[:4] == np.arange(4) + prv).all() and (b[4:] == -1).all(), "[buf, count, DOUBLE]")
check(st.Get_count(MPI.DOUBLE) == 4 and st.Get_count(MPI.BYTE) == 32, st)
b[:] = -1
comm.Sendrecv([a, (2, 1), MPI.DOUBLE], nxt, 5, [b, (2, 3), MPI.DOUBLE], prv, 5)
check(list(b) == [-1, -1, -1, 1 + prv, 2 + prv, -1], "[buf, (count, displ), DOUBLE]")
# a bytearray read as INT (the datatype wins over the buffer's format)
raw = bytearray(np.arange(3, dtype="i").tobytes())
got = bytearray(12)
comm.Sendrecv([raw, MPI.INT], nxt, 6, [got, MPI.INT], prv, 6)
check(got == raw, "bytearray as INT")
# empty buffers of every form, array.array's (a NULL pointer) too
for e in (array.array("d"), np.empty(0), b"", None, [None, 0, MPI.INT], [array.array("i"), MPI.INT]):
    comm.Sendrecv(e, nxt, 7, bytearray(0) if isinstance(e, bytes) else array.array("d"), prv, 7, st)
    check(st.Get_count(MPI.BYTE) == 0, f"empty {e!r}")
e = array.array("d")
comm.Allreduce(e, array.array("d"), op=MPI.SUM)


class HostCAI:
    """Host memory named by __cuda_array_interface__ (as mpi4py's tests
    name it): viewed where it is, kept alive by the view."""

    def __init__(self, arr):
        self.arr = arr
        self.__cuda_array_interface__ = dict(
            version=0, data=(arr.ctypes.data, False), typestr="<f8", shape=arr.shape)


got = np.zeros(6)
req = comm.Irecv([HostCAI(got), MPI.DOUBLE], prv, 14)  # the object dies here
import gc
gc.collect()
comm.Send(HostCAI(a.copy()), nxt, 14)
req.Wait()
check((got == a - r + prv).all(), "a __cuda_array_interface__ buffer")

# ---- Send and Recv of bare buffers (their fast path) and what leaves it --

m2 = np.arange(6.0).reshape(2, 3) + r
got2 = np.empty((2, 3))
comm.Send(m2, nxt, 20)
comm.Recv(got2, prv, MPI.ANY_TAG, st)
check((got2 == np.arange(6.0).reshape(2, 3) + prv).all(), "a 2-d array")
check(st.source == prv and st.tag == 20 and st.Get_count(MPI.DOUBLE) == 6, st)
comm.Send(np.asfortranarray(m2), nxt, 21)  # its bytes in memory order
comm.Recv(got2, prv, 21)
check((got2.ravel() == (np.arange(6.0).reshape(2, 3) + prv).ravel(order="F")).all(), "Fortran order")
ro = np.zeros(6)
ro.flags.writeable = False
try:
    comm.Recv(ro, prv, 22)
    check(False, "a read-only receive buffer")
except BufferError:
    pass
try:
    comm.Send(np.arange(6, dtype=">f8"), nxt, 22)
    check(False, "a byte-swapped send buffer")
except BufferError:
    pass
comm.Send(memoryview(bytearray(b"fast")), nxt, 22)
comm.Recv(cell := bytearray(4), prv, 22)
check(cell == b"fast" and not ro.any(), "a memoryview; the read-only buffer took nothing")
# numpy integers as ranks, tags and roots, as mpi4py's int parameters take them
comm.Send(a, np.int64(nxt), np.int32(23))
comm.Recv(b, np.int64(prv), np.int32(23), st)
check((b == a - r + prv).all() and st.Get_tag() == 23, "numpy integer rank and tag")
got = comm.bcast(("root", r), root=np.int64(0))
check(got == ("root", 0), "a numpy integer root")
try:
    comm.Send(a, 0.5, 23)
    check(False, "a float rank")
except MPI.Exception as e:
    check(e.Get_error_class() == MPI.ERR_RANK, e)

# ---- PROC_NULL, requests -------------------------------------------------

comm.Send(a, MPI.PROC_NULL)
comm.Recv(b, MPI.PROC_NULL, 0, st)
check(st.source == MPI.PROC_NULL and st.tag == MPI.ANY_TAG and st.Get_count(MPI.DOUBLE) == 0, st)
req = comm.Isend(a, MPI.PROC_NULL)
check(req and req.Test(), "Isend to PROC_NULL completes at once")
check(not req and req == MPI.REQUEST_NULL, "a completed request is null")
check(comm.recv(None, MPI.PROC_NULL) is None, "recv from PROC_NULL")
check(not MPI.Request() and MPI.Request() == MPI.REQUEST_NULL, "Request()")
check(MPI.Request.Waitany([MPI.REQUEST_NULL]) == MPI.UNDEFINED, "Waitany of nulls")
reqs = [comm.Irecv([b, MPI.DOUBLE], prv, 8), comm.Isend([a, MPI.DOUBLE], nxt, 8)]
MPI.Request.Waitall(reqs)
check((b == a - r + prv).all() and not any(reqs), "Irecv/Isend")
# Synchronous sends and matched probes (HELLO feature bit 3, protocol §16).
rq = comm.Issend(a, nxt, 8)
comm.Recv(b, prv, 8)
rq.Wait()
check((b == a - r + prv).all(), "Issend")
comm.Isend(a, nxt, 10)
st2 = MPI.Status()
m = comm.Mprobe(MPI.ANY_SOURCE, 10, st2)
check(m and st2.source == prv and comm.Improbe(MPI.ANY_SOURCE, 10) is None, "Mprobe takes it")
m.Recv(b)
check(not m and (b == a - r + prv).all(), "Message.Recv")
dup = comm.Dup()
req = dup.Irecv(b, MPI.ANY_SOURCE, 12)
comm.Send(a, nxt, 12)
comm.Recv(x := np.empty(6), prv, 12)
check(not req.Test(), "a receive on a Dup does not take the world's message")
check(req.Cancel() is None and req.Test(), "an unmatched receive is cancelled")
dup.Free()
p = comm.Send_init(a, nxt, 9)
q = comm.Recv_init(b, prv, 9)
for k in range(2):
    MPI.Prequest.Startall([p, q])
    MPI.Request.Waitall([p, q])
check((b == a - r + prv).all(), "persistent requests")

# ---- Status by value -----------------------------------------------------

s1, s2 = MPI.Status(), MPI.Status()
check(s1 == s2 and s1 is not s2, "Status ==")
s1.Set_tag(5)
check(s1 != s2 and s1.Get_error() == MPI.SUCCESS, "Status !=")
try:
    hash(s1)
    check(False, "Status is unhashable")
except TypeError:
    pass

# ---- collectives, COMM_SELF ---------------------------------------------

out = np.empty(6)
comm.Allreduce([a, MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
check((out == np.arange(6) * n + n * (n - 1) / 2).all(), "Allreduce")
g = np.empty(2 * n, dtype="i")
comm.Allgather([np.array([r, r], dtype="i"), MPI.INT], [g, 2, MPI.INT])
check(list(g) == [x for k in range(n) for x in (k, k)], "Allgather [buf, count, INT]")
self_ = MPI.COMM_SELF
check(self_.Get_size() == 1 and self_.Get_rank() == 0, "COMM_SELF")
x = np.zeros(6)
self_.Allreduce(a, x)
check((x == a).all(), "COMM_SELF Allreduce")
self_.Sendrecv(a, 0, 11, x, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
check(st.source == 0 and st.tag == 11, "COMM_SELF send to self")
check(self_.Get_group().Translate_ranks([0], comm.Get_group()) == [r], "COMM_SELF group")
# tag spaces: the same tag on COMM_SELF and COMM_WORLD are two messages
q1 = self_.isend("on self", 0, 13)
q2 = comm.isend("on world", r, 13)
check(comm.recv(None, r, 13) == "on world" and self_.recv(None, 0, 13) == "on self", "tag spaces")
MPI.Request.Waitall([q1, q2])
check(self_._c.comm_id == MPI.COMM_SELF._c.comm_id != 0 and comm._c.comm_id == 0, "comm ids")
check(comm.Get_group().Get_size() == n and MPI.GROUP_EMPTY.Get_size() == 0, "groups")
sub = comm.Split(r % 2, r)
check(sub.Get_size() == len(range(r % 2, n, 2)), "Split")
check(MPI.Comm.Compare(comm, comm.Dup()) == MPI.CONGRUENT, "Dup is congruent")
check(comm.Split(MPI.UNDEFINED) == MPI.COMM_NULL, "Split(UNDEFINED)")

# ---- datatypes -----------------------------------------------------------

check(MPI.DOUBLE.Get_size() == 8 and MPI.DOUBLE.extent == 8 and MPI.DOUBLE.Get_extent() == (0, 8), "DOUBLE")
check(MPI.INT.typechar == "i" and MPI.INT64_T.size == 8 and MPI.INT16_T.size == 2, "sizes")
check(MPI.DOUBLE.Get_name() == "MPI_DOUBLE", "names")
check(MPI.SHORT == MPI.DATATYPE_NULL and not MPI.C_BOOL, "types sperli does not carry")
check(pickle.loads(pickle.dumps(MPI.DOUBLE)) is MPI.DOUBLE, "pickled DOUBLE")

# ---- errors, errhandlers, attributes --------------------------------------

for call, cls in [
    (lambda: comm.Send(a, n), MPI.ERR_RANK),
    (lambda: comm.Send(a, 0, -5), MPI.ERR_TAG),
    (lambda: comm.Bcast(a, root=n), MPI.ERR_ROOT),
    (lambda: comm.Allreduce(a, out, op=MPI.REPLACE), MPI.ERR_OP),
]:
    try:
        call()
        check(False, f"no error, expected class {cls}")
    except MPI.Exception as e:
        check(e.Get_error_class() == cls and e.Get_error_code() == cls, (e, cls))
try:
    comm.Sendrecv(np.arange(8.0), nxt, 12, np.empty(2), prv, 12)
    check(False, "a truncated receive")
except MPI.Exception as e:
    check(e.Get_error_class() == MPI.ERR_TRUNCATE and e.sperli.code == 1618, e)
check(comm.Get_errhandler() == MPI.ERRORS_RETURN, "default errhandler")
comm.Set_errhandler(MPI.ERRORS_RETURN)
check(comm.Get_attr(MPI.TAG_UB) >= 32767, "TAG_UB")
kv = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: v + 1, delete_fn=None)
comm.Set_attr(kv, 41)
check(comm.Dup().Get_attr(kv) == 42 and comm.Get_attr(kv) == 41, "keyval copy on Dup")
comm.Delete_attr(kv)
check(comm.Get_attr(kv) is None, "Delete_attr")
check(MPI.Comm.Free_keyval(kv) == MPI.KEYVAL_INVALID, "Free_keyval")
try:
    MPI.Intercomm(comm)  # an intracommunicator is not an Intercomm (mpi4py: TypeError)
    check(False, "Intercomm")
except TypeError as e:
    check("Intercomm" in str(e), e)

# ---- environment ---------------------------------------------------------

check(MPI.Is_initialized() and not MPI.Is_finalized(), "initialized")
check(MPI.Query_thread() == MPI.THREAD_SERIALIZED, "thread level")
check(MPI.Get_version() >= (3, 0) and "SPERLI" in MPI.Get_library_version(), "versions")
check(MPI.Wtime() > 0 and 0 < MPI.Wtick() < 1 and MPI.Get_processor_name(), "Wtime")

# Alltoallw (byte displacements): to peer j, j+1 int32 values from byte
# 64*j; from peer i, r+1 of them to byte 8*i*(n+1); the rest untouched.
size = comm.Get_size()
sw = np.zeros(16 * size, dtype=np.int32)
for j in range(size):
    sw[16 * j:16 * j + j + 1] = 1000 * r + j
rw = np.full(2 * size * (size + 1), -1, dtype=np.int32)
scounts = [j + 1 for j in range(size)]
sdispls = [64 * j for j in range(size)]
rcounts = [r + 1] * size
rdispls = [8 * i * (size + 1) for i in range(size)]
comm.Alltoallw([sw, scounts, sdispls, [MPI.INT] * size], [rw, (rcounts, rdispls), MPI.INT])
for i in range(size):
    at = 2 * i * (size + 1)
    check((rw[at:at + r + 1] == 1000 * i + r).all(), f"Alltoallw block from {i}")
    check((rw[at + r + 1:at + 2 * (size + 1)] == -1).all(), f"Alltoallw outside block {i}")
try:
    comm.Alltoallw([sw], [rw, MPI.INT])
    check(False, "Alltoallw of a 1-item message")
except ValueError:
    pass

comm.Barrier()
print(f"mpi ok {r}", flush=True)
MPI.Finalize()
check(MPI.Is_finalized(), "finalized")
