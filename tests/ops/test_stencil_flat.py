"""The flat kernel (``kernel="flat"``, ``auto`` for contiguous grids whose rows are not 16-byte aligned):
correct on the interpreter for odd, tiny and non-cubic grids in both phases of the y and z strides
(nx mod VEC, ny nx mod VEC), tiles shorter than a row and longer than a plane, NaN-poisoned outputs
whose boundary must stay NaN, allocated outputs whose boundary must be zero; refused where it cannot
run (``auto`` then keeps the plane kernels); ``auto``'s choice; and, cross-compiled for sm90, every
grid access 128-bit with no spills.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

from test_stencil import SPACING, assert_boundary, assert_interior_matches, make_field, poison, run_poisoned

_FLAT = StencilConfig("flat", block_y=1, block_x=16, num_warps=1, nontemporal=True)


def _shapes(r: int) -> list[tuple[int, int, int]]:
    """Every extent >= 2R + 1, nx never a multiple of 4: the smallest grid, odd ny and nx (both
    phases odd), even ny with odd nx (plane phase 0 in fp64), nx = 2 mod 4 (fp32 y phase 2)."""
    n = 2 * r + 1
    return [(n, n, n), (n + 1, n + 4, n + 2), (n + 3, n + 1, n + 6), (n + 2, n + 5, n + 9)]


CASES = [(order, dtype, shape) for order in (2, 4, 6, 8) for dtype in (torch.float32, torch.float64)
         for shape in _shapes(order // 2) if shape[2] % (16 // (torch.finfo(dtype).bits // 8))]


@pytest.mark.parametrize("order,dtype,shape", CASES,
                         ids=[f"o{o}-{str(d)[6:]}-{'x'.join(map(str, s))}" for o, d, s in CASES])
@pytest.mark.parametrize("block_x", [8, 64])
def test_flat_matches_reference(order, dtype, shape, block_x):
    u = make_field(shape, dtype, seed=21)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    out = poison(torch.empty_like(u))
    ops.launch(u, out, order, spacing, StencilConfig("flat", block_y=1, block_x=block_x, num_warps=2))
    what = f"flat bx{block_x} o{order} {dtype} {shape}"
    assert_interior_matches(out, u, order, spacing, what)
    assert_boundary(out, order, nan=True, what=what)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("order", [2, 4])
def test_auto_on_unaligned_contiguous_grids(order, dtype):
    """Through ``laplacian`` (the flat kernel, fp64 order 4 the plane kernel): a poisoned out keeps its NaN
    boundary, an allocated one is zero there."""
    r = order // 2
    shape = (2 * r + 4, 2 * r + 7, 2 * r + 9)  # every extent odd
    u = make_field(shape, dtype, seed=22)
    out = torch.empty_like(u)
    assert ops.flat_ok(u, out) is None and not ops.vector_aligned(u, out)
    taken = ops.config_for("auto", dtype, order, shape, 50 * 2**20, False, True).kernel
    assert taken == ("plane" if (dtype, order) == (torch.float64, 4) else "flat")
    run_poisoned(u, order, SPACING, "auto")
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    result = tilecraft.laplacian(u, order=order, spacing=SPACING)
    assert_interior_matches(result, u, order, spacing, "allocated out")
    assert_boundary(result, order, nan=False, what="allocated out")


def test_flat_large_order_and_long_tiles():
    """Order 16 (R = 8 > VEC: phases k * (nx mod VEC) past one vector), tiles longer than a plane."""
    order, dtype, shape = 16, torch.float32, (17, 18, 19)
    u = make_field(shape, dtype, seed=23)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    for bx in (4, 512):
        out = poison(torch.empty_like(u))
        ops.launch(u, out, order, spacing, StencilConfig("flat", block_y=1, block_x=bx, num_warps=4))
        assert_interior_matches(out, u, order, spacing, f"o16 bx{bx}")
        assert_boundary(out, order, nan=True, what=f"o16 bx{bx}")


def test_flat_refusals_and_auto_fallback():
    base = make_field((9, 10, 12), torch.float32, seed=24)
    view = base[:, :, 1:10]  # nx = 9, padded rows: not contiguous
    out = torch.empty(view.shape)
    assert "contiguous" in ops.flat_ok(view, out)
    with pytest.raises(ValueError, match="contiguous"):
        ops.launch(view, out, 2, (1.0, 1.0, 1.0), _FLAT)
    shifted = make_field((9 * 10 * 9 + 1,), torch.float32, seed=25)[1:].view(9, 10, 9)  # 4 bytes off 16
    assert "aligned" in ops.flat_ok(shifted, torch.empty(9, 10, 9))
    with pytest.raises(ValueError, match="multiple of 4"):
        u = make_field((5, 6, 7), torch.float32)
        ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), StencilConfig("flat", 1, 6, 1))
    with pytest.raises(ValueError, match="at most 4096"):
        u = make_field((5, 6, 7), torch.float32)
        ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), StencilConfig("flat", 1, 8192, 1))
    # auto keeps the plane kernels for what the flat kernel refuses, and is still right
    run_poisoned(view, 2, SPACING, "auto")
    run_poisoned(shifted, 2, SPACING, "auto")
    run_poisoned(make_field((9, 10, 9), torch.float32, seed=26), 2, SPACING, "auto", out=torch.empty(9, 12, 9)[:, 1:11])


def test_auto_config_flat_choice():
    """Where the flat kernel measured faster (H100, 2026-11-25): unaligned contiguous grids, fp64 order 2
    and fp32 orders 2 and 4, whose 2R + 1 planes take at most a sixth of the L2. fp64 order 4 (measured
    slower), higher orders, larger planes, non-contiguous tensors and every aligned grid keep today's choice."""
    l2 = 50 * 2**20
    for dtype, order, n, bx, nw in ((torch.float64, 2, 515, 1024, 8), (torch.float32, 2, 514, 1024, 4),
                                    (torch.float32, 4, 518, 1024, 4)):
        cfg = ops.auto_config(dtype, order, (n, n, n), l2, vector_aligned=False, flat_ok=True)
        assert (cfg.kernel, cfg.block_x, cfg.num_warps) == ("flat", bx, nw), (dtype, order)
        legacy = ops.auto_config(dtype, order, (n, n, n), l2, vector_aligned=False, flat_ok=False)
        assert legacy == ops.ladder_config("tiling", dtype, order)
    assert ops.auto_config(torch.float64, 4, (517,) * 3, l2, False, True) == ops.ladder_config("tiling", torch.float64, 4)
    # 5 planes of 1001^2 fp32 (20 MB) measured slower; 3 of 801^2 fp32 (7.7 MB) fit a sixth of 50 MB
    seismic = (256, 1001, 1001)
    assert ops.auto_config(torch.float32, 4, seismic, l2, False, True) == ops.auto_config(torch.float32, 4, seismic, l2, False)
    assert ops.auto_config(torch.float32, 2, (801, 801, 801), l2, False, True).kernel == "flat"
    big = (16, 4098, 4098)
    assert ops.auto_config(torch.float32, 2, big, l2, False, True) == ops.auto_config(torch.float32, 2, big, l2, False)
    for order in (6, 8):
        assert ops.auto_config(torch.float32, order, (518, 518, 518), l2, False, True).kernel == "plane"
    for dtype in (torch.float32, torch.float64):
        for order in (2, 4, 8):
            for shape in ((512, 512, 512), (64, 256, 256), (16, 4096, 4096)):
                assert (ops.auto_config(dtype, order, shape, l2, True, True)
                        == ops.auto_config(dtype, order, shape, l2, True)), "aligned grids: today's dispatch"


@pytest.mark.parametrize("dtype,order,n", [(torch.float64, 2, 515), (torch.float32, 4, 518)])
def test_flat_cross_compiles_to_128bit_accesses(dtype, order, n):
    u = torch.empty((n, n, n), dtype=dtype, device="meta")
    cfg = ops.auto_config(dtype, order, tuple(u.shape), 50 * 2**20, vector_aligned=False, flat_ok=True)
    k = ops.launch_plan(u, torch.empty_like(u), order, (1.0, 1.0, 1.0), cfg)[0]
    res = cross_compile("tilecraft.kernels.stencil", "laplacian_flat_kernel", ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps, num_stages=1)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0
    c = res.census
    assert c["sass_global_load_128b"] > 0 and c["sass_global_store_128b"] > 0
    vec_per_thread = cfg.block_x * torch.finfo(dtype).bits // 8 // 16 // (32 * cfg.num_warps)
    assert c["sass_global_store_128b"] == vec_per_thread, "one 128-bit store per vector"
    assert not [key for key in c if key.startswith("sass_global_store_") and key[-1] == "b" and key != "sass_global_store_128b"]
