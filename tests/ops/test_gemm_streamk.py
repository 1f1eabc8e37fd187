"""The stream-K pointer kernel (``GemmConfig(streamk=True)``, ``kernels.gemm.matmul_streamk_kernel``) in
Triton's interpreter: one program per SM shares the (tile, K step) units evenly, tiles split between
programs are joined in the kernel through per-tile counters. Checked against float64 into
NaN-poisoned outputs for SM counts that split tiles two and three ways, every layout, batches, the
epilogue, K = 0 and K tails; and the grid arithmetic itself."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

CFG = GemmConfig("pointer", 16, 32, 16, group_m=1, num_warps=2, num_stages=3, streamk=True)


def _operands(m, n, k, dtype, layout="NN", batch=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    lead = (batch,) if batch else ()

    def rnd(shape):
        return torch.rand(shape, generator=g) * 2 - 1
    a = rnd((*lead, k, m)).transpose(-1, -2) if layout[0] == "T" else rnd((*lead, m, k))
    b = rnd((*lead, n, k)).transpose(-1, -2) if layout[1] == "T" else rnd((*lead, k, n))
    if dtype == torch.int8:
        return (a * 100).round().to(dtype), (b * 100).round().to(dtype)
    return a.to(dtype), b.to(dtype)


def _run(a, b, cfg, sms, **kw):
    """Run every launch of ``cfg``'s plan for ``sms`` SMs into a poisoned output."""
    spec = ops.validate(a, b, **kw)
    out = (torch.full(spec.out_shape, float("nan")).to(spec.out_dtype) if spec.out_dtype.is_floating_point
           else torch.full(spec.out_shape, -(2**31), dtype=spec.out_dtype))
    plan = ops.launch_plan(a, b, out, spec, cfg, kw.get("c"), kw.get("bias"), sms=sms)
    assert [k.kernel.__name__ for k in plan] == ["matmul_streamk_kernel"]
    for k in plan:
        k.run()
    return out, plan[0]


def _check(out, a, b, tol=1e-5, **kw):
    ref = matmul_reference(a, b, out_dtype=torch.float64 if out.dtype.is_floating_point else torch.int64, **kw)
    if out.dtype == torch.int32:
        assert torch.equal(out, ref.to(torch.int32))
    else:
        assert not torch.isnan(out).any(), "an element was not written"
        assert relative_error(out, ref) <= tol


def test_grid_arithmetic():
    """Every unit has exactly one owner, owners ascend, and no tile touches more programs than its slots."""
    for tiles, kb, sms in [(128, 32, 132), (4, 7, 3), (5, 1, 8), (1, 100, 7), (3, 10, 4), (64, 32, 132)]:
        programs, units, slots = ops.streamk_shape(tiles, kb, sms)
        assert programs == min(sms, units) and units == tiles * kb
        owner = [((u + 1) * programs - 1) // units for u in range(units)]
        start = [(p * units) // programs for p in range(programs + 1)]
        assert all(start[o] <= u < start[o + 1] for u, o in enumerate(owner))
        for t in range(tiles):
            assert owner[t * kb + kb - 1] - owner[t * kb] + 1 <= slots
    assert ops.streamk_shape(4, 0, 132) == (4, 4, 2)  # K = 0: one (empty) K block per tile


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("sms", [1, 3, 5, 13])
def test_matches_float64_tiles_split_between_programs(layout, sms):
    """20 x 70 x 100 in 16 x 32 x 16 tiles: 6 tiles of 7 K steps; 5 programs split tiles 2 ways,
    13 programs 3 ways (3 units each for 7-step tiles)."""
    a, b = _operands(20, 70, 100, torch.float32, layout)
    out, launch = _run(a, b, CFG, sms)
    assert launch.grid[0] == sms
    _check(out, a, b)


@pytest.mark.parametrize("name,tol", [("fp16", 2e-3), ("bf16", 1e-2), ("int8", 0), ("fp64", 1e-12)])
def test_dtypes(name, tol):
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8, "fp64": torch.float64}[name]
    a, b = _operands(17, 40, 90, dtype, "NT")
    out, _ = _run(a, b, CFG, 7)
    _check(out, a, b, tol)


def test_epilogue_batch_and_k_tail():
    a, b = _operands(20, 40, 75, torch.float32, "TN", batch=3)
    c = torch.rand(3, 20, 40) - 0.5
    bias = torch.rand(40) - 0.5
    kw = {"alpha": 0.5, "beta": 2.0, "c": c, "bias": bias, "activation": "silu"}
    out, launch = _run(a, b, CFG, 11, **kw)
    assert not launch.constexprs["EVEN_K"]
    _check(out, a, b, **kw)


def test_k0_gives_beta_c():
    a, b = _operands(5, 33, 0, torch.float32)
    c = torch.rand(5, 33)
    out, _ = _run(a, b, CFG, 4, beta=3.0, c=c)
    torch.testing.assert_close(out, 3.0 * c)


def test_run_twice_gives_the_same_bits():
    """The partials are summed in slot order: two runs agree bit for bit."""
    a, b = _operands(33, 64, 300, torch.float32, "NN")
    o1, _ = _run(a, b, CFG, 9)
    o2, _ = _run(a, b, CFG, 9)
    assert torch.equal(o1, o2)


def test_streamk_refuses_split_k_and_other_kernels():
    a, b = _operands(8, 8, 8, torch.float32)
    spec = ops.validate(a, b)
    out = torch.empty(8, 8)
    for cfg in (GemmConfig("pointer", 16, 16, 16, split_k=2, streamk=True), GemmConfig("tma", 64, 64, 32, streamk=True)):
        with pytest.raises(ValueError, match="streamk"):
            ops.launch_plan(a, b, out, spec, cfg, sms=4)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(0, 90), layout=st.sampled_from(["NN", "NT", "TN", "TT"]),
       batch=st.sampled_from([None, 2]), sms=st.integers(1, 17))
def test_any_shape_matches_float64(m, n, k, layout, batch, sms):
    a, b = _operands(m, n, k, torch.float32, layout, batch=batch)
    out, _ = _run(a, b, CFG, sms)
    _check(out, a, b)
