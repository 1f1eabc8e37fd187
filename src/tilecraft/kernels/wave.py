"""Triton kernels of the acoustic wave time step (``tilecraft.wave``).

Only ``@triton.jit`` code lives here; validation and launches are in ``tilecraft.ops.wave``.

* ``wave_step_kernel``: the fused step p_next = 2 p - p_prev + m lap(p) (m = v**2 dt**2
  premultiplied), optionally with a damping sponge whose profile is computed from three 1D arrays
  (no per-point traffic). It reads p (with its 2R-wide neighbourhood), p_prev and m once and writes
  p_next once: the least traffic of a step, 4 words per point. ``out`` may be ``p_prev`` (each point
  reads its own p_prev before it writes), so a run keeps two wavefields, not three.
  Its Laplacian is the z-march of ``tilecraft.kernels.stencil`` (z terms through L1, x terms from
  vector-shifted 128-bit loads): the plane helpers are imported from there, not copied.
* ``wave_cpml_kernel``: the same step with the convolutional PML folded in (Pasalic & McGarry
  2010), one launch over the absorbing layers' boxes; ``wave_step_kernel`` runs the rest. Each
  point reads p (with +-2R along the axes whose layer it meets), p_prev, m and its memory variables
  once and writes p_next, psi and zeta once (psi double-buffered).
* ``wave_layer_kernel``: the step with the CPML on the layers' boxes where a given set of axes has
  terms (one launch per set: faces, edges, corners), psi_new written before by ``cpml_psi_kernel``;
  built like ``wave_step_kernel`` (plane march, 128-bit loads and stores): the GPU default.
* ``cpml_psi_march_kernel``: psi_new on the layers before ``wave_layer_kernel``, one launch per axis
  over its layers' boxes, built the same way (plane march, 128-bit, no element masks): the GPU
  default's psi launches.
* ``cpml_psi_kernel`` and ``cpml_correct_kernel``: the unfused CPML (separate slab launches per
  axis after the step), kept as the benchmark's comparison; the psi kernel also runs before the
  two-phase variant (and the march variant without ``psi_tiles``).

Arrays are (nz, ny, nx) with unit x stride and shared strides; a 2D run passes (1, nz, nx) views and
HAS_Z=False.
"""
from __future__ import annotations

import triton
import triton.language as tl

from tilecraft.kernels.stencil import (
    _aligned,
    _chunk_loads,
    _components,
    _interleave,
    _march_offsets,
    _march_tile,
    _plane_loads,
    _plane_xy,
    _row_loads,
    _shifted_components,
    _store_tile,
    _tile_coords,
    _weights,
    _zwin_march,
)


@triton.jit
def _plane_terms(base, pp_plane, m_plane, offs, row_ok, row_mask, xs, nx, s_y, s_z64, w_centre, wz, wy, wx,
                 R: tl.constexpr, VEC: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr,
                 HAS_Z: tl.constexpr):
    """One plane tile of a step: p's centre, its Laplacian (x/y from the stencil's plane helpers, z
    terms through L1), and p_prev and m at the same points."""
    centre = tl.load(base + offs, mask=row_mask, other=0.0)
    rows, chunks = _plane_loads(base, offs, row_ok, row_mask, xs, nx, s_y, R, VEC)
    lap = _plane_xy(centre, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X, True)
    if HAS_Z:
        for k in tl.static_range(1, R + 1):
            lo = tl.load(base - k * s_z64 + offs, mask=row_mask, other=0.0)
            hi = tl.load(base + k * s_z64 + offs, mask=row_mask, other=0.0)
            lap += (lo + hi) * wz[k - 1]
    prev = tl.load(pp_plane + offs, mask=row_mask, other=0.0)
    m = tl.load(m_plane + offs, mask=row_mask, other=0.0)
    return centre, lap, prev, m


@triton.jit
def _box_program(lp, z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org, nx, s_y, BLOCK_Y: tl.constexpr,
                 BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr):
    """Program ``lp`` of a z-march over the box [z_lo, z_hi) x [y_lo, y_hi) x [x_lo, x_hi): its
    (BLOCK_Y, BLOCK_X) tile (x tiles fastest, then y tiles, then z chunks; x tiles start at x_org, a
    multiple of the vector width at or below x_lo, so a box that starts inside the row loads no
    columns left of it), masks, whether the tile lies inside [x_lo, x_hi), its planes, offsets."""
    n_tx = tl.cdiv(x_hi - x_org, BLOCK_X)
    n_ty = tl.cdiv(y_hi - y_lo, BLOCK_Y)
    tile_x, tile_y, zc = _march_tile(lp, n_tx, n_ty, 1, 2)
    ys, xl, row_ok, row_mask, _out_mask, x_in = _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo - x_org, x_hi - x_org,
                                                            nx - x_org, BLOCK_Y, BLOCK_X)
    xs = xl + x_org
    x0 = x_org + tile_x * BLOCK_X
    full_x = (x0 >= x_lo) & (x0 + BLOCK_X <= x_hi)
    z_begin = z_lo + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, z_hi)
    return ys, xs, row_ok, row_mask, x_in, full_x, z_begin, z_end, ys[:, None] * s_y + xs[None, :]


@triton.jit
def wave_step_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr, w_ptr, gz_ptr, gy_ptr, gx_ptr,
    nz, ny, nx_s, s_z_s, s_y_s,
    z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org_s,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, HAS_Z: tl.constexpr, SPONGE: tl.constexpr,
    NONTEMPORAL: tl.constexpr,
):
    """One program owns a (BLOCK_Y, BLOCK_X) tile and marches BLOCK_Z planes of the box
    [z_lo, z_hi) x [y_lo, y_hi) x [x_lo, x_hi); grid x tiles fastest, then y tiles, then z chunks.
    x tiles start at x_org_s * SCALE (<= x_lo).

    nx and the strides arrive divided by SCALE (= VEC when all are multiples of it) so Triton knows
    rows start on 16-byte boundaries (see ``laplacian_zmarch_kernel``). ``w_ptr``: the stencil
    weights [centre, wz_1..wz_R, wy_1..wy_R, wx_1..wx_R]; ``g*_ptr``: the sponge's g = eta dt / 2
    per axis (read only when SPONGE).
    """
    nx = nx_s * SCALE
    s_z = s_z_s * SCALE
    s_y = s_y_s * SCALE
    x_org = x_org_s * SCALE
    ys, xs, row_ok, row_mask, x_in, full_x, z_begin, z_end, offs = _box_program(
        tl.program_id(0), z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org, nx, s_y, BLOCK_Y, BLOCK_X, BLOCK_Z)
    s_z64 = s_z.to(tl.int64)
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
        centre, lap, prev, m = _plane_terms(base, pp_ptr + plane, m_ptr + plane, offs, row_ok, row_mask, xs, nx,
                                            s_y, s_z64, w_centre, wz, wy, wx, R, VEC, BLOCK_Y, BLOCK_X, HAS_Z)
        if SPONGE:
            g = g_yx + tl.load(gz_ptr + p)
            # Approximate division (a few ulp): the IEEE one is a slow multi-instruction sequence.
            val = tl.fdiv(2.0 * centre - (1.0 - g) * prev + m * lap, 1.0 + g, ieee_rounding=False)
        else:
            val = 2.0 * centre - prev + m * lap
        _store_tile(out_ptr + plane + offs, val, row_mask, x_in, full_x, NONTEMPORAL)


@triton.jit
def wave_zwin_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr, w_ptr,
    nz, ny, nx_s, s_z_s, s_y_s,
    z_lo, z_hi, y_lo, y_hi, x_lo_s, x_hi_s,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, NONTEMPORAL: tl.constexpr, OFFS64: tl.constexpr, PREFETCH: tl.constexpr,
    LOOP_UNROLL: tl.constexpr, L1_PREFETCH: tl.constexpr, SECTOR: tl.constexpr, HALO_AHEAD: tl.constexpr = 0,
):
    """The plain step p_next = 2 p - p_prev + m lap(p) on the box [z_lo, z_hi) x [y_lo, y_hi) x
    [x_lo, x_hi) as the stencil's register-window march (``laplacian_zwin_kernel``): each thread keeps
    its points' z window of accumulators in registers, the y rows and x chunks of every plane come
    from L1 (prefetched L1_PREFETCH planes ahead), the loop is unrolled LOOP_UNROLL times; when an
    output plane's accumulator is complete, p, p_prev and m are read at its points and p_next written.

    Rows past y_hi are clamped to y_hi - 1 for the loads; the last x tile is shifted left to end at nx
    (its loads stay inside the rows) but stores only the columns it owns, from x_lo + tile_x *
    BLOCK_X on: the same output is never written twice, so ``out`` may be ``pp_ptr`` (each point reads
    its p_prev before its own program writes it; a shifted tile's extra columns read p_prev that may
    already be p_next, and are not stored). nx, x_lo, x_hi and the strides arrive divided by VEC (all
    multiples of it): every load and store is 128-bit and the store masks are constant over a vector.
    Needs z_lo >= R, z_hi <= nz - R, y_lo >= R, y_hi <= ny - R, x_lo >= R, x_hi <= nx - R, nx >=
    BLOCK_X (``ops.wave.zwin_step_ok``). Grid: 1D, x tiles fastest, then y tiles, then z chunks."""
    nx = nx_s * VEC
    s_z = s_z_s * VEC
    s_y = s_y_s * VEC
    x_lo = x_lo_s * VEC
    x_hi = x_hi_s * VEC
    tile_x, tile_y, zc = _march_tile(tl.program_id(0), tl.cdiv(x_hi - x_lo, BLOCK_X), tl.cdiv(y_hi - y_lo, BLOCK_Y),
                                     tl.cdiv(z_hi - z_lo, BLOCK_Z), 2)
    z_begin = z_lo + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, z_hi)
    own = x_lo + tile_x * BLOCK_X
    x0 = _aligned(tl.minimum(own, nx - BLOCK_X), VEC)
    y0 = y_lo + tile_y * BLOCK_Y
    ys = y0 + tl.arange(0, BLOCK_Y)
    xs = x0 + tl.arange(0, BLOCK_X)
    row_ok = ys < y_hi
    ys_ld = tl.minimum(ys, y_hi - 1)
    tile_mask = row_ok[:, None] & ((xs >= own) & (xs < x_hi))[None, :]  # constant over a vector
    # one set of offsets (rows clamped) for loads and stores: the rows past y_hi are not stored (tile_mask)
    s_z64, _s_z64, s_y, offs, _o, w_centre, wz, wy, wx = _march_offsets(ys_ld, ys_ld, xs, s_z, s_y, s_z, s_y, w_ptr,
                                                                          R, OFFS64)
    _zwin_march(p_ptr, out_ptr, pp_ptr, m_ptr, z_begin, z_end, nz, ny, nx, s_z64, s_z64, s_y, offs, offs, xs, x0, y0,
                w_centre, wz, wy, wx, tile_mask, None, None, R, BLOCK_Y, BLOCK_X, VEC, NONTEMPORAL, PREFETCH,
                LOOP_UNROLL, L1_PREFETCH, SECTOR, True, HALO_AHEAD)


@triton.jit
def wave_two_steps_kernel(
    p_ptr, pp_ptr, m_ptr, p1_ptr, p2_ptr, w_ptr,
    nz, ny, nx_s, s_z_s, s_y_s,
    z_lo, z_hi, y_lo, y_hi, x_lo_s, x_hi_s,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, NONTEMPORAL: tl.constexpr, OFFS64: tl.constexpr,
):
    """Two plain time steps in one pass over the box [z_lo, z_hi) x [y_lo, y_hi) x [x_lo, x_hi) (a prototype of
    temporal blocking, docs/wave.md "two time steps a pass"): p1 = 2 p - p_prev + m lap(p), then
    p2 = 2 p1 - p + m lap(p1). Reads p_prev, p and m, writes p1 and p2: five words a point for two steps.

    A program owns a (BLOCK_Y - 2R, BLOCK_X - 2R) tile and a chunk of BLOCK_Z planes of the box. Its register tile
    (BLOCK_Y, BLOCK_X) is the owned tile extended by R each way. One loop walks z from R planes before the chunk to
    R planes after it. At plane z it makes step 1 on the extended tile and stores it into p1 (box points only),
    then, after a CTA barrier, step 2 at plane z - R on the owned tile, reading p1's neighbours back from memory.
    Neighbouring programs store the same p1 values where their extended tiles overlap: the same inputs through the
    same loop body, so any order of those stores leaves the same bits, and every p1 value a program reads was
    stored by itself first (or lies outside the box: the caller's, e.g. the absorbing layers' step). p1 and p2
    may alias none of p_prev, p, m or each other (``ops.wave.two_steps_ok``).

    Loads and stores are 128-bit: R, the box's x bounds, nx and the strides are multiples of VEC (passed divided by
    it), so the x masks are constant over a vector. Grid: 1D, x tiles fastest, then y tiles, then z chunks."""
    nx = nx_s * VEC
    s_z = s_z_s * VEC
    s_y = s_y_s * VEC
    x_lo = x_lo_s * VEC
    x_hi = x_hi_s * VEC
    TY: tl.constexpr = BLOCK_Y - 2 * R
    TX: tl.constexpr = BLOCK_X - 2 * R
    tile_x, tile_y, zc = _march_tile(tl.program_id(0), tl.cdiv(x_hi - x_lo, TX), tl.cdiv(y_hi - y_lo, TY),
                                     tl.cdiv(z_hi - z_lo, BLOCK_Z), 2)
    ox = x_lo + tile_x * TX
    oy = y_lo + tile_y * TY
    ys = oy - R + tl.arange(0, BLOCK_Y)
    xs = ox - R + tl.arange(0, BLOCK_X)
    row_ld = (ys >= R) & (ys < ny - R)  # rows whose y neighbours lie in the grid (every box row)
    row_mask = row_ld[:, None] & (xs < nx)[None, :]
    in_box = ((ys >= y_lo) & (ys < y_hi))[:, None] & ((xs >= x_lo) & (xs < x_hi))[None, :]
    owned = (((ys >= oy) & (ys < oy + TY) & (ys < y_hi))[:, None]
             & ((xs >= ox) & (xs < ox + TX) & (xs < x_hi))[None, :])
    s_z64, _s, s_y, offs, _o, w_centre, wz, wy, wx = _march_offsets(ys, ys, xs, s_z, s_y, s_z, s_y, w_ptr, R, OFFS64)
    z_begin = z_lo + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, z_hi)
    for z in range(z_begin - R, z_end + R):
        # step 1 at plane z, on the extended tile (one body for every plane: the same bits in every program)
        live1 = (z >= z_lo) & (z < z_hi)
        plane = z * s_z64
        centre, lap, prev, m = _plane_terms(p_ptr + plane, pp_ptr + plane, m_ptr + plane, offs, row_ld & live1,
                                            row_mask & live1, xs, nx, s_y, s_z64, w_centre, wz, wy, wx, R, VEC,
                                            BLOCK_Y, BLOCK_X, True)
        tl.store(p1_ptr + plane + offs, 2.0 * centre - prev + m * lap, mask=in_box & live1)
        tl.debug_barrier()  # this CTA's p1 stores before its loads of them
        # step 2 at plane z - R, on the owned tile
        zq = z - R
        live2 = zq >= z_begin
        plane2 = zq * s_z64
        c1, lap1, c0, m2 = _plane_terms(p1_ptr + plane2, p_ptr + plane2, m_ptr + plane2, offs, row_ld & live2,
                                        row_mask & live2, xs, nx, s_y, s_z64, w_centre, wz, wy, wx, R, VEC, BLOCK_Y,
                                        BLOCK_X, True)
        if NONTEMPORAL:
            tl.store(p2_ptr + plane2 + offs, 2.0 * c1 - c0 + m2 * lap1, mask=owned & live2, cache_modifier=".cs")
        else:
            tl.store(p2_ptr + plane2 + offs, 2.0 * c1 - c0 + m2 * lap1, mask=owned & live2)


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
    p_ptr, psi_ptr, a_ptr, b_ptr, d1_ptr, psi_out_ptr,
    b0, b1, b2, n0, n1, n2, s0, s1, t0, t1, origin,
    AXIS: tl.constexpr, R: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, Z_ROWS: tl.constexpr,
):
    """psi_out = b psi + a dp/dx_AXIS on a box; d1_ptr holds the first-difference weights d_k / h.
    psi (and psi_out: psi itself, or the other buffer of a pair) store [origin, ...) of AXIS only
    (strides t0, t1, 1): the slabs, not the whole grid."""
    off, c0, c1, c2, mask = _box_tile(b0, b1, b2, n0, n1, n2, s0, s1, BLOCK_R, BLOCK_C, Z_ROWS)
    s, c = _axis_stride(c0, c1, c2, s0, s1, AXIS)
    aoff, _ = _aux_offsets(c0, c1, c2, t0, t1, origin, AXIS)
    acc = _first_difference(p_ptr + off, s, mask, d1_ptr, R)
    a = tl.load(a_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    psi = tl.load(psi_ptr + aoff, mask=mask)
    tl.store(psi_out_ptr + aoff, b * psi + a * acc, mask=mask)


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


# ------------------------------------------------------------------------------------------------
# the step with the CPML folded in (the absorbing layers' boxes, one launch)
# ------------------------------------------------------------------------------------------------
@triton.jit
def _psi_pair(psi_old_ptr, b_ptr, aux, st, c, n_c, q, e_ext, lmask, live, k):
    """b psi_old at +k minus at -k along the axis, where the store holds psi (a point outside the
    layers may see none: 0 there)."""
    lo = tl.load(psi_old_ptr + aux - k * st, mask=lmask & (q - k >= 0) & (q - k < e_ext), other=0.0)
    hi = tl.load(psi_old_ptr + aux + k * st, mask=lmask & (q + k >= 0) & (q + k < e_ext), other=0.0)
    b_lo = tl.load(b_ptr + c - k, mask=live & (c - k >= 0) & (c - k < n_c), other=1.0)
    b_hi = tl.load(b_ptr + c + k, mask=live & (c + k >= 0) & (c + k < n_c), other=1.0)
    return b_hi * hi - b_lo * lo


@triton.jit
def _cpml_term_read(val, m, p_ptrs, sp, c, n_c, q, e_ext, aux, st, lmask, inside, live, psi_ptr, zeta_ptr, a_ptr,
                    b_ptr, w_ptr, R: tl.constexpr):
    """``_cpml_term`` with psi_new already stored (``psi_ptr``): D = sum_k d_k (psi[+k] - psi[-k]),
    zeta = b zeta + a (d2p/dx2 + D) in the layer, val + m (D + zeta)."""
    d1 = _weights(w_ptr, -1, R)
    c2 = _weights(w_ptr, R, R)
    d2 = tl.load(p_ptrs, mask=lmask, other=0.0) * tl.load(w_ptr + R)
    dpsi = tl.zeros_like(d2)
    for k in tl.static_range(1, R + 1):
        lo = tl.load(p_ptrs - k * sp, mask=lmask & (c - k >= 0), other=0.0)
        hi = tl.load(p_ptrs + k * sp, mask=lmask & (c + k < n_c), other=0.0)
        d2 += (lo + hi) * c2[k - 1]
        s_lo = tl.load(psi_ptr + aux - k * st, mask=lmask & (q - k >= 0) & (q - k < e_ext), other=0.0)
        s_hi = tl.load(psi_ptr + aux + k * st, mask=lmask & (q + k >= 0) & (q + k < e_ext), other=0.0)
        dpsi += (s_hi - s_lo) * d1[k - 1]
    ok0 = live & (c >= 0) & (c < n_c)
    a0 = tl.load(a_ptr + c, mask=ok0, other=0.0)
    b0 = tl.load(b_ptr + c, mask=ok0, other=1.0)
    in_layer = inside & (a0 != 0.0)
    zeta = tl.where(in_layer, b0 * tl.load(zeta_ptr + aux, mask=in_layer, other=0.0) + a0 * (d2 + dpsi), 0.0)
    tl.store(zeta_ptr + aux, zeta, mask=in_layer)
    return val + m * (dpsi + zeta)


@triton.jit
def _cpml_term(val, m, p_ptrs, sp, c, n_c, q, e_ext, aux, st, lmask, inside, live,
               psi_old_ptr, psi_new_ptr, zeta_ptr, a_ptr, b_ptr, w_ptr, c_ptr, R: tl.constexpr,
               UNROLL: tl.constexpr, PRECOMPUTED: tl.constexpr):
    """val + m (dpsi/dx + zeta_new) along one axis for a tile, updating the memory variables.

    ``c``: the points' index along the axis (a (1, 1) tile for z, a column for y, a row for x),
    ``n_c`` the array's extent; ``q``: their index inside the memory-variable store (extent
    ``e_ext``), ``aux``: their offsets there, ``st`` its stride along the axis; ``sp``: p's stride.

    dpsi/dx needs psi_new = b psi_old + a dp/dx at the 2R neighbours: its psi_old part is read
    (b psi_old at +-k), its p part is a fixed combination of p at +-2R along the axis whose
    coefficients depend only on the index along the axis (``c_ptr``: a (n_c, 4R+1) table,
    sum_k,j d_k d_j (a(c+k) (p[c+k+j] - p[c+k-j]) - a(c-k) (...))), so each p load feeds three
    accumulators (that sum, dp/dx and d2p/dx2 at the point) and nothing another program writes is
    read: psi is double-buffered (psi_old read, psi_new written), zeta read and written only at
    the point. Outside the layer (a = 0, b = 1) psi and zeta stay 0 and nothing is stored.
    ``w_ptr``: [d_1..d_R] / h, then [c_0..c_R] / h**2. ``live``: true, but computed from the plane
    index, so the compiler does not hoist the loop-invariant profile and table loads of the y and x
    terms out of the plane loop (they would stay live across it: registers). UNROLL: unrolled sums (every load in flight
    at once) or runtime loops (fewer registers).

    PRECOMPUTED: psi_new was written before this launch (``cpml_psi_kernel`` over the layers and
    their R neighbours): dpsi/dx reads it at +-k and d2p/dx2 reads p at +-R, nothing else; psi is
    not stored here.
    """
    if PRECOMPUTED:
        return _cpml_term_read(val, m, p_ptrs, sp, c, n_c, q, e_ext, aux, st, lmask, inside, live, psi_new_ptr,
                               zeta_ptr, a_ptr, b_ptr, w_ptr, R)
    ok0 = live & (c >= 0) & (c < n_c)
    crow = c_ptr + c * (4 * R + 1) + 2 * R
    centre = tl.load(p_ptrs, mask=lmask, other=0.0)
    dpsi = centre * tl.load(crow, mask=ok0, other=0.0)
    d2 = centre * tl.load(w_ptr + R)
    dp = tl.zeros_like(centre)
    if UNROLL:
        d1 = _weights(w_ptr, -1, R)
        c2 = _weights(w_ptr, R, R)
        for s in tl.static_range(1, 2 * R + 1):
            lo = tl.load(p_ptrs - s * sp, mask=lmask & (c - s >= 0), other=0.0)
            hi = tl.load(p_ptrs + s * sp, mask=lmask & (c + s < n_c), other=0.0)
            dpsi += lo * tl.load(crow - s, mask=ok0, other=0.0) + hi * tl.load(crow + s, mask=ok0, other=0.0)
            if s <= R:
                dp += (hi - lo) * d1[s - 1]
                d2 += (lo + hi) * c2[s - 1]
        for k in tl.static_range(1, R + 1):
            dpsi += _psi_pair(psi_old_ptr, b_ptr, aux, st, c, n_c, q, e_ext, lmask, live, k) * d1[k - 1]
    else:
        # The same sums as runtime loops: fewer values live at once (registers), loads less overlapped.
        for s in tl.range(1, 2 * R + 1):
            lo = tl.load(p_ptrs - s * sp, mask=lmask & (c - s >= 0), other=0.0)
            hi = tl.load(p_ptrs + s * sp, mask=lmask & (c + s < n_c), other=0.0)
            dpsi += lo * tl.load(crow - s, mask=ok0, other=0.0) + hi * tl.load(crow + s, mask=ok0, other=0.0)
            inner = s <= R
            dp += (hi - lo) * tl.load(w_ptr + s - 1, mask=inner, other=0.0)
            d2 += (lo + hi) * tl.load(w_ptr + R + s, mask=inner, other=0.0)
        for k in tl.range(1, R + 1):
            dpsi += _psi_pair(psi_old_ptr, b_ptr, aux, st, c, n_c, q, e_ext, lmask, live, k) * tl.load(w_ptr + k - 1)
    a0 = tl.load(a_ptr + c, mask=ok0, other=0.0)
    b0 = tl.load(b_ptr + c, mask=ok0, other=1.0)
    in_layer = inside & (a0 != 0.0)
    psi = b0 * tl.load(psi_old_ptr + aux, mask=in_layer, other=0.0) + a0 * dp
    zeta = tl.where(in_layer, b0 * tl.load(zeta_ptr + aux, mask=in_layer, other=0.0) + a0 * (d2 + dpsi), 0.0)
    tl.store(zeta_ptr + aux, zeta, mask=in_layer)
    tl.store(psi_new_ptr + aux, psi, mask=in_layer)
    return val + m * (dpsi + zeta)


@triton.jit
def _axis_meta(meta_ptr, AXIS: tl.constexpr):
    """(S, t0, t1, o_lo, o_hi, split, E) of one axis's memory variables and its two layer intervals
    [w0, w1), [w2, w3) (where its terms are not zero)."""
    base = meta_ptr + AXIS * 11
    return (tl.load(base), tl.load(base + 1), tl.load(base + 2), tl.load(base + 3), tl.load(base + 4),
            tl.load(base + 5), tl.load(base + 6), tl.load(base + 7), tl.load(base + 8), tl.load(base + 9),
            tl.load(base + 10))


@triton.jit
def wave_cpml_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr, w_ptr, meta_ptr,
    zpo_ptr, zpn_ptr, zz_ptr, za_ptr, zb_ptr, zw_ptr, zc_ptr,
    ypo_ptr, ypn_ptr, yz_ptr, ya_ptr, yb_ptr, yw_ptr, yc_ptr,
    xpo_ptr, xpn_ptr, xz_ptr, xa_ptr, xb_ptr, xw_ptr, xc_ptr,
    nz, ny, nx_s, s_z_s, s_y_s,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, HAS_Z: tl.constexpr, NB: tl.constexpr,
    PML_Z: tl.constexpr, PML_Y: tl.constexpr, PML_X: tl.constexpr, UNROLL: tl.constexpr,
    PRECOMPUTED: tl.constexpr,
):
    """The fused step p_next = 2 p - p_prev + m (lap p + sum_a (dpsi_a/dx_a + zeta_a)) on up to NB
    boxes (the absorbing layers; the rest of the grid runs ``wave_step_kernel``), one launch.

    ``meta_ptr`` (int32): 3 x 11 ints per axis (``_axis_meta``), then NB x 8 per box
    (z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org / SCALE, first program). A program finds its box,
    owns a (BLOCK_Y, BLOCK_X) tile of it and marches BLOCK_Z planes, as ``wave_step_kernel``; each
    axis's CPML term is computed only on planes (z) or tiles (y, x) that meet that axis's layers.
    Per axis a: psi_old (read), psi_new (written), zeta, the profiles a and b, the weights
    [d_k / h, c_k / h**2] and the (n_a, 4R+1) table of ``_cpml_term``; the memory variables are (K, ...) stacks of K = 1 or 2 stores (one per
    layer), each holding [origin, origin + E) of the axis; a point uses the second store from
    ``split`` on. Stores are exact (element-masked): tiles of different boxes may share a vector.
    """
    nx = nx_s * SCALE
    s_z = s_z_s * SCALE
    s_y = s_y_s * SCALE
    s_z64 = s_z.to(tl.int64)
    pid = tl.program_id(0)
    boxes = meta_ptr + 3 * 11
    bi = 0
    for i in tl.static_range(1, NB):
        bi += (pid >= tl.load(boxes + i * 8 + 7)).to(tl.int32)
    box = boxes + bi * 8
    z_lo = tl.load(box)
    z_hi = tl.load(box + 1)
    y_lo = tl.load(box + 2)
    y_hi = tl.load(box + 3)
    x_lo = tl.load(box + 4)
    x_hi = tl.load(box + 5)
    x_org = tl.load(box + 6) * SCALE
    lp = pid - tl.load(box + 7)
    n_tx = tl.cdiv(x_hi - x_org, BLOCK_X)
    n_ty = tl.cdiv(y_hi - y_lo, BLOCK_Y)
    tile_x, tile_y, zc = _march_tile(lp, n_tx, n_ty, 1, 2)  # x tiles fastest, then y, then z chunks
    ys, xl, row_ok, row_mask, _out_mask, x_in = _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo - x_org, x_hi - x_org,
                                                            nx - x_org, BLOCK_Y, BLOCK_X)
    xs = xl + x_org
    inside = row_mask & x_in
    z_begin = z_lo + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, z_hi)
    offs = ys[:, None] * s_y + xs[None, :]
    w_centre = tl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    y0 = y_lo + tile_y * BLOCK_Y
    y1 = tl.minimum(y0 + BLOCK_Y, y_hi)
    x0 = tl.maximum(x_org + tile_x * BLOCK_X, x_lo)
    x1 = tl.minimum(x_org + tile_x * BLOCK_X + BLOCK_X, x_hi)
    zS, zt0, zt1, zo_lo, zo_hi, z_split, zE, zw0, zw1, zw2, zw3 = _axis_meta(meta_ptr, 0)
    yS, yt0, yt1, yo_lo, yo_hi, y_split, yE, yw0, yw1, yw2, yw3 = _axis_meta(meta_ptr, 1)
    xS, xt0, xt1, xo_lo, xo_hi, x_split, xE, xw0, xw1, xw2, xw3 = _axis_meta(meta_ptr, 2)
    # y and x: does this tile meet the axis's layers? (z: tested per plane)
    in_y = ((y0 < yw1) & (y1 > yw0)) | ((y0 < yw3) & (y1 > yw2))
    in_x = ((x0 < xw1) & (x1 > xw0)) | ((x0 < xw3) & (x1 > xw2))
    # stores along y and x: which of the K stores, the index inside it
    ysel = ys >= y_split
    yq = ys - tl.where(ysel, yo_hi, yo_lo)
    xsel = xs >= x_split
    xq = xs - tl.where(xsel, xo_hi, xo_lo)
    for pz in range(z_begin, z_end):
        plane = pz * s_z64
        base = p_ptr + plane
        centre, lap, prev, m = _plane_terms(base, pp_ptr + plane, m_ptr + plane, offs, row_ok, row_mask, xs, nx,
                                            s_y, s_z64, w_centre, wz, wy, wx, R, VEC, BLOCK_Y, BLOCK_X, HAS_Z)
        val = 2.0 * centre - prev + m * lap
        live = pz < z_end
        if PML_Z:  # noqa: SIM102 - a compile-time switch around a runtime test
            if ((pz >= zw0) & (pz < zw1)) | ((pz >= zw2) & (pz < zw3)):
                zc1 = pz + tl.zeros((1, 1), dtype=tl.int32)  # the plane index as a (1, 1) tile
                zsel = zc1 >= z_split
                zq = zc1 - tl.where(zsel, zo_hi, zo_lo)
                aux = (zsel.to(tl.int64) * zS + zq.to(tl.int64) * zt0 + (ys * zt1)[:, None] + xs[None, :])
                val = _cpml_term(val, m, base + offs, s_z64, zc1, nz, zq, zE, aux, zt0.to(tl.int64), row_mask,
                                 inside, live, zpo_ptr, zpn_ptr, zz_ptr, za_ptr, zb_ptr, zw_ptr, zc_ptr, R,
                                 UNROLL, PRECOMPUTED)
        if PML_Y:  # noqa: SIM102 - a compile-time switch around a runtime test
            if in_y:
                aux = (ysel.to(tl.int64) * yS + pz * yt0.to(tl.int64) + yq * yt1)[:, None] + xs[None, :]
                val = _cpml_term(val, m, base + offs, s_y, ys[:, None], ny, yq[:, None], yE, aux, yt1, row_mask,
                                 inside, live, ypo_ptr, ypn_ptr, yz_ptr, ya_ptr, yb_ptr, yw_ptr, yc_ptr, R,
                                 UNROLL, PRECOMPUTED)
        if PML_X:  # noqa: SIM102 - a compile-time switch around a runtime test
            if in_x:
                aux = (pz * xt0.to(tl.int64) + ys * xt1)[:, None] + (xsel.to(tl.int64) * xS + xq)[None, :]
                val = _cpml_term(val, m, base + offs, 1, xs[None, :], nx, xq[None, :], xE, aux, 1, row_mask,
                                 inside, live, xpo_ptr, xpn_ptr, xz_ptr, xa_ptr, xb_ptr, xw_ptr, xc_ptr, R,
                                 UNROLL, PRECOMPUTED)
        tl.store(out_ptr + plane + offs, val, mask=inside)


# ------------------------------------------------------------------------------------------------
# the layers' z-march (psi_new precomputed): one kernel configuration per set of active axes
# ------------------------------------------------------------------------------------------------
@triton.jit
def _x_difference(ptrs, xq, e, row_ok, d, R: tl.constexpr, VEC: tl.constexpr, BY: tl.constexpr,
                  BX: tl.constexpr):
    """sum_k d_k (u[x+k] - u[x-k]) along x for a tile of pointers into a store whose columns are
    ``xq`` (extent ``e``; columns outside it read as 0): the centre tile and tiles shifted by whole
    vectors (128-bit when aligned), split into column components as in ``_plane_xy``."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    comps = ()
    for m in tl.static_range(-NCH, NCH + 1):
        xm = xq + m * VEC
        mask = row_ok[:, None] & ((xm >= 0) & (xm < e))[None, :]
        comps = comps + (_components(tl.load(ptrs + m * VEC, mask=mask, other=0.0), VEC, BY, BX),)
    return _x_pairs(comps, d, R, VEC, BY, BX)


@triton.jit
def _x_tiles_difference(centre, chunks, d, R: tl.constexpr, VEC: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr):
    """``_x_difference`` of tiles already loaded: the centre and ``_chunk_loads``' chunks (m = -NCH..-1, 1..NCH)."""
    return _x_pairs(_shifted_components(centre, chunks, R, VEC, BY, BX), d, R, VEC, BY, BX)


@triton.jit
def _x_pairs(comps, d, R: tl.constexpr, VEC: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr):
    """sum_k d_k (u[x+k] - u[x-k]) from the column components of the tile shifted by m = -NCH..NCH vectors."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    outs = ()
    for j in tl.static_range(0, VEC):
        acc = tl.zeros((BY, BX // VEC), dtype=comps[NCH][0].dtype)
        for k in tl.static_range(1, R + 1):
            acc += (comps[(j + k) // VEC + NCH][(j + k) % VEC] - comps[(j - k) // VEC + NCH][(j - k) % VEC]) \
                * d[k - 1]
        outs = outs + (acc,)
    return _interleave(outs, VEC, BY, BX)


@triton.jit
def _strided_difference(ptrs, stride, mask, d, R: tl.constexpr):
    """sum_k d_k (u[+k stride] - u[-k stride]) for a tile of pointers (y rows or z planes)."""
    acc = tl.zeros(ptrs.shape, dtype=ptrs.dtype.element_ty)
    for k in tl.static_range(1, R + 1):
        acc += (tl.load(ptrs + k * stride, mask=mask, other=0.0) - tl.load(ptrs - k * stride, mask=mask, other=0.0)) \
            * d[k - 1]
    return acc


@triton.jit
def _z_window(ptr, offs, stride, z0, mask, R: tl.constexpr):
    """The tile's planes z0 - R .. z0 + R - 1 (``ptr`` at plane 0, ``offs`` the tile's, ``stride`` a plane): a z
    window's start."""
    win = ()
    for k in tl.static_range(0, 2 * R):
        win = win + (tl.load(ptr + (z0 - R + k) * stride + offs, mask=mask, other=0.0),)
    return win


@triton.jit
def _layer_update(val, m, d2, dpsi, zeta_ptrs, a, b, mask, x_in, full_x):
    """zeta = b zeta + a (d2 + dpsi) (stored: the tile's points of the box), val + m (dpsi + zeta).
    Outside the layer (a = 0, zeta 0) zeta stays 0."""
    zeta = b * tl.load(zeta_ptrs, mask=mask, other=0.0) + a * (d2 + dpsi)
    _store_tile(zeta_ptrs, zeta, mask, x_in, full_x, False)
    return val + m * (dpsi + zeta)


@triton.jit
def _table_program(box_ptr, nx, s_y, NB: tl.constexpr, SCALE: tl.constexpr, BLOCK_Y: tl.constexpr,
                   BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr, PAIR: tl.constexpr = 0):
    """This program's box of a launch over NB boxes (``box_ptr``, int64, rows of 16: z_lo, z_hi,
    y_lo, y_hi, x_lo, x_hi, x_org / SCALE, first program, then the launch's own values) and its
    ``_box_program`` tile; returns the box's row pointer first. PAIR (NB = 2, boxes of as many programs):
    the boxes' programs interleaved, program 2 i the first box's i-th and 2 i + 1 the second's."""
    pid = tl.program_id(0)
    if PAIR:
        box = box_ptr + (pid % 2) * 16
        lp = pid // 2
    else:
        bi = 0
        for i in tl.static_range(1, NB):
            bi += (pid >= tl.load(box_ptr + i * 16 + 7)).to(tl.int32)
        box = box_ptr + bi * 16
        lp = pid - tl.load(box + 7).to(tl.int32)
    z_lo = tl.load(box).to(tl.int32)
    z_hi = tl.load(box + 1).to(tl.int32)
    y_lo = tl.load(box + 2).to(tl.int32)
    y_hi = tl.load(box + 3).to(tl.int32)
    x_lo = tl.load(box + 4).to(tl.int32)
    x_hi = tl.load(box + 5).to(tl.int32)
    x_org = tl.load(box + 6).to(tl.int32) * SCALE
    return (box,) + _box_program(lp, z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org, nx, s_y, BLOCK_Y, BLOCK_X, BLOCK_Z)


@triton.jit
def cpml_psi_march_kernel(
    p_ptr, psi_ptr, psi_out_ptr, a_ptr, b_ptr, d_ptr, box_ptr,
    nx_s, s_z_s, s_y_s, t0_s, t1_s, xe_s,
    AXIS: tl.constexpr, R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, NB: tl.constexpr,
):
    """psi_out = b psi + a dp/dx_AXIS on NB boxes (one per layer), built like ``wave_layer_kernel``:
    a program owns a (BLOCK_Y, BLOCK_X) tile and marches BLOCK_Z planes, every load and store a
    whole 128-bit vector (no element masks: edge tiles rewrite the columns they do not own with
    their own bits, ``_store_tile``). dp/dx_AXIS from p at +-k planes, rows or vector-shifted
    tiles (``_strided_difference``, ``_x_difference``); ``d_ptr``: [d_1..d_R] / h.

    ``box_ptr``: ``_table_program``'s rows; per box, at 8, the offset of its store (store index x
    its stride, minus origin x the store's stride along AXIS; / SCALE) and at 9 the store's origin
    along x / SCALE (AXIS 2). psi at (z, y, x) is at offset + z t0 + y t1 + x (t0, t1 the store's
    strides / SCALE); the x store's columns are [0, xe) from its origin."""
    nx = nx_s * SCALE
    s_y = s_y_s * SCALE
    s_z64 = s_z_s.to(tl.int64) * SCALE
    box, ys, xs, row_ok, row_mask, x_in, full_x, z_begin, z_end, offs = _table_program(
        box_ptr, nx, s_y, NB, SCALE, BLOCK_Y, BLOCK_X, BLOCK_Z)
    t0 = t0_s.to(tl.int64) * SCALE
    shift = tl.load(box + 8) * SCALE
    aux_offs = ys[:, None] * (t1_s * SCALE) + xs[None, :]
    d = _weights(d_ptr, -1, R)
    mask = row_mask
    if AXIS == 1:
        a = tl.load(a_ptr + ys, mask=row_ok, other=0.0)[:, None]
        b = tl.load(b_ptr + ys, mask=row_ok, other=1.0)[:, None]
    if AXIS == 2:
        xq = xs - tl.load(box + 9).to(tl.int32) * SCALE
        mask = row_ok[:, None] & ((xq >= 0) & (xq < xe_s * SCALE))[None, :]
        a = tl.load(a_ptr + xs, mask=xs < nx, other=0.0)[None, :]
        b = tl.load(b_ptr + xs, mask=xs < nx, other=1.0)[None, :]
    for pz in range(z_begin, z_end):
        base = p_ptr + pz * s_z64 + offs
        if AXIS == 0:
            acc = _strided_difference(base, s_z64, row_mask, d, R)
            a = tl.load(a_ptr + pz)
            b = tl.load(b_ptr + pz)
        elif AXIS == 1:
            acc = _strided_difference(base, s_y, row_mask, d, R)
        else:
            acc = _x_difference(base, xs, nx, row_ok, d, R, VEC, BLOCK_Y, BLOCK_X)
        aux = shift + pz * t0 + aux_offs
        psi = tl.load(psi_ptr + aux, mask=mask, other=0.0)
        _store_tile(psi_out_ptr + aux, b * psi + a * acc, mask, x_in, full_x, False)


@triton.jit
def wave_layer_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr, w_ptr, box_ptr,
    zpsi_ptr, zzeta_ptr, za_ptr, zb_ptr, zw_ptr,
    ypsi_ptr, yzeta_ptr, ya_ptr, yb_ptr, yw_ptr,
    xpsi_ptr, xzeta_ptr, xa_ptr, xb_ptr, xw_ptr,
    nx_s, s_z_s, s_y_s, zt0_s, yt0_s, xt0_s, xt1_s, xe_s, xpo_ptr,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, HAS_Z: tl.constexpr, NB: tl.constexpr,
    AX_Z: tl.constexpr, AX_Y: tl.constexpr, AX_X: tl.constexpr, PSI_X: tl.constexpr, ZWIN: tl.constexpr = 0,
    PAIR: tl.constexpr = 0,
):
    """The step with the CPML on boxes of the absorbing layers where exactly the axes AX_* have
    terms, built like ``wave_step_kernel``: a program owns a (BLOCK_Y, BLOCK_X) tile and marches
    BLOCK_Z planes, its loads and stores whole 128-bit vectors (edge tiles rewrite the columns they
    do not own, ``_store_tile``). psi_new was written before the launch (``cpml_psi_kernel``), so
    per active axis a: dpsi_a/dx_a from psi_new at +-k (planes, rows, or vector-shifted tiles),
    d2p/dx_a**2 from the Laplacian's own loads, zeta_a read and written once, and
    p_next = 2 p - p_prev + m (lap p + sum_a (dpsi_a/dx_a + zeta_a)).

    ``box_ptr`` (int64): NB rows of 16: z_lo, z_hi, y_lo, y_hi, x_lo, x_hi, x_org / SCALE, first
    program, then per axis (z, y, x) the offset of the box's store in that axis's memory variables
    (store index x its stride, minus origin x the axis's stride; / SCALE), then the x store's
    origin / SCALE. An axis's memory variables at (z, y, x) are at shift + z t0 + y t1 + x (t0, t1
    the store's strides / SCALE; t1 is p's row stride but for the x store; its columns [0, xe)). ``*w_ptr`` of an axis:
    [d_1..d_R] / h, [c_0..c_R] / h**2.

    PSI_X (with AX_X): psi_x is not precomputed: each program computes psi_new = b psi_old + a dp/dx
    (``xpo_ptr``: psi_old) on its tile's columns from p (as ``cpml_psi_march_kernel`` does), stores
    it into ``xpsi_ptr`` and, after a barrier of the program, reads it back shifted for dpsi/dx. Only
    where each box's x tile holds its whole x store (origin and extent inside the tile): the tile
    then writes every column of the store in its rows, and dpsi/dx reads no other program's psi.

    ZWIN (with HAS_Z): the tile's planes pz - R .. pz + R of p stay in registers from one output plane to
    the next (2R loaded before the march, then one a plane), instead of 2R + 1 loads a plane; ZWIN = 2 (with
    AX_Z) also psi_z's planes for dpsi_z/dz.

    PAIR (two boxes of as many programs: the x faces): their programs interleaved (``_table_program``), so the
    right face's row y and the left face's row y + 1, neighbours in memory, are read at about the same time.
    """
    nx = nx_s * SCALE
    s_z = s_z_s * SCALE
    s_y = s_y_s * SCALE
    s_z64 = s_z.to(tl.int64)
    box, ys, xs, row_ok, row_mask, x_in, full_x, z_begin, z_end, offs = _table_program(
        box_ptr, nx, s_y, NB, SCALE, BLOCK_Y, BLOCK_X, BLOCK_Z, PAIR)
    w_centre = tl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    if AX_Z:
        zt0 = zt0_s.to(tl.int64) * SCALE
        z_shift = tl.load(box + 8) * SCALE
        dz = _weights(zw_ptr, -1, R)
        cz0 = tl.load(zw_ptr + R)
    if AX_Y:
        yt0 = yt0_s.to(tl.int64) * SCALE
        y_shift = tl.load(box + 9) * SCALE
        dy = _weights(yw_ptr, -1, R)
        cy0 = tl.load(yw_ptr + R)
        ay = tl.load(ya_ptr + ys, mask=row_ok, other=0.0)[:, None]
        by = tl.load(yb_ptr + ys, mask=row_ok, other=1.0)[:, None]
    if AX_X:
        xt0 = xt0_s.to(tl.int64) * SCALE
        x_shift = tl.load(box + 10) * SCALE
        xq = xs - tl.load(box + 11).to(tl.int32) * SCALE
        xe = xe_s * SCALE
        x_mask = row_ok[:, None] & ((xq >= 0) & (xq < xe))[None, :]
        x_offs = ys[:, None] * (xt1_s * SCALE) + xs[None, :]
        dx = _weights(xw_ptr, -1, R)
        cx0 = tl.load(xw_ptr + R)
        no_y = ()  # zero y weights: the x part alone from _plane_xy
        for k in tl.static_range(0, R):
            no_y = no_y + (wy[k] * 0.0,)
        ax = tl.load(xa_ptr + xs, mask=xs < nx, other=0.0)[None, :]
        bx = tl.load(xb_ptr + xs, mask=xs < nx, other=1.0)[None, :]
    if HAS_Z and ZWIN:
        win = _z_window(p_ptr, offs, s_z64, z_begin, row_mask, R)
    if HAS_Z and AX_Z and ZWIN == 2:
        zwin = _z_window(zpsi_ptr + z_shift, offs, zt0, z_begin, row_mask, R)
    for pz in range(z_begin, z_end):
        plane = pz * s_z64
        base = p_ptr + plane
        if HAS_Z and ZWIN:
            win = win + (tl.load(base + R * s_z64 + offs, mask=row_mask, other=0.0),)
        if AX_X and PSI_X:  # first, its centre and x chunks kept for the Laplacian below
            xpb = x_shift + pz * xt0 + x_offs
            if HAS_Z and ZWIN:
                centre = win[R]
            else:
                centre = tl.load(base + offs, mask=row_mask, other=0.0)
            chunks = _chunk_loads(base, offs, row_ok, xs, nx, R, VEC)
            acc = _x_tiles_difference(centre, chunks, dx, R, VEC, BLOCK_Y, BLOCK_X)
            psi_old = tl.load(xpo_ptr + xpb, mask=x_mask, other=0.0)
            tl.store(xpsi_ptr + xpb, bx * psi_old + ax * acc, mask=x_mask)
            tl.debug_barrier()  # the program's psi_new stores before its shifted loads below
            rows = _row_loads(base, offs, row_mask, s_y, R)
        else:
            if HAS_Z and ZWIN:
                centre = win[R]
            else:
                centre = tl.load(base + offs, mask=row_mask, other=0.0)
            rows, chunks = _plane_loads(base, offs, row_ok, row_mask, xs, nx, s_y, R, VEC)
        lap = _plane_xy(centre, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X, True)
        if HAS_Z:
            zpairs = tl.zeros_like(centre)
            for k in tl.static_range(1, R + 1):
                if ZWIN:
                    lo = win[R - k]
                    hi = win[R + k]
                else:
                    lo = tl.load(base - k * s_z64 + offs, mask=row_mask, other=0.0)
                    hi = tl.load(base + k * s_z64 + offs, mask=row_mask, other=0.0)
                zpairs += (lo + hi) * wz[k - 1]
            lap += zpairs
        m = tl.load(m_ptr + plane + offs, mask=row_mask, other=0.0)
        val = 2.0 * centre - tl.load(pp_ptr + plane + offs, mask=row_mask, other=0.0) + m * lap
        if AX_Z:
            zbase = z_shift + pz * zt0
            if ZWIN == 2:
                zwin = zwin + (tl.load(zpsi_ptr + zbase + R * zt0 + offs, mask=row_mask, other=0.0),)
                dpsi = tl.zeros_like(centre)
                for k in tl.static_range(1, R + 1):
                    dpsi += (zwin[R + k] - zwin[R - k]) * dz[k - 1]
                zwin = zwin[1:]
            else:
                dpsi = _strided_difference(zpsi_ptr + zbase + offs, zt0, row_mask, dz, R)
            val = _layer_update(val, m, centre * cz0 + zpairs, dpsi, zzeta_ptr + zbase + offs, tl.load(za_ptr + pz),
                                tl.load(zb_ptr + pz), row_mask, x_in, full_x)
        if AX_Y:
            ypairs = tl.zeros_like(centre)
            for k in tl.static_range(1, R + 1):
                ypairs += (rows[R - k] + rows[R + k - 1]) * wy[k - 1]
            ybase = y_shift + pz * yt0
            dpsi = _strided_difference(ypsi_ptr + ybase + offs, s_y, row_mask, dy, R)
            val = _layer_update(val, m, centre * cy0 + ypairs, dpsi, yzeta_ptr + ybase + offs, ay, by, row_mask,
                                x_in, full_x)
        if AX_X:
            d2x = _plane_xy(centre, rows, chunks, cx0, no_y, wx, R, VEC, BLOCK_Y, BLOCK_X, True)
            xbase = x_shift + pz * xt0
            dpsi = _x_difference(xpsi_ptr + xbase + x_offs, xq, xe, row_ok, dx, R, VEC, BLOCK_Y, BLOCK_X)
            val = _layer_update(val, m, d2x, dpsi, xzeta_ptr + xbase + x_offs, ax, bx, x_mask, x_in, full_x)
        _store_tile(out_ptr + plane + offs, val, row_mask, x_in, full_x, False)
        if HAS_Z and ZWIN:
            win = win[1:]
