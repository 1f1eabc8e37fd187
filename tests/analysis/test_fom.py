"""The least-traffic model and figure of merit (SPEC.md, "The stencil figure of merit")."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecraft.analysis.fom import StencilTraffic, least_time_ms, stencil_fom, stencil_traffic


def seeds_fetched_points(nz: int, ny: int, nx: int) -> int:
    """The seeds' R = 1 count: every point except the 8 corners and the 12 edges."""
    return nx * ny * nz - 8 - 4 * (nx - 2) - 4 * (ny - 2) - 4 * (nz - 2)


def needed_points(shape: tuple[int, int, int], r: int) -> int:
    """Brute force: mark every point some interior point's star stencil reads, and count them."""
    nz, ny, nx = shape
    need = torch.zeros(shape, dtype=torch.bool)
    sl = lambda lo, n: slice(lo, n - 2 * r + lo)  # noqa: E731  interior shifted by lo - r
    for k in range(-r, r + 1):
        need[sl(r + k, nz), sl(r, ny), sl(r, nx)] = True
        need[sl(r, nz), sl(r + k, ny), sl(r, nx)] = True
        need[sl(r, nz), sl(r, ny), sl(r + k, nx)] = True
    return int(need.sum())


@pytest.mark.parametrize("n", [3, 4, 5, 16, 512])
def test_r1_cube_matches_seeds_formula(n):
    t = stencil_traffic((n, n, n), 2, 8)
    assert t.fetch_bytes == seeds_fetched_points(n, n, n) * 8
    assert t.fetch_bytes // 8 == n**3 - 8 - 12 * (n - 2)
    assert t.points == (n - 2) ** 3
    assert t.write_bytes == (n - 2) ** 3 * 8


@settings(max_examples=50, deadline=None)
@given(nz=st.integers(3, 40), ny=st.integers(3, 40), nx=st.integers(3, 40))
def test_r1_any_shape_matches_seeds_formula(nz, ny, nx):
    assert stencil_traffic((nz, ny, nx), 2, 4).fetch_bytes == seeds_fetched_points(nz, ny, nx) * 4


@settings(max_examples=40, deadline=None)
@given(order=st.sampled_from(list(range(2, 17, 2))), extra=st.tuples(*[st.integers(1, 9)] * 3))
def test_fetch_counts_every_needed_point_once(order, extra):
    r = order // 2
    shape = tuple(2 * r + e for e in extra)
    t = stencil_traffic(shape, order, 1)
    assert t.fetch_bytes == needed_points(shape, r)
    a, b, c = (n - 2 * r for n in shape[::-1])
    assert t.fetch_bytes == a * b * c + 2 * r * (b * c + a * c + a * b)


@pytest.mark.parametrize("itemsize", [4, 8])
def test_bytes_scale_with_itemsize_and_flops(itemsize):
    shape, order = (20, 30, 40), 8
    t = stencil_traffic(shape, order, itemsize)
    t1 = stencil_traffic(shape, order, 1)
    assert (t.fetch_bytes, t.write_bytes) == (t1.fetch_bytes * itemsize, t1.write_bytes * itemsize)
    assert t.bytes == t.fetch_bytes + t.write_bytes
    assert t.points == 12 * 22 * 32
    assert t.flops == t.points * (9 * 4 + 1)
    d = t.as_dict()
    assert d["bytes"] == t.bytes and d["points"] == t.points and d["fetch_bytes"] == t.fetch_bytes


@pytest.mark.parametrize("shape,order", [((2, 3, 3), 2), ((3, 3, 2), 2), ((3, 2, 3), 2), ((8, 9, 9), 8),
                                         ((17, 17, 16), 16), ((0, 5, 5), 2)])
def test_no_interior_is_an_error(shape, order):
    with pytest.raises(ValueError, match="interior"):
        stencil_traffic(shape, order, 8)


def test_fom_and_roofline():
    t = StencilTraffic(points=10**9, fetch_bytes=3 * 10**12, write_bytes=10**12, flops=0)
    fom = stencil_fom(t, 1000.0)  # 1 s
    assert fom["fom_TBps"] == pytest.approx(4.0)
    assert fom["gpts"] == pytest.approx(1.0)
    assert least_time_ms(t, 4.0) == pytest.approx(1000.0)
    real = stencil_traffic((512, 512, 512), 2, 8)
    bw = 4.28
    assert stencil_fom(real, least_time_ms(real, bw))["fom_TBps"] == pytest.approx(bw)
    # twice the time, half the figure of merit
    assert stencil_fom(real, 2 * least_time_ms(real, bw))["fom_TBps"] == pytest.approx(bw / 2)


@pytest.mark.parametrize("order", [3, -2, 0, 18, 2.0, True])
def test_traffic_refuses_orders_the_stencils_do_not_have(order):
    """Order 3 ran as order 2 and -2 gave negative FLOPs before."""
    with pytest.raises(ValueError, match="order must be an even integer in 2..16"):
        stencil_traffic((10, 12, 14), order, 8)


@pytest.mark.parametrize("time_ms", [0, -1.0, float("nan"), float("inf")])
def test_fom_refuses_times_that_are_not_positive(time_ms):
    with pytest.raises(ValueError, match="time_ms must be a positive"):
        stencil_fom(stencil_traffic((10, 12, 14), 2, 8), time_ms)
