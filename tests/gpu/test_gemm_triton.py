"""The Triton GEMM kernels of ``tilecraft.kernels.gemm`` (not the Gluon one: test_gemm_gluon.py)
compiled for the GPU and checked against the float64 reference, on a GPU machine:

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_gemm_triton.py

What is covered, each result against ``tilecraft.reference.gemm.matmul_reference`` with
``relative_error`` and the per-dtype bounds of the CPU tests (``TOLERANCES``: bf16 1e-2, fp16 2e-3,
tf32 3e-3, fp32 ieee and fp32-accurate 1e-5, fp64 1e-12, fp8 e4m3 with a bf16 output 1e-2 as in
tests/ops/test_gemm.py; int8 exact), every pinned launch writing into an output poisoned first (NaN,
int32 -2**31 + 1), so an element no kernel writes fails:

* the pointer kernel (``matmul_kernel``, any CUDA GPU) for bf16, fp16, tf32, fp32 ieee (FMA),
  fp32-accurate (3xTF32), fp64, int8 and fp8 e4m3 (per-row and per-tensor scales), and the sm90
  TMA kernel (``matmul_tma_kernel``) for bf16, fp16, tf32, 3xTF32 (as ``tl.dot`` tf32x3, and
  ``presplit``), int8 and fp8 (it refuses fp64 and fp32 FMA: the pointer kernel runs those), each
  in the four layouts NN/NT/TN/TT (transposed views), at 1000x1004x1000 (unaligned rows: the TMA
  kernel's K-major copies), 129x260x136 and 300x260x4104 (K not a multiple of BLOCK_K);
* odd and tiny shapes (M or N of 1, 7, 8; K of 7, 16, 33, 129; 1x4096x4096) on both kernels;
* M = 0, N = 0 and a batch of 0 (empty results) and K = 0 (``act(beta * C + bias)``: on sm90 the
  config choice takes the pointer kernel, the TMA kernel refuses it);
* split-K: the pointer kernel's third grid axis and the TMA kernel's split work units, both summed by
  ``splitk_reduce_kernel``, which runs the epilogue; batched inputs with a broadcast A or B;
* inf and NaN in a row of A and a column of B: exactly the rows/columns IEEE says are inf or NaN;
* the fused epilogue (alpha, beta * C with C row-major / column-major / pitched, bias, the four
  activations, scales, int32 outputs, a NaN C that beta = 0 must not read) on both kernels,
  including the TMA kernel's epilogue in column halves (128x256 tiles);
* ``tilecraft.matmul``'s own choice on sm90 (heuristic: ``TILECRAFT_TUNE=0``, empty cache) for a few
  shapes, whatever kernel it picks.

Tests with several layouts or shapes check all of them and report every failing sub-case at once.
Skipped without a CUDA GPU (tests/gpu/conftest.py), the TMA tests and the dispatch test without sm90.
"""
from __future__ import annotations

import math
import zlib

import pytest
import torch

import tilecraft
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

#: where the tensors live (a scratch run may point it at "cpu" to run the same code in the interpreter)
DEVICE = "cuda"


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton GEMM kernels compiled for a GPU")
sm90_only = pytest.mark.skipif(not _sm90(), reason="the TMA kernel (wgmma, TMA descriptors) is sm90 only")

LAYOUTS = ["NN", "NT", "TN", "TT"]
#: operand name -> (dtype, validate kwargs, relative-error bound at the default output type)
NAMES: dict[str, tuple[torch.dtype, dict, float]] = {
    "bf16": (torch.bfloat16, {}, TOLERANCES["bf16"]),
    "fp16": (torch.float16, {}, TOLERANCES["fp16"]),
    "tf32": (torch.float32, {"precision": "tf32"}, TOLERANCES["tf32"]),
    "fp32": (torch.float32, {}, TOLERANCES["fp32-ieee"]),  # precision None: "ieee" (FMA)
    "fp32-accurate": (torch.float32, {"precision": "fp32-accurate"}, TOLERANCES["fp32-accurate"]),
    "fp64": (torch.float64, {}, TOLERANCES["fp64"]),
    "int8": (torch.int8, {}, TOLERANCES["int8"]),
    # against the exact product of the fp8 values, bf16 output (tests/ops/test_gemm.py::test_fp8_scales)
    "fp8_e4m3": (torch.float8_e4m3fn, {}, 1e-2),
}
#: the bound an output type's rounding sets (the larger of it and the operands' bound applies)
OUT_TOL = {torch.bfloat16: TOLERANCES["bf16"], torch.float16: TOLERANCES["fp16"],
           torch.float32: TOLERANCES["fp32-ieee"], torch.float64: TOLERANCES["fp64"], torch.int32: 0.0}
POISON_INT32 = -(2**31) + 1

# Pinned configurations (GemmConfig(kernel, block_m, block_n, block_k, group_m, num_warps, num_stages,
# split_k)): those of benchmarks/gemm_tune.py's GPU correctness grid, and the heuristic's where noted.
POINTER = {
    "bf16": GemmConfig("pointer", 128, 128, 64, 8, 8, 4),
    "fp16": GemmConfig("pointer", 64, 64, 32, 8, 4, 3),
    "tf32": GemmConfig("pointer", 64, 64, 32, 8, 4, 3),
    "fp32": GemmConfig("pointer", 64, 128, 32, 8, 4, 3),  # the heuristic's fp32 FMA config
    "fp32-accurate": GemmConfig("pointer", 64, 64, 32, 8, 4, 3),
    "fp64": GemmConfig("pointer", 64, 128, 16, 8, 4, 3),  # the heuristic's sm90 fp64 (DMMA) config
    "int8": GemmConfig("pointer", 64, 64, 64, 8, 4, 3),
    "fp8_e4m3": GemmConfig("pointer", 64, 64, 64, 8, 4, 3),
}
TMA = {
    "bf16": GemmConfig("tma", 128, 128, 64, 8, 8, 4),
    "fp16": GemmConfig("tma", 128, 256, 64, 8, 8, 3),
    "tf32": GemmConfig("tma", 128, 128, 32, 8, 8, 3),
    "fp32-accurate": GemmConfig("tma", 128, 128, 64, 8, 8, 2),  # the heuristic's 3xTF32 config
    "int8": GemmConfig("tma", 128, 256, 128, 8, 8, 3),
    "fp8_e4m3": GemmConfig("tma", 128, 256, 128, 8, 8, 3),
}
PRESPLIT = GemmConfig("tma", 128, 128, 32, 8, 8, 3, presplit=True)  # 3xTF32 on operands split first
#: (operand name, config) of the TMA kernel's tests
TMA_CASES = [(n, c) for n, c in TMA.items()] + [("fp32-accurate", PRESPLIT)]
TMA_IDS = [n if not c.presplit else "3xtf32-presplit" for n, c in TMA_CASES]

SHAPES = [(1000, 1004, 1000), (129, 260, 136), (300, 260, 4104)]
ODD_SHAPES = [(1, 7, 129), (8, 4, 16), (7, 1, 33), (129, 1000, 7), (1, 4096, 4096), (1000, 129, 1000)]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _gen(*key) -> torch.Generator:
    """A generator on the device, seeded from the test's own key (crc32: the same in every process,
    unlike ``hash`` of a string)."""
    return torch.Generator(device=DEVICE).manual_seed(zlib.crc32(repr(key).encode()))


def _rand(shape, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Uniform [-1, 1) (int8: [-128, 128), int32: [-1000, 1000)) in ``dtype``."""
    if dtype == torch.int8:
        return torch.randint(-128, 128, tuple(shape), device=DEVICE, generator=gen, dtype=torch.int8)
    if dtype == torch.int32:
        return torch.randint(-1000, 1000, tuple(shape), device=DEVICE, generator=gen, dtype=torch.int32)
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return (torch.rand(tuple(shape), device=DEVICE, generator=gen, dtype=wide) * 2 - 1).to(dtype)


def _operands(name: str, layout: str, m: int, n: int, k: int, gen: torch.Generator, batch: int | None = None):
    """A (M, K) and B (K, N), or batched, in ``layout`` ("T": a transposed view of a contiguous tensor)."""
    dtype = NAMES[name][0]
    lead = (batch,) if batch is not None else ()
    a = _rand((*lead, k, m), dtype, gen).transpose(-1, -2) if layout[0] == "T" else _rand((*lead, m, k), dtype, gen)
    b = _rand((*lead, n, k), dtype, gen).transpose(-1, -2) if layout[1] == "T" else _rand((*lead, k, n), dtype, gen)
    return a, b


def _scales(kind: str | None, m: int, n: int, gen: torch.Generator) -> dict:
    """scale_a / scale_b (float32): "row" one per row of A and one for B, "rowcol" (M, 1) and (1, N),
    "tensor" one value each."""
    if kind is None:
        return {}
    if kind == "tensor":
        return {"scale_a": torch.tensor(0.5, device=DEVICE), "scale_b": torch.tensor([2.0], device=DEVICE)}
    if kind == "row":
        return {"scale_a": torch.rand(m, device=DEVICE, generator=gen) + 0.5,
                "scale_b": torch.tensor(1.5, device=DEVICE)}
    return {"scale_a": torch.rand(m, 1, device=DEVICE, generator=gen) + 0.5,
            "scale_b": torch.rand(1, n, device=DEVICE, generator=gen) + 0.5}


def _c(layout: str, m: int, n: int, dtype: torch.dtype, gen: torch.Generator, batch: int | None = None):
    """C (M, N) (or batched): "row" contiguous, "col" a transposed view, "pitch" a row stride past N
    and an offset, "nan" all NaN (for beta = 0, which must not read it)."""
    lead = (batch,) if batch is not None else ()
    if layout == "col":
        return _rand((*lead, n, m), dtype, gen).transpose(-1, -2)
    if layout == "pitch":
        return _rand((*lead, m, n + 24), dtype, gen)[..., 5:n + 5]
    if layout == "nan":
        return torch.full((*lead, m, n), float("nan"), dtype=dtype, device=DEVICE)
    return _rand((*lead, m, n), dtype, gen)


def _poisoned(spec: ops.Spec) -> torch.Tensor:
    fill = float("nan") if spec.out_dtype.is_floating_point else POISON_INT32
    return torch.full(spec.out_shape, fill, dtype=spec.out_dtype, device=DEVICE)


def _run(a, b, cfg: GemmConfig, **kw):
    """``cfg`` launched into a poisoned output: (out, spec, names of the kernels launched, in order)."""
    spec = ops.validate(a, b, **kw)
    out = _poisoned(spec)
    plan = ops.launch_plan(a, b, out, spec, cfg, kw.get("c"), kw.get("bias"), kw.get("scale_a"), kw.get("scale_b"))
    for launch in plan:
        launch.run()
    return out, spec, [launch.kernel.__name__ for launch in plan]


def _ref(a, b, spec: ops.Spec, **kw) -> torch.Tensor:
    wide = torch.float64 if spec.out_dtype.is_floating_point else torch.int64
    kw = {k: v for k, v in kw.items() if k not in ("out_dtype", "precision")}
    return matmul_reference(a, b, out_dtype=wide, **kw)


def _tol(name: str, out_dtype: torch.dtype) -> float:
    return max(NAMES[name][2], OUT_TOL[out_dtype])


def _compare(out: torch.Tensor, ref: torch.Tensor, tol: float) -> str | None:
    """None when ``out`` matches (int: exactly; float: relative error <= tol, with NaN/inf in the same
    places, so poison left behind fails), else what is wrong."""
    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    if tol == 0:
        diff = out.to(torch.int64) != ref
        return None if not diff.any() else f"{int(diff.sum())} of {diff.numel()} elements differ (exact expected)"
    err = relative_error(out, ref)
    if err <= tol:
        return None
    nan_left = int(torch.isnan(out).sum()) - int(torch.isnan(ref).sum())
    return f"relative error {err:.3e} > {tol:g}" + (f" ({nan_left} NaN more than the reference)" if nan_left else "")


def _check(a, b, cfg: GemmConfig, name: str, *, main: str, extra: tuple[str, ...] = (), **kw) -> str | None:
    """Run ``cfg`` into a poisoned output and compare with float64; also that ``main`` (and each of
    ``extra``) was among the kernels launched."""
    out, spec, names = _run(a, b, cfg, **kw)
    for kernel in (main, *extra):
        if kernel not in names:
            return f"launched {names}, not {kernel}"
    return _compare(out, _ref(a, b, spec, **kw), _tol(name, spec.out_dtype))


def _collect(bad: list[str], label: str, fn) -> None:
    """Run one sub-case; record its failure (a message or an exception) and go on with the next."""
    try:
        msg = fn()
    except Exception as exc:  # noqa: BLE001 - every sub-case is reported, then the test fails
        text = str(exc).strip().splitlines()
        msg = f"{type(exc).__name__}: {text[0][:300] if text else ''}"
    if msg:
        bad.append(f"{label}: {msg}")


def _needs_fp8(name: str) -> None:
    if name.startswith("fp8") and torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs sm89 or newer")


# ---------------------------------------------------------------------------------------------
# every dtype, every layout, odd shapes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(POINTER))
def test_pointer_kernel_dtypes_layouts(name):
    """``matmul_kernel`` (pointer loads, any strides) for every operand type, in every layout (NN,
    NT, TN, TT) at every shape of ``SHAPES``; fp8 with a scale per row of A and one for B."""
    _needs_fp8(name)
    cfg, bad = POINTER[name], []
    for layout in LAYOUTS:
        for m, n, k in SHAPES:
            gen = _gen("pointer", name, layout, m, n, k)
            a, b = _operands(name, layout, m, n, k, gen)
            kw = {**NAMES[name][1], **_scales("row" if name.startswith("fp8") else None, m, n, gen)}
            _collect(bad, f"{name} {layout} {m}x{n}x{k}",
                     lambda: _check(a, b, cfg, name, main="matmul_kernel", **kw))
    assert not bad, "\n".join(bad)


@sm90_only
@pytest.mark.parametrize("name,cfg", TMA_CASES, ids=TMA_IDS)
def test_tma_kernel_dtypes_layouts(name, cfg):
    """``matmul_tma_kernel`` (persistent, TMA descriptors, wgmma) for every type it takes, in every
    layout at every shape of ``SHAPES`` and 8x4x16 (smaller than one tile): operands whose rows are
    not 16-byte aligned, and 8/32-bit MN-major ones, are copied K-major inside the call (the count
    is in the label of a failure)."""
    cfg_kernels = ("tf32_split_kernel",) if cfg.presplit else ()
    bad = []
    for layout in LAYOUTS:
        for m, n, k in SHAPES + [(8, 4, 16)]:
            gen = _gen("tma", name, cfg.presplit, layout, m, n, k)
            a, b = _operands(name, layout, m, n, k, gen)
            kw = {**NAMES[name][1], **_scales("row" if name.startswith("fp8") else None, m, n, gen)}
            copies = ops.tma_plan(a, b, ops.DTYPE_NAMES[a.dtype])[0]
            _collect(bad, f"{name} {layout} {m}x{n}x{k} ({copies} copies)",
                     lambda: _check(a, b, cfg, name, main="matmul_tma_kernel", extra=cfg_kernels, **kw))
    assert not bad, "\n".join(bad)


FLAT = GemmConfig("tma", 128, 256, 64, 8, 8, 3, flatten=True)  # short K off the Gluon kernel (the heuristic)


@sm90_only
@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_tma_flattened_loop(name):
    """The TMA kernel with its tile and K loops flattened (the heuristic's choice for 16-bit products
    with K <= 1024 that the Gluon kernel does not take): every layout, a tile smaller than the
    block, K not a multiple of the K step, more tiles than SMs (each program runs several tiles, the
    next one's loads issued during the epilogue), and with C, bias and an activation."""
    bad = []
    for layout in LAYOUTS:
        for m, n, k in [(8, 4, 16), (129, 260, 136), (4096, 2304, 200), (1000, 1004, 1000)]:
            gen = _gen("flat", name, layout, m, n, k)
            a, b = _operands(name, layout, m, n, k, gen)
            _collect(bad, f"{name} {layout} {m}x{n}x{k}",
                     lambda: _check(a, b, FLAT, name, main="matmul_tma_kernel", **NAMES[name][1]))
    m, n, k = 2304, 4096, 520
    gen = _gen("flat-epilogue", name)
    a, b = _operands(name, "TN", m, n, k, gen)
    kw = {**NAMES[name][1], "alpha": -0.5, "beta": 1.5, "activation": "gelu", "c": _c("row", m, n, torch.float32, gen),
          "bias": _rand((n,), NAMES[name][0], gen)}
    _collect(bad, f"{name} TN {m}x{n}x{k} with C, bias, gelu",
             lambda: _check(a, b, FLAT, name, main="matmul_tma_kernel", **kw))
    assert not bad, "\n".join(bad)


ODD_CASES = [("pointer", "bf16"), ("pointer", "fp32"), ("pointer", "int8"), ("pointer", "fp64"),
             ("tma", "bf16"), ("tma", "tf32"), ("tma", "int8")]


@pytest.mark.parametrize("kernel,name", ODD_CASES, ids=[f"{k}-{n}" for k, n in ODD_CASES])
def test_odd_and_tiny_shapes(kernel, name):
    """M or N of 1, 7, 8, 129; K of 7, 16, 33, 129, 1000, 4096 (a GEMV-like 1x4096x4096); the layout
    changes from shape to shape."""
    if kernel == "tma" and not _sm90():
        pytest.skip("the TMA kernel is sm90 only")
    cfg = POINTER[name] if kernel == "pointer" else TMA[name]
    main = "matmul_kernel" if kernel == "pointer" else "matmul_tma_kernel"
    bad = []
    for i, (m, n, k) in enumerate(ODD_SHAPES):
        layout = LAYOUTS[i % 4]
        gen = _gen("odd", kernel, name, m, n, k)
        a, b = _operands(name, layout, m, n, k, gen)
        kw = dict(NAMES[name][1])
        _collect(bad, f"{kernel} {name} {layout} {m}x{n}x{k}", lambda: _check(a, b, cfg, name, main=main, **kw))
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------
# empty dimensions, K = 0, split-K, batches
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bf16", "fp32", "int8"])
def test_empty_dimensions_and_k0(name, monkeypatch, tmp_path):
    """M = 0, N = 0, batch 0: empty results of the right shape and type. K = 0: act(beta * C + bias),
    pinned on the pointer kernel (poisoned output) and through ``tilecraft.matmul``; on sm90 the
    config choice is the pointer kernel, and a TMA config is refused (no empty TMA dimension)."""
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    dtype, kw0, _ = NAMES[name]
    gen = _gen("empty", name)
    out_dtype = ops.OUT_DTYPES[ops.DTYPE_NAMES[dtype]][0]
    for a_shape, b_shape, out_shape in (((0, 136), (136, 260), (0, 260)), ((129, 136), (136, 0), (129, 0)),
                                        ((0, 129, 136), (136, 260), (0, 129, 260))):
        a, b = _rand(a_shape, dtype, gen), _rand(b_shape, dtype, gen)
        got = tilecraft.matmul(a, b, **kw0)
        assert tuple(got.shape) == out_shape and got.dtype == out_dtype, (a_shape, b_shape)
        spec = ops.validate(a, b, **kw0)
        assert tuple(ops.compute(a, b, spec, cfg=POINTER[name]).shape) == out_shape
    m, n = 129, 260
    a, b = _rand((m, 0), dtype, gen), _rand((0, n), dtype, gen)
    if out_dtype == torch.int32:
        kw = dict(kw0, alpha=3, beta=-2, c=_c("col", m, n, torch.int32, gen), bias=_rand((n,), torch.int32, gen),
                  activation="relu")
    else:
        kw = dict(kw0, alpha=1.5, beta=-0.75, c=_c("col", m, n, torch.float32, gen), bias=_rand((n,), out_dtype, gen),
                  activation="gelu")
    spec = ops.validate(a, b, **kw)
    ref = _ref(a, b, spec, **kw)
    tol = _tol(name, out_dtype)
    # (a tl.dot of int8 or fp8 needs BLOCK_K >= 32 on the GPU)
    for cfg in (POINTER[name], GemmConfig("pointer", 32, 32, 32, 4, 4, 1),
                GemmConfig("pointer", 64, 64, 32, 8, 4, 3, 2)):
        out, _, names = _run(a, b, cfg, **kw)
        assert names == ["matmul_kernel"], names  # split-K needs some K: one launch
        assert _compare(out, ref, tol) is None, (cfg.short(), _compare(out, ref, tol))
    got = tilecraft.matmul(a, b, **kw)
    assert _compare(got, ref, tol) is None, _compare(got, ref, tol)
    if _sm90():
        # fp32 ieee: the FMA kernel (it takes K = 0 too: tests/gpu/test_gemm_fma.py)
        assert ops.choose_config(a, b, spec, tune_now=False).kernel == ("fma" if name == "fp32" else "pointer")
        assert not ops.problem_of(a, b, spec).tma_ok
    if name in TMA:  # refused before any launch
        with pytest.raises(ValueError, match="K > 0"):
            ops.launch(a, b, _poisoned(spec), spec, TMA[name], kw.get("c"), kw.get("bias"))


SPLIT_CASES = [("pointer", "bf16", 2), ("pointer", "fp32", 3), ("pointer", "int8", 4), ("pointer", "fp64", 2),
               ("pointer", "fp8_e4m3", 3), ("tma", "bf16", 2), ("tma", "tf32", 3), ("tma", "int8", 2)]


@pytest.mark.parametrize("kernel,name,split", SPLIT_CASES, ids=[f"{k}-{n}-split{s}" for k, n, s in SPLIT_CASES])
def test_split_k(kernel, name, split):
    """Split-K (partials in a workspace, summed in a fixed order by ``splitk_reduce_kernel``, which
    runs the epilogue): a plain NT product with K = 4104 (a K tail in the last split), and a batch
    of 2 in TN with alpha, beta * C, bias and an activation."""
    if kernel == "tma" and not _sm90():
        pytest.skip("the TMA kernel is sm90 only")
    _needs_fp8(name)
    base = POINTER[name] if kernel == "pointer" else TMA[name]
    cfg = GemmConfig(**{**base.as_dict(), "split_k": split})
    main = "matmul_kernel" if kernel == "pointer" else "matmul_tma_kernel"
    dtype, kw0, _ = NAMES[name]
    out_dtype = ops.OUT_DTYPES[ops.DTYPE_NAMES[dtype]][0]
    bad = []
    gen = _gen("split", kernel, name, split)
    m, n, k = 129, 260, 4104
    a, b = _operands(name, "NT", m, n, k, gen)
    kw = {**kw0, **_scales("tensor" if name.startswith("fp8") else None, m, n, gen)}
    _collect(bad, f"NT {m}x{n}x{k}", lambda: _check(a, b, cfg, name, main=main, extra=("splitk_reduce_kernel",), **kw))
    bt, m, n, k = 2, 64, 264, 1000
    a2, b2 = _operands(name, "TN", m, n, k, gen, batch=bt)
    if out_dtype == torch.int32:
        epi = dict(alpha=3, beta=-2, c=_c("row", m, n, torch.int32, gen, batch=bt), bias=_rand((n,), torch.int32, gen),
                   activation="relu")
    else:
        c_dtype = torch.float64 if out_dtype == torch.float64 else torch.float32
        epi = dict(alpha=0.5, beta=-1.5, c=_c("col", m, n, c_dtype, gen, batch=bt), bias=_rand((n,), out_dtype, gen),
                   activation="silu")
    kw2 = {**kw0, **epi, **_scales("rowcol" if name.startswith("fp8") else None, m, n, gen)}
    _collect(bad, f"TN batch {bt} {m}x{n}x{k} with epilogue",
             lambda: _check(a2, b2, cfg, name, main=main, extra=("splitk_reduce_kernel",), **kw2))
    assert not bad, "\n".join(bad)


BATCH_CASES = [("pointer", "bf16"), ("pointer", "fp32"), ("pointer", "int8"),
               ("tma", "bf16"), ("tma", "tf32"), ("tma", "int8")]


@pytest.mark.parametrize("kernel,name", BATCH_CASES, ids=[f"{k}-{n}" for k, n in BATCH_CASES])
def test_batched_and_broadcast(kernel, name):
    """(3, M, K) @ (3, K, N) in TN and NT, (3, M, K) @ (K, N) (one B for every entry) and
    (1, M, K) @ (3, K, N) (a batch of 1 broadcasts); the output is (3, M, N)."""
    if kernel == "tma" and not _sm90():
        pytest.skip("the TMA kernel is sm90 only")
    cfg = POINTER[name] if kernel == "pointer" else TMA[name]
    main = "matmul_kernel" if kernel == "pointer" else "matmul_tma_kernel"
    kw = dict(NAMES[name][1])
    m, n, k = 129, 264, 136
    gen = _gen("batch", kernel, name)
    bad = []
    for layout in ("TN", "NT"):
        a, b = _operands(name, layout, m, n, k, gen, batch=3)
        _collect(bad, f"{layout} 3x{m}x{n}x{k}", lambda: _check(a, b, cfg, name, main=main, **kw))
    a, b2 = _operands(name, "NN", m, n, k, gen, batch=3)[0], _operands(name, "NT", m, n, k, gen)[1]
    _collect(bad, "broadcast B", lambda: _check(a, b2, cfg, name, main=main, **kw))
    a1, b = _operands(name, "TN", m, n, k, gen, batch=1)[0], _operands(name, "NN", m, n, k, gen, batch=3)[1]
    _collect(bad, "broadcast A (batch 1)", lambda: _check(a1, b, cfg, name, main=main, **kw))
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------
# inf and NaN
# ---------------------------------------------------------------------------------------------
INF_CASES = [("pointer", "bf16", None), ("pointer", "fp16", None), ("pointer", "tf32", None),
             ("pointer", "fp32", None), ("pointer", "fp64", None),
             ("tma", "bf16", None), ("tma", "fp16", None), ("tma", "tf32", None), ("tma", "fp32-accurate", PRESPLIT)]


@pytest.mark.parametrize("kernel,name,cfg", INF_CASES,
                         ids=[f"{k}-{n if c is None else '3xtf32-presplit'}" for k, n, c in INF_CASES])
def test_inf_nan_propagate(kernel, name, cfg):
    """A[3, 7] = +inf, A[5, 9] = NaN, B[4, 13] = NaN, B > 0 elsewhere: row 3 is +inf, row 5 and
    column 13 are NaN (row 3 there too), every other element finite and within the bound."""
    if kernel == "tma" and not _sm90():
        pytest.skip("the TMA kernel is sm90 only")
    cfg = cfg or (POINTER[name] if kernel == "pointer" else TMA[name])
    main = "matmul_kernel" if kernel == "pointer" else "matmul_tma_kernel"
    kw = dict(NAMES[name][1])
    m, n, k = 256, 264, 520
    bad = []
    for layout in ("NT", "TN"):
        gen = _gen("inf", kernel, name, layout)
        a, b = _operands(name, layout, m, n, k, gen)
        b.copy_(b.abs() + 0.5)  # through the view: B > 0, so row 3 is +inf, not inf - inf
        a[3, 7], a[5, 9], b[4, 13] = float("inf"), float("nan"), float("nan")
        rows = torch.arange(m, device=DEVICE)[:, None]
        cols = torch.arange(n, device=DEVICE)[None, :]
        want_nan = (rows == 5) | (cols == 13)
        want_inf = (rows == 3) & (cols != 13)

        def one(a=a, b=b, want_nan=want_nan, want_inf=want_inf):
            out, spec, names = _run(a, b, cfg, **kw)
            if main not in names:
                return f"launched {names}"
            ref = _ref(a, b, spec, **kw)
            if not (torch.equal(torch.isnan(ref), want_nan) and torch.equal(torch.isposinf(ref), want_inf)):
                return "the float64 reference itself has NaN/inf elsewhere than row 3, row 5, column 13"
            if not torch.equal(torch.isnan(out), want_nan):
                return (f"NaN at {int(torch.isnan(out).sum())} elements, expected {int(want_nan.sum())} "
                        "(row 5, column 13)")
            if not torch.equal(torch.isposinf(out), want_inf) or torch.isneginf(out).any():
                return f"+inf at {int(torch.isposinf(out).sum())} elements, expected {int(want_inf.sum())} (row 3)"
            return _compare(out, ref, _tol(name, spec.out_dtype))
        _collect(bad, f"{name} {layout}", one)
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------
# the fused epilogue
# ---------------------------------------------------------------------------------------------
# (id, operand name, layout, out_dtype, alpha, beta, (C layout, C dtype) or None, bias dtype or None,
#  activation, scales, kernels)
EPI_CASES = [
    ("bf16-gelu", "bf16", "NN", None, -1.5, 0.75, ("col", torch.float32), torch.bfloat16, "gelu", None,
     ("pointer", "tma")),
    ("fp16-fp32out-silu", "fp16", "TN", torch.float32, 2.0, -1.0, ("pitch", torch.float32), torch.float32, "silu",
     None, ("pointer", "tma")),
    ("fp16-gelu_tanh", "fp16", "NT", None, 0.5, 1.0, ("row", torch.float16), torch.float16, "gelu_tanh", None,
     ("pointer", "tma")),
    ("tf32-relu", "tf32", "TT", None, 0.5, 1.25, ("pitch", torch.float32), torch.float32, "relu", None,
     ("pointer", "tma")),
    ("int8-int32-relu", "int8", "NT", None, 3, -2, ("col", torch.int32), torch.int32, "relu", None,
     ("pointer", "tma")),
    ("int8-scaled-bf16out", "int8", "NN", torch.bfloat16, 0.25, 0.5, ("row", torch.bfloat16), torch.bfloat16,
     "gelu_tanh", "rowcol", ("pointer", "tma")),
    ("fp8-scaled-silu", "fp8_e4m3", "NT", None, 1.5, -0.5, ("pitch", torch.float32), torch.bfloat16, "silu", "row",
     ("pointer", "tma")),
    ("bf16-unread-nan-c", "bf16", "TT", None, 1.0, 0.0, ("nan", torch.bfloat16), torch.bfloat16, "relu", None,
     ("pointer", "tma")),
    ("fp32-gelu", "fp32", "TN", None, 0.75, -1.5, ("col", torch.float32), torch.float32, "gelu", None, ("pointer",)),
    ("fp64-relu", "fp64", "NT", None, 1 / 3, math.pi, ("col", torch.float64), torch.float64, "relu", None,
     ("pointer",)),
    ("3xtf32-presplit-gelu", "fp32-accurate", "NN", None, 0.5, 2.0, ("row", torch.float32), torch.float32, "gelu",
     None, ("tma",)),
]
EPI_PARAMS = [(kernel, case) for case in EPI_CASES for kernel in case[-1]]


@pytest.mark.parametrize("kernel,case", EPI_PARAMS, ids=[f"{k}-{c[0]}" for k, c in EPI_PARAMS])
def test_epilogue(kernel, case):
    """act(alpha * scale_a * scale_b * (A @ B) + beta * C + bias) in the kernels' epilogue: C
    row-major, column-major or pitched (fp32 or the output type), bias, the activations, int32
    outputs with integer alpha/beta, scales on int8 and fp8; the TMA kernel's 128x256 configs
    (fp16, int8, fp8) run it in column halves."""
    if kernel == "tma" and not _sm90():
        pytest.skip("the TMA kernel is sm90 only")
    cid, name, layout, out_dtype, alpha, beta, c_spec, bias_dtype, act, scales, _ = case
    _needs_fp8(name)
    if kernel == "pointer":
        cfg, main = POINTER[name], "matmul_kernel"
    else:
        cfg, main = (PRESPLIT if "presplit" in cid else TMA[name]), "matmul_tma_kernel"
    m, n, k = 300, 264, 520
    gen = _gen("epilogue", kernel, cid)
    a, b = _operands(name, layout, m, n, k, gen)
    kw = {**NAMES[name][1], "alpha": alpha, "beta": beta, "activation": act, **_scales(scales, m, n, gen)}
    if out_dtype is not None:
        kw["out_dtype"] = out_dtype
    if c_spec is not None:
        kw["c"] = _c(c_spec[0], m, n, c_spec[1], gen)
    if bias_dtype is not None:
        kw["bias"] = _rand((n,), bias_dtype, gen)
    msg = _check(a, b, cfg, name, main=main, **kw)
    assert msg is None, f"{kernel} {cid}: {msg}"


# ---------------------------------------------------------------------------------------------
# tilecraft.matmul's own choice on sm90
# ---------------------------------------------------------------------------------------------
DISPATCH = [
    ("bf16", "NN", (1000, 1004, 1000), None, {"bias": torch.bfloat16, "activation": "gelu"}),
    ("bf16", "NT", (64, 4096, 4096), None, {}),
    ("bf16", "TN", (129, 260, 136), 3, {}),
    ("bf16", "TN", (4096, 4096, 512), None, {}),  # a weight gradient's short K: the Gluon kernel
    ("fp16", "NN", (4096, 2304, 520), None, {"bias": torch.float16}),  # short K, fp16 bias: the Gluon kernel
    ("fp16", "NT", (512, 4096, 4096), None, {"bias": torch.float16, "activation": "gelu"}),  # Gluon 128x128 epf
    ("int8", "NT", (300, 264, 4104), None, {}),
    ("tf32", "TT", (1000, 1000, 1000), None, {}),
    ("fp32-accurate", "NT", (300, 260, 4104), None, {}),
    ("fp8_e4m3", "NT", (256, 264, 520), None, {"scales": "rowcol"}),
    ("fp64", "NN", (129, 260, 136), None, {}),
]


@sm90_only
@pytest.mark.parametrize("name,layout,shape,batch,extra", DISPATCH,
                         ids=[f"{d[0]}-{d[1]}-{'x'.join(map(str, d[2]))}" + (f"-b{d[3]}" if d[3] else "")
                              for d in DISPATCH])
def test_matmul_dispatch_sm90(name, layout, shape, batch, extra, monkeypatch, tmp_path):
    """``tilecraft.matmul`` with its own configuration (the heuristic: tuning off, an empty cache):
    whatever kernel it picks (Gluon included), the result matches float64 with no NaN."""
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    _needs_fp8(name)
    m, n, k = shape
    gen = _gen("dispatch", name, layout, shape, batch)
    a, b = _operands(name, layout, m, n, k, gen, batch=batch)
    kw = {**NAMES[name][1], **_scales(extra.get("scales"), m, n, gen)}
    if "bias" in extra:
        kw["bias"] = _rand((n,), extra["bias"], gen)
    if "activation" in extra:
        kw["activation"] = extra["activation"]
    spec = ops.validate(a, b, **kw)
    cfg = ops.choose_config(a, b, spec, tune_now=False, bias=kw.get("bias"), scale_a=kw.get("scale_a"),
                            scale_b=kw.get("scale_b"))
    got = tilecraft.matmul(a, b, **kw)
    assert got.dtype == spec.out_dtype and tuple(got.shape) == spec.out_shape and got.is_contiguous()
    msg = _compare(got, _ref(a, b, spec, **kw), _tol(name, spec.out_dtype))
    assert msg is None, f"matmul chose {cfg.short()}: {msg}"


@pytest.mark.parametrize("name", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("bm,bn,bk,split", [(1, 64, 128, 8), (1, 128, 64, 4), (4, 64, 32, 1)])
def test_matrix_vector_tiles(name, bm, bn, bk, split):
    """BLOCK_M below 16 (broadcast multiply and sum over K, no tl.dot) compiled for the GPU, M = 1 and 5,
    K with a tail, against float64 into poisoned outputs."""
    dtype, kw0, _ = NAMES[name]
    gen = _gen("gemv", name, bm)
    for m, n, k in ((1, 4096, 4096), (5, 1000, 1027)):
        a, b = _rand((m, k), dtype, gen), _rand((k, n), dtype, gen)
        cfg = GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=4, num_stages=4, split_k=split)
        out, spec, _ = _run(a, b, cfg, **kw0)
        assert _compare(out, _ref(a, b, spec, **kw0), _tol(name, spec.out_dtype)) is None, (m, n, k, cfg.short())


def _sweep_cases(count: int, seed: int = 28) -> list[tuple]:
    """``count`` pseudo-random 16-bit products (the same list in every process): shapes from the tile
    rules' regimes (small M, M <= 128, prefill rows, a few waves; N that fills the SMs in 128s, 192s or
    256s, or ends inside a tile), every layout, fp32 results now and then, and epilogues."""
    import random

    rnd = random.Random(seed)
    ms = [1, 7, 16, 33, 64, 96, 128, 200, 256, 384, 512, 777, 1024, 2048]
    ns = [8, 136, 264, 360, 1000, 3072, 4096, 6144, 11008, 12288, 14336]
    ks = [16, 136, 512, 1000, 1024, 2048, 4096]
    epis = [(), ("bias",), ("bias", "gelu"), ("silu",), ("alpha", "c"), ("c", "bias", "gelu_tanh")]
    out = []
    for _ in range(count):
        m, n, k = rnd.choice(ms), rnd.choice(ns), rnd.choice(ks)
        if m * n * k > 2048 * 6144 * 4096:  # bounded for the float64 reference
            k = 512
        out.append((rnd.choice(["bf16", "fp16"]), rnd.choice(LAYOUTS), (m, n, k),
                    torch.float32 if rnd.random() < 0.25 else None, rnd.choice(epis)))
    return out


SWEEP = _sweep_cases(64)


@sm90_only
@pytest.mark.parametrize("name,layout,shape,out_dtype,epi", SWEEP,
                         ids=[f"{d[0]}-{d[1]}-{'x'.join(map(str, d[2]))}" + ("-o32" if d[3] else "") + "".join(
                             f"-{e}" for e in d[4]) for d in SWEEP])
def test_matmul_dispatch_sweep_sm90(name, layout, shape, out_dtype, epi, monkeypatch, tmp_path):
    """Whatever configuration the heuristic gives each of 64 random 16-bit products (Gluon tiles of 128,
    192 and 256 columns, 64 x 192, the TMA and pointer kernels, split-K, small M), ``tilecraft.matmul``
    writes every element (its result is NaN-poisoned before the kernels run) and matches float64."""
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    monkeypatch.setenv("TILECRAFT_REPLAY", "0")
    real = ops._new_output
    monkeypatch.setattr(ops, "_new_output", lambda spec, device: real(spec, device).fill_(float("nan")))
    m, n, k = shape
    gen = _gen("sweep", name, layout, shape, out_dtype, epi)
    a, b = _operands(name, layout, m, n, k, gen)
    kw: dict = {"out_dtype": out_dtype} if out_dtype else {}
    if "bias" in epi:
        kw["bias"] = _rand((n,), out_dtype or NAMES[name][0], gen)
    if "c" in epi:
        kw.update(c=_rand((m, n), out_dtype or NAMES[name][0], gen), beta=-0.5)
    if "alpha" in epi:
        kw["alpha"] = 1.5
    act = [e for e in epi if e in ("gelu", "gelu_tanh", "silu")]
    if act:
        kw["activation"] = act[0]
    spec = ops.validate(a, b, **kw)
    cfg = ops.choose_config(a, b, spec, tune_now=False, c=kw.get("c"), bias=kw.get("bias"))
    got = tilecraft.matmul(a, b, **kw)
    assert got.dtype == spec.out_dtype and tuple(got.shape) == spec.out_shape
    msg = _compare(got, _ref(a, b, spec, **kw), _tol(name, spec.out_dtype))
    assert msg is None, f"matmul chose {cfg.short()}: {msg}"
