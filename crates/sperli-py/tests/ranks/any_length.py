"""One call for any length: Bcast, Reduce and Allreduce (and the
lowercase allreduce of an array) of 100 MiB float64 arrays, each one call
of the package, checked against a serial left fold of every rank's data.
Prints `any length ok <rank> <sequence>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size
LEN = (100 << 20) // 8


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


def data(rank):
    # Exact in float64: small integers, distinct per rank and index.
    return (np.arange(LEN, dtype=np.float64) % 1000) + rank * 1000.0


mine = data(r)
want = data(0)
for q in range(1, n):
    want = want + data(q)  # the serial left fold, ascending

out = np.empty(LEN)
comm.Allreduce(mine, out, op=sperli.SUM)
check(np.array_equal(out, want), "Allreduce")

got = comm.allreduce(mine, op=sperli.SUM)
check(np.array_equal(got, want), "allreduce of an array")
del got

root = n - 1
red = np.full(LEN, -1.0) if r == root else None
comm.Reduce(mine, red, op=sperli.SUM, root=root)
check(r != root or np.array_equal(red, want), "Reduce")

buf = data(0) if r == 0 else np.zeros(LEN)
comm.Bcast(buf, root=0)
check(np.array_equal(buf, data(0)), "Bcast")

print(f"any length ok {r} {comm.sequence}", flush=True)

# Blocks past one v1 call (16777200 bytes per rank): Gather, Scatter,
# Allgather, Alltoall and Reduce_scatter_block, each one call of the package
# (the Rust call splits them).
del out, red, buf, mine, want
LENB = (17 << 20) // 8


def block(rank):
    return np.arange(LENB, dtype=np.float64) + rank * 1e7


whole = np.concatenate([block(q) for q in range(n)])
g = np.full(LENB * n, -1.0) if r == root else None
comm.Gather(block(r), g, root=root)
check(r != root or np.array_equal(g, whole), "Gather")
part = np.zeros(LENB)
comm.Scatter(whole if r == 0 else None, part, root=0)
check(np.array_equal(part, block(r)), "Scatter")
allg = np.zeros(LENB * n)
comm.Allgather(block(r), allg)
check(np.array_equal(allg, whole), "Allgather")
# Alltoall: block j of rank q's data goes to rank j.
def a2a_block(q, j):
    return block(q) + j * 1e3


sent = np.concatenate([a2a_block(r, j) for j in range(n)])
got = np.zeros(LENB * n)
comm.Alltoall(sent, got)
check(np.array_equal(got, np.concatenate([a2a_block(q, r) for q in range(n)])), "Alltoall")
rs = np.zeros(LENB)
comm.Reduce_scatter_block(sent, rs, op=sperli.SUM)
folded = a2a_block(0, r)
for q in range(1, n):
    folded = folded + a2a_block(q, r)
check(np.array_equal(rs, folded), "Reduce_scatter_block")
print(f"blocks ok {r}", flush=True)
