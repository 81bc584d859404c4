"""Every call of the package, checked against what a serial computation
gives; runs at any job size. Prints `calls ok <rank> <sequence>`."""

import sys

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size
nxt, prv = (r + 1) % n, (r - 1) % n
assert comm.Get_rank() == r and comm.Get_size() == n and comm.incarnation == 1


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


def seq(dt, k, base):
    return (np.arange(k) % 50 + base).astype(dt)


# ---- point-to-point on buffers ------------------------------------------

for dt in sperli.DTYPES:
    a = seq(dt, 10, r)
    b = np.empty_like(a)
    st = sperli.Status()
    comm.Sendrecv(a, dest=nxt, sendtag=5, recvbuf=b, source=prv, recvtag=5, status=st)
    check((b == seq(dt, 10, prv)).all(), f"Sendrecv {dt}")
    check(st.source == prv and st.tag == 5 and st.Get_count(dt) == 10, f"Sendrecv status {st}")

# Send/Recv in pairs (0 -> 1, 2 -> 3; a single rank to itself), ANY_TAG.
if n == 1 or r % 2 == 0:
    if r + 1 < n or n == 1:
        comm.Send(np.arange(5, dtype=np.int32) * (r + 1), dest=(r + 1) % n, tag=7)
if n == 1 or r % 2 == 1:
    buf = np.zeros(8, dtype=np.int32)
    st = sperli.Status()
    comm.Recv(buf, source=(r - 1) % n, tag=sperli.ANY_TAG, status=st)
    src = (r - 1) % n
    check(st.count == 20 and st.tag == 7 and st.Get_source() == src, f"Recv status {st}")
    check((buf[:5] == np.arange(5) * (src + 1)).all() and (buf[5:] == 0).all(), "Recv data")

# bytes, bytearray and memoryview are buffers too.
comm.Send(b"hello", dest=nxt, tag=8)
ba = bytearray(5)
comm.Recv(ba, source=prv, tag=8)
check(ba == b"hello", "Recv into bytearray")
mv = memoryview(bytearray(16)).cast("d")
comm.Sendrecv(memoryview(np.array([1.5, float(r)])), dest=nxt, recvbuf=mv, source=prv)
check(list(mv) == [1.5, float(prv)], "Sendrecv of memoryviews")

# Isend/Irecv, Test and Waitall.
out = np.full(1000, r, dtype=np.float64)
inb = np.empty(1000)
rq = comm.Irecv(inb, source=prv, tag=9)
sq = comm.Isend(out, dest=nxt, tag=9)
st = sperli.Status()
while not rq.Test(st):
    pass
sperli.Request.Waitall([sq])
check(rq.done and sq.done and (inb == prv).all() and st.count == 8000, "Isend/Irecv")
reqs = [comm.Irecv(np.empty(3, dtype=np.int64), source=prv, tag=10 + k) for k in range(3)]
sends = [comm.Isend(np.full(3, k, dtype=np.int64), dest=nxt, tag=10 + k) for k in range(3)]
sperli.Request.Waitall(reqs + sends)
check(sperli.Request.Testall(reqs), "Testall after Waitall")

# ---- objects, point-to-point ------------------------------------------------

comm.send({"from": r, "list": [1, 2, 3]}, dest=nxt, tag=1)
got = comm.recv(source=prv, tag=1)
check(got == {"from": prv, "list": [1, 2, 3]}, "send/recv")
st = sperli.Status()
comm.send(("any tag", r), dest=nxt, tag=44)
check(comm.recv(source=prv, status=st) == ("any tag", prv) and st.tag == 44, "recv ANY_TAG")
big = bytes([r % 256]) * (17 << 20)  # more than one frame
comm.send(big, dest=nxt, tag=2)
check(comm.recv(source=prv, tag=2) == bytes([prv % 256]) * (17 << 20), "send/recv of 17 MiB")
rq = comm.irecv(source=prv, tag=3)
sq = comm.isend(["isend", r], dest=nxt, tag=3)
check(rq.wait() == ["isend", prv] and sq.wait() is None, "isend/irecv")
rq = comm.irecv(source=prv, tag=4)
sq = comm.isend(np.arange(4) * r, dest=nxt, tag=4)
done, obj = rq.test()
while not done:
    done, obj = rq.test()
sq.wait()
check((obj == np.arange(4) * prv).all(), "irecv test")

# ---- collectives on buffers ---------------------------------------------------

comm.Barrier()
root = n - 1
for dt in sperli.DTYPES:
    b = seq(dt, 7, 3) if r == root else np.zeros(7, dtype=dt)
    comm.Bcast(b, root=root)
    check((b == seq(dt, 7, 3)).all(), f"Bcast {dt}")
# A read-only root buffer.
b = b"abcdef" if r == 0 else bytearray(6)
comm.Bcast(b, root=0)
check(bytes(b) == b"abcdef", "Bcast from bytes")
# Longer than one v1 call (16777200 bytes).
k = (16 << 20) // 8 + 5
b = np.arange(k, dtype=np.float64) if r == 0 else np.empty(k)
comm.Bcast(b, root=0)
check(b[0] == 0 and b[-1] == k - 1 and (b[::100000] == np.arange(k)[::100000]).all(), "Bcast 16 MiB")

x = np.arange(6, dtype=np.float64) + r
want_sum = sum(np.arange(6, dtype=np.float64) + q for q in range(n))
y = np.empty(6)
comm.Allreduce(x, y, op=sperli.SUM)
check((y == want_sum).all(), "Allreduce SUM f64")
comm.Allreduce(x, y)  # default SUM
check((y == want_sum).all(), "Allreduce default op")
z = x.copy()
comm.Allreduce(sperli.IN_PLACE, z, op=sperli.MAX)
check((z == np.arange(6) + n - 1).all(), "Allreduce IN_PLACE MAX")
z = x.copy()
comm.Allreduce(z, z, op=sperli.MIN)  # the same array twice: copied, not aliased
check((z == np.arange(6)).all(), "Allreduce of one array into itself")
i = np.array([1 << r, 3], dtype=np.uint64)
o = np.empty_like(i)
comm.Allreduce(i, o, op=sperli.BOR)
check(o[0] == (1 << n) - 1 and o[1] == 3, "Allreduce BOR u64")
i = np.array([r - 5, 7], dtype=np.int32)
o = np.empty_like(i)
comm.Allreduce(i, o, op=sperli.MIN)
check(o[0] == -5 and o[1] == 7, "Allreduce MIN i32")
m = np.array([[r + 1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
o = np.empty_like(m)
comm.Allreduce(m, o, op=sperli.PROD)
check(o[0, 0] == np.prod(np.arange(1, n + 1, dtype=np.float32)) and o[1, 1] == 4.0**n, "Allreduce 2-D PROD")
k = (16 << 20) // 8  # 16 MiB: two v1 calls
big = np.full(k, 1.0 + r)
bo = np.empty(k)
comm.Allreduce(big, bo)
check(bo[0] == bo[-1] == sum(1.0 + q for q in range(n)), "Allreduce 16 MiB")

ro = 0 if n == 1 else 1
rb = np.empty(6) if r == ro else None
comm.Reduce(x, rb, op=sperli.SUM, root=ro)
if r == ro:
    check((rb == want_sum).all(), "Reduce")
    z = x.copy()
    comm.Reduce(sperli.IN_PLACE, z, op=sperli.MAX, root=ro)
    check((z == np.arange(6) + n - 1).all(), "Reduce IN_PLACE")
else:
    comm.Reduce(x, None, op=sperli.MAX, root=ro)

g = np.empty(3 * n, dtype=np.int64) if r == ro else None
comm.Gather(np.full(3, r, dtype=np.int64), g, root=ro)
if r == ro:
    check((g == np.repeat(np.arange(n), 3)).all(), "Gather")
    g2 = np.zeros(3 * n, dtype=np.int64)
    g2[3 * r : 3 * r + 3] = r
    comm.Gather(sperli.IN_PLACE, g2, root=ro)
    check((g2 == np.repeat(np.arange(n), 3)).all(), "Gather IN_PLACE")
else:
    comm.Gather(np.full(3, r, dtype=np.int64), None, root=ro)

s = np.arange(4 * n, dtype=np.float32) if r == 0 else None
mine = np.empty(4, dtype=np.float32)
comm.Scatter(s, mine, root=0)
check((mine == np.arange(4 * r, 4 * r + 4)).all(), "Scatter")
if r == 0:
    comm.Scatter(s, sperli.IN_PLACE, root=0)
else:
    comm.Scatter(None, mine, root=0)
check((mine == np.arange(4 * r, 4 * r + 4)).all(), "Scatter IN_PLACE at the root")

ag = np.empty(2 * n, dtype=np.uint32)
comm.Allgather(np.array([r, r * 10], dtype=np.uint32), ag)
check((ag == np.array([[q, q * 10] for q in range(n)]).ravel()).all(), "Allgather")
ag2 = np.zeros(2 * n, dtype=np.uint32)
ag2[2 * r : 2 * r + 2] = [r, r * 10]
comm.Allgather(sperli.IN_PLACE, ag2)
check((ag2 == ag).all(), "Allgather IN_PLACE")

a2a = np.array([r * 100 + j for j in range(n)], dtype=np.int64)
got = np.empty(n, dtype=np.int64)
comm.Alltoall(a2a, got)
check((got == np.array([q * 100 + r for q in range(n)])).all(), "Alltoall")

rs = np.arange(2 * n, dtype=np.int64)
rso = np.empty(2, dtype=np.int64)
comm.Reduce_scatter_block(rs, rso, op=sperli.SUM)
check((rso == n * np.arange(2 * r, 2 * r + 2)).all(), "Reduce_scatter_block")
# Prefix reductions: rank r gets the fold of ranks 0..=r (Scan), 0..r (Exscan).
sc = np.empty(3, dtype=np.float64)
comm.Scan(np.array([r + 0.5, -r, 1.0]), sc, op=sperli.SUM)
check((sc == [sum(q + 0.5 for q in range(r + 1)), -sum(range(r + 1)), r + 1]).all(), "Scan")
ex = np.full(2, -7, dtype=np.int32)
comm.Exscan(np.array([r + 1, 1 << r], dtype=np.int32), ex, op=sperli.MAX)
check((ex == ([-7, -7] if r == 0 else [r, 1 << (r - 1)])).all(), "Exscan")
ip = np.array([r + 1], dtype=np.int64)
comm.Scan(sperli.IN_PLACE, ip, op=sperli.PROD)
check(ip[0] == np.prod(np.arange(1, r + 2)), "Scan IN_PLACE")
check(comm.scan(r + 1) == (r + 1) * (r + 2) // 2, "scan int")
check(comm.exscan(r == 1, op=sperli.LOR) == (None if r == 0 else r > 1), "exscan bool")

# ---- collectives on objects ---------------------------------------------------

comm.barrier()
check(comm.bcast({"cfg": [1, 2]} if r == root else None, root=root) == {"cfg": [1, 2]}, "bcast")
objs = comm.gather({"r": r, "pad": "x" * (r * 1000)}, root=ro)
if r == ro:
    check(objs == [{"r": q, "pad": "x" * (q * 1000)} for q in range(n)], "gather")
else:
    check(objs is None, "gather off the root")
item = comm.scatter([("item", q) for q in range(n)] if r == 0 else None, root=0)
check(item == ("item", r), "scatter")
check(comm.allgather(r * r) == [q * q for q in range(n)], "allgather")
check(comm.allgather(b"z" * (r * 3)) == [b"z" * (q * 3) for q in range(n)], "allgather of uneven sizes")
total = comm.allreduce(r + 1)
check(total == n * (n + 1) // 2 and isinstance(total, int), "allreduce int")
check(comm.allreduce(0.5 * r, op=sperli.MAX) == 0.5 * (n - 1), "allreduce float MAX")
check(comm.allreduce(r == 0, op=sperli.LOR) is True, "allreduce bool LOR")
v = comm.allreduce(np.float32(r), op=sperli.SUM)
check(isinstance(v, np.float32) and v == sum(range(n)), "allreduce numpy scalar")
arr = comm.allreduce(np.arange(4.0) * r)
check((arr == np.arange(4.0) * sum(range(n))).all(), "allreduce array")
red = comm.reduce(r, op=sperli.MAX, root=ro)
check(red == (n - 1 if r == ro else None), "reduce")

# ---- the GIL is released while a call waits ----------------------------------

# Rank 1 sends only once a second thread of rank 0 ran while rank 0's
# Recv waited: that thread writes to a FIFO rank 1 reads. With a switch
# interval longer than the wait, the thread can run only if Recv released
# the GIL; rank 1 sends 1 if it heard the thread, 0 if it gave up.
if n > 1:
    import os
    import select
    import tempfile
    import threading

    if r == 0:
        fifo = os.path.join(tempfile.mkdtemp(), "ran")
        os.mkfifo(fifo)
        comm.send(fifo, dest=1, tag=54)
        comm.Recv(np.empty(1), source=1, tag=54)  # rank 1 opened its end
        go = threading.Event()

        def tell():
            go.wait()
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return  # rank 1 gave up and closed its end
            os.write(fd, b"x")
            os.close(fd)

        t = threading.Thread(target=tell)
        t.start()
        interval = sys.getswitchinterval()
        sys.setswitchinterval(60.0)
        go.set()
        heard = np.empty(1)
        comm.Recv(heard, source=1, tag=55)
        sys.setswitchinterval(interval)
        t.join()
        os.unlink(fifo)
        os.rmdir(os.path.dirname(fifo))
        check(heard[0] == 1, "another thread ran while Recv waited")
    elif r == 1:
        fifo = comm.recv(source=0, tag=54)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        comm.Send(np.zeros(1), dest=0, tag=54)
        ready, _, _ = select.select([fd], [], [], 30.0)  # a deadline, not a pause
        heard = bool(ready) and os.read(fd, 1) == b"x"
        os.close(fd)
        comm.Send(np.array([1.0 if heard else 0.0]), dest=0, tag=55)

# Every rank made the same collective calls.
check(len(set(comm.allgather(comm.sequence))) == 1, "sequences agree")
print("calls ok", r, comm.sequence, flush=True)

# Finalize ends the job step (BYE); a later call raises, the exit hook
# does nothing more.
sperli.finalize()
assert comm.Is_finalized()
try:
    comm.Barrier()
    raise AssertionError("a call after Finalize")
except sperli.SperliError as e:
    assert e.code is None and "finalized" in str(e), repr(e)
