"""The attention suite's bookkeeping (FLOPs, bytes, records), ``measure`` and the results JSON in the
interpreter, its CLI on a machine without a GPU, and the kernels compiling for sm90 and gfx942
(cross-compiled in child processes, no GPU needed)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tilecraft.bench import attention as ba
from tilecraft.bench.harness import write_results
from tilecraft.cli_attention import parse_shape
from tilecraft.hardware.device import DeviceInfo
from tilecraft.kernels import attention as kernels
from tilecraft.ops import attention as ops

ROOT = Path(__file__).resolve().parents[2]


def test_visible_pairs_and_flops():
    assert ba.visible_pairs(4, 4, False) == 16
    assert ba.visible_pairs(4, 4, True) == 10  # 1 + 2 + 3 + 4
    assert ba.visible_pairs(5, 3, True) == 0 + 0 + 1 + 2 + 3  # bottom-right: two rows see nothing
    assert ba.visible_pairs(2, 5, True) == 4 + 5
    s = ba.Shape(4, 16, 16, 4096, 4096, 128)
    assert ba.attention_flops(s) == 4 * 4 * 16 * 4096 * 4096 * 128
    causal = ba.Shape(4, 16, 16, 4096, 4096, 128, True)
    assert math.isclose(ba.attention_flops(causal) / ba.attention_flops(s), 0.5, rel_tol=1e-3)
    assert ba.attention_flops(s, backward=True) == 2.5 * ba.attention_flops(s)
    gqa = ba.Shape(2, 8, 2, 3, 100, 64)
    assert ba.attention_bytes(gqa) == 2 * (2 * 8 * 3 * 64) * 2 + 2 * (2 * 2 * 100 * 64) * 2


def test_records_carry_flops_bytes_time_and_ratios():
    s = ba.Shape(1, 2, 2, 64, 64, 32)
    res = [ba.Timed("tilecraft", True, 1e-3, time_ms=2.0), ba.Timed("sdpa-cudnn", True, 1e-3, time_ms=1.0),
           ba.Timed("sdpa-flash", True, 1e-3, time_ms=4.0), ba.Timed("sdpa-efficient", False, None, message="x")]
    recs = ba.records_for(s, "bf16", "fwd", res)
    ours = recs[0]
    assert ours.peer == "sdpa-cudnn" and math.isclose(ours.ratio, 0.5)
    assert ours.extra["ratio_to"] == {"sdpa-cudnn": 0.5, "sdpa-flash": 2.0}
    for r in recs:
        assert {"flops", "bytes", "time_ms"} <= set(r.extra)
    decode = ba.Shape(1, 8, 2, 1, 4096, 128)
    rec = ba.records_for(decode, "bf16", "fwd", res[:1], copy_TBps=4.0)[0]
    assert rec.metric == "bandwidth" and rec.ceiling == "copy"
    assert math.isclose(rec.ratio, ba.attention_bytes(decode) / 2e-3 / 1e12 / 4.0)


def test_median_of_rounds_keeps_each_implementations_median_round_and_any_failure():
    rounds = [[ba.Timed("tilecraft", True, 1e-3, 3.0, {"runs": 1}), ba.Timed("sdpa-cudnn", True, 1e-3, 1.0)],
              [ba.Timed("tilecraft", True, 2e-3, 1.0, {"runs": 2}), ba.Timed("sdpa-cudnn", False, None, None, None, "x")],
              [ba.Timed("tilecraft", True, 4e-3, 2.0, {"runs": 3}), ba.Timed("sdpa-cudnn", True, 1e-3, 0.5)]]
    merged = {r.impl: r for r in ba.median_of_rounds(rounds)}
    ours = merged["tilecraft"]
    assert ours.time_ms == 2.0 and ours.rel_error == 4e-3 and ours.timing == {"runs": 3, "round_times_ms": [3.0, 1.0, 2.0]}
    assert not merged["sdpa-cudnn"].ok and merged["sdpa-cudnn"].message == "x"  # a failed round is not hidden
    two = ba.median_of_rounds([rounds[0][:1], rounds[1][:1]])
    assert two[0].time_ms == 1.0  # median_low of two rounds: the faster one, for every implementation alike
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="rounds"):
            ba.bench([ba.Shape(1, 1, 1, 4, 4, 8)], rounds=bad)


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_measure_on_cpu_and_results_json(direction, tmp_path, capsys):
    """``measure`` end to end in the interpreter (the check, then the timing loop, no SDPA), its
    records into the results JSON and back."""
    s = ba.Shape(1, 2, 1, 20, 20, 32, True)
    results = ba.measure(s, torch.float16, direction, backends=(), device="cpu", graphs=False, budget_s=0.0)
    assert [r.impl for r in results] == ["tilecraft"]
    ours = results[0]
    assert ours.ok, ours.message
    assert ours.rel_error < (1.5 if direction == "bwd" else 1) * ba.TOLERANCE[torch.float16]
    assert ours.time_ms > 0 and ours.timing["method"] == "eager"
    if direction == "bwd":  # deterministic=None on a CPU: the dQ kernel, named in the record
        assert ours.timing["dq_path"] == "kernel"
    cfg = (ops.INTERPRETER_BWD if direction == "bwd" else ops.INTERPRETER_FWD).as_dict()
    records = ba.records_for(s, "fp16", direction, results, config=cfg)
    info = DeviceInfo(name="Test CPU", backend="cpu", versions={"torch": "9.9.9", "triton": "8.8.8"})
    path = write_results(records, "attention-bench", tmp_path / "attention.json", info=info,
                         meta={"mode": "triton-interpreter"})
    if direction == "bwd":
        from tilecraft.cli_attention import _print_table

        _print_table(records, info, "fp16", [])
        assert "dQ: kernel" in capsys.readouterr().out
    doc = json.loads(path.read_text())
    assert doc["suite"] == "attention-bench" and doc["meta"] == {"mode": "triton-interpreter"}
    (rec,) = doc["records"]
    assert rec["suite"] == "attention." + direction and rec["device"] == "Test CPU"
    assert rec["case"]["impl"] == "tilecraft" and rec["case"]["config"] == cfg and rec["case"]["causal"]
    assert rec["extra"]["ok"] and rec["extra"]["time_ms"] == ours.time_ms
    assert rec["extra"]["flops"] == ba.attention_flops(s, backward=direction == "bwd")
    assert math.isclose(rec["ours"], rec["extra"]["tflops"])


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_measure_check_sees_unwritten_outputs(direction, monkeypatch):
    """The check runs ours into NaN-filled out, lse and gradients: a launch that writes nothing fails it."""
    monkeypatch.setattr(ops, "launch_fwd" if direction == "fwd" else "launch_bwd", lambda *a, **kw: None)
    (ours,) = ba.measure(ba.Shape(1, 1, 1, 9, 9, 16), torch.float16, direction, backends=(), device="cpu",
                         graphs=False, budget_s=0.0)
    assert not ours.ok and "NaN" in ours.message and ours.time_ms is None


def test_signatures_name_every_kernel_argument():
    for sig in ba.kernel_signatures(ba.Shape(2, 8, 2, 300, 300, 96, True), torch.bfloat16, deterministic=True):
        fn = getattr(kernels, sig["kernel"])
        assert set(fn.arg_names) == set(sig["signature"]) | set(sig["constexprs"]), sig["kernel"]


def test_parse_shape():
    s = parse_shape("B=4,H=16,HKV=4,SQ=1,SK=8192,D=128,causal")
    assert (s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.head_dim, s.causal) == (4, 16, 4, 1, 8192, 128, True)
    for bad in ("B=4,H=16,S=10", "B=4,H=16,HKV=3,S=10,D=64", "B=x", "B=1,H=1,S=1,D=512", "Q=3"):
        with pytest.raises(ValueError):
            parse_shape(bad)


def test_bench_cli_needs_a_gpu():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    run = subprocess.run([sys.executable, "-m", "tilecraft", "attention", "bench"], capture_output=True, text=True, check=False,
                         env=env, timeout=120)
    assert run.returncode == 2 and "needs a GPU" in run.stderr and "Traceback" not in run.stderr
    bad = subprocess.run([sys.executable, "-m", "tilecraft", "attention", "bench", "--shape", "B=1,H=3,HKV=2,S=4,D=8"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert bad.returncode == 2 and "must divide" in bad.stderr and "Traceback" not in bad.stderr
    zero = subprocess.run([sys.executable, "-m", "tilecraft", "attention", "bench", "--rounds", "0"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert zero.returncode == 2 and "--rounds" in zero.stderr and "Traceback" not in zero.stderr
    neg = subprocess.run([sys.executable, "-m", "tilecraft", "attention", "bench", "--settle", "-1"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert neg.returncode == 2 and "--settle" in neg.stderr and "Traceback" not in neg.stderr


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_kernels_compile_for_hopper_and_cdna3(target):
    """Forward (causal, padded head dim) and the backward kernels, compiled for a GPU that is not
    here: no compiler error; on sm90 no register spills in the forward."""
    s = ba.Shape(2, 8, 2, 1024, 1024, 96, True)
    names = ("attention_fwd_kernel", "attention_bwd_dkdv_kernel") + (("attention_fwd_tma_kernel",) if target == "sm90" else ())
    reports = ba.compile_report(s, torch.bfloat16, target, kernels=names)
    assert len(reports) == len(names)
    for r in reports:
        assert r["error"] is None, (r["kernel"], r["error"])
        assert r["registers"]
    if target == "sm90":
        assert reports[0]["spills"] == 0
        assert any(k.startswith("sass:HGMMA") for k in reports[0]["census"]), "forward must use wgmma on sm90"
        tma = next(r for r in reports if r["kernel"] == "attention_fwd_tma_kernel")
        assert tma["spills"] == 0 and tma["census"].get("sass:UTMALDG"), "the TMA forward must load through the copy engine"


def test_atomic_dq_compiles_to_tma_reductions_on_hopper():
    """The atomic dQ (deterministic=False) at the issue's D128 causal shape, compiled for sm90: the dQ
    shares leave as TMA bulk reductions (UTMAREDG); with ``dq_tma=False`` they do not."""
    s = ba.Shape(4, 16, 16, 4096, 4096, 128, True)
    (r,) = ba.compile_report(s, torch.bfloat16, "sm90", deterministic=False, kernels=["attention_bwd_dkdv_kernel"])
    assert r["error"] is None, r["error"]
    assert r["census"].get("sass:UTMAREDG"), r["census"]
    cfg = ops.BwdConfig(64, 128, 128, 64, 8, 3, paired=True, dq_tma=False)
    (e,) = ba.compile_report(s, torch.bfloat16, "sm90", bwd=cfg, deterministic=False,
                             kernels=["attention_bwd_dkdv_kernel"])
    assert e["error"] is None and not e["census"].get("sass:UTMAREDG"), "dq_tma=False: element-wise atomics"



@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
def test_default_backward_fits_hopper_shared_memory_at_d256(deterministic):
    """The sm90 D256 backward defaults (4 dK/dV stages, 3 dQ stages; 2 dK/dV stages when it adds dQ
    atomically): every kernel within the 227 KB an sm90 block may take."""
    s = ba.Shape(2, 4, 4, 1024, 1024, 256, True)
    reports = ba.compile_report(s, torch.bfloat16, "sm90", deterministic=deterministic, tma=False,
                                kernels=["attention_bwd_dkdv_kernel", "attention_bwd_dq_kernel"])
    assert len(reports) == (2 if deterministic else 1)
    for r in reports:
        assert r["error"] is None, r["error"]
        assert 0 < r["shared_bytes"] <= 232448, (r["kernel"], r["shared_bytes"])


def test_bench_cli_settles_as_the_report_does():
    """``tilecraft attention bench --settle`` defaults to ``bench.attention.SETTLE_S`` (the report's too): the CLI
    module keeps torch out of its import, so it spells the number; this keeps the two the same."""
    import inspect

    from tilecraft.cli_attention import bench_cmd

    assert inspect.signature(bench_cmd).parameters["settle"].default == ba.SETTLE_S > 0
    from tilecraft.bench.harness import SETTLE_S
    from tilecraft.cli_gemm import bench_cmd as gemm_bench_cmd

    # tilecraft gemm bench settles the same way (docs/gemm.md follow-up 33)
    assert inspect.signature(gemm_bench_cmd).parameters["settle"].default == SETTLE_S == ba.SETTLE_S
