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


def test_train_suite_is_short_k_weight_gradients():
    cases = bench.cases_for("train", ["bf16"], ["TN"])
    assert cases and all(c.layout == "TN" and c.k <= 2048 < min(c.m, c.n) for c in cases)
    assert not set(bench.SUITES["train"]) & set(bench.SUITES["all"])  # "all" keeps its meaning
    assert {m for m, _, _ in bench.SUITES["prefill"]} == {256, 512, 1024, 2048}


def test_interpreter_check_is_labelled_and_unmeasured():
    recs = bench.interpreter_check(["fp16", "fp32-accurate"], say=lambda _m: None, layouts=("NT",))
    assert len(recs) == 2 and all(not r.measured and r.extra["ok"] for r in recs)
    assert all(r.extra["label"] == INTERPRETER_LABEL for r in recs)
