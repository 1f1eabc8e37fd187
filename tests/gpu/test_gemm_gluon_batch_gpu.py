"""Batched products on the sm90 Gluon GEMM (the batch stacked along the output's rows, ``STACK``) against
float64 on the GPU: every layout, bf16 / fp16 / tf32 (the register operand's C^T form) / int8, broadcast
operands, bias and activation, outputs poisoned, entries of different random data (an entry that read its
neighbour's tiles fails), and ``tilecraft.matmul``'s dispatch. Skipped without a CUDA sm90 GPU."""
from __future__ import annotations

import itertools

import pytest
import torch

from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig, gluon_batch_fit

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9),
                                reason="the Gluon GEMM is sm90 only")

CFG16 = [GemmConfig("gluon", 128, 256, 64, 8, 8, 4), GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2),
         GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=64), GemmConfig("gluon", 64, 64, 64, 8, 4, 8)]
# (batch, M, N, K): N ends inside a tile, K inside a step (K-major operands only), tiny N; M ending inside a
# tile (the entry's rows padded to whole tiles, the rank-3 output clipping them), down to one row
SHAPES = [(3, 256, 264, 192), (2, 128, 8, 64), (5, 512, 1000, 1000), (4, 128, 136, 4104), (3, 200, 264, 192),
          (4, 1000, 136, 320), (5, 1, 72, 64), (2, 65, 520, 1000)]


def _rnd(shape, dtype, gen):
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, device="cuda", generator=gen, dtype=torch.int8)
    return (torch.rand(shape, device="cuda", generator=gen) * 2 - 1).to(dtype)


def _operands(dtype, layout, batch, m, n, k, gen, broadcast=""):
    ab = () if broadcast == "a" else (batch,)
    bb = () if broadcast == "b" else (batch,)
    a = _rnd((*ab, k, m), dtype, gen).mT if layout[0] == "T" else _rnd((*ab, m, k), dtype, gen)
    b = _rnd((*bb, n, k), dtype, gen).mT if layout[1] == "T" else _rnd((*bb, k, n), dtype, gen)
    return a, b


def _run(a, b, cfg, tol, **kw):
    spec = ops.validate(a, b, **kw)
    out = torch.full(spec.out_shape, float("nan") if spec.out_dtype.is_floating_point else -1, dtype=spec.out_dtype,
                     device="cuda")
    if gluon_batch_fit(spec.m, spec.k, cfg, mn_major=False) is not None:  # a tile would straddle two entries
        with pytest.raises(ValueError, match="Gluon"):
            ops.launch(a, b, out, spec, cfg)
        return
    try:
        ops.launch(a, b, out, spec, cfg, bias=kw.get("bias"))
    except ValueError as exc:  # K of a partial tile with an operand read MN-major: refused, not wrong
        # a batched A read as (K, M) or B as (K, N)
        mn_major = (a.dim() == 3 and a.stride(-1) != 1) or (b.dim() == 3 and b.stride(-1) == 1)
        assert "block_k" in str(exc) and spec.k % cfg.block_k and (mn_major or cfg.mn_regs), str(exc)
        return
    bias = kw.get("bias")
    ref = matmul_reference(a, b, out_dtype=torch.float64)
    if bias is not None:
        ref = ref + bias.double()
    if kw.get("activation") == "relu":
        ref = ref.clamp_min(0)
    if spec.out_dtype == torch.int32:
        assert torch.equal(out, ref.to(torch.int32))
    else:
        assert relative_error(out, ref) <= tol


@pytest.mark.parametrize("cfg", CFG16, ids=lambda c: c.short())
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", SHAPES)
def test_bf16_batches(cfg, layout, shape):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, cfg.short())) % 2**31)
    a, b = _operands(torch.bfloat16, layout, *shape, gen)
    _run(a, b, cfg, 1e-2)


@pytest.mark.parametrize("broadcast", ["a", "b"])
@pytest.mark.parametrize("layout", ["NN", "TT", "NT"])
def test_broadcast_operands(broadcast, layout):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, broadcast)) % 2**31)
    a, b = _operands(torch.float16, layout, 6, 256, 264, 320, gen, broadcast)
    _run(a, b, CFG16[0], 2e-3)
    if broadcast == "b":  # an expanded (stride 0) batch is the same
        _run(a, b.expand(6, *b.shape), CFG16[0], 2e-3)


@pytest.mark.parametrize("layout", ["NN", "TT", "NT"])
@pytest.mark.parametrize("shape", [(3, 256, 264, 192), (8, 512, 512, 512), (2, 256, 8, 96), (3, 200, 264, 192),
                                   (4, 77, 512, 256), (3, 1000, 136, 96), (3, 200, 264, 100), (2, 512, 512, 1000)])
def test_tf32_batches(layout, shape):
    """NN as C^T = B^T A^T stacked along the kernel's N (the output's rows), TT with A in registers, NT plain."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, shape, "tf32")) % 2**31)
    a, b = _operands(torch.float32, layout, *shape, gen)
    regs = layout in ("NN", "TT")
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 4, mn_regs=regs, row_perm=2 if regs else 0)
    _run(a, b, cfg, 3e-3, precision="tf32")


def test_int8_batch_exact():
    gen = torch.Generator(device="cuda").manual_seed(7)
    a, b = _operands(torch.int8, "NT", 3, 250, 264, 1000, gen)
    _run(a, b, GemmConfig("gluon", 128, 256, 128, 8, 8, 3), 0, out_dtype=torch.int32)


@pytest.mark.parametrize("m", [256, 200])
@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_bias_and_activation(layout, m):
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, "bias", m)) % 2**31)
    a, b = _operands(torch.bfloat16, layout, 4, m, 264, 192, gen)
    bias = _rnd((264,), torch.bfloat16, gen)
    _run(a, b, CFG16[0], 1e-2, bias=bias, activation="relu")


def test_matmul_dispatches_batches_to_gluon(monkeypatch):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    gen = torch.Generator(device="cuda").manual_seed(11)
    for (dtype, kw, tol), m in itertools.product(((torch.bfloat16, {}, 1e-2), (torch.float32, {"precision": "tf32"}, 3e-3)),
                                                 (1024, 1000, 77)):  # entries of whole tiles, and padded ones
        a, b = _operands(dtype, "NN", 8, m, 1024, 1024, gen)
        spec = ops.validate(a, b, **kw)
        cfg = ops.choose_config(a, b, spec, tune_now=False)
        # (8 x 77 rows in bf16: the 64x128 class at K 1024, the TMA kernel by rule; in tf32 128x128 register tiles)
        assert cfg.kernel == ("tma" if dtype == torch.bfloat16 and m == 77 else "gluon"), cfg.short()
        out = ops.matmul(a, b, **kw)
        assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= tol


@pytest.mark.parametrize("layout,dtype", [("NN", torch.bfloat16), ("TN", torch.bfloat16), ("TT", torch.float16),
                                          ("NN", torch.float32), ("TT", torch.float32)])
def test_k_tail_reads_nothing_of_the_next_entry(layout, dtype):
    """K ends inside a K step and an operand is read MN-major (K rows an entry): the next entry's first rows are
    infinite. Read through a 2D box over the flattened batch, they would meet the zeros past this entry's K in the
    other operand and make 0 x inf = NaN here; the rank-3 boxes stop at the entry's K."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, str(dtype), "tail")) % 2**31)
    batch, m, n, k = 3, 200, 264, 1000
    a, b = _operands(dtype, layout, batch, m, n, k, gen)
    with torch.no_grad():  # entries 1 and 2: their first K rows (of both operands) infinite
        a[1:, :, :8] = float("inf")
        b[1:, :8, :] = float("inf")
    kw = {"precision": "tf32"} if dtype == torch.float32 else {}
    spec = ops.validate(a, b, **kw)
    regs = dtype == torch.float32 and layout != "NT"
    cfg = (GemmConfig("gluon", 128, 256, 32, 8, 8, 4, mn_regs=regs, row_perm=2 if regs else 0)
           if dtype == torch.float32 else CFG16[0])
    out = torch.full(spec.out_shape, float("nan"), dtype=spec.out_dtype, device="cuda")
    ops.launch(a, b, out, spec, cfg)
    ref = matmul_reference(a[:1], b[:1], out_dtype=torch.float64)
    assert torch.isfinite(out[0]).all()
    assert relative_error(out[:1], ref) <= (3e-3 if dtype == torch.float32 else 1e-2)


@pytest.mark.parametrize("c_kind", ["batch", "matrix", "expanded", "strided"])
@pytest.mark.parametrize("layout,dtype,m", [("NN", torch.bfloat16, 200), ("NT", torch.bfloat16, 256),
                                            ("NN", torch.float32, 200), ("TT", torch.float32, 77)])
def test_beta_c_on_a_stacked_batch(c_kind, layout, dtype, m):
    """beta * C + bias in the stacked batch's epilogue: each entry's own C (or one C for all), its rows masked at
    the entry's M; entries of different random data, so an entry that read its neighbour's C fails."""
    gen = torch.Generator(device="cuda").manual_seed(hash((layout, str(dtype), m, c_kind)) % 2**31)
    batch, n, k = 3, 264, 192
    a, b = _operands(dtype, layout, batch, m, n, k, gen)
    if c_kind == "batch":
        c = _rnd((batch, m, n), dtype, gen)
    elif c_kind == "matrix":
        c = _rnd((m, n), dtype, gen)
    elif c_kind == "expanded":
        c = _rnd((m, n), dtype, gen).expand(batch, m, n)
    else:  # a transposed batch of C
        c = _rnd((batch, n, m), dtype, gen).mT
    bias = _rnd((n,), dtype, gen)
    kw = {"precision": "tf32"} if dtype == torch.float32 else {}
    spec = ops.validate(a, b, c=c, beta=0.5, bias=bias, **kw)
    regs = dtype == torch.float32
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 4, mn_regs=True, row_perm=2) if regs else CFG16[0]
    out = torch.full(spec.out_shape, float("nan"), dtype=spec.out_dtype, device="cuda")
    ops.launch(a, b, out, spec, cfg, c=c, bias=bias)
    ref = matmul_reference(a, b, out_dtype=torch.float64) + 0.5 * c.double() + bias.double()
    assert relative_error(out, ref) <= (3e-3 if regs else 1e-2)
