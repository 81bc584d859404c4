"""sperli.MPI's user-defined ops (Op.Create), op(x, y), Reduce_local and
the object reductions folded with a Python op, against serial left
folds; runs at any job size. With the argument `raise`, rank 0's user
function raises in an Allreduce: the job ends. Prints `userops ok <rank>`."""

import array
import pickle
import sys

import numpy as np

from sperli import MPI

comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {r}: {what}")


calls = []


def horner(inbuf, inoutbuf, datatype):
    """inoutbuf = 31 * inbuf + inoutbuf (int64, wrapping): not
    commutative, so the order of the fold shows."""
    calls.append(datatype)
    a = np.frombuffer(inbuf, dtype="<i8")
    b = np.frombuffer(inoutbuf, dtype="<i8")
    b[:] = a * 31 + b


def data(rank):
    return np.arange(4, dtype="<i8") * 7 + rank * 1000 + 1


def left_fold(last):
    acc = data(0).copy()
    for k in range(1, last + 1):
        acc = acc * 31 + data(k)
    return acc


if sys.argv[1:] == ["raise"]:
    def boom(inbuf, inoutbuf, datatype):
        raise ZeroDivisionError("on purpose")
    op = MPI.Op.Create(boom)
    out = np.zeros(1, dtype="<i8")
    try:
        comm.Allreduce(np.ones(1, dtype="<i8"), out, op)
        comm.Barrier()
    except ZeroDivisionError:
        check(r == 0, "only the folding rank raises the function's exception")
        print("raised", r, flush=True)
        sys.exit(3)
    except MPI.Exception as e:
        print("ended", r, e, flush=True)
        sys.exit(4)
    sys.exit(1)

op = MPI.Op.Create(horner, commute=False)
check(not op.is_predefined and not op.Is_commutative() and op != MPI.SUM, "a user op")
check(MPI.Op.Create(horner, True).Is_commutative(), "commute=True")

# ---- buffers ---------------------------------------------------------------
out = np.zeros(4, dtype="<i8")
comm.Allreduce([data(r), MPI.INT64_T], [out, MPI.INT64_T], op)
check((out == left_fold(n - 1)).all(), f"Allreduce {out} {left_fold(n - 1)}")
check(all(dt == MPI.INT64_T for dt in calls), "the function sees the spec's datatype")
check(len(calls) == (n - 1 if r == 0 else 0), f"rank 0 folds n - 1 times: {len(calls)}")
for root in range(n):
    out[:] = -1
    comm.Reduce(data(r), out, op, root=root)
    if r == root:
        check((out == left_fold(n - 1)).all(), f"Reduce root {root}")
    else:
        check((out == -1).all(), "Reduce leaves a non-root's recvbuf")
buf = data(r).copy()
comm.Allreduce(MPI.IN_PLACE, buf, op)
check((buf == left_fold(n - 1)).all(), "Allreduce IN_PLACE")
comm.Scan(data(r), out, op)
check((out == left_fold(r)).all(), "Scan")
out[:] = -1
comm.Exscan(data(r), out, op)
check((out == (left_fold(r - 1) if r else -1)).all(), "Exscan")
whole = np.concatenate([data(r)] * n)
block = np.zeros(4, dtype="<i8")
comm.Reduce_scatter_block(whole, block, op)
check((block == left_fold(n - 1)).all(), "Reduce_scatter_block")
comm.Iallreduce(data(r), out, op).Wait()
check((out == left_fold(n - 1)).all(), "Iallreduce")

# ---- local reductions ------------------------------------------------------
a, b = data(1), data(2)
op.Reduce_local(a, b)
check((b == data(1) * 31 + data(2)).all(), "Reduce_local with a user op")
x = array.array("i", [1, 2, 3])
y = array.array("i", [10, 20, 30])
MPI.SUM.Reduce_local([x, MPI.INT], [y, MPI.INT])
check(list(y) == [11, 22, 33] and list(x) == [1, 2, 3], "Reduce_local SUM")
try:
    MPI.SUM.Reduce_local([x, 2, MPI.INT], [y, 3, MPI.INT])
    check(False, "Reduce_local of two counts")
except ValueError:
    pass

# ---- op(x, y) and the object reductions -------------------------------------
check(MPI.SUM(1, 2) == 3 and MPI.REPLACE(2, 3) == 3 and MPI.NO_OP(2, 3) == 2, "op(x, y)")
check(MPI.MAXLOC((1, 0), (2, 1)) == (2, 1) and MPI.MINLOC((1, 5), (1, 2)) == (1, 2), "LOC")
def cat(p, q, datatype):
    """Lists and strings: the order shows."""
    return p + q


concat = MPI.Op.Create(cat)
check(concat([1], [2]) == [1, 2], "a user op on objects")
check(comm.allreduce([r], concat) == list(range(n)), "allreduce of lists, ascending")
got = comm.reduce([r], concat, root=n - 1)
check(got == (list(range(n)) if r == n - 1 else None), "reduce of lists")
check(comm.scan(str(r), MPI.SUM) == "".join(map(str, range(r + 1))), "scan of str with SUM")
check(comm.exscan([r], concat) == (list(range(r)) if r else None), "exscan of lists")
check(comm.allreduce((r % 2, r), MPI.MAXLOC) == ((1, 1) if n > 1 else (0, 0)), "MAXLOC ties")
check(comm.allreduce((-(r % 2), r), MPI.MINLOC) == ((-1, 1) if n > 1 else (0, 0)), "MINLOC")
check(comm.allreduce(r, MPI.REPLACE) == n - 1 and comm.allreduce(r, MPI.NO_OP) == 0, "REPLACE")
check(comm.allreduce(r + 1) == n * (n + 1) // 2, "numbers still reduce natively")

# ---- handles ---------------------------------------------------------------
clone = pickle.loads(pickle.dumps(concat))
check(clone != concat and clone([1], [2]) == [1, 2], "a pickled user op is a new one")
concat.Free()
check(not concat and clone, "Free")
ops = []
try:
    for _ in range(40):
        ops.append(MPI.Op.Create(horner))
    check(False, "more than 32 live user ops")
except RuntimeError:
    pass
for o in ops:
    o.Free()
MPI.Op.Create(horner).Free()

print("userops ok", r, flush=True)
