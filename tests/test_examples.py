"""The examples run (on the CPU, Triton kernels in the interpreter, as the tests do)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_laplacian_example_prints_three():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "laplacian.py")], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout
    values = [float(v) for v in re.findall(r"in \[([0-9.]+), ([0-9.]+)\]", out) for v in v]
    assert len(values) == 4 and all(abs(v - 3) < 1e-9 for v in values), out
    assert out.count("boundary all zero: True") == 2, out
