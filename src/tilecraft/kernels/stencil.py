"""Triton kernels for the 3D finite-difference Laplacian (star stencil of radius R).

Only ``@triton.jit`` code lives here; launchers, validation and the choice of variant are in
``tilecraft.ops.stencil``.

Conventions shared by every kernel
----------------------------------
* ``u`` and ``out`` are (nz, ny, nx) with unit x stride; the y and z strides are passed separately
  for each tensor, so views with padded rows or planes work.
* ``w_ptr`` points at ``3 * R + 1`` weights in the compute dtype:
  ``[centre, wz_1..wz_R, wy_1..wy_R, wx_1..wx_R]``, where ``wa_k = c_k / h_a**2`` are the central
  second-difference coefficients and ``centre = c_0 * (1/hx**2 + 1/hy**2 + 1/hz**2)``. Symmetric
  pairs are added before they are scaled, ``(u[-k] + u[+k]) * w_k``: half the multiplies and the
  rounding of a difference of near-equal values happens once.
* Only interior points (R from every face) are written.
* x tiles are aligned to x = 0, not to the first interior point x = R: the centre row and the y/z
  neighbour rows then start on a multiple of BLOCK_X and, when nx and the row strides are multiples
  of 16 (Triton specialises such integers), compile to 128-bit loads. In the plane kernels (the
  ladder) the x-shifted loads are unaligned and served by L1 from the lines the centre load brought
  in; the z-march makes those 128-bit too.
* Plane and row offsets are formed from 64-bit scalars, so grids of more than 2**31 points work;
  the per-element offsets inside a tile stay 32-bit.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _weights(w_ptr, OFFSET: tl.constexpr, R: tl.constexpr):
    """(w[OFFSET+1], ..., w[OFFSET+R]) as scalars, loaded once per program (not per loop trip)."""
    w = ()
    for k in tl.static_range(1, R + 1):
        w = w + (tl.load(w_ptr + OFFSET + k),)
    return w


@triton.jit
def _x_pairs(ptrs, mask, wx, R: tl.constexpr, ASCENDING: tl.constexpr):
    """Sum_k wx_k * (u[x-k] + u[x+k]) for a tile of pointers; loads through L1."""
    acc = tl.zeros(ptrs.shape, dtype=ptrs.dtype.element_ty)
    if ASCENDING:
        # Issue every load in ascending address order first (x-R .. x+R), then combine.
        lo = ()
        for k in tl.static_range(R, 0, -1):
            lo = lo + (tl.load(ptrs - k, mask=mask, other=0.0),)
        hi = ()
        for k in tl.static_range(1, R + 1):
            hi = hi + (tl.load(ptrs + k, mask=mask, other=0.0),)
        for k in tl.static_range(1, R + 1):
            acc += (lo[R - k] + hi[k - 1]) * wx[k - 1]
    else:
        for k in tl.static_range(1, R + 1):
            pair = tl.load(ptrs - k, mask=mask, other=0.0) + tl.load(ptrs + k, mask=mask, other=0.0)
            acc += pair * wx[k - 1]
    return acc


@triton.jit
def _strided_pairs(ptrs, stride, mask, w, R: tl.constexpr):
    """Sum_k w_k * (u[-k*stride] + u[+k*stride]) (y or z neighbours)."""
    acc = tl.zeros(ptrs.shape, dtype=ptrs.dtype.element_ty)
    for k in tl.static_range(1, R + 1):
        pair = tl.load(ptrs - k * stride, mask=mask, other=0.0) + tl.load(ptrs + k * stride, mask=mask, other=0.0)
        acc += pair * w[k - 1]
    return acc


@triton.jit
def _strided_pairs_ascending(ptrs, stride, mask, R: tl.constexpr, LOWER: tl.constexpr):
    """Half of the y/z pairs, loaded in ascending address order.

    LOWER=True loads u[-R*stride] .. u[-stride], LOWER=False u[+stride] .. u[+R*stride]; the two
    halves are combined by the caller so that all loads of a point run from low to high address.
    """
    vals = ()
    if LOWER:
        for k in tl.static_range(R, 0, -1):
            vals = vals + (tl.load(ptrs - k * stride, mask=mask, other=0.0),)
    else:
        for k in tl.static_range(1, R + 1):
            vals = vals + (tl.load(ptrs + k * stride, mask=mask, other=0.0),)
    return vals


@triton.jit
def _combine_ascending(lo, hi, w, R: tl.constexpr, acc):
    for k in tl.static_range(1, R + 1):
        acc += (lo[R - k] + hi[k - 1]) * w[k - 1]
    return acc


@triton.jit
def _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo, x_hi, nx, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr):
    """Rows/columns of a (BLOCK_Y, BLOCK_X) tile and its masks.

    Rows start at the interior (y_lo) and columns at a multiple of BLOCK_X (alignment, see the
    module docstring). ``out_mask`` selects interior points inside [y_lo, y_hi) x [x_lo, x_hi);
    ``row_mask`` every column of a valid row (x < nx) for the aligned, vectorisable loads.
    """
    ys = y_lo + tile_y * BLOCK_Y + tl.arange(0, BLOCK_Y)
    xs = tile_x * BLOCK_X + tl.arange(0, BLOCK_X)
    row_ok = ys < y_hi
    row_mask = row_ok[:, None] & (xs < nx)[None, :]
    x_in = ((xs >= x_lo) & (xs < x_hi))[None, :]
    return ys, xs, row_ok, row_mask, row_mask & x_in, x_in


@triton.jit
def _store_tile(out_ptrs, acc, row_mask, x_in, full_x, NONTEMPORAL: tl.constexpr):
    """Store a tile under the row mask alone, which is constant along x, so the store is 128-bit.

    An element-wise x mask would make every store scalar (and LLVM merges a vector and a scalar
    branch into the scalar one), so the two edge tiles instead read back the boundary columns
    they must not change and write the same bits again; interior tiles skip that.
    """
    if not full_x:
        acc = tl.where(x_in, acc, tl.load(out_ptrs, mask=row_mask & ~x_in))
    if NONTEMPORAL:
        tl.store(out_ptrs, acc, mask=row_mask, cache_modifier=".cs")
    else:
        tl.store(out_ptrs, acc, mask=row_mask)


@triton.jit
def laplacian_plane_kernel(
    u_ptr, out_ptr, w_ptr,
    nz, ny, nx,
    su_z, su_y, so_z, so_y,
    y_lo, y_hi, x_lo, x_hi,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr,
    ASCENDING: tl.constexpr, NONTEMPORAL: tl.constexpr, GRID_ORDER: tl.constexpr,
    GROUP_Y: tl.constexpr,
):
    """One program computes a (BLOCK_Y, BLOCK_X) tile of one z-plane; every neighbour is loaded
    from global memory and reuse is left to the caches (the seeds' kernels 1-6).

    BLOCK_Y = 1 is the seeds' baseline (one row of points); BLOCK_Y = m > 1 is loop tiling (m points
    along y per program, the neighbour rows they share come from L1 instead of L2/DRAM).
    ASCENDING issues all loads of a point from low to high address (z-R plane first, z+R last).
    NONTEMPORAL stores with ``.cs`` (evict-first / streaming), so the output does not push the
    input planes out of L2.
    GRID_ORDER 0: 3D grid (x tiles fastest, then y tiles, then z) - the natural order.
    GRID_ORDER 1: 1D grid walking x tiles, then GROUP_Y y-tiles, then z, then the next band of
    GROUP_Y y-tiles: the planes in flight are only a band of GROUP_Y * BLOCK_Y rows wide, so the
    2R+1 planes a z-neighbour needs stay in L2 whatever the plane size (the seeds' part 4 fix).
    [y_lo, y_hi) x [x_lo, x_hi) is the region to compute (the interior, or one subdomain of it).
    """
    # 64-bit strides: k * stride must not wrap for planes of more than 2**31 / R elements.
    su_z = su_z.to(tl.int64)
    su_y = su_y.to(tl.int64)
    so_z = so_z.to(tl.int64)
    so_y = so_y.to(tl.int64)
    n_tx = tl.cdiv(nx, BLOCK_X)
    n_ty = tl.cdiv(y_hi - y_lo, BLOCK_Y)
    if GRID_ORDER == 0:
        tile_x = tl.program_id(0)
        tile_y = tl.program_id(1)
        z = tl.program_id(2) + R
    else:
        nzi = nz - 2 * R
        pid = tl.program_id(0)
        per_band = n_tx * GROUP_Y * nzi
        band = pid // per_band
        rem = pid % per_band
        rows_in_band = tl.minimum(n_ty - band * GROUP_Y, GROUP_Y)
        tile_x = rem % n_tx
        rem = rem // n_tx
        tile_y = band * GROUP_Y + rem % rows_in_band
        z = rem // rows_in_band + R
    ys, xs, _row_ok, row_mask, out_mask, x_in = _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo, x_hi, nx,
                                              BLOCK_Y, BLOCK_X)
    z64 = z.to(tl.int64)
    ptrs = u_ptr + z64 * su_z + ys[:, None].to(tl.int64) * su_y + xs[None, :]
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    # Centre, y and z neighbour rows are whole rows (aligned, vectorisable) under row_mask; the
    # x-shifted loads need the element-wise interior mask (they would run off the row's ends).
    if ASCENDING:
        z_lo = _strided_pairs_ascending(ptrs, su_z, row_mask, R, True)
        y_lo_v = _strided_pairs_ascending(ptrs, su_y, row_mask, R, True)
        acc = _x_pairs(ptrs, out_mask, wx, R, True)
        centre = tl.load(ptrs, mask=row_mask, other=0.0)
        y_hi_v = _strided_pairs_ascending(ptrs, su_y, row_mask, R, False)
        z_hi = _strided_pairs_ascending(ptrs, su_z, row_mask, R, False)
        acc += centre * tl.load(w_ptr)
        acc = _combine_ascending(y_lo_v, y_hi_v, wy, R, acc)
        acc = _combine_ascending(z_lo, z_hi, wz, R, acc)
    else:
        # The formula's order, as in the seeds' kernel 1: centre, x pairs, y pairs, z pairs.
        acc = tl.load(ptrs, mask=row_mask, other=0.0) * tl.load(w_ptr)
        acc += _x_pairs(ptrs, out_mask, wx, R, False)
        acc += _strided_pairs(ptrs, su_y, row_mask, wy, R)
        acc += _strided_pairs(ptrs, su_z, row_mask, wz, R)
    out_ptrs = out_ptr + z64 * so_z + ys[:, None].to(tl.int64) * so_y + xs[None, :]
    x0 = tile_x * BLOCK_X
    _store_tile(out_ptrs, acc, row_mask, x_in, (x0 >= x_lo) & (x0 + BLOCK_X <= x_hi), NONTEMPORAL)


@triton.jit
def _components(t, VEC: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr):
    """Split a (BY, BX) tile into VEC tiles (BY, BX/VEC): component j holds the columns x = j mod VEC.

    A thread owns VEC contiguous columns of a 128-bit access, so reshape and split only rename
    registers (no shared memory, checked in the PTX)."""
    if VEC == 1:
        return (t,)
    elif VEC == 2:
        c0, c1 = tl.split(tl.reshape(t, (BY, BX // 2, 2)))
        return (c0, c1)
    else:
        b0, b1 = tl.split(tl.reshape(t, (BY, BX // 4, 2, 2)))  # column 2a + b
        c0, c2 = tl.split(b0)
        c1, c3 = tl.split(b1)
        return (c0, c1, c2, c3)


@triton.jit
def _interleave(c, VEC: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr):
    """Inverse of ``_components``."""
    if VEC == 1:
        return c[0]
    elif VEC == 2:
        return tl.reshape(tl.join(c[0], c[1]), (BY, BX))
    else:
        return tl.reshape(tl.join(tl.join(c[0], c[2]), tl.join(c[1], c[3])), (BY, BX))


@triton.jit
def _plane_loads(base, offs, row_ok, row_mask, xs, nx, su_y, R: tl.constexpr, VEC: tl.constexpr):
    """Every load one plane's xy stencil needs besides its centre tile, all 128-bit: (y rows, x chunks).

    y rows: u[y-R..y-1] and u[y+1..y+R] (2R aligned tiles). x chunks: the tile shifted by whole
    vectors, m * VEC for m = -NCH..-1, 1..NCH (NCH = ceil(R / VEC)), instead of 2R unaligned
    (scalar) loads. Separate from the arithmetic (``_plane_xy``) so a loop can issue the next
    plane's loads before it computes on the current one.
    """
    return _row_loads(base, offs, row_mask, su_y, R), _chunk_loads(base, offs, row_ok, xs, nx, R, VEC)


@triton.jit
def _row_loads(base, offs, row_mask, su_y, R: tl.constexpr):
    """``_plane_loads``' y rows: u[y-R..y-1] and u[y+1..y+R]."""
    rows = ()
    for k in tl.static_range(-R, R + 1):
        if k != 0:
            rows = rows + (tl.load(base + k * su_y + offs, mask=row_mask, other=0.0),)
    return rows


@triton.jit
def _chunk_loads(base, offs, row_ok, xs, nx, R: tl.constexpr, VEC: tl.constexpr):
    """``_plane_loads``' x chunks: the tile shifted by m * VEC, m = -NCH..-1, 1..NCH (columns outside [0, nx) 0)."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    chunks = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m != 0:
            xm = xs + m * VEC
            mask = row_ok[:, None] & ((xm >= 0) & (xm < nx))[None, :]
            chunks = chunks + (tl.load(base + m * VEC + offs, mask=mask, other=0.0),)
    return chunks


@triton.jit
def _add_scaled(acc, x, w, FMA: tl.constexpr):
    """acc + x * w: one explicit FMA with ``FMA``, else the plain form (the compiler's contraction)."""
    if FMA:
        return tl.fma(x, w, acc)
    else:
        return acc + x * w


@triton.jit
def _shifted_components(centre, chunks, R: tl.constexpr, VEC: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr):
    """The column components (``_components``) of the tile shifted by m = -NCH..NCH vectors: the centre and
    ``_chunk_loads``' chunks (m = -NCH..-1, 1..NCH)."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    comps = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m == 0:
            comps = comps + (_components(centre, VEC, BY, BX),)
        elif m < 0:
            comps = comps + (_components(chunks[m + NCH], VEC, BY, BX),)
        else:
            comps = comps + (_components(chunks[m + NCH - 1], VEC, BY, BX),)
    return comps


@triton.jit
def _plane_xy(centre, rows, chunks, w_centre, wy, wx, R: tl.constexpr, VEC: tl.constexpr,
              BY: tl.constexpr, BX: tl.constexpr, FMA: tl.constexpr = False):
    """centre * w_c + y pairs + x pairs of one plane tile from ``_plane_loads``' tiles.

    x: split every chunk tile into its VEC column components; u[x+d] for column component j is
    component (j+d) % VEC of the tile shifted by (j+d) // VEC vectors -- compile-time indices, so
    the shifts are register renames (checked in the PTX: no shared memory).

    ``FMA`` (the wave kernels): the sums as explicit FMAs, the same in every kernel and code path
    (see ``_scatter_z``). The Laplacian kernels keep the plain form, whose contraction the compiler
    chooses (their compiled code as measured).
    """
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    acc = centre * w_centre
    for k in tl.static_range(1, R + 1):
        acc = _add_scaled(acc, rows[R - k] + rows[R + k - 1], wy[k - 1], FMA)
    comps = _shifted_components(centre, chunks, R, VEC, BY, BX)
    outs = ()
    for j in tl.static_range(0, VEC):
        xacc = tl.zeros((BY, BX // VEC), dtype=centre.dtype)
        for k in tl.static_range(1, R + 1):
            pair = (comps[(j - k) // VEC + NCH][(j - k) % VEC]
                    + comps[(j + k) // VEC + NCH][(j + k) % VEC])
            xacc = _add_scaled(xacc, pair, wx[k - 1], FMA)
        outs = outs + (xacc,)
    return acc + _interleave(outs, VEC, BY, BX)


@triton.jit
def _prefetch_l1(ptrs, mask):
    """``prefetch.global.L1`` of each address where ``mask`` holds (SASS ``CCTL.E.PF1``): brings the
    32-byte sector into L1 without a register to hold it. Returns a dummy tensor (the asm is not pure,
    so it is kept although nothing reads the result). The interpreter cannot run inline asm: launchers
    pass L1_PREFETCH=0 on CPU (a cache hint changes no value)."""
    asm: tl.constexpr = "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L1 [$1]; mov.u32 $0, 0; }"
    return tl.inline_asm_elementwise(asm, "=r,l,r", [ptrs, mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _halo_sectors(x0, y0, nx, ny, su_y, R: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr, SE: tl.constexpr):
    """In-plane offsets (and mask) of the 32-byte sectors one z-march plane tile reads: rows
    y0-R .. y0+BY+R-1, columns x0-SE .. x0+BX+SE-1 (the x chunks of the edge vectors reach one
    sector beyond the tile). SE = elements per sector. One offset per sector, padded to powers of two."""
    NS: tl.constexpr = BX // SE + 2
    PR: tl.constexpr = triton.next_power_of_2(BY + 2 * R)
    PC: tl.constexpr = triton.next_power_of_2(NS)
    rows = y0 - R + tl.arange(0, PR)
    cols = x0 - SE + tl.arange(0, PC) * SE
    mask = ((rows >= 0) & (rows < ny) & (tl.arange(0, PR) < BY + 2 * R))[:, None] & \
        ((cols >= 0) & (cols < nx) & (tl.arange(0, PC) < NS))[None, :]
    return rows[:, None] * su_y + cols[None, :], mask


@triton.jit
def _l1_prefetch_start(u_ptr, z_begin, su_z64, nz, x0, y0, nx, ny, su_y, R: tl.constexpr, BY: tl.constexpr,
                       BX: tl.constexpr, SE: tl.constexpr, L1_PREFETCH: tl.constexpr):
    """Before a z-march's loop: prefetch into L1 every sector the plane tile at (y0, x0) reads
    (``_halo_sectors``) for planes z_begin .. z_begin + L1_PREFETCH - 1; returns the sectors'
    offsets and mask for ``_l1_prefetch_ahead``."""
    pf_offs, pf_mask = _halo_sectors(x0, y0, nx, ny, su_y, R, BY, BX, SE)
    for d in tl.static_range(0, L1_PREFETCH):
        _prefetch_l1(u_ptr + (z_begin + d) * su_z64 + pf_offs, pf_mask & (z_begin + d < nz))
    return pf_offs, pf_mask


@triton.jit
def _l1_prefetch_ahead(base, p, nz, su_z64, pf_offs, pf_mask, L1_PREFETCH: tl.constexpr):
    """In the loop at plane p (``base`` = its pointer): prefetch plane p + L1_PREFETCH into L1."""
    _prefetch_l1(base + L1_PREFETCH * su_z64 + pf_offs, pf_mask & (p + L1_PREFETCH < nz))


@triton.jit
def _march_strides(nx_s, su_z_s, su_y_s, so_z_s, so_y_s, SCALE: tl.constexpr, STATIC_SU_Z: tl.constexpr,
                   STATIC_SU_Y: tl.constexpr, STATIC_SO_Z: tl.constexpr, STATIC_SO_Y: tl.constexpr):
    """nx and the strides, which arrive divided by SCALE, multiplied back (Triton then knows they are
    multiples of SCALE); with STATIC_SU_Z the strides are the compile-time ones (one compile per
    grid layout): every neighbour row or plane is then a constant byte offset from the tile, which the
    loads take as an immediate instead of computing a 64-bit address per load."""
    nx = nx_s * SCALE
    su_z = su_z_s * SCALE
    su_y = su_y_s * SCALE
    so_z = so_z_s * SCALE
    so_y = so_y_s * SCALE
    if STATIC_SU_Z != 0:
        su_z = STATIC_SU_Z
        su_y = STATIC_SU_Y
        so_z = STATIC_SO_Z
        so_y = STATIC_SO_Y
    return nx, su_z, su_y, so_z, so_y


@triton.jit
def _scatter_z(win, plane, wz, R: tl.constexpr, FMA: tl.constexpr = False):
    """Add plane p's z contributions to the rolling window of accumulators.

    win[j] accumulates output z = p - R + j (j = 0 .. 2R); plane p enters output z with weight
    wz_|p - z| = wz_|R - j|. The centre (j = R) is added by the caller together with the xy part.

    ``FMA`` (the wave solver's zwin step, compiled without contraction): explicit FMAs. Written as
    ``win + plane * w``, the two slots sharing a weight share the product, and the compiler contracts
    a product into an FMA only where it has one use. Which uses live depends on where the plane falls
    (warm-up, unrolled loop, remainder, drain), so the same output point rounded differently with the
    program's z origin: the 3D slab run differed from one GPU in the last bits
    (``benchmarks/wave_fp_fusion.py``). The Laplacian kernels keep the plain form (their compiled code
    as measured; their result is not required to be independent of the z chunking).
    """
    out = ()
    for j in tl.static_range(0, 2 * R + 1):
        if j == R:
            out = out + (win[j],)
        elif j < R:
            out = out + (_add_scaled(win[j], plane, wz[R - j - 1], FMA),)
        else:
            out = out + (_add_scaled(win[j], plane, wz[j - R - 1], FMA),)
    return out


@triton.jit
def _march_tile(pid, n_tx, n_ty, n_zc, GRID_ORDER: tl.constexpr):
    """(tile_x, tile_y, z chunk) of a marching program on a 1D grid. GRID_ORDER 0: z chunks fastest
    (programs sharing halo planes run together), then x, then y; 1: y tiles fastest, then x, then z;
    2: x tiles fastest, then y, then z chunks."""
    if GRID_ORDER == 0:
        zc = pid % n_zc
        rem = pid // n_zc
        tile_x = rem % n_tx
        tile_y = rem // n_tx
    elif GRID_ORDER == 1:
        tile_y = pid % n_ty
        rem = pid // n_ty
        tile_x = rem % n_tx
        zc = rem // n_tx
    else:
        tile_x = pid % n_tx
        rem = pid // n_tx
        tile_y = rem % n_ty
        zc = rem // n_ty
    return tile_x, tile_y, zc


@triton.jit
def _march_program(nx, y_lo, y_hi, nz, R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr,
                   BLOCK_Z: tl.constexpr, GRID_ORDER: tl.constexpr):
    """This program's (tile_x, tile_y) and its planes [z_begin, z_end) of the interior z range."""
    n_zc = tl.cdiv(nz - 2 * R, BLOCK_Z)
    tile_x, tile_y, zc = _march_tile(tl.program_id(0), tl.cdiv(nx, BLOCK_X), tl.cdiv(y_hi - y_lo, BLOCK_Y), n_zc,
                                     GRID_ORDER)
    z_begin = R + zc * BLOCK_Z
    return tile_x, tile_y, z_begin, tl.minimum(z_begin + BLOCK_Z, nz - R)


@triton.jit
def _march_offsets(ys_u, ys_o, xs, su_z, su_y, so_z, so_y, w_ptr, R: tl.constexpr, OFFS64: tl.constexpr):
    """What the z-marches set up before their plane loop: the 64-bit plane strides (p * stride
    passes 2**31 for grids of more than 2**31 points), u's row stride (64-bit with OFFS64), the
    in-plane offsets of the tile's rows ``ys_u`` in u and ``ys_o`` in out, and the weights
    (centre, z, y, x)."""
    su_z64 = su_z.to(tl.int64)
    so_z64 = so_z.to(tl.int64)
    if OFFS64:
        su_y = su_y.to(tl.int64)
        so_y = so_y.to(tl.int64)
    u_offs = ys_u[:, None] * su_y + xs[None, :]
    o_offs = ys_o[:, None] * so_y + xs[None, :]
    return (su_z64, so_z64, su_y, u_offs, o_offs, tl.load(w_ptr), _weights(w_ptr, 0, R), _weights(w_ptr, R, R),
            _weights(w_ptr, 2 * R, R))


@triton.jit
def laplacian_zmarch_kernel(
    u_ptr, out_ptr, w_ptr,
    nz, ny, nx_s,
    su_z_s, su_y_s, so_z_s, so_y_s,
    y_lo, y_hi, x_lo, x_hi,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, NONTEMPORAL: tl.constexpr, NUM_STAGES: tl.constexpr,
    GRID_ORDER: tl.constexpr, OFFS64: tl.constexpr, PREFETCH: tl.constexpr, Z_IN_REGS: tl.constexpr,
    UNROLL_Z: tl.constexpr, PIPELINE_XY: tl.constexpr, LOOP_UNROLL: tl.constexpr, L1_PREFETCH: tl.constexpr,
    SECTOR: tl.constexpr,
    STATIC_SU_Z: tl.constexpr, STATIC_SU_Y: tl.constexpr, STATIC_SO_Z: tl.constexpr, STATIC_SO_Y: tl.constexpr,
):
    """The z-march (``auto``): one program owns a (BLOCK_Y, BLOCK_X) column of tiles and walks
    BLOCK_Z planes of it, so a plane's z neighbours come from this program, not from L2.

    Three forms (constexpr):
    * Z_IN_REGS (loop): each plane p is read once; its z contributions are scattered into a rolling
      window of 2R+1 register accumulators (output planes p-R .. p+R) and the oldest, now complete,
      is stored. The working set is a few tiles per program whatever the plane size: no cache
      cliff. PREFETCH centre tiles are loaded ahead; PIPELINE_XY loads the next plane's y rows and
      x chunks one iteration ahead as well; NUM_STAGES > 1 hands the loop to Triton's software
      pipeliner instead (cp.async through shared memory; measured slower).
    * UNROLL_Z: the same window over BLOCK_Z + 2R planes unrolled at compile time, for short
      marches: no load waits on a loop-carried value, so all of them are in flight together.
    * neither: the z neighbours are re-read from L1 (planes this program loaded in the last 2R
      iterations), which keeps registers low for the high orders.
    Every tile access is 128 bits wide: the centre and the y neighbour rows are aligned tiles, and
    the x neighbours come from tiles shifted by whole vectors (``_plane_loads``, ``_plane_xy``).
    Addresses are a scalar 64-bit plane pointer plus per-element int32 offsets within the plane
    (int64 when OFFS64: planes of 2**31 elements or more), which keeps the register count low.
    nx and the strides arrive divided by SCALE (= VEC when they are all multiples of VEC, else 1)
    and are multiplied back here: Triton then knows they are multiples of VEC, so rows start on
    16-byte boundaries and every tile access is 128-bit even when nx is not a multiple of 16
    (Triton's own specialisation only knows "divisible by 16").
    Grid: 1D. GRID_ORDER 0: the z chunk walks fastest (programs sharing halo planes run together);
    1: y tiles fastest, then x tiles, then z chunks; 2: x tiles fastest, then y tiles, then z chunks
    (the programs in flight read neighbouring addresses, which streams best).
    """
    # Static strides (STATIC_SU_Z): measured fewer instructions, no faster.
    nx, su_z, su_y, so_z, so_y = _march_strides(nx_s, su_z_s, su_y_s, so_z_s, so_y_s, SCALE, STATIC_SU_Z, STATIC_SU_Y,
                                                STATIC_SO_Z, STATIC_SO_Y)
    tile_x, tile_y, z_begin, z_end = _march_program(nx, y_lo, y_hi, nz, R, BLOCK_Y, BLOCK_X, BLOCK_Z, GRID_ORDER)
    ys, xs, row_ok, row_mask, _out_mask, x_in = _tile_coords(tile_x, tile_y, y_lo, y_hi, x_lo, x_hi, nx,
                                                            BLOCK_Y, BLOCK_X)
    x0 = tile_x * BLOCK_X
    full_x = (x0 >= x_lo) & (x0 + BLOCK_X <= x_hi)

    su_z64, so_z64, su_y, u_offs, o_offs, w_centre, wz, wy, wx = _march_offsets(ys, ys, xs, su_z, su_y, so_z, so_y,
                                                                                w_ptr, R, OFFS64)
    dtype = w_ptr.dtype.element_ty

    if UNROLL_Z:
        # A short z-march unrolled at compile time: the BLOCK_Z + 2R plane loads of the program
        # carry no loop dependency, so they are all in flight together like a one-tile program's,
        # while each plane is still read once and its z terms stay in registers.
        win = ()
        for j in tl.static_range(0, 2 * R + 1):
            win = win + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)
        for q in tl.static_range(0, BLOCK_Z + 2 * R):
            p = z_begin - R + q
            base = u_ptr + p * su_z64
            plane = tl.load(base + u_offs, mask=row_mask & (p < z_end + R), other=0.0)
            win = _scatter_z(win, plane, wz, R)
            if q >= R and q < BLOCK_Z + R:  # plane p owns an output of this chunk (if p < z_end)
                own = p < z_end
                rows, chunks = _plane_loads(base, u_offs, row_ok & own, row_mask & own, xs, nx, su_y, R, VEC)
                xy = _plane_xy(plane, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X)
                win = win[:R] + (win[R] + xy,) + win[R + 1:]
            if q >= 2 * R:  # output p - R is complete
                _store_tile(out_ptr + (p - R) * so_z64 + o_offs, win[0], row_mask & (p - R < z_end), x_in, full_x,
                            NONTEMPORAL)
            win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)
    elif Z_IN_REGS:
        win = ()
        for j in tl.static_range(0, 2 * R + 1):
            win = win + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)

        # Warm-up: planes z_begin-R .. z_begin-1 only feed the z terms of the first outputs.
        for p in range(z_begin - R, z_begin):
            plane = tl.load(u_ptr + p * su_z64 + u_offs, mask=row_mask, other=0.0)
            win = _scatter_z(win, plane, wz, R)
            win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)

        # Main: planes whose own output is in this chunk; store output p-R once it is complete.
        # The next PREFETCH planes' centre tiles are already in flight (registers), so a program keeps
        # PREFETCH tiles of DRAM reads outstanding while it computes on the current one.
        pending = ()
        for d in tl.static_range(0, PREFETCH):
            pending = pending + (tl.load(u_ptr + (z_begin + d) * su_z64 + u_offs,
                                         mask=row_mask & (z_begin + d < nz), other=0.0),)
        # PIPELINE_XY: the y rows and x chunks of the next plane are loaded one iteration ahead
        # too, so no load of the loop body is waited for in the iteration that issues it.
        if PIPELINE_XY:
            nrows, nchunks = _plane_loads(u_ptr + z_begin * su_z64, u_offs, row_ok, row_mask, xs, nx, su_y, R, VEC)
        if L1_PREFETCH > 0:
            # L1_PREFETCH planes ahead, every sector the plane's loads touch (y halo rows and the
            # x chunks' neighbour sectors included) is prefetched into L1: the loads of the loop
            # then hit L1 instead of waiting on L2/DRAM, and no register holds them.
            pf_offs, pf_mask = _l1_prefetch_start(u_ptr, z_begin, su_z64, nz, x0, tile_y * BLOCK_Y + y_lo, nx, ny, su_y,
                                                  R, BLOCK_Y, BLOCK_X, SECTOR, L1_PREFETCH)
        for p in tl.range(z_begin, z_end, num_stages=NUM_STAGES, loop_unroll_factor=LOOP_UNROLL):
            base = u_ptr + p * su_z64
            if L1_PREFETCH > 0:
                _l1_prefetch_ahead(base, p, nz, su_z64, pf_offs, pf_mask, L1_PREFETCH)
            if NUM_STAGES > 1:
                plane = tl.load(base + u_offs, mask=row_mask, other=0.0)
            else:
                plane = pending[0]
                ahead = p + PREFETCH
                pending = pending[1:] + (tl.load(u_ptr + ahead * su_z64 + u_offs, mask=row_mask & (ahead < nz),
                                                 other=0.0),)
            win = _scatter_z(win, plane, wz, R)
            if PIPELINE_XY:
                rows, chunks = nrows, nchunks
                nrows, nchunks = _plane_loads(base + su_z64, u_offs, row_ok, row_mask, xs, nx, su_y, R, VEC)
            else:
                rows, chunks = _plane_loads(base, u_offs, row_ok, row_mask, xs, nx, su_y, R, VEC)
            xy = _plane_xy(plane, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X)
            win = win[:R] + (win[R] + xy,) + win[R + 1:]
            done = p - R >= z_begin
            _store_tile(out_ptr + (p - R) * so_z64 + o_offs, win[0], row_mask & done, x_in, full_x, NONTEMPORAL)
            win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)

        # Drain: planes z_end .. z_end+R-1 complete the last R (or fewer) outputs.
        for p in range(z_end, z_end + R):
            plane = tl.load(u_ptr + p * su_z64 + u_offs, mask=row_mask, other=0.0)
            win = _scatter_z(win, plane, wz, R)
            done = p - R >= z_begin
            _store_tile(out_ptr + (p - R) * so_z64 + o_offs, win[0], row_mask & done, x_in, full_x, NONTEMPORAL)
            win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)

    else:
        # z neighbours through L1: output plane p reads planes p-R .. p+R of its own tile, all loaded
        # by this program in the last 2R iterations except p+R, whose centre tile was prefetched
        # PREFETCH iterations ago. Registers hold only the prefetched tiles and one accumulator, so
        # tall tiles (few halo rows per row) fit; the price is 2R extra L1 loads per point.
        pending = ()
        for d in tl.static_range(0, PREFETCH):
            zz = z_begin + R + d
            pending = pending + (tl.load(u_ptr + zz * su_z64 + u_offs, mask=row_mask & (zz < nz), other=0.0),)
        if L1_PREFETCH > 0:
            pf_offs, pf_mask = _l1_prefetch_start(u_ptr, z_begin, su_z64, nz, x0, tile_y * BLOCK_Y + y_lo, nx, ny, su_y,
                                                  R, BLOCK_Y, BLOCK_X, SECTOR, L1_PREFETCH)
        for p in tl.range(z_begin, z_end, loop_unroll_factor=LOOP_UNROLL):
            base = u_ptr + p * su_z64
            if L1_PREFETCH > 0:
                _l1_prefetch_ahead(base, p, nz, su_z64, pf_offs, pf_mask, L1_PREFETCH)
            plane_hi = pending[0]
            ahead = p + R + PREFETCH
            pending = pending[1:] + (tl.load(u_ptr + ahead * su_z64 + u_offs, mask=row_mask & (ahead < nz), other=0.0),)
            centre = tl.load(base + u_offs, mask=row_mask, other=0.0)
            rows, chunks = _plane_loads(base, u_offs, row_ok, row_mask, xs, nx, su_y, R, VEC)
            acc = _plane_xy(centre, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X)
            for k in tl.static_range(1, R + 1):
                lo = tl.load(base - k * su_z64 + u_offs, mask=row_mask, other=0.0)
                if k == R:
                    hi = plane_hi
                else:
                    hi = tl.load(base + k * su_z64 + u_offs, mask=row_mask, other=0.0)
                acc += (lo + hi) * wz[k - 1]
            _store_tile(out_ptr + p * so_z64 + o_offs, acc, row_mask, x_in, full_x, NONTEMPORAL)


# ----------------------------------------------------------------------------------------------
# The register-window march without load masks (``kernel="zwin"``).
# ----------------------------------------------------------------------------------------------
@triton.jit
def _aligned(v, VEC: tl.constexpr):
    """v (a multiple of VEC at run time) written so that Triton's alignment analysis knows it."""
    return (v // VEC) * VEC


@triton.jit
def _window_loads(base, offs, xs, nx, su_y, R: tl.constexpr, VEC: tl.constexpr):
    """``_plane_loads`` for a tile whose rows are all inside the grid (clamped): the y rows load
    with no mask; only the x chunks keep one (a chunk of the first or last tile may lie outside the
    row; masks are constant over a vector, so the loads stay 128-bit)."""
    rows = ()
    for k in tl.static_range(-R, R + 1):
        if k != 0:
            rows = rows + (tl.load(base + k * su_y + offs),)
    return rows, _window_chunks(base, offs, xs, nx, R, VEC)


@triton.jit
def _window_chunks(base, offs, xs, nx, R: tl.constexpr, VEC: tl.constexpr):
    """The x chunks of ``_window_loads``."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    chunks = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m != 0:
            xm = xs + m * VEC
            chunks = chunks + (tl.load(base + m * VEC + offs, mask=((xm >= 0) & (xm < nx))[None, :], other=0.0),)
    return chunks


@triton.jit
def _halo_loads(base, offs, xs, nx, su_y, R: tl.constexpr, VEC: tl.constexpr, HALO_AHEAD: tl.constexpr):
    """The loads of a plane that carry its first touches of sectors outside the tile (the centre
    tile's own sectors come with the centre load, ``PREFETCH`` planes ahead): the x chunks (every
    row's left and right neighbour sectors) and, with HALO_AHEAD 2, the outermost y rows -R and +R
    (the first touches of the 2R halo rows). Issued a plane ahead, so the L2 round trip of those
    sectors overlaps a plane's work instead of stalling every warp at its x chunks."""
    chunks = _window_chunks(base, offs, xs, nx, R, VEC)
    if HALO_AHEAD == 2:
        return chunks, (tl.load(base - R * su_y + offs), tl.load(base + R * su_y + offs))
    else:
        return chunks, ()


@triton.jit
def _window_loads_ahead(base, offs, su_y, halo, R: tl.constexpr, HALO_AHEAD: tl.constexpr):
    """``_window_loads`` of a plane whose ``_halo_loads`` were issued a plane earlier (``halo``)."""
    rows = ()
    for k in tl.static_range(-R, R + 1):
        if k != 0:
            if HALO_AHEAD == 2 and k == -R:
                rows = rows + (halo[1][0],)
            elif HALO_AHEAD == 2 and k == R:
                rows = rows + (halo[1][1],)
            else:
                rows = rows + (tl.load(base + k * su_y + offs),)
    return rows, halo[0]


@triton.jit
def laplacian_zwin_kernel(
    u_ptr, out_ptr, w_ptr,
    nz, ny, nx_s,
    su_z_s, su_y_s, so_z_s, so_y_s,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, NONTEMPORAL: tl.constexpr, OFFS64: tl.constexpr, PREFETCH: tl.constexpr,
    LOOP_UNROLL: tl.constexpr, L1_PREFETCH: tl.constexpr, SECTOR: tl.constexpr,
    STATIC_SU_Z: tl.constexpr, STATIC_SU_Y: tl.constexpr, STATIC_SO_Z: tl.constexpr, STATIC_SO_Y: tl.constexpr,
    HALO_AHEAD: tl.constexpr = 0,
):
    """The register-window z-march for tall tiles and the high orders: each thread keeps its own
    points' z window (2R accumulators, ``_scatter_z``) in registers while the y rows and x chunks of
    every plane come from L1, where ``prefetch.global.L1`` put them L1_PREFETCH planes earlier
    (every 32-byte sector the plane tile reads, halo rows and the chunks' neighbour sectors
    included: ``_halo_sectors``). The loop is unrolled LOOP_UNROLL times (2R: the window's rotation
    becomes register renames instead of moves). Almost no load is masked (a masked load costs a
    zero-fill per register): the last x tile is shifted left to end at nx (it recomputes, bit for bit, a few
    columns of its neighbour), rows past the interior are clamped to its last row, planes past the
    grid to its last plane; only the x chunks (2 * ceil(R / VEC) of the 2R + 2 * ceil(R / VEC) + 1
    loads per plane) keep a mask, for the first and last tiles. The x tiles start at the first vector
    that holds an interior column (``X_FIRST``), so an interior of whole tiles takes no extra one.
    Needs nx, the strides and the pointers to be multiples of VEC (16 bytes) and nx >= BLOCK_X (the
    launcher checks).
    Grid: 1D, x tiles fastest, then y tiles, then z chunks.
    """
    nx, su_z, su_y, so_z, so_y = _march_strides(nx_s, su_z_s, su_y_s, so_z_s, so_y_s, VEC, STATIC_SU_Z, STATIC_SU_Y,
                                                STATIC_SO_Z, STATIC_SO_Y)
    y_hi = ny - R
    # x tiles from the first vector that holds an interior column (R rounded down to VEC): a grid whose
    # interior is a multiple of BLOCK_X (520 points, R 4) takes no extra tile
    X_FIRST: tl.constexpr = R // VEC * VEC
    tile_x, tile_y, zc = _march_tile(tl.program_id(0), tl.cdiv(nx - R - X_FIRST, BLOCK_X), tl.cdiv(y_hi - R, BLOCK_Y),
                                     tl.cdiv(nz - 2 * R, BLOCK_Z), 2)
    z_begin = R + zc * BLOCK_Z
    z_end = tl.minimum(z_begin + BLOCK_Z, nz - R)
    x0 = _aligned(tl.minimum(X_FIRST + tile_x * BLOCK_X, nx - BLOCK_X), VEC)
    y0 = R + tile_y * BLOCK_Y
    ys = y0 + tl.arange(0, BLOCK_Y)
    xs = x0 + tl.arange(0, BLOCK_X)
    row_ok = ys < y_hi
    ys_ld = tl.minimum(ys, y_hi - 1)
    x_in = ((xs >= R) & (xs < nx - R))[None, :]
    full_x = (x0 >= R) & (x0 + BLOCK_X <= nx - R)
    store_mask = row_ok[:, None] & (xs >= 0)[None, :]  # constant along x: 128-bit stores
    su_z64, so_z64, su_y, u_offs, o_offs, w_centre, wz, wy, wx = _march_offsets(ys_ld, ys, xs, su_z, su_y, so_z,
                                                                                so_y, w_ptr, R, OFFS64)
    _zwin_march(u_ptr, out_ptr, None, None, z_begin, z_end, nz, ny, nx, su_z64, so_z64, su_y, u_offs, o_offs, xs, x0,
                y0, w_centre, wz, wy, wx, store_mask, x_in, full_x, R, BLOCK_Y, BLOCK_X, VEC, NONTEMPORAL, PREFETCH,
                LOOP_UNROLL, L1_PREFETCH, SECTOR, False, HALO_AHEAD)


@triton.jit
def _zwin_march(u_ptr, out_ptr, pp_ptr, m_ptr, z_begin, z_end, nz, ny, nx, su_z64, so_z64, su_y, u_offs, o_offs, xs,
                x0, y0, w_centre, wz, wy, wx, store_mask, x_in, full_x, R: tl.constexpr, BLOCK_Y: tl.constexpr,
                BLOCK_X: tl.constexpr, VEC: tl.constexpr, NONTEMPORAL: tl.constexpr, PREFETCH: tl.constexpr,
                LOOP_UNROLL: tl.constexpr, L1_PREFETCH: tl.constexpr, SECTOR: tl.constexpr, WAVE: tl.constexpr,
                HALO_AHEAD: tl.constexpr = 0):
    """The register-window march of one tile over output planes [z_begin, z_end) (the loop of
    ``laplacian_zwin_kernel`` and ``kernels.wave.wave_zwin_kernel``): win[j] accumulates output plane
    p - R + j; each completed plane goes to ``_zwin_emit``."""
    dtype = u_ptr.dtype.element_ty
    win = ()
    for j in tl.static_range(0, 2 * R + 1):
        win = win + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)
    if L1_PREFETCH > 0:
        pf_offs, pf_mask = _l1_prefetch_start(u_ptr, z_begin, su_z64, nz, x0, y0, nx, ny, su_y, R, BLOCK_Y, BLOCK_X,
                                              SECTOR, L1_PREFETCH)
    # Warm-up: planes z_begin-R .. z_begin-1 only feed the z terms of the first outputs.
    for i in tl.static_range(0, R):
        plane = tl.load(u_ptr + (z_begin - R + i) * su_z64 + u_offs)
        win = _scatter_z(win, plane, wz, R, WAVE)
        win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)
    pending = ()
    for d in tl.static_range(0, PREFETCH):
        pending = pending + (tl.load(u_ptr + tl.minimum(z_begin + d, nz - 1) * su_z64 + u_offs),)
    if HALO_AHEAD > 0:
        halo = _halo_loads(u_ptr + z_begin * su_z64, u_offs, xs, nx, su_y, R, VEC, HALO_AHEAD)
    for p in tl.range(z_begin, z_end, loop_unroll_factor=LOOP_UNROLL):
        base = u_ptr + p * su_z64
        if L1_PREFETCH > 0:
            _l1_prefetch_ahead(base, p, nz, su_z64, pf_offs, pf_mask, L1_PREFETCH)
        plane = pending[0]
        pending = pending[1:] + (tl.load(u_ptr + tl.minimum(p + PREFETCH, nz - 1) * su_z64 + u_offs),)
        if HALO_AHEAD > 0:
            cur = halo
            halo = _halo_loads(u_ptr + tl.minimum(p + 1, nz - 1) * su_z64, u_offs, xs, nx, su_y, R, VEC, HALO_AHEAD)
        win = _scatter_z(win, plane, wz, R, WAVE)
        if HALO_AHEAD > 0:
            rows, chunks = _window_loads_ahead(base, u_offs, su_y, cur, R, HALO_AHEAD)
        else:
            rows, chunks = _window_loads(base, u_offs, xs, nx, su_y, R, VEC)
        xy = _plane_xy(plane, rows, chunks, w_centre, wy, wx, R, VEC, BLOCK_Y, BLOCK_X, WAVE)
        win = win[:R] + (win[R] + xy,) + win[R + 1:]
        _zwin_emit(u_ptr, out_ptr, pp_ptr, m_ptr, p - R, z_begin, su_z64, so_z64, u_offs, o_offs, win[0], store_mask,
                   x_in, full_x, NONTEMPORAL, WAVE)
        win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)
    # Drain: planes z_end .. z_end+R-1 complete the last R (or fewer) outputs.
    for i in tl.static_range(0, R):
        p = z_end + i
        plane = tl.load(u_ptr + p * su_z64 + u_offs)
        win = _scatter_z(win, plane, wz, R, WAVE)
        _zwin_emit(u_ptr, out_ptr, pp_ptr, m_ptr, p - R, z_begin, su_z64, so_z64, u_offs, o_offs, win[0], store_mask,
                   x_in, full_x, NONTEMPORAL, WAVE)
        win = win[1:] + (tl.zeros((BLOCK_Y, BLOCK_X), dtype=dtype),)


@triton.jit
def _zwin_emit(u_ptr, out_ptr, pp_ptr, m_ptr, q, z_begin, su_z64, so_z64, u_offs, o_offs, acc, store_mask, x_in, full_x,
               NONTEMPORAL: tl.constexpr, WAVE: tl.constexpr):
    """Output plane q of a register-window march (nothing below z_begin: the warm-up's planes). The
    Laplacian: ``acc`` stored (edge tiles through ``_store_tile``). ``WAVE`` (the wave solver's plain
    step, out sharing u's strides, ``store_mask`` the tile's own points): p_next = 2 u - p_prev + m acc,
    u, p_prev and m read at the tile's points under the plane's predicate."""
    live = q >= z_begin
    if WAVE:
        plane = q * su_z64
        centre = tl.load(u_ptr + plane + u_offs, mask=live)
        prev = tl.load(pp_ptr + plane + u_offs, mask=live)
        m = tl.load(m_ptr + plane + u_offs, mask=live)
        val = tl.fma(m, acc, 2.0 * centre - prev)
        if NONTEMPORAL:
            tl.store(out_ptr + plane + u_offs, val, mask=store_mask & live, cache_modifier=".cs")
        else:
            tl.store(out_ptr + plane + u_offs, val, mask=store_mask & live)
    else:
        _store_tile(out_ptr + q * so_z64 + o_offs, acc, store_mask & live, x_in, full_x, NONTEMPORAL)


# ----------------------------------------------------------------------------------------------
# The row kernel: every row of a program's block is its own (1, BLOCK_X) tile.
# ----------------------------------------------------------------------------------------------
@triton.jit
def _row_load(base, y, su_y, xs, ok, nx):
    """Row y of the plane at ``base`` as a (1, BX) tile (aligned, 128-bit); 0 where ``ok`` is
    False or x >= nx."""
    return tl.load(base + y * su_y + xs[None, :], mask=ok & (xs < nx)[None, :], other=0.0)


@triton.jit
def _row_chunks(row_ptr, xs, ok, nx, R: tl.constexpr, VEC: tl.constexpr):
    """The row shifted by m * VEC for m = -NCH..-1, 1..NCH (NCH = ceil(R / VEC)): 128-bit loads
    whose lines the row's own load has just brought into L1."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    chunks = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m != 0:
            xm = xs + m * VEC
            chunks = chunks + (tl.load(row_ptr + xm[None, :], mask=ok & ((xm >= 0) & (xm < nx))[None, :],
                                       other=0.0),)
    return chunks


@triton.jit
def _row_x(centre, chunks, wx, R: tl.constexpr, VEC: tl.constexpr, BX: tl.constexpr):
    """Sum_k wx_k (u[x-k] + u[x+k]) of one (1, BX) row from its centre and ``_row_chunks``' tiles
    (the shifts are register renames of the VEC column components, as in ``_plane_xy``)."""
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    comps = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m == 0:
            comps = comps + (_components(centre, VEC, 1, BX),)
        elif m < 0:
            comps = comps + (_components(chunks[m + NCH], VEC, 1, BX),)
        else:
            comps = comps + (_components(chunks[m + NCH - 1], VEC, 1, BX),)
    outs = ()
    for j in tl.static_range(0, VEC):
        xacc = tl.zeros((1, BX // VEC), dtype=centre.dtype)
        for k in tl.static_range(1, R + 1):
            pair = (comps[(j - k) // VEC + NCH][(j - k) % VEC]
                    + comps[(j + k) // VEC + NCH][(j + k) % VEC])
            xacc += pair * wx[k - 1]
        outs = outs + (xacc,)
    return _interleave(outs, VEC, 1, BX)


@triton.jit
def _rows_xy(base, y0, su_y, xs, nx, ny, own, w_centre, wy, wx,
             R: tl.constexpr, BY: tl.constexpr, BX: tl.constexpr, VEC: tl.constexpr):
    """centre * w_c + y pairs + x pairs of rows y0 .. y0+BY-1 of one plane, and those BY centre
    rows. Rows y0-R .. y0+BY+R-1 are each loaded once; the y neighbours are other rows in
    registers (no shifted-tile loads), the x neighbours come from ``_row_chunks``."""
    rows = ()
    for i in tl.static_range(0, BY + 2 * R):
        rows = rows + (_row_load(base, y0 - R + i, su_y, xs, own & (y0 - R + i < ny), nx),)
    xy = ()
    centres = ()
    for i in tl.static_range(0, BY):
        y = y0 + i
        c = rows[R + i]
        chunks = _row_chunks(base + y * su_y, xs, own & (y < ny), nx, R, VEC)
        acc = c * w_centre + _row_x(c, chunks, wx, R, VEC, BX)
        for k in tl.static_range(1, R + 1):
            acc += (rows[R + i - k] + rows[R + i + k]) * wy[k - 1]
        xy = xy + (acc,)
        centres = centres + (c,)
    return xy, centres


@triton.jit
def _scatter_rows(win, rows, wz, R: tl.constexpr, BY: tl.constexpr):
    """``_scatter_z`` for a window of row tiles: win[j * BY + i] accumulates row i of output plane
    p - R + j; plane p's rows enter it with weight wz_|R - j| (the centre slot j = R is left to the
    caller)."""
    out = ()
    for j in tl.static_range(0, 2 * R + 1):
        for i in tl.static_range(0, BY):
            if j < R:
                out = out + (win[j * BY + i] + rows[i] * wz[R - j - 1],)
            elif j > R:
                out = out + (win[j * BY + i] + rows[i] * wz[j - R - 1],)
            else:
                out = out + (win[j * BY + i],)
    return out


@triton.jit
def _add_centre_rows(win, xy, R: tl.constexpr, BY: tl.constexpr):
    out = win[:R * BY]
    for i in tl.static_range(0, BY):
        out = out + (win[R * BY + i] + xy[i],)
    return out + win[(R + 1) * BY:]


@triton.jit
def _store_rows(out_ptr, p, so_z64, so_y, y0, y_hi, xs, nx, ok, x_in, full_x, rows, BY: tl.constexpr,
                NONTEMPORAL: tl.constexpr):
    """Store rows y0 .. y0+BY-1 of output plane p (rows at or past y_hi, or ``ok`` False: none)."""
    base = out_ptr + p * so_z64
    for i in tl.static_range(0, BY):
        y = y0 + i
        # x < nx as well: past the row's end lie the next row's points (another program's)
        mask = (ok & (y < y_hi)) & (xs < nx)[None, :]
        _store_tile(base + y * so_y + xs[None, :], rows[i], mask, x_in, full_x, NONTEMPORAL)


@triton.jit
def laplacian_rows_kernel(
    u_ptr, out_ptr, w_ptr,
    nz, ny, nx_s,
    su_z_s, su_y_s, so_z_s, so_y_s,
    y_lo, y_hi, x_lo, x_hi,
    R: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Z: tl.constexpr,
    VEC: tl.constexpr, SCALE: tl.constexpr, NONTEMPORAL: tl.constexpr, MODE: tl.constexpr,
    GRID_ORDER: tl.constexpr, OFFS64: tl.constexpr,
):
    """A z-march whose block of BLOCK_Y rows is held as BLOCK_Y separate (1, BLOCK_X) row tiles.

    In the tile z-march (``laplacian_zmarch_kernel``) a row's y neighbours are tiles shifted by
    whole rows, loaded again (from L1, or L2 when the first load has not landed yet); here every
    row of a plane, its 2R halo rows included, is loaded once and the y neighbours are other
    registers. Each thread holds VEC columns of every row of the block.

    MODE 0: a short march unrolled at compile time over BLOCK_Z + 2R planes (z terms in a register
    window of (2R+1) * BLOCK_Y rows, every load free to be issued early). MODE 1: the same window
    in a loop (long marches, no cache cliff: the working set does not grow with the plane). MODE 2:
    a loop whose z neighbours are re-read through L1 (rows this program loaded in the last 2R
    iterations), for the high orders, where a window of 2R+1 planes does not fit in registers.
    Grid: 1D, its order as in ``_march_tile`` (GRID_ORDER 2: x tiles fastest; 0: z chunks fastest).
    """
    nx = nx_s * SCALE
    su_z = su_z_s * SCALE
    su_y = su_y_s * SCALE
    so_z = so_z_s * SCALE
    so_y = so_y_s * SCALE
    tile_x, tile_y, z_begin, z_end = _march_program(nx, y_lo, y_hi, nz, R, BLOCK_Y, BLOCK_X, BLOCK_Z, GRID_ORDER)
    y0 = y_lo + tile_y * BLOCK_Y
    xs = tile_x * BLOCK_X + tl.arange(0, BLOCK_X)
    x_in = ((xs >= x_lo) & (xs < x_hi))[None, :]
    x0 = tile_x * BLOCK_X
    full_x = (x0 >= x_lo) & (x0 + BLOCK_X <= x_hi)
    su_z64 = su_z.to(tl.int64)
    so_z64 = so_z.to(tl.int64)
    if OFFS64:
        su_y = su_y.to(tl.int64)
        so_y = so_y.to(tl.int64)
    dtype = w_ptr.dtype.element_ty
    w_centre = tl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    zero = tl.zeros((1, BLOCK_X), dtype=dtype)
    true = (xs >= 0)[None, :]

    if MODE == 0:
        win = ()
        for j in tl.static_range(0, (2 * R + 1) * BLOCK_Y):
            win = win + (zero,)
        for q in tl.static_range(0, BLOCK_Z + 2 * R):
            p = z_begin - R + q
            base = u_ptr + p * su_z64
            if q >= R and q < BLOCK_Z + R:
                # planes z_end .. z_end+R-1 of a short last chunk only feed z terms (their xy is never stored)
                xy, centres = _rows_xy(base, y0, su_y, xs, nx, ny, true & (p < z_end + R), w_centre, wy, wx,
                                       R, BLOCK_Y, BLOCK_X, VEC)
                win = _add_centre_rows(_scatter_rows(win, centres, wz, R, BLOCK_Y), xy, R, BLOCK_Y)
            else:
                rows = ()
                for i in tl.static_range(0, BLOCK_Y):
                    rows = rows + (_row_load(base, y0 + i, su_y, xs, true & (p < z_end + R) & (y0 + i < ny), nx),)
                win = _scatter_rows(win, rows, wz, R, BLOCK_Y)
            if q >= 2 * R:
                _store_rows(out_ptr, p - R, so_z64, so_y, y0, y_hi, xs, nx, true & (p - R < z_end), x_in, full_x,
                            win[:BLOCK_Y], BLOCK_Y, NONTEMPORAL)
            win = win[BLOCK_Y:]
            for i in tl.static_range(0, BLOCK_Y):
                win = win + (zero,)
    elif MODE == 1:
        win = ()
        for j in tl.static_range(0, (2 * R + 1) * BLOCK_Y):
            win = win + (zero,)
        for p in range(z_begin - R, z_begin):
            base = u_ptr + p * su_z64
            rows = ()
            for i in tl.static_range(0, BLOCK_Y):
                rows = rows + (_row_load(base, y0 + i, su_y, xs, true & (y0 + i < ny), nx),)
            win = _scatter_rows(win, rows, wz, R, BLOCK_Y)
            win = win[BLOCK_Y:]
            for i in tl.static_range(0, BLOCK_Y):
                win = win + (zero,)
        for p in range(z_begin, z_end + R):
            base = u_ptr + p * su_z64
            if p < z_end:
                xy, centres = _rows_xy(base, y0, su_y, xs, nx, ny, true, w_centre, wy, wx, R, BLOCK_Y, BLOCK_X,
                                       VEC)
                win = _add_centre_rows(_scatter_rows(win, centres, wz, R, BLOCK_Y), xy, R, BLOCK_Y)
            else:
                rows = ()
                for i in tl.static_range(0, BLOCK_Y):
                    rows = rows + (_row_load(base, y0 + i, su_y, xs, true & (y0 + i < ny), nx),)
                win = _scatter_rows(win, rows, wz, R, BLOCK_Y)
            _store_rows(out_ptr, p - R, so_z64, so_y, y0, y_hi, xs, nx, true & (p - R >= z_begin), x_in, full_x,
                        win[:BLOCK_Y], BLOCK_Y, NONTEMPORAL)
            win = win[BLOCK_Y:]
            for i in tl.static_range(0, BLOCK_Y):
                win = win + (zero,)
    else:
        for p in range(z_begin, z_end):
            base = u_ptr + p * su_z64
            acc, centres = _rows_xy(base, y0, su_y, xs, nx, ny, true, w_centre, wy, wx, R, BLOCK_Y, BLOCK_X, VEC)
            outs = ()
            for i in tl.static_range(0, BLOCK_Y):
                y = y0 + i
                ok = true & (y < ny)
                a = acc[i]
                for k in tl.static_range(1, R + 1):
                    lo = _row_load(base - k * su_z64, y, su_y, xs, ok, nx)
                    hi = _row_load(base + k * su_z64, y, su_y, xs, ok, nx)
                    a += (lo + hi) * wz[k - 1]
                outs = outs + (a,)
            _store_rows(out_ptr, p, so_z64, so_y, y0, y_hi, xs, nx, true, x_in, full_x, outs, BLOCK_Y, NONTEMPORAL)


# ----------------------------------------------------------------------------------------------
# The flat kernel: unaligned rows (nx not a multiple of 16 bytes), every access still 128-bit.
# ----------------------------------------------------------------------------------------------
@triton.jit
def _flat_load(tile_ptr, g, d, na, BLOCK: tl.constexpr):
    """Elements g + d .. g + d + BLOCK - 1 of the flat grid (``tile_ptr`` points at element g) as a
    (1, BLOCK) tile; g + d is a multiple of VEC, so the load is 128-bit. Vectors outside [0, na)
    (na = the element count rounded down to VEC) read 0: they hold no neighbour of an interior
    point (see ``laplacian_flat_kernel``), and the mask is constant over each vector."""
    i = tl.arange(0, BLOCK)[None, :]
    return tl.load(tile_ptr + d + i, mask=(i >= -(g + d)) & (i < na - (g + d)), other=0.0)


@triton.jit
def _phase_shifted(tile_ptr, g, d, na, S: tl.constexpr, VEC: tl.constexpr, BLOCK: tl.constexpr):
    """u[f + d + S] for the tile's elements f, with d a multiple of VEC (run time) and S a compile-
    time shift: one or two aligned loads (vectors a and a + 1, S = a * VEC + E) whose column
    components are recombined at compile-time indices (register renames, as in ``_plane_xy``)."""
    A: tl.constexpr = S // VEC
    E: tl.constexpr = S % VEC
    lo = _flat_load(tile_ptr, g, d + A * VEC, na, BLOCK)
    if E == 0:
        return lo
    else:
        hi = _flat_load(tile_ptr, g, d + (A + 1) * VEC, na, BLOCK)
        c_lo = _components(lo, VEC, 1, BLOCK)
        c_hi = _components(hi, VEC, 1, BLOCK)
        out = ()
        for j in tl.static_range(0, VEC):
            if j + E < VEC:
                out = out + (c_lo[j + E],)
            else:
                out = out + (c_hi[j + E - VEC],)
        return _interleave(out, VEC, 1, BLOCK)


@triton.jit
def _strided_phase_pairs(tile_ptr, g, stride_al, na, w, PHASE: tl.constexpr, R: tl.constexpr, VEC: tl.constexpr,
                         BLOCK: tl.constexpr):
    """Sum_k w_k (u[f - k s] + u[f + k s]) for a stride s = stride_al + PHASE (stride_al a multiple of VEC
    at run time, PHASE = s mod VEC at compile time): the y pairs (s = nx) or z pairs (s = ny nx)."""
    acc = tl.zeros((1, BLOCK), dtype=tile_ptr.dtype.element_ty)
    for k in tl.static_range(1, R + 1):
        lo = _phase_shifted(tile_ptr, g, -k * stride_al, na, -k * PHASE, VEC, BLOCK)
        hi = _phase_shifted(tile_ptr, g, k * stride_al, na, k * PHASE, VEC, BLOCK)
        acc += (lo + hi) * w[k - 1]
    return acc


@triton.jit
def _small_divmod(n, d):
    """(n // d, n % d) for 0 <= n < 2**22, 0 < d and n // d < 2**12 (int32 tensor n, scalar d): a
    float32 quotient (off by at most one there, even with an approximate 1 / d) and one correction
    each way, cheaper than the integer division sequence."""
    q = tl.floor(n.to(tl.float32) * (1.0 / d.to(tl.float32))).to(tl.int32)
    m = n - q * d
    q = tl.where(m < 0, q - 1, tl.where(m >= d, q + 1, q))
    m = tl.where(m < 0, m + d, tl.where(m >= d, m - d, m))
    return q, m


@triton.jit
def laplacian_flat_kernel(
    u_ptr, out_ptr, w_ptr,
    nz, ny, nx, nx_q, plane_q, n_q, g_lo_q,
    R: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, PHASE_Y: tl.constexpr, PHASE_Z: tl.constexpr,
    NONTEMPORAL: tl.constexpr,
):
    """The Laplacian of a contiguous grid whose rows are not 16-byte aligned (nx not a multiple of
    VEC), with every load and store 128-bit: the grid is read as one flat array of nz * ny * nx
    points cut into tiles of BLOCK points that start on a multiple of VEC (16 bytes; the base
    pointers are 16-byte aligned). One tile per program, every neighbour loaded (from L1/L2, like the
    plane kernels, so the 2R + 1 planes a tile reaches should fit in L2).

    * centre and x neighbours: the tile and the tile shifted by whole vectors (``_row_chunks``'
      technique, the masks here being flat), combined by ``_row_x``;
    * y neighbours at flat offset +-k nx and z neighbours at +-k ny nx: the offset is a run-time
      multiple of VEC plus a compile-time phase k * PHASE_Y (PHASE_Y = nx mod VEC; PHASE_Z = ny nx mod
      VEC), so each comes from one or two aligned loads recombined at compile-time indices
      (``_phase_shifted``); Triton compiles one kernel per (PHASE_Y, PHASE_Z);
    * the interior mask (x in [R, nx - R), y in [R, ny - R), z in [R, nz - R)) per element, from the
      flat index; the store is 128-bit under a mask constant over each vector, and boundary points in
      the tile are read back from ``out`` and written unchanged (``_store_tile``'s technique).
    nx_q, plane_q, n_q, g_lo_q: nx, ny * nx and the element count rounded down to multiples of VEC,
    and the first tile's start, all divided by VEC (multiplied back here, so Triton knows their
    divisibility). Loads outside [0, n_q * VEC) read 0: interior points' neighbours lie at least
    R * nx + R >= VEC elements inside both ends (nx >= 2R + 1), so none of them is lost.
    Grid: 1D, ceil((last interior point + 1 - first tile start) / BLOCK) programs in address order.
    """
    nx_al = nx_q.to(tl.int64) * VEC
    plane_al = plane_q.to(tl.int64) * VEC
    na = n_q.to(tl.int64) * VEC
    g = (g_lo_q.to(tl.int64) + tl.program_id(0).to(tl.int64) * (BLOCK // VEC)) * VEC
    tile_ptr = u_ptr + g
    w_centre = tl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)
    # centre and x: the tile and its whole-vector shifts m * VEC, m = -NCH..NCH
    NCH: tl.constexpr = (R + VEC - 1) // VEC
    centre = _flat_load(tile_ptr, g, 0, na, BLOCK)
    chunks = ()
    for m in tl.static_range(-NCH, NCH + 1):
        if m != 0:
            chunks = chunks + (_flat_load(tile_ptr, g, m * VEC, na, BLOCK),)
    acc = centre * w_centre + _row_x(centre, chunks, wx, R, VEC, BLOCK)
    acc += _strided_phase_pairs(tile_ptr, g, nx_al, na, wy, PHASE_Y, R, VEC, BLOCK)
    acc += _strided_phase_pairs(tile_ptr, g, plane_al, na, wz, PHASE_Z, R, VEC, BLOCK)
    # (z, y, x) of each element: 64-bit divisions for the tile's first point (scalars), then small
    # per-element quotients (rows and planes the tile crosses) in float32
    plane = ny.to(tl.int64) * nx
    z0 = g // plane
    rem = g - z0 * plane
    y0 = rem // nx
    dy, x = _small_divmod((rem - y0 * nx).to(tl.int32) + tl.arange(0, BLOCK)[None, :], nx)
    dz, y = _small_divmod(y0.to(tl.int32) + dy, ny)
    z = z0.to(tl.int32) + dz
    interior = (x >= R) & (x < nx - R) & (y >= R) & (y < ny - R) & (z >= R) & (z < nz - R)
    i = tl.arange(0, BLOCK)[None, :]
    out_ptrs = out_ptr + g + i
    live = i < na - g  # constant over each vector: 128-bit stores
    acc = tl.where(interior, acc, tl.load(out_ptrs, mask=live & ~interior))
    if NONTEMPORAL:
        tl.store(out_ptrs, acc, mask=live, cache_modifier=".cs")
    else:
        tl.store(out_ptrs, acc, mask=live)
