"""The register-window z-march without load masks (``kernel="zwin"``, ``auto`` for aligned fp32 order
8) and the ``loop_unroll`` / ``l1_prefetch`` knobs of the z-march: correct on the interpreter on
grids that exercise every clamp (a partial last y tile, a last x tile shifted left to end at nx,
nx == block_x, z chunks shorter than R, padded strides); refused where it cannot run; and, cross-
compiled for sm90, the prefetches and 128-bit accesses are in the SASS with no spills. The L1
prefetch is a cache hint (inline PTX), which the interpreter cannot run: CPU launches leave it out,
so its values are checked on the GPU by ``benchmarks/stencil_round3.py`` (float64 check before timing).
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

from test_stencil import SPACING, assert_boundary, assert_interior_matches, make_field, poison

_ZWIN = StencilConfig("zwin", block_y=4, block_x=16, num_warps=1, block_z=3, nontemporal=True)
CASES = [  # (name, cfg, order, dtype, shape)
    ("o8-fp32-partial-y-shifted-x", replace(_ZWIN, block_y=8, loop_unroll=8, l1_prefetch=2, static_strides=True), 8,
     torch.float32, (23, 21, 40)),
    ("o8-fp32-prefetch2", replace(_ZWIN, block_x=32, prefetch=2), 8, torch.float32, (19, 13, 36)),
    ("o2-fp64-nx-eq-bx", replace(_ZWIN, block_x=8, block_z=2, loop_unroll=2), 2, torch.float64, (9, 7, 8)),
    ("o2-fp64", replace(_ZWIN, block_x=8, loop_unroll=2, l1_prefetch=3), 2, torch.float64, (13, 11, 18)),
    ("o6-fp32-prefetch3", replace(_ZWIN, block_z=4, prefetch=3), 6, torch.float32, (17, 15, 44)),
    ("o16-fp64-short-chunks", replace(_ZWIN, block_z=2), 16, torch.float64, (20, 19, 34)),
    ("o16-fp32-unroll3", replace(_ZWIN, block_y=2, block_x=8, block_z=7, loop_unroll=3), 16, torch.float32,
     (20, 19, 36)),
    # the halo's loads a plane ahead (x chunks; and the outer y rows), chunks of 3 planes and a last short one
    ("o8-fp32-halo-ahead-2", replace(_ZWIN, block_y=8, loop_unroll=8, halo_ahead=2), 8, torch.float32, (19, 21, 40)),
    ("o2-fp64-halo-ahead-1", replace(_ZWIN, block_x=8, loop_unroll=2, halo_ahead=1), 2, torch.float64, (13, 11, 18)),
]


@pytest.mark.parametrize("name,cfg,order,dtype,shape", CASES, ids=[c[0] for c in CASES])
def test_zwin_matches_reference(name, cfg, order, dtype, shape):
    u = make_field(shape, dtype, seed=11)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    out = poison(torch.empty_like(u))
    ops.launch(u, out, order, spacing, cfg)
    assert_interior_matches(out, u, order, spacing, name)
    assert_boundary(out, order, nan=True, what=name)


def test_zwin_padded_views():
    """Row and plane strides larger than the extents (multiples of 16 bytes), in and out."""
    order, dtype = 8, torch.float32
    base = make_field((21, 20, 48), dtype, seed=12)
    u = base[:, 1:18, 4:40]
    out_base = torch.empty((21, 19, 44), dtype=dtype)
    out = poison(out_base[:, :17, 4:40])
    cfg = replace(_ZWIN, block_y=8, block_x=16, loop_unroll=8)
    assert ops.zwin_ok(u, out, cfg) is None
    spacing = ops.validate(u, order, SPACING, out, "auto")[1]
    ops.launch(u, out, order, spacing, cfg)
    assert_interior_matches(out, u, order, spacing, "padded views")
    assert_boundary(out, order, nan=True, what="padded views")


def test_zwin_refusals():
    u = torch.empty((12, 12, 18))  # rows of 72 bytes
    with pytest.raises(ValueError, match="16 bytes"):
        ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), _ZWIN)
    u = torch.empty((12, 12, 12))
    with pytest.raises(ValueError, match="nx >= block_x"):
        ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), _ZWIN)
    u = torch.empty((12, 12, 16))
    for cfg in (replace(_ZWIN, halo_ahead=3), replace(_ZWIN, halo_ahead=True),
                StencilConfig("zmarch", 4, 16, 1, block_z=3, halo_ahead=1)):
        with pytest.raises(ValueError, match="halo_ahead"):
            ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), cfg)


def test_auto_picks_zwin_where_it_measured_faster():
    """fp32 orders 6 and 8, fp64 orders 6 and 8, fp64 order 4 on planes of 512^2 and more; not fp32
    order 4 (no gain), not orders above 8 (not measured), not short rows, not unaligned grids."""
    big = (520, 520, 520)
    for dtype, order in ((torch.float32, 8), (torch.float32, 6), (torch.float64, 8), (torch.float64, 6),
                         (torch.float64, 4)):
        cfg = ops.auto_config(dtype, order, big, 50 * 2**20)
        assert cfg.kernel == "zwin" and cfg.loop_unroll == order and cfg.l1_prefetch > 0, (dtype, order)
        assert cfg.block_x * torch.finfo(dtype).bits // 8 == 256  # one 128-bit vector per thread of 16 warps
    assert ops.auto_config(torch.float64, 4, (64, 256, 256), 50 * 2**20).unroll_z  # small planes: the short march
    assert ops.auto_config(torch.float32, 4, big, 50 * 2**20).kernel == "zmarch"
    assert ops.auto_config(torch.float32, 10, big, 50 * 2**20).kernel == "zmarch"
    assert ops.auto_config(torch.float32, 8, (40, 40, 48), 50 * 2**20).kernel == "zmarch"  # rows < 64 points
    assert ops.auto_config(torch.float32, 8, (518, 518, 518), 50 * 2**20, vector_aligned=False).kernel == "plane"


def test_auto_fp32_order_8_on_several_tiles():
    """The auto configuration itself on a grid with 2+ tiles per axis and a partial tile in each."""
    order, dtype = 8, torch.float32
    cfg = ops.auto_config(dtype, order, (520, 520, 520), 50 * 2**20)
    cfg = replace(cfg, block_z=5)  # several z chunks on a grid the interpreter runs quickly
    shape = (2 * 4 + 2 * cfg.block_z + 3, 2 * 4 + cfg.block_y + 5, cfg.block_x + 20)
    u = make_field(shape, dtype, seed=13)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    out = poison(torch.empty_like(u))
    ops.launch(u, out, order, spacing, cfg)
    assert_interior_matches(out, u, order, spacing, "auto fp32 o8")
    assert_boundary(out, order, nan=True, what="auto fp32 o8")


def test_zmarch_loop_unroll_and_l1_prefetch_knobs():
    """The z-march's register window and L1-z loops with the new knobs (prefetch inert on CPU)."""
    order, dtype = 8, torch.float32
    base = StencilConfig("zmarch", block_y=8, block_x=16, num_warps=1, block_z=5, nontemporal=True, zorder=2)
    for cfg in (replace(base, loop_unroll=8, l1_prefetch=2, static_strides=True),
                replace(base, z_in_regs=False, loop_unroll=2, l1_prefetch=2)):
        u = make_field((23, 21, 40), dtype, seed=14)
        spacing = ops.validate(u, order, SPACING, None, "auto")[1]
        out = poison(torch.empty_like(u))
        ops.launch(u, out, order, spacing, cfg)
        assert_interior_matches(out, u, order, spacing, str(cfg))
        assert_boundary(out, order, nan=True, what=str(cfg))


def test_zwin_auto_cross_compiles_for_sm90():
    u = torch.empty((520, 520, 520), dtype=torch.float32, device="meta")
    cfg = ops.auto_config(torch.float32, 8, tuple(u.shape), 50 * 2**20)
    k = ops.launch_plan(u, torch.empty_like(u), 8, (1.0, 1.0, 1.0), cfg)[0]
    assert k.constexprs["L1_PREFETCH"] == 3  # kept for NVIDIA targets (meta tensors)
    assert k.constexprs["HALO_AHEAD"] == 2  # order 8: the x chunks and outer y rows a plane ahead
    res = cross_compile("tilecraft.kernels.stencil", "laplacian_zwin_kernel", ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    # at the 128-register cap of 16 warps the halo a plane ahead spills 8 bytes (Triton 3.6), measured
    # faster than the form without it (``window_march``); more would be a change to look at
    assert res.registers <= 128 and res.spills <= 8 and res.scratch_bytes <= 8, (res.registers, res.spills)
    # the form without the halo ahead (the tuner's alternative at order 8) keeps no spills at all
    plain = replace(cfg, halo_ahead=0, l1_prefetch=2)
    kp = ops.launch_plan(u, torch.empty_like(u), 8, (1.0, 1.0, 1.0), plain)[0]
    rp = cross_compile("tilecraft.kernels.stencil", "laplacian_zwin_kernel", ops.compile_signature(kp), kp.constexprs,
                       "sm90", num_warps=plain.num_warps)
    assert rp.error is None and rp.spills == 0 and rp.scratch_bytes == 0, (rp.error, rp.spills)
    c = res.census
    assert c.get("sass:CCTL", 0) > 0, "the L1 prefetches (CCTL.E.PF1) are in the SASS"
    assert c["sass_global_load_128b"] >= 8 * 11, "11 128-bit loads per plane, loop unrolled 8 times"
    assert c["sass_global_store_128b"] > 0
