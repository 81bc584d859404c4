"""User-defined reductions (protocol §17.4) and object reductions with a
Python op through sperli.MPI at 1, 2 and 4 ranks: tests/ranks/user_ops.py
checks them against serial left folds; an exception in a user function
ends the job. Object messages with and without HELLO feature bit 3
(tests/ranks/object_messages.py): the pickle alone, or v1's framing."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2, 4])
def test_user_ops(n):
    p = run_job(n, "user_ops.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "userops ok")) == n, describe(p)


def test_an_exception_in_a_user_function_ends_the_job():
    p = run_job(3, "user_ops.py", "raise")
    assert p.returncode != 0, describe(p)
    # Rank 0 folds, prints the traceback and raises; the others end with
    # the job (H1612, ABORT reason 2 from rank 0).
    assert lines_of(p, "raised 0"), describe(p)
    assert "ZeroDivisionError: on purpose" in p.stderr, describe(p)
    ended = lines_of(p, "ended")
    assert len(ended) == 2 and all("H1612" in l for l in ended), describe(p)


@pytest.mark.parametrize("features", [None, "7"])
def test_object_messages_with_and_without_feature_bit_3(features):
    # "7": bits 0, 1 and 2, no bit 3 (v1 point-to-point).
    env = {"SPERLI_FEATURES": features} if features else None
    p = run_job(2, "object_messages.py", "v1" if features else "bit3", env=env)
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "objects ok")) == 2, describe(p)
