"""Reference acoustic wave step in plain torch, and the analytic solutions the physics tests use.

The constant-density acoustic wave equation p_tt = v**2 lap(p) + s, leapfrog in time:

    p[n+1] = 2 p[n] - p[n-1] + m * (lap_h p[n] + cpml terms) + dt**2 s[n],     m = v**2 dt**2

Every function here works on any number of axes (2D (nz, nx) or 3D (nz, ny, nx)) and on a box
``lo``/``hi`` (one start and stop per axis) of the array, so the slab decomposition and the Triton
kernels can be checked against it piece by piece. The arithmetic is elementwise torch, so a point's
value does not depend on the box it was computed in (what makes the multi-process run bit-identical
to the one-process run on this path).

``wave_step_torch`` is the CPU path of ``tilecraft.wave.simulate`` (in the field's dtype) and, in
float64, the oracle of the Triton kernels.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np
import torch

from tilecraft.reference.stencil import second_derivative_coefficients


@cache
def first_derivative_coefficients(order: int) -> tuple[Fraction, ...]:
    """Central first-difference coefficients (d_1, ..., d_R) of accuracy ``order`` = 2R:
    u'(x) ~ sum_k d_k (u(x + k h) - u(x - k h)) / h, d_k = (-1)**(k+1) (R!)**2 / (k (R-k)! (R+k)!)."""
    second_derivative_coefficients(order)  # the same order check and message
    r = order // 2
    return tuple(Fraction((-1) ** (k + 1) * math.factorial(r) ** 2, k * math.factorial(r - k) * math.factorial(r + k))
                 for k in range(1, r + 1))


def _box(lo: tuple[int, ...], hi: tuple[int, ...], axis: int | None = None, shift: int = 0) -> tuple[slice, ...]:
    return tuple(slice(a + (shift if d == axis else 0), b + (shift if d == axis else 0))
                 for d, (a, b) in enumerate(zip(lo, hi)))


def second_difference(p: torch.Tensor, axis: int, order: int, h: float, lo, hi) -> torch.Tensor:
    """(c_0 p + sum_k c_k (p[-k] + p[+k])) / h**2 along ``axis`` on the box [lo, hi)."""
    c = second_derivative_coefficients(order)
    acc = p[_box(lo, hi)] * (float(c[0]) / h**2)
    for k in range(1, order // 2 + 1):
        acc = acc + (p[_box(lo, hi, axis, -k)] + p[_box(lo, hi, axis, k)]) * (float(c[k]) / h**2)
    return acc


def first_difference(p: torch.Tensor, axis: int, order: int, h: float, lo, hi) -> torch.Tensor:
    """sum_k d_k (p[+k] - p[-k]) / h along ``axis`` on the box [lo, hi)."""
    d = first_derivative_coefficients(order)
    acc = torch.zeros_like(p[_box(lo, hi)])
    for k in range(1, order // 2 + 1):
        acc = acc + (p[_box(lo, hi, axis, k)] - p[_box(lo, hi, axis, -k)]) * (float(d[k - 1]) / h)
    return acc


def _profile(prof: torch.Tensor, axis: int, ndim: int, lo, hi) -> torch.Tensor:
    """A 1D per-axis profile cut to the box and shaped to broadcast along ``axis``."""
    shape = [1] * ndim
    shape[axis] = hi[axis] - lo[axis]
    return prof[lo[axis]:hi[axis]].reshape(shape)


def wave_step_torch(p: torch.Tensor, p_prev: torch.Tensor, m: torch.Tensor, out: torch.Tensor, order: int,
                    spacing: tuple[float, ...], lo: tuple[int, ...], hi: tuple[int, ...],
                    sponge: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
    """out[box] = 2 p - p_prev + m lap(p) on the box [lo, hi) (``out`` may be ``p_prev``).

    With ``sponge`` (one 1D profile g_a = eta_a dt / 2 per axis, g = sum_a g_a) the damped update
    p_tt + 2 eta p_t = v**2 lap p: out = (2 p - (1 - g) p_prev + m lap p) / (1 + g).
    The Laplacian sums the centre, then each axis's pairs (same grouping as the Triton kernel).
    """
    box = _box(lo, hi)
    c = second_derivative_coefficients(order)
    centre = float(c[0]) * sum(1.0 / h**2 for h in spacing)
    lap = p[box] * centre
    for axis, h in enumerate(spacing):
        for k in range(1, order // 2 + 1):
            lap = lap + (p[_box(lo, hi, axis, -k)] + p[_box(lo, hi, axis, k)]) * (float(c[k]) / h**2)
    if sponge is None:
        val = 2 * p[box] - p_prev[box] + m[box] * lap
    else:
        g = sum(_profile(prof, axis, p.dim(), lo, hi) for axis, prof in enumerate(sponge))
        val = (2 * p[box] - (1 - g) * p_prev[box] + m[box] * lap) / (1 + g)
    out[box] = val
    return out


def cpml_psi_torch(p: torch.Tensor, psi: torch.Tensor, a: torch.Tensor, b: torch.Tensor, axis: int, order: int,
                   h: float, lo, hi, origin: int = 0) -> None:
    """psi = b psi + a dp/dx_axis on the box (Pasalic & McGarry 2010, eq. for the memory variable).
    psi holds indices [origin, origin + psi.shape[axis]) of ``axis`` (the slabs only)."""
    pbox = _box(lo, hi, axis, -origin)
    aa, bb = _profile(a, axis, p.dim(), lo, hi), _profile(b, axis, p.dim(), lo, hi)
    psi[pbox] = bb * psi[pbox] + aa * first_difference(p, axis, order, h, lo, hi)


def cpml_correct_torch(p: torch.Tensor, psi: torch.Tensor, zeta: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                       m: torch.Tensor, out: torch.Tensor, axis: int, order: int, h: float, lo, hi,
                       origin: int = 0) -> None:
    """One axis's CPML terms on the box: D = d psi/dx, zeta = b zeta + a (d2p/dx2 + D),
    out += m (D + zeta). psi and zeta hold indices [origin, ...) of ``axis``."""
    box, pbox = _box(lo, hi), _box(lo, hi, axis, -origin)
    plo = tuple(v - origin if d == axis else v for d, v in enumerate(lo))
    phi = tuple(v - origin if d == axis else v for d, v in enumerate(hi))
    aa, bb = _profile(a, axis, p.dim(), lo, hi), _profile(b, axis, p.dim(), lo, hi)
    dpsi = first_difference(psi, axis, order, h, plo, phi)
    zeta[pbox] = bb * zeta[pbox] + aa * (second_difference(p, axis, order, h, lo, hi) + dpsi)
    out[box] = out[box] + m[box] * (dpsi + zeta[pbox])


def along_axis(axis: int, t_lo: int, t_hi: int, lo, hi) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box [lo, hi) with its ``axis`` bounds replaced by [t_lo, t_hi)."""
    return (tuple(t_lo if d == axis else v for d, v in enumerate(lo)),
            tuple(t_hi if d == axis else v for d, v in enumerate(hi)))


def cpml_regions(axis: int, r: int, lo, hi, regions, n_stores: int):
    """For each layer region (w0, w1, origin) that meets the box [lo, hi) along ``axis``: its store index k (0 when
    one store serves every region), origin, the overlap [s0, s1), that box (slo, shi) and it widened by R along the
    axis (nlo, nhi)."""
    for k, (w0, w1, origin) in enumerate(regions):
        s0, s1 = max(lo[axis], w0), min(hi[axis], w1)
        if s0 < s1:
            yield ((k if n_stores > 1 else 0), origin, s0, s1, *along_axis(axis, s0, s1, lo, hi),
                   *along_axis(axis, s0 - r, s1 + r, lo, hi))


def cpml_terms_torch(p: torch.Tensor, m: torch.Tensor, out: torch.Tensor, psi_old: torch.Tensor,
                     psi_new: torch.Tensor, zeta: torch.Tensor, a: torch.Tensor, b: torch.Tensor, axis: int,
                     order: int, h: float, lo, hi, regions) -> None:
    """One axis's CPML terms of the fused step on the box [lo, hi), psi double-buffered.

    ``regions``: (w0, w1, origin) per layer: the layer widened by R ([w0, w1): where the terms are
    not zero) and the index of ``axis`` where its store starts; ``psi_old``, ``psi_new``, ``zeta``
    are (K, ...) stacks, store k for region k (K = 1: one store for every region). On the box's points in [w0, w1):
    psi_new = b psi_old + a dp/dx at the points and their R neighbours (computed where p's
    neighbours exist, i.e. in [R, n - R); outside, a = 0 and psi_new = psi_old), D = dpsi_new/dx,
    zeta = b zeta + a (d2p/dx2 + D), out += m (D + zeta); psi_new and zeta are stored at the box's
    points. The same values as ``cpml_psi_torch`` then ``cpml_correct_torch`` on one psi array.
    """
    r, n = order // 2, p.shape[axis]
    for k, origin, s0, s1, slo, shi, nlo, nhi in cpml_regions(axis, r, lo, hi, regions, psi_old.shape[0]):
        tmp = psi_old[k][_box(nlo, nhi, axis, -origin)].clone()
        i0, i1 = max(s0 - r, r), min(s1 + r, n - r)
        if i0 < i1:
            sl = tuple(slice(i0 - s0 + r, i1 - s0 + r) if d == axis else slice(None) for d in range(p.dim()))
            tmp[sl] = psi_points(p, psi_old[k], a, b, axis, order, h, i0, i1, lo, hi, origin)
        tlo, thi, pbox = apply_terms(p, m, out, zeta[k], tmp, a, b, axis, order, h, s0, s1, slo, shi, origin)
        psi_new[k][pbox] = tmp[_box(tlo, thi)]


def psi_points(p: torch.Tensor, psi_k: torch.Tensor, a: torch.Tensor, b: torch.Tensor, axis: int, order: int, h: float,
               i0: int, i1: int, lo, hi, origin: int) -> torch.Tensor:
    """b psi + a dp/dx on the box's points whose index along ``axis`` is in [i0, i1) (``psi_k``: one store,
    its index along the axis ``origin`` less than the grid's)."""
    ilo, ihi = along_axis(axis, i0, i1, lo, hi)
    return (_profile(b, axis, p.dim(), ilo, ihi) * psi_k[_box(ilo, ihi, axis, -origin)]
            + _profile(a, axis, p.dim(), ilo, ihi) * first_difference(p, axis, order, h, ilo, ihi))


def apply_terms(p: torch.Tensor, m: torch.Tensor, out: torch.Tensor, zeta_k: torch.Tensor, psi: torch.Tensor,
                a: torch.Tensor, b: torch.Tensor, axis: int, order: int, h: float, s0: int, s1: int, slo, shi,
                origin: int) -> tuple:
    """One region's terms on the box [slo, shi) (its points [s0, s1) along ``axis``): D = dpsi/dx from ``psi``
    (the region's points with R more on each side along the axis), zeta = b zeta + a (d2p/dx2 + D) stored into
    ``zeta_k``, out += m (D + zeta). Returns (tlo, thi, pbox): the region's points inside ``psi`` and in the store."""
    r = order // 2
    tlo = tuple(r if d == axis else 0 for d in range(p.dim()))
    thi = tuple(r + s1 - s0 if d == axis else b_ - a_ for d, (a_, b_) in enumerate(zip(slo, shi)))
    dpsi = first_difference(psi, axis, order, h, tlo, thi)
    box, pbox = _box(slo, shi), _box(slo, shi, axis, -origin)
    aa, bb = _profile(a, axis, p.dim(), slo, shi), _profile(b, axis, p.dim(), slo, shi)
    z = bb * zeta_k[pbox] + aa * (second_difference(p, axis, order, h, slo, shi) + dpsi)
    zeta_k[pbox] = z
    out[box] = out[box] + m[box] * (dpsi + z)
    return tlo, thi, pbox


# ------------------------------------------------------------------------------------------------
# analytic solutions: p_tt = v**2 lap p + delta(x) f(t) in a homogeneous medium, p = 0 for t <= 0
# ------------------------------------------------------------------------------------------------
def ricker_np(t: np.ndarray, f0: float, t0: float) -> np.ndarray:
    a = (np.pi * f0 * (np.asarray(t, dtype=np.float64) - t0)) ** 2
    return (1 - 2 * a) * np.exp(-a)


def green_3d(r: float, t: np.ndarray, f0: float, t0: float, v: float) -> np.ndarray:
    """p(r, t) = f(t - r/v) / (4 pi v**2 r)."""
    return ricker_np(np.asarray(t) - r / v, f0, t0) / (4 * np.pi * v**2 * r)


def green_2d(r: float, t: np.ndarray, f0: float, t0: float, v: float, n_quad: int = 4000) -> np.ndarray:
    """p(r, t) = 1/(2 pi v**2) int_{r/v}^{t} f(t - s) / sqrt(s**2 - r**2/v**2) ds, with s = (r/v) cosh u
    (the integrand becomes smooth): 1/(2 pi v**2) int_0^{acosh(v t / r)} f(t - (r/v) cosh u) du.

    f is the Ricker wavelet, which is below 1e-8 of its peak before t = 0 for t0 >= 1.5/f0, so the
    integral is cut where f has decayed (t - s < 0 contributes nothing)."""
    t = np.asarray(t, dtype=np.float64)
    out = np.zeros_like(t)
    tau = r / v
    x, w = np.polynomial.legendre.leggauss(64)
    pieces = max(1, n_quad // 64)
    for i, ti in enumerate(t):
        if ti <= tau:
            continue
        umax = np.arccosh(ti / tau)
        # Gauss-Legendre on [0, umax] in pieces: the integrand oscillates with the wavelet.
        edges = np.linspace(0.0, umax, pieces + 1)
        half = 0.5 * (edges[1:] - edges[:-1])[:, None]
        u = half * x[None, :] + 0.5 * (edges[1:] + edges[:-1])[:, None]
        total = float(np.sum(half * w[None, :] * ricker_np(ti - tau * np.cosh(u), f0, t0)))
        out[i] = total / (2 * np.pi * v**2)
    return out
