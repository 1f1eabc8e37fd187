"""The GEMM suite helpers: least bytes and FLOPs, operand layouts, case lists, the labelled
interpreter check (the timed path needs a GPU)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.bench import INTERPRETER_LABEL
from tilecraft.bench import gemm as bench


def test_flops_and_least_bytes():
    assert bench.gemm_flops(2, 3, 4, batch=5) == 2 * 2 * 3 * 4 * 5
    assert bench.gemm_bytes(16, 4096, 4096, 2, 2) == (16 * 4096 + 4096 * 4096) * 2 + 16 * 4096 * 2


@pytest.mark.parametrize("layout", bench.LAYOUTS)
def test_operand_layouts(layout):
    a, b = bench.make_operands(5, 7, 9, "bf16", layout, "cpu", torch.Generator().manual_seed(0))
    assert a.shape == (5, 9) and b.shape == (9, 7)
    assert (a.stride(0) == 1) == (layout[0] == "T") and (b.stride(0) == 1) == (layout[1] == "T")
    assert a.abs().max() <= 1 and a.float().std() > 0.3  # random data, never zeros


def test_cases_skip_what_the_peer_cannot_take():
    cases = bench.cases_for("llm", ["int8", "bf16"], ["NN", "TT"])
    assert all(c.layout == "NT" and c.m > 16 for c in cases if c.dtype == "int8")
    assert {c.layout for c in cases if c.dtype == "bf16"} == {"NN", "TT"}
    with pytest.raises(ValueError, match="unknown suite"):
        bench.cases_for("huge", ["bf16"])


def test_small_n_cases_skip_with_the_peer_s_reason():
    # torch._int_mm refuses N = 1 (a multiple of 8 is needed): the bench crashed there on an H200
    skipped: list = []
    cases = bench.cases_for("smalln", ["int8", "fp8"], ["NT"], skipped)
    assert {c.n for c in cases if c.dtype == "int8"} == {16, 32, 64}
    assert {c.n for c in cases if c.dtype == "fp8"} == {16, 32, 64}
    assert sorted((c.dtype, c.n) for c, _ in skipped) == [("fp8", 1), ("fp8", 1), ("int8", 1), ("int8", 1)]
    assert all("multiples of" in why for _, why in skipped)
    assert bench.peer_refuses("int8", 16, 64, 64) and bench.peer_refuses("bf16", 1, 1, 1) is None


def test_train_suite_is_short_k_weight_gradients():
    cases = bench.cases_for("train", ["bf16"], ["TN"])
    assert cases and all(c.layout == "TN" and c.k <= 2048 < min(c.m, c.n) for c in cases)
    assert not set(bench.SUITES["train"]) & set(bench.SUITES["all"])  # "all" keeps its meaning
    assert {m for m, _, _ in bench.SUITES["prefill"]} == {256, 512, 1024, 2048}


def test_interpreter_check_is_labelled_and_unmeasured():
    recs = bench.interpreter_check(["fp16", "fp32-accurate"], say=lambda _m: None, layouts=("NT",))
    assert len(recs) == 2 and all(not r.measured and r.extra["ok"] for r in recs)
    assert all(r.extra["label"] == INTERPRETER_LABEL for r in recs)


def test_timed_rounds_alternate_the_order():
    """Rounds time both sides, ours first in even rounds and the peer first in odd ones (at the power cap
    the second one timed can inherit the first one's clock); no peer: ours alone; rounds >= 1."""
    from tilecraft.bench.harness import Timing

    seen = []

    def side(name, ms):
        def f():
            seen.append(name)
            return Timing(median_ms=ms, min_ms=ms, max_ms=ms, runs=1, spread=0.0)
        return f

    ours, peer = bench.timed_rounds(side("ours", 1.0), side("peer", 2.0), 4)
    assert seen == ["ours", "peer", "peer", "ours", "ours", "peer", "peer", "ours"]
    assert len(ours) == len(peer) == 4
    seen.clear()
    ours, peer = bench.timed_rounds(side("ours", 1.0), None, 3)
    assert seen == ["ours"] * 3 and peer == []
    with pytest.raises(ValueError, match="rounds"):
        bench.timed_rounds(side("ours", 1.0), None, 0)


def test_bench_cli_refuses_zero_rounds():
    from typer.testing import CliRunner

    from tilecraft.cli import app

    res = CliRunner().invoke(app, ["gemm", "bench", "--rounds", "0"])
    assert res.exit_code != 0 and "--rounds must be >= 1" in res.output


def test_smalln_suite_is_a_matrix_times_a_few_vectors():
    cases = bench.cases_for("smalln", ["bf16"], ["NN", "NT", "TN", "TT"])
    assert len(cases) == 32 and all(c.n <= 64 < c.m == c.k for c in cases)
    assert not set(bench.SUITES["smalln"]) & set(bench.SUITES["all"])  # "all" keeps its meaning
