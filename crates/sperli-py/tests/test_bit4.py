"""The numpy dtypes of HELLO feature bit 4 (protocol §17) at 3 and 5
ranks (tests/ranks/bit4.py checks each call against a serial left fold),
and a job without the bit, which refuses them with H1618 and goes on."""

import pytest

from conftest import describe, lines_of, run_job


@pytest.mark.parametrize("n", [3, 5])
def test_new_dtypes(n):
    p = run_job(n, "bit4.py")
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "bit4 ok")) == n, describe(p)


def test_without_bit_4():
    # Bits 0 to 3: every feature but bit 4.
    p = run_job(3, "bit4.py", "without", env={"SPERLI_FEATURES": "15"})
    assert p.returncode == 0, describe(p)
    assert len(lines_of(p, "bit4 ok")) == 3, describe(p)
