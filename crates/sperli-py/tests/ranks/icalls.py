"""The non-blocking collectives, receives from any source (Probe,
Iprobe, Waitany), communicators made by Split and Dup, each checked
against a serial computation; runs at any job size. Prints
`icalls ok <rank> <sequence>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size
nxt, prv = (r + 1) % n, (r - 1) % n


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


def seq(dt, k, base):
    return (np.arange(k) % 50 + base).astype(dt)


# ---- non-blocking collectives ------------------------------------------

comm.Ibarrier().Wait()

for dt in ("uint8", "int32", "float64"):
    k = 7
    # Ibcast from the last rank.
    root = n - 1
    b = seq(dt, k, 3) if r == root else np.zeros(k, dt)
    rq = comm.Ibcast(b, root=root)
    rq.Wait()
    check((b == seq(dt, k, 3)).all(), f"Ibcast {dt}")

    # Iallreduce: the send data is copied at the call.
    x = seq(dt, k, r)
    y = np.zeros(k, dt)
    op = sperli.BOR if dt == "uint8" else sperli.MAX
    rq = comm.Iallreduce(x, y, op=op)
    x[:] = 0
    rq.Wait()
    want = seq(dt, k, 0)
    for q in range(1, n):
        want = want | seq(dt, k, q) if dt == "uint8" else np.maximum(want, seq(dt, k, q))
    check((y == want).all(), f"Iallreduce {dt}: {y}")

    # Ireduce to rank 0, SUM where the dtype takes it.
    op = sperli.BOR if dt == "uint8" else sperli.SUM
    x = seq(dt, k, r)
    out = np.zeros(k, dt) if r == 0 else None
    rq = comm.Ireduce(x, out, op=op, root=0)
    while not rq.Test():
        pass
    if r == 0:
        want = seq(dt, k, 0)
        for q in range(1, n):
            want = want | seq(dt, k, q) if dt == "uint8" else want + seq(dt, k, q)
        check((out == want).all(), f"Ireduce {dt}")

    # Igather, Iscatter, Iallgather.
    g = np.zeros(k * n, dt) if r == 0 else None
    rq = comm.Igather(seq(dt, k, r), g, root=0)
    rq.Wait()
    if r == 0:
        check((g == np.concatenate([seq(dt, k, q) for q in range(n)])).all(), f"Igather {dt}")
    whole = np.concatenate([seq(dt, k, 10 + q) for q in range(n)]) if r == 0 else None
    mine = np.zeros(k, dt)
    comm.Iscatter(whole, mine, root=0).Wait()
    check((mine == seq(dt, k, 10 + r)).all(), f"Iscatter {dt}")
    ag = np.zeros(k * n, dt)
    comm.Iallgather(seq(dt, k, r), ag).Wait()
    check((ag == np.concatenate([seq(dt, k, q) for q in range(n)])).all(), f"Iallgather {dt}")

# IN_PLACE, several calls in flight, a blocking call after them, Waitall.
a = np.full(5, float(r + 1))
b = np.empty(5)
r1 = comm.Iallreduce(sperli.IN_PLACE, a)
r2 = comm.Iallreduce(np.full(5, 2.0), b, op=sperli.PROD)
total = comm.allreduce(1)  # a blocking collective after the issued ones
sperli.Request.Waitall([r1, r2])
check(total == n, "a blocking call between non-blocking ones")
check((a == n * (n + 1) / 2).all() and (b == 2.0**n).all(), f"Waitall {a} {b}")
check(r1.done and r2.done and r1.Test(), "completed requests stay complete")

# An array larger than one v1 call (16777200 bytes) in one Iallreduce.
big = np.full(2_200_000, float(r))
bigo = np.empty_like(big)
comm.Iallreduce(big, bigo).Wait()
check(bigo[0] == bigo[-1] == n * (n - 1) / 2, "Iallreduce of 17.6 MB")

# An Ibcast receiver whose buffer is not the root's length: ArgumentError
# at its Wait (the data dropped), and the job goes on.
short = np.arange(3.0) if r == 0 else np.zeros(2)
rq = comm.Ibcast(short, root=0)
try:
    rq.Wait()
    check(r == 0, "an Ibcast into a buffer of another length")
except sperli.ArgumentError as e:
    check(r != 0 and e.code == 1618 and not e.job_ended and "has 2 elements" in str(e), repr(e))

# A refused call raises ArgumentError before anything is issued.
try:
    comm.Iallreduce(np.ones(3), np.empty(3, np.int32))
    raise AssertionError("a dtype mismatch was issued")
except sperli.ArgumentError as e:
    check(e.code == 1618 and not e.job_ended, repr(e))
comm.Ibarrier().Wait()

# ---- any source, probes, Waitany ---------------------------------------

# Every rank sends its rank to rank 0; rank 0 takes them in arrival order.
comm.Send(np.array([r], np.int64), dest=0, tag=20)
if r == 0:
    seen = []
    for _ in range(n):
        st = sperli.Status()
        v = np.empty(1, np.int64)
        comm.Recv(v, source=sperli.ANY_SOURCE, tag=20, status=st)
        check(st.Get_source() == v[0] and st.Get_tag() == 20 and st.Get_count(np.int64) == 1, f"{st}")
        seen.append(st.source)
    check(sorted(seen) == list(range(n)), f"ANY_SOURCE got {seen}")
comm.Barrier()

# Probe for the size, then receive exactly that many elements.
comm.Send(np.arange(r + 1, dtype=np.float32), dest=nxt, tag=21)
st = sperli.Status()
check(comm.Probe(sperli.ANY_SOURCE, 21, st) is True, "Probe returns True")
check(st.source == prv and st.Get_count("float32") == prv + 1, f"Probe {st}")
got = np.empty(st.Get_count(np.float32), np.float32)
comm.Recv(got, source=st.source, tag=st.tag)
check((got == np.arange(prv + 1)).all(), "Recv after Probe")
check(not comm.Iprobe(tag=21), "Iprobe: nothing left")
comm.Barrier()
comm.Send(b"x", dest=nxt, tag=22)
st = sperli.Status()
while not comm.Iprobe(source=sperli.ANY_SOURCE, tag=22, status=st):
    pass
check(st.source == prv and st.tag == 22 and st.count == 1, f"Iprobe {st}")
st = sperli.Status()
check(comm.Iprobe(source=prv, tag=sperli.ANY_TAG, status=st) and st.tag == 22, f"Iprobe ANY_TAG {st}")
comm.Recv(bytearray(1), source=prv)

# Objects from any source, an Irecv from any source, Waitany.
comm.send({"from": r}, dest=0, tag=23)
if r == 0:
    st = sperli.Status()
    check(comm.probe(tag=23, status=st) and st.tag == 23, f"probe {st}")
    got = sorted(comm.recv(source=sperli.ANY_SOURCE, tag=23)["from"] for _ in range(n))
    check(not comm.iprobe(tag=23), "iprobe: nothing left")
    check(got == list(range(n)), f"recv from any source {got}")
buf = np.empty(2, np.int32)
rq = comm.Irecv(buf, source=sperli.ANY_SOURCE, tag=24)
ib = comm.Ibarrier()
comm.Send(np.array([r, 7], np.int32), dest=nxt, tag=24)
done = set()
st = sperli.Status()
while len(done) < 2:
    i = sperli.Request.Waitany([rq, ib], st)
    check(i in (0, 1) and i not in done, f"Waitany gave {i}")
    if i == 0:
        check(st.source == prv and (buf == [prv, 7]).all(), f"Waitany receive {st} {buf}")
    done.add(i)
check(sperli.Request.Waitany([rq, ib]) == sperli.UNDEFINED, "Waitany with nothing open")
check(sperli.Request.Testall([rq, ib]), "Testall of completed requests")

# Waitany over receives only (the transport's wait_any), in arrival order.
ra, rb = np.empty(1, np.int64), np.empty(1, np.int64)
reqs = [comm.Irecv(ra, source=prv, tag=40), comm.Irecv(rb, source=nxt, tag=41)]
comm.Send(np.array([r], np.int64), dest=nxt, tag=40)
comm.Send(np.array([r], np.int64), dest=prv, tag=41)
got = {}
for _ in range(2):
    st = sperli.Status()
    i = sperli.Request.Waitany(reqs, st)
    got[i] = st.source
check(got == {0: prv, 1: nxt} and ra[0] == prv and rb[0] == nxt, f"Waitany of receives {got}")

# Testall completes all or none: a message that came stays in its request.
comm.Send(np.array([r], np.int64), dest=nxt, tag=42)
comm.Probe(source=prv, tag=42)  # it has arrived
ta, tb = np.zeros(1, np.int64), np.zeros(1, np.int64)
qa = comm.Irecv(ta, source=prv, tag=42)
qb = comm.Irecv(tb, source=prv, tag=43)
check(not sperli.Request.Testall([qa, qb]), "Testall before every message came")
check(not qa.done and not qb.done, "Testall completed a request although not all could")
comm.Barrier()  # every rank tested before the second message goes
comm.Send(np.array([r + 100], np.int64), dest=nxt, tag=43)
sts = [sperli.Status(), sperli.Status()]
while not sperli.Request.Testall([qa, qb], sts):
    pass
check(qa.done and qb.done and ta[0] == prv and tb[0] == prv + 100, f"Testall {ta} {tb}")
check([x.tag for x in sts] == [42, 43] and sts[1].source == prv, f"Testall statuses {sts}")

# ---- communicators -----------------------------------------------------

# Evens and odds, each ranked by descending job rank.
sub = comm.Split(color=r % 2, key=-r)
members = [q for q in range(n) if q % 2 == r % 2][::-1]
check(sub.size == len(members) and sub.rank == members.index(r), f"Split {sub}")
check(sub.allreduce(r) == sum(members), "allreduce on a split")
v = np.empty(1)
sub.Allreduce(np.array([float(r)]), v, op=sperli.MAX)
check(v[0] == max(members), "Allreduce on a split")
o = np.empty(len(members), np.int64)
sub.Iallgather(np.array([r], np.int64), o).Wait()
check(list(o) == members, f"Iallgather on a split {o}")
# Point-to-point in the split's ranks.
sn, sp = (sub.rank + 1) % sub.size, (sub.rank - 1) % sub.size
st = sperli.Status()
w = np.empty(1, np.int64)
sub.Sendrecv(np.array([r], np.int64), dest=sn, sendtag=30, recvbuf=w, source=sp, recvtag=30, status=st)
check(st.source == sp and w[0] == members[sp], f"Sendrecv on a split {st} {w}")
rq = sub.irecv(source=sp, tag=31)
sub.send(("hi", r), dest=sn, tag=31)
check(rq.wait(st) == ("hi", members[sp]) and st.source == sp, "irecv on a split")
# ANY_SOURCE on a split (HELLO feature bit 3, protocol §16.3): it takes
# the split's own message, never the world's with the same tag.
check(sub.p2p_communicators, "feature bit 3 in this job")
comm.Send(np.array([-1], np.int64), dest=r, tag=32)
sub.Send(np.array([r], np.int64), dest=sn, tag=32)
sub.Recv(w, source=sperli.ANY_SOURCE, tag=32, status=st)
check(st.source == sp and w[0] == members[sp], f"ANY_SOURCE on a split {st} {w}")
comm.Recv(w, source=r, tag=32)
check(w[0] == -1, "the world's message stays the world's")
# A synchronous send on the split completes once its receive matched.
rq = sub.Issend(np.array([r], np.int64), dest=sn, tag=33)
sub.Recv(w, source=sp, tag=33)
rq.Wait()
check(w[0] == members[sp], "Issend on a split")
rq = sub.issend({"from": r}, dest=sn, tag=34)
check(sub.recv(source=sperli.ANY_SOURCE, tag=34) == {"from": members[sp]}, "issend of an object")
rq.wait()
try:
    sperli.Checkpointer(sub, dir=".")
    raise AssertionError("a checkpointer on a split")
except sperli.ArgumentError as e:
    check("COMM_WORLD" in str(e) and not e.job_ended, repr(e))
sub.Free()
try:
    sub.Barrier()
    raise AssertionError("a call after Free")
except sperli.SperliError as e:
    check("freed" in str(e), repr(e))

# UNDEFINED joins none; the others make a communicator without rank 0.
s2 = comm.Split(sperli.UNDEFINED if r == 0 else 5, key=0)
check((s2 is None) == (r == 0), "Split with UNDEFINED")
if s2 is not None:
    check(s2.size == n - 1 and s2.rank == r - 1, f"{s2}")
    check(s2.allreduce(1) == n - 1, "allreduce without rank 0")
    s2.Free()

# Dup: the same ranks; its collectives never mix with the world's.
d = comm.Dup()
check(d.rank == r and d.size == n, f"Dup {d}")
x = np.empty(1)
rq = d.Iallreduce(np.array([1.0]), x)
comm.Barrier()
rq.Wait()
check(x[0] == n and d.bcast("dup" if r == 0 else None) == "dup", "Dup's calls")
d.Free()

check(len(set(comm.allgather(comm.sequence))) == 1, "sequences agree")
print("icalls ok", r, comm.sequence, flush=True)
