"""The sm90 Gluon GEMM (``tilecraft.kernels.gemm_gluon``) on the GPU against float64: int8 exact,
3xTF32 within the fp32 tolerance, odd shapes, K not a multiple of the block, every operand layout
(MN-major operands are copied or split K-major first), outputs poisoned before the launch, inf/NaN
rows, and ``tilecraft.matmul``'s dispatch. Skipped without a CUDA sm90 GPU (tests/gpu/conftest.py)."""
from __future__ import annotations

from dataclasses import replace

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


@pytest.mark.parametrize("group_m", [8, 16])
@pytest.mark.parametrize("layout", ["NT", "NN"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tf32_float64(layout, shape, group_m):
    """Plain tf32 on the Gluon kernel (NN with B copied K-major); GROUP_M 16 is NT's rule from eight rounds."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "tf32")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="tf32")
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, GemmConfig("gluon", 128, 256, 32, group_m, 8, 3))
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 3e-3


@pytest.mark.parametrize("perm", [0, 1, 2])
@pytest.mark.parametrize("layout", ["NN", "TT", "NT", "TN"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tf32_mn_major_in_registers(layout, shape, perm):
    """``mn_regs``: NN as C^T = B^T A^T (B^T into registers, the tile stored transposed), TT with A
    into registers, no copy; NT and TN (nothing MN-major to take / both) take the copies.
    ``row_perm`` 1 / 2: the register operand's rows read in a relabelled order (2: in pairs), put back
    before the store."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "regs")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="tf32")
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=perm)
    plan = ops.launch_plan(a, b, torch.empty(spec.out_shape, device="cuda"), spec, cfg)
    m, n, k = shape  # the MN-major operand's rows must be 16-byte aligned to be read as they are
    regs = {"NN": "swap" if n % 4 == 0 and k % 4 == 0 else None,
            "TT": "regs" if m % 4 == 0 and k % 4 == 0 else None}.get(layout)
    assert plan[-1].constexprs["A_REGS"] == bool(regs) and plan[-1].constexprs["TRANS_OUT"] == (regs == "swap")
    assert plan[-1].constexprs["ROW_PERM"] == (perm if regs else 0)
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, cfg)
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 3e-3


@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("shape", SHAPES + [(264, 136, 72)])
def test_tf32_registers_deep_k_steps(layout, shape):
    """The register operand in row pairs on 64-deep K steps and two stages (16 64-bit loads and 8 wgmmas a step; the
    K remainders 1000 % 64, 16, 136 % 64 and 72 % 64 end inside a step): against float64, output poisoned."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "bk64")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    spec = ops.validate(a, b, precision="tf32")
    cfg = GemmConfig("gluon", 128, 256, 64, 16, 8, 2, mn_regs=True, row_perm=2)
    plan = ops.launch_plan(a, b, torch.empty(spec.out_shape, device="cuda"), spec, cfg)
    assert plan[-1].constexprs["A_REGS"] == all(d % 4 == 0 for d in (shape[2], shape[1] if layout == "NN" else shape[0]))
    out = torch.full(spec.out_shape, float("nan"), device="cuda")
    ops.launch(a, b, out, spec, cfg)
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 3e-3


# ---------------------------------------------------------------------------------------------
# fp16 / bf16: operands read K- or MN-major as they are, split-K in the persistent loop, padded rows
# ---------------------------------------------------------------------------------------------
G16 = [GemmConfig("gluon", 128, 256, 64, 8, 8, 4), GemmConfig("gluon", 64, 128, 64, 8, 4, 6),
       GemmConfig("gluon", 64, 64, 64, 8, 4, 8, pad_rows=True),
       # tiles of 192 and 96 columns (a second accumulator of block_n2 columns): N ends inside the first
       # accumulator of the last tile (1000, 264), inside the second (360: 192 + 168) or before the tile (8)
       GemmConfig("gluon", 128, 128, 64, 8, 8, 4, block_n2=64), GemmConfig("gluon", 64, 64, 64, 8, 4, 6, block_n2=32)]
SHAPES16 = [(1000, 1000, 1000), (8, 8, 16), (129, 264, 136), (300, 264, 4104), (77, 136, 1013), (77, 360, 1013)]


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


NAMED = [GemmConfig("gluon", 128, 256, 64, 8, 8, 4), GemmConfig("gluon", 64, 128, 64, 8, 4, 6),
         GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=64), GemmConfig("gluon", 64, 128, 64, 8, 4, 6, split_k=2),
         GemmConfig("gluon", 64, 128, 64, 8, 4, 4, split_k=2, fixup=True)]


@pytest.mark.parametrize("cfg", NAMED, ids=lambda c: c.short())
@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (8, 8, 16), (77, 360, 1013), (300, 1032, 4104)])
def test_16bit_named_slots_match_the_mbarrier_ring(cfg, layout, shape):
    """``named_slots`` (the ring's slots released to the producer by named barriers): against float64 into a
    NaN-poisoned output, launched twice (a race would move the bits), and bit-equal to the mbarrier ring
    (the same products in the same order), with more K steps than stages and persistent programs."""
    if cfg.fixup and (shape[0] * shape[1] > 300 * 1032 or shape[2] < 2 * cfg.block_k):
        pytest.skip("fixup joins two K halves, one program per work unit: at most the SM count")
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, cfg.short())) % 2**31)
    a, b = _rnd16(torch.bfloat16, layout, *shape, gen)
    spec = ops.validate(a, b)
    outs = []
    for c in (replace(cfg, named_slots=True), replace(cfg, named_slots=True), cfg):
        out = torch.full(spec.out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
        # 8 programs: each walks several tiles (the ring's count and the named barriers carry over)
        for k in ops.launch_plan(a, b, out, spec, c, sms=8 if shape[0] >= 300 and not cfg.fixup else None):
            k.run()
        torch.cuda.synchronize()
        assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2, c.short()
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2]), cfg.short()


CLUSTER = [GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2), GemmConfig("gluon", 128, 128, 64, 8, 8, 4, cluster_m=2),
           GemmConfig("gluon", 128, 256, 64, 8, 8, 4, cluster_m=2)]


@pytest.mark.parametrize("cfg", CLUSTER, ids=lambda c: c.short())
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (8, 8, 16), (77, 360, 1013), (300, 1032, 4104), (200, 136, 72)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_16bit_cluster_multicast(cfg, layout, shape, dtype):
    """``cluster_m`` 2 (two CTAs on tile rows 2i and 2i + 1 sharing B by TMA multicast): against float64
    into a NaN-poisoned output (an odd count of tile rows leaves a CTA with no rows of its own), twice
    (a race in the shared ring would move the bits), and bit-equal to the same tile without the cluster
    (the same wgmmas in the same order); with 8 and 2 clusters the CTAs walk many tiles in step."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, cfg.short())) % 2**31)
    a, b = _rnd16(dtype, layout, *shape, gen)
    spec = ops.validate(a, b)
    outs = []
    for c, sms in ((cfg, None), (cfg, 16), (cfg, 4), (replace(cfg, cluster_m=1), None)):
        out = torch.full(spec.out_shape, float("nan"), dtype=dtype, device="cuda")
        plan = ops.launch_plan(a, b, out, spec, c, sms=sms)
        assert plan[-1].cluster == c.cluster_m
        for k in plan:
            k.run()
        torch.cuda.synchronize()
        assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2, (c.short(), sms)
        outs.append(out)
    assert all(torch.equal(outs[0], o) for o in outs[1:]), cfg.short()


def test_cluster_kernel_traps_without_its_cluster():
    """A ``cluster_m`` 2 launch run without the cluster attribute stops with an error (the kernel's
    ``%cluster_nctarank`` check), not a hang or a wrong result. Run in a subprocess: a trap poisons the
    CUDA context."""
    import os
    import subprocess
    import sys

    code = (
        "import torch\nfrom dataclasses import replace\nfrom tilecraft.ops import gemm as ops\n"
        "from tilecraft.ops.launch import run_kernel\nfrom tilecraft.tuning.gemm import GemmConfig\n"
        "a = torch.randn(256, 256, device='cuda', dtype=torch.bfloat16); b = torch.randn(256, 256, device='cuda', "
        "dtype=torch.bfloat16)\nspec = ops.validate(a, b); out = torch.empty(256, 256, device='cuda', "
        "dtype=torch.bfloat16)\n"
        "k = ops.launch_plan(a, b, out, spec, GemmConfig('gluon', 64, 128, 64, 8, 4, 4, cluster_m=2))[-1]\n"
        "run_kernel(k.kernel, (2 * k.grid[0],), *k.args[:-3], 0, 0, 0, **k.constexprs, **k.options)\n"
        "torch.cuda.synchronize()\nprint('NO ERROR')\n")
    env = {**os.environ, "TILECRAFT_PDL": "0"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode != 0 and "NO ERROR" not in res.stdout, res.stdout + res.stderr


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


# ---------------------------------------------------------------------------------------------
# the epilogue in the Gluon kernel: act(alpha * A @ B + beta * C + bias) before the TMA store
# ---------------------------------------------------------------------------------------------
EPI_ACTS = [None, "relu", "gelu", "gelu_tanh", "silu"]


def _epi_inputs(gen, m, n, out_dtype, c_layout, c_dtype, bias_dtype):
    """C (M, N) row-major, column-major (a transposed view) or with a row stride past N; bias (N,)."""
    def rnd(*shape, dt):
        if dt == torch.int32:
            return torch.randint(-1000, 1000, shape, device="cuda", generator=gen, dtype=torch.int32)
        return (torch.rand(*shape, device="cuda", generator=gen) * 2 - 1).to(dt)
    if c_layout == "col":
        c = rnd(n, m, dt=c_dtype).t()
    elif c_layout == "pitch":
        c = rnd(m, n + 24, dt=c_dtype)[:, 5:n + 5]
    else:
        c = rnd(m, n, dt=c_dtype)
    return c, rnd(n, dt=bias_dtype)


def _epi_run(a, b, cfg, *, alpha, use_c, use_bias, act, out_dtype, tol, c_layout="row", c_dtype=None, seed=0,
             beta=-0.75, in_kernel=True, **kw):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    m, n = a.shape[0], b.shape[1]
    c, bias = _epi_inputs(gen, m, n, out_dtype, c_layout, c_dtype or out_dtype, out_dtype)
    args = dict(alpha=alpha, activation=act, out_dtype=out_dtype, **kw)
    if use_c:
        args.update(c=c, beta=beta)
    if use_bias:
        args["bias"] = bias
    spec = ops.validate(a, b, **args)
    assert ops.gluon_ok(a, b, spec)
    poison = float("nan") if out_dtype.is_floating_point else -7
    out = torch.full(spec.out_shape, poison, dtype=out_dtype, device="cuda")
    plan = ops.launch_plan(a, b, out, spec, cfg, args.get("c"), args.get("bias"))
    g = [k for k in plan if k.kernel.__name__ == "matmul_ws_kernel"][0]
    cx = g.constexprs  # the epilogue runs in the Gluon kernel (or, for split-K partials, not at all there)
    assert cx["HAS_C"] == (use_c and in_kernel) and cx["HAS_BIAS"] == (use_bias and in_kernel)
    assert cx["HAS_ALPHA"] == (alpha != 1 and in_kernel)
    assert cx["ACTIVATION"] == (ops._k.ACTIVATIONS[act] if in_kernel else 0)
    for k in plan:
        k.run()
    ref = matmul_reference(a, b, out_dtype=torch.float64 if out_dtype.is_floating_point else torch.int64,
                           alpha=alpha, beta=args.get("beta", 0.0), c=args.get("c"), bias=args.get("bias"),
                           activation=act)
    if tol == 0:
        assert torch.equal(out.to(torch.int64), ref)
    else:
        assert relative_error(out, ref) <= tol
    return plan


@pytest.mark.parametrize("act", EPI_ACTS)
@pytest.mark.parametrize("alpha", [1.0, -1.5])
@pytest.mark.parametrize("use_c", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
def test_epilogue_every_combination_bf16(act, alpha, use_c, use_bias):
    """Every combination of alpha, beta * C, bias and the activation, on the 128x256 tile (the
    most registers), NN, partial tiles in M and N; C column-major (any strides) in fp32."""
    gen = torch.Generator(device="cuda").manual_seed(hash((act, alpha, use_c, use_bias)) % 2**31)
    a, b = _rnd16(torch.bfloat16, "NN", 300, 264, 520, gen)
    _epi_run(a, b, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), alpha=alpha, use_c=use_c, use_bias=use_bias, act=act,
             out_dtype=torch.bfloat16, tol=1e-2, c_layout="col", c_dtype=torch.float32)


@pytest.mark.parametrize("cfg,layout,c_layout", [
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 5), "NT", "row"),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4), "TN", "pitch"),
    (GemmConfig("gluon", 64, 64, 64, 8, 4, 8), "TT", "col"),
    (GemmConfig("gluon", 64, 64, 64, 8, 4, 8, pad_rows=True), "NN", "row"),
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 4, block_n2=64), "NN", "col"),
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=32), "NT", "pitch"),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2), "TT", "col"),  # 129 rows: a partner without rows
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=2), "NN", "pitch"),
    (GemmConfig("gluon", 128, 256, 64, 8, 8, 4, cluster_m=2), "NT", "row"),
], ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
@pytest.mark.parametrize("act", EPI_ACTS)
def test_epilogue_configs_and_layouts(cfg, layout, c_layout, act):
    gen = torch.Generator(device="cuda").manual_seed(hash((cfg.block_m, layout, act)) % 2**31)
    a, b = _rnd16(torch.bfloat16, layout, 129, 136, 1013, gen)
    _epi_run(a, b, cfg, alpha=0.5, use_c=True, use_bias=True, act=act, out_dtype=torch.bfloat16, tol=1e-2,
             c_layout=c_layout)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_epilogue_fp16_and_fp32_out(out_dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    a, b = _rnd16(torch.float16, "NT", 200, 264, 136, gen)
    _epi_run(a, b, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), alpha=2.0, use_c=True, use_bias=True, act="silu",
             out_dtype=out_dtype, tol=2e-3 if out_dtype == torch.float16 else 1e-5)


@pytest.mark.parametrize("alpha", [1, 3])
@pytest.mark.parametrize("use_c", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("act", [None, "relu"])
def test_epilogue_int8_exact(alpha, use_c, use_bias, act):
    """int32 epilogue: integer alpha and beta, int32 C (column-major) and bias, relu; exact."""
    gen = torch.Generator(device="cuda").manual_seed(hash((alpha, use_c, use_bias, act)) % 2**31)
    a, b = _operands(torch.int8, "NT", 300, 264, 1000, gen)
    _epi_run(a, b, I8_CFG, alpha=alpha, use_c=use_c, use_bias=use_bias, act=act, out_dtype=torch.int32, tol=0,
             beta=-2, c_layout="col")


I8_CFG = GemmConfig("gluon", 128, 256, 128, 8, 8, 4)


@pytest.mark.parametrize("perm", [0, 2])
@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_epilogue_tf32_registers_and_transposed_tile(layout, act, perm):
    """tf32 ``mn_regs``: NN runs as C^T = B^T A^T, so C is read transposed and the bias runs
    along the kernel's rows; TT reads A into registers, the tile stored as it is. ``row_perm=2``
    (the heuristic's): the accumulator's rows relabelled back before the epilogue."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, act, "tf32epi")) % 2**31)
    a, b = _operands(torch.float32, layout, 264, 136, 520, gen)
    plan = _epi_run(a, b, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=perm), alpha=1.25,
                    use_c=True, use_bias=True, act=act, out_dtype=torch.float32, tol=3e-3, c_layout="pitch",
                    precision="tf32")
    assert plan[-1].constexprs["TRANS_OUT"] == (layout == "NN") and plan[-1].constexprs["A_REGS"]


def test_epilogue_3xtf32():
    gen = torch.Generator(device="cuda").manual_seed(29)
    a, b = _operands(torch.float32, "NT", 300, 264, 1000, gen)
    _epi_run(a, b, CONFIGS[2], alpha=0.75, use_c=True, use_bias=True, act="gelu_tanh", out_dtype=torch.float32,
             tol=1e-5, c_layout="col", precision="fp32-accurate")


def test_epilogue_split_k_reduce_and_fixup():
    """split-K: the kernel writes raw partials (epilogue off) and the reduce pass runs it; with
    ``fixup`` the first half runs it on the joined tile, three calls in a row."""
    gen = torch.Generator(device="cuda").manual_seed(31)
    a, b = _rnd16(torch.bfloat16, "NN", 256, 520, 4104, gen)
    plan = _epi_run(a, b, GemmConfig("gluon", 64, 128, 64, 8, 4, 6, split_k=2), alpha=1.5, use_c=True,
                    use_bias=True, act="gelu", out_dtype=torch.bfloat16, tol=1e-2, in_kernel=False)
    assert [k.kernel.__name__ for k in plan] == ["matmul_ws_kernel", "splitk_reduce_kernel"]
    a, b = _rnd16(torch.bfloat16, "NT", 1000, 1000, 1000, gen)
    for rep in range(3):
        plan = _epi_run(a, b, GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=2, fixup=True), alpha=1.5,
                        use_c=True, use_bias=True, act="silu", out_dtype=torch.bfloat16, tol=1e-2, seed=rep)
        assert [k.kernel.__name__ for k in plan] == ["matmul_ws_kernel"]


def test_epilogue_dispatch_and_unread_c():
    """``tilecraft.matmul`` with bias and an activation runs the Gluon kernel where the plain
    product does (1000^3: 64x128), and an unread C (beta = 0) full of NaN does not leak in."""
    import tilecraft
    gen = torch.Generator(device="cuda").manual_seed(37)
    a, b = _rnd16(torch.bfloat16, "NN", 1000, 1000, 1000, gen)
    bias = torch.rand(1000, device="cuda", generator=gen).to(torch.bfloat16)
    c = torch.full((1000, 1000), float("nan"), device="cuda", dtype=torch.bfloat16)
    spec = ops.validate(a, b, bias=bias, activation="gelu", c=c, beta=0.0)
    assert ops.choose_config(a, b, spec, tune_now=False).kernel == "gluon"
    got = tilecraft.matmul(a, b, bias=bias, activation="gelu", c=c, beta=0.0)
    ref = matmul_reference(a, b, out_dtype=torch.float64, bias=bias, activation="gelu")
    assert relative_error(got, ref) <= 1e-2


@pytest.mark.parametrize("dtype,cfg,layout,c_layout,c_dtype", [
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4, epi_prefetch=True), "NN", "row", None),
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4, epi_prefetch=True), "NT", "col", torch.float32),
    (torch.bfloat16, GemmConfig("gluon", 64, 128, 64, 8, 4, 4, epi_prefetch=True), "TN", "pitch", None),
    (torch.float32, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, epi_prefetch=True), "NN", "row", None),
    (torch.float32, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=2, epi_prefetch=True), "NN", "row",
     None),
    (torch.int8, GemmConfig("gluon", 128, 256, 128, 8, 8, 4, epi_prefetch=True), "NT", "row", None),
], ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
@pytest.mark.parametrize("act", [None, "relu"])
def test_epilogue_prefetch(dtype, cfg, layout, c_layout, c_dtype, act):
    """``epi_prefetch``: the producer warp prefetches each tile's C and bias into L2 (C walked
    along its unit stride: rows for row-major C, columns for column-major C and for the C^T tile
    of the swapped tf32 NN product; a pitched C; none where no stride is 1). Results unchanged."""
    gen = torch.Generator(device="cuda").manual_seed(hash((cfg.block_m, layout, c_layout, act)) % 2**31)
    m, n, k = 300, 264, 520
    if dtype == torch.int8:
        a, b = _operands(torch.int8, layout, m, n, k, gen)
        kw = dict(out_dtype=torch.int32, tol=0, beta=-2, alpha=3)
    elif dtype == torch.float32:
        a, b = _operands(torch.float32, layout, m, n, k, gen)
        kw = dict(out_dtype=torch.float32, tol=3e-3, precision="tf32", alpha=1.5)
    else:
        a, b = _rnd16(dtype, layout, m, n, k, gen)
        kw = dict(out_dtype=dtype, tol=1e-2, alpha=1.5)
    plan = _epi_run(a, b, cfg, use_c=True, use_bias=True, act=act, c_layout=c_layout, c_dtype=c_dtype, **kw)
    assert plan[-1].constexprs["EPI_PREFETCH"]


@pytest.mark.parametrize("cfg", [GemmConfig("gluon", 128, 256, 64, 8, 8, 3), GemmConfig("tma", 128, 256, 64, 8, 8, 3),
                                 GemmConfig("pointer", 64, 64, 32, 8, 4, 3),
                                 GemmConfig("pointer", 64, 64, 32, 8, 4, 3, split_k=2)], ids=lambda c: c.short())
def test_relu_keeps_nan_on_every_kernel(cfg):
    """relu(NaN) = NaN through the product, C and the bias, on the Gluon, TMA and pointer kernels and split-K's
    reduce (the shared activation's `where(x > 0, x, 0)` gave 0)."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    a, b = _operands(torch.float32, "NT", 300, 264, 136, gen)  # rows of 16-byte multiples: the Gluon kernel's
    a, b = a.bfloat16(), b.bfloat16()
    a[3, 5] = float("nan")
    c = (torch.rand(300, 264, device="cuda", generator=gen) * 2 - 1).bfloat16()
    c[9, 2] = float("nan")
    bias = (torch.rand(264, device="cuda", generator=gen) * 2 - 1).bfloat16()
    bias[6] = float("nan")
    spec = ops.validate(a, b, c=c, beta=1.0, bias=bias, activation="relu")
    out = torch.full(spec.out_shape, 7.0, device="cuda", dtype=spec.out_dtype)
    ops.launch(a, b, out, spec, cfg, c, bias)
    ref = matmul_reference(a, b, out_dtype=torch.float64, c=c, beta=1.0, bias=bias, activation="relu")
    assert torch.isnan(ref[3]).all() and torch.isnan(ref[:, 6]).all() and torch.isnan(ref[9, 2])
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert relative_error(torch.nan_to_num(out), torch.nan_to_num(ref)) <= 1e-2
