"""An sm90 Gluon z-march for the Laplacian: planes streamed through shared memory by TMA.

Why (docs/stencil-notes.md): the Triton z-marches re-read every plane from L2 about 2.25 times per
point (y halo rows of short tiles, x chunks that straddle lines, z halo planes of short marches)
and keep their loads in flight in registers, which caps occupancy. Here each program owns NW
strips of rows (one warp each) of a BX-wide column and marches through BZ planes:

* a plane's strips arrive by TMA (one box of ROWS x BX per warp, its y halo included) into a ring of
  S = 2R + 1 + D slots; an mbarrier per slot; plane p + R + D is requested while plane p is
  computed, so D planes of DRAM reads stay in flight without a register;
* z neighbours are other ring slots, y neighbours a sliding window of rows in registers (each row
  is read from shared memory once per plane it belongs to), x neighbours come from the thread's
  own registers or a neighbouring lane's (``shfl.sync``): a warp holds one row of BX = 32 * VEC
  points, VEC per lane;
* the lanes within HV = VEC * ceil(R / VEC) of the row's ends have no neighbour lane, so x tiles
  overlap by 2 * HV and those lanes are not stored: L2 reads are ROWS / (ROWS - 2R) in y times
  BX / (BX - 2 * HV) in x (1.14 x 1.07 for ROWS = 16, against ~2.25 for the Triton marches);
* stores are 128-bit from registers (the stored lanes start on a vector boundary).

Gluon's shared-memory views cannot start a window at a row offset that is not a multiple of its
length (``slice`` rejects it), so rows are read one at a time, as length-1 slices (any offset), and never as shifted 2D windows. Only for CUDA sm90+; the Triton interpreter cannot
run it (checked on the GPU by ``benchmarks/stencil_tma.py`` and ``tests/gpu/test_stencil_tma.py``).
The rows are loaded as [NW, 1, 32, VEC] from the slot reshaped to [NW, ROWS, 32, VEC], so the
lane/element split used for the x shifts is a register rename, and the stores share that layout.

Measured (H200, 2026-11-25, docs/stencil-notes.md): correct, but slower than ``auto`` everywhere
(fp64 o2 512^3 at most 67% of copy against 78%), so it is an explicit config, not a default.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma


@gluon.jit
def _lane_shift(v, D: gl.constexpr, UP: gl.constexpr):
    """Lane l gets lane l + D's value (UP False) or lane l - D's (UP True), D in (1, 2); lanes whose
    source is outside the warp keep their own (those lanes are never stored)."""
    if v.dtype == gl.float64:
        if UP == True and D == 1:
            asm: gl.constexpr = ("{ .reg .b32 lo, hi; mov.b64 {lo, hi}, $1; shfl.sync.up.b32 lo, lo, 1, 0, -1; "
                                "shfl.sync.up.b32 hi, hi, 1, 0, -1; mov.b64 $0, {lo, hi}; }")
        elif UP == True and D == 2:
            asm: gl.constexpr = ("{ .reg .b32 lo, hi; mov.b64 {lo, hi}, $1; shfl.sync.up.b32 lo, lo, 2, 0, -1; "
                                "shfl.sync.up.b32 hi, hi, 2, 0, -1; mov.b64 $0, {lo, hi}; }")
        elif UP == False and D == 1:
            asm: gl.constexpr = ("{ .reg .b32 lo, hi; mov.b64 {lo, hi}, $1; shfl.sync.down.b32 lo, lo, 1, 31, -1; "
                                "shfl.sync.down.b32 hi, hi, 1, 31, -1; mov.b64 $0, {lo, hi}; }")
        elif UP == False and D == 2:
            asm: gl.constexpr = ("{ .reg .b32 lo, hi; mov.b64 {lo, hi}, $1; shfl.sync.down.b32 lo, lo, 2, 31, -1; "
                                "shfl.sync.down.b32 hi, hi, 2, 31, -1; mov.b64 $0, {lo, hi}; }")
        return gl.inline_asm_elementwise(asm, "=d,d", [v], dtype=gl.float64, is_pure=True, pack=1)
    else:
        if UP == True and D == 1:
            asm: gl.constexpr = "shfl.sync.up.b32 $0, $1, 1, 0, -1;"
        elif UP == True and D == 2:
            asm: gl.constexpr = "shfl.sync.up.b32 $0, $1, 2, 0, -1;"
        elif UP == False and D == 1:
            asm: gl.constexpr = "shfl.sync.down.b32 $0, $1, 1, 31, -1;"
        elif UP == False and D == 2:
            asm: gl.constexpr = "shfl.sync.down.b32 $0, $1, 2, 31, -1;"
        return gl.inline_asm_elementwise(asm, "=r,r", [v], dtype=gl.float32, is_pure=True, pack=1)


@gluon.jit
def _components(t, NW: gl.constexpr, VEC: gl.constexpr):
    """[NW, 32, VEC] -> VEC tensors [NW, 32]: component j holds each lane's column j."""
    if VEC == 2:
        c0, c1 = gl.split(t)
        return (c0, c1)
    else:
        b0, b1 = gl.split(gl.reshape(t, [NW, 32, 2, 2]))  # column 2a + b
        c0, c2 = gl.split(b0)
        c1, c3 = gl.split(b1)
        return (c0, c1, c2, c3)


@gluon.jit
def _interleave(c, NW: gl.constexpr, VEC: gl.constexpr, L4: gl.constexpr):
    """Inverse of ``_components``, in the layout L4 the rows are loaded in (a trivial conversion:
    checked at compile time)."""
    if VEC == 2:
        return gl.convert_layout(gl.join(c[0], c[1]), L4, assert_trivial=True)
    else:
        return gl.convert_layout(gl.reshape(gl.join(gl.join(c[0], c[2]), gl.join(c[1], c[3])), [NW, 32, VEC]), L4,
                                 assert_trivial=True)


@gluon.jit
def _row(buf, r: gl.constexpr, NW: gl.constexpr, VEC: gl.constexpr, L5: gl.constexpr):
    """Row r of every warp's strip in a ring slot [NW, ROWS, BX], as [NW, 32, VEC]."""
    ROWS: gl.constexpr = buf.shape[1]
    return gl.reshape(buf.reshape([NW, ROWS, 32, VEC]).slice(r, 1, dim=1).load(L5), [NW, 32, VEC])


@gluon.jit
def _x_terms(comps, wx, R: gl.constexpr, VEC: gl.constexpr):
    """sum_k wx_k (u[x-k] + u[x+k]) per component, the cross-lane values by shuffles (each needed
    (lane offset, component) pair shuffled once)."""
    NCH: gl.constexpr = (R + VEC - 1) // VEC
    # shifted[(d + NCH) * VEC + c]: component c of lane l + d
    shifted = ()
    for d in gl.static_range(-NCH, NCH + 1):
        for c in gl.static_range(0, VEC):
            if d == 0:
                shifted = shifted + (comps[c],)
            elif d < 0:
                shifted = shifted + (_lane_shift(comps[c], -d, True),)
            else:
                shifted = shifted + (_lane_shift(comps[c], d, False),)
    outs = ()
    for j in gl.static_range(0, VEC):
        acc = (shifted[(j - 1 + NCH * VEC)] + shifted[(j + 1 + NCH * VEC)]) * wx[0]
        for k in gl.static_range(2, R + 1):
            acc += (shifted[j - k + NCH * VEC] + shifted[j + k + NCH * VEC]) * wx[k - 1]
        outs = outs + (acc,)
    return outs


@gluon.jit
def _weights(w_ptr, OFFSET: gl.constexpr, R: gl.constexpr):
    w = ()
    for k in gl.static_range(1, R + 1):
        w = w + (gl.load(w_ptr + OFFSET + k),)
    return w


@gluon.jit
def laplacian_tma_kernel(
    u_desc, out_ptr, w_ptr,
    nz, ny, nx_s, rows_per_plane, so_z_s, so_y_s,
    y_lo, y_hi, x_lo, x_hi,
    R: gl.constexpr, NW: gl.constexpr, ROWS: gl.constexpr, VEC: gl.constexpr, BZ: gl.constexpr,
    D: gl.constexpr, NONTEMPORAL: gl.constexpr,
):
    """One program: NW strips of ROWS - 2R output rows (warp w: strip w), BX - 2 * HV output
    columns, BZ output planes. ``u_desc`` is a TMA descriptor over u seen as one
    (1, nz * rows_per_plane, nx) block of rows (rows_per_plane = z stride / y stride), box [1, ROWS, BX]."""
    BX: gl.constexpr = 32 * VEC
    HV: gl.constexpr = VEC * ((R + VEC - 1) // VEC)
    BXO: gl.constexpr = BX - 2 * HV
    STRIP: gl.constexpr = ROWS - 2 * R
    S: gl.constexpr = 2 * R + 1 + D
    nx = nx_s * VEC
    so_z = so_z_s * VEC
    so_y = so_y_s * VEC
    dtype: gl.constexpr = u_desc.dtype
    L4: gl.constexpr = gl.BlockedLayout([1, 1, VEC], [1, 32, 1], [NW, 1, 1], [2, 1, 0])
    L5: gl.constexpr = gl.BlockedLayout([1, 1, 1, VEC], [1, 1, 32, 1], [NW, 1, 1, 1], [3, 2, 1, 0])

    # program -> (x tile, y block, z chunk), x fastest
    n_tx = gl.cdiv(nx, BXO)
    n_ty = gl.cdiv(y_hi - y_lo, NW * STRIP)
    pid = gl.program_id(0)
    tile_x = pid % n_tx
    rem = pid // n_tx
    tile_y = rem % n_ty
    zc = rem // n_ty
    z_begin = R + zc * BZ
    z_end = gl.minimum(z_begin + BZ, nz - R)
    x_box = tile_x * BXO - HV  # a multiple of VEC; this tile stores x in [x_box + HV, x_box + BX - HV)
    y_block = y_lo + tile_y * (NW * STRIP)

    bufs = gl.allocate_shared_memory(dtype, [S, NW, ROWS, BX], u_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(S):
        mbarrier.init(bars.index(s), count=1)

    q0 = z_begin - R  # first plane this program reads; plane q lives in slot (q - q0) % S
    n_planes = z_end - z_begin + 2 * R

    # prologue: planes q0 .. q0 + 2R + D - 1
    for i in gl.static_range(2 * R + D):
        bar = bars.index(i)
        ok = i < n_planes
        mbarrier.expect(bar, NW * u_desc.block_type.nbytes, pred=ok)
        for w in gl.static_range(NW):
            tma.async_copy_global_to_shared(u_desc, [0, (q0 + i) * rows_per_plane + y_block + w * STRIP - R, x_box],
                                            bar, bufs.index(i).slice(w, 1, dim=0), pred=ok)
    for i in gl.static_range(2 * R):
        mbarrier.wait(bars.index(i), 0)

    w_centre = gl.load(w_ptr)
    wz = _weights(w_ptr, 0, R)
    wy = _weights(w_ptr, R, R)
    wx = _weights(w_ptr, 2 * R, R)

    # output coordinates of a [NW, 32, VEC] row tile (warp, lane, element)
    warp = gl.arange(0, NW, layout=gl.SliceLayout(1, gl.SliceLayout(2, L4)))[:, None, None]
    lane = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(2, L4)))[None, :, None]
    elem = gl.arange(0, VEC, layout=gl.SliceLayout(0, gl.SliceLayout(1, L4)))[None, None, :]
    pos = lane * VEC + elem
    xs = x_box + pos
    lane_ok = (lane >= HV // VEC) & (lane < 32 - HV // VEC)
    # Stores under masks that are constant over a lane's VEC elements are 128-bit: every vector
    # inside [x_lo, x_hi) goes that way; the at most two vectors per row that straddle x_lo or
    # x_hi take a second, element-masked store (no read-back of the boundary, no branch).
    x_vec = x_box + lane * VEC
    vec_in = lane_ok & (x_vec >= x_lo) & (x_vec + VEC <= x_hi)
    edge_in = lane_ok & ~vec_in & (xs >= x_lo) & (xs < x_hi)
    y_strip = y_block + warp * STRIP
    offs = y_strip * so_y + xs

    for p in range(z_begin, z_end):
        # every warp is done with iteration p - 1, so the slot of plane p - R - 1 may be refilled
        gl.thread_barrier()
        q = p + R + D
        i_q = q - q0
        s_q = i_q % S
        ok = q < z_end + R
        bar = bars.index(s_q)
        mbarrier.expect(bar, NW * u_desc.block_type.nbytes, pred=ok)
        for w in gl.static_range(NW):
            tma.async_copy_global_to_shared(u_desc, [0, q * rows_per_plane + y_block + w * STRIP - R, x_box],
                                            bar, bufs.index(s_q).slice(w, 1, dim=0), pred=ok)
        i_new = p + R - q0
        mbarrier.wait(bars.index(i_new % S), (i_new // S) & 1)

        i_p = p - q0
        centre = bufs.index(i_p % S)
        zlo = ()
        zhi = ()
        for k in gl.static_range(1, R + 1):
            zlo = zlo + (bufs.index((i_p - k) % S),)
            zhi = zhi + (bufs.index((i_p + k) % S),)
        out_plane = out_ptr + p.to(gl.int64) * so_z
        win = ()
        for r in gl.static_range(0, ROWS):
            row = gl.convert_layout(_row(centre, r, NW, VEC, L5), L4, assert_trivial=True)
            win = win + (row,)
            if r >= 2 * R:
                c = win[R]
                acc = c * w_centre
                for k in gl.static_range(1, R + 1):
                    acc += (win[R - k] + win[R + k]) * wy[k - 1]
                    acc += gl.convert_layout(_row(zlo[k - 1], r - R, NW, VEC, L5) + _row(zhi[k - 1], r - R, NW, VEC, L5), L4,
                                            assert_trivial=True) * wz[k - 1]
                xt = _x_terms(_components(c, NW, VEC), wx, R, VEC)
                ac = _components(acc, NW, VEC)
                outs = ()
                for j in gl.static_range(0, VEC):
                    outs = outs + (ac[j] + xt[j],)
                acc = _interleave(outs, NW, VEC, L4)
                dy = r - 2 * R  # box row r - R is output row y_strip + dy
                ptrs = out_plane + dy * so_y + offs
                row_ok = y_strip < y_hi - dy
                if NONTEMPORAL:
                    gl.store(ptrs, acc, mask=row_ok & vec_in, cache_modifier=".cs")
                    gl.store(ptrs, acc, mask=row_ok & edge_in, cache_modifier=".cs")
                else:
                    gl.store(ptrs, acc, mask=row_ok & vec_in)
                    gl.store(ptrs, acc, mask=row_ok & edge_in)
                win = win[1:]

    for s in gl.static_range(S):
        mbarrier.invalidate(bars.index(s))
