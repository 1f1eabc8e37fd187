"""Matrix-core GEMM kernels: ``out = act(alpha * sa[m] * sb[n] * (A @ B) + beta * C + bias[n])``.

Three GEMM kernels share one fused epilogue (:func:`_epilogue`):

* :func:`matmul_kernel` — the general kernel. Pointer loads with any strides (so transposed views
  give NN/NT/TN/TT with no copy), one program per output tile, batched on grid axis 1, and split-K
  on grid axis 2 (each split writes an accumulator-precision partial that
  :func:`splitk_reduce_kernel` sums before the epilogue). Triton pipelines its K loop ``num_stages``
  deep: the SGEMM patent's double buffering, generalised to N shared-memory stages.
* :func:`matmul_tma_kernel` — the sm90 kernel: a persistent grid (one program per SM walking the
  tiles), operands fetched by the tensor-memory accelerator (TMA) through host-built descriptors,
  and ``wgmma`` on the tiles. Needs 16-byte aligned rows; the launcher checks and otherwise takes
  :func:`matmul_kernel`. Split-K too (``SPLIT_K`` work units per tile in the persistent walk, the
  partials summed by :func:`splitk_reduce_kernel`), for products of fewer tiles than SMs.
* :func:`splitk_reduce_kernel` — the second pass of split-K (of either kernel).
* :func:`pad_rows_kernel` — a copy into rows of another pitch (16-byte vectors), for operands
  whose rows are not 128-byte aligned.
* :func:`tf32_split_kernel` — the 3xTF32 high and low parts of an fp32 operand, K-major, for the
  TMA kernel's ``PRESPLIT`` form.

Both GEMM kernels order their tiles in groups of ``GROUP_M`` tile rows (:func:`_tile_coords`): a
group's programs share B's column tiles and A's row tiles while they sit in L2 (BitBLAS's block
rasterisation; Triton tutorial 03's ``GROUP_SIZE_M``).

Precision is a constexpr: ``INPUT_PRECISION`` is passed to ``tl.dot`` ("ieee": plain FMA or DMMA;
"tf32": one tensor-core pass; "tf32x3": the 3xTF32 split, fp32-accurate; "bf16x3"/"bf16x6": the bf16
splits, the fp32-accurate forms that AMD accepts). ``ACC`` is the accumulator type (fp32 for
fp16/bf16/fp8/tf32, int32 for int8, fp64 for fp64).

Epilogue arguments: ``alpha``/``beta`` reach the kernel as two fp32 halves each (``hi + lo``),
because Triton passes Python floats as fp32; recombined in fp64 they keep 48 bits, enough for the
fp64 GEMM. ``SCALE_A``/``SCALE_B``: 0 none, 1 one value (per tensor), 2 one per row of A / column
of B. ``ACTIVATION``: 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh), 4 silu.

``UPCAST`` (the Triton interpreter only): its ``tl.dot`` reads bf16 tiles as raw integers
(Triton 3.6), so the launcher asks for bf16 tiles to be widened to fp32 first there.

This module imports nothing of tilecraft's (the layering rule): the launchers live in
``tilecraft.ops.gemm``.
"""
from __future__ import annotations

import triton
import triton.language as tl

from tilecraft.kernels.pdl import pdl_start, pdl_trigger, pdl_trigger_if, prefetch_rows_l2

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}


@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped rasterisation: tiles walk GROUP_M tile rows down a column of tiles, then move right."""
    num_in_group = GROUP_M * num_pid_n
    group = tile // num_in_group
    first_m = group * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((tile % num_in_group) % group_rows)
    pid_n = (tile % num_in_group) // group_rows
    return pid_m, pid_n


@triton.jit
def _activation(x, ACTIVATION: tl.constexpr):
    if ACTIVATION == 1:
        x = tl.where(x < 0, 0, x)  # NaN stays NaN (x > 0 is false for NaN: `where(x > 0, x, 0)` gave 0)
    elif ACTIVATION == 2:
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACTIVATION == 3:
        # tanh(u) = 2 sigmoid(2u) - 1, written with exp so every backend has it
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = x * tl.sigmoid(2.0 * u)
    elif ACTIVATION == 4:
        x = x * tl.sigmoid(x)
    return x


@triton.jit
def _epilogue(acc, offs_m, offs_n, M, N, pid_b,
              out_ptr, stride_ob, stride_om, stride_on,
              c_ptr, stride_cb, stride_cm, stride_cn,
              bias_ptr, stride_bias_b, sa_ptr, stride_sa_b, sb_ptr, stride_sb_b,
              alpha_hi, alpha_lo, beta_hi, beta_lo,
              EPI: tl.constexpr, HAS_ALPHA: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
              SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, ACTIVATION: tl.constexpr):
    """Scales, alpha, beta * C, bias and the activation in ``EPI`` (fp32, fp64 or int32), then a
    masked store in the output's type. Rows and columns past M and N are never written."""
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask = mask_m[:, None] & mask_n[None, :]
    x = acc.to(EPI)
    if SCALE_A == 1:
        x = x * tl.load(sa_ptr + pid_b * stride_sa_b).to(EPI)
    elif SCALE_A == 2:
        sa = tl.load(sa_ptr + pid_b * stride_sa_b + offs_m, mask=mask_m, other=0.0).to(EPI)
        x = x * sa[:, None]
    if SCALE_B == 1:
        x = x * tl.load(sb_ptr + pid_b * stride_sb_b).to(EPI)
    elif SCALE_B == 2:
        sb = tl.load(sb_ptr + pid_b * stride_sb_b + offs_n, mask=mask_n, other=0.0).to(EPI)
        x = x * sb[None, :]
    if HAS_ALPHA:
        alpha = tl.cast(alpha_hi, EPI) + tl.cast(alpha_lo, EPI)
        x = x * alpha
    if HAS_C:
        beta = tl.cast(beta_hi, EPI) + tl.cast(beta_lo, EPI)
        c_ptrs = (c_ptr + pid_b.to(tl.int64) * stride_cb + offs_m[:, None].to(tl.int64) * stride_cm
                  + offs_n[None, :].to(tl.int64) * stride_cn)
        c = tl.load(c_ptrs, mask=mask, other=0.0).to(EPI)
        x = x + beta * c
    if HAS_BIAS == 2:  # along M: a transposed call's bias (C's columns are the rows of C^T)
        bias = tl.load(bias_ptr + pid_b * stride_bias_b + offs_m, mask=mask_m, other=0.0).to(EPI)
        x = x + bias[:, None]
    elif HAS_BIAS:
        bias = tl.load(bias_ptr + pid_b * stride_bias_b + offs_n, mask=mask_n, other=0.0).to(EPI)
        x = x + bias[None, :]
    x = _activation(x, ACTIVATION)
    out_ptrs = (out_ptr + pid_b.to(tl.int64) * stride_ob + offs_m[:, None].to(tl.int64) * stride_om
                + offs_n[None, :].to(tl.int64) * stride_on)
    tl.store(out_ptrs, x.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, sa_ptr, sb_ptr,
                  M, N, K, K_PER_SPLIT,
                  stride_ab, stride_am, stride_ak,
                  stride_bb, stride_bk, stride_bn,
                  stride_ob, stride_om, stride_on,
                  stride_cb, stride_cm, stride_cn,
                  stride_bias_b, stride_sa_b, stride_sb_b,
                  alpha_hi, alpha_lo, beta_hi, beta_lo,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  SPLIT_K: tl.constexpr, ACC: tl.constexpr, EPI: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                  HAS_ALPHA: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
                  SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, ACTIVATION: tl.constexpr,
                  OFFS64: tl.constexpr, EVEN_K: tl.constexpr = False, UPCAST: tl.constexpr = False,
                  PDL: tl.constexpr = 0, PDL_AT: tl.constexpr = 0, PREFETCH: tl.constexpr = 0):
    """One (BLOCK_M, BLOCK_N) output tile per program; grid (tiles, batch, SPLIT_K).

    With SPLIT_K > 1 the program sums K in [pid_k * K_PER_SPLIT, (pid_k + 1) * K_PER_SPLIT) and
    stores the raw accumulator into ``out_ptr`` (a (SPLIT_K * batch, M, N) workspace, strides
    ``stride_ob`` per split-batch slice); the epilogue runs in :func:`splitk_reduce_kernel`.
    ``OFFS64``: row offsets in 64-bit (a row index times its stride can pass 2**31). ``EVEN_K``:
    K is a multiple of BLOCK_K, so every K block is full and the loads carry no K mask. BLOCK_M
    below 16 (1, 2, 4, 8): each K block is a broadcast multiply and a sum over K on the CUDA cores
    instead of ``tl.dot`` (matrix-vector products: the fp32 FMA path would compute 16 rows).
    ``PDL``: programmatic dependent launch (:mod:`tilecraft.kernels.pdl`); with ``PDL`` 3 the next kernel
    may launch once every program is in its last ``PDL_AT`` K blocks. ``PREFETCH`` (with ``PDL``): the
    program's A and B tiles of its first ``PREFETCH`` K blocks are prefetched into L2 before the PDL
    wait (where the operand has a unit stride), so their DRAM reads overlap the kernel ahead.
    """
    pid = tl.program_id(0)
    pid_b = tl.program_id(1)
    pid_k = tl.program_id(2)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past M/N are masked, not clamped: a clamped index (tl.where) hides from
    # Triton that the addresses are contiguous, and every load becomes scalar (measured on the
    # H200: 48 TFLOP/s for bf16 8192^3 against 690 for the TMA kernel).
    mask_m = offs_m < M
    mask_n = offs_n < N
    rows = offs_m.to(tl.int64) if OFFS64 else offs_m
    cols = offs_n.to(tl.int64) if OFFS64 else offs_n
    offs_k = tl.arange(0, BLOCK_K)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(K, k_lo + K_PER_SPLIT)
    a_ptrs = (a_ptr + pid_b.to(tl.int64) * stride_ab + rows[:, None] * stride_am
              + (k_lo + offs_k)[None, :].to(tl.int64) * stride_ak)
    b_ptrs = (b_ptr + pid_b.to(tl.int64) * stride_bb + (k_lo + offs_k)[:, None].to(tl.int64) * stride_bk
              + cols[None, :] * stride_bn)
    if PREFETCH > 0 and PDL > 0:  # hints and addresses only before pdl_start
        KK: tl.constexpr = PREFETCH * BLOCK_K
        a_base = a_ptr + pid_b.to(tl.int64) * stride_ab
        b_base = b_ptr + pid_b.to(tl.int64) * stride_bb
        if stride_ak == 1:
            prefetch_rows_l2(a_base, pid_m * BLOCK_M, M, k_lo, k_hi, stride_am, BLOCK_M, KK)
        elif stride_am == 1:
            prefetch_rows_l2(a_base, k_lo, k_hi, pid_m * BLOCK_M, M, stride_ak, KK, BLOCK_M)
        if stride_bn == 1:
            prefetch_rows_l2(b_base, k_lo, k_hi, pid_n * BLOCK_N, N, stride_bk, KK, BLOCK_N)
        elif stride_bk == 1:
            prefetch_rows_l2(b_base, pid_n * BLOCK_N, N, k_lo, k_hi, stride_bn, BLOCK_N, KK)
    pdl_start(PDL)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for k in range(k_lo, k_hi, BLOCK_K):
        k_left = k_hi - k
        pdl_trigger_if(k_left <= PDL_AT * BLOCK_K, PDL)
        if EVEN_K:  # no K mask: it would vary along a K-contiguous operand and split its vector loads
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=mask_n[None, :], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if BLOCK_M < 16:
            # a matrix-vector product (M of 1-8): one multiply-add per element of B on the CUDA cores,
            # where tl.dot (16 rows at least) would compute 16 / M times the products
            acc += tl.sum(a.to(ACC)[:, :, None] * b.to(ACC)[None, :, :], axis=1)
        else:
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    pdl_trigger(PDL)

    if SPLIT_K > 1:
        ws = out_ptr + (pid_k * tl.num_programs(1) + pid_b).to(tl.int64) * stride_ob
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        tl.store(ws + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :] * stride_on, acc, mask=mask)
    else:
        _epilogue(acc, offs_m, offs_n, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
                  c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
                  sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
                  EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)


@triton.jit
def splitk_reduce_kernel(ws_ptr, out_ptr, c_ptr, bias_ptr, sa_ptr, sb_ptr,
                         M, N, BATCH, stride_ws_split,
                         stride_ob, stride_om, stride_on,
                         stride_cb, stride_cm, stride_cn,
                         stride_bias_b, stride_sa_b, stride_sb_b,
                         alpha_hi, alpha_lo, beta_hi, beta_lo,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
                         EPI: tl.constexpr, HAS_ALPHA: tl.constexpr, HAS_C: tl.constexpr,
                         HAS_BIAS: tl.constexpr, SCALE_A: tl.constexpr, SCALE_B: tl.constexpr,
                         ACTIVATION: tl.constexpr, PDL: tl.constexpr = 0):
    """Sum the SPLIT_K partials of a contiguous (SPLIT_K, BATCH, M, N) workspace, in a fixed order
    (the result does not depend on timing), then run the epilogue. Grid (tiles, batch)."""
    pdl_start(PDL)
    pid = tl.program_id(0)
    pid_b = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    ptrs = ws_ptr + pid_b.to(tl.int64) * M * N + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    acc = tl.load(ptrs, mask=mask, other=0.0)
    for s in range(1, SPLIT_K):
        acc += tl.load(ptrs + s * stride_ws_split, mask=mask, other=0.0)
    pdl_trigger(PDL)
    _epilogue(acc, offs_m, offs_n, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
              c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
              sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
              EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)


@triton.jit
def pad_rows_kernel(src_ptr, dst_ptr, ROWS, COLS_V, ROW_TILES, stride_sb_v, stride_sr_v, stride_db_v, stride_dr_v,
                    VEC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """dst[b, r, c] = src[b, r, c] for rows of unit column stride: a copy into rows of another
    pitch (the 128-byte padded rows the TMA reads fastest), no transpose. The column count and the
    strides come in units of ``VEC`` elements (16 bytes), so Triton knows every row starts 16-byte
    aligned and keeps the loads and stores 16 bytes wide (with plain strides it would see an odd
    stride and go scalar: sm90 cross compile, 2-byte accesses). Grid (ROW_TILES x batch, column
    tiles)."""
    pid_b = tl.program_id(0) // ROW_TILES
    offs_r = (tl.program_id(0) % ROW_TILES) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (offs_r < ROWS)[:, None] & (offs_c < COLS_V * VEC)[None, :]
    src = src_ptr + pid_b * (stride_sb_v * VEC) + offs_r[:, None] * (stride_sr_v * VEC) + offs_c[None, :]
    x = tl.load(src, mask=mask)
    dst = dst_ptr + pid_b * (stride_db_v * VEC) + offs_r[:, None] * (stride_dr_v * VEC) + offs_c[None, :]
    tl.store(dst, x, mask=mask)


@triton.jit
def tf32_split_kernel(x_ptr, hi_ptr, lo_ptr, ROWS, COLS, ROW_TILES,
                      stride_xb, stride_xr, stride_xc, stride_ob, stride_or,
                      BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Split an fp32 matrix (batch, ROWS, COLS), any strides, into the 3xTF32 halves, written with
    a unit column stride (``hi[b, r, c]`` at ``b * stride_ob + r * stride_or + c``, likewise
    ``lo``): the K-major operands the TMA kernel reads with ``PRESPLIT``. ``hi`` = x rounded to
    tf32 (10 mantissa bits, round to nearest even, so the tensor core's truncation of tf32 inputs
    leaves it exact) and ``lo`` = x - hi (exact in fp32). inf keeps hi = inf and lo = 0, NaN gives
    hi = lo = NaN, and a finite x that would round up to inf is truncated instead. Grid
    (ROW_TILES * batch, column tiles); every offset in 64 bits."""
    pid = tl.program_id(0)
    pid_b = (pid // ROW_TILES).to(tl.int64)
    rows = (pid % ROW_TILES) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows < ROWS)[:, None] & (cols < COLS)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    cols64 = cols.to(tl.int64)[None, :]
    x = tl.load(x_ptr + pid_b * stride_xb + rows64 * stride_xr + cols64 * stride_xc, mask=mask, other=0.0)
    dst = pid_b * stride_ob + rows64 * stride_or + cols64
    bits = x.to(tl.uint32, bitcast=True)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    finite_hi = tl.abs(x) < 3.4e38  # rounding could carry into the exponent's top: inf
    hi = tl.where(finite_hi, rounded, bits & 0xFFFFE000).to(tl.float32, bitcast=True)
    number = tl.abs(x) <= float("inf")  # False for NaN
    hi = tl.where(number, hi, float("nan"))  # a canonical NaN: truncating any NaN keeps it NaN
    lo = tl.where(tl.abs(x) < float("inf"), x - hi, 0.0)
    lo = tl.where(number, lo, float("nan"))
    tl.store(hi_ptr + dst, hi, mask=mask)
    tl.store(lo_ptr + dst, lo, mask=mask)


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, a_lo_desc, b_lo_desc, out_ptr, c_ptr, bias_ptr, sa_ptr, sb_ptr,
                      M, N, K, BATCH, K_PER_SPLIT,
                      stride_ob, stride_om, stride_on,
                      stride_cb, stride_cm, stride_cn,
                      stride_bias_b, stride_sa_b, stride_sb_b,
                      alpha_hi, alpha_lo, beta_hi, beta_lo,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      NUM_SMS: tl.constexpr, A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr,
                      A_BATCHED: tl.constexpr, B_BATCHED: tl.constexpr,
                      ACC: tl.constexpr, EPI: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                      HAS_ALPHA: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
                      SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, ACTIVATION: tl.constexpr,
                      FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, UPCAST: tl.constexpr = False,
                      EPILOGUE_SPLIT: tl.constexpr = False, SPLIT_K: tl.constexpr = 1,
                      PRESPLIT: tl.constexpr = False, PDL: tl.constexpr = 0):
    """Persistent TMA GEMM: NUM_SMS programs walk all (batch, tile) pairs.

    The descriptors are 3D, (batch, rows, cols) with a unit stride on cols, so a tile never reads
    across batch entries and the TMA's zero fill covers the K tail. ``A_KMAJOR``: ``a_desc`` views
    A as (batch, M, K) (K contiguous); otherwise as (batch, K, M) and the tile is transposed in
    shared memory. ``B_KMAJOR``: ``b_desc`` views B as (batch, N, K); otherwise (batch, K, N).
    ``A_BATCHED``/``B_BATCHED`` False: one matrix shared by every batch entry.

    ``SPLIT_K`` > 1 (split-K inside the persistent grid, for products with fewer output tiles than
    SMs, such as M = 128): the programs walk ``SPLIT_K`` work units per tile, unit ``u`` summing K
    in [s * K_PER_SPLIT, (s + 1) * K_PER_SPLIT) for s = u // tiles (K_PER_SPLIT a multiple of
    BLOCK_K), and store the raw accumulator into ``out_ptr``, a (SPLIT_K * BATCH, M, N) workspace;
    :func:`splitk_reduce_kernel` sums the partials in order and runs the epilogue.

    ``PRESPLIT`` (3xTF32): ``a_desc``/``b_desc`` hold the tf32-rounded high parts of K-major
    operands and ``a_lo_desc``/``b_lo_desc`` the remainders (:func:`tf32_split_kernel`); each K
    step runs three tf32 wgmmas on the loaded tiles, hi*lo + lo*hi + hi*hi (lo*lo dropped) from
    zero, added to the accumulator in fp32, so the split costs no register or shared-memory work
    per tile. Otherwise the lo descriptors are unused. ``PDL``: :mod:`tilecraft.kernels.pdl`.
    """
    pdl_start(PDL)
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_batch = num_pid_m * num_pid_n
    num_tiles = tiles_per_batch * BATCH
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_tiles_split = tl.cdiv(K_PER_SPLIT, BLOCK_K)
    for unit in tl.range(start, num_tiles * SPLIT_K, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        if SPLIT_K > 1:
            tile = unit % num_tiles
            k_first = (unit // num_tiles) * k_tiles_split
            k_steps = tl.minimum(k_tiles - k_first, k_tiles_split)
        else:
            tile = unit
            k_first = 0
            k_steps = k_tiles
        pid_b = tile // tiles_per_batch
        pid_m, pid_n = _tile_coords(tile % tiles_per_batch, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        ab = pid_b if A_BATCHED else 0
        bb = pid_b if B_BATCHED else 0
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
        for ki in range(k_steps):
            off_k = (k_first + ki) * BLOCK_K
            if A_KMAJOR:
                a = a_desc.load([ab, off_m, off_k]).reshape(BLOCK_M, BLOCK_K)
            else:
                a = a_desc.load([ab, off_k, off_m]).reshape(BLOCK_K, BLOCK_M).T
            if B_KMAJOR:
                b = b_desc.load([bb, off_n, off_k]).reshape(BLOCK_N, BLOCK_K).T
            else:
                b = b_desc.load([bb, off_k, off_n]).reshape(BLOCK_K, BLOCK_N)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            if PRESPLIT:  # both operands K-major
                a_lo = a_lo_desc.load([ab, off_m, off_k]).reshape(BLOCK_M, BLOCK_K)
                b_lo = b_lo_desc.load([bb, off_n, off_k]).reshape(BLOCK_N, BLOCK_K).T
                # The step's three products from zero, then one IEEE add into acc: the tensor cores
                # truncate as they accumulate, and a running acc inside the wgmma chain drifts with K
                # (H200, K = 4096: 2.9e-5 against float64, 1.2e-4 at 16384; cuBLAS fp32 5.7e-7).
                # Non-finite small terms (inf * lo: +-inf, or NaN where lo is 0) are dropped: the
                # hi * hi term carries inf and NaN inputs, and is inf wherever they are.
                step = tl.dot(a, b_lo, input_precision="tf32", out_dtype=ACC)
                step = tl.dot(a_lo, b, step, input_precision="tf32", out_dtype=ACC)
                step = tl.where(tl.abs(step) < float("inf"), step, 0.0)
                acc += tl.dot(a, b, step, input_precision="tf32", out_dtype=ACC)
            else:
                acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC)
        offs_m = off_m + tl.arange(0, BLOCK_M)
        if SPLIT_K > 1:
            offs_n = off_n + tl.arange(0, BLOCK_N)
            ws = out_ptr + ((unit // num_tiles) * BATCH + pid_b).to(tl.int64) * stride_ob
            mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
            tl.store(ws + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :] * stride_on, acc, mask=mask)
        elif EPILOGUE_SPLIT:
            # The epilogue in two column halves: C, bias and the activation of a 128x256 tile
            # at once take more registers than the accumulators leave (sm90: 688 bytes spilled).
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            offs_n0 = off_n + tl.arange(0, BLOCK_N // 2)
            _epilogue(acc0, offs_m, offs_n0, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
                      c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
                      sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
                      EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)
            _epilogue(acc1, offs_m, offs_n0 + BLOCK_N // 2, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
                      c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
                      sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
                      EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)
        else:
            offs_n = off_n + tl.arange(0, BLOCK_N)
            _epilogue(acc, offs_m, offs_n, M, N, pid_b, out_ptr, stride_ob, stride_om, stride_on,
                      c_ptr, stride_cb, stride_cm, stride_cn, bias_ptr, stride_bias_b, sa_ptr, stride_sa_b,
                      sb_ptr, stride_sb_b, alpha_hi, alpha_lo, beta_hi, beta_lo,
                      EPI, HAS_ALPHA, HAS_C, HAS_BIAS, SCALE_A, SCALE_B, ACTIVATION)
