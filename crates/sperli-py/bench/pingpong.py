"""Ping-pong of an 8-byte numpy array between ranks 0 and 1 with
`comm.Send`/`comm.Recv`, timed as `sperli-bench rank pingpong` times the
Rust calls: a warm-up of a tenth of the round trips, then COUNT round trips;
rank 0 prints the one-way latency (half a round trip, microseconds) as
`RESULT pingpong <bytes> <microseconds>`. The same code runs on sperli
(`sperli run -n 2 -- python3 pingpong.py`: `from sperli import MPI`) and on
mpi4py (`mpirun -n 2 python3 pingpong.py --mpi4py`: `from mpi4py import
MPI`). Used by `cargo xtask bench` (xtask/src/bench/python.rs)."""

import argparse
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--mpi4py", action="store_true", help="run on mpi4py instead of sperli")
ap.add_argument("--quick", action="store_true", help="fewer round trips (a smoke run)")
ap.add_argument("--bytes", type=int, default=8, help="message size in bytes")
args = ap.parse_args()

if args.mpi4py:
    import mpi4py
    from mpi4py import MPI

    api = "mpi4py " + mpi4py.__version__
else:
    import sperli
    from sperli import MPI

    api = "sperli " + sperli.__version__

comm = MPI.COMM_WORLD
me = comm.Get_rank()
# The counts of crates/sperli-bench/src/limits.rs (lat_count).
count = 1000 if args.quick else 4000
buf = np.full(args.bytes, 7, dtype=np.uint8)

if me <= 1 and comm.Get_size() > 1:
    peer = 1 - me
    for n, timed in ((count // 10, False), (count, True)):
        t = time.perf_counter()
        for _ in range(n):
            if me == 0:
                comm.Send(buf, dest=peer, tag=1)
                comm.Recv(buf, source=peer, tag=1)
            else:
                comm.Recv(buf, source=peer, tag=1)
                comm.Send(buf, dest=peer, tag=1)
        if timed and me == 0:
            us = (time.perf_counter() - t) * 1e6 / (2 * n)
            print(f"RESULT pingpong {args.bytes} {us:.6f}", flush=True)
    assert (buf == 7).all()
comm.Barrier()
if me == 0:
    print(f"INFO python_api_{'mpi4py' if args.mpi4py else 'sperli'} {api}", flush=True)
