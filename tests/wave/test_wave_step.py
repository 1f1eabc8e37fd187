"""The fused Triton step and the CPML slab kernels against the float64 torch reference (interpreter)."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig
from tilecraft.reference.wave import cpml_correct_torch, cpml_psi_torch, wave_step_torch

TOL = {torch.float32: 2e-6, torch.float64: 1e-13}
SMALL = WaveConfig(block_y=4, block_x=16, block_z=3, num_warps=1)  # several tiles per axis: edge tiles run


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).abs().max() / b.abs().max())


def _fields(field, shape, dtype):
    p, pp = field(shape, dtype), field(shape, dtype)
    m = (field(shape, dtype) * 0.05 + 0.1).to(dtype)
    return p, pp, m


@pytest.mark.parametrize("shape,order,dtype,sponge", [
    ((11, 13, 37), 2, torch.float64, False),
    ((11, 13, 37), 8, torch.float32, True),
    ((17, 18, 19), 16, torch.float64, False),
    ((13, 29), 8, torch.float32, False),
    ((9, 21), 4, torch.float64, True),
])
def test_step_matches_reference(field, shape, order, dtype, sponge):
    p, pp, m = _fields(field, shape, dtype)
    spacing = tuple(1.0 + 0.25 * i for i in range(len(shape)))
    g = [(field((n,), dtype).abs() * 0.2).to(dtype) for n in shape] if sponge else None
    out = torch.full_like(pp, math.nan)
    ops.step_into(p, pp, m, out, order, spacing, (order // 2,) * len(shape), tuple(n - order // 2 for n in shape),
                  g, "triton", SMALL)
    ref = torch.full(shape, math.nan, dtype=torch.float64)
    wave_step_torch(p.double(), pp.double(), m.double(), ref, order, spacing, (order // 2,) * len(shape),
                    tuple(n - order // 2 for n in shape), [x.double() for x in g] if g else None)
    r = order // 2
    box = tuple(slice(r, n - r) for n in shape)
    assert not torch.isnan(out[box]).any()
    assert _rel(out[box], ref[box]) < TOL[dtype]
    # outside the box: never written (still NaN)
    mask = torch.ones(shape, dtype=torch.bool)
    mask[box] = False
    assert torch.isnan(out[mask]).all()


def test_step_in_place_and_sub_boxes_are_bitwise_the_whole(field):
    """out = p_prev in place; a box split in two (as the slabs do) gives the same bits as one launch."""
    shape, order = (14, 12, 23), 6
    p, pp, m = _fields(field, shape, torch.float32)
    whole = pp.clone()
    ops.step_into(p, pp.clone(), m, whole, order, (1.0, 1.0, 1.0), (3, 3, 3), (11, 9, 20), None, "triton", SMALL)
    split = pp.clone()
    for z0, z1 in ((3, 5), (5, 11)):
        ops.step_into(p, split, m, split, order, (1.0, 1.0, 1.0), (z0, 3, 3), (z1, 9, 20), None, "triton", SMALL)
    assert torch.equal(whole, split)


def test_public_op_defaults_and_torch_backend(field):
    shape = (10, 11, 12)
    p, pp, m = _fields(field, shape, torch.float64)
    a = ops.wave_step(p, pp, m, order=4, spacing=2.0, backend="triton")
    b = ops.wave_step(p, pp, m, order=4, spacing=2.0, backend="torch")
    assert torch.allclose(a, b, rtol=0, atol=1e-13)
    # outside the updated box the result holds p_prev
    assert torch.equal(a[:2], pp[:2]) and torch.equal(a[:, :, -2:], pp[:, :, -2:])
    c = torch.ops.tilecraft.wave_step  # registered with torch.library
    assert c is not None


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("compact", [False, True])
def test_cpml_kernels_match_reference(field, axis, compact):
    """Full-grid memory variables, and compact ones holding only [origin, origin + extent) of the
    axis (what the solver stores for a layer), the latter with the z-rows tile order."""
    shape, order, dtype = (12, 13, 14), 4, torch.float64
    lo, hi = (2, 3, 2), (9, 11, 12)
    origin = lo[axis] - 2 if compact else 0
    aux_shape = tuple(hi[d] + 2 - origin if (compact and d == axis) else n for d, n in enumerate(shape))
    p, psi, zeta = field(shape, dtype), field(aux_shape, dtype), field(aux_shape, dtype)
    m, out = field(shape, dtype), field(shape, dtype)
    a, b = field((shape[axis],), dtype), field((shape[axis],), dtype)
    got = [t.clone() for t in (psi, zeta, out)]
    ref = [t.clone() for t in (psi, zeta, out)]
    ops.cpml_psi(p, got[0], a, b, axis, order, 1.5, lo, hi, "triton", origin, z_rows=compact)
    cpml_psi_torch(p, ref[0], a, b, axis, order, 1.5, lo, hi, origin)
    ops.cpml_correct(p, got[0], got[1], a, b, m, got[2], axis, order, 1.5, lo, hi, "triton", origin,
                     z_rows=compact)
    cpml_correct_torch(p, ref[0], ref[1], a, b, m, ref[2], axis, order, 1.5, lo, hi, origin)
    for g_, r_ in zip(got, ref):
        assert torch.allclose(g_, r_, rtol=1e-12, atol=1e-12)
    assert not torch.equal(got[2], out)  # the correction did write


def test_bad_inputs(field):
    shape = (10, 11, 12)
    p, pp, m = _fields(field, shape, torch.float32)
    with pytest.raises(ValueError, match="shape"):
        ops.wave_step(p, pp, m[:, :, :-1])
    with pytest.raises(TypeError, match="dtype"):
        ops.wave_step(p, pp, m.double())
    with pytest.raises(ValueError, match="order"):
        ops.wave_step(p, pp, m, order=3)
    with pytest.raises(ValueError, match="order"):
        ops.wave_step(p, pp, m, order=18)
    with pytest.raises(ValueError, match="2R\\+1"):
        ops.wave_step(p, pp, m, order=16)
    with pytest.raises(ValueError, match="box"):
        ops.wave_step(p, pp, m, order=4, lo=(1, 2, 2))
    with pytest.raises(ValueError, match="out overlaps p:"):
        ops.wave_step(p, pp, m, p)
    buf = torch.empty(p.numel() + p.shape[-1], dtype=p.dtype)  # out = p shifted by one row: silently wrong before
    shifted_p = buf[:p.numel()].view(p.shape)
    shifted_p.copy_(p)
    with pytest.raises(ValueError, match="out overlaps p:"):
        ops.wave_step(shifted_p, pp, m, buf[p.shape[-1]:].view(p.shape))
    with pytest.raises(ValueError, match="out overlaps m"):
        ops.wave_step(p, pp, m, m)
    with pytest.raises(ValueError, match="out overlaps p_prev"):  # p_prev itself is fine (in place), a shift not
        big = torch.cat([pp.flatten(), pp.flatten()[:1]])
        ops.wave_step(p, big[1:].view(p.shape), m, big[:-1].view(p.shape))
    with pytest.raises(TypeError, match="p_prev must be a torch.Tensor"):
        ops.wave_step(p, None, m)
    with pytest.raises(TypeError, match="sponge profile 0 must be a torch.Tensor"):
        ops.wave_step(p, pp, m, sponge=[1, 2, 3])
    with pytest.raises(ValueError, match="out of range"):
        ops.wave_step(p, pp, m, spacing=1e-30)  # 1/h^2 = 1e60: past float32
    with pytest.raises(ValueError, match="contiguous"):
        ops.wave_step(p, pp.transpose(1, 2).contiguous().transpose(1, 2), m)
    with pytest.raises(ValueError, match="backend"):
        ops.wave_step(p, pp, m, backend="cuda")
    with pytest.raises(ValueError, match="sponge"):
        ops.wave_step(p, pp, m, sponge=[torch.zeros(3)])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_step_any_box_any_shape(data):
    """Random orders, odd shapes (2D and 3D), random boxes inside [R, n - R), tile shapes that do
    not divide the box: the fused step equals the float64 reference inside the box, and nothing
    outside it is written."""
    order = data.draw(st.sampled_from([2, 4, 6, 8]), "order")
    r = order // 2
    ndim = data.draw(st.sampled_from([2, 3]), "ndim")
    shape = tuple(data.draw(st.integers(2 * r + 1, 2 * r + 9), f"n{d}") for d in range(ndim))
    lo, hi = [], []
    for d, n in enumerate(shape):
        a = data.draw(st.integers(r, n - r - 1), f"lo{d}")
        lo.append(a)
        hi.append(data.draw(st.integers(a + 1, n - r), f"hi{d}"))
    cfg = WaveConfig(block_y=data.draw(st.sampled_from([1, 2, 4]), "by"), block_x=data.draw(st.sampled_from([4, 8, 16]), "bx"),
                     block_z=data.draw(st.sampled_from([1, 2, 5]), "bz"), num_warps=1)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), "seed"))
    p, pp, m = (torch.rand(shape, dtype=torch.float64, generator=gen) - 0.5 for _ in range(3))
    spacing = tuple(1.0 + 0.3 * d for d in range(ndim))
    out = torch.full(shape, math.nan, dtype=torch.float64)
    ops.step_into(p, pp, m, out, order, spacing, tuple(lo), tuple(hi), None, "triton", cfg)
    ref = torch.full(shape, math.nan, dtype=torch.float64)
    wave_step_torch(p, pp, m, ref, order, spacing, tuple(lo), tuple(hi))
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    assert torch.allclose(out[box], ref[box], rtol=1e-12, atol=1e-12)
    mask = torch.ones(shape, dtype=torch.bool)
    mask[box] = False
    assert torch.isnan(out[mask]).all()


# The register-window step (``kernel="zwin"``): tiles of 4 x 8 points marching 5 planes (several tiles
# per axis, a shifted last x tile, clamped rows, chunk ends), the loop unrolled by 2.
ZWIN = WaveConfig(block_y=4, block_x=8, block_z=5, num_warps=1, kernel="zwin", loop_unroll=2)


@pytest.mark.parametrize("shape,order,dtype,lo,hi,ahead", [
    ((17, 13, 44), 8, torch.float32, (4, 4, 4), (13, 9, 40), 0),        # the whole interior, x tiles 8 + shifted
    ((15, 19, 36), 2, torch.float64, (3, 2, 6), (12, 15, 30), 0),       # a box inside the interior (fp64: VEC 2)
    ((20, 14, 48), 6, torch.float32, (5, 3, 12), (16, 11, 28), 0),      # CPML-like interior box, x aligned
    ((17, 13, 44), 8, torch.float32, (4, 4, 4), (13, 9, 40), 2),        # the halo's loads a plane ahead
])
def test_zwin_step_matches_reference_and_march_in_place(field, shape, order, dtype, lo, hi, ahead):
    """Against the float64 step, NaN-poisoned output, nothing outside the box written; in place
    (out = p_prev, as ``simulate`` runs) the same bits as into a fresh output; close to the march
    kernel's (the z terms summed in another order); with the halo's loads a plane ahead, the same
    bits as without."""
    p, pp, m = _fields(field, shape, dtype)
    spacing = (1.0, 1.25, 1.5)
    cfg = replace(ZWIN, halo_ahead=ahead)
    assert ops.zwin_step_ok(p, order, lo, hi, None, cfg) is None
    out = torch.full_like(pp, math.nan)
    ops.step_into(p, pp, m, out, order, spacing, lo, hi, None, "triton", cfg)
    ref = torch.full(shape, math.nan, dtype=torch.float64)
    wave_step_torch(p.double(), pp.double(), m.double(), ref, order, spacing, lo, hi)
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    assert not torch.isnan(out[box]).any()
    assert _rel(out[box], ref[box]) < TOL[dtype]
    outside = torch.ones(shape, dtype=torch.bool)
    outside[box] = False
    assert torch.isnan(out[outside]).all()
    inplace = pp.clone()
    ops.step_into(p, inplace, m, inplace, order, spacing, lo, hi, None, "triton", cfg)
    assert torch.equal(inplace[box], out[box]) and torch.equal(inplace[outside], pp[outside])
    if ahead:
        plain = torch.full_like(pp, math.nan)
        ops.step_into(p, pp, m, plain, order, spacing, lo, hi, None, "triton", ZWIN)
        assert torch.equal(plain[box], out[box])
    march = torch.full_like(pp, math.nan)
    ops.step_into(p, pp, m, march, order, spacing, lo, hi, None, "triton", SMALL)
    assert _rel(out[box], march[box].double()) < TOL[dtype]


def test_zwin_step_takes_only_what_it_can(field):
    """Boxes the zwin kernel cannot take run the march kernel (same tiles); the reasons are named."""
    p, pp, m = _fields(field, (12, 12, 32), torch.float32)
    assert "3D" in ops.zwin_step_ok(p[0], 4, (2, 2), (10, 28), None, ZWIN)
    assert "sponge" in ops.zwin_step_ok(p, 4, (2, 2, 4), (10, 10, 28), [p[0, 0]] * 3, ZWIN)
    assert "x bounds" in ops.zwin_step_ok(p, 4, (2, 2, 3), (10, 10, 28), None, ZWIN)
    assert "from every face" in ops.zwin_step_ok(p, 8, (2, 4, 4), (10, 8, 24), None, ZWIN)
    out = torch.full_like(pp, math.nan)
    ops.step_into(p, pp, m, out, 4, (1.0,) * 3, (2, 2, 3), (10, 10, 27), None, "triton", ZWIN)  # x bounds: march
    ref = torch.full(p.shape, math.nan, dtype=torch.float64)
    wave_step_torch(p.double(), pp.double(), m.double(), ref, 4, (1.0,) * 3, (2, 2, 3), (10, 10, 27))
    assert _rel(out[2:10, 2:10, 3:27], ref[2:10, 2:10, 3:27]) < TOL[torch.float32]
    assert "multiples of 16 bytes" in ops.zwin_step_ok(p[:, :, :30], 4, (2, 2, 4), (10, 10, 24), None, ZWIN)
    with pytest.raises(ValueError, match="zwin"):
        WaveConfig(4, 8, 5, 1, loop_unroll=2)
    with pytest.raises(ValueError, match="kernel"):
        WaveConfig(4, 8, 5, 1, kernel="rows")
    for bad in (dict(loop_unroll=0), dict(loop_unroll=2.0), dict(l1_prefetch=-1), dict(l1_prefetch=True)):
        with pytest.raises(ValueError, match="loop_unroll|l1_prefetch"):
            WaveConfig(4, 8, 5, 1, kernel="zwin", **bad)
    for bad in (dict(halo_ahead=3), dict(halo_ahead=True)):
        with pytest.raises(ValueError, match="halo_ahead"):
            WaveConfig(4, 8, 5, 1, kernel="zwin", **bad)
    with pytest.raises(ValueError, match="zwin"):
        WaveConfig(4, 8, 5, 1, halo_ahead=1)
