"""Allreduce of float64 numpy arrays (SUM), timed as `sperli-bench rank
coll` times the Rust call: a warm-up of a tenth of the calls, a barrier,
then COUNT calls; rank 0 prints the slowest rank's mean per call as
`RESULT allreduce <bytes per rank> <microseconds>`. The same code runs on
sperli (`sperli run -n N -- python3 allreduce.py`) and on mpi4py
(`mpirun -n N python3 allreduce.py --mpi4py`). Used by `cargo xtask bench`
(xtask/src/bench/python.rs)."""

import argparse
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--mpi4py", action="store_true", help="run on mpi4py instead of sperli")
ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
ap.add_argument("--sizes", default="8,16777216", help="bytes per rank, comma-separated")
args = ap.parse_args()

if args.mpi4py:
    from mpi4py import MPI

    comm, SUM, api = MPI.COMM_WORLD, MPI.SUM, "mpi4py " + __import__("mpi4py").__version__
else:
    import sperli

    comm, SUM, api = sperli.COMM_WORLD, sperli.SUM, "sperli " + sperli.__version__


def count(size):
    # The counts of crates/sperli-bench/src/rank.rs (coll_count).
    full, quick = (300, 40) if size <= 8 else (40, 6) if size <= 64 << 10 else (10, 3) if size <= 1 << 20 else (3, 1)
    return quick if args.quick else full


for size in (int(s) for s in args.sizes.split(",")):
    n = max(size // 8, 1)
    x = np.full(n, 1.0 + comm.rank)
    y = np.empty(n)
    c = count(size)
    for _ in range(-(-c // 10)):
        comm.Allreduce(x, y, op=SUM)
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(c):
        comm.Allreduce(x, y, op=SUM)
    us = (time.perf_counter() - t) * 1e6 / c
    assert y[0] == y[-1] == sum(1.0 + r for r in range(comm.size))
    slowest = comm.gather(us, root=0)
    if comm.rank == 0:
        print(f"RESULT allreduce {size} {max(slowest):.6f}", flush=True)
if comm.rank == 0:
    print(f"INFO python_api_{'mpi4py' if args.mpi4py else 'sperli'} {api}", flush=True)
