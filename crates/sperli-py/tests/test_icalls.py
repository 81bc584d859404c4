"""The non-blocking collectives, receives from any source, Split and Dup
at 1, 2 and 4 ranks (tests/ranks/icalls.py checks each against a serial
computation), and Split/Dup in a job without HELLO feature bit 2."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [1, 2, 4])
def test_nonblocking_any_source_and_communicators(n):
    p = run_job(n, "icalls.py")
    assert p.returncode == 0, describe(p)
    ok = lines_of(p, "icalls ok")
    assert len(ok) == n, describe(p)
    # Every rank made the same number of collective calls.
    assert len({l.split()[-1] for l in ok}) == 1, ok


def test_split_without_feature_bit_2_is_refused_and_the_job_goes_on():
    p = run_job(2, "no_communicators.py", env={"SPERLI_FEATURES": "3"})
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "no communicators ok")) == 2, describe(p)


@pytest.mark.parametrize("n", [2, 4])
def test_a_root_check_of_a_nonblocking_call_ends_the_job(n):
    p = run_job(n, "icalls_root.py")
    assert p.returncode == 0, describe(p)
    codes = {int(l.split()[-2]): l.split()[-1] for l in lines_of(p, "root check")}
    assert sorted(codes) == list(range(n)) and codes[0] == "1618", describe(p)
    # The others: the root's ABORT, or a peer that left after it first.
    assert all(codes[q] in ("1612", "1613") for q in range(1, n)), describe(p)
