"""``tilecraft gemm`` on a machine without a GPU, and examples/gemm.py in the interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from tilecraft.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_bench_without_gpu_runs_a_labelled_interpreter_check(tmp_path):
    out = tmp_path / "g.json"
    res = runner.invoke(app, ["gemm", "bench", "--dtype", "bf16,int8", "--layouts", "NN", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "interpreter" in res.output and "correctness only" in res.output
    doc = json.loads(out.read_text())
    assert doc["records"] and all(r["measured"] is False for r in doc["records"])
    assert {r["case"]["dtype"] for r in doc["records"]} == {"bf16", "int8"}
    assert {r["case"]["layout"] for r in doc["records"]} == {"NN"}


def test_bench_bad_arguments_exit_2():
    for args in (["--dtype", "bf17"], ["--suite", "huge"], ["--layouts", "NX"], ["--budget", "0"], ["--settle", "-1"],
                 ["--settle", "nan"]):
        res = runner.invoke(app, ["gemm", "bench", *args])
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output


def test_config_command():
    res = runner.invoke(app, ["gemm", "config", "8192", "8192", "8192", "--arch", "sm90", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    # what matmul runs on an sm90 GPU (ops.gemm.problem_of on meta tensors): the Gluon kernel here
    assert doc["heuristic"]["kernel"] == "gluon" and doc["space"]
    assert doc["pdl"] == {"mode": "late"}  # the Gluon kernel: the next launch once its last loads are issued
    # 2048 tiles of 128x256 in 16 even rounds of 128 programs (ops.persistent_programs, docs/gemm.md follow-up 33)
    assert doc["grid"] == {"programs": 128, "units": 2048}
    res = runner.invoke(app, ["gemm", "config", "8192", "8192", "8192", "--dtype", "tf32", "--arch", "sm90"])
    assert res.exit_code == 0 and "regs pair" in res.output and "128 programs over 2048 work units" in res.output
    res = runner.invoke(app, ["gemm", "config", "4096", "4096", "4096", "--dtype", "fp32", "--arch", "sm90", "--json"])
    assert json.loads(res.output)["heuristic"]["kernel"] == "fma"  # fp32 ieee: the Gluon FMA kernel
    # small M: the programmatic-dependent-launch mode the call would take (docs/gemm.md follow-up 21)
    res = runner.invoke(app, ["gemm", "config", "64", "4096", "4096", "--arch", "sm90", "--json"])
    assert json.loads(res.output)["pdl"] == {"mode": "mid", "trigger_blocks_before_end": 8, "prefetch_blocks": 2}
    # one K block a program: no trigger inside the loop, the one after it fires ("late"; it printed "mid ... 0 K
    # blocks before this one's end")
    res = runner.invoke(app, ["gemm", "config", "64", "64", "64", "--arch", "sm90", "--dtype", "tf32", "--json"])
    assert json.loads(res.output)["pdl"] == {"mode": "late"}
    res = runner.invoke(app, ["gemm", "config", "16", "4096", "4096", "--arch", "sm90"])
    assert res.exit_code == 0 and "programmatic dependent launch on sm90: early" in res.output, res.output
    res = runner.invoke(app, ["gemm", "config", "64", "4096", "4096", "--arch", "sm80", "--json"])
    assert json.loads(res.output)["pdl"] is None
    # 1000^3 on sm90: the short-K tile in clusters of two (docs/gemm.md follow-up 32); the switch turns them off
    res = runner.invoke(app, ["gemm", "config", "1000", "1000", "1000", "--arch", "sm90"])
    assert res.exit_code == 0 and "s5 g8 c2" in res.output and "clusters of 2 CTAs" in res.output, res.output
    res = runner.invoke(app, ["gemm", "config", "1000", "1000", "1000", "--arch", "sm90"],
                        env={"TILECRAFT_GEMM_CLUSTER": "0"})
    assert res.exit_code == 0 and "s4 g8" in res.output and "c2" not in res.output, res.output
    res = runner.invoke(app, ["gemm", "config", "0", "8", "8"])
    assert res.exit_code == 2
    # the SM count the wave rules plan for: 512 x 11008 NT takes 128x128 tiles on 132 SMs (128x256 tiles
    # would make 1.3 waves), 128x256 on 114 (both shapes fill their last wave alike there)
    doc = json.loads(runner.invoke(app, ["gemm", "config", "512", "11008", "4096", "--layout", "NT", "--arch", "sm90",
                                         "--json"]).output)
    assert doc["sms"] == 132 and doc["heuristic"]["block_n"] == 128
    doc = json.loads(runner.invoke(app, ["gemm", "config", "512", "11008", "4096", "--layout", "NT", "--arch", "sm90",
                                         "--sms", "114", "--json"]).output)
    assert doc["sms"] == 114 and doc["heuristic"]["block_n"] == 256
    assert runner.invoke(app, ["gemm", "config", "8", "8", "8", "--sms", "-1"]).exit_code == 2


def test_example_runs_in_the_interpreter():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "gemm.py")], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout
    assert "exact: True" in out
    errors = [float(line.split("relative error")[1].split()[0]) for line in out.splitlines() if "relative error" in line]
    assert len(errors) == 5 and all(e < 1e-2 for e in errors), out
