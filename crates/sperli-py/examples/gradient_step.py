"""Data-parallel gradient descent with numpy over SPERLI.

Each rank holds a shard of a linear-regression data set, computes the
gradient of the mean squared error on its shard, and the ranks sum their
gradients with one Allreduce per step (numpy memory, no copy; every byte
between the ranks over mutually authenticated TLS 1.3). After the last
step every rank checks the weights against the same descent computed
serially on the whole data set.

    sperli run -n 4 -- python3 examples/gradient_step.py
"""

import numpy as np

import sperli

comm = sperli.COMM_WORLD
rank, size = comm.rank, comm.size

FEATURES, ROWS_PER_RANK, STEPS, LR = 8, 2000, 50, 0.1


def shard(r):
    """Rank r's rows: the same on every rank that asks (a fixed seed)."""
    g = np.random.default_rng(1000 + r)
    x = g.standard_normal((ROWS_PER_RANK, FEATURES))
    true_w = np.arange(1, FEATURES + 1, dtype=np.float64)
    y = x @ true_w + 0.01 * g.standard_normal(ROWS_PER_RANK)
    return x, y


x, y = shard(rank)
n_total = comm.allreduce(len(y))  # lowercase: a Python int

# The starting weights come from rank 0.
w = np.random.default_rng(7).standard_normal(FEATURES) if rank == 0 else np.empty(FEATURES)
comm.Bcast(w, root=0)

grad = np.empty(FEATURES)
for step in range(STEPS):
    # Local gradient of sum((x w - y)^2) / n_total, summed over ranks.
    np.matmul(x.T, x @ w - y, out=grad)
    grad *= 2.0 / n_total
    comm.Allreduce(sperli.IN_PLACE, grad, op=sperli.SUM)
    w -= LR * grad
    if step % 10 == 0 or step == STEPS - 1:
        loss = comm.allreduce(float(np.sum((x @ w - y) ** 2))) / n_total
        if rank == 0:
            print(f"step {step:2d}  loss {loss:.6f}", flush=True)

# The same descent, serially, on every rank's rows.
xs, ys = zip(*(shard(r) for r in range(size)))
X, Y = np.vstack(xs), np.concatenate(ys)
ws = np.random.default_rng(7).standard_normal(FEATURES)
for _ in range(STEPS):
    ws -= LR * (2.0 / len(Y)) * (X.T @ (X @ ws - Y))
if not np.allclose(w, ws, rtol=1e-10, atol=1e-12):
    raise SystemExit(f"rank {rank}: weights differ from the serial computation: {w} vs {ws}")
# Every rank holds the same weights, bit for bit (the fold order is fixed).
if not all(np.array_equal(w, other) for other in comm.allgather(w)):
    raise SystemExit(f"rank {rank}: ranks hold different weights")
if rank == 0:
    print(f"{size} ranks, {n_total} rows: weights {np.round(w, 3)} match the serial computation", flush=True)
