"""The wave suites on the CPU (interpreter): records carry what the report needs, and a wrong
kernel is reported as failed instead of being timed."""
from __future__ import annotations

import math

import pytest
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
    # a failed configuration has no FOM (NaN, null in the JSON), not a measured FOM of 0
    assert fused and not fused[0].extra["ok"] and math.isnan(fused[0].ours) and fused[0].extra["time_ms"] is None


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


def test_cpml_step_suite_records(monkeypatch):
    """The whole step with the CPML: the torch peer, the fused path, the previous unfused path; bytes
    count psi and zeta in the layers; a wrong kernel fails the float64 gate and is not timed."""
    cfg = ops.CpmlConfig(8, 32, 16, 1)
    records = wb.cpml_step_suite(n=8, order=4, pml_width=3, configs=[cfg], device="cpu", budget_s=0.02,
                                 say=lambda _m: None)
    assert [r.case["variant"] for r in records] == ["cpml-torch", "cpml-fused", "cpml-unfused"]
    # (8 + 2 (3 + 2))**3 = 18**3 grid, 14**3 updated; the layers: 2 x 3 planes of 14**2 per axis
    layer = 3 * 2 * 3 * 14**2
    for r in records:
        assert r.case["layer_points"] == layer and r.extra["bytes"] == 16 * 14**3 + 16 * layer
    assert records[1].extra["ok"] and records[2].extra["ok"] and records[1].extra["error"] < 1e-5

    real = ops.cpml_step

    def broken(p, pp, m, out, order, spacing, lo, hi, pml, backend, *args):
        real(p, pp, m, out, order, spacing, lo, hi, pml, backend, *args)
        if backend == "triton":
            pml[0].zeta.mul_(1.01)  # p_next right, a memory variable wrong: still caught
    monkeypatch.setattr(ops, "cpml_step", broken)
    bad = wb.cpml_step_suite(n=8, order=4, pml_width=3, configs=[cfg], device="cpu", budget_s=0.02, unfused=False,
                             say=lambda _m: None)
    fused = [r for r in bad if r.case["variant"] == "cpml-fused"]
    # a failed configuration has no FOM (NaN, null in the JSON), not a measured FOM of 0
    assert fused and not fused[0].extra["ok"] and math.isnan(fused[0].ours) and fused[0].extra["time_ms"] is None


def test_per_launch_takes_the_median_of_each_launch():
    from tilecraft.bench.wave import per_launch

    seq = [("a", 10.0), ("b", 1.0), ("a", 30.0), ("b", 3.0), ("a", 20.0), ("b", 2.0)]
    assert per_launch(seq, 3) == [("a", 0.02), ("b", 0.002)]
    with pytest.raises(ValueError, match="differs"):
        per_launch([("a", 1.0), ("b", 1.0), ("b", 1.0), ("a", 1.0)], 2)
    with pytest.raises(ValueError, match="repetitions"):
        per_launch(seq[:5], 3)


def test_table_summarises_records_and_marks_failures():
    """``bench.wave.table``: one line per record after the header, the given columns, % of copy, and
    nan with the message for a record that failed its check."""
    from tilecraft.bench.harness import Record
    from tilecraft.bench.wave import table

    good = Record(suite="wave", case={"variant": "cpml"}, metric="TB/s", unit="TB/s", ours=1.5,
                  extra={"time_ms": 2.0, "gpts": 80.0, "round": 1})
    bad = Record(suite="wave", case={"variant": "fused"}, metric="TB/s", unit="TB/s", ours=9.0,
                 extra={"time_ms": 1.0, "gpts": 5.0, "ok": False, "message": "differs from float64"})
    lines = table([good, bad], 3.0, [("round", 6, lambda r: r.extra.get("round", ""))])
    assert len(lines) == 3 and lines[0].split() == ["variant", "round", "ms", "%copy", "GPts/s"]
    assert lines[1].split() == ["cpml", "1", "2.000", "50.0", "80.0"]
    assert "nan" in lines[2] and lines[2].endswith("FAILED differs from float64")


def test_medians_by_groups_rounds_and_leaves_out_missing_fields():
    """The benchmark scripts' round summaries: one median per field and group, groups in first-seen order, a
    field that some row of the group lacks left out (the no-boundary rows have no CPML step)."""
    rows = [{"w": 20, "ms": 3.0, "step": 1.0}, {"w": 0, "ms": 9.0}, {"w": 20, "ms": 1.0, "step": 5.0},
            {"w": 20, "ms": 2.0, "step": 2.0}, {"w": 0, "ms": 7.0}]
    got = wb.medians_by(rows, lambda r: f"W{r['w']}", ("ms", "step"))
    assert list(got) == ["W20", "W0"]
    assert got == {"W20": {"ms": 2.0, "step": 2.0}, "W0": {"ms": 8.0}}


def test_write_rounds_adds_the_medians_and_writes_the_json(tmp_path, capsys):
    import json

    doc = {"device": "cpu"}
    rows = [{"w": 12, "ms": 1.0}, {"w": 12, "ms": 3.0}]
    path = tmp_path / "sub" / "out.json"
    wb.write_rounds(doc, rows, lambda r: f"median_W{r['w']}", ("ms",), path)
    assert json.loads(path.read_text()) == {"device": "cpu", "median_W12": {"ms": 2.0}} == doc
    assert "median_W12" in capsys.readouterr().out
