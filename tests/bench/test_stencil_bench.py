"""The stencil suites' correctness gate (``check_case``) and ``measure_config`` on the CPU."""
from __future__ import annotations

import math

import pytest
import torch

from tilecraft.bench import stencil as sb
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

SPACING = (0.9, 1.1, 1.3)


def reference_run(order: int, spacing=SPACING):
    def run(u, out):
        ops.laplacian(u, order=order, spacing=spacing, out=out, variant="reference")
        return []
    return run


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", ["reference", "baseline", "auto"])
def test_check_case_passes_a_right_kernel(field, variant, dtype):
    order = 4
    u = field((7, 8, 9), dtype)

    def run(u, out):
        return ops.laplacian(u, order=order, spacing=SPACING, out=out, variant=variant)
    ok, err, msg = sb.check_case(u, order, SPACING, run)
    assert ok, msg
    assert err <= sb.TOLERANCE[dtype] and msg == ""


def test_check_case_flags_an_unwritten_point(field):
    u = field((7, 8, 9))
    inner = reference_run(4)

    def run(u, out):
        inner(u, out)
        out[3, 4, 2] = float("nan")  # as if the kernel never stored this interior point
    ok, err, msg = sb.check_case(u, 4, SPACING, run)
    assert not ok and "unwritten" in msg


def test_check_case_flags_a_written_boundary(field):
    u = field((7, 8, 9))
    inner = reference_run(4)

    def run(u, out):
        inner(u, out)
        out[0, 3, 3] = 0.0  # a store outside the interior
    ok, err, msg = sb.check_case(u, 4, SPACING, run)
    assert not ok and "boundary" in msg
    assert err < 1e-12, "the interior itself was right"


@pytest.mark.parametrize("factor", [1.001, 0.5, -1.0])
def test_check_case_flags_a_scaled_result(field, factor):
    u = field((7, 8, 9))
    inner = reference_run(4)

    def run(u, out):
        inner(u, out)
        out[2:-2, 2:-2, 2:-2] *= factor
    ok, err, msg = sb.check_case(u, 4, SPACING, run)
    assert not ok and "relative error" in msg
    assert err == pytest.approx(abs(1 - factor), rel=1e-6)


def test_check_case_flags_wrong_order_and_wrong_spacing(field):
    u = field((9, 10, 11))
    ok, _, _ = sb.check_case(u, 4, SPACING, reference_run(2))  # order 2 computed, order 4 asked
    assert not ok
    ok, _, _ = sb.check_case(u, 4, SPACING, reference_run(4, spacing=SPACING[::-1]))  # axes swapped
    assert not ok


def test_check_case_fp32_tolerance_is_fp32(field):
    """An fp32 result with fp32 rounding passes; one 1e-4 off everywhere fails."""
    u = field((7, 8, 9), torch.float32)
    inner = reference_run(4)
    assert sb.check_case(u, 4, SPACING, inner)[0]

    def run(u, out):
        inner(u, out)
        out[2:-2, 2:-2, 2:-2] *= 1 + 1e-4
    assert not sb.check_case(u, 4, SPACING, run)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", ["auto", "reference"])
def test_measure_config_cpu(variant, dtype):
    shape, order = (7, 8, 9), 2
    res = sb.measure_config(shape, dtype, order, variant, device="cpu", budget_s=0.01)
    assert res.ok, res.message
    assert res.name == variant
    assert res.error is not None and res.error <= sb.TOLERANCE[dtype]
    assert res.timing is not None and res.timing.runs >= 1
    assert res.timing.min_ms <= res.timing.median_ms <= res.timing.max_ms
    assert res.fom_TBps > 0 and res.gpts > 0 and math.isfinite(res.fom_TBps)
    if variant == "auto":
        aligned = shape[2] % (16 // (torch.finfo(dtype).bits // 8)) == 0  # a fresh contiguous grid
        assert res.config == ops.auto_config(dtype, order, shape, None, aligned, flat_ok=True).as_dict()
    else:
        assert res.config == {"kernel": "torch slicing"}


def test_measure_config_explicit_config_and_small_check():
    cfg = StencilConfig("plane", block_y=2, block_x=16, num_warps=1)
    res = sb.measure_config((6, 7, 20), torch.float64, 2, "custom", cfg, device="cpu", budget_s=0.01,
                            check="small")
    assert res.ok, res.message
    assert res.config == cfg.as_dict()


def test_measure_config_reports_a_broken_config():
    cfg = StencilConfig("no-such-kernel", block_y=2, block_x=16, num_warps=1)
    res = sb.measure_config((6, 7, 20), torch.float64, 2, "broken", cfg, device="cpu", budget_s=0.01)
    assert not res.ok and res.timing is None
    assert "no-such-kernel" in res.message


def test_measure_config_rejects_unknown_check():
    with pytest.raises(ValueError, match="check"):
        sb.measure_config((6, 7, 8), torch.float64, 2, "auto", device="cpu", check="none")


def _fake_measure(times: dict[str, list[float]], calls: list, fail: set[str] = frozenset()):
    """A stand-in for ``measure_config``: variant v's k-th call takes times[v][k] ms (FOM 1 / time)."""
    def measure(shape, dtype, order, v, **kw):
        k = sum(1 for c in calls if c[0] == v)
        calls.append((v, kw["check"]))
        if v in fail:
            return sb.CaseResult(v, {}, False, float("nan"), message="wrong")
        t = times[v][k]
        return sb.CaseResult(v, {"v": v}, True, 1e-13 * (k + 1),
                             sb.Timing(median_ms=t, min_ms=t * 0.9, max_ms=t * 1.2, runs=10, spread=0.01),
                             fom_TBps=1.0 / t, gpts=2.0 / t)
    return measure


def test_measure_rounds_interleaves_and_takes_the_median_of_rounds(monkeypatch):
    """Rounds run the variants in turn (a, b, a, b, a, b), the first checking the timed grid and
    later ones the small grid; each figure is the median of its rounds, FOM scaled to it, the
    spread at least the rounds' range, the worst error kept, every round's median recorded."""
    calls: list = []
    monkeypatch.setattr(sb, "measure_config", _fake_measure({"a": [1.0, 3.0, 2.0], "b": [5.0, 4.0, 4.5]}, calls))
    res = sb.measure_rounds((8, 8, 8), torch.float64, 2, ["a", "b"], rounds=3, device="cpu")
    assert [c[0] for c in calls] == ["a", "b", "a", "b", "a", "b"]
    assert [c[1] for c in calls] == ["full", "full", "small", "small", "small", "small"]
    a, b = res["a"], res["b"]
    assert a.ok and a.timing.median_ms == 2.0 and b.timing.median_ms == 4.5
    assert a.round_medians_ms == [1.0, 3.0, 2.0]
    assert a.fom_TBps == pytest.approx(0.5) and a.gpts == pytest.approx(1.0)
    assert a.timing.min_ms == pytest.approx(0.9) and a.timing.max_ms == pytest.approx(3.6) and a.timing.runs == 30
    assert a.timing.spread == pytest.approx((3.0 - 1.0) / 2.0)
    assert a.error == pytest.approx(3e-13) and a.config == {"v": "a"}


def test_measure_rounds_one_round_and_failures(monkeypatch):
    """One round is ``measure_config`` itself; a variant that fails is reported failed and not timed again."""
    calls: list = []
    monkeypatch.setattr(sb, "measure_config", _fake_measure({"a": [2.0, 2.0]}, calls, fail={"b"}))
    res = sb.measure_rounds((8, 8, 8), torch.float64, 2, ["a", "b"], rounds=2, device="cpu")
    assert [c[0] for c in calls] == ["a", "b", "a"]
    assert not res["b"].ok and res["b"].message == "wrong"
    calls.clear()
    one = sb.measure_rounds((8, 8, 8), torch.float64, 2, ["a"], rounds=1, device="cpu")["a"]
    assert one.timing.median_ms == 2.0 and one.round_medians_ms == [2.0] and one.fom_TBps == 0.5


@pytest.mark.parametrize("rounds", [0, -1, 1.5, True])
def test_measure_rounds_rejects_bad_rounds(rounds):
    with pytest.raises(ValueError, match="rounds"):
        sb.measure_rounds((8, 8, 8), torch.float64, 2, ["auto"], rounds=rounds, device="cpu")


def test_measure_rounds_runs_the_kernels_on_the_cpu():
    res = sb.measure_rounds((7, 8, 9), torch.float64, 2, ["auto", "reference"], rounds=2, device="cpu",
                            budget_s=0.01)
    assert all(r.ok and len(r.round_medians_ms) == 2 for r in res.values())


def test_cross_compiled_reports_sm90_registers():
    from tilecraft.bench.stencil import cross_compiled

    res = cross_compiled((64, 64, 64), torch.float64, 2, "auto", "sm90")
    assert len(res) == 1 and res[0]["error"] is None, res
    assert 16 <= res[0]["registers"] <= 255 and res[0]["spills"] == 0
    assert res[0]["occupancy"] > 0 and res[0]["target"] == "sm90"
    assert cross_compiled((64, 64, 64), torch.float64, 2, "reference") == []


def test_measure_rounds_times_a_pinned_config():
    """``configs`` pins a variant's configuration (the ladder pins ``auto``'s tuned one); the others
    keep theirs."""
    tiling = ops.ladder_config("tiling", torch.float64, 2)
    res = sb.measure_rounds((7, 8, 16), torch.float64, 2, ["auto", "baseline"], rounds=1, device="cpu",
                            budget_s=0.01, configs={"auto": tiling})
    assert res["auto"].ok and res["auto"].config == tiling.as_dict()
    assert res["baseline"].config == ops.ladder_config("baseline", torch.float64, 2).as_dict()


def test_auto_choice_on_the_cpu_is_the_heuristic():
    choice = sb.auto_choice((7, 8, 16), torch.float64, 2, device="cpu")
    assert choice.source == "heuristic" and choice.key is None
    assert choice.config == ops.auto_config(torch.float64, 2, (7, 8, 16), 50 * 2**20, True, True)


def test_ladder_and_sweep_time_the_tuned_auto(monkeypatch):
    """``auto`` is chosen (tuned if need be) once per grid before its rounds are timed, the rounds run
    that configuration, and its record says which one it was and where it came from."""
    from tilecraft.hardware.device import DeviceInfo

    heuristic = ops.auto_config(torch.float64, 2, (8, 8, 16))
    tiling = ops.ladder_config("tiling", torch.float64, 2)
    entry = {"heuristic": heuristic.as_dict(), "candidates": [{"config": heuristic.as_dict(), "ms": 2.0},
                                                              {"config": tiling.as_dict(), "ms": 1.0}]}
    events: list = []

    def choice(shape, dtype, order, device="cuda"):
        events.append(("choose", shape))
        return ops.Choice(tiling, "tuned", "fp64/o2/key", entry)

    def rounds(shape, dtype, order, variants, **kw):
        events.append(("rounds", shape, kw["configs"]))
        timing = sb.Timing(median_ms=1.0, min_ms=1.0, max_ms=1.0, runs=3, spread=0.0)
        return {v: sb.CaseResult(v, (kw["configs"].get(v) or ops.ladder_config(v, dtype, order)).as_dict(), True,
                                 1e-13, timing, fom_TBps=1.0, gpts=1.0) for v in variants}

    monkeypatch.setattr(sb, "auto_choice", choice)
    monkeypatch.setattr(sb, "measure_rounds", rounds)
    info = DeviceInfo("Fake GPU", "cuda", l2_bytes=50 * 2**20)
    records = sb.ladder((8, 8, 16), "fp64", 2, variants=["baseline", "auto"], copy_TBps=2.0, info=info)
    assert events == [("choose", (8, 8, 16)), ("rounds", (8, 8, 16), {"auto": tiling})]
    auto = next(r for r in records if r.case["variant"] == "auto")
    base = next(r for r in records if r.case["variant"] == "baseline")
    assert auto.case["config"] == tiling.as_dict()
    assert auto.extra["config_source"] == "tuned" and auto.extra["tuning_key"] == "fp64/o2/key"
    assert auto.extra["heuristic_config"] == heuristic.as_dict() and auto.extra["tuning"] == entry["candidates"]
    assert "config_source" not in base.extra

    from tilecraft.cli import _auto_line

    assert _auto_line(auto) == (f"auto ran {tiling.short()} (tuned on this GPU in this run); "
                                f"the heuristic: {heuristic.short()}")

    events.clear()
    records = sb.sweep([64, 128], "fp64", 2, copy_TBps=2.0, info=info, target_bytes=2**20)
    assert [e[0] for e in events] == ["choose", "rounds", "choose", "rounds"]
    assert all(e[2] == {"auto": tiling} for e in events if e[0] == "rounds")
    autos = [r for r in records if r.case["variant"] == "auto"]
    assert len(autos) == 2 and all(r.extra["config_source"] == "tuned" and r.case["config"] == tiling.as_dict()
                                   for r in autos)
    events.clear()
    sb.sweep([64], "fp64", 2, variants=("baseline",), copy_TBps=2.0, info=info, target_bytes=2**20)
    assert [e[0] for e in events] == ["rounds"] and events[0][2] == {}, "no auto: nothing tuned"
