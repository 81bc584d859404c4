"""sperli.MPI intercommunicators: low and high halves of the world joined by
Create_intercomm; every collective across them checked against what each
remote rank sent (reductions against a serial left fold written here),
Merge, Dup, Split, p2p with remote ranks and a wrong root. Prints
"inter ok"."""

import numpy as np

from sperli import MPI

world = MPI.COMM_WORLD
size, me = world.Get_size(), world.Get_rank()
color = int(me >= size // 2)
local = world.Split(color, 0)
ic = local.Create_intercomm(0, world, size // 2 if color == 0 else 0)
assert ic.is_inter and not ic.is_intra and type(ic) is MPI.Intercomm
lr, ls, rs = ic.Get_rank(), ic.Get_size(), ic.Get_remote_size()
theirs = [r for r in range(size) if int(r >= size // 2) != color]
assert ic.Get_remote_group().size == rs == len(theirs)


def contribution(j):
    s = 1.0 if j % 2 == 0 else -1.0
    return np.array([0.1 * (j + 1), s * 1e16 + j, 1.0 / (j + 3)])


def left_fold(rows, f):
    acc = rows[0].copy()
    for row in rows[1:]:
        acc = np.array([f(a, x) for a, x in zip(acc, row)])
    return acc


ic.Barrier()
for g in (0, 1):
    roots = ls if g == color else rs
    for root in range(roots):
        if g != color:
            role = root
        else:
            role = MPI.ROOT if root == lr else MPI.PROC_NULL
        rj = theirs[root] if g != color else None
        buf = np.full(3, me if role == MPI.ROOT else -1, dtype=np.int64)
        ic.Bcast(buf if role != MPI.PROC_NULL else None, root=role)
        if role not in (MPI.ROOT, MPI.PROC_NULL):
            assert (buf == rj).all(), buf
        rb = np.zeros((rs, 2), dtype=np.int32) if role == MPI.ROOT else None
        ic.Gather(np.array([me, me + 1], dtype=np.int32) if role >= 0 else None, rb, root=role)
        if role == MPI.ROOT:
            assert rb.tolist() == [[j, j + 1] for j in theirs], rb
        out = np.zeros(3) if role == MPI.ROOT else None
        ic.Reduce(contribution(me) if role >= 0 else None, out, op=MPI.SUM, root=role)
        if role == MPI.ROOT:
            want = left_fold([contribution(j) for j in theirs], lambda a, x: a + x)
            assert out.tobytes() == want.tobytes(), (out, want)
        got = ic.reduce(me if role >= 0 else None, op=MPI.MAX, root=role)
        assert got == (max(theirs) if role == MPI.ROOT else None), got
        got = ic.bcast({"from": me} if role == MPI.ROOT else None, root=role)
        assert got == ({"from": rj} if role >= 0 else None), got

out = np.zeros(3)
ic.Allreduce(contribution(me), out, op=MPI.PROD)
want = left_fold([contribution(j) for j in theirs], lambda a, x: a * x)
assert out.tobytes() == want.tobytes(), (out, want)
counts = list(range(1, rs + 1))
rb = np.zeros(sum(counts), dtype=np.float32)
ic.Allgatherv(np.full(lr + 1, me, dtype=np.float32), [rb, counts])
assert rb.tolist() == [float(j) for i, j in enumerate(theirs) for _ in range(i + 1)], rb
rb = np.zeros(rs, dtype=np.uint8)
ic.Alltoall(np.array([me * 10 + j for j in range(rs)], dtype=np.uint8), rb)
assert rb.tolist() == [j * 10 + lr for j in theirs], rb
total = ls * rs
data = np.arange(total, dtype=np.float64) * (me + 1)
rb = np.zeros(total // ls)
ic.Reduce_scatter_block(data, rb, op=MPI.SUM)
full = left_fold([np.arange(total, dtype=np.float64) * (j + 1) for j in theirs], lambda a, x: a + x)
assert rb.tolist() == full[lr * rs:(lr + 1) * rs].tolist(), rb
assert ic.allreduce(me, op=MPI.SUM) == sum(theirs)
assert ic.allgather(me) == theirs
# point-to-point names remote ranks
ic.send(me, dest=lr % rs, tag=3)
st = MPI.Status()
senders = [j for i, j in enumerate([r for r in range(size) if int(r >= size // 2) != color]) if i % ls == lr]
for _ in senders:
    v = ic.recv(source=MPI.ANY_SOURCE, tag=3, status=st)
    assert theirs[st.Get_source()] == v, (v, st.Get_source())
try:
    ic.bcast(None, root=rs)
    raise AssertionError("a root past the remote group was taken")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_ROOT
merged = ic.Merge(high=bool(color))
assert merged.Get_size() == size and merged.Get_rank() == me
d = ic.Dup()
assert type(d) is MPI.Intercomm and d.allgather(me) == theirs
s = ic.Split(lr % 2, 0)
want = [j for i, j in enumerate(theirs) if i % 2 == lr % 2]
if s == MPI.COMM_NULL:
    assert not want
else:
    assert s.allgather(me) == want
    s.Free()
# One host: COMM_TYPE_SHARED keeps both groups whole; UNDEFINED: COMM_NULL.
h = ic.Split_type(MPI.COMM_TYPE_SHARED)
assert type(h) is MPI.Intercomm and h.allgather(me) == theirs
h.Free()
assert ic.Split_type(MPI.UNDEFINED) == MPI.COMM_NULL
for c in (merged, d, ic, local):
    c.Free()
world.Barrier()
print("inter ok", flush=True)
