"""sm90-only GEMM in Gluon (Triton's explicit-layout dialect): persistent and warp-specialised.

:func:`matmul_ws_kernel` computes ``C = A @ B`` for int8 (int32 out, exact), 3xTF32 (fp32 out,
fp32-accurate), tf32, and fp16/bf16, through host-built 2D TMA descriptors: 8- and 32-bit operands
K-major (``A`` (M, K), ``B`` as (N, K)), except that a tf32 MN-major A is read into registers
(``A_REGS``; the NN product as C^T = B^T A^T with ``TRANS_OUT``); 16-bit operands either way. One program per SM walks the output tiles in grouped order
(``GROUP_M`` tile rows at a time, as ``tilecraft.kernels.gemm._tile_coords``); a batch is stacked along the
output's rows (``STACK``: one launch; K-major operands are 2D descriptors over their batch-flattened views, MN-major
ones and the output rank-3 descriptors that clip each entry). Inside a program:

* a 1-warp producer partition (:func:`_producer`) fills a ring of ``STAGES`` shared-memory slots
  with A and B tiles by TMA; slot ``s`` has a ``ready`` mbarrier (the TMA completes it, counting
  bytes) and an ``empty`` one (the consumers arrive once the wgmmas reading it have retired);
* the default partition (:func:`_consumer`, ``num_warps`` = 4 or 8: one or two warpgroups sharing
  a ``BLOCK_M`` x ``BLOCK_N`` tile, 64 rows each) issues async ``warpgroup_mma`` on each slot and
  keeps the newest in flight (``warpgroup_mma_wait(1)``), releasing a slot as soon as the wgmmas
  that read it retire; then writes the tile through shared memory in ``EPI_N``-column chunks
  (two chunk buffers) and TMA stores that are left to finish under the next tile's main loop.

Measured variants kept as knobs (docs/gemm.md follow-ups 6 and 33): ``ROW_PERM`` (the tf32 register
operand's rows read in an order free of bank conflicts, 1, or in row pairs by 64-bit loads, 2: the
rule's) and ``FIXUP`` (split-K 2 joined inside the kernel through a per-tile flag).

``THREE_TF32``: the operands are the tf32 ``hi`` and ``lo = x - hi`` parts of fp32 matrices
(``tilecraft.kernels.gemm.tf32_split_kernel``; four descriptors) and each K step issues three tf32
wgmmas: ``hi*hi`` into one accumulator and ``hi*lo + lo*hi`` into another, both restarted from
zero every ``FLUSH`` K steps and then added to the fp32 result in registers (IEEE round to
nearest). The tensor cores do not round to nearest when they accumulate: a running accumulator
over the whole of K drifts with K (H200, K = 4096: 2.9e-5 against float64; cuBLAS fp32 5.7e-7),
so the chain is kept short. Non-finite small terms are dropped at the flush (an inf input makes
``inf * lo`` of either sign, or NaN where lo is 0); the ``hi*hi`` term carries inf and NaN inputs.

The Triton interpreter cannot run Gluon: this module is compiled for sm90 in CI (PTX checked for
wgmma, TMA and setmaxnreg) and checked against float64 on the GPU. ``tilecraft.ops.gemm``
dispatches here only on sm90 CUDA tensors, for the cases measured faster (see docs/gemm.md).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from tilecraft.kernels.gemm import _activation
from tilecraft.kernels.barriers import slot_release, slot_wait_free
from tilecraft.kernels.cluster import check_cluster, cluster_barrier, fence_mbarrier_init, multicast_load_2d, remote_arrive
from tilecraft.kernels.pdl import pdl_start_gluon, pdl_trigger_gluon

#: ``NAMED_SLOTS``: ring slot s is named barrier SLOT_BAR + s (Triton's warp specialisation uses ids 0-3)
SLOT_BAR: gl.constexpr = gl.constexpr(4)
#: ``CLUSTER_M`` 2: the B half-tile descriptor travels in the ``a_lo_desc`` slot, kernel parameters 10-14
#: (each descriptor argument is five: the CUtensorMap, two extents, two strides); the multicast copy names it
B_HALF_PARAM: gl.constexpr = gl.constexpr("matmul_ws_kernel_param_10")


@gluon.jit
def _tile_mn(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped rasterisation (GROUP_M tile rows walked down a column of tiles, then right)."""
    num_in_group = GROUP_M * num_pid_n
    group = tile // num_in_group
    first_m = group * GROUP_M
    group_rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((tile % num_in_group) % group_rows)
    pid_n = (tile % num_in_group) // group_rows
    return pid_m, pid_n


@gluon.jit
def _prefetch_l2(ptrs):
    """``prefetch.global.L2`` of every address in ``ptrs`` (a dummy result: inline asm must return one)."""
    return gl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _prefetch_epilogue(epi, off_m, off_n, M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_C: gl.constexpr,
                       HAS_BIAS: gl.constexpr, BIAS_ROWS: gl.constexpr):
    """In the producer warp, at the start of a work unit: the L2 lines of the C tile and of the
    bias slice the epilogue will read, prefetched (``prefetch.global.L2``) so that its loads, one
    chunk after another at the end of the tile, hit L2. C is walked along its unit-stride
    dimension in 128-byte steps (not at all when neither stride is 1); addresses past M or N are
    replaced by C's first element."""
    c_ptr, stride_cr, stride_cc, bias_ptr, alpha_hi, alpha_lo, beta_hi, beta_lo, stride_cb, c_rows, batch_len = epi
    if HAS_C:
        STEP: gl.constexpr = 128 * 8 // c_ptr.dtype.element_ty.primitive_bitwidth  # elements per 128 bytes
        # (32 x up to 2 lines of 128 bytes) per step: at most 2 addresses per lane (the
        # producer warp has 40 registers)
        NC: gl.constexpr = max(BLOCK_N // STEP, 1)
        NR: gl.constexpr = max(BLOCK_M // STEP, 1)
        if stride_cc == 1:
            LC: gl.constexpr = gl.BlockedLayout([1, min(NC, 2)], [32, 1], [1, 1], [1, 0])
            for r0 in range(0, BLOCK_M, 32):
                for j0 in range(0, NC, 2):
                    rows = off_m + r0 + gl.arange(0, 32, gl.SliceLayout(1, LC))
                    cols = off_n + (j0 + gl.arange(0, min(NC, 2), gl.SliceLayout(0, LC))) * STEP
                    ok = (rows < M)[:, None] & (cols < N)[None, :]
                    _prefetch_l2(gl.where(ok, c_ptr + rows[:, None].to(gl.int64) * stride_cr + cols[None, :], c_ptr))
        elif stride_cr == 1:
            LR: gl.constexpr = gl.BlockedLayout([min(NR, 2), 1], [1, 32], [1, 1], [0, 1])
            for c0 in range(0, BLOCK_N, 32):
                for i0 in range(0, NR, 2):
                    rows = off_m + (i0 + gl.arange(0, min(NR, 2), gl.SliceLayout(1, LR))) * STEP
                    cols = off_n + c0 + gl.arange(0, 32, gl.SliceLayout(0, LR))
                    ok = (rows < M)[:, None] & (cols < N)[None, :]
                    _prefetch_l2(gl.where(ok, c_ptr + rows[:, None] + cols[None, :].to(gl.int64) * stride_cc, c_ptr))
    if HAS_BIAS:
        BSTEP: gl.constexpr = 128 * 8 // bias_ptr.dtype.element_ty.primitive_bitwidth
        LB: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        i = gl.arange(0, 32, LB) * BSTEP
        if BIAS_ROWS:
            ok = (i < BLOCK_M) & (off_m + i < M)
            _prefetch_l2(gl.where(ok, bias_ptr + off_m + i, bias_ptr))
        else:
            ok = (i < BLOCK_N) & (off_n + i < N)
            _prefetch_l2(gl.where(ok, bias_ptr + off_n + i, bias_ptr))


@gluon.jit
def _cluster_member(ready):
    """The three warps that would otherwise pad the one-warp producer to a warpgroup, as two partitions (one warp
    and two: a partition's warps must be a power of two): with a cluster, every warp must reach both cluster
    barriers (start and exit), and Gluon's padding warps never would. Here they meet the cluster at both and sleep
    in between, leaving the producer a single warp (no partition barriers in its loop)."""
    cluster_barrier()
    cluster_barrier()


@gluon.constexpr_function
def _slot_layout(layout):
    """The shared-memory layout of a ring slot (2D) for a descriptor's layout: itself, or for a rank-3
    descriptor (a stacked batch read through (batch, rows, columns) boxes of one entry) the same swizzle in 2D:
    a (1, rows, columns) box is laid out as its (rows, columns) tile."""
    if layout.rank == 2:
        return layout
    return gl.NVMMASharedLayout(swizzle_byte_width=layout.swizzle_byte_width, element_bitwidth=layout.element_bitwidth,
                                rank=2, transposed=layout.transposed, fp4_padded=layout.fp4_padded,
                                cga_layout=layout.cga_layout)


@gluon.jit
def _tma_load(desc, entry, row0, row, col, bar, slot):
    """TMA copy of the tile at (``row``, ``col``) of a batch entry into ``slot``: through a rank-3 descriptor at
    (``entry``, ``row``, ``col``), whose box stops at the entry's own rows (the out-of-bounds rows are zeros), or
    through a 2D one over the batch-flattened operand at row ``row0 + row`` (``row0``: the entry's first row)."""
    if len(desc.block_type.shape) == 3:
        tma.async_copy_global_to_shared(desc, [entry, row, col], bar, slot.reshape(desc.block_type.shape))
    else:
        tma.async_copy_global_to_shared(desc, [row0 + row, col], bar, slot)


@gluon.jit
def _producer(a_desc, b_desc, a_lo_desc, b_lo_desc, a_bufs, b_bufs, a_lo_bufs, b_lo_bufs, ready, empty,
              M, N, K, k_split_steps, epi, GROUP_M: gl.constexpr, THREE_TF32: gl.constexpr,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, A_KMAJOR: gl.constexpr,
              B_KMAJOR: gl.constexpr, SPLIT_K: gl.constexpr, PREFETCH_C: gl.constexpr, PREFETCH_BIAS: gl.constexpr,
              BIAS_ROWS: gl.constexpr, PDL: gl.constexpr = 0, BLOCK_N2: gl.constexpr = 0,
              SLOT_THREADS: gl.constexpr = 0, CLUSTER_M: gl.constexpr = 1, smem_b=0, smem_ready=0,
              batch_len=0, a_brows=0, b_brows=0, STACK: gl.constexpr = 0):
    """One warp: TMA loads of every (work unit, K step) of this program, in the consumers' order.
    An MN-major operand (16-bit only) is loaded as its (BLOCK_K, rows) tile. ``PREFETCH_C`` /
    ``PREFETCH_BIAS``: first, the unit's C tile / bias slice prefetched into L2
    (:func:`_prefetch_epilogue`). ``PDL`` 2: the next kernel may launch once the last load is issued.
    ``BLOCK_N2``: each tile is BLOCK_N + BLOCK_N2 columns wide, its last BLOCK_N2 columns of B loaded
    through ``b_lo_desc`` into ``b_lo_bufs`` (see :func:`matmul_ws_kernel`). ``CLUSTER_M`` 2: this CTA's
    half of the B tile, multicast into both CTAs of the cluster (the other half comes from the partner).
    ``STACK`` 1 / 2: a batch of products stacked along the kernel's M / N (``batch_len`` rows or columns
    each, a whole number of tiles): entry ``i`` of a tile at ``off_m`` (``off_n``) is ``off // batch_len``,
    and its A and B tiles are read ``i * a_brows`` / ``i * b_brows`` rows down their flattened
    descriptors (0: an operand broadcast over the batch), at the tile's offsets within its entry."""
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N2
    if THREE_TF32:
        nbytes: gl.constexpr = 2 * (a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    elif BLOCK_N2 > 0:
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes + b_lo_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, TILE_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    rank = gl.program_id(0) % CLUSTER_M
    num_pid_mc = gl.cdiv(num_pid_m, CLUSTER_M)
    B_BYTES: gl.constexpr = b_desc.block_type.nbytes
    if CLUSTER_M > 1:  # both CTAs' barriers initialised before either copies into the other (every warp)
        cluster_barrier()
    it = 0
    for unit in range(gl.program_id(0) // CLUSTER_M, num_pid_mc * num_pid_n * SPLIT_K, gl.num_programs(0) // CLUSTER_M):
        pid_mc, pid_n = _tile_mn(unit // SPLIT_K, num_pid_mc, num_pid_n, GROUP_M)
        pid_m = pid_mc * CLUSTER_M + rank
        off_m = pid_m * BLOCK_M
        off_n = pid_n * TILE_N
        if PREFETCH_C or PREFETCH_BIAS:
            _prefetch_epilogue(epi, off_m, off_n, M, N, BLOCK_M, TILE_N, PREFETCH_C, PREFETCH_BIAS, BIAS_ROWS)
        # the batch entry's rows in the flattened operands, and the tile's offsets within the entry
        if STACK == 1:
            entry = off_m // batch_len
            off_m = off_m - entry * batch_len
        elif STACK == 2:
            entry = off_n // batch_len
            off_n = off_n - entry * batch_len
        else:
            entry = 0
        a_row = entry * a_brows
        b_row = entry * b_brows
        k_lo = (unit % SPLIT_K) * k_split_steps
        for ki in range(k_lo, gl.minimum(k_tiles, k_lo + k_split_steps)):
            s = it % STAGES
            slot_wait_free(empty, s, SLOT_BAR + s, it, SLOT_THREADS)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            off_k = ki * BLOCK_K
            if A_KMAJOR:
                _tma_load(a_desc, entry, a_row, off_m, off_k, bar, a_bufs.index(s))
            else:
                _tma_load(a_desc, entry, a_row, off_k, off_m, bar, a_bufs.index(s))
            if CLUSTER_M > 1:  # this CTA's half of the B tile, into both CTAs, in boxes of 128-byte rows
                half = off_n + rank * (BLOCK_N // 2)
                dst = smem_b + s * B_BYTES + rank * (B_BYTES // 2)
                if B_KMAJOR:  # rows of BLOCK_K (128 bytes: the host checks), the half one box
                    multicast_load_2d(B_HALF_PARAM, dst, off_k, b_row + half, smem_ready + s * 8, 3)
                else:  # the tile is column blocks of 128 bytes (BOX_N columns), one after another
                    BOX_N: gl.constexpr = 128 // (b_desc.dtype.primitive_bitwidth // 8)
                    for j in gl.static_range(BLOCK_N // 2 // BOX_N):
                        multicast_load_2d(B_HALF_PARAM, dst + j * (BLOCK_K * BOX_N * (b_desc.dtype.primitive_bitwidth // 8)),
                                          half + j * BOX_N, b_row + off_k, smem_ready + s * 8, 3)
            elif B_KMAJOR:
                _tma_load(b_desc, entry, b_row, off_n, off_k, bar, b_bufs.index(s))
            else:
                _tma_load(b_desc, entry, b_row, off_k, off_n, bar, b_bufs.index(s))
            if BLOCK_N2 > 0:
                if B_KMAJOR:
                    _tma_load(b_lo_desc, entry, b_row, off_n + BLOCK_N, off_k, bar, b_lo_bufs.index(s))
                else:
                    _tma_load(b_lo_desc, entry, b_row, off_k, off_n + BLOCK_N, bar, b_lo_bufs.index(s))
            if THREE_TF32:
                tma.async_copy_global_to_shared(a_lo_desc, [off_m, off_k], bar, a_lo_bufs.index(s))
                tma.async_copy_global_to_shared(b_lo_desc, [off_n, off_k], bar, b_lo_bufs.index(s))
            it += 1
    pdl_trigger_gluon(PDL)
    if CLUSTER_M > 1:  # the exit meeting (the consumers' half of it is at their end)
        cluster_barrier()


@gluon.jit
def _epilogue(x, off_m, off_n, M, N, epi, EPI_INT: gl.constexpr, HAS_ALPHA: gl.constexpr, HAS_C: gl.constexpr,
              HAS_BIAS: gl.constexpr, BIAS_ROWS: gl.constexpr, ACTIVATION: gl.constexpr, STACK: gl.constexpr = 0):
    """``act(alpha * x + beta * C + bias)`` on one chunk of the tile (rows ``off_m``.., columns
    ``off_n``.. of the kernel's (M, N) output), in fp32 (int32 with ``EPI_INT``), in the chunk's
    own register layout: C and bias are read with pointer loads (any strides), masked at M and N.
    ``epi`` = (c_ptr, C's stride along the kernel's rows, along its columns, bias_ptr, alpha_hi,
    alpha_lo, beta_hi, beta_lo); alpha and beta come as two fp32 halves (as the Triton kernels
    take them). ``BIAS_ROWS``: the bias runs along the kernel's rows (the C^T tile of
    ``TRANS_OUT``, whose rows are the output's columns). ``STACK`` 1 / 2 (a batch stacked along the kernel's rows /
    columns, ``batch_len`` each): C is read at entry ``off // batch_len``'s ``stride_cb`` (0: one C for every entry)
    and the tile's rows (columns) within the entry, masked at the entry's ``c_rows``."""
    EPI: gl.constexpr = gl.int32 if EPI_INT else gl.float32
    L: gl.constexpr = x.type.layout
    c_ptr, stride_cr, stride_cc, bias_ptr, alpha_hi, alpha_lo, beta_hi, beta_lo, stride_cb, c_rows, batch_len = epi
    rows = off_m + gl.arange(0, x.shape[0], layout=gl.SliceLayout(1, L))
    cols = off_n + gl.arange(0, x.shape[1], layout=gl.SliceLayout(0, L))
    mask_r = rows < M
    if BIAS_ROWS:
        mask_c = cols < N
    else:
        # N is even here (the output rows the TMA stores are multiples of 16 bytes), so the pair
        # of columns a thread holds is in or out together: with the mask constant over the pair,
        # C's and the bias's loads can be 2 elements wide (N itself is not specialised: a plain
        # cols < N mask compiled to 2-byte loads)
        mask_c = (cols // 2) * 2 < N
    x = x.to(EPI)
    if HAS_ALPHA:
        x = x * (alpha_hi.to(EPI) + alpha_lo.to(EPI))
    if HAS_C:
        c_base = c_ptr
        c_rows_ = rows
        c_cols = cols
        c_mask_r = mask_r
        c_mask_c = mask_c
        if STACK == 1:  # the tile's rows are one entry's
            entry = off_m // batch_len
            c_base = c_ptr + entry.to(gl.int64) * stride_cb
            c_rows_ = rows - entry * batch_len
            c_mask_r = c_rows_ < c_rows
        elif STACK == 2:  # the tile's columns are one entry's (the C^T tile: the output's rows)
            entry = off_n // batch_len
            c_base = c_ptr + entry.to(gl.int64) * stride_cb
            c_cols = cols - entry * batch_len
            c_mask_c = c_cols < c_rows
        c_ptrs = c_base + c_rows_[:, None].to(gl.int64) * stride_cr + c_cols[None, :].to(gl.int64) * stride_cc
        c = gl.load(c_ptrs, mask=c_mask_r[:, None] & c_mask_c[None, :], other=0).to(EPI)
        x = x + (beta_hi.to(EPI) + beta_lo.to(EPI)) * c
    if HAS_BIAS:
        if BIAS_ROWS:
            x = x + gl.load(bias_ptr + rows, mask=mask_r, other=0).to(EPI)[:, None]
        else:
            x = x + gl.load(bias_ptr + cols, mask=mask_c, other=0).to(EPI)[None, :]
    return _activation(x, ACTIVATION)  # the Triton kernels' own (tilecraft.kernels.gemm)


@gluon.jit
def _store_tile(acc, c_desc, c_bufs, off_m, off_n, chunk0, EPI_N: gl.constexpr, TRANS_OUT: gl.constexpr,
                M, N, epi, EPI_INT: gl.constexpr, HAS_ALPHA: gl.constexpr, HAS_C: gl.constexpr,
                HAS_BIAS: gl.constexpr, ACTIVATION: gl.constexpr, batch_len=0, STACK: gl.constexpr = 0):
    """acc (BLOCK_M x BLOCK_N) to global through the shared-memory chunk buffers, EPI_N columns at
    a time; each chunk buffer is reused once the TMA store issued from it two chunks ago is done.
    ``chunk0`` counts the chunks this program stored before (the buffer parity). ``TRANS_OUT``:
    acc is a tile of C^T, each chunk is stored transposed (EPI_N rows of C at row ``off_n``).
    With any of ``HAS_ALPHA``, ``HAS_C``, ``HAS_BIAS``, ``ACTIVATION`` each chunk goes through
    :func:`_epilogue` first (before the wait for its buffer, so C's loads overlap that store).
    ``STACK`` 1 / 2: the output is the rank-3 (batch, rows, columns) descriptor and the stacked offset
    (``off_m``, or ``off_n`` with ``TRANS_OUT``) is entry ``off // batch_len``'s rows from ``off % batch_len``:
    the TMA store clips each entry's rows, so an entry's last tile may run past them."""
    BLOCK_N: gl.constexpr = acc.shape[1]
    NBUF: gl.constexpr = c_bufs.type.shape[0]
    if EPI_N == BLOCK_N:
        if HAS_ALPHA or HAS_C or HAS_BIAS or ACTIVATION != 0:
            acc = _epilogue(acc, off_m, off_n, M, N, epi, EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS, TRANS_OUT, ACTIVATION,
                            STACK)
        tma.store_wait(NBUF - 1)
        buf = c_bufs.index(chunk0 % NBUF)
        if TRANS_OUT:
            row, col = off_n, off_m
            tile = acc.permute((1, 0)).to(c_desc.dtype)
        else:
            row, col = off_m, off_n
            tile = acc.to(c_desc.dtype)
        if STACK == 0:
            buf.store(tile)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [row, col], buf)
        else:  # buf is (1, rows, columns)
            buf.reshape([tile.shape[0], tile.shape[1]]).store(tile)
            fence_async_shared()
            entry = row // batch_len
            tma.async_copy_shared_to_global(c_desc, [entry, row - entry * batch_len, col], buf)
    else:
        # columns [0, BLOCK_N/2) and [BLOCK_N/2, BLOCK_N): the top bit of the column index
        # lives in each thread's registers in the wgmma layout, so the split moves no data
        lo, hi = acc.reshape([acc.shape[0], 2, BLOCK_N // 2]).permute(0, 2, 1).split()
        _store_tile(lo, c_desc, c_bufs, off_m, off_n, chunk0, EPI_N, TRANS_OUT, M, N, epi, EPI_INT, HAS_ALPHA,
                    HAS_C, HAS_BIAS, ACTIVATION, batch_len, STACK)
        _store_tile(hi, c_desc, c_bufs, off_m, off_n + BLOCK_N // 2, chunk0 + (BLOCK_N // 2) // EPI_N, EPI_N,
                    TRANS_OUT, M, N, epi, EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS, ACTIVATION, batch_len, STACK)


#: ``ROW_PERM`` modes: which bit of the physical row (within 32 rows) each bit of the logical row
#: names. 1: bits 2 and 4 swapped (LDS.32 free of bank conflicts); 2: logical row r + 8 is
#: physical row r + 1 (the register pair a thread holds for rows r, r + 8 is one LDS.64), the
#: pairs spread over the 128-byte swizzle's chunks so the LDS.64 take two wavefronts, none wasted
_ROW_BITS = {1: (0, 1, 4, 3, 2), 2: (1, 4, 2, 0, 3)}


@gluon.constexpr_function
def _row_mapped(ll, mode):
    """The load layout of an MN-major (K, M) A tile whose registers hold, for logical row r, the
    physical row ``_ROW_BITS[mode]`` names: ``ll`` is the wgmma register layout of A over (M, K)
    (bases [row, col], each one bit), the result is over (K, M) in shared-memory order."""
    f = _ROW_BITS[int(mode)]
    bit = {1 << i: 1 << f[i] for i in range(5)}

    def base(v):
        return [v[1], bit.get(v[0], v[0])]
    return gl.DistributedLinearLayout([base(v) for v in ll.reg_bases], [base(v) for v in ll.lane_bases],
                                      [base(v) for v in ll.warp_bases], [base(v) for v in ll.block_bases],
                                      [ll.shape[1], ll.shape[0]])


@gluon.constexpr_function
def _row_axes(mode, inverse):
    """The permutation of the five row-bit axes (high bit first) that relabels physical rows as
    logical ones (``inverse``: logical as physical)."""
    f = _ROW_BITS[int(mode)]
    if inverse:
        f = tuple(f.index(j) for j in range(5))
    return [4 - f[4 - a] for a in range(5)]


@gluon.jit
def _relabel_rows(x, AXIS: gl.constexpr, MODE: gl.constexpr, INVERSE: gl.constexpr):
    """x with the indices along AXIS (a multiple of 32 long) relabelled by the bit map of ``MODE``
    (``INVERSE``: its inverse). Only the layout changes: no data moves."""
    d: gl.constexpr = _row_axes(MODE, INVERSE)
    if AXIS == 0:
        y = x.reshape([x.shape[0] // 32, 2, 2, 2, 2, 2, x.shape[1]])
        y = y.permute(0, 1 + d[0], 1 + d[1], 1 + d[2], 1 + d[3], 1 + d[4], 6).reshape(x.shape)
    else:
        y = x.reshape([x.shape[0], x.shape[1] // 32, 2, 2, 2, 2, 2])
        y = y.permute(0, 1, 2 + d[0], 2 + d[1], 2 + d[2], 2 + d[3], 2 + d[4]).reshape(x.shape)
    return y


@gluon.jit
def _regs_step(a_bufs, b_bufs, ready, empty, acc, it, release_prev, a_regs: gl.constexpr, ROW_PERM: gl.constexpr):
    """One K step with A (MN-major in shared memory) read into registers, B K-major: the wgmma
    is left in flight and the previous step's retired, then its slot released (``release_prev``).
    ``ROW_PERM`` (1 or 2, :data:`_ROW_BITS`): A's rows are read in a relabelled order (the
    accumulator's rows come out in that order). 1: with the 128-byte swizzle the LDS.32 are free
    of bank conflicts (a warp's 32 lanes cover 4 K columns x 8 rows; in tile order the rows 0-7
    fold onto 16 banks, with rows 0-3 and 16-19 onto all 32). 2: half as many loads, LDS.64."""
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    s = it % STAGES
    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
    if ROW_PERM:
        a_load: gl.constexpr = _row_mapped(gl.to_linear_layout(a_regs, [a_bufs.type.shape[2], a_bufs.type.shape[1]]),
                                           ROW_PERM)
        x = a_bufs.index(s).load(a_load)
        a = gl.convert_layout(_relabel_rows(x, 1, ROW_PERM, False).permute((1, 0)), a_regs, assert_trivial=True)
    else:
        a = a_bufs.index(s).permute((1, 0)).load(a_regs)
    acc = warpgroup_mma(a, b_bufs.index(s).permute((1, 0)), acc, is_async=True)
    acc, a = warpgroup_mma_wait(1, deps=(acc, a))
    mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=release_prev)
    return acc


@gluon.jit
def _operand(bufs, s, TRANSPOSE: gl.constexpr):
    """Slot ``s`` of a shared-memory ring as a wgmma operand: the tile as stored, or its transposed
    view (A stored (BLOCK_K, BLOCK_M), B stored (BLOCK_N, BLOCK_K))."""
    op = bufs.index(s)
    if TRANSPOSE:
        op = op.permute((1, 0))
    return op


@gluon.jit
def _consumer(a_bufs, b_bufs, a_lo_bufs, b_lo_bufs, ready, empty, c_desc, c_bufs, M, N, K, k_split_steps, ws_ptr,
              flag_ptr, epi,
              GROUP_M: gl.constexpr, THREE_TF32: gl.constexpr, FLUSH: gl.constexpr,
              EPI_N: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
              A_KMAJOR: gl.constexpr, B_KMAJOR: gl.constexpr, SPLIT_K: gl.constexpr, A_REGS: gl.constexpr,
              TRANS_OUT: gl.constexpr, ROW_PERM: gl.constexpr, FIXUP: gl.constexpr, EPI_INT: gl.constexpr,
              HAS_ALPHA: gl.constexpr, HAS_C: gl.constexpr, HAS_BIAS: gl.constexpr, ACTIVATION: gl.constexpr,
              BLOCK_N2: gl.constexpr = 0, SLOT_THREADS: gl.constexpr = 0, CLUSTER_M: gl.constexpr = 1,
              smem_empty=0, batch_len=0, STACK: gl.constexpr = 0):
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N2
    # wgmma K per instruction (tf32: 8, int8: 32); N per instruction at most 128 for int8 (what
    # Triton 3.6 lowers: m64n128k32), 256 otherwise
    BITS: gl.constexpr = a_bufs.type.element_ty.primitive_bitwidth
    INSTR_N: gl.constexpr = min(BLOCK_N, 128) if BITS == 8 else BLOCK_N
    ACC: gl.constexpr = gl.int32 if BITS == 8 else gl.float32  # int8 (exact) or fp32
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                     instr_shape=[16, INSTR_N, 256 // BITS])
    # A_REGS: the (MN-major) A tile is read into registers, wgmma's A operand from registers
    a_regs: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout, k_width=32 // BITS)
    # BLOCK_N2: the tile's last BLOCK_N2 columns in a second accumulator (its own wgmma per K step)
    layout2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                      instr_shape=[16, max(BLOCK_N2, 8), 256 // BITS])
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, TILE_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    rank = gl.program_id(0) % CLUSTER_M
    num_pid_mc = gl.cdiv(num_pid_m, CLUSTER_M)
    if CLUSTER_M > 1:  # both CTAs' barriers initialised before either arrives on the other's (every warp)
        cluster_barrier()
    it = 0
    chunks = 0
    for unit in range(gl.program_id(0) // CLUSTER_M, num_pid_mc * num_pid_n * SPLIT_K, gl.num_programs(0) // CLUSTER_M):
        pid_mc, pid_n = _tile_mn(unit // SPLIT_K, num_pid_mc, num_pid_n, GROUP_M)
        pid_m = pid_mc * CLUSTER_M + rank
        k_lo = (unit % SPLIT_K) * k_split_steps
        k_steps = gl.minimum(k_tiles - k_lo, k_split_steps)  # >= 1: the launcher sizes the splits
        acc = gl.zeros([BLOCK_M, BLOCK_N], ACC, layout)
        if THREE_TF32:
            big = gl.zeros([BLOCK_M, BLOCK_N], ACC, layout)
            small = gl.zeros([BLOCK_M, BLOCK_N], ACC, layout)
            for ki in range(k_steps):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                a_hi = a_bufs.index(s)
                a_lo = a_lo_bufs.index(s)
                b_hi = b_bufs.index(s).permute((1, 0))
                b_lo = b_lo_bufs.index(s).permute((1, 0))
                chain = ki % FLUSH != 0  # False: restart both step sums from zero
                big = warpgroup_mma(a_hi, b_hi, big, use_acc=chain, is_async=True)
                small = warpgroup_mma(a_hi, b_lo, small, use_acc=chain, is_async=True)
                small = warpgroup_mma(a_lo, b_hi, small, is_async=True)
                last = (ki % FLUSH == FLUSH - 1) | (ki == k_steps - 1)
                # the previous step's three wgmmas have retired (its slot is free); at a flush
                # this step's too, and the step sums join the result
                big, small = warpgroup_mma_wait(3, deps=(big, small))
                if last:
                    big, small = warpgroup_mma_wait(0, deps=(big, small))
                    acc += big + gl.where(gl.abs(small) < float("inf"), small, 0.0)
                # a step's slot is released at its own flush (wait(0)) or, otherwise, one step
                # later, when wait(3) has retired its three wgmmas
                prev_open = (ki > 0) & ((ki - 1) % FLUSH != FLUSH - 1)
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=prev_open)
                mbarrier.arrive(empty.index(s), pred=last)
                it += 1
        elif A_REGS:
            # wgmma reads A's registers while it runs: a K step's A registers may be loaded again
            # only once its wgmma has retired. In PTX one loop body reuses its registers every
            # iteration, so with one A per iteration the next step's loads overwrite the A of the
            # wgmma still in flight (H200: relative error 0.2-0.7). Two steps per iteration, each
            # with its own A, the loads of one after the wait that retires the other's wgmma.
            for kp in range(k_steps // 2):
                acc = _regs_step(a_bufs, b_bufs, ready, empty, acc, it, kp > 0, a_regs, ROW_PERM)
                acc = _regs_step(a_bufs, b_bufs, ready, empty, acc, it + 1, True, a_regs, ROW_PERM)
                it += 2
            if k_steps % 2 == 1:
                acc = _regs_step(a_bufs, b_bufs, ready, empty, acc, it, k_steps > 1, a_regs, ROW_PERM)
                it += 1
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES))
            if ROW_PERM:  # back to the tile's row order
                acc = _relabel_rows(acc, 0, ROW_PERM, True)
        else:
            if BLOCK_N2 > 0:  # the tile's last BLOCK_N2 columns: a second accumulator, its own wgmma
                acc2 = gl.zeros([BLOCK_M, BLOCK_N2], ACC, layout2)
            for ki in range(k_steps):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                a_op = _operand(a_bufs, s, not A_KMAJOR)
                acc = warpgroup_mma(a_op, _operand(b_bufs, s, B_KMAJOR), acc, is_async=True)
                # this step's wgmmas left in flight, the previous step's retired: its slot is free
                if BLOCK_N2 > 0:
                    acc2 = warpgroup_mma(a_op, _operand(b_lo_bufs, s, B_KMAJOR), acc2, is_async=True)
                    acc, acc2 = warpgroup_mma_wait(2, deps=(acc, acc2))
                else:
                    acc = warpgroup_mma_wait(1, deps=(acc,))
                prev = (it + STAGES - 1) % STAGES  # the previous step's slot (its wgmmas retired)
                slot_release(empty, prev, SLOT_BAR + prev, ki > 0, SLOT_THREADS)
                if CLUSTER_M > 1:  # the partner's producer writes this slot of ours too
                    remote_arrive(smem_empty + prev * 8, rank ^ 1, (ki > 0).to(gl.int32))
                it += 1
            if BLOCK_N2 > 0:
                acc, acc2 = warpgroup_mma_wait(0, deps=(acc, acc2))
            else:
                acc = warpgroup_mma_wait(0, deps=(acc,))
            last = (it + STAGES - 1) % STAGES
            slot_release(empty, last, SLOT_BAR + last, True, SLOT_THREADS)
            if CLUSTER_M > 1:
                remote_arrive(smem_empty + last * 8, rank ^ 1, 1)
        if FIXUP:
            # SPLIT_K = 2, one unit per program: the second K half hands its partial tile over
            # through global memory, the first adds it and stores the tile
            tile = unit // 2
            rows = gl.arange(0, BLOCK_M, gl.SliceLayout(1, layout))
            cols = gl.arange(0, BLOCK_N, gl.SliceLayout(0, layout))
            part = ws_ptr + tile * (BLOCK_M * BLOCK_N) + rows[:, None] * BLOCK_N + cols[None, :]
            NT: gl.constexpr = 32 * gl.num_warps()
            zero = gl.zeros([NT], gl.int32, gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))
            flags = flag_ptr + tile + zero
            if unit % 2 == 1:
                gl.store(part, acc)
                gl.atomic_add(flags, zero + 1, sem="release", scope="gpu")  # each thread: its own stores
            else:
                seen = gl.min(gl.atomic_add(flags, zero, sem="acquire", scope="gpu"), 0)
                while seen < NT:
                    seen = gl.min(gl.atomic_add(flags, zero, sem="acquire", scope="gpu"), 0)
                acc += gl.load(part)
                # the flag back to 0 once every thread here has seen it complete (the last to count)
                done = gl.atomic_add(flags, zero + 1, sem="relaxed", scope="gpu")
                gl.atomic_xchg(flags, zero, mask=done == 2 * NT - 1, sem="relaxed", scope="gpu")
                _store_tile(acc, c_desc, c_bufs, pid_m * BLOCK_M, pid_n * BLOCK_N, chunks, EPI_N, TRANS_OUT, M, N, epi,
                            EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS, ACTIVATION)
                chunks += BLOCK_N // EPI_N
        else:
            # split-K: unit k's partial tile goes to rows [k * Mp, (k + 1) * Mp) of the workspace, Mp
            # = M rounded up to whole tiles (a tile's rows past M land in its own split's padding);
            # the launcher turns the epilogue off there (the reduce pass runs it)
            _store_tile(acc, c_desc, c_bufs, (unit % SPLIT_K) * (num_pid_m * BLOCK_M) + pid_m * BLOCK_M,
                        pid_n * TILE_N, chunks, EPI_N, TRANS_OUT, M, N, epi, EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS,
                        ACTIVATION, batch_len, STACK)
            if BLOCK_N2 > 0:  # (SPLIT_K is 1 here)
                _store_tile(acc2, c_desc, c_bufs, pid_m * BLOCK_M, pid_n * TILE_N + BLOCK_N, chunks + BLOCK_N // EPI_N,
                            EPI_N, TRANS_OUT, M, N, epi, EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS, ACTIVATION, batch_len,
                            STACK)
            chunks += TILE_N // EPI_N
    tma.store_wait(0)
    if CLUSTER_M > 1:  # stay resident until the partner has made its last arrival on our barriers
        cluster_barrier()


# M, N, K unspecialised: one compiled kernel serves every shape of a configuration (TMA bounds
# the tiles; divisibility by 16 buys nothing here), and the grid size is read at run time
@gluon.jit(do_not_specialize=["M", "N", "K", "k_split_steps", "alpha_hi", "alpha_lo", "beta_hi", "beta_lo",
                               "smem_b", "smem_ready", "smem_empty", "batch_len", "a_brows", "b_brows", "stride_cb",
                               "c_rows"])
def matmul_ws_kernel(a_desc, b_desc, a_lo_desc, b_lo_desc, c_desc, M, N, K, k_split_steps,
                     c_ptr, bias_ptr, stride_cr, stride_cc, alpha_hi, alpha_lo, beta_hi, beta_lo, ws_ptr, flag_ptr,
                     batch_len, a_brows, b_brows, stride_cb, c_rows, smem_b, smem_ready, smem_empty,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, THREE_TF32: gl.constexpr, FLUSH: gl.constexpr, EPI_BUFS: gl.constexpr,
                     PRODUCER_REGS: gl.constexpr, A_KMAJOR: gl.constexpr = True, B_KMAJOR: gl.constexpr = True,
                     SPLIT_K: gl.constexpr = 1, A_REGS: gl.constexpr = False, TRANS_OUT: gl.constexpr = False,
                     ROW_PERM: gl.constexpr = False, FIXUP: gl.constexpr = False, EPI_INT: gl.constexpr = False,
                     HAS_ALPHA: gl.constexpr = False, HAS_C: gl.constexpr = False, HAS_BIAS: gl.constexpr = False,
                     ACTIVATION: gl.constexpr = 0, EPI_PREFETCH: gl.constexpr = False, PDL: gl.constexpr = 0,
                     BLOCK_N2: gl.constexpr = 0, NAMED_SLOTS: gl.constexpr = False, CLUSTER_M: gl.constexpr = 1,
                     STACK: gl.constexpr = 0):
    """C (M, N) = A (M, K) @ B (K, N); grid min(SMs, work units). ``a_desc`` tiles are (BLOCK_M,
    BLOCK_K) over A (M, K) when ``A_KMAJOR``, else (BLOCK_K, BLOCK_M) over A^T (K, M); ``b_desc``
    tiles (BLOCK_N, BLOCK_K) over B^T (N, K) when ``B_KMAJOR``, else (BLOCK_K, BLOCK_N) over B (K,
    N) (MN-major operands: 16-bit types only, as wgmma reads tf32 and int8 K-major only);
    ``c_desc`` tiles (BLOCK_M, EPI_N). Without ``THREE_TF32`` the lo descriptors are not read
    (pass the hi ones). ``SPLIT_K`` > 1: each tile is ``SPLIT_K`` work units of
    ``k_split_steps`` K steps (every one at least one step), unit k writing its fp32 partial tile
    to rows [k Mp, (k + 1) Mp) of ``c_desc``'s (SPLIT_K Mp, N) workspace (Mp: M rounded up to
    a multiple of BLOCK_M);
    ``tilecraft.kernels.gemm.splitk_reduce_kernel`` sums them.

    ``A_REGS`` (tf32 with an MN-major A): the A tile is loaded from shared memory into registers
    and wgmma takes A from registers (its shared-memory form reads tf32 K-major only). With
    ``TRANS_OUT`` the kernel computes a tile of C^T = B^T A^T: the launcher passes B^T as A and A^T
    as B (so a tf32 NN product, B MN-major, runs as an A-from-registers product with no copy) and
    ``c_desc`` tiles (EPI_N, BLOCK_M) over C, each EPI_N-column chunk of the C^T tile stored
    transposed. ``ROW_PERM`` (with ``A_REGS``, BLOCK_M a multiple of 32): the register loads of A
    read its rows in a relabelled order (:data:`_ROW_BITS`, :func:`_regs_step`): 1 free of bank conflicts, 2 in
    row pairs (64-bit loads, and 64-bit stores of the transposed C^T tile).

    ``FIXUP`` (``SPLIT_K`` = 2, one work unit per program: the grid is the unit count, at most
    the SM count, so both halves of a tile run at once): unit 2t + 1 writes its fp32 partial
    tile to ``ws_ptr`` (tile t at t BLOCK_M BLOCK_N) and counts each thread's release on the
    int32 ``flag_ptr[t]``; unit 2t waits for the count (acquire), adds the partial, stores the tile
    to ``c_desc`` (the output) and sets the flag back to 0 (the flags start at 0 and are left at 0).
    Otherwise ``ws_ptr`` and ``flag_ptr`` are not read.

    Epilogue (before each chunk's TMA store, :func:`_epilogue`): ``act(alpha * acc + beta * C +
    bias)`` in fp32 (int32 with ``EPI_INT``: the int8 product's int32 output, integer alpha and
    beta, relu only). ``HAS_ALPHA``: alpha = ``alpha_hi + alpha_lo``; ``HAS_C``: C read at
    ``c_ptr + row * stride_cr + col * stride_cc`` (the kernel's rows and columns; any strides),
    times beta = ``beta_hi + beta_lo``; ``HAS_BIAS``: ``bias_ptr`` (unit stride) along the
    kernel's columns, or along its rows with ``TRANS_OUT`` (the output's columns there);
    ``ACTIVATION`` 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh), 4 silu (as the Triton kernels).
    With split-K the kernel writes raw partials (the epilogue off) and the reduce pass runs it,
    except with ``FIXUP``, whose first half runs it on the joined tile. ``EPI_PREFETCH``: the
    producer warp prefetches each unit's C tile and bias slice into L2 as the unit starts.

    ``BLOCK_N2`` > 0 (16-bit operands, no split-K, 3xTF32, ``A_REGS`` or ``FIXUP``): tiles of
    BLOCK_N + BLOCK_N2 columns, a width that need not be a power of two (Gluon's tensors must be):
    128 + 64 = 192 tiles 11008 columns in 58 where 128 and 256 leave a wave a third empty. The
    tile's last BLOCK_N2 columns are a second accumulator with its own wgmma per K step, their B
    tiles loaded through ``b_lo_desc`` (tiles (BLOCK_N2, BLOCK_K) over B^T, or (BLOCK_K, BLOCK_N2)
    over B, as ``b_desc``) into a ring of their own; ``EPI_N`` divides BLOCK_N2.

    ``NAMED_SLOTS`` (not with 3xTF32 or ``A_REGS``; STAGES <= 12, ids 4-15): the consumer releases the ring's slots to the
    producer by named barriers (``kernels.barriers.slot_release`` / ``slot_wait_free``) instead of the "empty" mbarriers.

    ``CLUSTER_M`` 2 (16-bit plain products: no split-K, 3xTF32, ``A_REGS``, ``BLOCK_N2`` or ``NAMED_SLOTS``;
    launched in clusters of two CTAs, :mod:`tilecraft.kernels.cluster`): the two CTAs of a cluster take
    vertically adjacent tiles (tile rows 2i and 2i + 1, the same columns) and share the B tile of each K step:
    each CTA loads one half of it by TMA multicast into both CTAs' rings (``a_lo_desc`` is then the half
    tile's descriptor: (BLOCK_N / 2, BLOCK_K) K-major, or (BLOCK_K, 128 bytes) MN-major), so the L2 serves
    each B tile once per pair instead of twice (cuBLAS's 2x1 clusters at 1000^3); an MN-major half is
    copied in boxes of 128-byte rows ((BLOCK_K, 128 bytes), its column blocks as the tile lays them out). A slot is free once
    both CTAs' consumers released it (each arrives on its own "empty" mbarrier and on the partner's). The
    barriers and the ring are addressed by hand, at the byte offsets ``smem_b``, ``smem_ready`` and
    ``smem_empty`` from ``global_smem`` that the host reads from Triton's allocation of this very kernel
    (``tilecraft.ops.launch.cluster_smem_offsets``). Every warp of both CTAs meets at a cluster barrier once
    the barriers are initialised (``fence.mbarrier_init``), before any remote arrival or multicast, and again
    before exiting. Gluon would pad the one-warp producer to a warpgroup with idle warps that never reach a
    cluster barrier, so with a cluster those three warps are partitions of their own (``_cluster_member``, one
    warp and two) that only meet the cluster; the producer stays one warp and issues the multicast from lane 0.
    With ``CLUSTER_M`` 1 the offsets are not read (pass 0). ``matmul`` takes clusters unless
    ``TILECRAFT_GEMM_CLUSTER=0`` (docs/gemm.md, follow-ups 31 and 32).

    ``STACK`` 1 / 2 (no 3xTF32 or split-K): a batch of products in one launch, stacked along the kernel's M (1)
    or N (2, the ``TRANS_OUT`` form, whose N is the output's rows): M (N) is the batch times ``batch_len``, each
    entry's rows padded to whole tiles, so no tile straddles two entries. K-major operands are read through 2D
    descriptors over their batch-flattened views: entry i's rows of A start at row ``i * a_brows``, of B at
    ``i * b_brows`` (0: the operand is one matrix broadcast over the batch); a tile's rows past the entry's
    read the next entry's (or the TMA's zeros) and are not stored. An operand read MN-major (K rows an entry) is
    a rank-3 (batch, K, rows) descriptor whose (1, BLOCK_K, rows) boxes stop at the entry's K (2D, with K a whole
    number of BLOCK_K, under a cluster: the launcher checks). The output is the rank-3 (batch, M, N) descriptor
    (:func:`_store_tile` clips each entry's rows); C (``HAS_C``) is read at ``c_ptr + entry * stride_cb`` and the
    tile's rows within the entry, masked at its ``c_rows`` (:func:`_epilogue`; not prefetched)."""
    # (rank-3 operand descriptors, (1, rows, columns) boxes: the tile is the last two)
    A_R: gl.constexpr = len(a_desc.block_type.shape) - 2
    B_R: gl.constexpr = len(b_desc.block_type.shape) - 2
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[A_R] if A_KMAJOR else a_desc.block_type.shape[A_R + 1]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[A_R + 1] if A_KMAJOR else a_desc.block_type.shape[A_R]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[B_R] if B_KMAJOR else b_desc.block_type.shape[B_R + 1]
    gl.static_assert(STACK != 0 or (A_R == 0 and B_R == 0), "rank-3 operand descriptors: a stacked batch only")
    # (with a cluster the multicast names its descriptor by parameter number, B_HALF_PARAM: five per 2D descriptor)
    gl.static_assert(CLUSTER_M == 1 or (A_R == 0 and B_R == 0), "CLUSTER_M 2: 2D operand descriptors")
    C_RANK: gl.constexpr = len(c_desc.block_type.shape)  # 3 with STACK: (1, rows, columns)
    gl.static_assert(C_RANK == (3 if STACK else 2), "STACK: a rank-3 output descriptor, else rank 2")
    EPI_N: gl.constexpr = c_desc.block_type.shape[C_RANK - 2] if TRANS_OUT else c_desc.block_type.shape[C_RANK - 1]
    dtype: gl.constexpr = a_desc.dtype
    if A_KMAJOR:
        a_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], _slot_layout(a_desc.layout))
    else:
        a_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_M], _slot_layout(a_desc.layout))
    if B_KMAJOR:
        b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_K], _slot_layout(b_desc.layout))
    else:
        b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], _slot_layout(b_desc.layout))
    gl.static_assert(BLOCK_N2 == 0 or not (THREE_TF32 or A_REGS or FIXUP or SPLIT_K > 1),
                     "BLOCK_N2: plain products only")
    gl.static_assert(not NAMED_SLOTS or not (THREE_TF32 or A_REGS) and STAGES <= 16 - SLOT_BAR,
                     "NAMED_SLOTS: plain products, one named barrier per stage")
    # named slot releases: every consumer thread and the producer's warp meet at the slot's barrier
    SLOT_THREADS: gl.constexpr = gl.num_warps() * 32 + 32 if NAMED_SLOTS else 0
    if THREE_TF32:  # K-major operands (the split buffers)
        a_lo_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], _slot_layout(a_desc.layout))
        b_lo_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_K], _slot_layout(b_desc.layout))
    elif BLOCK_N2 > 0:  # the tile's last BLOCK_N2 columns of B
        a_lo_bufs = a_bufs
        if B_KMAJOR:
            b_lo_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N2, BLOCK_K], _slot_layout(b_lo_desc.layout))
        else:
            b_lo_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N2], _slot_layout(b_lo_desc.layout))
    else:
        a_lo_bufs = a_bufs
        b_lo_bufs = b_bufs
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [EPI_BUFS] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    gl.static_assert(STACK == 0 or not (THREE_TF32 or FIXUP or SPLIT_K > 1), "STACK: no 3xTF32 or split-K")
    gl.static_assert(CLUSTER_M == 1 or (CLUSTER_M == 2 and not (THREE_TF32 or A_REGS or FIXUP or NAMED_SLOTS)
                                         and SPLIT_K == 1 and BLOCK_N2 == 0), "CLUSTER_M 2: plain products only")
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=CLUSTER_M)  # with a cluster: this CTA's consumers and the partner's
    fence_async_shared()
    if CLUSTER_M > 1:  # the inits visible cluster-wide (both partitions then meet at a cluster barrier first)
        check_cluster(CLUSTER_M)
        fence_mbarrier_init()
    pdl_start_gluon(PDL)  # after the shared-memory set-up, before any global access
    epi = (c_ptr, stride_cr, stride_cc, bias_ptr, alpha_hi, alpha_lo, beta_hi, beta_lo, stride_cb, c_rows, batch_len)
    gl.warp_specialize([
        (_consumer, (a_bufs, b_bufs, a_lo_bufs, b_lo_bufs, ready, empty, c_desc, c_bufs, M, N, K, k_split_steps,
                     ws_ptr, flag_ptr, epi,
                     GROUP_M, THREE_TF32, FLUSH, EPI_N, BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR,
                     SPLIT_K, A_REGS, TRANS_OUT, ROW_PERM, FIXUP, EPI_INT, HAS_ALPHA, HAS_C, HAS_BIAS, ACTIVATION,
                     BLOCK_N2, SLOT_THREADS, CLUSTER_M, smem_empty, batch_len, STACK)),
        (_producer, (a_desc, b_desc, a_lo_desc, b_lo_desc, a_bufs, b_bufs, a_lo_bufs, b_lo_bufs, ready, empty,
                     M, N, K, k_split_steps, epi, GROUP_M, THREE_TF32, BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR,
                     B_KMAJOR, SPLIT_K, EPI_PREFETCH and HAS_C and STACK == 0, EPI_PREFETCH and HAS_BIAS, TRANS_OUT, PDL, BLOCK_N2,
                     SLOT_THREADS, CLUSTER_M, smem_b, smem_ready, batch_len, a_brows, b_brows, STACK)),
    ] + ([(_cluster_member, (ready, )), (_cluster_member, (ready, ))] if CLUSTER_M > 1 else []),
        [1, 1, 2] if CLUSTER_M > 1 else [1], [PRODUCER_REGS] * 3 if CLUSTER_M > 1 else [PRODUCER_REGS])
