"""Gatherv, Scatterv, Allgatherv and Alltoallv in every buffer form
mpi4py allows, checked against a serial computation; then the refusals
(ArgumentError H1618, the job goes on). Runs at any job size. Prints
`vcalls ok <rank> <sequence>`."""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
r, n = comm.rank, comm.size


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


def count(i):
    """Rank i's block length (some are empty)."""
    return (i * 7 + 3) % 5


def block(i, dt):
    return (np.arange(count(i)) + 10 * i).astype(dt)


counts = [count(i) for i in range(n)]
displs = list(np.cumsum([0] + counts[:-1]))
total = sum(counts)

for dt in sperli.DTYPES:
    want = np.concatenate([block(i, dt) for i in range(n)])
    mine = block(r, dt)
    for root in range(n):
        # Gatherv: [buf, counts], [buf, counts, displs], [buf, (counts, displs), type].
        for form in range(3):
            out = np.zeros(total, dtype=dt)
            spec = [
                [out, counts],
                [out, counts, displs],
                [out, (counts, displs), dt],
            ][form]
            comm.Gatherv(mine, spec if r == root else None, root=root)
            if r == root:
                check((out == want).all(), f"Gatherv {dt} form {form} root {root}")
        # Scatterv: the root's blocks in reverse order inside its buffer.
        rev = list(reversed(range(n)))
        buf = np.concatenate([block(i, dt) for i in rev]) if n else np.zeros(0, dt)
        rdispls = [0] * n
        at = 0
        for i in rev:
            rdispls[i] = at
            at += counts[i]
        got = np.full(count(r), 99, dtype=dt)
        comm.Scatterv([buf, counts, rdispls] if r == root else None, got, root=root)
        check((got == mine).all(), f"Scatterv {dt} root {root}")
    # Allgatherv into every form, and IN_PLACE.
    out = np.zeros(total, dtype=dt)
    comm.Allgatherv(mine, [out, counts])
    check((out == want).all(), f"Allgatherv {dt}")
    out = np.zeros(total, dtype=dt)
    out[displs[r] : displs[r] + counts[r]] = mine
    comm.Allgatherv(sperli.IN_PLACE, [out, (counts, displs)])
    check((out == want).all(), f"Allgatherv IN_PLACE {dt}")
    # Alltoallv: rank r sends (r + j) % 3 elements valued 10 r + j to rank j.
    scounts = [(r + j) % 3 for j in range(n)]
    sbuf = np.concatenate([np.full(scounts[j], 10 * r + j, dtype=dt) for j in range(n)])
    rcounts = [(i + r) % 3 for i in range(n)]
    rbuf = np.zeros(sum(rcounts), dtype=dt)
    comm.Alltoallv([sbuf, scounts], [rbuf, rcounts])
    expect = np.concatenate([np.full(rcounts[i], 10 * i + r, dtype=dt) for i in range(n)])
    check((rbuf == expect).all(), f"Alltoallv {dt}")

# A bare buffer is `size` equal blocks.
x = np.arange(2 * n, dtype=np.float64)
y = np.zeros(2, dtype=np.float64)
comm.Scatterv(x, y, root=0)
check((y == [2 * r, 2 * r + 1]).all(), "Scatterv of a bare buffer")
z = np.zeros(2 * n)
comm.Allgatherv(y, z)
check((z == x).all(), "Allgatherv into a bare buffer")


# ---- refusals: ArgumentError H1618, the job goes on ---------------------

def refused(words, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except sperli.ArgumentError as e:
        check(e.code == 1618 and not e.job_ended, f"{words}: {e.code} {e.job_ended}")
        check(words in str(e), f"{words!r} not in {e}")
        return
    raise AssertionError(f"rank {r}: {words}: no ArgumentError")


out = np.zeros(total)
refused("counts or displacements for", comm.Allgatherv, np.zeros(count(r)), [out, counts + [1]])
refused("is negative", comm.Allgatherv, np.zeros(count(r)), [out, [-1] * n])
refused("does not fit the buffer", comm.Allgatherv, np.zeros(count(r)), [out, counts, [total] * n])
refused("not the buffer's dtype", comm.Allgatherv, np.zeros(count(r)), [out, counts, None, "int32"])
refused("sequences of integers", comm.Allgatherv, np.zeros(count(r)), [out, "abc"])
refused("a v-call buffer is", comm.Alltoallv, [], [out, counts])
refused("is float64 but recvbuf is int32", comm.Allgatherv, np.zeros(1), [np.zeros(n, np.int32), [1] * n])
# The root's spec of Scatterv refused on every rank (the lengths go first).
if r == 0:
    refused("counts or displacements for", comm.Scatterv, [np.zeros(3), [3] + [0] * n], np.zeros(3), root=0)
else:
    refused("rank 0 refused the call", comm.Scatterv, None, np.zeros(0), root=0)
# A block longer than one frame carries: that rank refuses, the others learn it.
big = np.zeros(16777200 // 8 + 1) if r == n - 1 else np.zeros(1)
words = "exceed the 16777200" if r == n - 1 else f"rank {n - 1} refused the call"
spec = [np.zeros(n - 1 + len(big)), [1] * (n - 1) + [len(big)]] if r == 0 else None
refused(words, comm.Gatherv, big, spec, root=0)
refused(words, comm.Allgatherv, big, [np.zeros(n - 1 + len(big)), [1] * (n - 1) + [len(big)]])

# The job goes on.
t = np.array([1.0])
comm.Allreduce(sperli.IN_PLACE, t)
check(t[0] == n, "Allreduce after the refusals")
print(f"vcalls ok {r} {comm.sequence}", flush=True)
