"""sperli.MPI's ULFM calls after a real failure (protocol section 18.8),
under `sperli run --recover shrink`: the last rank kills itself; every
survivor's next allreduce raises MPI.Exception (ERR_PROC_FAILED), Shrink
gives the survivors in their old order, Get_failed names the lost rank,
and Agree and the allreduce go on over the survivors. Prints
"ulfm kill ok"."""

import os
import signal

from sperli import MPI

world = MPI.COMM_WORLD
world.Set_errhandler(MPI.ERRORS_RETURN)
size, me = world.Get_size(), world.Get_rank()


def lost(e):
    assert e.Get_error_class() in (MPI.ERR_PROC_FAILED, MPI.ERR_REVOKED), e


# The last rank may have its result of this step before a survivor has
# its own: as in ULFM, the survivor's call may then fail instead (the
# failure is not uniform), and that is its step that knew of the loss.
try:
    assert world.allreduce(1) == size
    knew = False
except MPI.Exception as e:
    assert me != size - 1, e
    lost(e)
    knew = True
if me == size - 1:
    os.kill(os.getpid(), signal.SIGKILL)
if not knew:
    try:
        world.allreduce(1)
    except MPI.Exception as e:
        lost(e)
    else:
        raise AssertionError("a step went through without the lost rank")
s = world.Shrink()
assert (s.Get_size(), s.Get_rank()) == (size - 1, me), (s.Get_size(), s.Get_rank())
failed = world.Get_failed()
assert failed.Get_size() == 1, failed.Get_size()
assert MPI.Group.Translate_ranks(failed, [0], world.Get_group()) == [size - 1]
assert s.allreduce(me) == sum(range(size - 1))
assert s.Agree(1) == 1
s.Barrier()
print("ulfm kill ok")
