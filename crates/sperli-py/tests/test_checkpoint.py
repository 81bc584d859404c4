"""A checkpointed numpy state survives a restart (sperli run
--restart-max 1 --checkpoint-dir DIR)."""

from conftest import describe, lines_of, run_job


def test_numpy_state_survives_a_restart(tmp_path):
    p = run_job(3, "ckpt.py", flags=("--restart-max", "1", "--checkpoint-dir", str(tmp_path / "ck")), timeout=180)
    assert p.returncode == 0, describe(p)
    assert "restarting the job as incarnation 2" in p.stderr, describe(p)
    assert sorted(lines_of(p, "resumed")) == [f"[{r}] resumed 6" for r in range(3)], describe(p)
    assert len(lines_of(p, "result ok 2")) == 3, describe(p)
