"""fp32 ``ieee`` GEMM on the FMA units, in Gluon: the classic SGEMM register tile made explicit.

Why a kernel of its own: ``tl.dot(..., input_precision="ieee")`` lowers to FMAs on a blocked layout
that Triton picks from the tile's shape (for the 64x128x32, 4-warp tile: 5 128-bit shared-memory
loads per k for 64 FMAs per thread, 12.8 FFMA per ``LDS.128``). An SM issues 128 fp32 FMAs but reads
only 32 floats from shared memory per clock, so the product needs at least 4 FMAs per float read
(16 per ``LDS.128``) to keep the FMA units fed. Here the accumulator layout is chosen, not derived:

* each thread owns ``TM`` rows (8) x 4 columns of the tile, repeated along N (for 128x128 at 8
  warps: 8 x 8 = 64 accumulators), so per k it reads TM + 4 * reps floats (2 + 2 ``LDS.128``) for
  64 FMAs: 16 FFMA per ``LDS.128``, the SGEMM patent's ratio;
* a warp's 8 column groups are adjacent 16-byte chunks (one 128-byte wavefront per load, lanes
  that share rows read the same addresses: a broadcast);
* A's shared tile is swizzled so the 4 row groups of a warp (rows ``TM`` apart) fall in different
  banks; a transposed A (M-contiguous) is stored M-fastest and read 8 rows at a time;
* the global-to-shared copies are ``cp.async`` (sm80+) into a ring of ``STAGES`` slots (the
  patent's double buffering, generalised), waited on with ``wait_group`` and one CTA barrier per
  K step; edge rows, columns and the K tail are masked in the copy (zero fill).

Same arguments as :func:`tilecraft.kernels.gemm.matmul_kernel` (batch and split-K on grid axes 1
and 2, the same epilogue function), plus the layout constexprs ``WARPS_M``, ``TPW_M``, ``STAGES``
and the operands' contiguity (``A_KCONTIG``: stride_ak == 1, else stride_am == 1; ``B_NCONTIG``:
stride_bn == 1, else stride_bk == 1; other strides take the pointer kernel). ``VEC4``: the other
strides and the contiguous extents are multiples of 4 elements and the bases 16-byte aligned, so every
copy is a 16-byte ``cp.async`` even where Triton's argument specialisation (multiples of 16) does not
show it; otherwise the copies of unaligned operands are 4-byte ones. NVIDIA sm80+ only: the
interpreter cannot run Gluon, so CI cross-compiles it (``tests/ops/test_gemm_fma_compile.py``) and
``tests/gpu/test_gemm_fma.py`` checks it against float64 on the GPU.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from tilecraft.kernels.gemm import _epilogue, _tile_coords
from tilecraft.kernels.pdl import pdl_start_gluon, pdl_trigger_gluon


@gluon.constexpr_function
def _lanes(extent):
    """Lanes of a warp along a dimension of ``extent`` fp32 elements copied in 16-byte pieces."""
    return min(32, extent // 4)


@gluon.jit
def _kmask(k, k_hi, GROUPED: gl.constexpr):
    """k < k_hi; ``GROUPED`` (k_hi a multiple of 4): written per group of 4, so that Triton sees a mask
    constant over each 16-byte piece along a K-contiguous operand and keeps the copies 128-bit."""
    if GROUPED:
        return (k // 4) < (k_hi // 4)
    else:
        return k < k_hi


@gluon.jit
def _copy_tile(sa, sb, slot, a_base, b_base, rows, cols, ka, kb, k0, k_hi, mask_m, mask_n,
               stride_am, stride_ak, stride_bk, stride_bn, EVEN_K: gl.constexpr, VEC4: gl.constexpr,
               A_KCONTIG: gl.constexpr, B_NCONTIG: gl.constexpr, OFFS64: gl.constexpr):
    """cp.async of A[rows, k0 + ka] and B[k0 + kb, cols] into ring slot ``slot`` (zero fill where masked).
    ``OFFS64``: the K offsets in 64-bit too (k times an MN-major operand's stride can pass 2**31)."""
    if OFFS64:
        a_ptrs = a_base + rows[:, None] * stride_am + (k0 + ka).to(gl.int64)[None, :] * stride_ak
        b_ptrs = b_base + (k0 + kb).to(gl.int64)[:, None] * stride_bk + cols[None, :] * stride_bn
    else:
        a_ptrs = a_base + rows[:, None] * stride_am + (k0 + ka)[None, :] * stride_ak
        b_ptrs = b_base + (k0 + kb)[:, None] * stride_bk + cols[None, :] * stride_bn
    if EVEN_K:
        async_copy.async_copy_global_to_shared(sa.index(slot), a_ptrs, mask=mask_m[:, None])
        async_copy.async_copy_global_to_shared(sb.index(slot), b_ptrs, mask=mask_n[None, :])
    else:
        ma = _kmask(k0 + ka, k_hi, VEC4 and A_KCONTIG)
        mb = _kmask(k0 + kb, k_hi, VEC4 and not B_NCONTIG)
        async_copy.async_copy_global_to_shared(sa.index(slot), a_ptrs, mask=mask_m[:, None] & ma[None, :])
        async_copy.async_copy_global_to_shared(sb.index(slot), b_ptrs, mask=mb[:, None] & mask_n[None, :])


@gluon.jit
def matmul_fma_kernel(a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, sa_ptr, sb_ptr,
                      M, N, K, K_PER_SPLIT,
                      stride_ab, stride_am, stride_ak,
                      stride_bb, stride_bk, stride_bn,
                      stride_ob, stride_om, stride_on,
                      stride_cb, stride_cm, stride_cn,
                      stride_bias_b, stride_sa_b, stride_sb_b,
                      alpha_hi, alpha_lo, beta_hi, beta_lo,
                      BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
                      SPLIT_K: gl.constexpr, ACC: gl.constexpr, EPI: gl.constexpr, INPUT_PRECISION: gl.constexpr,
                      HAS_ALPHA: gl.constexpr, HAS_C: gl.constexpr, HAS_BIAS: gl.constexpr,
                      SCALE_A: gl.constexpr, SCALE_B: gl.constexpr, ACTIVATION: gl.constexpr,
                      OFFS64: gl.constexpr, EVEN_K: gl.constexpr = False, UPCAST: gl.constexpr = False,
                      WARPS_M: gl.constexpr = 4, TPW_M: gl.constexpr = 4, STAGES: gl.constexpr = 3,
                      A_KCONTIG: gl.constexpr = True, B_NCONTIG: gl.constexpr = True, VEC4: gl.constexpr = False,
                      PDL: gl.constexpr = 0):
    """One (BLOCK_M, BLOCK_N) fp32 output tile per program on the FMA units; grid (tiles, batch, SPLIT_K).
    ``INPUT_PRECISION`` and ``UPCAST`` are accepted for the pointer kernel's argument list (always ieee fp32)."""
    NW: gl.constexpr = gl.num_warps()
    WARPS_N: gl.constexpr = NW // WARPS_M
    TPW_N: gl.constexpr = 32 // TPW_M
    TM: gl.constexpr = BLOCK_M // (TPW_M * WARPS_M)
    gl.static_assert(TM * TPW_M * WARPS_M == BLOCK_M, "BLOCK_M must be a multiple of TPW_M * WARPS_M")
    gl.static_assert(BLOCK_N % (4 * TPW_N * WARPS_N) == 0, "BLOCK_N must be a multiple of 4 * TPW_N * WARPS_N")
    acc_l: gl.constexpr = gl.BlockedLayout([TM, 4], [TPW_M, TPW_N], [WARPS_M, WARPS_N], [1, 0])
    a_op: gl.constexpr = gl.DotOperandLayout(0, acc_l, 0)
    b_op: gl.constexpr = gl.DotOperandLayout(1, acc_l, 0)
    # Global-to-shared copy layouts: 16-byte pieces along the contiguous dimension.
    if A_KCONTIG:
        la: gl.constexpr = gl.BlockedLayout([1, 4], [32 // _lanes(BLOCK_K), _lanes(BLOCK_K)], [NW, 1], [1, 0])
        # rows TM apart (one per lane row group) in different 16-byte phases
        sa_l: gl.constexpr = gl.SwizzledSharedLayout(4, TM, BLOCK_K // 4, [1, 0])
    else:
        la: gl.constexpr = gl.BlockedLayout([4, 1], [_lanes(BLOCK_M), 32 // _lanes(BLOCK_M)], [1, NW], [0, 1])
        sa_l: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0, 1])
    if B_NCONTIG:
        lb: gl.constexpr = gl.BlockedLayout([1, 4], [32 // _lanes(BLOCK_N), _lanes(BLOCK_N)], [NW, 1], [1, 0])
        sb_l: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    else:
        lb: gl.constexpr = gl.BlockedLayout([4, 1], [_lanes(BLOCK_K), 32 // _lanes(BLOCK_K)], [1, NW], [0, 1])
        sb_l: gl.constexpr = gl.SwizzledSharedLayout(4, 4, BLOCK_K // 4, [0, 1])

    pdl_start_gluon(PDL)
    pid = gl.program_id(0)
    pid_b = gl.program_id(1)
    pid_k = gl.program_id(2)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_am = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, la))
    offs_bn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, lb))
    ka = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, la))
    kb = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, lb))
    if VEC4:
        # Every operand stride that is not 1, and each operand's contiguous extent, is a multiple of
        # 4 elements (the launch checks it): said so here, Triton proves 16-byte pieces and keeps every
        # copy 128-bit on rows such as 5000 or 7000 floats (not multiples of 16 elements).
        stride_ab = stride_ab // 4 * 4
        stride_bb = stride_bb // 4 * 4
        if A_KCONTIG:
            stride_am = stride_am // 4 * 4
        else:
            stride_ak = stride_ak // 4 * 4
        if B_NCONTIG:
            stride_bk = stride_bk // 4 * 4
        else:
            stride_bn = stride_bn // 4 * 4
    if VEC4 and not A_KCONTIG:
        mask_am = (offs_am // 4) < (M // 4)
    else:
        mask_am = offs_am < M
    if VEC4 and B_NCONTIG:
        mask_bn = (offs_bn // 4) < (N // 4)
    else:
        mask_bn = offs_bn < N
    if OFFS64:
        rows = offs_am.to(gl.int64)
        cols = offs_bn.to(gl.int64)
    else:
        rows = offs_am
        cols = offs_bn
    a_base = a_ptr + pid_b.to(gl.int64) * stride_ab
    b_base = b_ptr + pid_b.to(gl.int64) * stride_bb
    k_lo = pid_k * K_PER_SPLIT
    k_hi = gl.minimum(K, k_lo + K_PER_SPLIT)
    n_k = gl.cdiv(k_hi - k_lo, BLOCK_K)

    sa = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M, BLOCK_K], sa_l)
    sb = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_K, BLOCK_N], sb_l)
    for s in gl.static_range(STAGES - 1):
        if s < n_k:
            _copy_tile(sa, sb, s, a_base, b_base, rows, cols, ka, kb, k_lo + s * BLOCK_K, k_hi, mask_am, mask_bn,
                       stride_am, stride_ak, stride_bk, stride_bn, EVEN_K, VEC4, A_KCONTIG, B_NCONTIG, OFFS64)
        async_copy.commit_group()

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_l)
    for i in range(n_k):
        slot = i % STAGES
        async_copy.wait_group(STAGES - 2)
        gl.thread_barrier()  # every thread's copies into this slot landed; every read of slot i - 1 done
        nxt = i + STAGES - 1
        if nxt < n_k:
            _copy_tile(sa, sb, nxt % STAGES, a_base, b_base, rows, cols, ka, kb, k_lo + nxt * BLOCK_K, k_hi,
                       mask_am, mask_bn, stride_am, stride_ak, stride_bk, stride_bn, EVEN_K, VEC4, A_KCONTIG, B_NCONTIG, OFFS64)
        async_copy.commit_group()
        av = sa.index(slot).load(a_op)
        bv = sb.index(slot).load(b_op)
        acc = gl.dot_fma(av, bv, acc)
    async_copy.wait_group(0)
    pdl_trigger_gluon(PDL)

    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_l))
    offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_l))
    if SPLIT_K > 1:
        ws = out_ptr + (pid_k * gl.num_programs(1) + pid_b).to(gl.int64) * stride_ob
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        gl.store(ws + offs_m[:, None].to(gl.int64) * stride_om + offs_n[None, :] * stride_on, acc, mask=mask)
    else:
        _epilogue(acc, offs_m, offs_n, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
                  c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
                  sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
                  EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)
