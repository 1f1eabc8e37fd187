"""The cp.async-ring z-march (``kernels.stencil_smem``, ``kernel="smem"``) against the float64 reference on
the GPU: odd y and z extents, x tiles cut at the grid's end, short z chunks (the ring's remainder loop and a
short last chunk), several ring depths and tiles, the CTA-barrier and the mbarrier rings, padded strides, non-uniform spacing, NaN-poisoned outputs
whose boundary must stay untouched. The Triton interpreter cannot run Gluon or inline PTX;
tests/ops/test_stencil_smem_compile.py cross-compiles the kernel in CI."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tilecraft.bench.stencil import check_case
from tilecraft.ops import stencil as ops


def _sm80() -> bool:
    return torch.cuda.is_available() and torch.version.hip is None and torch.cuda.get_device_capability()[0] >= 8


pytestmark = pytest.mark.skipif(not _sm80(), reason="the smem kernel is sm80+ Gluon with cp.async")


def _cfg(block_y: int, block_x: int, warps: int, bz: int, ahead: int, maxnreg: int | None = None,
         slack: int = 1, vec: int = 0) -> ops.StencilConfig:
    """``slack``: the ring's slack slots with mbarriers (``num_stages``); 0: a CTA barrier per plane; ``vec``: the
    elements a thread computes (0: a 16-byte vector)."""
    return ops.StencilConfig("smem", block_y=block_y, block_x=block_x, num_warps=warps, block_z=bz, prefetch=ahead,
                             maxnreg=maxnreg, num_stages=slack, vec=vec)


@pytest.mark.parametrize("dtype,order,shape,cfg", [
    (torch.float32, 8, (23, 41, 140), _cfg(16, 64, 8, 4, 3)),
    (torch.float32, 8, (23, 41, 140), _cfg(16, 64, 8, 4, 3, slack=0)),
    (torch.float32, 8, (33, 41, 140), _cfg(16, 64, 8, 64, 2, slack=3)),
    (torch.float64, 8, (29, 29, 74), _cfg(16, 32, 8, 6, 3, slack=0)),
    (torch.float32, 8, (30, 37, 76), _cfg(16, 64, 8, 64, 3)),  # one z chunk, 22 planes: remainder loop
    (torch.float32, 8, (19, 53, 100), _cfg(32, 64, 16, 5, 2)),
    (torch.float32, 8, (27, 25, 52), _cfg(8, 32, 2, 7, 1)),
    (torch.float32, 8, (21, 40, 136), _cfg(16, 64, 8, 3, 4, 80)),
        (torch.float64, 8, (21, 29, 142), _cfg(16, 32, 8, 4, 3)),
    (torch.float64, 4, (17, 45, 66), _cfg(16, 32, 8, 5, 2)),
    (torch.float64, 4, (13, 22, 36), _cfg(32, 16, 8, 64, 1)),
    # R not a whole number of vectors: a halo vector a side, the edge vectors stored component by component
    (torch.float32, 2, (23, 41, 140), _cfg(16, 64, 8, 4, 3)),
    (torch.float32, 2, (19, 37, 76), _cfg(8, 128, 8, 64, 2, slack=0)),
    (torch.float32, 4, (21, 29, 76), _cfg(16, 64, 8, 5, 3)),
    (torch.float32, 6, (25, 33, 84), _cfg(8, 32, 2, 6, 2)),
    (torch.float64, 2, (17, 45, 66), _cfg(16, 32, 8, 5, 2)),
    (torch.float64, 6, (21, 29, 74), _cfg(16, 32, 8, 64, 3, slack=2)),
    # auto's rings at orders 4 and 6 (``smem_march``), x tiles cut at the grid's end
    (torch.float32, 4, (21, 37, 268), ops.smem_march(torch.float32, 2)),
    (torch.float32, 6, (23, 41, 140), ops.smem_march(torch.float32, 3)),
    (torch.float64, 6, (21, 37, 74), ops.smem_march(torch.float64, 3)),
])
def test_smem_kernel_matches_float64(dtype, order, shape, cfg):
    gen = torch.Generator().manual_seed(1)
    u = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype).cuda()
    spacing = (0.7, 1.1, 0.9)
    assert ops.smem_ok(u, torch.empty_like(u), order, cfg) is None
    ok, err, msg = check_case(u, order, spacing, lambda a, o: ops.launch(a, o, order, spacing, cfg))
    assert ok, (err, msg)


@pytest.mark.parametrize("dtype,order,shape,cfg", [
    (torch.float32, 8, (23, 41, 140), _cfg(32, 64, 32, 4, 3, vec=2)),
    (torch.float32, 8, (21, 43, 76), _cfg(16, 64, 16, 64, 2, slack=0, vec=2)),
    (torch.float32, 8, (19, 39, 100), _cfg(16, 64, 16, 5, 3, 64, slack=2, vec=2)),
    (torch.float32, 8, (22, 45, 132), ops.smem_march(torch.float32, 4)),
    (torch.float32, 6, (25, 35, 84), _cfg(32, 64, 32, 6, 4, vec=2)),
    (torch.float32, 4, (21, 29, 268), _cfg(16, 64, 16, 5, 3, vec=2)),
    (torch.float32, 2, (23, 41, 140), _cfg(16, 64, 16, 4, 3, vec=2)),
    (torch.float64, 8, (21, 29, 74), _cfg(32, 32, 32, 6, 5, slack=0, vec=1)),
    (torch.float64, 8, (19, 37, 66), _cfg(32, 32, 32, 64, 3, slack=2, vec=1)),
    (torch.float64, 4, (17, 45, 66), _cfg(32, 32, 32, 5, 2, vec=1)),
    (torch.float64, 2, (17, 45, 66), _cfg(16, 32, 16, 5, 2, slack=0, vec=1)),
])
def test_smem_kernel_8_byte_vectors_match_float64(dtype, order, shape, cfg):
    """A thread computes an 8-byte vector (two fp32 or one fp64; the copies stay 16 bytes): x edges inside a copy
    vector, odd y and z extents, both rings."""
    test_smem_kernel_matches_float64(dtype, order, shape, cfg)


@pytest.mark.parametrize("dtype,order,shape,cfg", [
    # orders 10-16 (R = 5..8, 25 weight parameters): R a whole number of vectors or not, odd y and z extents,
    # x tiles cut at the grid's end, short chunks, both rings, 16- and 8-byte vectors
    (torch.float32, 10, (29, 41, 140), _cfg(32, 64, 16, 7, 3, slack=2)),
    (torch.float32, 12, (31, 37, 76), _cfg(16, 64, 16, 64, 4, slack=2, vec=2)),
    (torch.float32, 14, (33, 45, 100), _cfg(16, 64, 16, 5, 3, slack=0, vec=2)),
    (torch.float32, 16, (37, 39, 132), _cfg(16, 64, 16, 6, 4, slack=2, vec=2)),
    (torch.float32, 16, (35, 41, 84), _cfg(32, 64, 32, 64, 5, slack=0, vec=2)),
    (torch.float64, 10, (27, 41, 74), _cfg(16, 32, 8, 5, 4, slack=2)),
    (torch.float64, 12, (29, 31, 70), _cfg(16, 32, 8, 64, 3, slack=2)),
    (torch.float64, 14, (33, 37, 66), _cfg(16, 32, 16, 4, 4, slack=0, vec=1)),
    (torch.float64, 16, (35, 43, 82), _cfg(16, 32, 8, 6, 4, slack=2)),
    (torch.float64, 16, (37, 35, 68), _cfg(16, 32, 16, 64, 4, slack=2, vec=1)),
])
def test_smem_kernel_high_orders_match_float64(dtype, order, shape, cfg):
    test_smem_kernel_matches_float64(dtype, order, shape, cfg)


@pytest.mark.parametrize("dtype,order,shape", [(torch.float32, 10, (26, 33, 92)), (torch.float32, 16, (40, 37, 68)),
                                               (torch.float64, 12, (30, 35, 58)), (torch.float64, 16, (36, 41, 66))])
def test_auto_at_high_orders_matches_float64(dtype, order, shape):
    """What ``laplacian(variant="auto")`` runs at orders 10-16 on this GPU (the ring on sm90)."""
    gen = torch.Generator().manual_seed(3)
    u = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype).cuda()
    spacing = (0.8, 1.2, 0.95)
    ok, err, msg = check_case(u, order, spacing, lambda a, o: ops.laplacian(a, order=order, spacing=spacing, out=o))
    assert ok, (err, msg)


@pytest.mark.parametrize("dtype,order,shape", [
    (torch.float32, 2, (23, 41, 138)), (torch.float32, 4, (21, 29, 74)), (torch.float32, 6, (25, 33, 90)),
    (torch.float32, 8, (27, 37, 130)), (torch.float32, 10, (29, 35, 70)), (torch.float32, 16, (37, 39, 134)),
    (torch.float64, 2, (17, 45, 67)), (torch.float64, 4, (19, 31, 35)), (torch.float64, 8, (23, 37, 69)),
    (torch.float64, 14, (33, 37, 65)),
])
def test_8_byte_ring_matches_float64(dtype, order, shape):
    """Rows of 8-byte vectors only (fp32 nx = 2 mod 4, fp64 odd nx): ``half_ring``'s 8-byte copies, the x edges inside
    a vector, odd y and z extents; and ``laplacian`` itself (``auto`` takes the ring on sm90)."""
    gen = torch.Generator().manual_seed(4)
    u = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype).cuda()
    assert ops.half_aligned(u, torch.empty_like(u))
    cfg = ops.half_ring(dtype, order // 2, shape)
    test_smem_kernel_matches_float64(dtype, order, shape, replace(cfg, block_z=5))  # short chunks too
    spacing = (0.7, 1.3, 0.9)
    ok, err, msg = check_case(u, order, spacing, lambda a, o: ops.laplacian(a, order=order, spacing=spacing, out=o))
    assert ok, (err, msg)


@pytest.mark.parametrize("order,shape", [(2, (23, 41, 139)), (4, (21, 29, 71)), (8, (27, 37, 129)),
                                         (12, (31, 35, 69)), (16, (37, 39, 135))])
def test_4_byte_ring_matches_float64(order, shape):
    """fp32 rows of an odd number of points: ``word_ring``'s 4-byte copies, one element a thread, odd y and z extents,
    short chunks, an offset view of odd pitch; and ``laplacian`` itself (the ring there where the tuner picks it)."""
    gen = torch.Generator().manual_seed(6)
    u = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(torch.float32).cuda()
    assert not ops.half_aligned(u, torch.empty_like(u)) and not ops.vector_aligned(u, torch.empty_like(u))
    cfg = ops.word_ring(order // 2)
    test_smem_kernel_matches_float64(torch.float32, order, shape, replace(cfg, block_z=5))
    spacing = (0.9, 1.1, 1.3)
    ok, err, msg = check_case(u, order, spacing, lambda a, o: ops.laplacian(a, order=order, spacing=spacing, out=o))
    assert ok, (err, msg)
    view = (torch.rand(shape[0], shape[1], shape[2] + 6, generator=gen) * 2 - 1).cuda()[:, :, 3:3 + shape[2]]
    ok, err, msg = check_case(view, order, (1.0, 1.0, 1.0),  # rows of 12-byte offset and an odd pitch
                              lambda a, o: ops.launch(a, o, order, (1.0, 1.0, 1.0), cfg))
    assert ok, (err, msg)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_8_byte_ring_padded_strides(dtype):
    """A view whose rows start 8 bytes past a 16-byte boundary, rows and planes padded."""
    gen = torch.Generator().manual_seed(5)
    big = (torch.rand(31, 47, 150, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype).cuda()
    u = big[2:28, 3:44, 1:135] if dtype == torch.float64 else big[2:28, 3:44, 2:136]
    assert ops.half_aligned(u, torch.empty_like(u)) or (dtype == torch.float64 and u.shape[2] % 2 == 0)
    for order in (2, 8):
        cfg = ops.half_ring(dtype, order // 2)
        assert ops.smem_ok(u, u, order, cfg) is None
        ok, err, msg = check_case(u, order, (1.0, 1.0, 1.0),
                                  lambda a, o: ops.launch(a, o, order, (1.0, 1.0, 1.0), cfg))
        assert ok, (order, err, msg)


@pytest.mark.parametrize("order", [8, 2])
def test_smem_kernel_padded_strides(order):
    gen = torch.Generator().manual_seed(2)
    big = (torch.rand(30, 50, 144, generator=gen, dtype=torch.float64) * 2 - 1).to(torch.float32).cuda()
    u = big[3:26, 5:44, 4:132]  # rows padded (stride 144), planes padded (50 rows), offset 16 bytes
    cfg = _cfg(16, 64, 8, 6, 3)
    assert ops.smem_ok(u, torch.empty_like(u), order, cfg) is None
    ok, err, msg = check_case(u, order, (1.0, 1.0, 1.0), lambda a, o: ops.launch(a, o, order, (1.0, 1.0, 1.0), cfg))
    assert ok, (err, msg)


@pytest.mark.parametrize("dtype,order,shape,cfg", [
    (torch.float32, 8, (23, 41, 140), replace(_cfg(32, 64, 32, 5, 6, slack=0, vec=2), planes_per_barrier=2)),
    (torch.float32, 8, (30, 37, 76), replace(_cfg(32, 64, 32, 64, 4, slack=0, vec=2), planes_per_barrier=4)),
    (torch.float32, 8, (25, 29, 84), replace(_cfg(16, 64, 8, 7, 6, slack=0), planes_per_barrier=3)),
    (torch.float32, 2, (19, 37, 76), replace(_cfg(8, 128, 8, 64, 2, slack=0), planes_per_barrier=2)),
    (torch.float64, 8, (21, 29, 74), replace(_cfg(16, 32, 8, 6, 4, slack=0), planes_per_barrier=2)),
])
def test_smem_kernel_planes_per_barrier_match_float64(dtype, order, shape, cfg):
    """A CTA barrier every 2-4 planes (D + PB slots): short z chunks whose trips and remainder loop both run."""
    test_smem_kernel_matches_float64(dtype, order, shape, cfg)


def test_smem_kernel_bit_equal_across_chunks_and_depths():
    """The z chunking, the ring depth and the elements a thread computes change where a plane comes from, never
    the arithmetic."""
    gen = torch.Generator().manual_seed(3)
    u = (torch.rand(40, 36, 72, generator=gen, dtype=torch.float64) * 2 - 1).to(torch.float32).cuda()
    outs = []
    for cfg in (_cfg(16, 64, 8, 64, 3), _cfg(16, 64, 8, 5, 1), _cfg(16, 64, 8, 9, 4), _cfg(16, 64, 8, 7, 2, slack=0),
                _cfg(16, 64, 8, 11, 3, slack=2), _cfg(16, 64, 16, 64, 3, vec=2), _cfg(32, 64, 32, 9, 3, slack=0, vec=2),
                replace(_cfg(32, 64, 32, 9, 6, slack=0, vec=2), planes_per_barrier=2)):
        out = torch.full_like(u, float("nan"))
        ops.launch(u, out, 8, (1.0, 1.0, 1.0), cfg)
        outs.append(out)
    for o in outs[1:]:
        assert torch.equal(o.nan_to_num(7.0), outs[0].nan_to_num(7.0))
