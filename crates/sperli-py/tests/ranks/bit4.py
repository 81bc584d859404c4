"""The numpy dtypes of HELLO feature bit 4 (protocol §17.2): bool, int8,
int16, uint16, complex64, complex128 in Allreduce, Reduce,
Reduce_scatter_block, Scan and Exscan, each checked against a serial left
fold in ascending rank order (§17.3); also through sperli.MPI's
INT8_T/INT16_T/UINT16_T/BOOL datatypes. With argument `without`
(SPERLI_FEATURES without bit 4) every such call raises ArgumentError H1618
before anything is sent and the job goes on. Prints `bit4 ok <rank>`."""

import sys

import numpy as np

import sperli
from sperli import MPI

comm = sperli.COMM_WORLD
me, n = comm.rank, comm.size
without = sys.argv[1:] == ["without"]


def check(ok, what):
    if not ok:
        raise AssertionError(f"rank {me}: {what}")


def data(rank, dtype, k):
    rng = np.random.default_rng(1000 * rank + k)
    if dtype == np.bool_:
        return rng.integers(0, 3, 6 * n) != 0
    if np.issubdtype(dtype, np.complexfloating):
        re = rng.integers(-50, 50, 6 * n) / 7.0
        im = rng.integers(-50, 50, 6 * n) / 3.0
        return (re + 1j * im).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, 6 * n, endpoint=True).astype(dtype)


def combine(a, b, op):
    """One `combine` of the table of §17.2, left operand first."""
    if op is sperli.SUM:
        return a + b
    if op is sperli.PROD:
        if np.issubdtype(a.dtype, np.complexfloating):
            # §17.3: four rounded products, one subtraction, one addition.
            re = a.real * b.real - a.imag * b.imag
            im = a.real * b.imag + a.imag * b.real
            return _cx(re, im, a.dtype)
        return a * b
    if op is sperli.MIN:
        return np.minimum(a, b)
    if op is sperli.MAX:
        return np.maximum(a, b)
    if op is sperli.LAND:
        return ((a != 0) & (b != 0)).astype(a.dtype)
    if op is sperli.LOR:
        return ((a != 0) | (b != 0)).astype(a.dtype)
    if op is sperli.LXOR:
        return ((a != 0) ^ (b != 0)).astype(a.dtype)
    if op is sperli.BAND:
        return a & b
    if op is sperli.BOR:
        return a | b
    return a ^ b


def _cx(re, im, dtype):
    out = np.empty(re.shape, dtype)
    out.real = re
    out.imag = im
    return out


OPS = {
    np.bool_: [sperli.LAND, sperli.LOR, sperli.LXOR],
    np.int8: [sperli.SUM, sperli.PROD, sperli.MIN, sperli.MAX, sperli.LAND, sperli.LXOR, sperli.BAND, sperli.BXOR],
    np.int16: [sperli.SUM, sperli.PROD, sperli.MAX, sperli.LOR, sperli.BOR],
    np.uint16: [sperli.SUM, sperli.MIN, sperli.MAX, sperli.BXOR],
    np.complex64: [sperli.SUM, sperli.PROD],
    np.complex128: [sperli.SUM, sperli.PROD],
}

with np.errstate(over="ignore", invalid="ignore"):
    for dtype, ops in OPS.items():
        for k, op in enumerate(ops):
            mine = data(me, dtype, k)
            prefix = [data(0, dtype, k)]
            for r in range(1, n):
                prefix.append(combine(prefix[-1], data(r, dtype, k), op))
            want = prefix[-1]
            what = f"{np.dtype(dtype).name} {op.name}"
            out = np.zeros_like(mine)
            if without:
                try:
                    comm.Allreduce(mine, out, op=op)
                    raise AssertionError(f"{what}: accepted without feature bit 4")
                except sperli.ArgumentError as e:
                    check(e.code == 1618 and "bit 4" in str(e), f"{what}: {e!r}")
                continue
            comm.Allreduce(mine, out, op=op)
            check(out.tobytes() == want.tobytes(), f"Allreduce {what}: {out} != {want}")
            root = n - 1
            out = np.zeros_like(mine)
            comm.Reduce(mine, out if me == root else None, op=op, root=root)
            if me == root:
                check(out.tobytes() == want.tobytes(), f"Reduce {what}")
            block = np.zeros(6, dtype)
            comm.Reduce_scatter_block(mine, block, op=op)
            check(block.tobytes() == want[6 * me:6 * me + 6].tobytes(), f"Reduce_scatter_block {what}")
            out = np.zeros_like(mine)
            comm.Scan(mine, out, op=op)
            check(out.tobytes() == prefix[me].tobytes(), f"Scan {what}")
            out = np.zeros_like(mine)
            comm.Exscan(mine, out, op=op)
            if me > 0:
                check(out.tobytes() == prefix[me - 1].tobytes(), f"Exscan {what}")

# sperli.MPI: the datatypes of bit 4 in a [buffer, datatype] spec.
world = MPI.COMM_WORLD
for dt, dtype in ((MPI.INT8_T, np.int8), (MPI.INT16_T, np.int16), (MPI.UINT16_T, np.uint16), (MPI.BOOL, np.bool_)):
    x = np.ones(3, dtype)
    y = np.zeros(3, dtype)
    op = MPI.LAND if dtype == np.bool_ else MPI.SUM
    try:
        world.Allreduce([x, dt], [y, dt], op=op)
        check(not without, f"MPI {dt}: accepted without feature bit 4")
        want = np.ones(3, dtype) if dtype == np.bool_ else np.full(3, n, dtype)
        check((y == want).all(), f"MPI Allreduce {dt}: {y}")
    except MPI.Exception as e:
        check(without, f"MPI {dt}: {e!r}")

# MINLOC and MAXLOC on packed value-index pairs (protocol §17.3): numpy
# structured arrays, bare (sperli) and with mpi4py's pair datatypes.
PAIRS = [(np.float32, MPI.FLOAT_INT), (np.float64, MPI.DOUBLE_INT), (np.int64, MPI.LONG_INT),
         (np.int32, MPI.TWOINT), (np.int16, MPI.SHORT_INT)]


def pairs_of(rank, value, k):
    rng = np.random.default_rng(7000 + 100 * rank + k)
    a = np.zeros(4 * n, np.dtype([("v", value), ("i", "<i4")]))
    a["v"] = rng.integers(-2, 3, 4 * n)  # many ties
    a["i"] = rng.integers(-3, 9, 4 * n)
    return a


def loc(a, b, op):
    """One minloc or maxloc, `a` the left operand: the smaller (larger)
    value, the smaller index on equal values."""
    out = a.copy()
    for j in range(len(a)):
        u, v = a["v"][j], b["v"][j]
        take_b = v < u if op is sperli.MINLOC else v > u
        if take_b:
            out[j] = b[j]
        elif u == v:
            out["i"][j] = min(a["i"][j], b["i"][j])
    return out


for k, (value, dt) in enumerate(PAIRS):
    for op in (sperli.MINLOC, sperli.MAXLOC):
        mine = pairs_of(me, value, k)
        want = pairs_of(0, value, k)
        for r in range(1, n):
            want = loc(want, pairs_of(r, value, k), op)
        out = np.zeros_like(mine)
        what = f"{np.dtype(value).name} {op.name}"
        if without:
            try:
                comm.Allreduce(mine, out, op=op)
                raise AssertionError(f"{what}: accepted without feature bit 4")
            except sperli.ArgumentError as e:
                check(e.code == 1618, f"{what}: {e!r}")
            continue
        comm.Allreduce(mine, out, op=op)
        check(out.tobytes() == want.tobytes(), f"Allreduce {what}: {out} != {want}")
        out = np.zeros_like(mine)
        mop = MPI.MINLOC if op is sperli.MINLOC else MPI.MAXLOC
        world.Allreduce([mine, dt], [out, dt], op=mop)
        check(out.tobytes() == want.tobytes(), f"MPI Allreduce {dt} {what}")
        out = np.zeros_like(mine)
        world.Reduce([mine, dt], [out, dt], op=mop, root=0)
        if me == 0:
            check(out.tobytes() == want.tobytes(), f"MPI Reduce {dt} {what}")

# The job goes on with the v1 types.
check(comm.allreduce(1) == n, "allreduce after")
print("bit4 ok", me, flush=True)
