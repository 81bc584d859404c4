"""Object messages between ranks r and r + 1 (mod n). With HELLO feature
bit 3 (argument `bit3`) an object message is the pickle alone, as
mpi4py's: a buffer Send of pickled bytes is read by recv, an object send
by a buffer Recv, an empty message is None. Without the bit (argument
`v1`, SPERLI_FEATURES without bit 3) it is v1's send_large framing: the
pickle behind its length as 8 little-endian bytes. Objects longer than
one frame (16 MiB) go through either way. Prints `objects ok <rank>`."""

import pickle
import sys

from sperli import MPI

comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
nxt, prv = (r + 1) % n, (r - 1) % n
bit3 = sys.argv[1] == "bit3"


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


obj = {"rank": r, "data": list(range(r + 3))}
mine = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
want = {"rank": prv, "data": list(range(prv + 3))}

# An object send read as bytes by a buffer receive.
req = comm.isend(obj, nxt, tag=1)
buf = bytearray(1 << 12)
st = MPI.Status()
comm.Recv([buf, MPI.BYTE], prv, 1, st)
req.wait()
got = bytes(buf[:st.Get_count(MPI.BYTE)])
theirs = pickle.dumps(want, pickle.HIGHEST_PROTOCOL)
if bit3:
    check(got == theirs, "an object message is the pickle alone")
else:
    check(got == len(theirs).to_bytes(8, "little") + theirs, "v1: the 8-byte length first")

if bit3:
    # Pickled bytes sent as a buffer, read by an object receive.
    req = comm.Isend([mine, MPI.BYTE], nxt, tag=2)
    check(comm.recv(source=prv, tag=2) == want, "a buffer of pickled bytes read by recv")
    req.Wait()
    req = comm.Isend([b"", 0, MPI.BYTE], nxt, tag=3)
    check(comm.irecv(source=prv, tag=3).wait() is None, "an empty message is None")
    req.Wait()

# Longer than one DATA frame.
big = bytes([r]) * (17 << 20)
if r % 2 == 0:
    comm.send(big, nxt, tag=4)
    got = comm.recv(source=prv, tag=4)
else:
    got = comm.recv(source=prv, tag=4)
    comm.send(big, nxt, tag=4)
check(got == bytes([prv]) * (17 << 20), "an object longer than one frame")

print("objects ok", r, flush=True)
