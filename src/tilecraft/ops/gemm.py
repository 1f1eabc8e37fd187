"""``tilecraft.matmul``: validation, dtype rules, config choice (heuristic or tuned) and launch of the
GEMM kernels in ``tilecraft.kernels.gemm``.

``out = act(alpha * scale_a[m] * scale_b[n] * (A @ B) + beta * C + bias[n])``

Data types (operands must share one dtype; ``out_dtype`` default first):

============ ===================== ========================= =================================
operands     accumulate            out_dtype                 ``precision``
============ ===================== ========================= =================================
fp16, bf16   fp32                  same, fp16, bf16, fp32    None
fp32         fp32                  fp32, fp16, bf16          "ieee" (default: FMA), "tf32",
                                                             "fp32-accurate" (3xTF32; bf16x6 on
                                                             AMD), or a tl.dot name: "tf32x3",
                                                             "bf16x3", "bf16x6"
fp64         fp64 (DMMA on sm80+)  fp64                      None or "ieee"
int8         int32 (exact)         int32, fp32, fp16, bf16   None
fp8 e4m3/e5m2 fp32                 bf16, fp16, fp32          None
============ ===================== ========================= =================================

Scales (fp8, and int8 with a float ``out_dtype``): float32 tensors, ``scale_a`` with 1 value (per
tensor) or M (per row: shape (M,) or (M, 1)), ``scale_b`` with 1 or N (per column: (N,) or (1, N)).
Integer outputs take integer ``alpha``/``beta`` (|x| < 2**24) and wrap like int32 arithmetic.

Which kernel runs (:func:`choose_config` says, for given inputs): on sm90 the persistent TMA kernel
for fp16/bf16/fp8/int8/tf32/3xTF32 products of some size; it reads operands as they are when their
rows are 16-byte aligned with a unit stride (and, for 8- and 32-bit types, K-major), and otherwise
an aligned K-major copy made inside the call (:func:`tma_plan`). The pointer kernel, which takes any
strides, runs the rest: small M (a stream over B), K = 0, fp32 FMA, fp64, the bf16 splits, thin
unaligned products, other GPUs and the interpreter. The choice is recorded by the benchmarks.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import time
from dataclasses import dataclass

import torch

from tilecraft.hardware.device import l2_bytes as device_l2_bytes
from tilecraft.kernels import gemm as _k
from tilecraft.ops.launch import (PDL_ENV, PLAIN_TENSORS, KernelLaunch, ReplayCache, eager_direct, empty, environ_key,
                                  environ_names, gluon_descriptor, refuse_forward_ad, remember, replay_enabled,
                                  run_kernel, run_op, runtime_arg_names, signature, with_pdl)
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.measure import graph_time_ms as _graph_time_ms  # noqa: F401 - the tuner's timer (tests patch it here)
from tilecraft.tuning.measure import say as _say
from tilecraft.tuning import cache as _cache
from tilecraft.tuning.gemm import (
    CLUSTER_ENV,
    gluon_batch_fit,
    gluon_batch_rows,
    SHARED_LIMIT,
    GemmConfig,
    Problem,
    clusters_enabled,
    config_space,
    heuristic,
    shape_key,
    shared_bytes,
    tune,
)

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
    torch.int8: "int8", torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2",
}
OUT_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "fp16": (torch.float16, torch.bfloat16, torch.float32),
    "bf16": (torch.bfloat16, torch.float16, torch.float32),
    "fp32": (torch.float32, torch.float16, torch.bfloat16),
    "fp64": (torch.float64,),
    "int8": (torch.int32, torch.float32, torch.float16, torch.bfloat16),
    "fp8_e4m3": (torch.bfloat16, torch.float16, torch.float32),
    "fp8_e5m2": (torch.bfloat16, torch.float16, torch.float32),
}
PRECISIONS = ("ieee", "tf32", "fp32-accurate", "tf32x3", "bf16x3", "bf16x6")
ACTIVATIONS = tuple(k for k in _k.ACTIVATIONS if k is not None)
_SCALED = ("fp8_e4m3", "fp8_e5m2", "int8")
#: the magnitudes a finite nonzero alpha or beta may have (each reaches the kernels as two float32 halves)
ALPHA_RANGE = (1e-30, 1e30)
# wgmma reads tf32, fp8 and int8 operands from shared memory only K-major (A row-major, B
# column-major: the "NT" GEMM); the TMA path makes K-major copies of other layouts.
_KMAJOR_ONLY = ("fp8_e4m3", "fp8_e5m2", "int8", "fp32")


@dataclass(frozen=True)
class Spec:
    """A validated call: shapes, dtypes and the epilogue, normalised."""

    batch: int
    m: int
    n: int
    k: int
    out_shape: tuple[int, ...]
    dtype: str
    out_dtype: torch.dtype
    precision: str | None  # the tl.dot input precision (None: the operand type's own)
    alpha: float
    beta: float
    has_c: bool
    has_bias: bool
    scale_a: int  # 0 none, 1 per tensor, 2 per row
    scale_b: int  # 0 none, 1 per tensor, 2 per column
    activation: str | None
    bias_rows: bool = False  # the bias runs along M (a transposed call's: C's columns are C^T's rows)


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def fp32_accurate_precision(amd: bool) -> str:
    """The tl.dot split behind ``precision="fp32-accurate"``: 3xTF32 on NVIDIA, bf16x6 on AMD."""
    return "bf16x6" if amd else "tf32x3"


def _dot_precision(dtype: str, precision: str | None, device_type: str) -> str:
    if dtype == "fp32":
        p = "ieee" if precision is None else precision
        if p not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS} for float32 operands, got {precision!r}")
        if p == "fp32-accurate":
            return fp32_accurate_precision(bool(torch.version.hip) and device_type == "cuda")
        return p
    if precision not in (None, "ieee") or (precision == "ieee" and dtype != "fp64"):
        raise ValueError(f"precision={precision!r} applies to float32 operands only (and 'ieee' to fp64); "
                         f"{dtype} operands take precision=None")
    return None  # tl.dot's default: the operands' own tensor-core (or DMMA) form


def _scale_mode(s: object, name: str, extent: int, what: str, device: torch.device) -> int:
    if s is None:
        return 0
    if not isinstance(s, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(s).__name__}")
    if s.dtype != torch.float32:
        raise TypeError(f"{name} must be float32, got {s.dtype}")
    if s.device != device:
        raise ValueError(f"{name} is on {s.device}, the operands on {device}")
    if s.numel() == 1 and s.dim() <= 1:
        return 1
    shapes = [(extent,), (extent, 1) if what == "row" else (1, extent)]
    if tuple(s.shape) not in shapes:
        raise ValueError(f"{name} must hold one value (shape () or (1,)) or one per {what} "
                         f"(shape {shapes[0]} or {shapes[1]}), got shape {tuple(s.shape)}")
    if s.dim() == 1 and s.stride(0) != 1 or s.dim() == 2 and s.stride(0 if what == "row" else 1) != 1:
        raise ValueError(f"{name} must be contiguous, got strides {s.stride()}")
    return 2


def _check_alpha_beta(alpha: float, beta: float, integer_out: bool) -> None:
    """The rules on alpha's and beta's values. :func:`validate` skips them while ``torch.compile``
    runs (``math.isfinite`` is not traceable: with ``dynamic=True, fullgraph=True`` Dynamo fails on
    it even for constants); the registered op's implementation validates again when it runs, outside
    the trace, so a bad value still raises before any launch."""
    for nm, v in (("alpha", alpha), ("beta", beta)):
        try:
            float(v)
        except OverflowError:
            raise ValueError(f"{nm} is too large for a floating-point number: {v!r:.40}...") from None
    if integer_out:
        for nm, v in (("alpha", alpha), ("beta", beta)):
            if not math.isfinite(v) or v != int(v) or abs(v) >= 2**24:
                raise ValueError(f"{nm} must be an integer below 2**24 in magnitude for an int32 output, got {v!r}")
    for nm, v in (("alpha", alpha), ("beta", beta)):
        # The kernels take each as two float32 halves (48 bits): finite values outside float32's
        # normal range would overflow (inf + (-inf) = NaN) or lose their low half.
        if math.isfinite(v) and v != 0 and not ALPHA_RANGE[0] <= abs(v) <= ALPHA_RANGE[1]:
            raise ValueError(f"{nm}={v!r} is out of range: a finite nonzero {nm} must have magnitude in "
                             f"[{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}] (inf and NaN propagate as IEEE says)")


def _check_dense(t: torch.Tensor, name: str) -> None:
    if t.layout != torch.strided:
        raise TypeError(f"{name} has layout {t.layout}; tilecraft takes dense (strided) tensors")


def validate(a: object, b: object, *, out_dtype: torch.dtype | None = None, alpha: float = 1.0,
             beta: float = 0.0, c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
             activation: str | None = None, precision: str | None = None,
             scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None) -> Spec:
    """Every check ``matmul`` makes before it launches anything; returns the normalised call."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        _check_dense(t, name)
        if t.dim() not in (2, 3):
            raise ValueError(f"{name} must be 2D (rows, cols) or 3D (batch, rows, cols), got shape {tuple(t.shape)}")
        if t.dtype not in DTYPE_NAMES:
            raise TypeError(f"{name} has dtype {t.dtype}; supported: {', '.join(str(d) for d in DTYPE_NAMES)}")
        if t.device.type not in ("cuda", "cpu", "meta"):
            raise ValueError(f"{name} is on device {t.device}; tilecraft runs on CUDA/ROCm GPUs (and CPU)")
        if any(s < 0 for s in t.stride()):
            raise ValueError(f"{name} has negative strides {t.stride()}")
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    if a.device != b.device:
        raise ValueError(f"a is on {a.device}, b on {b.device}: both must be on one device")
    if a.dtype != b.dtype:
        raise TypeError(f"a is {a.dtype}, b is {b.dtype}: operands must share one dtype (cast one; "
                        "there is no implicit promotion rule)")
    dtype = DTYPE_NAMES[a.dtype]
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)} (K={k}), b is {tuple(b.shape)} (K={k2})")
    ba = a.shape[0] if a.dim() == 3 else 1
    bb = b.shape[0] if b.dim() == 3 else 1
    if ba != bb and 1 not in (ba, bb):
        raise ValueError(f"batch sizes differ: a has {ba}, b has {bb} (equal, or one of them 1)")
    batch = ba if bb == 1 else bb  # a batch of 1 broadcasts (also against a batch of 0)
    out_shape = (batch, m, n) if 3 in (a.dim(), b.dim()) else (m, n)

    allowed = OUT_DTYPES[dtype]
    if out_dtype is None:
        out_dtype = allowed[0]
    if not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"out_dtype must be a torch.dtype or None, got {out_dtype!r}")
    if out_dtype not in allowed:
        raise TypeError(f"{dtype} operands give out_dtype one of {[str(d) for d in allowed]}, got {out_dtype}")
    dot_precision = _dot_precision(dtype, precision, a.device.type)
    integer_out = not out_dtype.is_floating_point

    if not _is_number(alpha) or not _is_number(beta):
        raise TypeError(f"alpha and beta must be numbers, got {alpha!r} and {beta!r}")
    if not torch.compiler.is_compiling():
        _check_alpha_beta(alpha, beta, integer_out)
    if beta != 0 and c is None:
        raise ValueError(f"beta={beta} needs c (out = alpha * A @ B + beta * c)")
    for name, t in (("c", c), ("bias", bias)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
        _check_dense(t, name)
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device}, the operands on {a.device}")
        ok = (torch.int32,) if integer_out else tuple(dict.fromkeys((out_dtype, torch.float32)))
        if out_dtype == torch.float64:
            ok = (torch.float64,)
        if t.dtype not in ok:
            raise TypeError(f"{name} has dtype {t.dtype}; with out_dtype {out_dtype} it must be one of "
                            f"{[str(d) for d in ok]}")
        if any(s < 0 for s in t.stride()):
            raise ValueError(f"{name} has negative strides {t.stride()}")
    if c is not None and tuple(c.shape) not in (out_shape, out_shape[-2:]):
        raise ValueError(f"c has shape {tuple(c.shape)}; expected the output's {out_shape}"
                         + (f" or {out_shape[-2:]}" if len(out_shape) == 3 else ""))
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"bias must have shape (N,) = ({n},), got {tuple(bias.shape)}")
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"activation must be None or a str, got {type(activation).__name__}")
    if activation not in _k.ACTIVATIONS:
        raise ValueError(f"activation must be None or one of {ACTIVATIONS}, got {activation!r}")
    if integer_out and activation not in (None, "relu"):
        raise ValueError(f"an int32 output takes activation None or 'relu', got {activation!r}")
    if (scale_a is not None or scale_b is not None):
        if dtype not in _SCALED:
            raise ValueError(f"scale_a/scale_b apply to fp8 and int8 operands, not {dtype}")
        if integer_out:
            raise ValueError("scales need a float out_dtype (int8 with scales: pass out_dtype=torch.bfloat16, ...)")
    sa = _scale_mode(scale_a, "scale_a", m, "row", a.device)
    sb = _scale_mode(scale_b, "scale_b", n, "column", a.device)
    return Spec(batch, m, n, k, out_shape, dtype, out_dtype, dot_precision, float(alpha), float(beta),
                c is not None and beta != 0, bias is not None, sa, sb, activation)


# ----------------------------------------------------------------------------------------------
# devices and layouts
# ----------------------------------------------------------------------------------------------
def triton_on_cpu() -> bool:
    """True when the Triton interpreter is active (TRITON_INTERPRET=1 was set before import)."""
    return type(_k.matmul_kernel).__name__ == "InterpretedFunction"


@functools.cache
def _device_facts(index: int) -> tuple[str, int, str, dict]:
    """(arch family, SM count, device name, versions) of a CUDA/ROCm device."""
    from tilecraft.hardware.device import software_versions

    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        arch = "cdna"
    else:
        arch = "sm90" if props.major == 9 else "sm80"
    return arch, props.multi_processor_count, props.name, software_versions()


def _facts(device: torch.device) -> tuple[str, int, str, dict]:
    if device.type != "cuda":
        return "interpreter", 4, "interpreter", {}
    return _device_facts(device.index if device.index is not None else torch.cuda.current_device())


def _kmajor(t: torch.Tensor, k_dim: int) -> bool | None:
    """True when t's K dimension has unit stride, False when its other matrix dimension does,
    None when neither (a TMA descriptor needs a unit innermost stride)."""
    other = -1 if k_dim == -2 else -2
    if t.stride(k_dim) == 1 or t.shape[k_dim] == 1:
        return True
    if t.stride(other) == 1 or t.shape[other] == 1:
        return False
    return None


def _aligned_for_tma(t: torch.Tensor, kmajor: bool, k_dim: int) -> bool:
    size = t.element_size()
    if t.data_ptr() % 16:
        return False
    outer = (-2 if k_dim == -1 else -1) if kmajor else k_dim
    strides = [t.stride(outer)] + ([t.stride(0)] if t.dim() == 3 and t.shape[0] > 1 and t.stride(0) else [])
    return not any((s * size) % 16 for s in strides)


def _tma_direct(t: torch.Tensor, k_dim: int, dtype: str) -> bool | None:
    """How the TMA kernel can read t as it is: True K-major, False MN-major, None not at all
    (no unit stride, unaligned rows, or an MN-major operand of a type wgmma reads K-major only)."""
    km = _kmajor(t, k_dim)
    if km is None or (dtype in _KMAJOR_ONLY and not km) or not _aligned_for_tma(t, km, k_dim):
        return None
    return km


def tma_plan(a: torch.Tensor, b: torch.Tensor, dtype: str) -> tuple[int, bool, bool]:
    """(copies, a_kmajor, b_kmajor) for the TMA kernel: how many operands it must first copy into
    an aligned K-major buffer (:func:`aligned_kmajor_copy`), and the layout it then reads.

    A TMA descriptor needs a 16-byte aligned base, a unit innermost stride and every other stride a
    multiple of 16 bytes; wgmma reads 32- and 8-bit operands (tf32, fp8, int8) K-major only. An
    operand that breaks a rule is copied (one pass over it, inside the call and its timing).

    Rows 16- but not 128-byte aligned are read as they are, though the kernel read the same values
    35% faster from 128-byte aligned rows (H200, bf16 NN 3000x7000x5000: 486 -> 655 TFLOP/s, 1000^3:
    183 -> 252; gemm-explore-f49c9d4): copying both operands of 3000x7000x5000 inside the call (torch's
    copies) brought it to 369 TFLOP/s (gemm-remeasure-0d2713b), so no such copy is made."""
    ak, bk = _tma_direct(a, -1, dtype), _tma_direct(b, -2, dtype)
    return (ak is None) + (bk is None), True if ak is None else ak, True if bk is None else bk


def tma_layout(a: torch.Tensor, b: torch.Tensor, dtype: str) -> tuple[bool, bool, bool]:
    """(ok, a_kmajor, b_kmajor): whether the TMA kernel reads both operands as they are (no copy)."""
    copies, ak, bk = tma_plan(a, b, dtype)
    return copies == 0, ak, bk


def aligned_kmajor_copy(t: torch.Tensor, k_dim: int) -> torch.Tensor:
    """A copy of t with K contiguous and rows padded to 128 bytes, or to 16 for rows under 512
    bytes (the view has t's shape; the padding is never read: the TMA descriptor's bounds stop at
    K). 128-byte rows: bf16 997x1009x1013 with both operands copied 97 -> 111 TFLOP/s against
    16-byte rows (H200, gemm-remeasure-0d2713b against gemm-llm-followup-296fd54). A broadcast
    batch (stride 0) stays one matrix."""
    if t.dim() == 3 and t.stride(0) == 0:
        t = t[:1]
    k = t.shape[k_dim]
    per = max(1, (128 if k * t.element_size() >= 512 else 16) // t.element_size())
    kp = -(-max(k, 1) // per) * per
    if k_dim == -1:
        buf = empty((*t.shape[:-1], kp), dtype=t.dtype, device=t.device)
        run_op(torch.Tensor.copy_, buf[..., :k], t)
        return buf[..., :k]
    buf = empty((*t.shape[:-2], t.shape[-1], kp), dtype=t.dtype, device=t.device)
    run_op(torch.Tensor.copy_, buf[..., :k], t.transpose(-1, -2))
    return buf[..., :k].transpose(-1, -2)


def problem_of(a: torch.Tensor, b: torch.Tensor, spec: Spec, arch: str | None = None,
               sms: int | None = None) -> Problem:
    """What the config choice depends on; ``arch`` ("sm90", "sm80", "cdna") and ``sms`` stand
    for the device's own (to choose for a GPU that is not here)."""
    dev_arch, dev_sms, _, _ = _facts(a.device)
    arch, sms = arch or dev_arch, sms or dev_sms
    copies, ak, bk = tma_plan(a, b, spec.dtype)
    # K = 0 (out = act(beta * C + bias)) runs the pointer kernel: a TMA descriptor has no empty dimension
    ok = arch == "sm90" and tma_dtype_ok(spec) and spec.k > 0
    rows_128 = all(d is None or _row_pitch_bytes(t, d, kd) % 128 == 0
                   for t, kd, d in ((a, -1, _tma_direct(a, -1, spec.dtype)), (b, -2, _tma_direct(b, -2, spec.dtype))))
    g_ok = arch == "sm90" and gluon_ok(a, b, spec)
    f_ok = arch in ("sm90", "sm80") and fma_refusal(a, b, spec) is None
    regs = _mn_regs_plan(a, b, spec, GemmConfig("gluon", mn_regs=True)) if g_ok else None
    return Problem(spec.m, spec.n, spec.k, spec.batch, spec.dtype, spec.precision, arch, ok, ak, bk, sms,
                   tma_copies=copies, gluon_ok=g_ok, rows_128=rows_128, fma_ok=f_ok,
                   b_kcontig=f_ok and _unit(b, -2) and not _unit(b, -1),
                   mn_regs_ok=regs is not None, mn_regs_swap=regs == "swap",
                   epilogue=epilogue_kind(spec), out_itemsize=_out_itemsize(spec))


def _out_itemsize(spec: Spec) -> int:
    """Bytes per result where the output type is not the operands' default one (else 0)."""
    default = OUT_DTYPES[spec.dtype][0] if spec.dtype in OUT_DTYPES else spec.out_dtype
    return 0 if spec.out_dtype == default else spec.out_dtype.itemsize


def epilogue_kind(spec: Spec) -> str:
    """What the epilogue reads, for the config choice: "c" (beta * C), "bias" (a bias, no C),
    "light" (alpha, scales or an activation only) or "" (none)."""
    if spec.has_c:
        return "c"
    if spec.has_bias:
        return "bias"
    light = spec.alpha != 1.0 or spec.activation is not None or spec.scale_a or spec.scale_b
    return "light" if light else ""


def gluon_ok(a: torch.Tensor, b: torch.Tensor, spec: Spec) -> bool:
    """Whether the sm90 Gluon kernel (``tilecraft.kernels.gemm_gluon``) can take the call: CUDA
    (or ``meta``, for :func:`target_plan`) operands, fp16/bf16 (any of their output types), int8
    with an int32 output, or fp32 with tf32 or 3xTF32 and an fp32 output; alpha, ``beta * c``,
    bias and the activation run in its epilogue (scales do not: those calls run the Triton
    kernels), and output rows the TMA can store (a multiple of 16 bytes).
    16-bit operands are read K- or MN-major as they are; operands it cannot read (8/32-bit
    MN-major, unaligned) are copied first, as for the TMA kernel; the 3xTF32 operands are always
    split into K-major hi/lo buffers. Batched products (3D operands) as :func:`gluon_batch_refusal`
    allows, and then only configurations :func:`gluon_batch_fit` passes. Anything else runs the
    Triton kernels."""
    if a.device.type not in ("cuda", "meta") or bool(torch.version.hip):
        return False
    if (a.dim() == 3 or b.dim() == 3) and gluon_batch_refusal(a, b, spec) is not None:
        return False
    plain = not spec.scale_a and not spec.scale_b
    kind = ((spec.dtype == "int8" and spec.out_dtype == torch.int32)
            or (spec.dtype == "fp32" and spec.precision in ("tf32", "tf32x3") and spec.out_dtype == torch.float32)
            or spec.dtype in ("fp16", "bf16"))
    out_size = spec.out_dtype.itemsize
    return plain and kind and (spec.n * out_size) % 16 == 0 and spec.k > 0 and spec.m > 0


def _flat_rows(t: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(2D view, rows per batch entry) of an operand view (R, C) or (batch, R, C) as the Gluon kernel
    reads it by one 2D TMA descriptor: a batch flattened to (batch * R, C) (R rows an entry), a
    matrix or a broadcast batch (stride 0, or a batch of 1) as one (R, C) matrix (0 rows an entry);
    None where the batch stride is not R row strides (no such view)."""
    if t.dim() == 2:
        return t, 0
    if t.shape[0] == 1 or t.stride(0) == 0:
        return t[0], 0
    try:
        return t.view(-1, t.shape[2]), t.shape[1]
    except RuntimeError:
        return None


def gluon_batch_refusal(a: torch.Tensor, b: torch.Tensor, spec: Spec) -> str | None:
    """Why the Gluon kernel cannot take a batched product whatever the configuration, or None. It
    stacks the batch along M in one launch (``STACK`` in :func:`tilecraft.kernels.gemm_gluon.matmul_ws_kernel`),
    so each operand must be one 2D TMA view: a batch whose entries lie one after another at R row
    strides (or broadcast); it takes no 3xTF32 or scales there. Operands it would copy
    first (unaligned, 8/32-bit MN-major) are copied into such a batch."""
    if spec.precision == "tf32x3":
        return "it takes no 3xTF32 with a batch"
    for name, t, k_dim in (("a", a, -1), ("b", b, -2)):
        if _tma_direct(t, k_dim, spec.dtype) is None:
            continue  # copied first, into a contiguous batch
        if _flat_rows(_unit_last(t)) is None:
            return f"{name}'s batch entries are not one after another (strides {tuple(t.stride())})"
    return None


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    """t, or its transpose, with the unit stride last (the view a TMA descriptor walks)."""
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.transpose(-1, -2)


def fma_refusal(a3: torch.Tensor, b3: torch.Tensor, spec: Spec) -> str | None:
    """Why the Gluon FMA kernel (``tilecraft.kernels.gemm_fma``) cannot take a product (2D or batched), or
    None: fp32 operands with precision "ieee" on an NVIDIA GPU of compute capability 8.0 or more
    (``cp.async``; the interpreter cannot run Gluon), each operand with a unit stride along one of
    its two matrix dimensions."""
    if spec.dtype != "fp32" or spec.precision != "ieee":
        return f"it computes fp32 products with precision 'ieee', not {spec.dtype} with {spec.precision!r}"
    dev = a3.device
    if dev.type == "meta":
        pass
    elif dev.type != "cuda" or torch.version.hip:
        return "it runs on NVIDIA GPUs only (the interpreter cannot run Gluon)"
    elif torch.cuda.get_device_capability(dev)[0] < 8:
        return "it needs compute capability 8.0 or more (cp.async)"
    if not (_unit(a3, -1) or _unit(a3, -2)):
        return "A has no unit stride along M or K"
    if not (_unit(b3, -1) or _unit(b3, -2)):
        return "B has no unit stride along K or N"
    return None


def _unit(t: torch.Tensor, dim: int) -> bool:
    """Whether ``t`` is contiguous along ``dim`` (a dimension of extent 1 or less counts)."""
    return t.stride(dim) == 1 or t.shape[dim] <= 1


def fma_copies(cfg: GemmConfig, a3: torch.Tensor, b3: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cfg.mn_copy``: the K-contiguous operands it names copied MN-contiguous (made here, before the
    launch, as the TMA kernel's copies are), so the FMA kernel reads them as in the TN layout, its
    fastest. Operands already MN-contiguous are left as they are."""
    if cfg.mn_copy not in ("", "a", "b", "ab"):
        raise ValueError(f"mn_copy must be '', 'a', 'b' or 'ab', not {cfg.mn_copy!r}")
    if "a" in cfg.mn_copy and _unit(a3, 2) and not _unit(a3, 1):
        a3 = a3.mT.contiguous().mT
    if "b" in cfg.mn_copy and _unit(b3, 1) and not _unit(b3, 2):
        # (K, N) rows, N contiguous; a broadcast batch (stride 0) stays one matrix
        b3 = b3[:1].contiguous().expand_as(b3) if b3.stride(0) == 0 and b3.shape[0] > 1 else b3.contiguous()
    return a3, b3


def fma_layout(cfg: GemmConfig, a3: torch.Tensor, b3: torch.Tensor) -> dict:
    """The FMA kernel's layout constexprs for ``cfg``: warps along M, lanes along M (4: 8 along N),
    the cp.async ring depth and the operands' contiguous dimensions."""
    warps_m = cfg.warps_m or max(1, cfg.num_warps // 2)
    a_k, b_n = _unit(a3, 2), _unit(b3, 2)
    m, k, n = a3.shape[1], a3.shape[2], b3.shape[2]
    vec4 = (all(x % 4 == 0 for x in (a3.stride(0), b3.stride(0), a3.stride(1) if a_k else a3.stride(2),
                                      b3.stride(1) if b_n else b3.stride(2), k if a_k else m, n if b_n else k))
            and (a3.device.type == "meta" or (a3.data_ptr() % 16 == 0 and b3.data_ptr() % 16 == 0)))
    return {"WARPS_M": warps_m, "TPW_M": 4, "STAGES": max(2, cfg.num_stages),
            "A_KCONTIG": a_k, "B_NCONTIG": b_n, "VEC4": vec4}


def tma_dtype_ok(spec: Spec) -> bool:
    """wgmma has no fp64 or FMA form, and the bf16 splits stay on the pointer kernel."""
    return not (spec.dtype == "fp64" or (spec.dtype == "fp32" and spec.precision not in ("tf32", "tf32x3")))


# ----------------------------------------------------------------------------------------------
# launch
# ----------------------------------------------------------------------------------------------
MAX_GRID_BATCH = 65535
_TL = {"fp32": _k.tl.float32, "fp64": _k.tl.float64, "int32": _k.tl.int32}


def _acc_types(spec: Spec) -> tuple[object, object, torch.dtype]:
    if spec.dtype == "fp64":
        return _TL["fp64"], _TL["fp64"], torch.float64
    if spec.dtype == "int8":
        return _TL["int32"], (_TL["int32"] if not spec.out_dtype.is_floating_point else _TL["fp32"]), torch.int32
    return _TL["fp32"], _TL["fp32"], torch.float32


@functools.lru_cache(maxsize=64)
def _split(x: float) -> tuple[float, float]:
    """x as hi + lo, two float32 values (inf and NaN: hi = x, lo = 0, so they propagate as IEEE says)."""
    hi = float(torch.tensor(x, dtype=torch.float32))
    if not math.isfinite(hi):
        return hi, 0.0
    return hi, float(torch.tensor(x - hi, dtype=torch.float32))


def unit_dims_outermost(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` viewed with each size-1 dimension's stride set past its other dimensions' extent. Such a
    stride addresses nothing, but a launch specializes a stride of 1 as contiguity: A of shape (1, K)
    as the transpose of a (K, 1) tensor has strides (1, 1), and the pointer kernel then read A's K run
    in 2-byte loads along a masked M (scalar loads, fewer stages; M=1 TT at 0.51x torch, 2026-11-30)."""
    if t is None or 1 not in t.shape:
        return t
    extent = max([1] + [n * abs(s) for n, s in zip(t.shape, t.stride()) if n > 1])
    strides = [extent if n == 1 else s for n, s in zip(t.shape, t.stride())]
    return t if strides == list(t.stride()) else t.as_strided(t.shape, strides)


def _as3d(t: torch.Tensor, batch: int) -> torch.Tensor:
    if t.dim() == 2:
        t = t.unsqueeze(0)
    return t.expand(batch, *t.shape[1:]) if t.shape[0] != batch else t


def _epilogue_args(spec: Spec, out3: torch.Tensor, c: torch.Tensor | None, bias: torch.Tensor | None,
                   scale_a: torch.Tensor | None, scale_b: torch.Tensor | None) -> tuple[tuple, dict]:
    dummy = out3
    c3 = _as3d(c, spec.batch) if spec.has_c else dummy
    ah, al = _split(spec.alpha)
    bh, bl = _split(spec.beta)
    args = (c3.stride(0), c3.stride(1), c3.stride(2), 0, 0, 0, ah, al, bh, bl)
    # the kernels read bias with a unit stride: a strided (N,) view is copied (N elements)
    ptrs = (c3, bias.contiguous() if spec.has_bias else dummy, scale_a if spec.scale_a else dummy,
            scale_b if spec.scale_b else dummy)
    _, epi, _ = _acc_types(spec)
    has_bias = 2 if spec.has_bias and spec.bias_rows else spec.has_bias  # 2: along M (the shared _epilogue)
    constexprs = {"EPI": epi, "HAS_ALPHA": spec.alpha != 1.0, "HAS_C": spec.has_c, "HAS_BIAS": has_bias,
                      "SCALE_A": spec.scale_a, "SCALE_B": spec.scale_b, "ACTIVATION": _k.ACTIVATIONS[spec.activation]}
    return ptrs, (args, constexprs)


def _options(cfg: GemmConfig, device: torch.device) -> dict:
    opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    if cfg.maxnreg and not torch.version.hip:
        opts["maxnreg"] = cfg.maxnreg
    if cfg.waves_per_eu and torch.version.hip and device.type == "cuda":
        opts["waves_per_eu"] = cfg.waves_per_eu
    return opts


def _dot_input_precision(spec: Spec, a: torch.Tensor) -> str | None:
    """The interpreter's tl.dot knows only tf32/tf32x3/ieee and computes all of them in fp32:
    the bf16 splits run as "ieee" there."""
    if a.device.type == "cpu" and spec.precision in ("bf16x3", "bf16x6"):
        return "ieee"
    return spec.precision


def _upcast(spec: Spec, a: torch.Tensor) -> bool:
    """The interpreter's tl.dot misreads bf16 tiles (Triton 3.6): widen them to fp32 there."""
    return spec.dtype == "bf16" and a.device.type == "cpu"


def _needs_offs64(*ts: torch.Tensor) -> bool:
    return any(max((n - 1) * s for n, s in zip(t.shape, t.stride())) >= 2**31 - 2**20 for t in ts if t.numel())


def transposed_call(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, spec: Spec, cfg: GemmConfig,
                    c: torch.Tensor | None, bias: torch.Tensor | None, scale_a: torch.Tensor | None,
                    scale_b: torch.Tensor | None) -> tuple:
    """A ``cfg.transposed`` call as the product it runs, C^T = B^T A^T: (B^T, A^T, out^T, its spec, ``cfg`` without
    the flag, C^T, the bias, scale_b, scale_a). The output and C are used through their transposed views (the
    pointer kernel reads and stores any strides); a per-row scale of A is a per-column scale of C^T, and the
    reverse; the bias, along C's columns, runs along C^T's rows (``Spec.bias_rows``), which the kernels with the
    shared Triton epilogue (pointer, split-K reduce, TMA) take: ``ValueError`` for a bias on another kernel.
    A call that is not transposed comes back as it is."""
    if not cfg.transposed:
        return a, b, out, spec, cfg, c, bias, scale_a, scale_b
    if spec.has_bias and cfg.kernel not in ("pointer", "tma"):
        raise ValueError(f"a transposed configuration ({cfg.short()}) takes a bias on the pointer or TMA kernel "
                         "only: the bias runs along the rows of the product it runs")
    spec_t, cfg_t = transposed_spec(spec, cfg)
    return (b.mT, a.mT, out.mT, spec_t, cfg_t, c.mT if spec.has_c else None, bias, scale_b, scale_a)


def transposed_spec(spec: Spec, cfg: GemmConfig) -> tuple[Spec, GemmConfig]:
    """(spec, cfg) of the product a ``cfg.transposed`` call runs (M and N, and the scales' roles, exchanged; the
    config without the flag); any other call's as they are."""
    if not cfg.transposed:
        return spec, cfg
    out_shape = (*spec.out_shape[:-2], spec.n, spec.m)
    spec_t = dataclasses.replace(spec, m=spec.n, n=spec.m, out_shape=out_shape, scale_a=spec.scale_b,
                                 scale_b=spec.scale_a, bias_rows=spec.has_bias and not spec.bias_rows)
    return spec_t, dataclasses.replace(cfg, transposed=False)


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, spec: Spec, cfg: GemmConfig,
           c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
           scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None) -> list:
    """Run ``cfg`` on validated tensors, writing ``out`` (shape spec.out_shape, any strides).
    Returns Triton's compiled kernel of each launch, in order."""
    return [k.run() for k in pdl_plan(a, b, out, spec, cfg, c, bias, scale_a, scale_b)]


def pdl_plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, spec: Spec, cfg: GemmConfig,
             c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
             scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None) -> list[KernelLaunch]:
    """:func:`launch_plan` with programmatic dependent launch where :func:`pdl_choice` (and
    ``TILECRAFT_PDL``) say so: what :func:`launch` runs."""
    a, b, out, spec, cfg, c, bias, scale_a, scale_b = transposed_call(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
    plan = launch_plan(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
    plan = with_pdl(plan, a.device, pdl_choice(plan, spec, cfg, _facts(a.device)[1]))
    out = []
    for k in plan:
        if k.constexprs.get("PDL") and "PDL_AT" in getattr(k.kernel, "arg_names", ()):
            at, steps = pdl_steps(cfg, spec, k.constexprs["PDL"])
            k = dataclasses.replace(k, constexprs={**k.constexprs, "PDL_AT": at, "PREFETCH": steps})
        out.append(k)
    return out


#: ``TILECRAFT_PDL_AT`` and ``TILECRAFT_PDL_PREFETCH`` (experiments; unset: :func:`pdl_steps`' rule): how
#: many K blocks before the end of its loop a program of the pointer kernel lets the next kernel launch
#: under PDL "mid", and how many K blocks of its A and B tiles it prefetches into L2 before it waits for
#: the kernel ahead (any PDL mode).
PDL_AT_ENV = "TILECRAFT_PDL_AT"
PDL_PREFETCH_ENV = "TILECRAFT_PDL_PREFETCH"


def pdl_steps(cfg: GemmConfig, spec: Spec, mode: int) -> tuple[int, int]:
    """(``PDL_AT``, ``PREFETCH``) of a pointer-kernel launch under PDL ``mode`` (docs/gemm.md follow-up 21).
    Under "mid" (3): the trigger a quarter of the program's K blocks before the end of its loop, at least
    6 and at most half, and 2 K blocks prefetched (bf16 64 x 4096 x 4096 and 16 x 8192 x 8192: 8 of 32
    blocks, the best or within 0.5 point of it on both an H100 and an H200; 32 x 4096 x 4096 on 16 blocks of
    256: 6 the best on both, 4 let the next launch start too late, 8 or more let its prefetches go
    stale); otherwise (0, 0). The environment overrides either; the prefetch
    is capped at the ring depth and rounded down to a power of two (the kernel's prefetch tile is a
    Triton range)."""
    iters = math.ceil(spec.k / (max(cfg.split_k, 1) * cfg.block_k))  # K blocks per program (launch_plan's split)
    at, steps = (min(max((iters + 3) // 4, 6), iters // 2), 2) if mode == 3 else (0, 0)
    vals = []
    for env, default in ((PDL_AT_ENV, at), (PDL_PREFETCH_ENV, steps)):
        value = os.environ.get(env, "").strip()
        if value and not value.isdigit():
            raise ValueError(f"{env}={value!r}: use a number of K blocks")
        vals.append(int(value) if value else default)
    at, steps = vals
    steps = min(steps, max(cfg.num_stages, 1))
    return at, (1 << (steps.bit_length() - 1) if steps else 0)


def pdl_in_use(a: torch.Tensor, b: torch.Tensor, spec: Spec, cfg: GemmConfig) -> str:
    """How :func:`launch` would launch ``cfg`` on these operands now: "early", "late", "mid" or "off"
    (programmatic dependent launch, after ``TILECRAFT_PDL``), for benchmark records."""
    if a.device.type != "cuda" or spec.m * spec.n == 0:
        return "off"
    plan = pdl_plan(a, b, _new_output(spec, a.device), spec, cfg)
    return {0: "off", 1: "early", 2: "late", 3: "mid"}[max(k.constexprs.get("PDL", 0) for k in plan)]


def pdl_choice(plan: list[KernelLaunch], spec: Spec, cfg: GemmConfig, sms: int) -> str | None:
    """Programmatic dependent launch for a plan (``ops.launch.with_pdl``), where measured to pay (H100,
    2026-11-26, docs/gemm.md follow-up 18; ``TILECRAFT_PDL`` overrides):

    * for small M on the pointer kernel (a memory-bound stream over B) with at most 1.5 programs per SM
      and no split-K, "mid" where a program takes more than half an SM's shared memory (the next call
      launches when every program is about a quarter of its K blocks from the end and prefetches its first
      2 K blocks into L2 before its wait, :func:`pdl_steps`; follow-up 21: bf16 64 x 4096 x 4096 83.4 -> 87.5%
      of copy on an H100, 75.1 -> 78.5% on an H200; 16 x 8192 x 8192 95.5 -> 97.8%, 96.6 -> 98.5%), "early"
      where the next call's programs fit beside them (M = 1 / 16 on 16 x 32 x 128 tiles, 72 KB: "mid" lost
      up to 6 points on the H200; follow-up 18: bf16 M = 1 / 16 / 32 / 64 83-80% of copy off, 87.5-83.9%
      early); "early" with a split-K reduce pass after it (fp32 M = 1, 256 programs split 4: 0.88x ->
      0.92x cuBLAS early, 0.90x late); a single launch of more programs "late" (bf16 M = 32 on 256
      programs: 71% of copy off, 53% early);
    * "late" for the Gluon kernel (bf16 1000^3 0.75-0.80x -> 0.83-0.85x, 512^3 0.89x -> 1.16x) and the FMA
      kernel on 16-byte rows (fp32 512^3 0.81x -> 0.88x, 1000^3 0.93x -> 0.94x); on rows that are not
      (scalar copies and stores) off: 997 x 1009 x 1013 lost 0.73x -> 0.64x;
    * off elsewhere (the persistent TMA kernel: no gain measured; the rest not measured)."""
    main = next((k for k in plan if "PDL" in getattr(k.kernel, "arg_names", ())), None)
    if main is None:
        return None
    if cfg.kernel == "pointer" and spec.m <= 64:
        # the early waiters are the next launch's programs: the plan's own short reduce pass, or the
        # next call's product, whose programs may outnumber the SMs
        if main is not plan[-1]:
            return "early"
        if math.prod(main.grid) > 1.5 * sms:
            return "late"
        # a program that takes more than half an SM's shared memory leaves no room for the next call's
        # programs beside it: let them in a quarter of the loop before the end, with their first
        # blocks prefetched ("early" where they fit beside it from the start)
        itemsize = next(t for t, name in DTYPE_NAMES.items() if name == spec.dtype).itemsize
        return "mid" if shared_bytes(cfg, itemsize) > SHARED_LIMIT["sm90"] // 2 else "early"
    if cfg.kernel == "gluon":
        return "late"
    if cfg.kernel == "fma":
        return "late" if main.constexprs.get("VEC4") else None
    return None


def launch_plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, spec: Spec, cfg: GemmConfig,
                c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None, *,
                sms: int | None = None) -> list[KernelLaunch]:
    """The kernel launches of ``cfg`` on validated tensors, without running them (the TMA
    kernel's operand copies and split-K's workspace are made here). ``sms``: the SM count the
    persistent TMA grid is sized for (default: the device's). A ``cfg.transposed`` call plans the product it runs
    (:func:`transposed_call`)."""
    a, b, out, spec, cfg, c, bias, scale_a, scale_b = transposed_call(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
    a, b = unit_dims_outermost(a), unit_dims_outermost(b)
    sizes = [("block_m", cfg.block_m), ("block_n", cfg.block_n), ("block_k", cfg.block_k)]
    if cfg.block_n2:
        sizes.append(("block_n2", cfg.block_n2))
    bad = [f"{n}={v}" for n, v in sizes if v < 1 or v & (v - 1)]
    if bad:
        raise ValueError(f"tile sizes must be powers of two (Triton's ranges are): {', '.join(bad)}")
    if cfg.block_n2:
        why = [w for w, bad_ in (("the Gluon kernel", cfg.kernel != "gluon"), ("fp16/bf16", spec.dtype not in ("fp16", "bf16")),
                                 ("no split-K", cfg.split_k > 1), ("no fixup", cfg.fixup), ("no mn_regs", cfg.mn_regs),
                                 ("32 <= block_n2 <= block_n", not 32 <= cfg.block_n2 <= cfg.block_n)) if bad_]
        if why:
            raise ValueError(f"block_n2 (a second accumulator beside block_n) needs {', '.join(why)}: got {cfg.short()} "
                             f"for a {spec.dtype} product")
    if cfg.row_perm:
        why = [w for w, bad_ in (("0, 1 or 2", cfg.row_perm not in (1, 2)), ("mn_regs", not cfg.mn_regs),
                                 ("the Gluon kernel", cfg.kernel != "gluon"), ("block_m a multiple of 32", cfg.block_m % 32))
               if bad_]
        if why:
            raise ValueError(f"row_perm (the register operand's rows relabelled) needs {', '.join(why)}: got "
                             f"{cfg.short()} (row_perm={cfg.row_perm!r})")
    if cfg.named_slots:
        why = [w for w, bad_ in (("the Gluon kernel", cfg.kernel != "gluon"), ("no mn_regs", cfg.mn_regs),
                                 ("not 3xTF32", spec.precision == "tf32x3"),
                                 ("at most 12 stages (one named barrier each)", cfg.num_stages > 12)) if bad_]
        if why:
            raise ValueError(f"named_slots (slots released by named barriers) needs {', '.join(why)}: got "
                             f"{cfg.short()} for a {spec.dtype} product")
    if cfg.programs:
        why = [w for w, bad_ in (("a positive count", cfg.programs < 0), ("a persistent kernel (tma, gluon)",
                                                                           cfg.kernel not in ("tma", "gluon")),
                                 ("no fixup", cfg.fixup), ("no cluster", cfg.cluster_m != 1)) if bad_]
        if why:
            raise ValueError(f"programs (the persistent grid's size) needs {', '.join(why)}: got {cfg.short()}")
    if cfg.cluster_m != 1:
        why = [w for w, bad_ in (("cluster_m 1 or 2", cfg.cluster_m != 2), ("the Gluon kernel", cfg.kernel != "gluon"),
                                 ("fp16/bf16", spec.dtype not in ("fp16", "bf16")), ("no split-K", cfg.split_k > 1),
                                 ("no fixup", cfg.fixup), ("no block_n2", cfg.block_n2 > 0),
                                 ("no named_slots", cfg.named_slots)) if bad_]
        if why:
            raise ValueError(f"cluster_m (two CTAs sharing B by multicast) needs {', '.join(why)}: got {cfg.short()} "
                             f"for a {spec.dtype} product")
    if cfg.kernel in ("pointer", "fma") and spec.batch > MAX_GRID_BATCH:
        # the batch is grid axis 1 of the pointer kernels (CUDA: at most 65535): launch in slices
        a3, b3 = _as3d(a, spec.batch), _as3d(b, spec.batch)
        out3 = out if out.dim() == 3 else out.unsqueeze(0)
        c3 = _as3d(c, spec.batch) if spec.has_c else c
        plan = []
        for lo in range(0, spec.batch, MAX_GRID_BATCH):
            hi = min(spec.batch, lo + MAX_GRID_BATCH)
            part = dataclasses.replace(spec, batch=hi - lo, out_shape=(hi - lo, spec.m, spec.n))
            plan += launch_plan(a3[lo:hi], b3[lo:hi], out3[lo:hi], part, cfg, c3[lo:hi] if spec.has_c else c3, bias,
                                scale_a, scale_b, sms=sms)
        return plan
    a3, b3, out3 = _as3d(a, spec.batch), _as3d(b, spec.batch), out.view(-1, spec.m, spec.n) if out.dim() == 2 else out
    (c3, bias_t, sa_t, sb_t), (epi_args, epi_cx) = _epilogue_args(spec, out3, c, bias, scale_a, scale_b)
    acc, _, acc_torch = _acc_types(spec)
    opts = _options(cfg, a.device)
    split = cfg.split_k if spec.k > 0 else 1
    k_per_split = math.ceil(spec.k / (split * cfg.block_k)) * cfg.block_k if spec.k else 0
    if split > 1:
        split = max(1, math.ceil(spec.k / k_per_split))
    # the Gluon kernel's split-K partial tiles are whole BLOCK_M rows: each split's rows padded to them
    m_ws = math.ceil(spec.m / cfg.block_m) * cfg.block_m if cfg.kernel == "gluon" else spec.m
    if cfg.kernel == "gluon" and spec.batch > 1 and split > 1:
        raise ValueError(f"{gluon_batch_fit(spec.m, spec.k, cfg, mn_major=False)}: got {cfg.short()}; use a tma or pointer config")
    if cfg.kernel == "gluon" and cfg.fixup:
        if split != 2 or cfg.split_k != 2:
            raise ValueError(f"fixup joins two K halves in the Gluon kernel: split_k must be 2 (K = {spec.k} "
                             f"with BLOCK_K {cfg.block_k} gives {split} splits)")
        if not gluon_ok(a, b, spec):
            raise ValueError("the Gluon kernel cannot take this product; use a tma or pointer config")
        return _gluon_launch(a, b, out, spec, cfg, sms, k_per_split // cfg.block_k, 2, c, bias)
    ws = empty((split, spec.batch, m_ws, spec.n), dtype=acc_torch, device=a.device) if split > 1 else None
    reduce = [] if ws is None else [_reduce_launch(ws, out3, spec, split, (c3, bias_t, sa_t, sb_t), epi_args, epi_cx,
                                                   sms or _facts(a.device)[1], spec.batch * m_ws * spec.n)]
    if cfg.kernel == "gluon":
        if not gluon_ok(a, b, spec):
            raise ValueError("the Gluon kernel takes 2D CUDA fp16/bf16, int8 (int32 out) or tf32/3xTF32 (fp32 out) "
                             "products without scales, with output rows of a multiple of 16 bytes; use a tma "
                             "or pointer config")
        dest = out if ws is None else ws.view(split * m_ws, spec.n)
        return _gluon_launch(a, b, dest, spec, cfg, sms, k_per_split // cfg.block_k, split, c, bias) + reduce
    if cfg.kernel == "tma":
        if not tma_dtype_ok(spec):
            raise ValueError(f"the TMA kernel cannot take {spec.dtype} operands with precision "
                             f"{spec.precision!r} (wgmma has no such form); use a pointer config")
        if spec.k == 0:
            raise ValueError("the TMA kernel needs K > 0 (a TMA descriptor has no empty dimension); "
                             "use a pointer config")
        if cfg.presplit and spec.precision != "tf32x3":
            raise ValueError(f"presplit is the 3xTF32 form (precision 'fp32-accurate' or 'tf32x3'), "
                             f"not {spec.dtype} with precision {spec.precision!r}")
        dest = out3 if ws is None else ws.view(split * spec.batch, spec.m, spec.n)
        return _tma_launch(a, b, dest, spec, cfg, acc, (c3, bias_t, sa_t, sb_t), epi_args, epi_cx, opts, sms,
                           split, max(k_per_split, 1)) + reduce
    num_tiles = math.ceil(spec.m / cfg.block_m) * math.ceil(spec.n / cfg.block_n)
    common = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
                  "ACC": acc, "INPUT_PRECISION": _dot_input_precision(spec, a), "OFFS64": _needs_offs64(a3, b3, out3),
                  "EVEN_K": spec.k % cfg.block_k == 0, "UPCAST": _upcast(spec, a)}
    kernel = _k.matmul_kernel
    if cfg.kernel == "fma":
        why = fma_refusal(a3, b3, spec)
        if why:
            raise ValueError(f"the FMA kernel cannot take this product: {why}; use a pointer config")
        from tilecraft.kernels import gemm_fma as _f
        kernel = _f.matmul_fma_kernel
        a3, b3 = fma_copies(cfg, a3, b3)
        common.update(fma_layout(cfg, a3, b3))
        opts = {k: v for k, v in opts.items() if k != "num_stages"}  # the ring depth is STAGES
    else:
        common.update(PDL_AT=0, PREFETCH=0)  # PDL "mid" and the L2 prefetch: set by pdl_plan
    strides_ab = (a3.stride(0), a3.stride(1), a3.stride(2), b3.stride(0), b3.stride(1), b3.stride(2))
    if split == 1:
        return [KernelLaunch(kernel, (num_tiles, spec.batch, 1), (
            a3, b3, out3, c3, bias_t, sa_t, sb_t, spec.m, spec.n, spec.k, max(k_per_split, 1), *strides_ab,
            out3.stride(0), out3.stride(1), out3.stride(2), *epi_args), {"SPLIT_K": 1, **common, **epi_cx}, opts)]
    return [KernelLaunch(kernel, (num_tiles, spec.batch, split), (
                a3, b3, ws, c3, bias_t, sa_t, sb_t, spec.m, spec.n, spec.k, k_per_split, *strides_ab,
                spec.m * spec.n, spec.n, 1, *epi_args), {"SPLIT_K": split, **common, **epi_cx}, opts)] + reduce


def _reduce_launch(ws, out3, spec: Spec, split: int, ptrs, epi_args, epi_cx, sms: int,
                   split_stride: int) -> KernelLaunch:
    """split-K's second pass over the workspace (split, batch, M or more rows, N; ``split_stride``
    elements between splits): 128-wide tiles, 64 rows or fewer, so that (where the output allows)
    every SM gets a program."""
    rbn = 128
    rbm = min(64, max(16, triton_next_pow2(spec.m)))
    while rbm > 16 and math.ceil(spec.m / rbm) * math.ceil(spec.n / rbn) * spec.batch < sms:
        rbm //= 2
    c3, bias_t, sa_t, sb_t = ptrs
    return KernelLaunch(_k.splitk_reduce_kernel, (math.ceil(spec.m / rbm) * math.ceil(spec.n / rbn), spec.batch), (
        ws, out3, c3, bias_t, sa_t, sb_t, spec.m, spec.n, spec.batch, split_stride,
        out3.stride(0), out3.stride(1), out3.stride(2), *epi_args),
        {"BLOCK_M": rbm, "BLOCK_N": rbn, "SPLIT_K": split, **epi_cx}, {"num_warps": 4})


# ----------------------------------------------------------------------------------------------
# what a launch compiles, for a GPU that is not here
# ----------------------------------------------------------------------------------------------
ARCHS = ("sm90", "sm80", "cdna")


def target_plan(a: torch.Tensor, b: torch.Tensor, arch: str, *, sms: int | None = None,
                cfg: GemmConfig | None = None, **kwargs) -> tuple[Spec, GemmConfig, list[KernelLaunch]]:
    """(spec, config, launches) of ``matmul(a, b, **kwargs)`` on a GPU of family ``arch``
    ("sm90", "sm80" or "cdna") with ``sms`` SMs/CUs: the config :func:`choose_config` takes there
    without a tuning cache (the heuristic; ``cfg`` pins another) and the launches :func:`launch`
    would make. ``a``/``b`` (and ``c``, ``bias``, scales) may be ``meta`` tensors, which stand for
    16-byte aligned allocations of their shape and strides. The TMA kernel is chosen where a launch
    on that device would choose it (sm90, dtype and layout permitting)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown GPU family {arch!r}; choose from {', '.join(ARCHS)}")
    spec = validate(a, b, **kwargs)
    if kwargs.get("precision") == "fp32-accurate":
        spec = dataclasses.replace(spec, precision=fp32_accurate_precision(arch == "cdna"))
    p = problem_of(a, b, spec, arch=arch, sms=sms)
    cfg = cfg or heuristic(p)
    out = torch.empty(spec.out_shape, dtype=spec.out_dtype, device=a.device)
    plan = launch_plan(a, b, out, spec, cfg, kwargs.get("c"), kwargs.get("bias"), kwargs.get("scale_a"),
                       kwargs.get("scale_b"), sms=p.sms)
    return spec, cfg, plan


def pdl_summary(spec: Spec, cfg: GemmConfig, plan: list[KernelLaunch], sms: int) -> dict:
    """How a plan on an sm90+ GPU launches (programmatic dependent launch, :func:`pdl_choice` and
    :func:`pdl_steps`, without ``TILECRAFT_PDL``'s override): {"mode": "early" | "late" | "mid" | "off",
    "trigger_blocks_before_end", "prefetch_blocks"} (the last two for "mid" on the pointer kernel)."""
    spec, cfg = transposed_spec(spec, cfg)  # a transposed call launches the product it runs
    choice = pdl_choice(plan, spec, cfg, sms)
    out = {"mode": choice or "off"}
    if choice == "mid":
        at, steps = pdl_steps(cfg, spec, 3)
        if at == 0:  # too few K blocks for a trigger inside the loop: the one after it fires, as under "late"
            out["mode"] = "late"
        else:
            out.update(trigger_blocks_before_end=at, prefetch_blocks=steps)
    return out


def compile_signature(k: KernelLaunch) -> dict[str, str]:
    """The Triton signature of a launch's runtime arguments, as the launch specialises them
    (Triton's own rule: ``*bf16:16`` for a 16-byte aligned pointer, ``i32:16`` for an integer
    that is a multiple of 16, ``i32:1`` for one equal to 1, ``tensordesc<...>`` for a TMA
    descriptor, ``fp32`` for a float), in the form ``analysis.compiled.cross_compile`` takes."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    names = runtime_arg_names(k)
    if len(names) != len(k.args):
        raise ValueError(f"{k.kernel.__name__} takes {len(names)} runtime arguments, the launch has {len(k.args)}")
    sig: dict[str, str] = {}
    plain = {p.name for p in getattr(k.kernel, "params", ()) if getattr(p, "do_not_specialize", False)}
    for name, value in zip(names, k.args):
        ty, spec = native_specialize_impl(BaseBackend, value, False, name not in plain, True)
        if ty == "constexpr" and name in plain:  # do_not_specialize: a plain integer, even 1
            sig[name] = "i32"
        elif ty == "constexpr":  # an integer equal to 1
            sig[name] = "i32:1"
        else:
            sig[name] = ty.replace(" ", "") + (":16" if spec and "D" in spec else "")
    return sig


def _tma_desc(t: torch.Tensor, kmajor: bool, k_dim: int, block_rows: int, block_k: int):
    """A 3D (batch, rows, cols) TMA descriptor of an operand; cols has the unit stride."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    t3 = t if t.dim() == 3 else t.unsqueeze(0)
    batched = t3.shape[0] > 1 and t3.stride(0) != 0
    nb = t3.shape[0] if batched else 1
    other = -2 if k_dim == -1 else -1
    if kmajor:  # (rows = M or N, cols = K)
        rows, cols, row_stride = t3.shape[other], t3.shape[k_dim], t3.stride(other)
        block = [1, block_rows, block_k]
    else:  # (rows = K, cols = M or N)
        rows, cols, row_stride = t3.shape[k_dim], t3.shape[other], t3.stride(k_dim)
        block = [1, block_k, block_rows]
    if rows == 1:
        row_stride = cols
    row_stride = -(-row_stride * t.element_size() // 16) * 16 // t.element_size()
    bstride = t3.stride(0) if batched else -(-rows * row_stride * t.element_size() // 16) * 16 // t.element_size()
    return TensorDescriptor(t3, [nb, rows, cols], [bstride, row_stride, 1], block), batched


def tf32_split(t: torch.Tensor, k_dim: int, block: tuple[int, int] = (64, 64)
               ) -> tuple[torch.Tensor, torch.Tensor, KernelLaunch]:
    """(hi, lo, launch): the 3xTF32 operands of an fp32 t, hi = t rounded to tf32 and lo = t - hi,
    as views of t's shape over K-major buffers with aligned rows (as :func:`aligned_kmajor_copy`),
    and the :func:`~tilecraft.kernels.gemm.tf32_split_kernel` launch that fills them (not run
    here). A broadcast batch (stride 0) stays one matrix."""
    if t.dim() == 3 and t.stride(0) == 0:
        t = t[:1]
    t3 = t if t.dim() == 3 else t.unsqueeze(0)
    k = t.shape[k_dim]
    per = 32 if k >= 128 else 4
    kp = -(-max(k, 1) // per) * per
    other = -2 if k_dim == -1 else -1
    rows = t.shape[other]
    buf = empty((2, t3.shape[0], rows, kp), dtype=t.dtype, device=t.device)
    hi, lo = (buf[i, :, :, :k] if t.dim() == 3 else buf[i, 0, :, :k] for i in range(2))
    if k_dim == -2:
        hi, lo = hi.transpose(-1, -2), lo.transpose(-1, -2)
    br, bc = block
    row_tiles = math.ceil(rows / br)
    launch = KernelLaunch(_k.tf32_split_kernel, (row_tiles * t3.shape[0], math.ceil(max(k, 1) / bc)), (
        t3, buf[0], buf[1], rows, k, row_tiles, t3.stride(0), t3.stride(other), t3.stride(k_dim),
        buf.stride(1), buf.stride(2)), {"BLOCK_R": br, "BLOCK_C": bc}, {"num_warps": 4})
    return hi, lo, launch


def _tma_launch(a, b, out3, spec, cfg, acc, ptrs, epi_args, epi_cx, opts, sms: int | None, split: int = 1,
                k_per_split: int = 1) -> list[KernelLaunch]:
    """The persistent TMA kernel (after the 3xTF32 split launches with ``cfg.presplit``); with
    ``split`` > 1, ``out3`` is the (split * batch, M, N) split-K workspace and the grid walks
    ``split`` work units per tile."""
    _, ak, bk = tma_plan(a, b, spec.dtype)
    pre = []
    a_lo = b_lo = None
    if cfg.presplit:
        a, a_lo, la = tf32_split(a, -1)
        b, b_lo, lb = tf32_split(b, -2)
        pre, ak, bk = [la, lb], True, True
    else:
        if _tma_direct(a, -1, spec.dtype) is None:
            a = aligned_kmajor_copy(a, -1)
        elif cfg.pad_rows and _row_pitch_bytes(a, ak, -1) % 128:
            a = aligned_copy(a, -1)  # keeps the layout, so ak holds
        if _tma_direct(b, -2, spec.dtype) is None:
            b = aligned_kmajor_copy(b, -2)
        elif cfg.pad_rows and _row_pitch_bytes(b, bk, -2) % 128:
            b = aligned_copy(b, -2)
    a_desc, a_batched = _tma_desc(a, ak, -1, cfg.block_m, cfg.block_k)
    b_desc, b_batched = _tma_desc(b, bk, -2, cfg.block_n, cfg.block_k)
    a_lo_desc = a_desc if a_lo is None else _tma_desc(a_lo, True, -1, cfg.block_m, cfg.block_k)[0]
    b_lo_desc = b_desc if b_lo is None else _tma_desc(b_lo, True, -2, cfg.block_n, cfg.block_k)[0]
    sms = sms or _facts(a.device)[1]
    tiles = math.ceil(spec.m / cfg.block_m) * math.ceil(spec.n / cfg.block_n) * spec.batch
    grid = (persistent_programs(cfg, tiles * split, sms),)
    c3, bias_t, sa_t, sb_t = ptrs
    return pre + [KernelLaunch(_k.matmul_tma_kernel, grid, (
        a_desc, b_desc, a_lo_desc, b_lo_desc, out3, c3, bias_t, sa_t, sb_t, spec.m, spec.n, spec.k, spec.batch, k_per_split,
        out3.stride(0), out3.stride(1), out3.stride(2), *epi_args), dict(
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, NUM_SMS=grid[0],
        A_KMAJOR=ak, B_KMAJOR=bk, A_BATCHED=a_batched, B_BATCHED=b_batched, ACC=acc,
        INPUT_PRECISION="tf32" if cfg.presplit else _dot_input_precision(spec, a), UPCAST=_upcast(spec, a),
        FLATTEN=cfg.flatten, WARP_SPECIALIZE=cfg.warp_spec, EPILOGUE_SPLIT=_epilogue_split(cfg, spec) and split == 1,
        SPLIT_K=split, PRESPLIT=cfg.presplit, **epi_cx), opts)]


def _gluon_desc(t: torch.Tensor, block: list[int]):
    """A 2D Gluon TMA descriptor of a (rows, cols) view with a unit column stride."""
    row_stride = t.stride(0) if t.shape[0] > 1 else -(-t.shape[1] * t.element_size() // 16) * 16 // t.element_size()
    return gluon_descriptor(t, [t.shape[0], t.shape[1]], [row_stride, 1], block)


def _gluon_desc3(t: torch.Tensor, block: list[int]):
    """A rank-3 Gluon TMA descriptor of a (batch, rows, cols) view with a unit column stride, in boxes of one
    entry's (``block``) tile."""
    row_stride = t.stride(1) if t.shape[1] > 1 else -(-t.shape[2] * t.element_size() // 16) * 16 // t.element_size()
    return gluon_descriptor(t, list(t.shape), [t.stride(0), row_stride, 1], [1, *block])


def _row_pitch_bytes(t: torch.Tensor, kmajor: bool, k_dim: int) -> int:
    """Bytes between the rows a TMA descriptor of t walks (the stride of its non-unit dimension)."""
    outer = (-2 if k_dim == -1 else -1) if kmajor else k_dim
    return t.stride(outer) * t.element_size() if t.shape[outer] > 1 else 128


def aligned_copy(t: torch.Tensor, k_dim: int) -> torch.Tensor:
    """A copy of t that keeps its unit-stride dimension (no transpose: one streaming pass) with rows
    padded to 128 bytes; an operand with no unit stride gets :func:`aligned_kmajor_copy`. A
    broadcast batch (stride 0) stays one matrix."""
    km = _kmajor(t, k_dim)
    if km is None:
        return aligned_kmajor_copy(t, k_dim)
    if t.dim() == 3 and t.stride(0) == 0:
        t = t[:1]
    last = km == (k_dim == -1)  # the unit stride is already the last dimension
    v = t if last else t.transpose(-1, -2)
    n = v.shape[-1]
    per = max(1, 128 // v.element_size())
    buf = empty((*v.shape[:-1], -(-max(n, 1) // per) * per), dtype=v.dtype, device=v.device)
    vec = 16 // v.element_size()
    v3, b3 = (v, buf) if v.dim() == 3 else (v.unsqueeze(0), buf.unsqueeze(0))
    if (v.is_cuda and v.stride(-1) == 1 and v.data_ptr() % 16 == 0 and n % vec == 0 and v3.stride(1) % vec == 0
            and v3.stride(0) % vec == 0 and v.numel() and max(buf.numel(), v3.stride(0) * v3.shape[0]) < 2**31):
        # pad_rows_kernel, 16-byte accesses (torch's copy_ into the padded view: 1.65-1.73 TB/s for
        # bf16 3000x5000 / 5000x7000 on the H200, gemm-gluon16-sweep-af91216)
        br, bc = 16, 512
        rt = math.ceil(v3.shape[1] / br)
        run_kernel(_k.pad_rows_kernel, (rt * v3.shape[0], math.ceil(n / bc)),
                   v3, b3, v3.shape[1], n // vec, rt, v3.stride(0) // vec, v3.stride(1) // vec, b3.stride(0) // vec,
                   b3.stride(1) // vec, VEC=vec, BLOCK_R=br, BLOCK_C=bc, num_warps=4)
    else:
        run_op(torch.Tensor.copy_, buf[..., :n], v)
    return buf[..., :n] if last else buf[..., :n].transpose(-1, -2)


def _gluon_operand(t: torch.Tensor, k_dim: int, dtype: str, pad_rows: bool) -> tuple[torch.Tensor, bool]:
    """(2D view with a unit last stride in the orientation the Gluon kernel loads, K-major?): A as
    (M, K) or (K, M), B as (N, K) or (K, N). Operands the TMA cannot read are copied (16-bit: rows
    padded, layout kept; 8/32-bit: K-major), and with ``pad_rows`` so are rows not 128-byte aligned."""
    d = _tma_direct(t, k_dim, dtype)
    if d is None:
        t = aligned_copy(t, k_dim) if dtype in ("fp16", "bf16") else aligned_kmajor_copy(t, k_dim)
        d = _tma_direct(t, k_dim, dtype)
    elif pad_rows and _row_pitch_bytes(t, d, k_dim) % 128:
        t = aligned_copy(t, k_dim)
    assert d is not None
    return (t if d == (k_dim == -1) else t.transpose(-1, -2)), d


def _mn_regs_plan(a: torch.Tensor, b: torch.Tensor, spec: Spec, cfg: GemmConfig) -> str | None:
    """How the Gluon kernel reads a tf32 product with ``cfg.mn_regs`` without copying an MN-major
    operand: "regs" (A MN-major and B K-major: A read into registers), "swap" (A K-major, B
    MN-major, the NN product: C^T = B^T A^T with B^T read into registers), or None (no such
    plan: both operands K-major, both MN-major, or rows the TMA cannot read; the copies as before)."""
    if not cfg.mn_regs or spec.dtype != "fp32" or spec.precision != "tf32":
        return None
    ka, kb = _kmajor(a, -1), _kmajor(b, -2)
    if ka is None or kb is None or ka == kb or not (_aligned_for_tma(a, ka, -1) and _aligned_for_tma(b, kb, -2)):
        return None
    if (a.dim() == 3 or b.dim() == 3) and (_flat_rows(_unit_last(a)) is None or _flat_rows(_unit_last(b)) is None):
        return None  # a batch the kernel cannot read as one 2D view (gluon_batch_refusal)
    return "regs" if kb else "swap"


_FIXUP_FLAGS: dict[tuple[int | None, int], torch.Tensor] = {}


def _fixup_flags(device: torch.device, tiles: int) -> torch.Tensor:
    """The int32 per-tile flags of the Gluon kernel's ``FIXUP`` split-K. Every launch leaves them
    at zero, so one zeroed buffer serves all launches on a stream (keyed by device and the current
    CUDA stream: launches on one stream never overlap). While a CUDA graph is captured on a stream
    with no buffer yet, a fresh zeroed one per call (the graph then zeroes it on every replay)."""
    if device.type != "cuda":  # planning on the meta device (cross compiles)
        return torch.zeros(tiles, dtype=torch.int32, device=device)
    key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    buf = _FIXUP_FLAGS.get(key)
    if buf is not None and buf.numel() >= tiles:
        return buf
    if torch.cuda.is_current_stream_capturing():  # memory of the graph's pool: not to be kept
        return torch.zeros(tiles, dtype=torch.int32, device=device)
    buf = _FIXUP_FLAGS[key] = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
    return buf


def _gluon_launch(a, b, out, spec: Spec, cfg: GemmConfig, sms: int | None, k_split_steps: int = 0,
                  split: int = 1, c: torch.Tensor | None = None, bias: torch.Tensor | None = None
                  ) -> list[KernelLaunch]:
    """The Gluon kernel's launch (after the 3xTF32 split launches, or the copies of operands the
    TMA cannot read as they are). ``out`` is (M, N) contiguous, or with ``split`` > 1 the (split Mp,
    N) fp32/int32 workspace of ``k_split_steps`` K steps per split (Mp: M rounded up to a multiple
    of BLOCK_M). With ``cfg.mn_regs`` a tf32 product with one MN-major operand is read without a
    copy (:func:`_mn_regs_plan`). The epilogue (alpha, ``beta * c``, ``bias``, the activation) runs
    in the kernel before each chunk's store, except for split-K's raw partials (the reduce pass
    after runs it there; ``fixup`` joins the halves in the kernel and runs it on the joined tile)."""
    from tilecraft.kernels import gemm_gluon as _g
    from tilecraft.tuning.gemm import gluon_epilogue_buffers

    pre: list[KernelLaunch] = []
    three = spec.precision == "tf32x3"
    if three:
        a_hi, a_lo, la = tf32_split(a, -1)
        b_hi, b_lo, lb = tf32_split(b, -2)
        pre = [la, lb]
        b_hi, b_lo = b_hi.t(), b_lo.t()
        ak = bk = True
    regs = _mn_regs_plan(a, b, spec, cfg) if split == 1 else None
    if regs == "swap":  # C^T = B^T A^T: B^T (N, K) read N-major into registers, A^T (K, M) K-major
        a, b = b.transpose(-1, -2), a.transpose(-1, -2)
    if regs:  # the left operand MN-major (into registers), the right one K-major
        ak, bk = False, True
        a_hi, b_hi = a.transpose(-1, -2), b.transpose(-1, -2)
        a_lo, b_lo = a_hi, b_hi
    elif not three:
        a_hi, ak = _gluon_operand(a, -1, spec.dtype, cfg.pad_rows)
        b_hi, bk = _gluon_operand(b, -2, spec.dtype, cfg.pad_rows)
        a_lo, b_lo = a_hi, b_hi
    m, n = (spec.n, spec.m) if regs == "swap" else (spec.m, spec.n)
    # a batch: stacked along the output's rows (the kernel's M, or its N in the C^T form), each operand
    # one 2D view of its entries one after another (or one matrix, broadcast)
    stack, a_brows, b_brows = 0, 0, 0
    a3, b3 = a_hi, b_hi  # (batch, rows, columns) views, for rank-3 descriptors
    if a_hi.dim() == 3 or b_hi.dim() == 3:
        flat_a, flat_b = _flat_rows(a_hi), _flat_rows(b_hi)
        if flat_a is None or flat_b is None:
            raise ValueError("the Gluon kernel reads a batch as one 2D view of entries one after another: "
                             f"{gluon_batch_refusal(a, b, spec)}")
        (a_hi, a_brows), (b_hi, b_brows) = flat_a, flat_b
        a_lo, b_lo = a_hi, b_hi
        if spec.batch > 1:  # (a batch of 1 is one 2D product: nothing to stack)
            why = gluon_batch_fit(spec.m, spec.k, cfg, mn_major=(not ak and a_brows > 0) or (not bk and b_brows > 0))
            if why is not None:
                raise ValueError(f"{why}: got {cfg.short()}; use a tma or pointer config")
            stack = 2 if regs == "swap" else 1
            # each entry's rows padded to whole tiles along the stacked dimension (the rank-3 output clips them)
            batch_len = gluon_batch_rows(spec.m, cfg, swap=stack == 2)
            m, n = (batch_len * spec.batch, n) if stack == 1 else (m, batch_len * spec.batch)
    if out.dim() == 3 and not out.is_contiguous():
        raise ValueError(f"the Gluon kernel writes a contiguous output, got shape {tuple(out.shape)} and strides "
                         f"{out.stride()}")
    out2 = out if out.dim() == 2 else out.view(-1, spec.n)
    fixup = split > 1 and cfg.fixup
    rows = spec.m * max(spec.batch, 1) if split == 1 or fixup else split * math.ceil(spec.m / cfg.block_m) * cfg.block_m
    if out2.stride(1) != 1 or out2.stride(0) != spec.n or out2.shape[0] != rows:
        raise ValueError(f"the Gluon kernel writes a contiguous ({rows}, N) output, got shape {tuple(out2.shape)} "
                         f"and strides {out2.stride()}")
    bm, bn, bkk = cfg.block_m, cfg.block_n, cfg.block_k
    epi_n = gluon_epilogue_width(spec, cfg) if split == 1 or fixup else 64
    # the lo descriptors: 3xTF32's lo parts, or with block_n2 B's tiles of the tile's last block_n2 columns
    bn_lo = cfg.block_n2 or bn
    # a stacked operand read MN-major (K rows an entry) through rank-3 boxes of one entry, whose rows stop at the
    # entry's K (zeros past it, where a 2D box would read the next entry's rows); not with a cluster, whose multicast
    # names the B half's descriptor by its parameter number (five a 2D descriptor, B_HALF_PARAM): gluon_batch_fit
    # keeps K whole there, and the 2D boxes read the entry's own rows
    a_desc3 = stack and not ak and a_brows > 0 and cfg.cluster_m == 1
    b_desc3 = stack and not bk and b_brows > 0 and cfg.cluster_m == 1
    descs = [_gluon_desc3(a3, [bkk, bm]) if a_desc3 else _gluon_desc(a_hi, [bm, bkk] if ak else [bkk, bm]),
             _gluon_desc3(b3, [bkk, bn]) if b_desc3 else _gluon_desc(b_hi, [bn, bkk] if bk else [bkk, bn]),
             _gluon_desc(a_lo, [bm, bkk] if ak else [bkk, bm]),
             _gluon_desc3(b3, [bkk, bn_lo]) if b_desc3 else _gluon_desc(b_lo, [bn_lo, bkk] if bk else [bkk, bn_lo]),
             _gluon_desc(out2, [epi_n, bm] if regs == "swap" else [bm, epi_n]) if not stack else
             gluon_descriptor(out2.view(spec.batch, spec.m, spec.n), [spec.batch, spec.m, spec.n], [spec.m * spec.n, spec.n, 1],
                              [1, epi_n, bm] if stack == 2 else [1, bm, epi_n])]
    sms = sms or _facts(a.device)[1]
    tiles = math.ceil(m / bm) * math.ceil(n / cfg.tile_n)
    units = tiles * split
    grid = (persistent_programs(cfg, units, sms),)
    cl = cfg.cluster_m
    smem_args: tuple = (0, 0, 0)
    if cl > 1:
        # each CTA multicasts half of the B tile in TMA boxes of 128-byte rows (the tile's swizzle): a
        # K-major B tile of 128-byte rows halved along N (one box), or an MN-major one whose half is
        # whole 128-byte column blocks (one box each)
        esz = b_hi.element_size()
        if not ((bk and bkk * esz == 128) or (not bk and bn // 2 * esz % 128 == 0)):
            raise ValueError(f"cluster_m 2 copies halves of the B tile in boxes of 128-byte rows: block_k * "
                             f"{esz} (K-major B) must be 128, or block_n / 2 * {esz} (MN-major B) a multiple of 128; "
                             f"got {cfg.short()} with B {'K' if bk else 'MN'}-major")
        descs[2] = _gluon_desc(b_hi, [bn // 2, bkk] if bk else [bkk, 128 // esz])
        # clusters of two CTAs on vertically adjacent tiles, the grid's x counted in clusters
        grid = (max(1, min(sms // cl, math.ceil(math.ceil(m / bm) / cl) * math.ceil(n / cfg.tile_n))),)
        smem_args = (-1, -1, -1)  # the allocations' offsets, filled in at launch (run_cluster_kernel)
    ws_ptr = flag_ptr = out2  # read only with fixup
    if fixup:
        if units > sms:  # a waiting half needs its partner running beside it, not after it
            raise ValueError(f"fixup needs one program per work unit: {units} units on {sms} SMs")
        ws_ptr = torch.empty(tiles * bm * bn, dtype=torch.float32, device=out.device)
        flag_ptr = _fixup_flags(out.device, tiles)
    # the default partition's warps plus one warpgroup for the producer share the register file
    maxnreg = min(240, 65536 // ((cfg.num_warps + 4) * 32) // 8 * 8)
    constexprs = {"STAGES": cfg.num_stages, "GROUP_M": cfg.group_m, "THREE_TF32": three,
                  "FLUSH": cfg.flush, "EPI_BUFS": gluon_epilogue_buffers(cfg, a.element_size(), three,
                                                                         out2.element_size()),
                  "PRODUCER_REGS": 40, "A_KMAJOR": ak, "B_KMAJOR": bk, "SPLIT_K": split,
                  "A_REGS": bool(regs), "TRANS_OUT": regs == "swap", "ROW_PERM": int(cfg.row_perm) if regs else 0,
                  "FIXUP": fixup, "BLOCK_N2": cfg.block_n2, "NAMED_SLOTS": cfg.named_slots, "CLUSTER_M": cl,
                  "STACK": stack}
    steps = k_split_steps if split > 1 else math.ceil(spec.k / bkk)
    epi_args, epi_cx = _gluon_epilogue(spec, out2, c, bias, in_kernel=split == 1 or fixup, trans=regs == "swap",
                                       prefetch=cfg.epi_prefetch, stacked=bool(stack))
    # a stacked batch's C: the stride between its entries (0: one C for every entry) and the rows of one
    c_batch = (epi_args[0].stride(0) if stack and spec.has_c and epi_args[0].dim() == 3 else 0,
               spec.m if stack else 0)
    constexprs.update(epi_cx)
    return pre + [KernelLaunch(_g.matmul_ws_kernel, grid,
                               (*descs, m, n, spec.k, steps, *epi_args, ws_ptr, flag_ptr,
                                batch_len if stack else 0, a_brows, b_brows, *c_batch, *smem_args),
                               constexprs, {"num_warps": cfg.num_warps, "maxnreg": maxnreg}, cluster=cl,
                               smem=("b_bufs", "ready", "empty") if cl > 1 else ())]


#: From this many rounds of work units a program on, the persistent grid is trimmed to even rounds
EVEN_ROUNDS_FROM = 16


def persistent_programs(cfg: GemmConfig, units: int, sms: int) -> int:
    """Programs of a persistent launch (TMA and Gluon kernels) over ``units`` work units: ``cfg.programs`` when set
    (at most the SMs and the units); else one per SM, trimmed to the fewest programs that take the same number of
    rounds when there are at least :data:`EVEN_ROUNDS_FROM` of them. 2048 tiles of 8192^3 on 132 SMs are 15.5
    rounds whose last is half empty; 128 programs run 16 each, and the 4 idle SMs leave their power to the others
    at the cap: x torch in one-second windows interleaved with it, tf32 NN / TT / NT 0.999 / 0.996 / 0.991 ->
    1.003 / 0.998 / 1.002, bf16 NN 1.016 -> 1.021, fp16 NN 1.006 -> 1.015 (int8 8192^3, also 16 rounds: the same
    within 0.2%). At 4 to 11 rounds it did not pay (bf16 4096^3 and 4096 x 14336 x 4096 the same within 0.5%, tf32
    NN 4096^3 0.7% faster, 4096 x 11008 x 4096 on 256x128 tiles, 11 rounds, 1.3% slower), so fewer rounds keep one
    program an SM (H200, 2026-11-30, docs/gemm.md follow-up 33)."""
    if cfg.programs:
        return max(1, min(cfg.programs, sms, units))
    if units <= sms:
        return max(1, units)
    rounds = math.ceil(units / sms)
    return math.ceil(units / rounds) if rounds >= EVEN_ROUNDS_FROM else sms


def gluon_epilogue_width(spec: Spec, cfg: GemmConfig) -> int:
    """Columns per epilogue chunk of the Gluon kernel (each chunk: epilogue, then one TMA store):
    64, or 32 for a 256-wide tile whose epilogue reads C and adds a bias or applies an activation
    (sm90 cross compile, 128x256 bf16 with alpha, C, bias and gelu: 88 bytes spilled in 64-column
    chunks, none in 32); 32 also where the second accumulator (``block_n2``) is 32 columns wide."""
    heavy = spec.has_c and (spec.has_bias or spec.activation is not None)
    return 32 if cfg.tile_n >= 256 and heavy or cfg.block_n2 == 32 else 64


def _gluon_epilogue(spec: Spec, out2: torch.Tensor, c: torch.Tensor | None, bias: torch.Tensor | None, *,
                    in_kernel: bool, trans: bool, prefetch: bool = False, stacked: bool = False) -> tuple[tuple, dict]:
    """(runtime args, constexprs) of the Gluon kernel's epilogue: C's pointer and strides along
    the kernel's rows and columns (swapped for the C^T tile of ``trans``), the bias pointer (unit
    stride), alpha and beta as fp32 halves. ``in_kernel`` False (split-K partials): all off.
    ``prefetch`` (``cfg.epi_prefetch``): the producer prefetches C and bias into L2 per tile.
    ``stacked``: a batch stacked in one launch, whose C stays (batch, M, N) (one entry, a batch of 1 or a
    broadcast batch, as (M, N)); the kernel finds each entry's (its ``stride_cb``)."""
    on = in_kernel
    has_c = on and spec.has_c
    has_bias = on and spec.has_bias
    c2 = c if has_c else out2
    if has_c and c2.dim() == 3 and (not stacked or c2.shape[0] == 1 or c2.stride(0) == 0):
        c2 = c2[0]  # (1, M, N) for a 2D product, or one C for every entry of a batch
    sr, sc = (c2.stride(-2), c2.stride(-1)) if c2.dim() >= 2 else (0, 0)
    if trans:
        sr, sc = sc, sr
    ah, al = _split(spec.alpha)
    bh, bl = _split(spec.beta)
    args = (c2, bias.contiguous() if has_bias else out2, sr, sc, ah, al, bh, bl)
    cx = {"EPI_INT": not spec.out_dtype.is_floating_point, "HAS_ALPHA": on and spec.alpha != 1.0, "HAS_C": has_c,
          "HAS_BIAS": has_bias, "ACTIVATION": _k.ACTIVATIONS[spec.activation] if on else 0,
          "EPI_PREFETCH": prefetch and (has_c or has_bias)}
    return args, cx


def _epilogue_split(cfg: GemmConfig, spec: Spec) -> bool:
    """Run the TMA kernel's epilogue in two column halves: always when the config asks, and for a
    256-wide tile whose epilogue reads C or bias or applies an activation (sm90 cross compile,
    128x256 bf16 with C, bias and gelu: 255 registers and 760 bytes spilled at once, 8 in halves)."""
    heavy = spec.has_c or spec.has_bias or spec.activation is not None or spec.scale_a == 2 or spec.scale_b == 2
    return cfg.epilogue_split or (cfg.block_n >= 256 and heavy)


def triton_next_pow2(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1))))


# ----------------------------------------------------------------------------------------------
# config choice: cache, tuning, heuristics
# ----------------------------------------------------------------------------------------------
_CHOSEN: dict[tuple, GemmConfig] = {}
#: ``problem_of`` per call layout (``ops.launch.signature`` of both operands and the spec): it reads only
#: shapes, strides, 16-byte alignment, dtypes and the device, and cost a tenth of an eager call's host time.
_PROBLEMS: dict[tuple, Problem] = {}


def choose_config(a: torch.Tensor, b: torch.Tensor, spec: Spec, *, tune_now: bool | None = None,
                  c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                  scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
                  progress=None) -> GemmConfig:
    """The configuration ``matmul`` runs for these inputs: a cached tuning result if there is one;
    else, on a CUDA GPU with tuning on (``TILECRAFT_TUNE`` not 0), the fastest of the config space
    timed now on these inputs (and cached); else the heuristic."""
    sig = (signature(a), signature(b), spec)
    p = _PROBLEMS.get(sig)
    if p is None:
        if len(_PROBLEMS) >= 4096:
            _PROBLEMS.clear()
        p = _PROBLEMS[sig] = problem_of(a, b, spec)
    dev = a.device
    tuning = tune_now if tune_now is not None else _cache.tuning_enabled()
    memo = (p, str(dev), bool(tuning))  # TILECRAFT_TUNE switched within a process takes effect
    cfg = _CHOSEN.get(memo)
    if cfg is not None:
        return _switched(cfg)
    if p.arch == "interpreter":
        cfg = heuristic(p)
        _CHOSEN[memo] = cfg
        return cfg
    _, _, name, versions = _facts(dev)
    path = _cache.cache_file(f"gemm-v{TUNER_VERSION}", name, versions)
    key = shape_key(p)
    # TILECRAFT_TUNE=0 means the heuristics only (issue 3, README): a tuned entry on disk is not read either
    entry = _cached_config(_cache.load(path).get(key), p, key) if tuning else None
    if entry is not None:
        cfg = entry
    elif tuning and p.arch != "cdna":
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"tilecraft.matmul would tune {key} during CUDA-graph capture; call "
                "tilecraft.ops.gemm.warmup(...) with the same shapes before capturing, or set TILECRAFT_TUNE=0")
        cfg = _tune(a, b, spec, p, c, bias, scale_a, scale_b, progress)
        if cfg is None:  # no candidate ran (out of memory, none compiled): the heuristic, nothing cached
            cfg = heuristic(p)
        else:
            _cache.store(path, key, {"config": cfg.as_dict(), "date": time.strftime("%Y-%m-%d")})
    else:
        cfg = heuristic(p)
    _CHOSEN[memo] = cfg
    return _switched(cfg)


def _cached_config(entry: object, p: Problem, key: str) -> GemmConfig | None:
    """A cache entry's configuration, or None (with a line on stderr) where the entry is not one this problem can
    run: a hand-edited or corrupted file, or a field the kernels refuse. The heuristic then runs."""
    if entry is None:
        return None
    try:
        cfg = GemmConfig.from_dict(entry["config"])  # type: ignore[index]
        default = GemmConfig()
        for f in dataclasses.fields(GemmConfig):
            want = type(getattr(default, f.name))
            if type(getattr(cfg, f.name)) is not want:
                raise TypeError(f"{f.name}={getattr(cfg, f.name)!r} is not a {want.__name__}")
        if cfg not in config_space(p) and cfg != heuristic(p):
            raise ValueError(f"{cfg.short()} is not in this problem's configuration space")
        return cfg
    except Exception as exc:  # noqa: BLE001 - any bad entry: the heuristic instead of a crash at launch
        _say(f"ignoring the tuning cache's entry for gemm {key} ({type(exc).__name__}: {exc}); "
             "the heuristic runs (delete the entry or TILECRAFT_CACHE's file to re-tune)")
        return None


def _switched(cfg: GemmConfig) -> GemmConfig:
    """``cfg`` as ``TILECRAFT_GEMM_CLUSTER`` allows: unchanged, or without its cluster when the switch is 0 (the
    short-K 64x128 tile then back to the four stages it has without one)."""
    if cfg.cluster_m == 1 or clusters_enabled():
        return cfg
    short = cfg.kernel == "gluon" and (cfg.block_m, cfg.block_n, cfg.num_stages) == (64, 128, 5)
    return dataclasses.replace(cfg, cluster_m=1, num_stages=4 if short else cfg.num_stages)


#: The tuner's timing method, part of its cache file's name: entries timed another way are not reused.
#: 2 (2026-11-25): operands rotated through copies while they fit twice in the L2 (``tuning_sets``).
TUNER_VERSION = 2


def tuning_sets(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, l2_bytes: int | None
                ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """The operand sets the tuner cycles through: (a, b, c) and, while their bytes are under twice the
    L2, copies (same strides), so every timed call reads its operands from memory as a call in a
    model does (weights of one layer are not in the L2 when the next layer runs). Timed on one set,
    a 32 MiB B (small M at N = K = 4096) stays in a 50 MiB L2 and the tuner picked split-K configs
    that run at 73% of copy from memory against 81% for unsplit ones (H100, 2026-11-25,
    ``benchmarks/gemm_smallm_ceiling.py``)."""
    nbytes = sum(t.numel() * t.element_size() for t in (a, b, c) if t is not None)
    l2 = l2_bytes or 64 * 2**20
    n = min(8, math.ceil(2 * l2 / max(nbytes, 1)) + 1) if nbytes < 2 * l2 else 1
    return [(a, b, c)] + [(a.clone(), b.clone(), None if c is None else c.clone()) for _ in range(n - 1)]


def _tune(a, b, spec: Spec, p: Problem, c, bias, scale_a, scale_b, progress) -> GemmConfig | None:
    """The fastest config of the space on these inputs (None when none was timed, or memory ran out). ``progress(i, n, cfg)`` is called as
    :func:`~tilecraft.tuning.gemm.tune` says; without one, each candidate's time is reported on stderr
    (``tuning i/n <config>: <ms> ms``; ``TILECRAFT_QUIET=1`` silences it): a shape's tuning compiles
    and times tens of configs, seconds to minutes in which a call would otherwise show nothing."""
    cands = config_space(p)
    _say(f"tuning gemm {shape_key(p)}: {len(cands)} configs (cached afterwards; TILECRAFT_TUNE=0 skips)")
    out = torch.empty(spec.out_shape, dtype=spec.out_dtype, device=a.device)
    first: list[torch.Tensor] = []
    sets = tuning_sets(a, b, c, device_l2_bytes(a.device))
    times: dict[GemmConfig, float | None] = {}

    def say_progress(i: int, n: int, cfg: GemmConfig) -> None:
        # tune() calls this before it times candidate i, and with i == n (and the best) at the end
        if i > 0:
            ms = times.get(cands[i - 1])
            _say(f"tuning {i}/{n} {cands[i - 1].short()}: " + ("skipped" if ms is None else f"{ms:.4g} ms"))
        if i == n:
            _say(f"tuned gemm {shape_key(p)}: {cfg.short()}")

    oom: list[str] = []

    def time_config(cfg: GemmConfig) -> float | None:
        if oom:  # memory ran out: timing the rest would not tell the fastest either
            return None
        out.fill_(float("nan") if spec.out_dtype.is_floating_point else -1)
        try:
            launch(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
            torch.cuda.synchronize(a.device)
        except torch.OutOfMemoryError as exc:
            oom.append(cfg.short())
            _say(f"  {cfg.short()}: out of memory ({str(exc).splitlines()[0][:120]}); tuning stops, nothing cached")
            return None
        except Exception as exc:  # noqa: BLE001 - a config that does not compile is skipped
            _say(f"  {cfg.short()}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            return None
        if not first:
            first.append(out.clone())
        elif relative_error(out, first[0]) > 1e-2:
            _say(f"  {cfg.short()}: disagrees with {cands[0].short()}; skipped")
            return None
        return _graph_time_ms([lambda s=s: launch(s[0], s[1], out, spec, cfg, s[2], bias, scale_a, scale_b)
                               for s in sets], a.device)

    def timed(cfg: GemmConfig) -> float | None:
        times[cfg] = ms = time_config(cfg)
        return ms

    best, table = tune(p, cands, timed, progress or say_progress)
    if oom or all(row["ms"] is None for row in table):
        return None  # no winner was timed: the caller runs the heuristic and caches nothing
    return best


# ----------------------------------------------------------------------------------------------
# the public function and the registered op
# ----------------------------------------------------------------------------------------------
def matmul(a: torch.Tensor, b: torch.Tensor, *, out_dtype: torch.dtype | None = None, alpha: float = 1.0,
           beta: float = 0.0, c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
           activation: str | None = None, precision: str | None = None,
           scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None) -> torch.Tensor:
    """``act(alpha * scale_a * scale_b * (a @ b) + beta * c + bias)`` on matrix cores.

    Shapes: ``a`` (M, K) or (batch, M, K), ``b`` (K, N) or (batch, K, N) (a batch of 1 broadcasts);
    the result is (M, N), or (batch, M, N) when either operand is 3D, contiguous, of ``out_dtype``.
    Any strides: transposed views (``x.t()``, ``x.transpose(-1, -2)``) give the NT/TN/TT products
    with no copy. ``c``: the output's shape (or (M, N) for every batch entry), read only when
    ``beta != 0``; ``bias``: (N,), added to every row; ``activation``: None, "relu", "gelu",
    "gelu_tanh" or "silu". dtypes, ``precision`` and scales: see the module docstring.

    M = 0 or N = 0 gives an empty result; K = 0 gives ``act(beta * c + bias)``. NaN and Inf
    propagate as IEEE arithmetic says. Bad arguments raise ``ValueError``/``TypeError`` before any
    launch.

    Gradients (fp16, bf16, fp32 and fp64 products without scales) reach ``a``, ``b``, ``c`` and ``bias``
    through tilecraft's own products (:func:`matmul_grads`: dA = alpha dZ Bᵀ, dB = alpha Aᵀ dZ in the
    operands' dtype and ``precision``). When autograd records the call, "gelu", "gelu_tanh" and "silu" run
    as torch ops on the product's output (autograd keeps the pre-activation; the result may differ from
    the fused epilogue's by the rounding of the pre-activation to ``out_dtype``); "relu" stays fused.
    fp8 and int8 products, and scales, are not differentiable (``TypeError`` when autograd would record).

    Devices: CUDA/ROCm tensors run the Triton kernels. CPU tensors run them through Triton's
    interpreter when ``TRITON_INTERPRET=1`` was set before tilecraft was imported; otherwise the
    float64 reference (``tilecraft.reference.gemm``) computes the result, rounded to ``out_dtype``.

    Example::

        >>> a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        >>> y = tilecraft.matmul(a, a.t(), bias=torch.zeros(4096, device="cuda"), activation="gelu")
    """
    spec = _validated(a, b, out_dtype, alpha, beta, c, bias, activation, precision, scale_a, scale_b)
    refuse_forward_ad("tilecraft.matmul", a, b, c, bias, scale_a, scale_b)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, c, bias, scale_a, scale_b)):
        _check_differentiable(a, scale_a, scale_b)
        if spec.activation in _TORCH_ACTIVATIONS:  # autograd keeps the pre-activation for the backward
            z = matmul(a, b, out_dtype=spec.out_dtype, alpha=alpha, beta=beta, c=c, bias=bias, precision=precision)
            return _TORCH_ACTIVATIONS[spec.activation](z)
    if eager_direct(a, b, c, bias, scale_a, scale_b):  # the registered op's body, without its dispatch
        return compute(a, b, spec, c, bias, scale_a, scale_b)
    if eager_direct(a, b, c, bias, scale_a, scale_b, autograd=True):  # the same, recorded by autograd
        return _EagerMatmul.apply(a, b, c, bias, spec, precision)
    return torch.ops.tilecraft.matmul(a, b, spec.out_dtype, float(alpha), float(beta), c, bias, activation,
                                      precision, scale_a, scale_b)


#: Specs of earlier eager calls by what :func:`validate` reads (``_validated``): every check is a function of the
#: tensors' types, layouts, dtypes, devices, shapes and strides and of the scalar arguments, none of their values.
_VALIDATED: dict = {}


def _tensor_facts(t) -> tuple | None:
    return None if t is None else (t.dtype, t.device, t.layout, t.shape, t.stride())


def _validated(a, b, out_dtype, alpha, beta, c, bias, activation, precision, scale_a, scale_b) -> Spec:
    """:func:`validate`, remembered for eager calls whose tensors are plain (``torch.Tensor`` or ``Parameter``, or
    None): a call with the same facts gets the same Spec without the checks again (about a quarter of a replayed
    small call's host time, H200 host profile 2026-12-01). Only successful validations are remembered, so a bad call
    raises every time; traced, fake, subclassed and functorch-wrapped tensors are validated afresh."""
    plain = type(a) in PLAIN_TENSORS and type(b) in PLAIN_TENSORS
    if plain and (c is not None or bias is not None or scale_a is not None or scale_b is not None):
        plain = all(t is None or type(t) in PLAIN_TENSORS for t in (c, bias, scale_a, scale_b))
    key = None
    if plain and not torch.compiler.is_compiling():
        try:
            key = (a.dtype, a.device, a.layout, a.shape, a.stride(), b.dtype, b.device, b.layout, b.shape, b.stride(),
                   out_dtype, type(alpha), repr(alpha), type(beta), repr(beta), activation, precision)
            if c is not None or bias is not None or scale_a is not None or scale_b is not None:
                key += (_tensor_facts(c), _tensor_facts(bias), _tensor_facts(scale_a), _tensor_facts(scale_b))
            spec = _VALIDATED.get(key)
        except TypeError:  # an unhashable argument: validate says what is wrong with it
            key = spec = None
    else:
        spec = None
    if spec is None:
        spec = validate(a, b, out_dtype=out_dtype, alpha=alpha, beta=beta, c=c, bias=bias, activation=activation,
                        precision=precision, scale_a=scale_a, scale_b=scale_b)
        if key is None:
            return spec
        remember(_VALIDATED, key, spec)
    return spec


def _new_output(spec: Spec, device: torch.device) -> torch.Tensor:
    """The result :func:`compute` returns, uninitialised (the kernels write every element). One
    place, so that the tests can poison it (NaN, or an absurd int32) and catch unwritten elements."""
    return torch.empty(spec.out_shape, dtype=spec.out_dtype, device=device)


def compute(a, b, spec: Spec, c=None, bias=None, scale_a=None, scale_b=None,
            cfg: GemmConfig | None = None) -> torch.Tensor:
    """The body of the registered op, on validated arguments (``cfg`` pins a configuration)."""
    out = _new_output(spec, a.device)
    if out.numel() == 0 or a.device.type == "meta":  # meta: the result's shape and type, nothing to compute
        return out
    if a.device.type == "cpu" and not triton_on_cpu():
        return matmul_reference(a, b, out_dtype=spec.out_dtype, alpha=spec.alpha, beta=spec.beta,
                                c=c if spec.has_c else None, bias=bias, activation=spec.activation,
                                scale_a=scale_a, scale_b=scale_b)
    replay = cfg is None and replay_enabled()
    if replay:
        key = replay_key(a, b, spec, c, bias, scale_a, scale_b)
        slots = (a, b, out, c, bias, scale_a, scale_b)
        if _REPLAYS.run(key, slots):
            return out
    cfg = cfg or choose_config(a, b, spec, c=c, bias=bias, scale_a=scale_a, scale_b=scale_b)
    with _REPLAYS.record(key, slots) if replay else contextlib.nullcontext():
        if a.device.type == "cuda":
            with torch.cuda.device(a.device):
                launch(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
        else:
            launch(a, b, out, spec, cfg, c, bias, scale_a, scale_b)
    return out


def replay_key(a, b, spec: Spec, c=None, bias=None, scale_a=None, scale_b=None) -> tuple:
    """What :func:`compute`'s plan reads besides the tensors' data: their :func:`signature`, the spec, the settings."""
    return (signature(a), signature(b), spec, signature(c), signature(bias), signature(scale_a), signature(scale_b),
            environ_key(_PLAN_ENV))


#: The settings a plan reads (PDL, clusters, tuning and its cache's place), raw, in every replay key
_PLAN_ENV = environ_names(PDL_ENV, PDL_AT_ENV, PDL_PREFETCH_ENV, CLUSTER_ENV, "TILECRAFT_TUNE", "TILECRAFT_CACHE")

#: The launches of earlier eager calls, per call key (``ops.launch.ReplayCache``): a call whose operands
#: have the layouts, dtypes and alignment of an earlier one's (and the same scalars and settings) runs
#: that call's kernels again without planning them (``TILECRAFT_REPLAY=0``: off).
_REPLAYS = ReplayCache()


def warmup(a: torch.Tensor, b: torch.Tensor, **kwargs) -> GemmConfig:
    """Compile (and, with tuning on, tune) the kernel ``matmul(a, b, **kwargs)`` would run, so a
    later call, e.g. inside CUDA-graph capture, neither compiles nor tunes. Returns the config."""
    spec = validate(a, b, **kwargs)
    if a.numel() == 0 or b.numel() == 0 or spec.m * spec.n == 0:
        return heuristic(problem_of(a, b, spec))
    cfg = choose_config(a, b, spec, c=kwargs.get("c"), bias=kwargs.get("bias"), scale_a=kwargs.get("scale_a"),
                        scale_b=kwargs.get("scale_b"))
    matmul(a, b, **kwargs)
    if a.device.type == "cuda":
        torch.cuda.synchronize(a.device)
    return cfg


@torch.library.custom_op("tilecraft::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype, alpha: float, beta: float,
               c: torch.Tensor | None, bias: torch.Tensor | None, activation: str | None,
               precision: str | None, scale_a: torch.Tensor | None, scale_b: torch.Tensor | None) -> torch.Tensor:
    spec = validate(a, b, out_dtype=out_dtype, alpha=alpha, beta=beta, c=c, bias=bias, activation=activation,
                    precision=precision, scale_a=scale_a, scale_b=scale_b)
    return compute(a, b, spec, c, bias, scale_a, scale_b)


@_matmul_op.register_fake
def _matmul_fake(a, b, out_dtype, alpha, beta, c, bias, activation, precision, scale_a, scale_b):
    spec = validate(a, b, out_dtype=out_dtype, alpha=alpha, beta=beta, c=c, bias=bias, activation=activation,
                    precision=precision, scale_a=scale_a, scale_b=scale_b)
    return a.new_empty(spec.out_shape, dtype=spec.out_dtype)


# ----------------------------------------------------------------------------------------------
# gradients
# ----------------------------------------------------------------------------------------------
#: operand dtypes whose products are differentiable (fp8 and int8 products, and scales, are not)
DIFFERENTIABLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

#: Under autograd, ``matmul`` applies these activations as torch ops after the product (so autograd keeps
#: the pre-activation Z, as ``F.gelu(F.linear(...))`` does), instead of in the kernel's epilogue, whose
#: backward would have to recompute Z by a fourth product: a bf16 training step of a 4096 x 4096 -> 11008
#: layer with bias and gelu took 2.441 ms against torch's 1.593 with the recompute (H200, 2026-11-29,
#: ``benchmarks/gemm_train.py`` at 567ca9b). relu stays in the epilogue (its backward reads the output).
_TORCH_ACTIVATIONS = {
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


def _check_differentiable(a: torch.Tensor, scale_a, scale_b) -> None:
    if a.dtype not in DIFFERENTIABLE or scale_a is not None or scale_b is not None:
        what = f"{a.dtype} operands" + (" with scales" if scale_a is not None or scale_b is not None else "")
        raise TypeError(f"matmul is differentiable for fp16, bf16, fp32 and fp64 products without scales, not "
                        f"{what}: call it under torch.no_grad() or on tensors that do not require grad")


def _reduce_to(t: torch.Tensor, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """A gradient summed over the batch entries its tensor was broadcast to (a 2D operand or c beside
    3D ones, a batch of 1), in ``dtype``."""
    if t.dim() > len(shape):
        return t.sum(0, dtype=torch.promote_types(t.dtype, torch.float32)).to(dtype)
    if t.dim() == 3 and shape[0] == 1 and t.shape[0] != 1:
        return t.sum(0, keepdim=True, dtype=torch.promote_types(t.dtype, torch.float32)).to(dtype)
    return t.to(dtype)


def matmul_grads(dy, a, b, c, bias, y, alpha: float, beta: float, activation: str | None,
                 precision: str | None, needs=(True, True, True, True)):
    """Gradients (a, b, c, bias) of ``y = act(alpha * a @ b + beta * c + bias)`` for ``dy`` (``needs``: which
    to compute, the others None), by tilecraft's own products: dZ = dY * act'(Z) (relu from y; the other
    activations from Z recomputed by one more product, in fp32, fp64 for fp64), dA = alpha dZ Bᵀ and dB =
    alpha Aᵀ dZ in the operands' dtype and ``precision`` (dZ rounded to it, as autocast does), dC = beta dZ,
    dbias = the column sums of dZ (fp32 sums); each summed over the batch entries its tensor was broadcast
    to. Written with differentiable calls, so it is itself differentiable."""
    if activation is None:
        dz = dy
    elif activation == "relu":
        dz = torch.ops.aten.threshold_backward(dy, y, 0)
    else:
        zt = torch.float64 if a.dtype == torch.float64 else torch.float32
        z = matmul(a, b, out_dtype=zt, alpha=alpha, beta=beta, c=c.to(zt) if c is not None and beta else None,
                   bias=bias.to(zt) if bias is not None else None, precision=precision)
        g = dy.to(zt)
        if activation == "silu":
            dz = torch.ops.aten.silu_backward(g, z)
        else:
            dz = torch.ops.aten.gelu_backward(g, z, approximate="tanh" if activation == "gelu_tanh" else "none")
    da = db = dc = dbias = None
    g = dz.to(a.dtype)
    if needs[0]:
        da = _reduce_to(matmul(g, b.transpose(-1, -2), alpha=alpha, precision=precision, out_dtype=a.dtype),
                        a.shape, a.dtype)
    if needs[1]:
        db = _reduce_to(matmul(a.transpose(-1, -2), g, alpha=alpha, precision=precision, out_dtype=b.dtype),
                        b.shape, b.dtype)
    if needs[2] and c is not None and beta:
        dc = _reduce_to(dz * beta, c.shape, c.dtype)
    if needs[3] and bias is not None:
        dbias = dz.reshape(-1, dz.shape[-1]).sum(0, dtype=torch.promote_types(dz.dtype, torch.float32)).to(bias.dtype)
    return da, db, dc, dbias


def _setup_context(ctx, inputs, output):
    a, b, out_dtype, alpha, beta, c, bias, activation, precision, scale_a, scale_b = inputs
    ctx.save_for_backward(a, b, c, bias, output)
    ctx.args = (float(alpha), float(beta), activation, precision)
    ctx.scaled = (scale_a, scale_b) != (None, None)


def _backward(ctx, dy):
    a, b, c, bias, y = ctx.saved_tensors
    alpha, beta, activation, precision = ctx.args
    if ctx.scaled or a.dtype not in DIFFERENTIABLE:  # ``matmul`` says so before the forward
        _check_differentiable(a, 1 if ctx.scaled else None, None)
    needs = tuple(ctx.needs_input_grad[i] for i in (0, 1, 5, 6))
    da, db, dc, dbias = matmul_grads(dy, a, b, c, bias, y, alpha, beta, activation, precision, needs)
    return da, db, None, None, None, dc, dbias, None, None, None, None


torch.library.register_autograd("tilecraft::matmul", _backward, setup_context=_setup_context)


class _EagerMatmul(torch.autograd.Function):
    """The registered op's body and backward in a plain autograd function for eager calls that autograd
    records (``eager_direct(..., autograd=True)``): the same kernels, without the custom op's dispatch.
    Under torch.compile, modes, transforms or the profiler the registered op runs instead."""

    @staticmethod
    def forward(ctx, a, b, c, bias, spec: Spec, precision):
        y = compute(a, b, spec, c, bias)
        ctx.save_for_backward(a, b, c, bias, y)
        ctx.args = (spec.alpha, spec.beta, spec.activation, precision)
        return y

    @staticmethod
    def backward(ctx, dy):
        a, b, c, bias, y = ctx.saved_tensors
        alpha, beta, activation, precision = ctx.args
        needs = tuple(ctx.needs_input_grad[:4])
        return (*matmul_grads(dy, a, b, c, bias, y, alpha, beta, activation, precision, needs), None, None)


__all__ = [
    "ACTIVATIONS",
    "DIFFERENTIABLE",
    "ARCHS",
    "DTYPE_NAMES",
    "OUT_DTYPES",
    "PRECISIONS",
    "Spec",
    "choose_config",
    "compile_signature",
    "compute",
    "fp32_accurate_precision",
    "gluon_ok",
    "CLUSTER_ENV",
    "clusters_enabled",
    "launch",
    "launch_plan",
    "matmul",
    "matmul_grads",
    "problem_of",
    "target_plan",
    "tma_layout",
    "tma_plan",
    "validate",
    "warmup",
]
