"""A z-march for the high orders whose planes stream through a ``cp.async`` ring in shared memory.

Why (docs/stencil-notes.md, "Order 8"): the register-window march (``laplacian_zwin_kernel``) reads
every plane's y rows and x chunks from L1 with global loads. Each of those costs a 64-bit address
(two integer instructions) and waits on L1 or, at the tile's edges, on L2, and the loads in flight
need registers: 118-128 per thread, 16 warps per SM, the warps waiting on long-scoreboard stalls
(62% of the samples), 52 instructions per point of which 27 are the stencil's arithmetic.

Here a program owns a tile of BY x BX points (one 16-byte vector per thread, or with ``CV`` an 8-byte one:
two fp32, which fp32 order 8 takes) and marches its z range:

* every input plane of the tile, with its R halo rows above and below and NCH halo vectors left and
  right, is copied from global memory into one slot of a ring of S slots in shared memory with
  ``cp.async`` (16 bytes per copy, zero-filled outside the grid), D planes ahead of the one computed;
  the copies need no register while in flight;
* ``MBAR`` (the default, S = D + 1 + slack): mbarriers. Each thread's copies of a plane arrive on the
  slot's "full" barrier when they land (``cp.async.mbarrier.arrive.noinc``); a thread waits for its
  plane's "full" phase, and before copying into a slot for its "empty" phase (every thread has read the
  slot's previous plane). Warps drift up to the slack apart instead of meeting at every plane. Without
  ``MBAR`` (S = D + 1): one ``bar.sync`` per plane, after which the plane's slot is complete and the slot
  read a plane earlier is free;
* the y rows and x chunks of the thread's vector are 128-bit ``ld.shared`` at constant offsets from
  one per-thread address (the slot's pitch is a compile-time constant);
* z stays in a register window of 2R + 1 accumulators (``_scatter_z``'s form, one plane's
  contribution added to the 2R + 1 outputs it enters), as in the zwin kernel;
* stores are 128-bit ``st.global`` of the thread's vector.

The shared memory is addressed by hand (inline PTX on the module's ``global_smem``): Gluon's
views cannot start a window at a row or column offset that is not a multiple of its length, which
every neighbour row and chunk would need. The kernel allocates one buffer (the ring) through Gluon
and uses nothing else of shared memory, so the ring starts at ``global_smem``; the compile tests
check that the PTX holds no other shared-memory access.

Needs: CUDA sm80+, rows and strides of whole 16-byte vectors (or of 8-byte ones, or fp32 single elements, with
copies of that size: VB), R of 1 to 8 (4 for the wave step; the x halo is ceil(R / VEC)
whole vectors a side; where R is not a whole number of vectors, the edge vectors' stores carry a mask
of components), plane offsets in int32. Only the interior (the box) is written.
Measured (docs/stencil-notes.md, "The cp.async-ring march"): 520^3 on an H100, fp32 order 8 73% of copy, fp64
82-83% (the register-window march 71% and 74-75% in the same runs); ``auto`` takes it on sm90. On an H200 with two
fp32 elements a thread (2026-11-28): fp32 order 8 73.4% against 69.8% for 16-byte vectors.
"""
# no ``from __future__ import annotations``: the kernels' weight parameters are typed by their annotations
# ("fp32" / "fp64"), which Triton reads as values, not as strings of source
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _smem_base(like):
    """The shared-memory address of ``global_smem`` (the ring's first byte), one per element of ``like``."""
    return gl.inline_asm_elementwise("mov.u32 $0, global_smem;", "=r,r", [like], dtype=gl.int32, is_pure=True,
                                     pack=1)


@gluon.jit
def _cp_async(dst, src, nbytes, live, VB: gl.constexpr = 16):
    """VB bytes (16, or 8 for rows of 8-byte vectors, or 4 for fp32 rows of single elements) from global ``src`` to
    shared ``dst`` where ``live`` (int32, non-zero); ``nbytes`` VB or 0 (0: the vector is zero-filled and nothing is
    read). 16 bytes bypass L1 (``.cg``); ``cp.async`` takes 8 and 4 only through L1 (``.ca``)."""
    if VB == 16:
        return gl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $4, 0; @p cp.async.cg.shared.global [$1], [$2], 16, $3; mov.u32 $0, 0; }",
            "=r,r,l,r,r", [dst, src.to(gl.int64, bitcast=True), nbytes, live], dtype=gl.int32, is_pure=False, pack=1)
    elif VB == 8:
        return gl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $4, 0; @p cp.async.ca.shared.global [$1], [$2], 8, $3; mov.u32 $0, 0; }",
            "=r,r,l,r,r", [dst, src.to(gl.int64, bitcast=True), nbytes, live], dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.static_assert(VB == 4)
        return gl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $4, 0; @p cp.async.ca.shared.global [$1], [$2], 4, $3; mov.u32 $0, 0; }",
            "=r,r,l,r,r", [dst, src.to(gl.int64, bitcast=True), nbytes, live], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _prefetch_l2(src, live):
    """``prefetch.global.L2`` of the line holding ``src`` where ``live`` (int32) is non-zero: a hint, no value."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r", [src.to(gl.int64, bitcast=True), live], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _prefetch_plane(srcs, q, q_last, fill_bytes, su_z, D: gl.constexpr, PF: gl.constexpr, NFILL: gl.constexpr):
    """At plane q (``srcs`` point at plane q + D): prefetch plane q + PF's copies into L2 (PF > D)."""
    if PF > D:
        if q + PF < q_last:
            for i in gl.static_range(NFILL):
                _prefetch_l2(srcs[i] + (PF - D) * su_z, fill_bytes[i])


@gluon.jit
def _commit(like):
    return gl.inline_asm_elementwise("cp.async.commit_group; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _wait(like, N: gl.constexpr):
    """Wait until at most N groups of this thread's copies are in flight (N = D - 1)."""
    if N == 0:
        gl.inline_asm_elementwise("cp.async.wait_group 0; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    elif N == 1:
        gl.inline_asm_elementwise("cp.async.wait_group 1; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    elif N == 2:
        gl.inline_asm_elementwise("cp.async.wait_group 2; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    elif N == 3:
        gl.inline_asm_elementwise("cp.async.wait_group 3; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    elif N == 4:
        gl.inline_asm_elementwise("cp.async.wait_group 4; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("cp.async.wait_group 5; mov.u32 $0, 0;", "=r,r", [like], dtype=gl.int32,
                                  is_pure=False, pack=1)
    gl.thread_barrier()


@gluon.jit
def _mbar_init(bar, count, live):
    """``mbarrier.init`` of the barrier at shared address ``bar`` for ``count`` arrivals, by the threads
    where ``live`` is non-zero (one)."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p mbarrier.init.shared::cta.b64 [$1], $2; mov.u32 $0, 0; }",
        "=r,r,r,r", [bar, count, live], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _mbar_wait(bar, parity, need):
    """Wait (where ``need`` is non-zero) until the phase of parity ``parity`` of the barrier at ``bar`` has
    completed."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p, q; setp.ne.b32 q, $3, 0; @!q bra DONE; WAIT: "
        "mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; @!p bra WAIT; DONE: mov.u32 $0, 0; }",
        "=r,r,r,r", [bar, parity, need], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _mbar_arrive(bar):
    """One arrival of this thread on the barrier at ``bar`` (release: its earlier shared-memory reads are
    done before a thread that waits on the phase writes)."""
    return gl.inline_asm_elementwise(
        "{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [$1]; mov.u32 $0, 0; }",
        "=r,r", [bar], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _mbar_arrive_copies(bar):
    """This thread's arrival on ``bar`` once all its earlier ``cp.async`` copies have landed (``.noinc``:
    the arrival is one of the barrier's expected count)."""
    return gl.inline_asm_elementwise(
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$1]; mov.u32 $0, 0;",
        "=r,r", [bar], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _lds(addr, VEC: gl.constexpr, DT: gl.constexpr):
    """The vector of VEC elements at shared address ``addr`` (16 bytes, or 8: two fp32 or one fp64) as VEC component
    tensors (component j: element j)."""
    if VEC == 1 and DT.primitive_bitwidth == 32:
        return (gl.inline_asm_elementwise("ld.shared.f32 $0, [$1];", "=f,r", [addr], dtype=gl.float32,
                                          is_pure=False, pack=1),)
    elif VEC == 1:
        return (gl.inline_asm_elementwise("ld.shared.f64 $0, [$1];", "=d,r", [addr], dtype=gl.float64,
                                          is_pure=False, pack=1),)
    elif DT.primitive_bitwidth == 32 and VEC == 2:
        return gl.inline_asm_elementwise("ld.shared.v2.f32 {$0, $1}, [$2];", "=f,=f,r", [addr],
                                         dtype=(gl.float32, gl.float32), is_pure=False, pack=1)
    elif VEC == 4:
        return gl.inline_asm_elementwise("ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r", [addr],
                                         dtype=(gl.float32, gl.float32, gl.float32, gl.float32), is_pure=False,
                                         pack=1)
    else:
        return gl.inline_asm_elementwise("ld.shared.v2.f64 {$0, $1}, [$2];", "=d,=d,r", [addr],
                                         dtype=(gl.float64, gl.float64), is_pure=False, pack=1)


@gluon.jit
def _emit(optr, acc, ok, wv, VEC: gl.constexpr, WAVE: gl.constexpr, PARTIAL: gl.constexpr, DT: gl.constexpr):
    """Output plane q - R of the march at ``optr`` where ``ok``: the Laplacian ``acc``; ``WAVE``: the wave step's
    p_next = fma(m, acc, 2 p - p_prev) (``_zwin_emit``'s arithmetic) from ``wv`` = (p, p_prev, m) at the same
    points (p from the march's delay line, p_prev and m from the ring)."""
    if WAVE:
        val = ()
        for j in gl.static_range(VEC):
            val = val + (gl.fma(wv[2][j], acc[j], 2.0 * wv[0][j] - wv[1][j]),)
        _stg(optr, val, ok, VEC, PARTIAL, DT)
    else:
        _stg(optr, acc, ok, VEC, PARTIAL, DT)


def _store_ptx(ty: str, n: int, partial: bool) -> tuple[str, str]:
    """PTX and constraints of a streaming (``.cs``) store of n elements of type ``ty`` ("f32", "f64") at $1 (the
    elements $3...) where the int32 $2 allows it: non-zero, or (``partial``) a bit mask of the elements, bit j
    element j: all bits store the vector at once, others element by element."""
    vals = "$3" if n == 1 else "{" + ", ".join(f"${3 + j}" for j in range(n)) + "}"
    whole = f"st.global.cs{'' if n == 1 else f'.v{n}'}.{ty} [$1], {vals};"
    cons = "=r,l,r," + ",".join(["d" if ty == "f64" else "f"] * n)
    if not partial or n == 1:
        return "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p " + whole + " mov.u32 $0, 0; }", cons
    size = int(ty[1:]) // 8
    parts = "".join(f"and.b32 t, $2, {1 << j}; setp.ne.and.b32 q, t, 0, !f; @q st.global.cs.{ty} "
                    f"[$1{f'+{j * size}' if j else ''}], ${3 + j}; " for j in range(n))
    return ("{ .reg .pred f, q; .reg .b32 t; setp.eq.b32 f, $2, " + str((1 << n) - 1) + "; @f " + whole + " " + parts
            + "mov.u32 $0, 0; }"), cons


_ST_F32X4, _ST_F32X4_C = (gl.constexpr(v) for v in _store_ptx("f32", 4, False))
_ST_F32X4P, _ST_F32X4P_C = (gl.constexpr(v) for v in _store_ptx("f32", 4, True))
_ST_F32X2, _ST_F32X2_C = (gl.constexpr(v) for v in _store_ptx("f32", 2, False))
_ST_F32X2P, _ST_F32X2P_C = (gl.constexpr(v) for v in _store_ptx("f32", 2, True))
_ST_F64X2, _ST_F64X2_C = (gl.constexpr(v) for v in _store_ptx("f64", 2, False))
_ST_F64X2P, _ST_F64X2P_C = (gl.constexpr(v) for v in _store_ptx("f64", 2, True))
_ST_F64, _ST_F64_C = (gl.constexpr(v) for v in _store_ptx("f64", 1, False))
_ST_F32, _ST_F32_C = (gl.constexpr(v) for v in _store_ptx("f32", 1, False))


@gluon.jit
def _asm_store(asm: gl.constexpr, cons: gl.constexpr, ptr, ok, c):
    """Run a ``_store_ptx`` store: ``ptr`` as $1, ``ok`` as $2, the components ``c`` from $3 on."""
    gl.inline_asm_elementwise(asm, cons, (ptr.to(gl.int64, bitcast=True), ok) + c, dtype=gl.int32, is_pure=False,
                              pack=1)


@gluon.jit
def _stg(ptr, c, ok, VEC: gl.constexpr, PARTIAL: gl.constexpr, DT: gl.constexpr):
    """Store the VEC components ``c`` at ``ptr`` (16 bytes, or 8: two fp32 or one fp64) where ``ok`` (int32, non-zero)
    holds; streaming (``.cs``) store. ``PARTIAL``: ``ok`` is a bit mask of the components to store (bit j: component
    j); a full mask stores the vector at once, a partial one component by component (the x edges when R is not a
    whole number of vectors). ``_store_ptx`` writes the PTX."""
    if VEC == 1 and DT.primitive_bitwidth == 32:  # one fp32 (rows of single elements)
        _asm_store(_ST_F32, _ST_F32_C, ptr, ok, c)
    elif VEC == 1:  # one fp64: PARTIAL's mask is 0 or 1 as the plain one
        _asm_store(_ST_F64, _ST_F64_C, ptr, ok, c)
    elif DT.primitive_bitwidth == 64:
        if PARTIAL:
            _asm_store(_ST_F64X2P, _ST_F64X2P_C, ptr, ok, c)
        else:
            _asm_store(_ST_F64X2, _ST_F64X2_C, ptr, ok, c)
    elif VEC == 2:
        if PARTIAL:
            _asm_store(_ST_F32X2P, _ST_F32X2P_C, ptr, ok, c)
        else:
            _asm_store(_ST_F32X2, _ST_F32X2_C, ptr, ok, c)
    elif PARTIAL:
        _asm_store(_ST_F32X4P, _ST_F32X4P_C, ptr, ok, c)
    else:
        _asm_store(_ST_F32X4, _ST_F32X4_C, ptr, ok, c)


@gluon.jit
def _wave_copy(pp_ptr, m_ptr, wq, z_begin, z_end, su_z, tile_off, ok_tile, tile_wr, NT: gl.constexpr,
               WAVE: gl.constexpr):
    """``WAVE``: the thread's vector of p_prev and m on output plane ``wq`` into the slot's tile part
    (``tile_wr``: the thread's p_prev vector there; m's NT vectors later), where the plane is one of the
    program's outputs and the vector inside the box (else zero-filled, nothing read)."""
    if WAVE:
        live = ((wq >= z_begin) & (wq < z_end)).to(gl.int32)
        off = tile_off + (wq * live).to(gl.int64) * su_z
        nbytes = gl.where(ok_tile * live != 0, 16, 0)
        _cp_async(tile_wr, pp_ptr + off, nbytes, ok_tile * 0 + 1)
        _cp_async(tile_wr + NT * 16, m_ptr + off, nbytes, ok_tile * 0 + 1)


@gluon.jit
def _wave_reads(c, cens, tile_rd, NT: gl.constexpr, VEC: gl.constexpr, DT: gl.constexpr, WAVE: gl.constexpr):
    """``WAVE``: (p, p_prev, m) of output plane q - R (p from the delay line ``cens`` of the last R centres,
    p_prev and m from the slot's tile part) and the delay line moved on by plane q's centre ``c``."""
    if WAVE:
        wv = (cens[0], _lds(tile_rd, VEC, DT), _lds(tile_rd + NT * 16, VEC, DT))
        return wv, cens[1:] + (c,)
    else:
        return (), cens


@gluon.jit
def _vadd(a, b, VEC: gl.constexpr):
    out = ()
    for j in gl.static_range(VEC):
        out = out + (a[j] + b[j],)
    return out


@gluon.jit
def _xy_loads(addr, R: gl.constexpr, VEC: gl.constexpr, PITCH: gl.constexpr, DT: gl.constexpr):
    """The y rows (u[y - k], u[y + k] for k = 1..R) and x chunks (m = -NCH..-1, 1..NCH vectors away) of the
    thread's vector of VEC elements, from the slot (``addr``: the thread's vector in it)."""
    NCH: gl.constexpr = (R + VEC - 1) // VEC
    VB: gl.constexpr = VEC * DT.primitive_bitwidth // 8  # bytes of the thread's vector
    rows = ()
    for k in gl.static_range(1, R + 1):
        rows = rows + ((_lds(addr - k * PITCH, VEC, DT), _lds(addr + k * PITCH, VEC, DT)),)
    chunks = ()
    for m in gl.static_range(-NCH, NCH + 1):
        if m != 0:
            chunks = chunks + (_lds(addr + m * VB, VEC, DT),)
    return rows, chunks


@gluon.jit
def _xy_math(centre, loads, wc, wy, wx, R: gl.constexpr, VEC: gl.constexpr):
    """centre * wc + the y and x pairs of the thread's vector from ``_xy_loads``' vectors, in the order and
    with the explicit FMAs of the Triton marches' ``_plane_xy(..., FMA=True)`` (y pairs onto centre * wc, x
    pairs onto zero, then their sum), so the wave step gives their bits."""
    NCH: gl.constexpr = (R + VEC - 1) // VEC
    rows = loads[0]
    acc = ()
    for j in gl.static_range(VEC):
        a = centre[j] * wc
        for k in gl.static_range(1, R + 1):
            a = gl.fma(rows[k - 1][0][j] + rows[k - 1][1][j], wy[k - 1], a)
        acc = acc + (a,)
    # x: chunk m (m = -NCH..NCH, 0 the centre) holds u[x + m * VEC + j] in component j
    chunks = ()
    for m in gl.static_range(-NCH, NCH + 1):
        if m == 0:
            chunks = chunks + (centre,)
        elif m < 0:
            chunks = chunks + (loads[1][m + NCH],)
        else:
            chunks = chunks + (loads[1][m + NCH - 1],)
    out = ()
    for j in gl.static_range(VEC):
        xa = gl.zeros_like(centre[j])
        for k in gl.static_range(1, R + 1):
            lo = chunks[(j - k + NCH * VEC) // VEC][(j - k + NCH * VEC) % VEC]
            hi = chunks[(j + k + NCH * VEC) // VEC][(j + k + NCH * VEC) % VEC]
            xa = gl.fma(lo + hi, wx[k - 1], xa)
        out = out + (acc[j] + xa,)
    return out


@gluon.jit
def _xy(addr, centre, wc, wy, wx, R: gl.constexpr, VEC: gl.constexpr, PITCH: gl.constexpr, DT: gl.constexpr):
    """centre * wc + the y and x pairs of the thread's vector, from the slot (``addr``: the thread's vector)."""
    return _xy_math(centre, _xy_loads(addr, R, VEC, PITCH, DT), wc, wy, wx, R, VEC)


@gluon.jit
def _scatter(win, c, wz, R: gl.constexpr, VEC: gl.constexpr):
    """win[j] (output plane q - R + j) += wz_|R - j| * c for j != R (plane q's z contributions), as explicit
    FMAs (``_scatter_z(..., FMA=True)``'s order)."""
    out = ()
    for j in gl.static_range(0, 2 * R + 1):
        if j == R:
            out = out + (win[j],)
        else:
            w = wz[R - j - 1] if j < R else wz[j - R - 1]
            new = ()
            for i in gl.static_range(VEC):
                new = new + (gl.fma(c[i], w, win[j][i]),)
            out = out + (new,)
    return out


@gluon.jit
def _zero_vec(like, VEC: gl.constexpr):
    z = ()
    for i in gl.static_range(VEC):
        z = z + (gl.zeros_like(like),)
    return z


@gluon.jit
def _plane(u_ptr, win, srcs, optr, wave, q, q_last, z_begin, z_end, rd_addr, wr_addr, fill_bytes, fill_live, ok_out,
           su_z, so_z, wc, wz, wy, wx, R: gl.constexpr, VEC: gl.constexpr, PITCH: gl.constexpr, DT: gl.constexpr,
           D: gl.constexpr, NFILL: gl.constexpr, NT: gl.constexpr, PF: gl.constexpr, WAVE: gl.constexpr,
           PARTIAL: gl.constexpr, PB: gl.constexpr = 1, SYNC: gl.constexpr = True, VB: gl.constexpr = 16):
    """One input plane q of the march: wait for its slot (``rd_addr``: the thread's vector in it), request
    plane q + D into the slot read a plane earlier (``wr_addr``: the thread's first copy in it; ``srcs``
    point at plane q + D), add the plane to the window, and store output plane q - R (``optr``). ``WAVE``:
    ``wave`` = (p_prev, m, the thread's offset in the tile, its in-box flag, its tile vector in the slot read
    and in the slot written, the delay line of centres); output plane q + D - R's p_prev and m go with plane
    q + D's copies. ``PB`` planes a barrier: only a plane with ``SYNC`` waits (for planes q .. q + PB - 1:
    at most D - PB groups of copies left in flight) and meets the CTA barrier; the ring then has D + PB slots,
    so the slot a plane refills was last read PB planes earlier, before the last barrier."""
    if SYNC:
        _wait(ok_out, D - PB)
    if q + D < q_last:
        for i in gl.static_range(NFILL):
            _cp_async(wr_addr + i * VB * NT, srcs[i], fill_bytes[i], fill_live[i], VB)
        if WAVE:
            _wave_copy(wave[0], wave[1], q + D - R, z_begin, z_end, su_z, wave[2], wave[3], wave[5], NT, WAVE)
        _prefetch_plane(srcs, q, q_last, fill_bytes, su_z, D, PF, NFILL)
    _commit(fill_live[0])
    nsrcs = ()
    for i in gl.static_range(NFILL):
        nsrcs = nsrcs + (srcs[i] + su_z,)
    c = _lds(rd_addr, VEC, DT)
    if WAVE:
        wv, cens = _wave_reads(c, wave[6], wave[4], NT, VEC, DT, WAVE)
    else:
        wv, cens = (), ()
    win = _scatter(win, c, wz, R, VEC)
    if (q >= z_begin) & (q < z_end):
        xy = _xy(rd_addr, c, wc, wy, wx, R, VEC, PITCH, DT)
        win = win[:R] + (_vadd(win[R], xy, VEC),) + win[R + 1:]
    _emit(optr, win[0], ok_out * (q - R >= z_begin).to(gl.int32), wv, VEC, WAVE, PARTIAL, DT)
    win = win[1:] + (_zero_vec(win[0][0], VEC),)
    return win, nsrcs, optr + so_z, cens


@gluon.jit
def _plane_mb(u_ptr, win, srcs, optr, wave, q, q_last, z_begin, z_end, rd_addr, wr_addr, full_rd, full_wr, empty_rd,
              empty_wr, par_full, par_empty, need_empty, fill_bytes, fill_live, ok_out, su_z, so_z, wc, wz, wy, wx,
              R: gl.constexpr, VEC: gl.constexpr, PITCH: gl.constexpr, DT: gl.constexpr, D: gl.constexpr,
              NFILL: gl.constexpr, NT: gl.constexpr, PF: gl.constexpr, WAVE: gl.constexpr, PARTIAL: gl.constexpr,
              VB: gl.constexpr = 16):
    """``_plane`` with mbarriers instead of a CTA barrier: a thread waits only for the data of its plane
    (``full_rd``: every thread's copies of it landed, phase ``par_full``) and, before copying plane q + D
    into a slot, for every thread to have read that slot's previous plane (``empty_wr``, phase
    ``par_empty``, where ``need_empty``). Warps drift up to the ring's slack apart instead of meeting at
    every plane."""
    if q + D < q_last:
        _mbar_wait(empty_wr, par_empty + 0 * empty_wr, need_empty + 0 * empty_wr)
        for i in gl.static_range(NFILL):
            _cp_async(wr_addr + i * VB * NT, srcs[i], fill_bytes[i], fill_live[i], VB)
        if WAVE:
            _wave_copy(wave[0], wave[1], q + D - R, z_begin, z_end, su_z, wave[2], wave[3], wave[5], NT, WAVE)
        _prefetch_plane(srcs, q, q_last, fill_bytes, su_z, D, PF, NFILL)
        _mbar_arrive_copies(full_wr)
    nsrcs = ()
    for i in gl.static_range(NFILL):
        nsrcs = nsrcs + (srcs[i] + su_z,)
    _mbar_wait(full_rd, par_full + 0 * full_rd, 1 + 0 * full_rd)
    c = _lds(rd_addr, VEC, DT)
    if WAVE:  # read before the slot is released
        wv, cens = _wave_reads(c, wave[6], wave[4], NT, VEC, DT, WAVE)
    else:
        wv, cens = (), ()
    if (q >= z_begin) & (q < z_end):
        up_dn = _xy_loads(rd_addr, R, VEC, PITCH, DT)
        _mbar_arrive(empty_rd)
        win = _scatter(win, c, wz, R, VEC)
        xy = _xy_math(c, up_dn, wc, wy, wx, R, VEC)
        win = win[:R] + (_vadd(win[R], xy, VEC),) + win[R + 1:]
    else:
        _mbar_arrive(empty_rd)
        win = _scatter(win, c, wz, R, VEC)
    _emit(optr, win[0], ok_out * (q - R >= z_begin).to(gl.int32), wv, VEC, WAVE, PARTIAL, DT)
    win = win[1:] + (_zero_vec(win[0][0], VEC),)
    return win, nsrcs, optr + so_z, cens


@gluon.jit
def _smem_march(
    u_ptr, out_ptr, pp_ptr, m_ptr, wc, wz, wy, wx,
    nz, ny, nx_v, su_z_v, su_y_v, so_z_v, so_y_v, z_lo, z_hi, y_lo, y_hi, x_lo, x_hi,
    R: gl.constexpr, BY: gl.constexpr, BXV: gl.constexpr, BZ: gl.constexpr, VEC: gl.constexpr,
    D: gl.constexpr, NW: gl.constexpr, RING: gl.constexpr, S: gl.constexpr, MBAR: gl.constexpr,
    PF: gl.constexpr, WAVE: gl.constexpr, PARTIAL: gl.constexpr, CV: gl.constexpr = 0, PB: gl.constexpr = 1,
):
    """The cp.async-ring z-march (see the module docstring) over the output box [z_lo, z_hi) x [y_lo, y_hi) x
    [x_lo, x_hi) (at least R from every face; x bounds in elements) behind ``laplacian_smem_kernel`` (fp32),
    ``laplacian_smem_kernel_f64`` and ``wave_smem_kernel`` (``WAVE``: p_next = 2 p - p_prev + m lap(p) into
    ``out``, which shares p's strides and may be p_prev). The tiles start at the vector holding x_lo and
    cover the vector holding x_hi - 1; ``PARTIAL`` (x_lo or x_hi inside a vector, R not a whole number of
    vectors): each thread's stores carry a mask of the components inside [x_lo, x_hi) (``_stg``); else
    x_lo and x_hi are whole vectors and a vector is stored whole or not at all. ``CV``: the elements a thread
    computes (0: VEC, a 16-byte vector; 2 in fp32 or 1 in fp64: an 8-byte vector, so a tile of BXV copy vectors a
    row takes twice the threads, each with half the registers); the copies stay 16-byte vectors."""
    DT: gl.constexpr = u_ptr.dtype.element_ty
    CVE: gl.constexpr = VEC if CV == 0 else CV
    gl.static_assert(VEC % CVE == 0)
    gl.static_assert(CVE == VEC or not WAVE)
    # VB: bytes of a copy vector, 16, or 8 where the rows are whole 8-byte vectors only (VEC 2 in fp32, 1 in fp64), or
    # 4 for fp32 rows of single elements (VEC 1)
    VB: gl.constexpr = VEC * DT.primitive_bitwidth // 8
    gl.static_assert(VB == 16 or ((VB == 8 or VB == 4) and not WAVE))
    NCH: gl.constexpr = (R + VEC - 1) // VEC  # halo vectors left and right
    PV: gl.constexpr = BXV + 2 * NCH  # slot pitch in vectors
    PITCH: gl.constexpr = PV * VB  # bytes
    ROWS_S: gl.constexpr = BY + 2 * R
    NV_S: gl.constexpr = ROWS_S * PV
    NT: gl.constexpr = 32 * NW
    # a slot: the plane's window, then (WAVE) the tile's p_prev and m of output plane q - R (NT vectors each)
    SLOT: gl.constexpr = (NV_S + 2 * NT * WAVE) * VB
    gl.static_assert(S >= D + 1)
    gl.static_assert(MBAR or S == D + PB)
    gl.static_assert(PB == 1 or (not MBAR and S % PB == 0 and D >= PB))
    NFILL: gl.constexpr = (NV_S + NT - 1) // NT
    BXT: gl.constexpr = BXV * (VEC // CVE)  # threads a tile row
    gl.static_assert(BY * BXT == NT)
    TPX: gl.constexpr = BXT if BXT < 32 else 32
    L2: gl.constexpr = gl.BlockedLayout([1, 1], [32 // TPX, TPX], [NW, 1], [1, 0])
    L1: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    gl.static_assert(RING * DT.primitive_bitwidth // 8 >= S * SLOT + 16 * S)  # slots, then 2S mbarriers
    ring = gl.allocate_shared_memory(DT, [RING], gl.SwizzledSharedLayout(1, 1, 1, [0]))

    nx = nx_v * VEC
    su_z = su_z_v * VEC
    su_y = su_y_v * VEC
    so_z = so_z_v * VEC
    so_y = so_y_v * VEC
    BX: gl.constexpr = BXV * VEC
    xa_lo = x_lo // VEC * VEC  # the tiles' x range: whole vectors
    n_tx = gl.cdiv(gl.cdiv(x_hi, VEC) * VEC - xa_lo, BX)
    n_ty = gl.cdiv(y_hi - y_lo, BY)
    pid = gl.program_id(0)
    tile_x = pid % n_tx
    rem = pid // n_tx
    tile_y = rem % n_ty
    zc = rem // n_ty
    x0 = xa_lo + tile_x * BX  # a whole number of vectors
    y0 = y_lo + tile_y * BY
    z_begin = z_lo + zc * BZ
    z_end = gl.minimum(z_begin + BZ, z_hi)
    q0 = z_begin - R
    q_last = z_end + R  # input planes [q0, q_last)

    # The copies: thread t copies vectors t, t + NT, ... of a slot; vector v is row v // PV, column v % PV
    # of the (BY + 2R) x (BX + 2 NCH VEC) window. Outside the grid: zero-filled, nothing read.
    tid = gl.arange(0, NT, layout=L1)
    srcs = ()
    fill_bytes = ()
    fill_live = ()
    for i in gl.static_range(NFILL):
        v = tid + i * NT
        row = v // PV
        col = v % PV
        gy = y0 - R + row
        gx = x0 + (col - NCH) * VEC
        ok = (v < NV_S) & (gy >= 0) & (gy < ny) & (gx >= 0) & (gx < nx)
        srcs = srcs + (u_ptr + q0.to(gl.int64) * su_z + gl.where(ok, gy * su_y + gx, 0),)
        fill_bytes = fill_bytes + (gl.where(ok, VB, 0),)
        fill_live = fill_live + ((v < NV_S).to(gl.int32),)
    # Gluon keeps an allocation only if a Gluon op uses it: one store of zeros, then a barrier; from here on
    # the ring is addressed by hand
    ring.slice(0, NT).store(gl.zeros([NT], DT, layout=L1))
    gl.thread_barrier()
    wr0 = _smem_base(tid) + tid * VB  # the thread's first copy in slot 0
    # mbarriers after the slots: full[s] at + 8 s, empty[s] at + 8 (S + s); as the copies' layout (barw)
    # and, below, the tile's (barr)
    barw = _smem_base(tid) + S * SLOT
    if MBAR:
        for b in gl.static_range(2 * S):
            _mbar_init(barw + 8 * b, gl.full([NT], NT, gl.int32, layout=L1), (tid == 0).to(gl.int32))
        gl.thread_barrier()

    # The thread's vector in the tile and in a slot.
    ty = gl.arange(0, BY, layout=gl.SliceLayout(1, L2))
    tx = gl.arange(0, BXT, layout=gl.SliceLayout(0, L2))
    rows = y0 + ty
    cols = x0 + tx * CVE
    me = ((ty[:, None] + R) * PV + NCH) * VB + tx[None, :] * (CVE * DT.primitive_bitwidth // 8)  # bytes
    rd0 = _smem_base(me) + me
    if PARTIAL:  # bit j: component j inside [x_lo, x_hi)
        xbits = gl.zeros_like(cols)
        for j in gl.static_range(CVE):
            xbits += ((cols + j >= x_lo) & (cols + j < x_hi)).to(gl.int32) << j
        ok_out = (rows < y_hi).to(gl.int32)[:, None] * xbits[None, :]
    else:
        ok_out = ((rows < y_hi)[:, None] & (cols + CVE <= x_hi)[None, :]).to(gl.int32)
    barr = _smem_base(ok_out) + S * SLOT
    tile = rows[:, None] * so_y + cols[None, :]
    optr = out_ptr + ((q0 - R).to(gl.int64) * so_z + tile)
    zero = gl.zeros([BY, BXT], DT, layout=L2)
    if WAVE:
        # the thread's vector of the slot's p_prev / m part; p_prev, m and out share p's strides
        mt = ty[:, None] * BXT + tx[None, :]
        tl0 = _smem_base(mt) + NV_S * 16 + mt * 16
        ok_tile = gl.minimum(ok_out, 1)
        cens = ()
        for j in gl.static_range(R):
            cens = cens + (_zero_vec(zero, VEC),)
    else:
        tl0 = 0
        ok_tile = 0
        cens = ()

    # Prologue: planes q0 .. q0 + D - 1 in flight.
    for d in gl.static_range(D):
        if q0 + d < q_last:
            for i in gl.static_range(NFILL):
                _cp_async(wr0 + d * SLOT + i * VB * NT, srcs[i], fill_bytes[i], fill_live[i], VB)
            if WAVE:
                _wave_copy(pp_ptr, m_ptr, q0 + d - R, z_begin, z_end, su_z, tile, ok_tile, tl0 + d * SLOT, NT, WAVE)
            if MBAR:
                _mbar_arrive_copies(barw + 8 * d)
        if not MBAR:
            _commit(tid)
        nsrcs = ()
        for i in gl.static_range(NFILL):
            nsrcs = nsrcs + (srcs[i] + su_z,)
        srcs = nsrcs

    win = ()
    for j in gl.static_range(0, 2 * R + 1):
        win = win + (_zero_vec(zero, CVE),)

    # S planes a trip (the slots are then compile-time offsets), the rest one at a time.
    n_main = (q_last - q0) // S * S
    for qb in range(q0, q0 + n_main, S):
        t = (qb - q0) // S
        for i in gl.static_range(S):
            if MBAR:
                # plane k = t S + i reads slot i (its (t)-th use); plane k + D goes to slot (i + D) % S, whose
                # previous plane k + D - S was read in that slot's use number t + (i + D) // S - 1
                wave = (pp_ptr, m_ptr, tile, ok_tile, tl0 + i * SLOT, tl0 + ((i + D) % S) * SLOT, cens)
                win, srcs, optr, cens = _plane_mb(u_ptr, win, srcs, optr, wave, qb + i, q_last, z_begin, z_end,
                                            rd0 + i * SLOT,
                                            wr0 + ((i + D) % S) * SLOT, barr + 8 * i, barw + 8 * ((i + D) % S),
                                            barr + 8 * (S + i), barw + 8 * (S + (i + D) % S), t & 1,
                                            (t + (i + D) // S - 1) & 1, (t * S + i + D - S >= 0).to(gl.int32),
                                            fill_bytes, fill_live, ok_out, su_z, so_z, wc, wz, wy, wx, R, CVE, PITCH,
                                            DT, D, NFILL, NT, PF, WAVE, PARTIAL, VB)
            else:
                wave = (pp_ptr, m_ptr, tile, ok_tile, tl0 + i * SLOT, tl0 + ((i + D) % S) * SLOT, cens)
                win, srcs, optr, cens = _plane(u_ptr, win, srcs, optr, wave, qb + i, q_last, z_begin, z_end,
                                         rd0 + i * SLOT,
                                         wr0 + ((i + D) % S) * SLOT, fill_bytes, fill_live, ok_out, su_z, so_z, wc,
                                         wz, wy, wx, R, CVE, PITCH, DT, D, NFILL, NT, PF, WAVE, PARTIAL, PB,
                                         i % PB == 0, VB)
    for q in range(q0 + n_main, q_last):
        k = q - q0
        if MBAR:
            prev = k + D - S
            wave = (pp_ptr, m_ptr, tile, ok_tile, tl0 + (k % S) * SLOT, tl0 + ((k + D) % S) * SLOT, cens)
            win, srcs, optr, cens = _plane_mb(u_ptr, win, srcs, optr, wave, q, q_last, z_begin, z_end,
                                        rd0 + (k % S) * SLOT,
                                        wr0 + ((k + D) % S) * SLOT, barr + 8 * (k % S), barw + 8 * ((k + D) % S),
                                        barr + 8 * (S + k % S), barw + 8 * (S + (k + D) % S), (k // S) & 1,
                                        (gl.maximum(prev, 0) // S) & 1, (prev >= 0).to(gl.int32), fill_bytes, fill_live,
                                        ok_out, su_z, so_z, wc, wz, wy, wx, R, CVE, PITCH, DT, D, NFILL, NT, PF, WAVE, PARTIAL, VB)
        else:
            wave = (pp_ptr, m_ptr, tile, ok_tile, tl0 + (k % S) * SLOT, tl0 + ((k + D) % S) * SLOT, cens)
            win, srcs, optr, cens = _plane(u_ptr, win, srcs, optr, wave, q, q_last, z_begin, z_end,
                                     rd0 + (k % S) * SLOT,
                                     wr0 + ((k + D) % S) * SLOT, fill_bytes, fill_live, ok_out, su_z, so_z, wc, wz,
                                     wy, wx, R, CVE, PITCH, DT, D, NFILL, NT, PF, WAVE, PARTIAL, PB, True, VB)


_WEIGHTS_DOC = """The weights arrive as kernel parameters (the constant bank), not loaded into registers: the
    stencil's FMAs take them as operands (fp64 order 8, 16 x 32 tiles, 8 warps: 94-100 registers on the GPU
    against 122 with the weights loaded at b1d37c6; fp32 unchanged at 87). Two entries because the
    parameters' types differ.
    wc the centre, wzK / wyK / wxK the axes' K-th (K = 1..8: orders 2 to 16; only the first R are read; the wave
    step's kernel takes K = 1..4). nx and the strides
    arrive in vectors (of VEC elements); RING is the ring's size in elements, (D + 1) slots rounded up to a
    power of two (Gluon allocates only those). Grid: 1D, x tiles fastest, then y tiles, then z chunks of BZ
    planes."""


@gluon.jit
def laplacian_smem_kernel(
    u_ptr, out_ptr,
    wc: "fp32", wz1: "fp32", wz2: "fp32", wz3: "fp32", wz4: "fp32", wz5: "fp32", wz6: "fp32", wz7: "fp32", wz8: "fp32",
    wy1: "fp32", wy2: "fp32", wy3: "fp32", wy4: "fp32", wy5: "fp32", wy6: "fp32", wy7: "fp32", wy8: "fp32",
    wx1: "fp32", wx2: "fp32", wx3: "fp32", wx4: "fp32", wx5: "fp32", wx6: "fp32", wx7: "fp32", wx8: "fp32",
    nz, ny, nx_v, su_z_v, su_y_v, so_z_v, so_y_v,
    R: gl.constexpr, BY: gl.constexpr, BXV: gl.constexpr, BZ: gl.constexpr, VEC: gl.constexpr,
    D: gl.constexpr, NW: gl.constexpr, RING: gl.constexpr, S: gl.constexpr, MBAR: gl.constexpr,
    PF: gl.constexpr, CV: gl.constexpr = 0, PB: gl.constexpr = 1,
):
    """The cp.async-ring z-march of an fp32 grid. """
    _smem_march(u_ptr, out_ptr, None, None, wc, (wz1, wz2, wz3, wz4, wz5, wz6, wz7, wz8)[:R],
                (wy1, wy2, wy3, wy4, wy5, wy6, wy7, wy8)[:R], (wx1, wx2, wx3, wx4, wx5, wx6, wx7, wx8)[:R],
                nz, ny, nx_v, su_z_v, su_y_v, so_z_v, so_y_v, R, nz - R, R, ny - R, R,
                nx_v * VEC - R, R, BY, BXV, BZ, VEC, D, NW, RING, S, MBAR, PF, False, R % VEC != 0, CV, PB)


@gluon.jit
def laplacian_smem_kernel_f64(
    u_ptr, out_ptr,
    wc: "fp64", wz1: "fp64", wz2: "fp64", wz3: "fp64", wz4: "fp64", wz5: "fp64", wz6: "fp64", wz7: "fp64", wz8: "fp64",
    wy1: "fp64", wy2: "fp64", wy3: "fp64", wy4: "fp64", wy5: "fp64", wy6: "fp64", wy7: "fp64", wy8: "fp64",
    wx1: "fp64", wx2: "fp64", wx3: "fp64", wx4: "fp64", wx5: "fp64", wx6: "fp64", wx7: "fp64", wx8: "fp64",
    nz, ny, nx_v, su_z_v, su_y_v, so_z_v, so_y_v,
    R: gl.constexpr, BY: gl.constexpr, BXV: gl.constexpr, BZ: gl.constexpr, VEC: gl.constexpr,
    D: gl.constexpr, NW: gl.constexpr, RING: gl.constexpr, S: gl.constexpr, MBAR: gl.constexpr,
    PF: gl.constexpr, CV: gl.constexpr = 0, PB: gl.constexpr = 1,
):
    """The cp.async-ring z-march of an fp64 grid."""
    _smem_march(u_ptr, out_ptr, None, None, wc, (wz1, wz2, wz3, wz4, wz5, wz6, wz7, wz8)[:R],
                (wy1, wy2, wy3, wy4, wy5, wy6, wy7, wy8)[:R], (wx1, wx2, wx3, wx4, wx5, wx6, wx7, wx8)[:R],
                nz, ny, nx_v, su_z_v, su_y_v, so_z_v, so_y_v, R, nz - R, R, ny - R, R,
                nx_v * VEC - R, R, BY, BXV, BZ, VEC, D, NW, RING, S, MBAR, PF, False, R % VEC != 0, CV, PB)


@gluon.jit
def wave_smem_kernel(
    p_ptr, pp_ptr, m_ptr, out_ptr,
    wc: "fp32", wz1: "fp32", wz2: "fp32", wz3: "fp32", wz4: "fp32", wy1: "fp32", wy2: "fp32", wy3: "fp32",
    wy4: "fp32", wx1: "fp32", wx2: "fp32", wx3: "fp32", wx4: "fp32",
    nz, ny, nx_v, s_z_v, s_y_v, z_lo, z_hi, y_lo, y_hi, x_lo_v, x_hi_v,
    R: gl.constexpr, BY: gl.constexpr, BXV: gl.constexpr, BZ: gl.constexpr, VEC: gl.constexpr,
    D: gl.constexpr, NW: gl.constexpr, RING: gl.constexpr, S: gl.constexpr, MBAR: gl.constexpr,
    PF: gl.constexpr,
):
    """The wave solver's plain step p_next = 2 p - p_prev + m lap(p) (fp32) on the box [z_lo, z_hi) x [y_lo,
    y_hi) x [x_lo, x_hi) by the cp.async-ring march: ``wave_zwin_kernel``'s arithmetic (its explicit FMAs in
    its order: the same bits), the planes of p through shared memory. p_prev, m and out share p's strides;
    out may be p_prev (each point reads its p_prev before its own thread writes it). x bounds, nx and the
    strides in vectors."""
    _smem_march(p_ptr, out_ptr, pp_ptr, m_ptr, wc, (wz1, wz2, wz3, wz4)[:R], (wy1, wy2, wy3, wy4)[:R],
                (wx1, wx2, wx3, wx4)[:R], nz, ny, nx_v, s_z_v, s_y_v, s_z_v, s_y_v, z_lo, z_hi, y_lo, y_hi,
                x_lo_v * VEC, x_hi_v * VEC, R, BY, BXV, BZ, VEC, D, NW, RING, S, MBAR, PF, True, False)


laplacian_smem_kernel.__doc__ = "The cp.async-ring z-march of an fp32 grid. " + _WEIGHTS_DOC
laplacian_smem_kernel_f64.__doc__ = "The cp.async-ring z-march of an fp64 grid. " + _WEIGHTS_DOC
