"""sperli.MPI's ULFM calls (protocol section 18.8.1) on healthy
communicators: a revoked dup refuses its calls with ERR_REVOKED (the
package's error: code 1613, check "revoked") while the world goes on, and
still agrees and shrinks; Agree and Iagree are the AND of flags that differ
on every rank (on an intercommunicator: of both groups' ranks); Iagree
mixes with a barrier. Prints "ulfm ok"."""

import array

from sperli import MPI

world = MPI.COMM_WORLD
size, me = world.Get_size(), world.Get_rank()
everyone = 0x7FFFFFFF & ~((1 << size) - 1)  # the AND of every rank's flag below


def flag_of(r):
    return 0x7FFFFFFF & ~(1 << r)


d = world.Dup()
assert not d.Is_revoked()
# A member's revoke reaches every member (protocol 18.8.1), so each checks
# the fresh communicator before anyone revokes it.
world.Barrier()
d.Revoke()
assert d.Is_revoked() and not world.Is_revoked()
for call in (d.Barrier, lambda: d.Send(b"", (me + 1) % size),
             lambda: d.Recv(bytearray(1), MPI.PROC_NULL),
             lambda: d.allreduce(1)):
    try:
        call()
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_REVOKED, e
        assert e.sperli is not None and e.sperli.code == 1613 and e.sperli.check == "revoked"
        assert not e.sperli.job_ended
    else:
        raise AssertionError("a call on a revoked communicator went through")
assert world.allreduce(1) == size  # the job goes on

assert d.Agree(flag_of(me)) == everyone
s = d.Shrink()
assert (s.Get_size(), s.Get_rank(), s.Is_revoked()) == (size, me, False)
assert s.allreduce(me) == size * (size - 1) // 2
assert MPI.Group.Compare(s.Get_failed(), MPI.GROUP_EMPTY) == MPI.IDENT
assert s.Ack_failed() == 0
s.Free()
d.Free()

buf = array.array("i", [flag_of(me)])
req = world.Iagree(buf)
world.Barrier()  # no order against the agreement
req.Wait()
assert buf[0] == everyone, buf

if size >= 2:
    color = int(me >= size // 2)
    local = world.Split(color, 0)
    ic = local.Create_intercomm(0, world, size // 2 if color == 0 else 0)
    local.Free()
    assert ic.Agree(flag_of(me)) == everyone
    sh = ic.Shrink()
    assert type(sh) is MPI.Intercomm
    assert (sh.Get_size(), sh.Get_remote_size()) == (ic.Get_size(), ic.Get_remote_size())
    sh.Barrier()
    ic.Revoke()
    try:
        ic.Barrier()
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_REVOKED
    else:
        raise AssertionError("a call on a revoked intercommunicator went through")
    sh.Free()
    ic.Free()

print("ulfm ok", flush=True)
