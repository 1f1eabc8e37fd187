"""On a CUDA GPU only (skipped elsewhere): the default GPU step with the CPML (the layers' z-march,
``wave_layer_kernel``, launched through the compiled kernels' own launchers after the first call,
``ops.wave._launch``) against the float64 torch step, on the first call and on later ones (the
cached launchers), 2D and 3D, odd shapes, free surface, several orders, NaN-poisoned outputs."""
from __future__ import annotations

import math
import os

import pytest
import torch

from tilecraft.ops import wave as ops
from tilecraft.wave.boundaries import Layout, cpml_profiles
from tilecraft.wave.solver import cpml_axis

DEV = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
                                reason="needs a CUDA GPU (compiled kernels)")


def _state(shape, order, width, free_surface, seed):
    layout = Layout(shape, order, width, free_surface)
    grid, (lo, hi) = layout.shape, layout.updated
    gen = torch.Generator().manual_seed(seed)
    p, pp = ((torch.rand(grid, generator=gen, dtype=torch.float64) - 0.5) for _ in range(2))
    m = torch.rand(grid, generator=gen, dtype=torch.float64) * 0.1
    axes = []
    for axis in range(len(grid)):
        a, b = cpml_profiles(layout, axis, 3000.0, 10.0, 1e-3, 15.0)
        ax = cpml_axis(layout, axis, 10.0, a.to(DEV), b.to(DEV), lo[0], hi[0], 0, grid)
        for t in (ax.psi[0], ax.zeta):  # random memory variables on the layer points, as a run keeps them
            inside = torch.ones(t.shape[1:], dtype=torch.bool, device=DEV)
            for d in range(len(grid)):
                pos = torch.arange(t.shape[1 + d], device=DEV)
                keep = (pos >= lo[d]) & (pos < hi[d]) if d != axis else None
                if d == axis:
                    continue
                inside &= keep.reshape([-1 if i == d else 1 for i in range(len(grid))])
            for k, (_w0, _w1, origin) in enumerate(ax.regions):
                k_ = k if t.shape[0] > 1 else 0
                pos = torch.arange(t.shape[1 + axis], device=DEV) + origin
                lay = (a.to(DEV)[pos.clamp(max=grid[axis] - 1)] != 0) & (pos >= lo[axis]) & (pos < hi[axis])
                mask = inside & lay.reshape([-1 if i == axis else 1 for i in range(len(grid))])
                t[k_] = torch.where(mask, torch.rand(t[k_].shape, generator=gen, dtype=torch.float64).to(DEV) - 0.5, 0.0)
        axes.append(ax)
    return layout, (p.to(DEV), pp.to(DEV), m.to(DEV)), axes


def _cast(axes, dtype):
    from dataclasses import replace
    return [replace(ax, a=ax.a.to(dtype), b=ax.b.to(dtype), psi=[t.to(dtype, copy=True) for t in ax.psi],
                    zeta=ax.zeta.to(dtype, copy=True), _tables={}) for ax in axes]


@pytest.mark.parametrize("shape,order,width,free_surface,dtype", [  # few cases: each compiles ~10 kernels
    ((40, 37, 45), 8, 6, False, torch.float32), ((33, 29, 50), 16, 4, True, torch.float32),
    ((45, 39), 6, 7, True, torch.float64)])
def test_march_step_matches_float64_on_the_gpu(shape, order, width, free_surface, dtype):
    layout, (p, pp, m), axes = _state(shape, order, width, free_surface, seed=sum(shape))
    lo, hi = layout.updated
    spacing = (10.0,) * p.dim()
    ref_axes = _cast(axes, torch.float64)
    ref = pp.clone()
    ops.cpml_step(p, pp, m, ref, order, spacing, lo, hi, ref_axes, "torch")
    cfg = ops.default_cpml_config(p.device)
    assert cfg.march
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    tol = 2e-6 if dtype == torch.float32 else 1e-13
    for _call in range(3):  # the first launch binds and compiles; later ones use the cached launchers
        got = _cast(axes, dtype)
        out = torch.full_like(pp, math.nan, dtype=dtype)
        ops.cpml_step(p.to(dtype), pp.to(dtype), m.to(dtype), out, order, spacing, lo, hi, got, "triton", None, cfg)
        assert not torch.isnan(out[box]).any()
        assert float((out[box].double() - ref[box]).abs().max()) <= tol * float(ref[box].abs().max())
        outside = torch.ones(out.shape, dtype=torch.bool, device=out.device)
        outside[box] = False
        assert torch.isnan(out[outside]).all()
        for g, r in zip(got, ref_axes):
            for a, b in ((g.psi[1], r.psi[1]), (g.zeta, r.zeta)):
                assert float((a.double() - b).abs().max()) <= tol * max(float(b.abs().max()), 1e-30)


def test_default_matches_the_previous_default_on_the_gpu():
    """The default (marching psi launches, the interior first, 2 planes per edge and corner program)
    against the previous default (slab psi kernels, psi first; 75154d9) on one state, in place
    (out is p_prev) too: p_next, psi_new and zeta agree to rounding."""
    from dataclasses import replace

    layout, (p, pp, m), axes = _state((40, 37, 45), 8, 6, False, seed=5)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    new = ops.default_cpml_config(p.device)
    old = replace(new, psi_tiles=(), interior_first=False, march_tiles=ops.MARCH_TILES_PREVIOUS)
    res = []
    for cfg in (old, new):
        for in_place in (False, True):
            got = _cast(axes, torch.float32)
            out = pp.clone()
            ops.cpml_step(p, out if in_place else pp, m, out, 8, (10.0,) * 3, lo, hi, got, "triton", None, cfg)
            res.append((out, got))
    (a, a_ax), (b, b_ax), (c, c_ax), (d, d_ax) = res
    assert torch.equal(a, b) and torch.equal(c, d)
    scale = float(a.abs().max())
    assert float((a - c).abs().max()) <= 2e-6 * scale
    for x, y in zip(a_ax, c_ax):
        for u, v in ((x.psi[1], y.psi[1]), (x.zeta, y.zeta)):
            assert float((u - v).abs().max()) <= 2e-6 * max(float(u.abs().max()), 1e-30)


def _same_axes(g0, g1):
    """psi (both buffers) and zeta of every axis bit for bit."""
    for x, y in zip(g0, g1):
        assert torch.equal(x.psi[0], y.psi[0]) and torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta)


def _steps(p, pp, m, sp, lo, hi, axes, cfg, n_steps):
    """n_steps CPML steps of ``cfg`` in place (out is p_prev) on copies of p, pp and float32 copies of
    the axes, then one more into a NaN-poisoned output: (the two fields, that output, the axes)."""
    got = _cast(axes, torch.float32)
    f = [p.clone(), pp.clone()]
    for n in range(n_steps):
        a, b = f[n % 2], f[(n + 1) % 2]
        ops.cpml_step(a, b, m, b, 8, sp, lo, hi, got, "triton", None, cfg)
        for ax in got:
            ax.swap()
    out = torch.full_like(pp, math.nan)
    ops.cpml_step(f[0], f[1], m, out, 8, sp, lo, hi, got, "triton", None, cfg)
    return f, out, got


def _agree(o0, g0, o1, g1, lo, hi):
    """Two runs' outputs over the box [lo, hi) and their axes' psi_new and zeta agree to rounding (2e-6 of the
    largest value): the same step through plans that give a few points to different kernels."""
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    assert float((o1[box] - o0[box]).abs().max()) <= 2e-6 * float(o0[box].abs().max())
    for x, y in zip(g0, g1):
        for u, v in ((x.psi[1], y.psi[1]), (x.zeta, y.zeta)):
            assert float((u - v).abs().max()) <= 2e-6 * max(float(u.abs().max()), 1e-30)


def _launched_and_graphed(p, pp, m, sp, lo, hi, axes, cfg):
    """Three CPML steps launched, and three replayed from the benchmark's CUDA graphs
    (``graphed_cpml_step``: fixed fields, NaN-poisoned output), give the same bits. The boundary
    outside the updated box stays NaN in both: compared with NaN == NaN. Returns the graphed output."""
    from tilecraft.bench.wave import graphed_cpml_step

    outs = []
    for graphed in (False, True):
        got = _cast(axes, torch.float32)
        out = torch.full_like(pp, math.nan)
        run = (graphed_cpml_step(p, pp, m, out, 8, sp, lo, hi, cfg) if graphed else
               lambda g: ops.cpml_step(p, pp, m, out, 8, sp, lo, hi, g, "triton", None, cfg))
        for _ in range(3):
            run(got)
            for ax in got:
                ax.swap()
        outs.append((out, got))
    (o0, g0), (o1, g1) = outs
    torch.testing.assert_close(o0, o1, rtol=0, atol=0, equal_nan=True)
    _same_axes(g0, g1)
    return o1


def test_graphed_step_and_simulate_have_the_uncaptured_bits():
    """Steps replayed from CUDA graphs (``ops.capture_steps``, two parities, as ``simulate`` does:
    captured at step 2, p and p_prev exchanging, out = p_prev) give the uncaptured steps' bits
    (p_next, psi, zeta) over several steps; so does the benchmark's ``graphed_cpml_step`` (fixed
    fields, NaN-poisoned output); ``simulate`` with and without graphs: the same shot record bits,
    and it says the graphs ran."""
    from tilecraft import wave

    layout, (p, pp, m), axes = _state((40, 37, 45), 8, 6, False, seed=11)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    cfg = ops.default_cpml_config(p.device)
    sp = (10.0,) * 3

    def step(a, b, got):
        ops.cpml_step(a, b, m, b, 8, sp, lo, hi, got, "triton", None, cfg)

    results = []
    for graphed in (False, True):
        got = _cast(axes, torch.float32)
        f = [p.clone(), pp.clone()]
        graphs = None
        for n in range(6):
            a, b = f[n % 2], f[(n + 1) % 2]
            if graphed and n == 2:
                def parity(k, a=a, b=b):
                    for ax in got * k:
                        ax.swap()
                    step(*((a, b) if k == 0 else (b, a)), got)
                    for ax in got * k:
                        ax.swap()
                graphs = ops.capture_steps(parity, 2, p.device, keep=(f, got))
                assert not isinstance(graphs, str), graphs
            if graphs is not None:
                graphs.replay(n - 2)
            else:
                step(a, b, got)
            for ax in got:
                ax.swap()
        results.append((f, got))
    (f0, g0), (f1, g1) = results
    assert all(torch.equal(x, y) for x, y in zip(f0, f1)) and not torch.equal(f1[0], p)
    _same_axes(g0, g1)
    o1 = _launched_and_graphed(p, pp, m, sp, lo, hi, axes, cfg)
    assert not torch.isnan(o1[tuple(slice(a, b) for a, b in zip(lo, hi))]).any()

    v = torch.full((30, 27, 33), 2000.0, device=DEV)
    v[15:] = 3000.0
    model = wave.Model(v, 10.0)
    src = wave.Source([[150.0, 130.0, 160.0]], f0=20.0)
    rec = wave.Receivers.line((100.0, 130.0, 0.0), (100.0, 130.0, 320.0), 9)
    # 15 steps: the 6 captures of three rotating arrays (2 in place) replayed more than once each
    on = wave.simulate(model, src, rec, 15, order=8, pml_width=6, backend="triton", cuda_graphs=True)
    on2 = wave.simulate(model, src, rec, 15, order=8, pml_width=6, backend="triton", cuda_graphs=True, in_place=True)
    off = wave.simulate(model, src, rec, 15, order=8, pml_width=6, backend="triton", cuda_graphs=False,
                        in_place=True)
    assert on.info["cuda_graphs"] == on2.info["cuda_graphs"] == "on" and off.info["cuda_graphs"].startswith("off")
    assert (on.info["in_place"], on2.info["in_place"]) == (False, True)
    assert torch.equal(on.record, off.record) and torch.equal(on2.record, off.record)
    assert float(on.record.abs().max()) > 0
    # by default (None) a small grid over GRAPH_AUTO_STEPS steps replays graphs on one rank too: the same bits
    from tilecraft.wave.solver import GRAPH_AUTO_STEPS

    auto = wave.simulate(model, src, rec, GRAPH_AUTO_STEPS, order=8, pml_width=6, backend="triton")
    off = wave.simulate(model, src, rec, GRAPH_AUTO_STEPS, order=8, pml_width=6, backend="triton", cuda_graphs=False)
    assert auto.info["cuda_graphs"] == "on" and torch.equal(auto.record, off.record)


@pytest.mark.parametrize("boundary,free_surface,in_place", [("pml", True, False), ("pml", False, True),
                                                          ("none", False, False), ("sponge", False, True)])
def test_whole_step_graphs_have_the_launched_bits(boundary, free_surface, in_place):
    """One rank: each graph holds the whole step (the receivers' samples, the step's launches, two sources'
    injection and the free surface, step n's rows picked by a counter on the GPU), with the CPML or without a
    boundary or with the sponge, in place or with three arrays: the launched run's record and snapshots, bit for bit,
    over more steps than the captures (2 or 6) so that each is replayed more than once."""
    from tilecraft import wave

    v = torch.full((30, 27, 33), 2000.0, device=DEV)
    v[15:] = 3000.0
    model = wave.Model(v, 10.0)
    src = wave.Source([[150.0, 130.0, 160.0], [60.0, 100.0, 90.0]], f0=20.0)
    rec = wave.Receivers.line((100.0, 130.0, 0.0), (100.0, 130.0, 320.0), 9)
    kw = dict(order=8, boundary=boundary, pml_width=6 if boundary == "pml" else None, backend="triton",
              free_surface=free_surface, in_place=in_place, snapshots=4)
    on = wave.simulate(model, src, rec, 17, cuda_graphs=True, **kw)
    off = wave.simulate(model, src, rec, 17, cuda_graphs=False, **kw)
    assert on.info["cuda_graphs"] == "on" and on.info["in_place"] == in_place
    assert torch.equal(on.record, off.record) and float(on.record.abs().max()) > 0
    assert [n for n, _ in on.snapshots] == [n for n, _ in off.snapshots] == [0, 4, 8, 12, 16]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(on.snapshots, off.snapshots))


def test_two_streams_give_the_one_stream_bits():
    """``CpmlConfig.streams`` (psi and layer launches on a side stream beside the interior; normal
    and high priority; the default tiles, whose x faces wait for the interior, and 8-column x tiles
    with the split interior, where nothing waits; the layer launches spread over 3 and 7 side
    streams, ``side_streams``) against one stream: p_next, psi and zeta bit for
    bit over several steps, in place (out is p_prev) and into a NaN-poisoned output, and replayed
    from CUDA graphs. A grid large enough that the launches overlap."""
    from dataclasses import replace

    layout, (p, pp, m), axes = _state((60, 52, 150), 8, 20, False, seed=13)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0,) * 3
    base = ops.default_cpml_config(p.device)
    base = replace(base, streams=False)
    tiles = base.march_tiles[:2] + ((32, 8, 4, 2),) + base.march_tiles[3:]
    x8 = replace(base, x_align=4, split_interior=True, march_tiles=tiles,
                 psi_tiles=base.psi_tiles[:2] + ((32, 8, 8, 2),))
    variants = [base, replace(base, streams=True), replace(base, streams=True, side_priority=-1),
                replace(base, streams=True, side_priority=-1, interior_first=False), x8,
                replace(x8, streams=True, side_priority=-1),
                replace(base, streams=True, side_priority=-1, side_streams=3),
                replace(x8, streams=True, side_priority=-1, side_streams=7)]
    results = []
    for cfg in variants:
        results.append(_steps(p, pp, m, sp, lo, hi, axes, cfg, 4))
        if cfg.streams:
            assert ops._side_stream(p.device, cfg.side_priority)[0].priority <= (0 if cfg.side_priority == 0 else -1)
    for i, (f, o, g) in enumerate(results):
        # against the one-stream run of the same plan (x8 cuts the x boxes elsewhere with ``x_box_tiles``, so
        # a few columns are the interior kernel's in one plan and the layer kernel's in the other: rounding)
        f0, o0, g0 = results[4 if variants[i].x_align == 4 else 0]
        assert all(torch.equal(x, y) for x, y in zip(f0, f))
        torch.testing.assert_close(o0, o, rtol=0, atol=0, equal_nan=True)
        _same_axes(g0, g)
    o0, o8 = results[0][1], results[4][1]
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    assert not torch.isnan(o0[box]).any()
    assert float((o0[box] - o8[box]).abs().max()) <= 2e-6 * float(o0[box].abs().max())
    _launched_and_graphed(p, pp, m, sp, lo, hi, axes, variants[-1])
    _launched_and_graphed(p, pp, m, sp, lo, hi, axes, variants[-2])


def test_psi_x_inside_the_layer_launches_on_the_gpu():
    """``psi_x_fused`` (no psi launch for x: the x layer launches compute psi_x, store it and read
    it back shifted after a barrier of the program), one and two streams, against the marching
    psi launch: p_next, psi and zeta agree to rounding over several steps (the two kernels may
    contract b psi + a dp/dx differently: last bits), every point written; the plan fused."""
    from dataclasses import replace

    layout, (p, pp, m), axes = _state((60, 52, 152), 8, 20, False, seed=17)  # x stores on whole 32-column tiles
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0,) * 3
    base = replace(ops.default_cpml_config(p.device), streams=False, psi_x_fused=False)
    regs = base.march_regs[:2] + (80,) + base.march_regs[3:]
    fused = replace(base, psi_x_fused=True, march_regs=regs)
    kaxes = {ax.axis: ax for ax in axes}
    assert ops._march_plan(p, 8, tuple(lo), tuple(hi), kaxes, 3, fused, 128)[-1]
    results = []
    for cfg in (base, fused, replace(fused, streams=True, side_priority=-1)):
        _f, out, got = _steps(p, pp, m, sp, lo, hi, axes, cfg, 3)
        assert not torch.isnan(out[tuple(slice(a, b) for a, b in zip(lo, hi))]).any()
        results.append((out, got))
    (o0, g0) = results[0]
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    scale = float(o0[box].abs().max())
    for o, g in results[1:]:
        assert float((o[box] - o0[box]).abs().max()) <= 2e-6 * scale
        for x, y in zip(g0, g):
            for u, v in ((x.psi[0], y.psi[0]), (x.psi[1], y.psi[1]), (x.zeta, y.zeta)):
                assert float((u - v).abs().max()) <= 2e-6 * max(float(u.abs().max()), 1e-30)
    (o1, g1), (o2, g2) = results[1:]
    torch.testing.assert_close(o1, o2, rtol=0, atol=0, equal_nan=True)  # streams: the same bits
    assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(g1, g2))


def test_x_store_boxes_on_the_gpu():
    """``x_store_boxes`` (the default: the x layer boxes end on the x stores' whole vectors, so the x
    faces run beside the zwin interior): no launch waits for the interior; two streams give the
    one-stream bits; both agree with the previous plan (x faces after the interior, which then
    computed the 4 columns the x faces now take) to rounding over several steps, every point
    written."""
    from dataclasses import replace

    layout, (p, pp, m), axes = _state((60, 52, 152), 8, 20, False, seed=19)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0,) * 3
    new = ops.default_cpml_config(p.device)
    assert new.x_store_boxes
    kaxes = {ax.axis: ax for ax in axes}
    icfg = ops.default_config(p.dtype, 8, p.device)
    _i, _l, _s, (late, _w, _lanes), fuse = ops._march_plan(p, 8, tuple(lo), tuple(hi), kaxes, 3, new, icfg)
    assert fuse and (not any(late) if icfg.kernel in ("zwin", "smem") else late[2])
    results = []
    for cfg in (replace(new, x_store_boxes=False), replace(new, streams=False), new):
        _f, out, got = _steps(p, pp, m, sp, lo, hi, axes, cfg, 3)
        assert not torch.isnan(out[tuple(slice(a, b) for a, b in zip(lo, hi))]).any()
        results.append((out, got))
    (o0, g0), (o1, g1), (o2, g2) = results
    torch.testing.assert_close(o1, o2, rtol=0, atol=0, equal_nan=True)  # streams: the same bits
    assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(g1, g2))
    _agree(o0, g0, o1, g1, lo, hi)


def test_x_box_tiles_on_the_gpu():
    """``x_box_tiles`` (the default) at 12 points (a 24-column x store, 32-column x tiles): the x layer boxes
    widened to whole tiles, so no launch waits for the zwin interior (without it the x faces do); one stream, two and
    four side streams give the same bits, and so do the layer launches with the z window of p in registers on
    none or every kind of box (``layer_zwin``; the default has it on the z and y faces) and with or without psi_z's
    planes in registers too (``psi_zwin``, the default), with the launches issued in reverse (``layer_order``), and
    with the x faces' programs interleaved or not (``x_face_pairs``); all agree with ``x_store_boxes`` alone to rounding over several steps, every point written."""
    from dataclasses import replace

    layout, (p, pp, m), axes = _state((60, 52, 152), 8, 12, False, seed=23)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0,) * 3
    tiled = ops.default_cpml_config(p.device)
    assert tiled.x_box_tiles and tiled.side_streams == ops.SIDE_STREAMS
    base = replace(tiled, x_box_tiles=False, side_streams=1)  # the default before 2026-11-29
    kaxes = {ax.axis: ax for ax in axes}
    icfg = ops.default_config(p.dtype, 8, p.device)
    if icfg.kernel in ("zwin", "smem"):
        for cfg, waits in ((base, True), (tiled, False)):
            _i, _l, _s, (late, _w, _lanes), fuse = ops._march_plan(p, 8, tuple(lo), tuple(hi), kaxes, 3, cfg, icfg)
            assert fuse and late[2] == waits and not any(late[:2] + late[3:])
    results = []
    assert tiled.layer_zwin == ops.LAYER_ZWIN and tiled.psi_zwin == ops.PSI_ZWIN
    assert tiled.x_face_pairs == ops.X_FACE_PAIRS
    for cfg in (base, replace(tiled, streams=False), tiled, replace(tiled, side_streams=2),
                replace(tiled, side_streams=4), replace(tiled, layer_zwin=(), march_regs=ops.MARCH_REGS_PSI_X),
                replace(tiled, layer_zwin=(0, 1, 2, 3, 4), march_regs=(128, 128, 128, 160, 168)),
                replace(tiled, psi_zwin=not tiled.psi_zwin), replace(tiled, layer_order=(4, 3, 2, 1, 0)),
                replace(tiled, x_face_pairs=not tiled.x_face_pairs)):
        _f, out, got = _steps(p, pp, m, sp, lo, hi, axes, cfg, 3)
        assert not torch.isnan(out[tuple(slice(a, b) for a, b in zip(lo, hi))]).any()
        results.append((out, got))
    (o0, g0), (o1, g1), *rest = results
    for o, g in rest:
        torch.testing.assert_close(o1, o, rtol=0, atol=0, equal_nan=True)  # streams: the same bits
        assert all(torch.equal(x.psi[1], y.psi[1]) and torch.equal(x.zeta, y.zeta) for x, y in zip(g1, g))
    _agree(o0, g0, o1, g1, lo, hi)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("graphs", [False, True])
def test_two_gpu_slabs_are_bit_identical_to_one_gpu_3d(graphs):
    """Issue 7: results identical to the one-GPU run. NCCL slabs on two GPUs against one GPU, 3D, order 8,
    the CPML, the GPU defaults; the 3D case of ``benchmarks/wave_multigpu_check.py``. It failed in the
    last bits until the zwin interior's sums became explicit FMAs compiled without contraction
    (``kernels.stencil._scatter_z``; found with ``benchmarks/wave_fp_fusion.py``). ``graphs``: the slabs'
    interior and edge calls replayed from CUDA graphs, the halo exchange between them launched."""
    from tilecraft import wave
    from tilecraft.wave.distributed import simulate_spawned

    shape = (160, 128, 136)  # the case measured at 5abeeaa (wave_multigpu_check.py's 3D case)
    v = torch.rand(shape, dtype=torch.float32, generator=torch.Generator().manual_seed(3)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[shape[0] * 4.0, shape[1] * 5.0, shape[1] * 5.0]], f0=15.0)
    rec = wave.Receivers([[10.0 * i, shape[1] * 5.0, shape[1] * 5.0] for i in range(0, shape[0], 4)])
    kw = {"order": 8, "boundary": "pml", "pml_width": 20, "snapshots": [39]}
    one = wave.simulate(model, src, rec, 40, backend="triton", device="cuda", **kw)
    two = simulate_spawned(model, src, rec, 40, ranks=2, device="cuda", backend="triton", cuda_graphs=graphs, **kw)
    assert two.info["cuda_graphs"] == ("on" if graphs else "off: cuda_graphs=False")
    assert float(one.record.abs().max()) > 0
    assert torch.equal(one.record.cpu(), two.record.cpu())
    assert torch.equal(one.snapshots[0][1].cpu(), two.snapshots[0][1].cpu())


@pytest.mark.parametrize("pml", [False, True])
def test_step_bits_do_not_depend_on_where_the_box_is_cut_along_z(pml):
    """What a slab run relies on, on one GPU: the step on the whole box and on the box cut along z into
    pieces whose starts fall at other phases of the programs' z chunks (the zwin interior's 64-plane
    chunks, its 8-times unrolled loop) give the same bits, plain and with the CPML (p_next into a
    NaN-poisoned output, psi and zeta). The zwin kernel's compiled contractions once depended on a
    plane's place in its program (the 2-GPU slabs differed from one GPU in the last bits)."""
    layout, (p, pp, m), axes = _state((150, 40, 76), 8, 6, False, seed=29)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0,) * 3
    cfg = ops.default_config(torch.float32, 8, p.device)
    assert cfg.kernel in ("zwin", "smem")
    assert (ops.smem_step_ok if cfg.kernel == "smem" else ops.zwin_step_ok)(p, 8, lo, hi, None, cfg) is None
    cuts = [lo[0], lo[0] + 27, lo[0] + 27 + 50, hi[0]]  # 27, 50: neither a multiple of 8 nor of 64
    outs = []
    for pieces in ([(lo[0], hi[0])], list(zip(cuts[:-1], cuts[1:]))):
        out = torch.full_like(pp, math.nan)
        got = _cast(axes, torch.float32)
        for z0, z1 in pieces:
            box_lo, box_hi = (z0,) + tuple(lo[1:]), (z1,) + tuple(hi[1:])
            if pml:
                ops.cpml_step(p, pp, m, out, 8, sp, box_lo, box_hi, got, "triton", None, None)
            else:
                ops.step_into(p, pp, m, out, 8, sp, box_lo, box_hi, None, "triton")
        outs.append((out, got))
    (o0, g0), (o1, g1) = outs
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    assert not torch.isnan(o0[box]).any()
    torch.testing.assert_close(o0, o1, rtol=0, atol=0, equal_nan=True)
    if pml:
        _same_axes(g0, g1)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8,
                    reason="the smem step needs sm80+")
def test_smem_interior_gives_the_zwin_bits():
    """The cp.async-ring interior (``kernel="smem"``, ``wave_smem_kernel``) computes zwin's arithmetic (its
    explicit FMAs, in its order): the plain step on boxes with odd extents and x bounds that are not tile
    multiples, into a NaN-poisoned output and in place (out is p_prev), and the CPML step with either
    interior, give the same bits."""
    layout, (p, pp, m), axes = _state((70, 45, 100), 8, 6, False, seed=31)
    p, pp, m = (t.float() for t in (p, pp, m))
    lo, hi = layout.updated
    sp = (10.0, 9.0, 11.0)
    zwin = ops.WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="zwin", loop_unroll=8,
                          l1_prefetch=2, halo_ahead=1)
    smem = ops.smem_config()
    for box_lo, box_hi in [(lo, hi), ((5, 7, 8), (61, 40, 92)), ((4, 4, 4), (66, 41, 96))]:
        assert ops.smem_step_ok(p, 8, box_lo, box_hi, None, smem) is None
        outs = []
        for cfg in (zwin, smem):
            for in_place in (False, True):
                out = pp.clone() if in_place else torch.full_like(pp, math.nan)
                ops._launch_step(p, out if in_place else pp, m, out, 8, sp, box_lo, box_hi, None, cfg)
                outs.append(out)
        torch.testing.assert_close(outs[0], outs[2], rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(outs[1], outs[3], rtol=0, atol=0, equal_nan=True)
        inner = tuple(slice(a, b) for a, b in zip(box_lo, box_hi))
        assert not torch.isnan(outs[2][inner]).any() and torch.isnan(outs[2]).sum() == outs[2].numel() - outs[2][inner].numel()
    base = ops.default_cpml_config(p.device)
    res = []
    for icfg in (zwin, smem):
        got = _cast(axes, torch.float32)
        out = torch.full_like(pp, math.nan)
        ops.cpml_step(p, pp, m, out, 8, sp, lo, hi, got, "triton", icfg, base)
        res.append((out, got))
    torch.testing.assert_close(res[0][0], res[1][0], rtol=0, atol=0, equal_nan=True)
    _same_axes(res[0][1], res[1][1])
