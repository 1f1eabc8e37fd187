"""Reference finite-difference Laplacian: plain torch slicing, the oracle for tests.

``laplacian_reference`` computes in float64 by default (the test oracle); ``laplacian_torch``
computes in the input dtype and is what ``tilecraft.laplacian`` runs on CPU tensors when the Triton
interpreter is not enabled.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import factorial

import torch

MIN_ORDER = 2
MAX_ORDER = 16


@lru_cache(maxsize=None)
def second_derivative_coefficients(order: int) -> tuple[Fraction, ...]:
    """Central second-difference coefficients (c_0, c_1, ..., c_R) of accuracy ``order`` = 2R.

    u''(x) ~ (c_0 u(x) + sum_k c_k (u(x - k h) + u(x + k h))) / h**2, with
    c_k = 2 (-1)**(k+1) (R!)**2 / (k**2 (R-k)! (R+k)!) and c_0 = -2 sum_k c_k (exact rationals).
    """
    if order % 2 or not MIN_ORDER <= order <= MAX_ORDER:
        raise ValueError(f"order must be an even integer in [{MIN_ORDER}, {MAX_ORDER}], got {order!r}")
    radius = order // 2
    ck = [
        Fraction(2 * (-1) ** (k + 1) * factorial(radius) ** 2, k * k * factorial(radius - k) * factorial(radius + k))
        for k in range(1, radius + 1)
    ]
    return (-2 * sum(ck),) + tuple(ck)


def stencil_weights(order: int, spacing: tuple[float, float, float]) -> list[float]:
    """Weights in the kernels' layout: [centre, wz_1..wz_R, wy_1..wy_R, wx_1..wx_R].

    ``spacing`` is (hz, hy, hx); wa_k = c_k / ha**2; centre = c_0 * sum_a 1/ha**2.
    """
    c = second_derivative_coefficients(order)
    inv = [1.0 / (h * h) for h in spacing]  # z, y, x
    weights = [float(c[0]) * sum(inv)]
    for inv_h2 in inv:
        weights += [float(ck) * inv_h2 for ck in c[1:]]
    return weights


def _interior_laplacian(u: torch.Tensor, order: int, spacing: tuple[float, float, float]) -> torch.Tensor:
    c = second_derivative_coefficients(order)
    r = order // 2
    nz, ny, nx = u.shape
    core = u[r:nz - r, r:ny - r, r:nx - r]
    hz, hy, hx = spacing
    acc = core * (float(c[0]) * (1 / hx**2 + 1 / hy**2 + 1 / hz**2))
    for k in range(1, r + 1):
        ck = float(c[k])
        acc = acc + (u[r:nz - r, r:ny - r, r - k:nx - r - k] + u[r:nz - r, r:ny - r, r + k:nx - r + k]) * (ck / hx**2)
        acc = acc + (u[r:nz - r, r - k:ny - r - k, r:nx - r] + u[r:nz - r, r + k:ny - r + k, r:nx - r]) * (ck / hy**2)
        acc = acc + (u[r - k:nz - r - k, r:ny - r, r:nx - r] + u[r + k:nz - r + k, r:ny - r, r:nx - r]) * (ck / hz**2)
    return acc


def laplacian_torch(u: torch.Tensor, order: int, spacing: tuple[float, float, float],
                    out: torch.Tensor | None = None) -> torch.Tensor:
    """Laplacian of u in u's dtype and on u's device by torch slicing; boundary as in
    ``tilecraft.laplacian`` (zeros when allocated here, untouched in a given ``out``)."""
    r = order // 2
    if out is None:
        out = torch.zeros_like(u, memory_format=torch.contiguous_format)
    nz, ny, nx = u.shape
    out[r:nz - r, r:ny - r, r:nx - r] = _interior_laplacian(u, order, spacing)
    return out


def laplacian_reference(u: torch.Tensor, order: int = 2, spacing: float | tuple[float, float, float] = 1.0,
                        dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Float64 (by default) Laplacian of the interior, shape (nz-2R, ny-2R, nx-2R), on u's device."""
    if not isinstance(spacing, tuple):
        spacing = (float(spacing),) * 3
    return _interior_laplacian(u.to(dtype), order, spacing)


def quadratic_field(shape: tuple[int, int, int], spacing: tuple[float, float, float],
                    dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu") -> torch.Tensor:
    """u = (x(x-Lx) + y(y-Ly) + z(z-Lz)) / 2 on the grid; its Laplacian is exactly 3 and every
    central difference of order >= 2 reproduces it up to rounding."""
    nz, ny, nx = shape
    hz, hy, hx = spacing
    z = torch.arange(nz, dtype=torch.float64, device=device) * hz
    y = torch.arange(ny, dtype=torch.float64, device=device) * hy
    x = torch.arange(nx, dtype=torch.float64, device=device) * hx
    lz, ly, lx = (nz - 1) * hz, (ny - 1) * hy, (nx - 1) * hx
    u = 0.5 * ((x * (x - lx))[None, None, :] + (y * (y - ly))[None, :, None] + (z * (z - lz))[:, None, None])
    return u.to(dtype)
