"""The README's example (examples/gradient_step.py) under sperli run."""

import pathlib
import subprocess
import sys

from conftest import describe, sperli_bin

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "gradient_step.py"


def test_data_parallel_gradient_step_checks_itself():
    p = subprocess.run(
        [sperli_bin(), "run", "-n", "4", "--", sys.executable, str(EXAMPLE)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )
    assert p.returncode == 0, describe(p)
    assert "match the serial computation" in p.stdout, describe(p)
