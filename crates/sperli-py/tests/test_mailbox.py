"""The mailbox from Python: a client (this process) submits tasks into a
warm 2-rank job whose handlers are Python (tests/ranks/mailbox_server.py)."""

import os
import sys

import numpy as np
import pytest

import sperli
from conftest import RANKS, sperli_bin


def test_python_client_and_python_handlers():
    name = f"pytest-{os.getpid()}"
    mb = sperli.Mailbox.start_job(name, sperli_bin(), 2, [sys.executable, str(RANKS / "mailbox_server.py")])
    try:
        assert mb.name == name and mb.world_size == 2
        assert [r.rank for r in mb.ping()] == [0, 1]
        v = np.array([1, 2, 3], dtype=np.uint64)
        replies = mb.submit("sum", v.tobytes())
        assert [r.rank for r in replies] == [0, 1] and all(r.ok for r in replies)
        for r in replies:
            assert (np.frombuffer(r.data, dtype=np.int64) == v * 3).all()  # 1x + 2x
        sq = mb.submit("square", [(3).to_bytes(8, "little"), (4).to_bytes(8, "little")], target="per_rank")
        assert [int.from_bytes(r.data, "little") for r in sq] == [9 + 2, 16 + 2]
        one = mb.submit("where", b"", target=1)
        assert len(one) == 1 and one[0].rank == 1 and one[0].data.startswith(b"rank 1 of 2, seq ")
        with pytest.raises(sperli.TaskFailedError) as e:
            mb.submit("fail", b"")
        assert e.value.code == 1642 and not e.value.job_ended
        rs = e.value.replies
        assert rs[0].ok and rs[0].data == b"fine"
        assert not rs[1].ok and rs[1].error_type == "KeyError" and "only rank 1 fails" in rs[1].error
        # The group goes on serving; a task's communicator ends with its task.
        mb.submit("keep", b"")
        stale = mb.submit("stale", b"")
        assert all(b"used after its task returned" in r.data for r in stale), stale
        with pytest.raises(sperli.SperliError) as e:
            mb.submit("no-such-handler", b"")
        assert e.value.code == 1642 and e.value.replies[0].error_type == "unknown-handler"
        # Finalize on a task's communicator closes only that view; the
        # server's communicator goes on (the next tasks' collectives).
        early = mb.submit("close_early", b"")
        assert [int.from_bytes(r.data, "little") for r in early] == [2, 2], early
        ring = mb.submit("ring", b"")
        assert [int.from_bytes(r.data, "little") for r in ring] == [1, 0]
        # Many tasks in a row: each one's collectives continue the server's.
        for k in range(50):
            got = mb.submit("sum", np.array([k], dtype=np.uint64).tobytes())
            assert np.frombuffer(got[1].data, dtype=np.int64)[0] == 3 * k
        assert [r.rank for r in mb.ping()] == [0, 1]
    finally:
        mb.shutdown()
