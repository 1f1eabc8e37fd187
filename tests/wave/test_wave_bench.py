"""The wave suites on the CPU (interpreter): records carry what the report needs, and a wrong
kernel is reported as failed instead of being timed."""
from __future__ import annotations

import torch

from tilecraft.bench import wave as wb
from tilecraft.ops import wave as ops


def test_step_suite_records(monkeypatch):
    records = wb.step_suite(n=10, order=4, dtype=torch.float32, pml_width=3, device="cpu", budget_s=0.05,
                            say=lambda _m: None)
    variants = [r.case["variant"] for r in records]
    assert variants == ["torch", "fused", "fused+sponge"]
    for r in records:
        assert {"flops", "bytes", "time_ms"} <= r.extra.keys() and r.measured is False
        assert r.extra["bytes"] == 16 * 16**3  # a (10 + 2 (3 + 2))**3 = 20**3 grid, R = 2: 16**3 points updated
    assert records[1].extra["ok"] and records[1].extra["error"] < 1e-5
    assert records[2].extra["ok"] and records[2].extra["sponge"]  # the sponge variant is checked too

    # a kernel that writes the wrong values fails the gate and is not timed
    real = ops.step_into

    def broken(p, pp, m, out, *args, **kwargs):
        real(p, pp, m, out, *args, **kwargs)
        out.mul_(1.01)
    monkeypatch.setattr(ops, "step_into", broken)
    bad = wb.step_suite(n=10, order=4, dtype=torch.float32, pml_width=3, device="cpu", budget_s=0.05,
                        say=lambda _m: None)
    fused = [r for r in bad if r.case["variant"] == "fused"]
    assert fused and not fused[0].extra["ok"] and fused[0].ours == 0.0


def test_simulate_suite_records():
    records = wb.simulate_suite(n=8, order=4, pml_width=3, nt=2, device="cpu", backends=("torch",),
                                say=lambda _m: None)
    assert [r.case["variant"] for r in records] == ["simulate-torch"]
    assert records[0].extra["time_ms"] > 0 and records[0].extra["flops"] > 0


def test_wave_step_op_passes_opcheck(field):
    p, pp, m = field((9, 10, 11)), field((9, 10, 11)), field((9, 10, 11)) * 0.01
    out = pp.clone()
    torch.library.opcheck(torch.ops.tilecraft.wave_step.default,
                          (p, pp, m, out, 4, [1.0, 1.0, 1.0], [2, 2, 2], [7, 8, 9], [], "torch"))


def test_cpml_suite_records():
    records = wb.cpml_suite(n=8, order=4, pml_width=3, device="cpu", budget_s=0.05, say=lambda _m: None)
    assert [r.case["variant"] for r in records] == ["cpml-axis0", "cpml-axis0-zrows", "cpml-axis1", "cpml-axis2"]
    for r in records:
        assert r.extra["psi_points"] > 0 and r.extra["correction_points"] > r.extra["psi_points"]
        assert {"flops", "bytes", "time_ms"} <= r.extra.keys()
