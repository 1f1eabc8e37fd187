"""examples/attention.py runs on the CPU (Triton kernels in the interpreter) and reports small errors."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_attention_example_errors_are_small():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "attention.py")], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout
    errors = [float(x) for x in re.findall(r"(?:out|d[qkv]) ([0-9.]+e[-+][0-9]+)", out)]
    assert len(errors) == 4 and all(e < 2e-2 for e in errors), out
