"""The benchmark harness: rotating timing, rotation-set sizing, records and the JSON they go to."""
from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime

import pytest

from tilecraft.bench import harness
from tilecraft.bench.harness import Record, Timing, rotation_sets, stamp, time_rotating, write_results
from tilecraft.hardware.device import DeviceInfo

REQUIRED_FIELDS = ("suite", "case", "metric", "unit", "ours", "peer", "peer_value", "ceiling",
                   "ceiling_value", "ratio", "device", "torch", "triton", "commit", "date")

CPU_INFO = DeviceInfo(name="Test CPU/x86 64", backend="cpu", versions={"torch": "9.9.9", "triton": "8.8.8"})


# ----------------------------------------------------------------------------------------------
# time_rotating
# ----------------------------------------------------------------------------------------------
def test_time_rotating_cpu_min_runs_and_rotation():
    calls: list[int] = []
    timing = time_rotating(calls.append, 3, device="cpu", warmup=2, min_runs=7, max_runs=50, budget_s=0.0)
    assert isinstance(timing, Timing)
    assert timing.runs == 7, "with no time budget, exactly min_runs timed runs"
    assert len(calls) == 2 + 7, "warm-up calls, then the timed ones"
    assert calls[:2] == [0, 1], "warm-up runs on the sets too"
    assert calls[2:] == [i % 3 for i in range(7)], "timed runs rotate through every set in turn"
    assert timing.min_ms <= timing.median_ms <= timing.max_ms
    assert timing.spread >= 0


def test_time_rotating_measures_the_call():
    timing = time_rotating(lambda i: time.sleep(0.002), 2, device="cpu", warmup=1, min_runs=5, budget_s=0.0)
    assert timing.runs >= 5
    assert 2.0 <= timing.min_ms <= timing.median_ms <= timing.max_ms
    assert timing.median_ms < 200, "a 2 ms sleep should not be timed as 200 ms"


def test_time_rotating_trace_lines_up_each_timed_call():
    trace: list = []
    t0 = time.time()
    timing = time_rotating(lambda i: time.sleep(0.002), 2, device="cpu", warmup=2, min_runs=6, budget_s=0.0,
                           trace=trace)
    assert len(trace) == timing.runs == 6  # the timed calls only, not the warm-up
    starts = [s for s, _ in trace]
    assert starts == sorted(starts) and t0 <= starts[0] and starts[-1] <= time.time()
    assert all(ms >= 2.0 for _, ms in trace)
    assert sorted(ms for _, ms in trace)[0] == timing.min_ms


def test_time_rotating_settles_untimed_before_timing():
    calls: list[int] = []
    timing = time_rotating(lambda i: (calls.append(i), time.sleep(0.001)), 3, device="cpu", warmup=1, min_runs=4,
                           max_runs=4, budget_s=0.0, settle_s=0.05)
    assert timing.runs == 4
    assert len(calls) >= 1 + 10 + 4, "0.05 s of 1 ms calls should settle for many untimed calls"
    assert calls[:6] == [0, 0, 1, 2, 0, 1], "warm-up, then the settle calls rotate over the sets"


def test_time_rotating_budget_and_max_runs():
    start = time.perf_counter()
    t = time_rotating(lambda i: None, 4, device="cpu", warmup=0, min_runs=3, max_runs=40, budget_s=60.0)
    assert t.runs == 40, "max_runs caps a generous budget"
    assert time.perf_counter() - start < 30
    t = time_rotating(lambda i: time.sleep(0.001), 4, device="cpu", warmup=0, min_runs=3, max_runs=10**6,
                      budget_s=0.05)
    assert 3 <= t.runs < 1000, "the budget stops the loop"


def test_timing_as_dict():
    t = Timing(median_ms=2.0, min_ms=1.0, max_ms=3.0, runs=10, spread=0.5)
    assert t.as_dict() == {"median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "runs": 10, "spread": 0.5,
                           "host_ms": None}
    assert time_rotating(lambda i: None, 1, device="cpu", warmup=0, min_runs=2, budget_s=0.0).host_ms is None, \
        "on the CPU the timed interval is the host's: no separate host time"


# ----------------------------------------------------------------------------------------------
# rotation_sets
# ----------------------------------------------------------------------------------------------
def test_rotation_sets_exceed_twice_l2():
    l2 = 50 * 2**20
    n = rotation_sets(10 * 2**20, l2)
    assert n == 11  # ceil(100 MiB / 10 MiB) + 1
    assert n * 10 * 2**20 > 2 * l2


@pytest.mark.parametrize("bytes_per_set", [1, 2**10, 3 * 2**20, 7 * 2**20 + 1, 40 * 2**20, 2**30])
@pytest.mark.parametrize("l2", [None, 2**20, 50 * 2**20, 256 * 2**20])
def test_rotation_sets_bounds(bytes_per_set, l2):
    n = rotation_sets(bytes_per_set, l2, minimum=2, maximum=16)
    assert 2 <= n <= 16
    if n < 16:  # not clamped: the rotation is larger than twice the L2 (64 MiB when unknown)
        assert n * bytes_per_set > 2 * (l2 or 64 * 2**20)


def test_rotation_sets_clamps():
    assert rotation_sets(2**34, 50 * 2**20) == 2
    assert rotation_sets(2**34, 50 * 2**20, minimum=3) == 3
    assert rotation_sets(1, 50 * 2**20) == 16
    assert rotation_sets(1, 50 * 2**20, maximum=5) == 5
    assert rotation_sets(0, 50 * 2**20) == 16
    assert rotation_sets(8 * 2**20, None, maximum=100) == math.ceil(2 * 64 / 8) + 1  # 64 MiB if unknown


# ----------------------------------------------------------------------------------------------
# Record
# ----------------------------------------------------------------------------------------------
def test_record_ratio_to_ceiling_preferred():
    r = Record("s", {}, "fom", "TB/s", 3.0, peer="torch", peer_value=1.5, ceiling="copy", ceiling_value=4.0)
    assert r.ratio == pytest.approx(0.75)
    assert r.extra["ratio_to_ceiling"] == pytest.approx(0.75)
    assert r.extra["ratio_to_peer"] == pytest.approx(2.0)


def test_record_ratio_to_peer_without_ceiling():
    r = Record("s", {}, "tflops", "TFLOP/s", 300.0, peer="cuBLAS", peer_value=600.0)
    assert r.ratio == pytest.approx(0.5)
    assert r.extra == {"ratio_to_peer": pytest.approx(0.5)}


def test_record_no_reference_no_ratio():
    r = Record("s", {}, "fom", "TB/s", 3.0)
    assert r.ratio is None and r.extra == {}


def test_record_explicit_ratio_kept():
    r = Record("s", {}, "fom", "TB/s", 3.0, ceiling="copy", ceiling_value=4.0, ratio=0.1)
    assert r.ratio == 0.1
    assert r.extra["ratio_to_ceiling"] == pytest.approx(0.75)


def test_record_nan_result_gives_nan_ratio():
    r = Record("s", {}, "fom", "TB/s", float("nan"), ceiling="copy", ceiling_value=4.0)
    assert math.isnan(r.ratio)


def test_record_extra_not_shared_between_records():
    a = Record("s", {}, "m", "u", 1.0, peer_value=2.0)
    b = Record("s", {}, "m", "u", 1.0)
    assert "ratio_to_peer" in a.extra and b.extra == {}


def test_record_as_dict_has_required_fields():
    d = Record("s", {"n": 1}, "fom", "TB/s", 1.0).as_dict()
    assert set(REQUIRED_FIELDS) <= set(d)


# ----------------------------------------------------------------------------------------------
# stamp / write_results
# ----------------------------------------------------------------------------------------------
def _records() -> list[Record]:
    return [
        Record("stencil.ladder", {"shape": [8, 9, 10], "variant": "auto"}, "fom", "TB/s", 3.2,
               peer="torch slicing", peer_value=0.4, ceiling="copy", ceiling_value=4.0),
        Record("stencil.ladder", {"shape": [8, 9, 10], "variant": "baseline"}, "fom", "TB/s", float("nan"),
               ceiling="copy", ceiling_value=4.0, device="kept device", commit="abc123"),
    ]


def test_stamp_fills_only_missing_fields():
    recs = stamp(_records(), CPU_INFO)
    assert recs[0].device == CPU_INFO.name and recs[1].device == "kept device"
    assert recs[0].torch == "9.9.9" and recs[0].triton == "8.8.8"
    assert recs[1].commit == "abc123" and recs[0].commit
    datetime.fromisoformat(recs[0].date)
    assert recs[0].date == recs[1].date


def test_write_results_json(tmp_path):
    path = write_results(_records(), "stencil.ladder", tmp_path / "sub" / "res.json", info=CPU_INFO,
                         meta={"note": "test"})
    assert path == tmp_path / "sub" / "res.json" and path.exists()
    doc = json.loads(path.read_text())
    assert doc["suite"] == "stencil.ladder"
    assert doc["meta"] == {"note": "test"}
    assert doc["device"]["name"] == CPU_INFO.name and doc["device"]["backend"] == "cpu"
    assert len(doc["records"]) == 2
    for rec in doc["records"]:
        missing = [f for f in REQUIRED_FIELDS if f not in rec]
        assert not missing, f"record lacks {missing}"
        for f in ("suite", "metric", "unit", "device", "torch", "triton", "commit", "date"):
            assert isinstance(rec[f], str) and rec[f], f
        datetime.fromisoformat(rec["date"])
    first = doc["records"][0]
    assert first["ours"] == 3.2 and first["peer"] == "torch slicing" and first["peer_value"] == 0.4
    assert first["ceiling"] == "copy" and first["ceiling_value"] == 4.0
    assert first["ratio"] == pytest.approx(0.8)
    assert first["case"] == {"shape": [8, 9, 10], "variant": "auto"}
    assert first["torch"] == "9.9.9" and first["triton"] == "8.8.8"


def test_write_results_into_a_directory(tmp_path):
    """``--out DIR``: the run's file goes inside the directory (it used to fail at the end, losing the run)."""
    path = write_results(_records(), "gemm-smalln", tmp_path, info=CPU_INFO)
    assert path.parent == tmp_path and path.name.startswith("gemm-smalln-") and path.suffix == ".json"
    assert json.loads(path.read_text())["suite"] == "gemm-smalln"
    fresh = write_results(_records(), "gemm-smalln", f"{tmp_path / 'new'}/", info=CPU_INFO)
    assert fresh.parent == tmp_path / "new" and fresh.exists()


def test_write_results_default_path(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "results_dir", lambda: tmp_path / "results")
    path = write_results(_records(), "stencil.sweep", info=CPU_INFO)
    assert path.parent == tmp_path / "results"
    assert re.fullmatch(r"stencil\.sweep-Test_CPU_x86_64-\d{8}T\d{6}Z\.json", path.name), path.name
    assert json.loads(path.read_text())["suite"] == "stencil.sweep"


def test_git_commit_is_a_string():
    commit = harness.git_commit()
    assert isinstance(commit, str) and commit


def test_results_json_has_no_nan(tmp_path):
    """A failed case's NaN time (and the ratio it gives) is written as null: json.dumps wrote the token NaN, which
    strict JSON readers refuse."""
    recs = _records()  # the second record's ours is NaN
    recs[0].extra = {"round_ms": [1.0, float("inf")]}
    path = write_results(recs, "stencil.ladder", tmp_path / "r.json", info=CPU_INFO)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert doc["records"][1]["ours"] is None and doc["records"][0]["extra"]["round_ms"] == [1.0, None]


def test_stamp_dicts_fills_benchmark_records_only():
    from tilecraft.bench.harness import stamp_dicts

    recs = [r.as_dict() for r in _records()] + [{"case": "interpreter check", "ok": True}]
    stamp_dicts(recs, CPU_INFO)
    assert recs[0]["device"] == CPU_INFO.name and recs[0]["commit"] and recs[0]["date"]
    assert recs[1]["device"] == "kept device" and recs[1]["commit"] == "abc123"
    assert "device" not in recs[2]
