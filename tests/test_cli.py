"""The command line on a machine with no GPU: what it says, what it writes, how it refuses.

``tilecraft stencil ladder`` is run in a subprocess without TRITON_INTERPRET, so the re-run of
itself under the Triton interpreter is exercised as a user meets it; the rest run in-process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tilecraft.cli import INTERPRETER_LABEL, app
from tilecraft.ops.stencil import VARIANTS

cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="describes the machine without a GPU")
runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    text = result.output + (getattr(result, "stderr", "") if result.stderr_bytes is not None else "")
    return result, text


@cpu_only
def test_info_says_no_gpu():
    result, text = invoke("info")
    assert result.exit_code == 0, text
    assert "No GPU is visible" in text
    assert "no ceilings were measured" in text
    assert torch.__version__ in text


@cpu_only
def test_info_json_parses():
    result = runner.invoke(app, ["info", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpu"] is False
    assert doc["ceilings"] is None
    assert doc["device"]["backend"] == "cpu"
    assert doc["device"]["versions"]["torch"] == torch.__version__
    assert "no GPU" in doc["note"]


@cpu_only
def test_ladder_reruns_itself_in_the_interpreter(tmp_path: Path, src_dir: Path):
    out = tmp_path / "ladder.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(src_dir), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        [sys.executable, "-m", "tilecraft", "stencil", "ladder", "--shape", "11", "12", "13",
         "--order", "2", "--dtype", "fp64", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in VARIANTS:
        assert name in proc.stdout, f"{name} missing from\n{proc.stdout}"
    assert INTERPRETER_LABEL in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["meta"]["mode"] == "triton-interpreter"
    records = doc["records"]
    assert [r["case"]["variant"] for r in records] == list(VARIANTS)
    assert all(r["measured"] is False for r in records)
    assert all(r["extra"]["ok"] for r in records), [r["extra"]["message"] for r in records]
    assert all(r["case"]["shape"] == [11, 12, 13] for r in records)


@pytest.mark.parametrize("args, needle", [
    (["--dtype", "fp16"], "--dtype"),
    (["--order", "3"], "even"),
    (["--order", "18"], "even"),
    (["--shape", "2", "12", "13"], "2R+1"),
    (["--shape", "9", "9", "9", "--order", "10"], "2R+1"),
    (["--shape", "11", "12"], "--shape"),
    (["--variants", "baseline,bogus"], "bogus"),
    (["--rounds", "0"], "--rounds"),
])
def test_ladder_bad_arguments_exit_2(args: list[str], needle: str):
    result, text = invoke("stencil", "ladder", *args)
    assert result.exit_code == 2, text
    assert needle in text


def test_sweep_bad_sizes_exit_2():
    result, text = invoke("stencil", "sweep", "--sizes", "256,big")
    assert result.exit_code == 2, text
    assert "--sizes" in text
    result, text = invoke("stencil", "sweep", "--rounds", "0")
    assert result.exit_code == 2 and "--rounds" in text, text


@cpu_only
def test_sweep_needs_a_gpu():
    result, text = invoke("stencil", "sweep", "--sizes", "64")
    assert result.exit_code == 2, text
    assert "needs a GPU" in text


def test_help_lists_the_commands():
    result, text = invoke("--help")
    assert result.exit_code == 0, text
    assert "info" in text and "stencil" in text
    result, text = invoke("stencil", "--help")
    assert "ladder" in text and "sweep" in text


@pytest.mark.parametrize("args", [
    ["stencil", "ladder", "--out", "{blocker}/x.json"],
    ["stencil", "sweep", "--out", "{blocker}/x.json"],
    ["gemm", "bench", "--out", "{blocker}/x.json"],
    ["attention", "bench", "--out", "{blocker}/x.json"],
    ["report", "--out", "{blocker}"],
])
def test_an_out_that_cannot_be_written_is_refused_first(tmp_path: Path, args: list[str]):
    """Before any work (a bench run's results were lost to a bad --out at its end); nothing is created."""
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    result, text = invoke(*[a.format(blocker=blocker) for a in args])
    assert result.exit_code == 2, text
    assert "error: --out" in text and "Traceback" not in text
    assert blocker.read_text() == "a file, not a folder" and sorted(tmp_path.iterdir()) == [blocker]
