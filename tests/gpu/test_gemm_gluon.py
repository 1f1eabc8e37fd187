"""The sm90 Gluon GEMM (``tilecraft.kernels.gemm_gluon``) on the GPU against float64: int8 exact,
3xTF32 within the fp32 tolerance, odd shapes, K not a multiple of the block, every operand layout
(MN-major operands are copied or split K-major first), outputs poisoned before the launch, inf/NaN
rows, and ``tilecraft.matmul``'s dispatch. Skipped without a CUDA sm90 GPU (tests/gpu/conftest.py)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

CONFIGS = [GemmConfig("gluon", 128, 256, 128, 8, 8, 3), GemmConfig("gluon", 128, 128, 32, 8, 8, 3, flush=1),
           GemmConfig("gluon", 128, 128, 32, 8, 8, 3, flush=4)]
SHAPES = [(1000, 1004, 1000), (8, 4, 16), (129, 260, 136), (300, 260, 4104)]


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


pytestmark = pytest.mark.skipif(not _sm90(), reason="the Gluon GEMM is sm90 only")


def _operands(dtype, layout, m, n, k, gen):
    def one(r, c):
        if dtype == torch.int8:
            return torch.randint(-128, 128, (r, c), device="cuda", generator=gen, dtype=torch.int8)
        return torch.rand(r, c, device="cuda", generator=gen) * 2 - 1
    a = one(k, m).t() if layout[0] == "T" else one(m, k)
    b = one(n, k).t() if layout[1] == "T" else one(k, n)
    return a, b


@pytest.mark.parametrize("layout", ["NT", "NN", "TN"])
@pytest.mark.parametrize("shape", SHAPES)
def test_int8_exact(layout, shape):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape)) % 2**31)
    a, b = _operands(torch.int8, layout, *shape, gen)
    spec = ops.validate(a, b)
    out = torch.full(spec.out_shape, -1, dtype=torch.int32, device="cuda")
    ops.launch(a, b, out, spec, CONFIGS[0])
    assert torch.equal(out, matmul_reference(a, b, out_dtype=torch.int32))


@pytest.mark.parametrize("cfg", CONFIGS[1:], ids=lambda c: c.short())
@pytest.mark.parametrize("layout", ["NT", "NN", "TT"])
@pytest.mark.parametrize("shape", SHAPES)
def test_3xtf32_float64(cfg, layout, shape):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, cfg.flush)) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="fp32-accurate")
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, cfg)
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-5


def test_3xtf32_inf_nan_rows():
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.rand(256, 512, device="cuda", generator=gen) * 2 - 1
    b = torch.rand(512, 264, device="cuda", generator=gen) + 0.5
    a[3, 7], a[5, 9] = float("inf"), float("nan")
    spec = ops.validate(a, b, precision="fp32-accurate")
    for cfg in CONFIGS[1:]:
        out = torch.full(spec.out_shape, 0.0, device="cuda")
        ops.launch(a, b, out, spec, cfg)
        assert torch.isposinf(out[3]).all() and torch.isnan(out[5]).all()
        assert torch.isfinite(out[torch.arange(256, device="cuda") > 5]).all()


def test_dispatch_on_sm90():
    a = torch.randint(-128, 128, (512, 1024), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (768, 1024), device="cuda", dtype=torch.int8).t()
    spec = ops.validate(a, b)
    assert ops.gluon_ok(a, b, spec)
    assert not ops.gluon_ok(a, b, ops.validate(a, b, out_dtype=torch.float32))
    import tilecraft
    got = tilecraft.matmul(a, b)
    assert torch.equal(got, matmul_reference(a, b, out_dtype=torch.int32))


@pytest.mark.parametrize("layout", ["NT", "NN"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tf32_float64(layout, shape):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "tf32")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="tf32")
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, GemmConfig("gluon", 128, 256, 32, 8, 8, 3))
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 3e-3


@pytest.mark.parametrize("perm", [False, True])
@pytest.mark.parametrize("layout", ["NN", "TT", "NT", "TN"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tf32_mn_major_in_registers(layout, shape, perm):
    """``mn_regs``: NN as C^T = B^T A^T (B^T into registers, the tile stored transposed), TT with A
    into registers, no copy; NT and TN (nothing MN-major to take / both) take the copies.
    ``row_perm``: the register operand's rows read in a relabelled order, put back before the store."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "regs")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="tf32")
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=perm)
    plan = ops.launch_plan(a, b, torch.empty(spec.out_shape, device="cuda"), spec, cfg)
    m, n, k = shape  # the MN-major operand's rows must be 16-byte aligned to be read as they are
    regs = {"NN": "swap" if n % 4 == 0 and k % 4 == 0 else None,
            "TT": "regs" if m % 4 == 0 and k % 4 == 0 else None}.get(layout)
    assert plan[-1].constexprs["A_REGS"] == bool(regs) and plan[-1].constexprs["TRANS_OUT"] == (regs == "swap")
    assert plan[-1].constexprs["ROW_PERM"] == (perm and bool(regs))
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, cfg)
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 3e-3


# ---------------------------------------------------------------------------------------------
# fp16 / bf16: operands read K- or MN-major as they are, split-K in the persistent loop, padded rows
# ---------------------------------------------------------------------------------------------
G16 = [GemmConfig("gluon", 128, 256, 64, 8, 8, 4), GemmConfig("gluon", 64, 128, 64, 8, 4, 6),
       GemmConfig("gluon", 64, 64, 64, 8, 4, 8, pad_rows=True)]
SHAPES16 = [(1000, 1000, 1000), (8, 8, 16), (129, 264, 136), (300, 264, 4104), (77, 136, 1013)]


def _rnd16(dtype, layout, m, n, k, gen):
    def one(r, c):
        return (torch.rand(r, c, device="cuda", generator=gen) * 2 - 1).to(dtype)
    a = one(k, m).t() if layout[0] == "T" else one(m, k)
    b = one(n, k).t() if layout[1] == "T" else one(k, n)
    return a, b


@pytest.mark.parametrize("dtype,cfg", [(torch.bfloat16, c) for c in G16] + [(torch.float16, G16[1])],
                         ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", SHAPES16)
def test_16bit_float64(cfg, dtype, layout, shape):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, str(dtype), cfg.block_m)) % 2**31)
    a, b = _rnd16(dtype, layout, *shape, gen)
    spec = ops.validate(a, b)
    assert ops.gluon_ok(a, b, spec)
    out = torch.full(spec.out_shape, float("nan"), dtype=dtype, device="cuda")
    ops.launch(a, b, out, spec, cfg)
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= tol


@pytest.mark.parametrize("cfg", [GemmConfig("gluon", 64, 128, 64, 8, 4, 6, split_k=2),
                                 GemmConfig("gluon", 128, 128, 64, 8, 8, 5, split_k=3)], ids=lambda c: c.short())
@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_16bit_split_k(cfg, layout):
    gen = torch.Generator(device="cuda").manual_seed(17)
    a, b = _rnd16(torch.bfloat16, layout, 256, 520, 4104, gen)
    spec = ops.validate(a, b)
    out = torch.full(spec.out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    plan = ops.launch_plan(a, b, out, spec, cfg)
    assert [k.kernel.__name__ for k in plan] == ["matmul_ws_kernel", "splitk_reduce_kernel"]
    for k in plan:
        k.run()
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2


@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_16bit_split_k_fixup(layout):
    """split-K 2 with the halves joined inside the kernel (``fixup``: one launch, a flag per tile):
    three calls in a row per shape, each checked (every launch must leave its flags at zero)."""
    cfg = GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=2, fixup=True)
    gen = torch.Generator(device="cuda").manual_seed(19)
    for shape in ((1000, 1000, 1000), (77, 136, 1012), (200, 264, 4104), (1000, 1000, 72)):
        for _ in range(3):
            a, b = _rnd16(torch.bfloat16, layout, *shape, gen)
            spec = ops.validate(a, b)
            out = torch.full(spec.out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
            plan = ops.launch_plan(a, b, out, spec, cfg)
            assert [k.kernel.__name__ for k in plan] == ["matmul_ws_kernel"] and plan[0].constexprs["FIXUP"]
            plan[0].run()
            assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2, shape


def test_16bit_fp32_out_and_split_rule():
    gen = torch.Generator(device="cuda").manual_seed(19)
    a, b = _rnd16(torch.bfloat16, "NN", 200, 264, 520, gen)
    spec = ops.validate(a, b, out_dtype=torch.float32)
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, G16[0])
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-4
    out.fill_(float("nan"))  # M = 200: split-K with each split's rows padded to whole 128-row tiles
    ops.launch(a, b, out, spec, GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=2))
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-4


def test_pad_rows_and_16bit_dispatch():
    gen = torch.Generator(device="cuda").manual_seed(23)
    t = (torch.rand(300, 1000, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
    got = ops.aligned_copy(t, -1)
    assert torch.equal(got, t) and got.stride(0) * 2 % 128 == 0
    tt = t.t().contiguous().t()  # MN-major: padded, not transposed
    got = ops.aligned_copy(tt, -1)
    assert torch.equal(got, tt) and got.stride(0) == 1 and got.stride(1) * 2 % 128 == 0
    import tilecraft
    a, b = _rnd16(torch.bfloat16, "NN", 1000, 1000, 1000, gen)
    spec = ops.validate(a, b)
    assert ops.choose_config(a, b, spec, tune_now=False).kernel == "gluon"
    assert relative_error(tilecraft.matmul(a, b), matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2
