"""The float64 oracle itself: coefficients, the weight layout, the slicing Laplacian and the
quadratic test field, each checked against an independent derivation."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from tilecraft.reference.stencil import (
    MAX_ORDER,
    MIN_ORDER,
    laplacian_reference,
    laplacian_torch,
    quadratic_field,
    second_derivative_coefficients,
    stencil_weights,
)

ORDERS = list(range(2, 17, 2))


def test_supported_orders():
    assert (MIN_ORDER, MAX_ORDER) == (2, 16)


def test_coefficients_order_2_and_4():
    assert second_derivative_coefficients(2) == (Fraction(-2), Fraction(1))
    assert second_derivative_coefficients(4) == (Fraction(-5, 2), Fraction(4, 3), Fraction(-1, 12))


def test_coefficients_order_6_and_8_tabulated():
    # Fornberg's table of central second-derivative weights.
    assert second_derivative_coefficients(6) == (Fraction(-49, 18), Fraction(3, 2), Fraction(-3, 20),
                                                 Fraction(1, 90))
    assert second_derivative_coefficients(8) == (Fraction(-205, 72), Fraction(8, 5), Fraction(-1, 5),
                                                 Fraction(8, 315), Fraction(-1, 560))


@pytest.mark.parametrize("order", ORDERS)
def test_coefficient_moments(order):
    """Exact for polynomials up to degree 2R+1: sum c_k k^2 = 1 (with both sides of the pair,
    2 sum c_k k^2 / 2!), sum c_k k^(2m) = 0 for 2 <= m <= R, and constants map to zero."""
    c = second_derivative_coefficients(order)
    r = order // 2
    assert len(c) == r + 1
    assert all(isinstance(ck, Fraction) for ck in c)
    assert c[0] + 2 * sum(c[1:]) == 0
    assert sum(ck * k**2 for k, ck in enumerate(c)) == 1
    for m in range(2, r + 1):
        assert sum(ck * k ** (2 * m) for k, ck in enumerate(c)) == 0, f"moment {2 * m}"
    # alternating signs, decaying magnitude: the known shape of these weights
    assert c[0] < 0 and all((ck > 0) == (k % 2 == 1) for k, ck in enumerate(c) if k)
    assert all(abs(c[k + 1]) < abs(c[k]) for k in range(1, r))


@pytest.mark.parametrize("order", ORDERS)
def test_coefficients_solve_the_moment_system(order):
    """Independent derivation: solve the (R+1)x(R+1) moment system for (c_0..c_R) in exact
    rationals and compare."""
    r = order // 2
    # rows: m = 0 (constants), 1 (k^2 moment = 1), 2..R (k^(2m) moment = 0)
    rows = [[Fraction(1)] + [Fraction(2)] * r]
    rows += [[Fraction(0)] + [Fraction(2 * k ** (2 * m)) for k in range(1, r + 1)] for m in range(1, r + 1)]
    rhs = [Fraction(0), Fraction(2)] + [Fraction(0)] * (r - 1)
    n = r + 1
    a = [row[:] + [b] for row, b in zip(rows, rhs)]
    for col in range(n):  # Gauss-Jordan in exact arithmetic
        piv = next(i for i in range(col, n) if a[i][col] != 0)
        a[col], a[piv] = a[piv], a[col]
        a[col] = [x / a[col][col] for x in a[col]]
        for i in range(n):
            if i != col and a[i][col] != 0:
                f = a[i][col]
                a[i] = [x - f * y for x, y in zip(a[i], a[col])]
    solved = tuple(a[i][n] for i in range(n))
    assert second_derivative_coefficients(order) == solved


@pytest.mark.parametrize("order", [0, 1, 3, 15, 17, 18, -2])
def test_coefficients_reject_bad_orders(order):
    with pytest.raises(ValueError):
        second_derivative_coefficients(order)


@pytest.mark.parametrize("order", [2, 4, 8, 16])
def test_stencil_weights_layout(order):
    r = order // 2
    hz, hy, hx = 0.5, 2.0, 4.0
    w = stencil_weights(order, (hz, hy, hx))
    c = [float(ck) for ck in second_derivative_coefficients(order)]
    assert len(w) == 3 * r + 1
    assert w[0] == pytest.approx(c[0] * (1 / hz**2 + 1 / hy**2 + 1 / hx**2), rel=1e-15)
    for k in range(1, r + 1):
        assert w[k] == pytest.approx(c[k] / hz**2, rel=1e-15), f"wz_{k}"
        assert w[r + k] == pytest.approx(c[k] / hy**2, rel=1e-15), f"wy_{k}"
        assert w[2 * r + k] == pytest.approx(c[k] / hx**2, rel=1e-15), f"wx_{k}"
    # all weights sum to zero (a constant field has zero Laplacian)
    assert w[0] + 2 * sum(w[1:]) == pytest.approx(0.0, abs=1e-12 * abs(w[0]))


def _naive_laplacian(u: np.ndarray, order: int, spacing) -> np.ndarray:
    """Point-by-point loop over the interior (slow; tiny grids only)."""
    c = [float(ck) for ck in second_derivative_coefficients(order)]
    r = order // 2
    nz, ny, nx = u.shape
    inv = [1 / h**2 for h in spacing]
    out = np.empty((nz - 2 * r, ny - 2 * r, nx - 2 * r))
    for z in range(r, nz - r):
        for y in range(r, ny - r):
            for x in range(r, nx - r):
                acc = c[0] * u[z, y, x] * sum(inv)
                for k in range(1, r + 1):
                    acc += c[k] * inv[0] * (u[z - k, y, x] + u[z + k, y, x])
                    acc += c[k] * inv[1] * (u[z, y - k, x] + u[z, y + k, x])
                    acc += c[k] * inv[2] * (u[z, y, x - k] + u[z, y, x + k])
                out[z - r, y - r, x - r] = acc
    return out


@pytest.mark.parametrize("order", [2, 4, 8, 16])
def test_reference_matches_naive_loops(order, field):
    r = order // 2
    shape = (2 * r + 2, 2 * r + 3, 2 * r + 4)
    spacing = (0.7, 1.1, 1.9)
    u = field(shape)
    ref = laplacian_reference(u, order, spacing)
    assert ref.shape == tuple(n - 2 * r for n in shape) and ref.dtype == torch.float64
    np.testing.assert_allclose(ref.numpy(), _naive_laplacian(u.numpy(), order, spacing), rtol=1e-12, atol=1e-12)


def test_reference_computes_in_float64(field):
    u32 = field((7, 8, 9), torch.float32)
    ref = laplacian_reference(u32, 2)
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref, laplacian_reference(u32.double(), 2), rtol=0, atol=0)
    assert laplacian_reference(u32, 2, dtype=torch.float32).dtype == torch.float32


def test_reference_scalar_spacing(field):
    u = field((7, 8, 9))
    torch.testing.assert_close(laplacian_reference(u, 4, 0.5), laplacian_reference(u, 4, (0.5, 0.5, 0.5)),
                               rtol=0, atol=0)
    torch.testing.assert_close(laplacian_reference(u, 4, 0.5), 4 * laplacian_reference(u, 4, 1.0))


@pytest.mark.parametrize("order", [2, 4, 8, 16])
def test_reference_exact_on_polynomials(order):
    """Order 2R is exact for polynomials of degree <= 2R+1 (the spacing-scaled moments)."""
    r = order // 2
    shape = (2 * r + 3, 2 * r + 4, 2 * r + 5)
    spacing = (0.5, 0.25, 0.125)
    deg = 2 * r + 1 if order <= 4 else 4  # keep the magnitudes (and rounding) modest at high order
    # u = x^deg + y^2 z: Laplacian deg (deg-1) x^(deg-2) + 2 z
    z = torch.arange(shape[0], dtype=torch.float64)[:, None, None] * spacing[0]
    y = torch.arange(shape[1], dtype=torch.float64)[None, :, None] * spacing[1]
    x = torch.arange(shape[2], dtype=torch.float64)[None, None, :] * spacing[2]
    u = (x**deg + y**2 * z).expand(shape).contiguous()
    exact = (deg * (deg - 1) * x ** (deg - 2) + 2 * z).expand(shape)[r:-r, r:-r, r:-r]
    torch.testing.assert_close(laplacian_reference(u, order, spacing), exact, rtol=1e-9, atol=1e-9)


def test_higher_order_is_more_accurate_on_smooth_fields():
    n = 40
    h = 2 * np.pi / n
    g = torch.arange(n, dtype=torch.float64) * h
    u = torch.sin(g)[:, None, None] * torch.sin(g)[None, :, None] * torch.sin(g)[None, None, :]
    errors = []
    for order in (2, 4, 8):
        r = order // 2
        exact = -3 * u[r:-r, r:-r, r:-r]
        errors.append((laplacian_reference(u, order, h) - exact).abs().max().item())
    assert errors[0] > 10 * errors[1] > 100 * errors[2], errors


def test_laplacian_torch_boundary_and_dtype(field):
    u = field((9, 10, 11), torch.float32)
    res = laplacian_torch(u, 4, (1.0, 1.0, 1.0))
    assert res.dtype == torch.float32 and res.shape == u.shape
    mask = torch.ones(u.shape, dtype=torch.bool)
    mask[2:-2, 2:-2, 2:-2] = False
    assert torch.equal(res[mask], torch.zeros(int(mask.sum())))
    torch.testing.assert_close(res[2:-2, 2:-2, 2:-2].double(), laplacian_reference(u, 4), rtol=1e-5, atol=1e-5)
    out = torch.full_like(u, float("nan"))
    assert laplacian_torch(u, 4, (1.0, 1.0, 1.0), out) is out
    assert torch.isnan(out[mask]).all()
    assert torch.equal(out[2:-2, 2:-2, 2:-2], res[2:-2, 2:-2, 2:-2])


def test_quadratic_field_values():
    shape, spacing = (4, 5, 6), (0.5, 0.25, 2.0)
    u = quadratic_field(shape, spacing)
    assert u.shape == shape and u.dtype == torch.float64
    lz, ly, lx = [(n - 1) * h for n, h in zip(shape, spacing)]
    for k, j, i in [(0, 0, 0), (1, 2, 3), (3, 4, 5), (2, 1, 0)]:
        z, y, x = k * spacing[0], j * spacing[1], i * spacing[2]
        assert u[k, j, i].item() == pytest.approx(0.5 * (x * (x - lx) + y * (y - ly) + z * (z - lz)), abs=1e-14)
    assert torch.equal(u[0, 0, 0], torch.tensor(0.0, dtype=torch.float64))
    assert torch.equal(u[-1, -1, -1], torch.tensor(0.0, dtype=torch.float64))  # zero at both ends
    assert quadratic_field(shape, spacing, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.5, 0.25, 2.0)])
def test_quadratic_field_laplacian_is_3(order, spacing):
    r = order // 2
    u = quadratic_field((2 * r + 4, 2 * r + 7, 2 * r + 5), spacing)
    torch.testing.assert_close(laplacian_reference(u, order, spacing),
                               torch.full((4, 7, 5), 3.0, dtype=torch.float64), rtol=0, atol=1e-10)
