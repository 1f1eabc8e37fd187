"""The stream-K pointer kernel (``GemmConfig(streamk=True)``) compiled for the GPU: one program per SM,
tiles shared between programs joined in the kernel through per-tile counters.

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_gemm_streamk.py

Against float64 into NaN-poisoned outputs (small-M LLM shapes in bf16/fp16, fp32, odd shapes, the
epilogue, a batch); many launches in a row give the same bits (the partials are summed in slot
order) and leave the counters at zero; CUDA-graph replays agree with eager launches."""
from __future__ import annotations

import pytest
import torch

from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def S(bm, bn, bk, stages, warps=4):
    return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, streamk=True)


def _operands(m, n, k, dtype, layout="NN", batch=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    pre = () if batch is None else (batch,)

    def rnd(*s):
        return (torch.rand(*pre, *s, device="cuda", generator=g) * 2 - 1).to(dtype)
    a = rnd(k, m).transpose(-1, -2) if layout[0] == "T" else rnd(m, k)
    b = rnd(n, k).transpose(-1, -2) if layout[1] == "T" else rnd(k, n)
    return a, b


def _run(a, b, cfg, **kw):
    spec = ops.validate(a, b, **kw)
    out = torch.full(spec.out_shape, float("nan"), device="cuda", dtype=spec.out_dtype)
    plan = ops.launch_plan(a, b, out, spec, cfg, kw.get("c"), kw.get("bias"))
    assert [k.kernel.__name__ for k in plan] == ["matmul_streamk_kernel"]
    for k in plan:
        k.run()
    return out, plan[0]


def _check(out, a, b, tol, **kw):
    ref = matmul_reference(a, b, out_dtype=torch.float64, **kw)
    assert not torch.isnan(out).any(), "an element was not written"
    err = relative_error(out, ref)
    assert err <= tol, f"relative error {err:.2e} > {tol:.0e}"


@pytest.mark.parametrize("cfg", [S(16, 32, 128, 6), S(16, 64, 128, 4), S(64, 64, 128, 4), S(32, 32, 256, 4)],
                         ids=lambda c: c.short().replace(" ", "-"))
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (16, 11008, 4096),
                                   (7, 1000, 1000), (33, 129, 4105)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_small_m_matches_float64(cfg, shape, dtype):
    a, b = _operands(*shape, dtype)
    out, launch = _run(a, b, cfg)
    assert launch.grid[0] <= torch.cuda.get_device_properties(0).multi_processor_count
    _check(out, a, b, 1e-2)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_fp32_layouts_and_epilogue(layout):
    a, b = _operands(20, 300, 1000, torch.float32, layout, batch=3)
    c = torch.rand(3, 20, 300, device="cuda")
    bias = torch.rand(300, device="cuda")
    kw = {"alpha": 0.5, "beta": 2.0, "c": c, "bias": bias, "activation": "gelu"}
    out, _ = _run(a, b, S(16, 32, 32, 3), **kw)
    _check(out, a, b, 1e-5, **kw)


def test_many_launches_same_bits_counters_left_at_zero():
    a, b = _operands(16, 4096, 4096, torch.bfloat16)
    cfg = S(16, 32, 128, 6)
    first, launch = _run(a, b, cfg)
    counters = launch.args[-2]
    for _ in range(20):
        out, _ = _run(a, b, cfg)
        assert torch.equal(out, first)
    torch.cuda.synchronize()
    assert int(counters.abs().sum()) == 0


def test_graph_replays_match_eager():
    a, b = _operands(1, 4096, 4096, torch.bfloat16)
    cfg = S(16, 32, 128, 6)
    spec = ops.validate(a, b)
    eager, _ = _run(a, b, cfg)
    out = torch.full(spec.out_shape, float("nan"), device="cuda", dtype=spec.out_dtype)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan = ops.launch_plan(a, b, out, spec, cfg)  # warm-up compile outside the capture
        for k in plan:
            k.run()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for k in ops.launch_plan(a, b, out, spec, cfg):
                k.run()
    for _ in range(5):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)
