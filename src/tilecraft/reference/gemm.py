"""The float64 oracle of ``tilecraft.matmul`` (and the torch path CPU tensors take without the
Triton interpreter).

``out = act(alpha * sa[m] * sb[n] * (A @ B) + beta * C + bias[n])``, computed in float64 (int64 for
int8 inputs, so the int32 result is exact and wraps as the kernel's int32 arithmetic does), then
cast to the output dtype. ``beta == 0`` means C is not read (NaN in C does not leak in), as in
``torch.addmm``.
"""
from __future__ import annotations

import math

import torch

# Relative-norm error bounds the tests use, ||out - ref|| / ||ref||, per operand dtype/precision.
# Documented in docs/gemm.md; each leaves room over the rounding of the output dtype and the
# accumulation at the tested K (up to a few hundred).
TOLERANCES: dict[str, float] = {
    "fp64": 1e-12,
    "fp32-ieee": 1e-5,
    "fp32-accurate": 1e-5,
    "tf32": 3e-3,
    "fp16": 2e-3,
    "bf16": 1e-2,
    "fp8_e4m3": 7e-2,
    "fp8_e5m2": 1.4e-1,
    "int8": 0.0,
}


def activation_torch(x: torch.Tensor, activation: str | None) -> torch.Tensor:
    if activation is None:
        return x
    if activation == "relu":
        return torch.relu(x)
    if activation == "gelu":
        return torch.nn.functional.gelu(x)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(x, approximate="tanh")
    if activation == "silu":
        return torch.nn.functional.silu(x)
    raise ValueError(f"unknown activation {activation!r}")


def _wide(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in (torch.int8, torch.uint8, torch.int32, torch.int16, torch.int64):
        return t.to(torch.int64)
    return t.to(torch.float64)


def matmul_reference(a: torch.Tensor, b: torch.Tensor, *, out_dtype: torch.dtype, alpha: float = 1.0,
                     beta: float = 0.0, c: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                     activation: str | None = None, scale_a: torch.Tensor | None = None,
                     scale_b: torch.Tensor | None = None) -> torch.Tensor:
    """The op in float64 (int64 for integer inputs), cast to ``out_dtype`` at the end.

    Shapes as in ``tilecraft.matmul``: a (M, K) or (batch, M, K), b (K, N) or (batch, K, N);
    bias (N,); scale_a holds 1 or M values (shape (), (1,), (M,) or (M, 1)), scale_b 1 or N
    ((), (1,), (N,) or (1, N)), shared by every batch entry.
    """
    wa, wb = _wide(a), _wide(b)
    if wa.dtype == torch.int64:
        # torch has no int64 matmul on every backend; float64 is exact while |sum| < 2**53
        # (int8 products are < 2**14, so any K below 2**39 qualifies), then back to int64.
        x = torch.matmul(wa.to(torch.float64), wb.to(torch.float64)).round().to(torch.int64)
    else:
        x = torch.matmul(wa, wb)
    integer_out = not out_dtype.is_floating_point
    if not integer_out:
        x = x.to(torch.float64)
    m, n = x.shape[-2], x.shape[-1]
    if scale_a is not None:
        x = x * _scale_view(scale_a, m, rows=True).to(torch.float64)
    if scale_b is not None:
        x = x * _scale_view(scale_b, n, rows=False).to(torch.float64)
    if alpha != 1:
        x = x * (int(alpha) if integer_out else alpha)
    if beta != 0 and c is not None:
        x = x + (int(beta) if integer_out else beta) * _wide(c)
    if bias is not None:
        x = x + _wide(bias)
    if integer_out:
        x = torch.relu(x) if activation == "relu" else x
        # int32 arithmetic wraps: reduce mod 2**32 into the signed range
        x = ((x + 2**31) % 2**32) - 2**31
        return x.to(out_dtype)
    return activation_torch(x, activation).to(out_dtype)


def _scale_view(s: torch.Tensor, extent: int, rows: bool) -> torch.Tensor:
    """A scale tensor shaped to broadcast over (…, M, N)."""
    if s.numel() == 1 and s.dim() <= 1:
        return s.reshape(())
    flat = s.reshape(extent)
    return flat[:, None] if rows else flat[None, :]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (inf if out has a NaN where ref has none; 0 for 0/0)."""
    o, r = out.to(torch.float64), ref.to(torch.float64)
    finite = torch.isfinite(r)
    if not bool(torch.equal(torch.isfinite(o), finite)):
        return math.inf
    if not bool(torch.equal(o[~finite].nan_to_num(), r[~finite].nan_to_num())) and (~finite).any():
        # NaN/Inf in the same places with the same signs: NaN == NaN via nan_to_num
        return math.inf
    num = torch.linalg.vector_norm(o[finite] - r[finite]).item()
    den = torch.linalg.vector_norm(r[finite]).item()
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return num / den
