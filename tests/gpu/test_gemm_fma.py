"""The Gluon FMA GEMM (``tilecraft.kernels.gemm_fma``, fp32 ``ieee``) compiled for the GPU and
checked against float64, every launch writing into an output poisoned with NaN first:

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_gemm_fma.py

* every layout (NN/NT/TN/TT as transposed views) at aligned, unaligned and odd shapes, with K not a
  multiple of BLOCK_K, for each configuration the dispatch or the benchmark uses;
* tiny and empty shapes (M or N of 1, K of 1, K = 0: ``beta * C``), batches with a broadcast operand;
* the fused epilogue (alpha, beta * C, bias, activation) and split-K (the reduce kernel runs it);
* inf and NaN in a row of A / a column of B: those rows/columns are inf or NaN, the rest finite;
* the dispatch: on sm80+ an fp32 product with the default precision runs this kernel.
Skipped without a CUDA GPU of compute capability 8.0 or more (tests/gpu/conftest.py)."""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8,
                                reason="the FMA kernel needs an NVIDIA GPU of compute capability 8.0+")

TOL = TOLERANCES["fp32-ieee"]
CONFIGS = [
    GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2),  # the heuristic (first)
    GemmConfig("fma", 64, 128, 16, num_warps=4, num_stages=4, warps_m=2),
    GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3),
    GemmConfig("fma", 128, 64, 32, num_warps=4, num_stages=3, warps_m=4),
    GemmConfig("fma", 64, 64, 32, num_warps=2, num_stages=3, warps_m=2),
    GemmConfig("fma", 128, 128, 64, num_warps=8, num_stages=3),
    GemmConfig("fma", 128, 256, 32, num_warps=8, num_stages=3, warps_m=4),
    GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3, maxnreg=128),
    GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2, mn_copy="ab"),
]


def _operands(m, n, k, layout, batch=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    pre = () if batch is None else (batch,)

    def rnd(*s):
        return torch.rand(*pre, *s, device="cuda", generator=g) * 2 - 1
    a = rnd(k, m).transpose(-1, -2) if layout[0] == "T" else rnd(m, k)
    b = rnd(n, k).transpose(-1, -2) if layout[1] == "T" else rnd(k, n)
    return a, b


def _run(a, b, cfg, **kw):
    spec = ops.validate(a, b, **kw)
    out = torch.full(spec.out_shape, float("nan"), device="cuda", dtype=spec.out_dtype)
    ops.launch(a, b, out, spec, cfg, c=kw.get("c"), bias=kw.get("bias"))
    return out


def _check(out, a, b, **kw):
    ref = matmul_reference(a, b, out_dtype=torch.float64, **{k: v for k, v in kw.items()
                                                               if k in ("alpha", "beta", "c", "bias", "activation")})
    assert not torch.isnan(out).any(), "NaN left in the output: an element was not written"
    err = relative_error(out, ref)
    assert err <= TOL, f"relative error {err:.2e} > {TOL:.0e}"


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", [(256, 256, 256), (1000, 1004, 1000), (129, 260, 136), (300, 131, 4105),
                                   (7, 9, 33), (300, 700, 500), (132, 68, 20)])
def test_fma_heuristic_config_matches_float64(layout, shape):
    a, b = _operands(*shape, layout)
    _check(_run(a, b, CONFIGS[0]), a, b)


@pytest.mark.parametrize("cfg", CONFIGS[1:], ids=lambda c: c.short().replace(" ", "-"))
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", [(1000, 1004, 1000), (300, 131, 4105)])
def test_fma_other_configs_match_float64(cfg, layout, shape):
    a, b = _operands(*shape, layout)
    _check(_run(a, b, cfg), a, b)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 4096, 4096), (4096, 1, 513), (5, 3, 1), (17, 33, 16)])
def test_fma_kernel_tiny_shapes(shape):
    a, b = _operands(*shape, "NN")
    _check(_run(a, b, CONFIGS[0]), a, b)


def test_fma_kernel_k0_gives_beta_c_and_empty_m():
    a, b = _operands(33, 65, 0, "NN")
    c = torch.rand(33, 65, device="cuda")
    out = _run(a, b, CONFIGS[0], beta=0.5, c=c)
    torch.testing.assert_close(out, 0.5 * c)
    a, b = _operands(0, 65, 17, "NN")
    assert tilecraft.matmul(a, b).shape == (0, 65)


@pytest.mark.parametrize("bcast", ["none", "a", "b"])
def test_fma_kernel_batched(bcast):
    a, b = _operands(130, 70, 45, "NT", batch=3)
    if bcast == "a":
        a = a[:1].expand(3, -1, -1)
    elif bcast == "b":
        b = b[:1].expand(3, -1, -1)
    _check(_run(a, b, CONFIGS[3]), a, b)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_fma_kernel_epilogue(activation):
    a, b = _operands(200, 136, 300, "TN")
    c = torch.rand(136, 200, device="cuda").t()  # column-major C
    bias = torch.rand(136, device="cuda")
    kw = {"alpha": 1.5, "beta": -0.75, "c": c, "bias": bias, "activation": activation}
    _check(_run(a, b, CONFIGS[0], **kw), a, b, **kw)


def test_fma_kernel_split_k_runs_the_epilogue_in_the_reduce():
    a, b = _operands(64, 96, 2000, "NN")
    bias = torch.rand(96, device="cuda")
    cfg = GemmConfig("fma", 64, 128, 16, num_warps=4, num_stages=3, warps_m=2, split_k=4)
    _check(_run(a, b, cfg, bias=bias, activation="relu"), a, b, bias=bias, activation="relu")


def test_fma_kernel_propagates_inf_and_nan():
    a, b = _operands(150, 140, 70, "NN")
    a[3, 5] = float("inf")
    b[7, 11] = float("nan")
    out = _run(a, b, CONFIGS[0])
    ref = a.double() @ b.double()
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    fin = torch.isfinite(ref)
    assert relative_error(out[fin], ref[fin]) <= TOL


def test_matmul_dispatches_fp32_to_the_fma_kernel(monkeypatch):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    a, b = _operands(1024, 1024, 1024, "NN")
    spec = ops.validate(a, b)
    cfg = ops.choose_config(a, b, spec)
    assert cfg.kernel == "fma", cfg
    _check(tilecraft.matmul(a, b), a, b)


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_fma_kernel_vec4_masks_at_group_edges(layout):
    """Extents that are multiples of 4 but not of the tile (the grouped masks' edge: 4-element groups
    past M, N or K must be zero-filled, not read), on a view whose rows are 4-element multiples, and on
    an offset view (base not 16-byte aligned: the 4-byte copies)."""
    a, b = _operands(68, 132, 36, layout)
    plan = ops.launch_plan(a, b, torch.empty(68, 132, device="cuda"), ops.validate(a, b), CONFIGS[0])
    assert plan[-1].constexprs["VEC4"]
    _check(_run(a, b, CONFIGS[0]), a, b)
    big = torch.rand(70, 40, device="cuda")
    a2 = big[1:69, 1:37]  # rows of 40 elements, base one element in: not 16-byte aligned
    b2 = torch.rand(36, 132, device="cuda")
    plan = ops.launch_plan(a2, b2, torch.empty(68, 132, device="cuda"), ops.validate(a2, b2), CONFIGS[0])
    assert not plan[-1].constexprs["VEC4"]
    _check(_run(a2, b2, CONFIGS[0]), a2, b2)


@pytest.mark.parametrize("shape,layout", [((64, 4096, 4096), "NN"), ((1000, 1000, 1000), "NT"), ((16, 4096, 4096), "NN"),
                                          ((1, 4096, 4096), "TT"), ((512, 512, 512), "TN"), ((100, 300, 2000), "NN"),
                                          ((27, 4096, 4100), "NT")])
def test_heuristic_split_k_matches_float64(shape, layout, monkeypatch):
    """The products the heuristic splits along K (``tuning.gemm.split_to_fill``; M <= 16 on the pointer
    kernel's 16- or 32-row tiles for M <= 32): poisoned output, against float64."""
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    a, b = _operands(*shape, layout)
    cfg = ops.choose_config(a, b, ops.validate(a, b))
    assert cfg.split_k > 1, cfg
    out = _run(a, b, cfg)
    _check(out, a, b)
    _check(tilecraft.matmul(a, b), a, b)


@pytest.mark.parametrize("bcast", ["none", "b"])
def test_fma_mn_copy_batched(bcast):
    """``mn_copy``: K-contiguous operands copied MN-contiguous before the launch, with a batch and a
    broadcast B (stride 0: copied once), against float64."""
    cfg = GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2, mn_copy="ab")
    a, _ = _operands(70, 90, 100, "NN", batch=3)
    b = (torch.rand(90, 100, device="cuda") * 2 - 1).t()  # K-contiguous
    b = b.expand(3, 100, 90) if bcast == "b" else (torch.rand(3, 90, 100, device="cuda") * 2 - 1).mT
    _check(_run(a, b, cfg), a, b)


def test_heuristic_copies_k_contiguous_b(monkeypatch):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    a, b = _operands(3000, 520, 600, "TT")
    cfg = ops.choose_config(a, b, ops.validate(a, b))
    assert cfg.mn_copy == "b", cfg
    _check(tilecraft.matmul(a, b), a, b)

