"""Triton kernels of the acoustic wave time step (``tilecraft.wave``).

Only ``@triton.jit`` code lives here; validation and launches are in ``tilecraft.ops.wave``.

* ``wave_step_kernel``: the fused step p_next = 2 p - p_prev + m lap(p) (m = v**2 dt**2
  premultiplied), optionally with a damping sponge whose profile is computed from three 1D arrays
  (no per-point traffic). It reads p (with its 2R-wide neighbourhood), p_prev and m once and writes
  p_next once: the least traffic of a step, 4 words per point. ``out`` may be ``p_prev`` (each point
  reads its own p_prev before it writes), so a run keeps two wavefields, not three.
  Its Laplacian is the z-march of ``tilecraft.kernels.stencil`` (z terms through L1, x terms from
  vector-shifted 128-bit loads): the plane helpers are imported from there, not copied.
* ``cpml_psi_kernel`` and ``cpml_correct_kernel``: the convolutional PML's memory variables
  (Pasalic & McGarry 2010) along one axis, launched only over the absorbing slabs of that axis.

Arrays are (nz, ny, nx) with unit x stride and shared strides; a 2D run passes (1, nz, nx) views and
HAS_Z=False.
"""
from __future__ import annotations

import triton
import triton.language as tl

from tilecraft.kernels.stencil import (
    _plane_loads,
    _plane_xy,
    _store_tile,
    _tile_coords,
    _weights,
)


@triton.jit
def wave_step_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr, w_ptr, gz_ptr, gy_ptr, gx_ptr,
    nz, ny, nx_s, s_z_s, s_y_s,
    z_lo, z_hi, y_lo, y_hi, x_lo, x_hi,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, HAS_Z: tl.constexpr, SPONGE: tl.constexpr,
    NONTEMPORAL: tl.constexpr,
):
    """One program owns a (BLOCK_Y, BLOCK_X) tile and marches BLOCK_Z planes of the box
    [z_lo, z_hi) x [y_lo, y_hi) x [x_lo, x_hi); grid x tiles fastest, then y tiles, then z chunks.

    nx and the strides arrive divided by SCALE (= VEC when all are multiples of it) so Triton knows
    rows start on 16-byte boundaries (see ``laplacian_zmarch_kernel``). ``w_ptr``: the stencil
    weights [centre, wz_1..wz_R, wy_1..wy_R, wx_1..wx_R]; ``g*_ptr``: the sponge's g = eta dt / 2
    per axis (read only when SPONGE).
    """
    nx = nx_s * SCALE
    s_z = s_z_s * SCALE
    s_y = s_y_s * SCALE
    n_tx = tl.cdiv(nx, BLOCK_X)
    n_ty = tl.cdiv(y_hi - y_lo, BLOCK_Y)
    pid = tl.program_id(0)
    tile_x = pid % n_tx
    rem = pid // n_tx
    tile_y = rem % n_ty
    zc = rem // n_ty
    ys, xs, row_ok, row_mask, _out_mask, x_in = _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo, x_hi, nx,
                                                            BLOCK_Y, BLOCK_X)
    x0 = tile_x * BLOCK_X
    full_x = (x0 >= x_lo) & (x0 + BLOCK_X <= x_hi)
    z_begin = z_lo + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, z_hi)
    s_z64 = s_z.to(tl.int64)
    offs = ys[:, None] * s_y + xs[None, :]
    w_centre = tl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    if SPONGE:
        g_yx = tl.load(gy_ptr + ys, mask=row_ok, other=0.0)[:, None] + tl.load(gx_ptr + xs, mask=xs < nx,
                                                                                other=0.0)[None, :]
    for p in range(z_begin, z_end):
        plane = p * s_z64
        base = p_ptr + plane
        centre = tl.load(base + offs, mask=row_mask, other=0.0)
        rows, chunks = _plane_loads(base, offs, row_ok, row_mask, xs, nx, s_y, R, VEC)
        lap = _plane_xy(centre, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X)
        if HAS_Z:
            for k in tl.static_range(1, R + 1):
                lo = tl.load(base - k * s_z64 + offs, mask=row_mask, other=0.0)
                hi = tl.load(base + k * s_z64 + offs, mask=row_mask, other=0.0)
                lap += (lo + hi) * wz[k - 1]
        prev = tl.load(pp_ptr + plane + offs, mask=row_mask, other=0.0)
        m = tl.load(m_ptr + plane + offs, mask=row_mask, other=0.0)
        if SPONGE:
            g = g_yx + tl.load(gz_ptr + p)
            # Approximate division (a few ulp): the IEEE one is a slow multi-instruction sequence.
            val = tl.fdiv(2.0 * centre - (1.0 - g) * prev + m * lap, 1.0 + g, ieee_rounding=False)
        else:
            val = 2.0 * centre - prev + m * lap
        _store_tile(out_ptr + plane + offs, val, row_mask, x_in, full_x, NONTEMPORAL)


@triton.jit
def _box_tile(b0, b1, b2, n0, n1, n2, s0, s1, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
              Z_ROWS: tl.constexpr):
    """A (BLOCK_R, BLOCK_C) tile of the box with origin (b0, b1, b2) and extents (n0, n1, n2): rows
    run over the (axis 0, axis 1) pairs, columns along the contiguous axis 2, so loads are coalesced
    and only one integer division per row is needed. Rows walk axis 1 fastest, or axis 0 with
    Z_ROWS (then a tile holds a column of planes, and neighbours along axis 0 are rows of the same
    tile). Returns int64 offsets, the three coordinates (broadcast to the tile) and the mask."""
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    if Z_ROWS:
        k1 = rows // n0
        k0 = rows - k1 * n0
    else:
        k0 = rows // n1
        k1 = rows - k0 * n1
    mask = (rows < n0 * n1)[:, None] & (cols < n2)[None, :]
    c0 = (b0 + k0)[:, None]
    c1 = (b1 + k1)[:, None]
    c2 = (b2 + cols)[None, :]
    off = c0.to(tl.int64) * s0 + c1.to(tl.int64) * s1 + c2
    return off, c0, c1, c2, mask


@triton.jit
def _axis_stride(c0, c1, c2, s0, s1, AXIS: tl.constexpr):
    if AXIS == 0:
        return s0.to(tl.int64), c0
    elif AXIS == 1:
        return s1.to(tl.int64), c1
    else:
        return 1, c2


@triton.jit
def _aux_offsets(c0, c1, c2, t0, t1, origin, AXIS: tl.constexpr):
    """Offsets into a memory-variable array that stores only [origin, origin + extent) of AXIS
    (strides t0, t1, 1), and its stride along AXIS."""
    if AXIS == 0:
        return (c0 - origin).to(tl.int64) * t0 + c1.to(tl.int64) * t1 + c2, t0.to(tl.int64)
    elif AXIS == 1:
        return c0.to(tl.int64) * t0 + (c1 - origin).to(tl.int64) * t1 + c2, t1.to(tl.int64)
    else:
        return c0.to(tl.int64) * t0 + c1.to(tl.int64) * t1 + (c2 - origin), 1


@triton.jit
def _first_difference(ptrs, stride, mask, d1_ptr, R: tl.constexpr):
    """sum_k d_k (u[+k] - u[-k]) along ``stride`` for a tile of pointers (d1_ptr: d_k / h)."""
    acc = tl.zeros(ptrs.shape, dtype=ptrs.dtype.element_ty)
    for k in tl.static_range(1, R + 1):
        acc = acc + (tl.load(ptrs + k * stride, mask=mask) - tl.load(ptrs - k * stride, mask=mask)) \
            * tl.load(d1_ptr + k - 1)
    return acc


@triton.jit
def cpml_psi_kernel(
    p_ptr, psi_ptr, a_ptr, b_ptr, d1_ptr,
    b0, b1, b2, n0, n1, n2, s0, s1, t0, t1, origin,
    AXIS: tl.constexpr, R: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, Z_ROWS: tl.constexpr,
):
    """psi = b psi + a dp/dx_AXIS on a box; d1_ptr holds the first-difference weights d_k / h.
    psi stores [origin, ...) of AXIS only (strides t0, t1, 1): the slabs, not the whole grid."""
    off, c0, c1, c2, mask = _box_tile(b0, b1, b2, n0, n1, n2, s0, s1, BLOCK_R, BLOCK_C, Z_ROWS)
    s, c = _axis_stride(c0, c1, c2, s0, s1, AXIS)
    aoff, _ = _aux_offsets(c0, c1, c2, t0, t1, origin, AXIS)
    acc = _first_difference(p_ptr + off, s, mask, d1_ptr, R)
    a = tl.load(a_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    psi = tl.load(psi_ptr + aoff, mask=mask)
    tl.store(psi_ptr + aoff, b * psi + a * acc, mask=mask)


@triton.jit
def cpml_correct_kernel(
    p_ptr, psi_ptr, zeta_ptr, a_ptr, b_ptr, m_ptr, out_ptr, d1_ptr, d2_ptr,
    b0, b1, b2, n0, n1, n2, s0, s1, t0, t1, origin,
    AXIS: tl.constexpr, R: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, Z_ROWS: tl.constexpr,
):
    """One axis's CPML terms on a box: D = dpsi/dx, zeta = b zeta + a (d2p/dx2 + D),
    out += m (D + zeta). d2_ptr holds [c_0, c_1..c_R] / h**2 of that axis; psi and zeta store
    [origin, ...) of AXIS (strides t0, t1, 1)."""
    off, c0, c1, c2, mask = _box_tile(b0, b1, b2, n0, n1, n2, s0, s1, BLOCK_R, BLOCK_C, Z_ROWS)
    s, c = _axis_stride(c0, c1, c2, s0, s1, AXIS)
    aoff, t = _aux_offsets(c0, c1, c2, t0, t1, origin, AXIS)
    dpsi = _first_difference(psi_ptr + aoff, t, mask, d1_ptr, R)
    d2 = tl.load(p_ptr + off, mask=mask) * tl.load(d2_ptr)
    for k in tl.static_range(1, R + 1):
        d2 = d2 + (tl.load(p_ptr + off - k * s, mask=mask) + tl.load(p_ptr + off + k * s, mask=mask)) \
            * tl.load(d2_ptr + k)
    a = tl.load(a_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    zeta = b * tl.load(zeta_ptr + aoff, mask=mask) + a * (d2 + dpsi)
    tl.store(zeta_ptr + aoff, zeta, mask=mask)
    out = tl.load(out_ptr + off, mask=mask)
    tl.store(out_ptr + off, out + tl.load(m_ptr + off, mask=mask) * (dpsi + zeta), mask=mask)
