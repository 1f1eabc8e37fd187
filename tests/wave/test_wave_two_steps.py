"""Two plain time steps a pass (``ops.wave.two_steps_into``, a prototype of temporal blocking) against two steps of
the float64 torch reference (interpreter), its refusals, and its sm90 compile (no GPU needed)."""
from __future__ import annotations

import math

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig
from tilecraft.reference.wave import wave_step_torch

TOL = {torch.float32: 3e-6, torch.float64: 1e-13}


def _box_mask(shape, lo, hi) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[tuple(slice(a, b) for a, b in zip(lo, hi))] = True
    return mask


@pytest.mark.parametrize("dtype,order,shape,lo,hi,cfg", [
    # several owned tiles per axis (8 x 8 owned in 16 x 16 register tiles), z chunks of 3: the halos overlap
    (torch.float32, 8, (17, 27, 40), None, None, WaveConfig(16, 16, 3, 1)),
    # a box inside the grid: p1 outside it is the caller's (the absorbing layers'), read by step 2 near the box
    (torch.float32, 8, (19, 26, 44), (6, 5, 8), (12, 20, 32), WaveConfig(16, 16, 4, 1)),
    (torch.float32, 16, (21, 19, 36), None, None, WaveConfig(32, 32, 2, 1)),
    (torch.float64, 4, (13, 15, 22), None, None, WaveConfig(8, 8, 2, 1)),
    (torch.float64, 8, (14, 17, 26), (5, 4, 6), (10, 13, 20), WaveConfig(16, 16, 5, 1)),
])
def test_two_steps_match_two_reference_steps(field, dtype, order, shape, lo, hi, cfg):
    r = order // 2
    lo = lo or (r,) * 3
    hi = hi or tuple(n - r for n in shape)
    pp, p = field(shape, dtype), field(shape, dtype)
    m = (field(shape, dtype) * 0.02 + 0.05).to(dtype)
    spacing = (1.0, 0.9, 1.1)
    inside = _box_mask(shape, lo, hi)
    caller = field(shape, dtype)  # p1 outside the box: what the layers' own step left there
    p1 = torch.where(inside, torch.full_like(caller, math.nan), caller)
    p2 = torch.full(shape, math.nan, dtype=dtype)
    ops.two_steps_into(pp, p, m, p1, p2, order, spacing, lo, hi, cfg)
    ref1 = caller.double().clone()
    wave_step_torch(p.double(), pp.double(), m.double(), ref1, order, spacing, lo, hi)
    ref2 = torch.full(shape, math.nan, dtype=torch.float64)
    wave_step_torch(ref1, p.double(), m.double(), ref2, order, spacing, lo, hi)
    for got, ref in ((p1, ref1), (p2, ref2)):
        assert not torch.isnan(got[inside]).any()
        assert float((got[inside].double() - ref[inside]).abs().max() / ref[inside].abs().max()) < TOL[dtype]
    assert torch.equal(p1[~inside], caller[~inside])  # outside the box: not written
    assert torch.isnan(p2[~inside]).all()


def test_two_steps_default_box_and_config(field):
    """No box: every point R or more from the faces; the default tiles (one tile, one chunk at this size)."""
    shape = (12, 12, 24)
    pp, p = field(shape, torch.float32), field(shape, torch.float32)
    m = torch.full(shape, 0.05)
    p1, p2 = torch.full(shape, math.nan), torch.full(shape, math.nan)
    p1[~_box_mask(shape, (4,) * 3, (8, 8, 20))] = 0.0
    ops.two_steps_into(pp, p, m, p1, p2, 8, 1.0)
    assert torch.isfinite(p2[4:8, 4:8, 4:20]).all() and torch.isnan(p2[:4]).all()


@pytest.mark.parametrize("case,match", [
    ("order6", "multiple of 4"),
    ("alias_p1", "p1 shares memory with p_prev"),
    ("alias_p2", "p2 shares memory with p"),
    ("nx", "multiples of 16 bytes"),
    ("box_x", "multiples of 16 bytes"),
    ("tile", "above 2R"),
    ("2d", "3D only"),
    ("shape", "shape"),
    ("box", "must lie in"),
    ("strided", "contiguous"),
    ("pointer", "multiples of 16 bytes"),
])
def test_two_steps_refuse_bad_input(case, match):
    shape = (12, 12, 24) if case != "nx" else (12, 12, 22)
    pp, p, m = (torch.zeros(shape) for _ in range(3))
    p1, p2 = torch.zeros(shape), torch.zeros(shape)
    order, lo, hi, cfg = 8, None, None, None
    if case == "order6":
        order = 6
    elif case == "alias_p1":
        p1 = pp
    elif case == "alias_p2":
        p2 = p.view(-1).view(shape)
    elif case == "box_x":
        lo, hi = (4, 4, 6), (8, 8, 20)
    elif case == "tile":
        cfg = WaveConfig(8, 16, 4, 1)
    elif case == "2d":
        pp, p, m, p1, p2 = (t[0] for t in (pp, p, m, p1, p2))
    elif case == "shape":
        p2 = torch.zeros(12, 12, 28)
    elif case == "box":
        lo, hi = (2, 4, 4), (8, 8, 20)
    elif case == "strided":
        m = torch.zeros(12, 12, 48)[:, :, ::2]
    elif case == "pointer":  # contiguous, but 4 bytes past a 16-byte boundary
        p2 = torch.zeros(12 * 12 * 24 + 1)[1:].view(shape)
    with pytest.raises(ValueError, match=match):
        ops.two_steps_into(pp, p, m, p1, p2, order, 1.0, lo, hi, cfg)
    ok = [torch.zeros(12, 12, 24) for _ in range(5)]
    with pytest.raises(TypeError):  # a half-precision field
        ops.two_steps_into(*ok[:3], ok[3].half(), ok[4], 8, 1.0)


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_two_steps_compile_vectorized_without_spills(dtype):
    """sm90, order 8, the default tiles: every global access of the fields 128-bit (the 32-bit loads are the
    weights'), no spills, one CTA barrier in the loop."""
    cfg = ops.two_steps_config(torch.float32 if dtype == "fp32" else torch.float64)
    sig = {n: f"*{dtype}:16" for n in ("p_ptr", "pp_ptr", "m_ptr", "p1_ptr", "p2_ptr", "w_ptr")}
    sig.update({n: "i32" for n in ("nz", "ny", "z_lo", "z_hi", "y_lo", "y_hi", "x_lo_s", "x_hi_s")})
    sig.update({n: "i32:16" for n in ("nx_s", "s_z_s", "s_y_s")})
    res = cross_compile("tilecraft.kernels.wave", "wave_two_steps_kernel", sig,
                        dict(R=4, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z,
                             VEC=4 if dtype == "fp32" else 2, NONTEMPORAL=False, OFFS64=False), "sm90",
                        num_warps=cfg.num_warps, num_stages=1)
    if res.error and "ptxas" in res.error:
        pytest.skip(res.error)
    assert res.error is None, res.error
    assert not res.spills and res.registers <= 128
    census = res.census
    assert census.get("sass_global_store_128b", 0) >= 2 and census.get("sass:BAR", 0) == 1
    # two levels of centre, 2R rows, 2 x chunks, 2R z planes, p_prev (or p) and m: 21 vector loads each
    assert census.get("sass_global_load_128b", 0) >= 2 * 21
    assert not any(k.startswith("sass_global_store") and not k.endswith("128b") for k in census)
    assert census.get("sass_global_load_32b", 0) <= 16  # the weights only
