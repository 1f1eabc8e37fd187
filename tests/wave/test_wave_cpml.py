"""The step with the CPML folded in (``ops.cpml_step``): the torch path against the previous
two-kernel path (bitwise), every Triton variant against the float64 torch step (interpreter), the
box decomposition, bad inputs."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from tilecraft.ops import wave as ops
from tilecraft.ops.wave import CpmlConfig, WaveConfig
from tilecraft.reference.wave import cpml_correct_torch, cpml_psi_torch, wave_step_torch
from tilecraft.wave.boundaries import Layout, cpml_profiles
from tilecraft.wave.solver import cpml_axis

SMALL = WaveConfig(block_y=4, block_x=16, block_z=4, num_warps=1)
VARIANTS = {  # tiles that do not divide the boxes: edge tiles and several boxes per launch run
    "recompute": CpmlConfig(4, 8, 4, 1),
    "recompute-loop": CpmlConfig(4, 16, 5, 1, unroll=False),
    "recompute-by-axes": CpmlConfig(4, 16, 5, 1, by_axes=True),
    "two-phase": CpmlConfig(4, 16, 4, 1, two_phase=True, by_axes=True),
    "unfused": CpmlConfig(4, 8, 4, 1, fused=False),
    "march": CpmlConfig(4, 16, 3, 1, march=True, narrow=(4, 16, 1)),
    # psi_new by the marching psi kernel (tiles per axis z, y, x; odd plane counts), the interior first
    "march-psi": CpmlConfig(4, 16, 3, 1, march=True, narrow=(4, 16, 1),
                            psi_tiles=((4, 16, 3, 1), (2, 16, 5, 1), (4, 16, 2, 1)), interior_first=True),
}
CASES = [  # model shape, order, layer width, free surface
    ((9, 10, 11), 4, 3, False),
    ((12, 9, 13), 8, 5, True),
    ((7, 8, 9), 2, 2, False),
    ((20, 23), 8, 6, False),
    ((15, 17), 6, 4, True),
    ((5, 21), 4, 1, False),  # axis 0: the two layers' widened slabs meet (one store)
]


def _state(model_shape, order, width, free_surface, dtype, seed=0):
    """Fields and CPML axes as simulate builds them, with random memory variables on the layers'
    points of the updated box (zero elsewhere, as a run keeps them)."""
    layout = Layout(model_shape, order, width, free_surface)
    shape, (lo, hi) = layout.shape, layout.updated
    gen = torch.Generator().manual_seed(seed)
    p, pp = (torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5 for _ in range(2))
    m = torch.rand(shape, generator=gen, dtype=torch.float64) * 0.1
    axes = []
    for axis in range(len(shape)):
        a, b = cpml_profiles(layout, axis, 3000.0, 10.0 + axis, 1e-3, 15.0)
        ax = cpml_axis(layout, axis, 10.0 + axis, a, b, lo[0], hi[0], 0, shape)
        for k, (_w0, _w1, origin) in enumerate(ax.regions):
            k_ = k if ax.zeta.shape[0] > 1 else 0
            mask = torch.ones(ax.zeta.shape[1:], dtype=torch.float64)
            for d in range(len(shape)):
                pos = torch.arange(mask.shape[d]) + (origin if d == axis else 0)
                keep = (pos >= lo[d]) & (pos < hi[d])
                if d == axis:
                    keep &= a[pos.clamp(max=shape[d] - 1)] != 0
                mask = mask * keep.double().reshape([-1 if i == d else 1 for i in range(len(shape))])
            for t in (ax.psi[0], ax.zeta):
                t[k_] = (torch.rand(t[k_].shape, generator=gen, dtype=torch.float64) - 0.5) * mask
        axes.append(ax)
    cast = [t.to(dtype) for t in (p, pp, m)]
    axes = [replace(ax, a=ax.a.to(dtype), b=ax.b.to(dtype), psi=[t.to(dtype) for t in ax.psi],
                    zeta=ax.zeta.to(dtype), _tables={}) for ax in axes]
    return layout, (*cast,), axes


def _copy(axes, dtype=None):
    return [replace(ax, a=ax.a.to(dtype or ax.a.dtype), b=ax.b.to(dtype or ax.b.dtype),
                    psi=[t.to(dtype or t.dtype, copy=True) for t in ax.psi],
                    zeta=ax.zeta.to(dtype or ax.zeta.dtype, copy=True), _tables={}) for ax in axes]


@pytest.mark.parametrize("case", CASES)
def test_torch_path_is_bitwise_the_previous_two_kernel_path(case):
    """psi = b psi + a dp/dx on the layers, then zeta and the correction on the widened layers (the
    path simulate ran before), against cpml_step's torch backend (psi double-buffered, psi_new at
    the neighbours recomputed): the same bits."""
    layout, (p, pp, m), axes = _state(*case, torch.float64)
    order = case[1]
    lo, hi = layout.updated
    spacing = tuple(10.0 + d for d in range(p.dim()))
    old = _copy(axes)
    out_old = pp.clone()
    wave_step_torch(p, pp, m, out_old, order, spacing, lo, hi)
    for ax in old:
        layers = layout.slabs(ax.axis, 0)
        for k, (w0, w1, origin) in enumerate(ax.regions):
            k_ = k if ax.zeta.shape[0] > 1 else 0
            for (l0, l1) in (layers[k:k + 1] if len(layers) == len(ax.regions) else layers):
                blo, bhi = list(lo), list(hi)
                blo[ax.axis], bhi[ax.axis] = l0, l1
                cpml_psi_torch(p, ax.psi[0][k_], ax.a, ax.b, ax.axis, order, ax.h, tuple(blo), tuple(bhi), origin)
        for k, (w0, w1, origin) in enumerate(ax.regions):
            k_ = k if ax.zeta.shape[0] > 1 else 0
            blo, bhi = list(lo), list(hi)
            blo[ax.axis], bhi[ax.axis] = w0, w1
            cpml_correct_torch(p, ax.psi[0][k_], ax.zeta[k_], ax.a, ax.b, m, out_old, ax.axis, order, ax.h,
                               tuple(blo), tuple(bhi), origin)
    new = _copy(axes)
    out_new = pp.clone()
    ops.cpml_step(p, pp, m, out_new, order, spacing, lo, hi, new, "torch")
    assert torch.equal(out_new, out_old)
    for a_new, a_old in zip(new, old):
        assert torch.equal(a_new.zeta, a_old.zeta)
        assert torch.equal(a_new.psi[1], a_old.psi[0])  # psi_new where the old path updated in place
    assert any(float(a.zeta.abs().max()) > 0 for a in new)


@pytest.mark.parametrize("case,variant", [(c, v) for i, c in enumerate(CASES) for v in VARIANTS
                                           if i in (1, 3) or v in ("recompute", "unfused", "march", "march-psi")])
def test_triton_variants_match_float64(case, variant):
    dtype = torch.float32 if case[1] in (4, 8) else torch.float64
    layout, (p, pp, m), axes = _state(*case, dtype, seed=3)
    order = case[1]
    lo, hi = layout.updated
    spacing = tuple(10.0 + d for d in range(p.dim()))
    ref_axes = _copy(axes, torch.float64)
    ref = pp.to(torch.float64, copy=True)
    ops.cpml_step(p.double(), pp.double(), m.double(), ref, order, spacing, lo, hi, ref_axes, "torch")
    got_axes = _copy(axes)
    out = torch.full_like(pp, math.nan)  # poisoned: every point of the box must be written
    ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, got_axes, "triton", SMALL, VARIANTS[variant])
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    tol = 2e-6 if dtype == torch.float32 else 1e-13
    assert not torch.isnan(out[box]).any()
    assert float((out[box].double() - ref[box]).abs().max()) <= tol * float(ref[box].abs().max())
    outside = torch.ones(out.shape, dtype=torch.bool)
    outside[box] = False
    assert torch.isnan(out[outside]).all()  # nothing outside the box written
    for g, r in zip(got_axes, ref_axes):
        for a, b in ((g.psi[1], r.psi[1]), (g.zeta, r.zeta)):
            assert float((a.double() - b).abs().max()) <= tol * max(float(b.abs().max()), 1e-30)
        assert torch.equal(g.psi[0], axes[[x.axis for x in axes].index(g.axis)].psi[0])  # psi_old only read


def test_sub_boxes_give_the_whole_box():
    """Two launches over the planes [R, k) and [k, n - R) (what the slabs' interior and edge calls
    do) equal one launch over the whole box, bit for bit."""
    layout, (p, pp, m), axes = _state((10, 7, 9), 4, 3, False, torch.float32, seed=5)
    lo, hi = layout.updated
    spacing = (10.0, 11.0, 12.0)
    for cfg in (VARIANTS["recompute"], VARIANTS["two-phase"], VARIANTS["unfused"], VARIANTS["march"]):
        whole_axes, split_axes = _copy(axes), _copy(axes)
        whole, split = pp.clone(), pp.clone()
        ops.cpml_step(p, pp.clone(), m, whole, 4, spacing, lo, hi, whole_axes, "triton", SMALL, cfg)
        for z0, z1 in ((lo[0], 6), (6, hi[0])):
            ops.cpml_step(p, split, m, split, 4, spacing, (z0,) + lo[1:], (z1,) + hi[1:], split_axes, "triton", SMALL,
                          cfg)
        assert torch.equal(whole, split)
        for a, b in zip(whole_axes, split_axes):
            assert torch.equal(a.zeta, b.zeta) and torch.equal(a.psi[1], b.psi[1])


@pytest.mark.parametrize("by_axes", [False, True])
def test_boxes_cover_the_box_once(by_axes):
    lo3, hi3 = (4, 4, 4), (40, 31, 50)
    layers = [[(4, 14), (30, 40)], [(4, 10)], [(4, 12), (42, 50)]]
    interior, groups = ops.cpml_boxes(lo3, hi3, layers, by_axes)
    count = torch.zeros(44, 35, 54, dtype=torch.int32)
    boxes = [interior] + [b for _, bs in groups for b in bs]
    for (z0, z1), (y0, y1), (x0, x1) in boxes:
        count[z0:z1, y0:y1, x0:x1] += 1
    assert interior == ((14, 30), (10, 31), (12, 42))
    assert int(count[4:40, 4:31, 4:50].min()) == 1 and int(count.max()) == 1 and int(count.sum()) == 36 * 27 * 46
    if by_axes:  # faces one launch per axis, compiled for that axis only; edges and corners together
        assert [axes for axes, _ in groups] == [(0,), (1,), (2,), (0, 1, 2)]


def test_bad_inputs_raise_before_any_launch():
    layout, (p, pp, m), axes = _state((9, 10, 11), 4, 3, False, torch.float32)
    lo, hi = layout.updated
    args = (p, pp, m, pp.clone(), 4, (1.0, 1.0, 1.0), lo, hi)
    with pytest.raises(ValueError, match="distinct axes"):
        ops.cpml_step(*args, [axes[0], axes[0]], "triton")
    with pytest.raises(ValueError, match="profile a"):
        ops.cpml_step(*args, [replace(axes[1], a=axes[1].a[:-1])], "triton")
    with pytest.raises(ValueError, match="memory variables"):
        ops.cpml_step(*args, [replace(axes[2], zeta=axes[2].zeta.double())], "triton")
    with pytest.raises(ValueError, match="does not fit"):
        ops.cpml_step(*args, [replace(axes[0], regions=((1, 5, 0),) + axes[0].regions[1:])], "triton")
    with pytest.raises(ValueError, match="increasing intervals"):
        ops.CpmlAxis.create(p.shape, 0, 1.0, axes[0].a, axes[0].b, [(10, 14), (2, 6)], 4)


def test_march_matches_the_unfused_launches():
    """The layers' z-march against the unfused launches (the previous GPU default) on one state:
    p_next, psi_new and zeta agree to rounding, every point of the box written (NaN-poisoned), in
    place (out is p_prev) too, 2D and 3D."""
    for case in ((CASES[1], torch.float32), (CASES[4], torch.float64), ((6, 9, 26), torch.float32)):
        shape, dtype = case
        layout, (p, pp, m), axes = _state(*(shape if len(shape) == 4 else (shape, 4, 2, False)), dtype, seed=9)
        order = layout.order
        lo, hi = layout.updated
        spacing = tuple(10.0 + d for d in range(p.dim()))
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        res = []
        for cfg, in_place in ((VARIANTS["unfused"], False), (VARIANTS["march"], False), (VARIANTS["march"], True),
                              (VARIANTS["march-psi"], True)):
            got = _copy(axes)
            out = pp.clone()
            if in_place:  # out is p_prev
                ops.cpml_step(p, out, m, out, order, spacing, lo, hi, got, "triton", SMALL, cfg)
            else:
                out[box] = math.nan
                ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, got, "triton", SMALL, cfg)
                assert not torch.isnan(out).any()
            assert torch.equal(out[~_mask(out.shape, box)], pp[~_mask(out.shape, box)])
            res.append((out, got))
        (a_out, a_axes), (b_out, b_axes), (c_out, c_axes), (d_out, d_axes) = res
        assert torch.equal(b_out, c_out) and all(torch.equal(x.zeta, y.zeta) for x, y in zip(b_axes, c_axes))
        # the marching psi kernel (in place, the interior first): the same psi_new bits as the slab
        # kernel in the interpreter, so the same step
        assert torch.equal(b_out, d_out)
        assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(b_axes, d_axes))
        tol = 2e-6 if dtype == torch.float32 else 1e-13
        assert float((a_out[box] - b_out[box]).abs().max()) <= tol * float(a_out[box].abs().max())
        for x, y in zip(a_axes, b_axes):
            assert torch.equal(x.psi[1], y.psi[1])  # the same psi launches
            assert float((x.zeta - y.zeta).abs().max()) <= tol * max(float(x.zeta.abs().max()), 1e-30)


def _mask(shape, box):
    m = torch.zeros(shape, dtype=torch.bool)
    m[box] = True
    return m


@pytest.mark.parametrize("shape,order,width", [((40, 31, 50), 8, 20), ((9, 10, 11), 4, 3), ((5, 21), 4, 1)])
def test_march_plan_covers_the_box_once_without_shared_vectors(shape, order, width):
    """The march plan: interior and layer boxes cover the updated box once; each box's active axes
    are those whose region holds it; within one launch no two boxes' tile columns meet on a row."""
    layout, (p, _pp, _m), axes = _state(shape, order, width, False, torch.float32)
    lo, hi = layout.updated
    ndim = p.dim()
    lo3 = tuple(lo) if ndim == 3 else (0,) + tuple(lo)
    hi3 = tuple(hi) if ndim == 3 else (1,) + tuple(hi)
    kaxes = {ax.axis + 3 - ndim: ax for ax in axes}
    p3 = p if ndim == 3 else p.unsqueeze(0)
    cfg = CpmlConfig(8, 64, 8, 8, march=True, narrow=(16, 32, 4))
    interiors, scale, launches = ops.layer_plan(lo3, hi3, kaxes, ndim, p3.shape[2], cfg, 4, p3.stride()[:2])
    count = torch.zeros(p3.shape, dtype=torch.int32)
    for (z0, z1), (y0, y1), (x0, x1) in interiors:
        count[z0:z1, y0:y1, x0:x1] += 1
        for d, (a, b) in enumerate(((z0, z1), (y0, y1), (x0, x1))):
            for w0, w1, _ in kaxes[d].regions if d in kaxes else ():
                assert b <= w0 or w1 <= a  # no CPML term in an interior box
    for axes_, (by, bx, _bz, _w), table, n_prog in launches:
        assert bx == (32 if 2 in axes_ else 64)
        covers = []
        for z0, z1, y0, y1, x0, x1, x_org, first, *_ in table:
            count[z0:z1, y0:y1, x0:x1] += 1
            for d, (a, b) in enumerate(((z0, z1), (y0, y1), (x0, x1))):
                inside = any(w0 <= a and b <= w1 for w0, w1, _ in (kaxes[d].regions if d in kaxes else ()))
                assert inside == (d in axes_)
            cover = (x_org, x_org + -(-(x1 - x_org) // bx) * bx)
            for cz, cy, cx in covers:
                assert cz[1] <= z0 or z1 <= cz[0] or cy[1] <= y0 or y1 <= cy[0] or cx[1] <= cover[0] or cover[1] <= cx[0]
            covers.append(((z0, z1), (y0, y1), cover))
        assert n_prog > 0
    box = tuple(slice(a, b) for a, b in zip(lo3, hi3))
    assert int(count[box].min()) == 1 and int(count.max()) == 1 and int(count.sum()) == count[box].numel()
    if shape == (40, 31, 50):
        assert scale == 4 and len(launches) == 7  # aligned: 128-bit accesses, one launch per set of axes


def test_x_stores_start_and_end_on_whole_vectors():
    _layout, _fields, axes = _state((12, 9, 13), 6, 5, True, torch.float32)
    x = axes[-1]
    assert all(o % ops.STORE_ALIGN == 0 for _, _, o in x.regions) and x.extent % ops.STORE_ALIGN == 0


def test_split_interior_and_aligned_x_tiles_give_the_march_bits():
    """``split_interior`` (the interior cut so no tile passes its box), ``x_align=4`` with 8-column
    x tiles (layers and psi) and ``streams`` (a no-op off CUDA): the plain march's bits, p_next, psi
    and zeta, in place too, every point of the box written."""
    shape = (6, 9, 26)
    layout, (p, pp, m), axes = _state(shape, 4, 2, False, torch.float32, seed=3)
    lo, hi = layout.updated
    spacing = (10.0, 11.0, 12.0)
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    base = VARIANTS["march-psi"]
    split = replace(base, x_align=4, split_interior=True, streams=True, side_priority=-1,
                    march_tiles=((4, 16, 3, 1), (2, 16, 5, 1), (4, 8, 2, 1), (4, 8, 3, 1), (2, 8, 2, 1)),
                    psi_tiles=((4, 16, 3, 1), (2, 16, 5, 1), (4, 8, 2, 1)))
    for in_place in (False, True):
        res = []
        for cfg in (base, split):
            got = _copy(axes)
            out = pp.clone()
            if not in_place:
                out[box] = math.nan
            ops.cpml_step(p, out if in_place else pp, m, out, 4, spacing, lo, hi, got, "triton", SMALL, cfg)
            assert not torch.isnan(out).any()
            res.append((out, got))
        (a, a_ax), (b, b_ax) = res
        assert torch.equal(a, b)
        assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(a_ax, b_ax))


def test_streams_schedule_orders_only_the_launches_that_clash_with_the_interior():
    """``_march_schedule`` on a 3D grid with 24-column x layers: with 32-column x-face tiles the x
    faces rewrite interior columns (late: after the interior), nothing else does; with 8-column x
    tiles from multiples of 4 and the split interior nothing clashes. Checked against a brute-force
    count of the columns each launch stores."""
    layout, (p, _pp, _m), axes = _state((24, 20, 300), 8, 20, False, torch.float32)
    lo, hi = layout.updated
    kaxes = {ax.axis: ax for ax in axes}
    tiles = ((4, 128, 8, 4), (4, 128, 8, 4), (8, 32, 4, 2), (8, 32, 2, 2), (4, 32, 2, 1))
    x8 = ((4, 128, 8, 4), (4, 128, 8, 4), (32, 8, 4, 2), (8, 32, 2, 2), (4, 32, 2, 1))
    for cfg, want in ((CpmlConfig(4, 128, 8, 4, march=True, march_tiles=tiles), [False, False, True] + [False] * 4),
                      (CpmlConfig(4, 128, 8, 4, march=True, march_tiles=x8, x_align=4, split_interior=True),
                       [False] * 7)):
        interiors, _launches, _strides, (late, wait_all, _lanes), _fuse = ops._march_plan(p, 8, tuple(lo), tuple(hi), kaxes, 3, cfg,
                                                                           128)
        assert late == want and not wait_all
        assert len(interiors) == (2 if cfg.split_interior else 1)
        # brute force: the columns each launch stores (its tiles' columns within its rows)
        _, _, plan = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, p.shape[2], cfg, 4, p.stride()[:2])
        inner = torch.zeros(p.shape, dtype=torch.bool)
        owned = torch.zeros(p.shape, dtype=torch.bool)
        for blo, bhi, x_org in interiors:
            c1 = min(x_org + -(-(bhi[2] - x_org) // 128) * 128, p.shape[2])
            inner[blo[0]:bhi[0], blo[1]:bhi[1], x_org:c1] = True
            owned[blo[0]:bhi[0], blo[1]:bhi[1], blo[2]:bhi[2]] = True
        for (_axes, tile, table, _n), lt in zip(plan, late):
            mine = torch.zeros(p.shape, dtype=torch.bool)
            stores = torch.zeros(p.shape, dtype=torch.bool)
            for z0, z1, y0, y1, x0, x1, x_org, *_ in table:
                stores[z0:z1, y0:y1, x_org:min(x_org + -(-(x1 - x_org) // tile[1]) * tile[1], p.shape[2])] = True
                mine[z0:z1, y0:y1, x0:x1] = True
            assert lt == bool((stores & owned).any() or (inner & mine).any())


def test_side_lanes_keep_clashing_launches_on_one_stream():
    """``_side_lanes`` (``CpmlConfig.side_streams``): launches whose boxes clash share a side stream (in
    plan order), independent groups go to the least-loaded stream, late launches get -1; one stream
    gives 0 everywhere. On the plan of a 3D grid too: every clashing pair of side launches shares its
    stream, and the config refuses a count that is not a positive int."""
    box = lambda z, y, x0, x1, c0, c1: (z, z + 4, y, y + 4, x0, x1, c0, c1)  # noqa: E731
    a = [box(0, 0, 0, 8, 0, 16)]
    b = [box(0, 0, 8, 16, 8, 16)]  # same rows, a's tiles store into b's columns
    c = [box(8, 0, 0, 8, 0, 8)]
    d = [box(8, 2, 4, 12, 0, 16)]  # meets c's rows and columns
    e = [box(16, 0, 0, 8, 0, 8)]
    f = [box(0, 0, 0, 8, 0, 8)]  # clashes with a, but late
    covers, late = [a, b, c, d, e, f], [False] * 5 + [True]
    assert ops._side_lanes(covers, late, 2) == [0, 0, 1, 1, 0, -1]
    assert ops._side_lanes(covers, late, 4) == [0, 0, 1, 1, 2, -1]
    assert ops._side_lanes(covers, late, 1) == [0] * 5 + [-1]
    layout, (p, _pp, _m), axes = _state((24, 20, 300), 8, 20, False, torch.float32)
    lo, hi = layout.updated
    kaxes = {ax.axis: ax for ax in axes}
    tiles = ((4, 128, 8, 4), (4, 128, 8, 4), (8, 32, 4, 2), (8, 32, 2, 2), (4, 32, 2, 1))
    cfg = CpmlConfig(4, 128, 8, 4, march=True, march_tiles=tiles, side_streams=3)
    _i, _l, _s, (late, _wait_all, lanes), _fuse = ops._march_plan(p, 8, tuple(lo), tuple(hi), kaxes, 3, cfg, 128)
    _, _, plan = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, p.shape[2], cfg, 4, p.stride()[:2])
    covers = [[ops._cover(((r[0], r[1]), (r[2], r[3]), (r[4], r[5])), tile[1], p.shape[2], r[6]) for r in table]
              for _axes, tile, table, _n in plan]
    assert [lane == -1 for lane in lanes] == late and len(set(lanes) - {-1}) == 3
    kinds = [ops._box_kind(a) for a, *_ in plan]
    assert kinds == sorted(kinds) and set(kinds) == {0, 1, 2, 3, 4}
    for order in ((3, 4), (4, 3, 2, 1, 0), (2,)):  # layer_order: those kinds first, in that order, then the plan's
        _, _, ordered = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, p.shape[2], replace(cfg, layer_order=order), 4,
                                       p.stride()[:2])
        got = [ops._box_kind(a) for a, *_ in ordered]
        want = [k for k in order for _ in range(kinds.count(k))] + [k for k in kinds if k not in order]
        assert got == want and sorted(map(str, ordered)) == sorted(map(str, plan))
    for i in range(len(plan)):
        for j in range(i):
            if not late[i] and not late[j] and any(ops._clash(x, y) for x in covers[i] for y in covers[j]):
                assert lanes[i] == lanes[j]
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="side_streams"):
            CpmlConfig(4, 128, 8, 4, side_streams=bad)


def _same_step_bits(p, pp, m, order, spacing, lo, hi, axes, a_cfg, b_cfg):
    """One ``cpml_step`` (interpreter, ``SMALL`` interior) with each of two CPML configurations, out of place and in
    place: the same p_next, psi_new and zeta bits."""
    for in_place in (False, True):
        res = []
        for cfg in (a_cfg, b_cfg):
            got = _copy(axes)
            out = pp.clone()
            ops.cpml_step(p, out if in_place else pp, m, out, order, spacing, lo, hi, got, "triton", SMALL, cfg)
            res.append((out, got))
        (a, a_ax), (b, b_ax) = res
        assert torch.equal(a, b)
        assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(a_ax, b_ax))


@pytest.mark.parametrize("shape,order,width", [((6, 9, 26), 4, 2), ((14, 30), 8, 6), ((6, 20), 4, 19)])
def test_psi_x_inside_the_layer_launches_gives_the_march_bits(shape, order, width):
    """``psi_x_fused``: no psi launch for x, the x layer launches compute psi_x themselves (their
    x tile holds the whole x store): the same p_next, psi_new and zeta bits as the marching psi
    launch (interpreter), in place too; the plan says it fused. (At order 4 and 19 points the right x store
    ends at its tile's end.)"""
    layout, (p, pp, m), axes = _state(shape, order, width, False, torch.float32, seed=4)
    lo, hi = layout.updated
    ndim = p.dim()
    spacing = tuple(10.0 + d for d in range(ndim))
    base = VARIANTS["march-psi"]
    fused = replace(base, psi_x_fused=True, narrow=(4, 32, 1))
    p3 = p if ndim == 3 else p.unsqueeze(0)
    lo3 = tuple(lo) if ndim == 3 else (0,) + tuple(lo)
    hi3 = tuple(hi) if ndim == 3 else (1,) + tuple(hi)
    kaxes = {ax.axis + 3 - ndim: ax for ax in axes}
    assert ops._march_plan(p3, order, lo3, hi3, kaxes, ndim, fused, SMALL.block_x)[-1]
    assert not ops._march_plan(p3, order, lo3, hi3, kaxes, ndim, base, SMALL.block_x)[-1]
    _same_step_bits(p, pp, m, order, spacing, lo, hi, axes, base, fused)


@pytest.mark.parametrize("shape,order,width", [((5, 7, 70), 4, 2), ((14, 30), 8, 6)])
def test_x_face_pairs_give_the_same_bits(shape, order, width):
    """``x_face_pairs``: the x faces' launch (two boxes of as many programs) interleaves their programs; each
    program computes the same tile, so p_next, psi_new and zeta keep their bits (interpreter), in place too; the
    plan sets PAIR on that launch only, and a non-bool is refused."""
    layout, (p, pp, m), axes = _state(shape, order, width, False, torch.float32, seed=5)
    lo, hi = layout.updated
    ndim = p.dim()
    spacing = tuple(10.0 + d for d in range(ndim))
    base = replace(VARIANTS["march-psi"], psi_x_fused=True, narrow=(4, 32, 1), x_store_boxes=True, x_box_tiles=True)
    paired = replace(base, x_face_pairs=True)
    p3 = p if ndim == 3 else p.unsqueeze(0)
    lo3 = tuple(lo) if ndim == 3 else (0,) + tuple(lo)
    hi3 = tuple(hi) if ndim == 3 else (1,) + tuple(hi)
    kaxes = {ax.axis + 3 - ndim: ax for ax in axes}
    for cfg, want in ((base, 0), (paired, 1)):
        launches = ops._march_plan(p3, order, lo3, hi3, kaxes, ndim, cfg, SMALL.block_x)[1]
        pairs = [kw["PAIR"] for name, table, _n, kw in launches if name == "layers:2" and len(table) == 32]
        assert pairs == [want]  # one x-face launch of two boxes (16 ints a row)
        assert not any(kw["PAIR"] for name, _t, _n, kw in launches if name != "layers:2")
    _same_step_bits(p, pp, m, order, spacing, lo, hi, axes, base, paired)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="x_face_pairs"):
            CpmlConfig(4, 128, 8, 4, x_face_pairs=bad)


@pytest.mark.parametrize("kw,err", [({"x_align": 0}, ValueError), ({"x_align": -4}, ValueError),
                                    ({"x_align": 4.0}, ValueError), ({"x_align": True}, ValueError),
                                    ({"side_priority": 0.5}, TypeError), ({"side_priority": None}, TypeError)])
def test_cpml_config_rejects_bad_x_align_and_priority(kw, err):
    """x_align: tiles start at its multiples (0 would divide by zero in the planning); side_priority:
    a CUDA stream priority. Both refused when the configuration is made, before any launch."""
    with pytest.raises(err, match=next(iter(kw))):
        CpmlConfig(4, 128, 8, 4, march=True, **kw)
    assert CpmlConfig(4, 128, 8, 4, x_align=4, side_priority=-1).x_align == 4


ZWIN_SMALL = WaveConfig(block_y=4, block_x=16, block_z=8, num_warps=1, kernel="zwin", loop_unroll=2)


@pytest.mark.parametrize("shape,order,width,interior", [
    ((6, 9, 26), 4, 2, SMALL), ((7, 10, 37), 8, 5, SMALL), ((7, 10, 37), 8, 5, ZWIN_SMALL), ((14, 30), 8, 6, SMALL)])
def test_x_store_boxes_give_the_march_values(shape, order, width, interior):
    """``x_store_boxes`` (the layer boxes with x terms cut at the x stores' bounds; the extra columns
    add exact zeros) against the plain march plan, with psi_x inside the x launches too (and the
    boxes widened to whole x tiles, ``x_box_tiles``): the same
    p_next, psi_new and zeta values (bitwise but for the sign of a zero), every point of the box
    written (NaN-poisoned), in place (out is p_prev) too; odd widths, 2D and 3D, the march and the
    zwin interior; and both against the float64 torch step."""
    layout, (p, pp, m), axes = _state(shape, order, width, False, torch.float32, seed=5)
    lo, hi = layout.updated
    ndim = p.dim()
    spacing = tuple(10.0 + d for d in range(ndim))
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    base = VARIANTS["march-psi"]
    variants = (base, replace(base, x_store_boxes=True),
                replace(base, x_store_boxes=True, psi_x_fused=True, narrow=(4, 32, 1)),
                replace(base, x_store_boxes=True, x_box_tiles=True, psi_x_fused=True, narrow=(4, 32, 1)))
    _l64, (p64, pp64, m64), _a = _state(shape, order, width, False, torch.float64, seed=5)
    ref_axes = _copy(axes, torch.float64)
    ref = pp64.clone()
    ops.cpml_step(p64, pp64, m64, ref, order, spacing, lo, hi, ref_axes, "torch")
    for in_place in (False, True):
        res = []
        for cfg in variants:
            got = _copy(axes)
            out = pp.clone()
            if not in_place:
                out[box] = math.nan
            ops.cpml_step(p, out if in_place else pp, m, out, order, spacing, lo, hi, got, "triton", interior, cfg)
            assert not torch.isnan(out).any()
            assert float((out[box].double() - ref[box]).abs().max()) <= 1e-5 * float(ref[box].abs().max())
            for x, y in zip(got, ref_axes):
                for u, v in ((x.psi[1], y.psi[1]), (x.zeta, y.zeta)):
                    assert float((u.double() - v).abs().max()) <= 1e-5 * max(float(v.abs().max()), 1e-30)
            res.append((out, got))
        (a, a_ax), (b, b_ax), (c, c_ax), (d, _d_ax) = res
        assert torch.equal(a, b)  # values: +0 and -0 compare equal
        assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(a_ax, b_ax))
        tol = 2e-6 * float(a[box].abs().max())
        assert float((a - c).abs().max()) <= tol
        assert float((a - d).abs().max()) <= tol


@pytest.mark.parametrize("shape,order,width", [((7, 10, 37), 8, 5), ((5, 7, 26), 4, 2), ((14, 30), 8, 6)])
def test_layer_zwin_gives_the_march_bits(shape, order, width):
    """``layer_zwin``: the layer launches keep the tile's planes of p in registers along their march (one load a
    plane) instead of loading the 2R + 1 planes at each output plane: the same p_next, psi_new and zeta bits
    (interpreter; default-like plan with psi_x inside the x launches and whole x tiles; every kind of box, with
    psi_z's planes in registers too (``psi_zwin``), and the x faces alone; odd plane counts per program; in place
    too; 2D, where there is no z window, unchanged);
    bad kinds refused."""
    layout, (p, pp, m), axes = _state(shape, order, width, False, torch.float32, seed=8)
    lo, hi = layout.updated
    ndim = p.dim()
    spacing = tuple(10.0 + d for d in range(ndim))
    base = replace(VARIANTS["march-psi"], x_store_boxes=True, x_box_tiles=True, psi_x_fused=True, narrow=(4, 32, 1),
                   march_tiles=((2, 16, 3, 1), (4, 16, 2, 1), (4, 32, 3, 1), (4, 16, 2, 1), (2, 16, 1, 1)))
    every = replace(base, layer_zwin=(0, 1, 2, 3, 4))
    variants = [every, replace(every, psi_zwin=True)] + ([replace(base, layer_zwin=(2,))] if ndim == 3 else [])
    for in_place in (False, True):
        res = []
        for cfg in [base] + variants[:2 if in_place else None]:
            got = _copy(axes)
            out = pp.clone()
            ops.cpml_step(p, out if in_place else pp, m, out, order, spacing, lo, hi, got, "triton", SMALL, cfg)
            res.append((out, got))
        (a, a_ax) = res[0]
        for b, b_ax in res[1:]:
            assert torch.equal(a, b)
            assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(a_ax, b_ax))
    for bad in ((5,), (-1,), (True,), [0], (0.0,)):
        with pytest.raises(ValueError, match="layer_zwin"):
            CpmlConfig(4, 128, 8, 4, layer_zwin=bad)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="psi_zwin"):
            CpmlConfig(4, 128, 8, 4, psi_zwin=bad)
    for bad in ((5,), (1, 1), [0], (True,)):
        with pytest.raises(ValueError, match="layer_order"):
            CpmlConfig(4, 128, 8, 4, layer_order=bad)


@pytest.mark.parametrize("width", [20, 12])
def test_x_store_boxes_let_the_x_faces_run_beside_a_zwin_interior(width):
    """With ``x_store_boxes`` and the register-window interior (which stores only its box) no layer
    launch clashes with the interior where the x store is as wide as the x tiles' reach (24-column
    layers), so none waits for it; the march interior (whose last tiles rewrite columns past its box)
    still orders the x faces after it; without ``x_store_boxes`` the x faces wait either way. With
    12-point layers (a 16-column store, 32-column tiles from x = 4) the x faces wait unless
    ``x_box_tiles`` widens their boxes to whole tiles. The x layer boxes end at the x stores' whole
    vectors (or whole tiles) and the plan still covers the box once. Checked against the columns each
    launch stores."""
    layout, (p, _pp, _m), axes = _state((24, 20, 300), 8, width, False, torch.float32)
    lo, hi = layout.updated
    kaxes = {ax.axis: ax for ax in axes}
    tiles = ((4, 128, 8, 4), (4, 128, 8, 4), (8, 32, 4, 2), (8, 32, 2, 2), (4, 32, 2, 1))
    base = CpmlConfig(4, 128, 8, 4, march=True, march_tiles=tiles, psi_x_fused=True)
    zwin = WaveConfig(32, 64, 64, 16, kernel="zwin", loop_unroll=8, l1_prefetch=2)
    march = WaveConfig(8, 128, 16, 8)
    stored = replace(base, x_store_boxes=True)
    tiled = replace(stored, x_box_tiles=True)
    x_late = [False, False, True] + [False] * 4
    cases = {20: ((stored, zwin, [False] * 7, (32, 316)), (stored, march, x_late, (32, 316)),
                  (base, zwin, x_late, (28, 320)), (tiled, zwin, [False] * 7, (32, 316))),
             12: ((stored, zwin, x_late, (24, 308)), (tiled, zwin, [False] * 7, (32, 304)),
                  (base, zwin, x_late, (20, 312)))}[width]
    for cfg, icfg, want, inner_x in cases:
        interiors, _launches, _strides, (late, wait_all, _lanes), fuse = ops._march_plan(
            p, 8, tuple(lo), tuple(hi), kaxes, 3, cfg, icfg)
        assert late == want and not wait_all and (2 in fuse) == cfg.x_store_boxes  # x_align 8
        _, _, plan = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, p.shape[2], cfg, 4, p.stride()[:2])
        count = torch.zeros(p.shape, dtype=torch.int32)
        owned = torch.zeros(p.shape, dtype=torch.bool)
        (blo, bhi, x_org), = interiors
        count[blo[0]:bhi[0], blo[1]:bhi[1], blo[2]:bhi[2]] += 1
        owned[blo[0]:bhi[0], blo[1]:bhi[1], blo[2]:bhi[2]] = True
        inner = owned.clone()
        if icfg.kernel == "march":
            inner[blo[0]:bhi[0], blo[1]:bhi[1], x_org:min(x_org + -(-(bhi[2] - x_org) // 128) * 128, p.shape[2])] = True
        for (axes_, tile, table, _n), lt in zip(plan, late):
            mine = torch.zeros(p.shape, dtype=torch.bool)
            stores = torch.zeros(p.shape, dtype=torch.bool)
            for z0, z1, y0, y1, x0, x1, xo, *_ in table:
                stores[z0:z1, y0:y1, xo:min(xo + -(-(x1 - xo) // tile[1]) * tile[1], p.shape[2])] = True
                mine[z0:z1, y0:y1, x0:x1] = True
                count[z0:z1, y0:y1, x0:x1] += 1
                if cfg.x_store_boxes and 2 in axes_:  # x boxes on the x stores' bounds
                    assert {x0, x1} & {lo[2], hi[2]} or x0 % 4 == 0 and x1 % 4 == 0
                if cfg.x_box_tiles and 2 in axes_:  # whole tiles: the stores stay in the box (and the frozen halo)
                    assert xo % cfg.x_align == 0 and (x1 - xo) % tile[1] == 0 or x1 == hi[2]
            assert lt == bool((stores & owned).any() or (inner & mine).any())
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        assert int(count[box].min()) == 1 and int(count.max()) == 1 and int(count.sum()) == count[box].numel()
        assert (blo[2], bhi[2]) == inner_x


def test_default_interior_is_the_ring_on_large_boxes_on_sm90(monkeypatch):
    """``default_config``: on sm90 NVIDIA GPUs, fp32 order 8, the cp.async ring (``smem_config``) for plain-step
    boxes of at least ``RING_MIN_TILES`` tiles of 32 x 64 points (512**3 and up; measured faster there on an H200,
    ``benchmarks/wave_ring_bz.py``), the register window (``zwin_config``) for smaller boxes, the CPML step's
    interior (no box given) and other NVIDIA GPUs; the march elsewhere."""
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None)
    big, small = ((4,) * 3, (516,) * 3), ((4,) * 3, (388,) * 3)  # 512**3: 16 x 8 tiles; 384**3: 12 x 6
    assert ops.ring_box(*big) and not ops.ring_box(*small) and not ops.ring_box((4, 4), (516, 516))
    for cap, kind in (((9, 0), "smem"), ((8, 0), "zwin"), ((10, 0), "zwin")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=cap: c)
        assert ops.default_config(torch.float32, 8, cuda, *big).kernel == kind
        assert ops.default_config(torch.float32, 8, cuda, *small).kernel == "zwin"
        assert ops.default_config(torch.float32, 8, cuda).kernel == "zwin"  # no box: the CPML step's interior
        assert ops.default_config(torch.float64, 8, cuda, *big).kernel == "march"
        assert ops.default_config(torch.float32, 4, cuda, *big).kernel == "march"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert ops.default_config(torch.float32, 8, cuda, *big) == ops.smem_config()
    assert ops.default_config(torch.float32, 8, cuda) == ops.zwin_config()
    assert ops.default_config(torch.float32, 8, torch.device("cpu"), *big).kernel == "march"


def test_cpml_interior_is_the_ring_with_256_planes_on_large_boxes_on_sm90(monkeypatch):
    """``cpml_interior_config`` (the CPML step's interior when none is given): on sm90 NVIDIA GPUs, fp32 order 8,
    the ring with 256 planes per program on boxes of at least ``RING_CPML_MIN_TILES`` tiles of 32 x 64 points and
    256 planes (384**3 + 12-point CPML and up; measured faster there on an H200 with the new layer launches),
    zwin on smaller or 2D boxes, thin slabs and other NVIDIA GPUs; the march for other dtypes, orders, devices."""
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None)
    big, edge, small = ((4,) * 3, (540,) * 3), ((4,) * 3, (412,) * 3), ((4,) * 3, (284,) * 3)  # 153, 91, 45 tiles
    slab = ((4, 4, 4), (200, 540, 540))  # 196 planes (a rank's slab)
    for cap, kind in (((9, 0), "smem"), ((8, 0), "zwin"), ((10, 0), "zwin")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=cap: c)
        assert ops.cpml_interior_config(torch.float32, 8, cuda, *big).kernel == kind
        assert ops.cpml_interior_config(torch.float32, 8, cuda, *edge).kernel == kind
        for box in (small, slab, ((4, 4), (540, 540)), (None, None)):
            assert ops.cpml_interior_config(torch.float32, 8, cuda, *box) == ops.zwin_config()
        assert ops.cpml_interior_config(torch.float64, 8, cuda, *big).kernel == "march"
        assert ops.cpml_interior_config(torch.float32, 6, cuda, *big).kernel == "march"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    ring = ops.cpml_interior_config(torch.float32, 8, cuda, *big)
    assert ring == replace(ops.smem_config(), block_z=ops.RING_CPML_PLANES) and ring.block_z == 256
    assert ops.cpml_interior_config(torch.float32, 8, torch.device("cpu"), *big) == ops.default_config(
        torch.float32, 8, torch.device("cpu"))


def test_smem_interior_is_an_option_that_runs_the_march_off_the_gpu():
    """``WaveConfig(kernel="smem")`` (the cp.async-ring interior, sm80+ compiled kernels only): its knobs are
    checked when made; where it cannot run (here: the interpreter, CPU tensors) ``smem_step_ok`` says why
    and the step runs ``march_config``'s kernel, the same bits as asking for it. Its values on the GPU:
    tests/wave/test_wave_gpu.py (zwin's bits)."""
    with pytest.raises(ValueError, match="ahead"):
        WaveConfig(32, 64, 64, 16, kernel="smem", ahead=0)
    with pytest.raises(ValueError, match="slack"):
        WaveConfig(32, 64, 64, 16, kernel="smem", slack=-1)
    smem = ops.smem_config()
    assert smem.kernel == "smem" and ops.default_config(torch.float32, 8, torch.device("cpu")).kernel == "march"
    layout, (p, pp, m), _axes = _state((7, 10, 64), 8, 4, False, torch.float32, seed=7)
    lo, hi = layout.updated
    assert "NVIDIA" in ops.smem_step_ok(p, 8, lo, hi, None, smem)
    assert "sponge" in ops.smem_step_ok(p, 8, lo, hi, (p, p, p), smem)
    outs = []
    for cfg in (smem, ops.march_config(torch.float32, 8, p.device)):
        out = torch.full_like(pp, math.nan)
        ops._launch_step(p, pp, m, out, 8, (10.0, 11.0, 12.0), lo, hi, None, cfg)
        outs.append(out)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0, equal_nan=True)
