"""Flash attention in Triton: forward, and the FlashAttention-2 backward (preprocess, dK/dV, dQ).

Conventions (``tilecraft.ops.attention`` validates and launches):

* Q is (B, H, S_q, D), K and V (B, H_kv, S_k, D), with any batch/head/sequence strides and the head
  dimension contiguous; query head h reads K/V head h // GROUP (GROUP = H / H_kv: grouped-query
  attention, multi-query when H_kv = 1). With ``VARLEN`` the batch stride is 0 and sequence b is
  rows CU_Q[b]:CU_Q[b+1] (CU_K for K/V) of a packed (total, H, D) tensor.
* ``CAUSAL`` uses the bottom-right alignment of FlashAttention-2: query i sees key j when
  j <= i + S_k - S_q. Rows that see no key (S_q > S_k) get output 0 and log-sum-exp -inf.
* The head dimension D is padded to BLOCK_D, a power of two (D = 96 runs as 128 with the last 32
  columns masked off in every load and store).

Techniques, each where it happens:

* online softmax in base 2: the logits' scale and log2(e) are folded into one multiplier
  (``qk_scale``), so each element costs one multiply and one ``exp2`` (MUFU.EX2 on NVIDIA) and the
  running maximum is kept in the same units;
* causal split: the key blocks every query of a tile sees are walked first with no mask at all,
  then the few blocks on the diagonal (and the key tail when S_k is not a multiple of BLOCK_N) with
  the mask (``MASKED`` is a compile-time flag, so the unmasked loop carries no mask arithmetic);
* causal tiles are launched heaviest first (the last query tiles see the most keys), so the tail of
  the grid is short tiles; or paired (``PAIRED``): a program takes the heavy tile n_m - 1 - i and the
  light tile i, so every program has about the same work and the launch has no tail of long tiles;
* K/V tiles are loaded in a loop the compiler software-pipelines (``num_stages``: cp.async /
  TMA-backed multi-buffering on sm90, on sm80 cp.async), and the probabilities P feed the second
  product straight from registers (the first product's accumulator layout converted in place);
* backward as FlashAttention-2: delta = rowsum(dO * O) first; one kernel per key tile accumulates
  dK and dV over every query tile (and every query head of its group), so they are written once,
  without atomics; dQ either in its own kernel over key tiles (deterministic) or accumulated with
  fp32 atomics from the dK/dV kernel (``ATOMIC_DQ``, fewer recomputed products, order not fixed):
  element-wise, or on sm90 one TMA bulk reduction (``cp.reduce.async.bulk.tensor`` add) per tile.
"""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _seq_bounds(CU_Q, CU_K, b, S_Q, S_K, VARLEN: tl.constexpr):
    """(first packed row of q, of k, length of q, of k) of sequence b."""
    if VARLEN:
        q0 = tl.load(CU_Q + b)
        k0 = tl.load(CU_K + b)
        len_q = tl.load(CU_Q + b + 1) - q0
        len_k = tl.load(CU_K + b + 1) - k0
    else:
        q0 = b * 0
        k0 = b * 0
        len_q = S_Q + b * 0
        len_k = S_K + b * 0
    return q0, k0, len_q, len_k


@triton.jit
def _query_tile(H, GROUP, CAUSAL: tl.constexpr):
    """(query tile index, batch, head, K/V head) of this program; causal grids run the last query
    tiles (the ones that see the most keys) first, so the grid's tail is short tiles."""
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    h = pid_bh % H
    return pid_m, pid_bh // H, h, h // GROUP


@triton.jit
def _program_tiles(S, BLOCK: tl.constexpr, REVERSE: tl.constexpr, HEAVY_LOW: tl.constexpr, PAIRED: tl.constexpr):
    """(first tile, second tile, count) of this program along grid axis 0 over cdiv(S, BLOCK) tiles:
    with ``PAIRED`` the heavy tile and then the light one (``_paired_tiles``; ``HEAVY_LOW``: the low
    tile index is the heavy one, as for the backward's key tiles), else program_id(0) alone, counted
    from the end with ``REVERSE`` (causal query tiles heaviest first)."""
    if PAIRED:
        heavy, light, count = _paired_tiles(S, BLOCK)
        if HEAVY_LOW:
            heavy, light = light, heavy
        return heavy, light, count
    else:
        pid = tl.program_id(0)
        if REVERSE:
            pid = tl.num_programs(0) - 1 - pid
        return pid, pid, 1


@triton.jit
def _program_coords(S, BLOCK: tl.constexpr, REVERSE: tl.constexpr, HEAVY_LOW: tl.constexpr, PAIRED: tl.constexpr,
                    ORDER: tl.constexpr):
    """``_program_tiles``'s (first, second, count) and the grid axis-1 index of this program; with ``ORDER``
    = G > 0 one tile in the grouped heavy-first launch order (``_grouped_program``) instead."""
    tl.static_assert(not (PAIRED and ORDER > 0), "paired tiles keep their own order")
    if ORDER > 0:
        tile, pid_bh = _grouped_program(ORDER, HEAVY_LOW)
        return tile, tile, 1, pid_bh
    else:
        first, second, count = _program_tiles(S, BLOCK, REVERSE, HEAVY_LOW, PAIRED)
        return first, second, count, tl.program_id(1)


@triton.jit
def _grouped_program(ORDER: tl.constexpr, HEAVY_LOW: tl.constexpr):
    """(tile along grid axis 0, grid axis-1 index) of this program when the grid (n, BH) is launched in
    the grouped heavy-first order (the forward's ``FwdConfig.order``, here the backward's): the axis-1
    entries in groups of ORDER (the last may be smaller), inside a group every entry's heaviest tile,
    then every entry's next one. Launch position = program_id(0) + program_id(1) * n (x fastest, the
    order the hardware starts programs in). ``HEAVY_LOW``: tile 0 is the heaviest (the backward's key
    tiles), else tile n - 1 (causal query tiles)."""
    n = tl.num_programs(0)
    pos = tl.program_id(0) + tl.program_id(1) * n
    g = pos // (ORDER * n)
    r = pos - g * (ORDER * n)
    gh = tl.minimum(ORDER, tl.num_programs(1) - g * ORDER)
    rank = r // gh
    tile = rank if HEAVY_LOW else n - 1 - rank
    return tile, g * ORDER + r % gh


@triton.jit
def _paired_tiles(S_Q, BLOCK_M: tl.constexpr):
    """A paired causal program's query tiles (grid (cdiv(n_m, 2), B * H), n_m = cdiv(S_q, BLOCK_M)):
    the heavy tile n_m - 1 - i, then the light tile i, so every program walks about n_m + 1 key tiles'
    worth of keys and the programs finish together (heaviest-first single tiles leave the launch's
    tail to the last heads' long tiles). Returns (heavy, light, count); count is 1 for the middle
    tile of an odd n_m."""
    i = tl.program_id(0)
    heavy = tl.cdiv(S_Q, BLOCK_M) - 1 - i
    return heavy, i, tl.where(i < heavy, 2, 1)


@triton.jit
def _key_range(start_m, len_q, len_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The causal split of a query tile's keys: [0, lo) every query of the tile sees (no mask),
    [lo, hi) the diagonal and the ragged tail (masked). Bottom-right: j visible to i iff
    j <= i + len_k - len_q."""
    diag = len_k - len_q
    if CAUSAL:
        hi = tl.minimum(len_k, tl.maximum(start_m + BLOCK_M + diag, 0))
        lo = tl.maximum(start_m + diag + 1, 0) // BLOCK_N * BLOCK_N
        lo = tl.minimum(lo, hi // BLOCK_N * BLOCK_N)
    else:
        hi = len_k
        lo = len_k // BLOCK_N * BLOCK_N
    return lo, hi


@triton.jit
def _tile_ptrs(X, b64, h64, stride_b, stride_h, rows, stride_s, offs_d):
    """Pointers of a (rows, D) tile of the (batch, head) slice; 64-bit offsets."""
    return X + b64 * stride_b + h64 * stride_h + rows[:, None].to(tl.int64) * stride_s + offs_d[None, :]


@triton.jit
def _load_tile(ptrs, row_ok, d_ok, MASK_ROWS: tl.constexpr, MASK_D: tl.constexpr):
    """A (rows, BLOCK_D) tile; masks only what may be out of range, so interior tiles of a full
    head dimension load with no predicate at all."""
    if MASK_ROWS:
        return tl.load(ptrs, mask=row_ok & d_ok, other=0.0)
    elif MASK_D:
        return tl.load(ptrs, mask=d_ok, other=0.0)
    else:
        return tl.load(ptrs)


@triton.jit
def _softmax_state(BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """(acc, l, m) of an empty online softmax: no key seen, m = -inf (log2 units)."""
    return (tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32), tl.zeros([BLOCK_M], dtype=tl.float32),
            tl.full([BLOCK_M], float("-inf"), dtype=tl.float32))


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, lo, hi, offs_m, offs_d, len_k, diag,
               qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, MASKED: tl.constexpr, k_desc=None, v_desc=None, b=0, h_kv=0,
               TMA: tl.constexpr = False, WARP_SPECIALIZE: tl.constexpr = False):
    """Key tiles [lo, hi) into the running (acc, l_i, m_i); m_i is in log2 units (scaled logits).
    With ``TMA`` the K/V tiles come through tensor descriptors (the copy engine on sm90; rows and
    columns past the tensor's end arrive as zeros) instead of pointer loads."""
    offs_n = tl.arange(0, BLOCK_N)
    d_ok = offs_d[None, :] < HEAD_DIM
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        rows = start_n + offs_n
        row_ok = rows[:, None] < len_k
        if TMA:
            k = k_desc.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            k = _load_tile(k_base + rows[:, None].to(tl.int64) * stride_ks + offs_d[None, :], row_ok, d_ok, MASKED,
                           BLOCK_D != HEAD_DIM)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            keep = rows[None, :] < len_k
            if CAUSAL:
                keep = keep & (rows[None, :] <= offs_m[:, None] + diag)
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            # A row with every key masked so far keeps m = -inf; subtract 0 there instead (its
            # exp2 terms are all exp2(-inf) = 0), never -inf - -inf.
            m_sub = tl.where(m_ij == float("-inf"), 0.0, m_ij)
            p = tl.math.exp2(qk - m_sub[:, None])
        else:
            # scale > 0, so max(qk) * scale == max(qk * scale): one multiply-add per element.
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            m_sub = m_ij
            p = tl.math.exp2(qk * qk_scale - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if TMA:
            v = v_desc.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            v = _load_tile(v_base + rows[:, None].to(tl.int64) * stride_vs + offs_d[None, :], row_ok, d_ok, MASKED,
                           BLOCK_D != HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _fwd_tile(Q, K, V, O, LSE, q0, k0, len_q, len_k, pid_m, b, h, h_kv,
              stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
              stride_ob, stride_oh, stride_os, stride_lb, stride_lh, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """Query tile pid_m of one (batch, head) through pointer loads (the body of ``attention_fwd_kernel``)."""
    start_m = pid_m * BLOCK_M
    b64 = b.to(tl.int64)
    q_base = Q + b64 * stride_qb + h.to(tl.int64) * stride_qh + q0.to(tl.int64) * stride_qs
    k_base = K + b64 * stride_kb + h_kv.to(tl.int64) * stride_kh + k0.to(tl.int64) * stride_ks
    v_base = V + b64 * stride_vb + h_kv.to(tl.int64) * stride_vh + k0.to(tl.int64) * stride_vs
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    io_mask = (offs_m[:, None] < len_q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None].to(tl.int64) * stride_qs + offs_d[None, :], mask=io_mask, other=0.0)

    acc, l_i, m_i = _softmax_state(BLOCK_M, BLOCK_D)
    diag = len_k - len_q  # bottom-right causal alignment: key j visible to query i iff j <= i + diag
    lo, hi = _key_range(start_m, len_q, len_k, CAUSAL, BLOCK_M, BLOCK_N)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, 0, lo, offs_m, offs_d,
                               len_k, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, False,
                               WARP_SPECIALIZE=WARP_SPECIALIZE)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, lo, hi, offs_m, offs_d,
                               len_k, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, True)

    # Rows that saw no key: l = 0, acc = 0 -> output 0 and lse = -inf.
    l_div = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_div[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.math.log2(l_div)) * LN2)
    o_base = O + b64 * stride_ob + h.to(tl.int64) * stride_oh + q0.to(tl.int64) * stride_os
    tl.store(o_base + offs_m[:, None].to(tl.int64) * stride_os + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=io_mask)
    l_base = LSE + b64 * stride_lb + h.to(tl.int64) * stride_lh + q0.to(tl.int64)
    tl.store(l_base + offs_m, lse, mask=offs_m < len_q)


@triton.jit
def attention_fwd_kernel(
    Q, K, V, O, LSE, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False,
    PAIRED: tl.constexpr = False,
):
    """BLOCK_M queries of one (batch, head) per program (two tiles with ``PAIRED``, causal only).
    O = softmax(Q Kᵀ scale) V, LSE natural-log.

    ``qk_scale`` = scale * log2(e). Grid: (cdiv(max S_q, BLOCK_M), B * H); with ``PAIRED``
    (cdiv(cdiv(max S_q, BLOCK_M), 2), B * H), each program taking tiles n_m - 1 - i and i
    (``_paired_tiles``).
    """
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    q0, k0, len_q, len_k = _seq_bounds(CU_Q, CU_K, b, S_Q, S_K, VARLEN)
    first, second, count = _program_tiles(S_Q, BLOCK_M, CAUSAL, False, PAIRED)
    # unrolled: a runtime loop around the key loops took 155 registers, not 119
    for t in tl.static_range(2 if PAIRED else 1):
        pid_m = first if t == 0 else second
        # count: the middle tile of an odd n_m comes once; packed batches: past a short sequence's end
        if (t < count) & (pid_m * BLOCK_M < len_q):
            _fwd_tile(Q, K, V, O, LSE, q0, k0, len_q, len_k, pid_m, b, h, h // GROUP,
                      stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh,
                      stride_vs, stride_ob, stride_oh, stride_os, stride_lb, stride_lh, qk_scale,
                      HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL, WARP_SPECIALIZE)


@triton.jit
def _fwd_tma_tile(Q_DESC, K_DESC, V_DESC, O_DESC, LSE, stride_lb, stride_lh, pid_m, b, h, h_kv, S_Q, S_K, qk_scale,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """One query tile through tensor descriptors (the body of ``attention_fwd_tma_kernel``)."""
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = Q_DESC.load([b, h, start_m, 0]).reshape(BLOCK_M, BLOCK_D)
    acc, l_i, m_i = _softmax_state(BLOCK_M, BLOCK_D)
    diag = S_K - S_Q
    lo, hi = _key_range(start_m, S_Q, S_K, CAUSAL, BLOCK_M, BLOCK_N)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, Q_DESC, Q_DESC, 0, 0, 0, lo, offs_m, offs_d, S_K, diag, qk_scale,
                               HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, False, K_DESC, V_DESC, b, h_kv, True,
                               WARP_SPECIALIZE)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, Q_DESC, Q_DESC, 0, 0, lo, hi, offs_m, offs_d, S_K, diag, qk_scale,
                               HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, True, K_DESC, V_DESC, b, h_kv, True)
    l_div = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_div[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.math.log2(l_div)) * LN2)
    O_DESC.store([b, h, start_m, 0], out.to(O_DESC.dtype).reshape(1, 1, BLOCK_M, BLOCK_D))
    l_base = LSE + b.to(tl.int64) * stride_lb + h.to(tl.int64) * stride_lh
    tl.store(l_base + offs_m, lse, mask=offs_m < S_Q)


@triton.jit
def attention_fwd_tma_kernel(
    Q_DESC, K_DESC, V_DESC, O_DESC, LSE,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, qk_scale, BH,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False, PERSISTENT: tl.constexpr = False,
    PAIRED: tl.constexpr = False,
):
    """``attention_fwd_kernel`` with every Q/K/V/O tile moved by tensor descriptors over the 4D
    (B, H, S, D) tensors (TMA on sm90): the copy engine computes addresses, clips the ragged ends
    (zeros in, nothing out) and frees registers. Dense layouts with 16-byte aligned strides only.

    Grid: (cdiv(S_q, BLOCK_M), B * H), one tile per program; or with ``PERSISTENT`` a fixed number
    of programs (about one per SM) that each walk tiles t = pid, pid + programs, ... of the B * H *
    cdiv(S_q, BLOCK_M) tiles (``BH`` = B * H): no launch tail of idle SMs when there are few tiles
    (small batches), consecutive tiles of one head sharing K/V in L2, and causal tiles heaviest first.
    ``PAIRED`` (causal): grid (cdiv(n_m, 2), B * H), two tiles per program as ``attention_fwd_kernel``'s."""
    if PERSISTENT:
        n_m = tl.cdiv(S_Q, BLOCK_M)
        for t in tl.range(tl.program_id(0), n_m * BH, tl.num_programs(0)):
            if CAUSAL:
                pid_m = n_m - 1 - t // BH
                bh = t % BH
            else:
                pid_m = t % n_m
                bh = t // n_m
            h = bh % H
            _fwd_tma_tile(Q_DESC, K_DESC, V_DESC, O_DESC, LSE, stride_lb, stride_lh, pid_m, bh // H, h, h // GROUP,
                          S_Q, S_K, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL, WARP_SPECIALIZE)
    else:
        pid_bh = tl.program_id(1)
        h = pid_bh % H
        first, second, count = _program_tiles(S_Q, BLOCK_M, CAUSAL, False, PAIRED)
        for t in tl.static_range(2 if PAIRED else 1):  # unrolled, as attention_fwd_kernel's
            if t < count:
                _fwd_tma_tile(Q_DESC, K_DESC, V_DESC, O_DESC, LSE, stride_lb, stride_lh, first if t == 0 else second,
                              pid_bh // H, h, h // GROUP, S_Q, S_K, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N,
                              CAUSAL, WARP_SPECIALIZE)


@triton.jit
def attention_fwd_ws_kernel(
    Q, K, V, O, LSE,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, MASK: tl.constexpr,
):
    """Producer/consumer forward for sm90 (FlashAttention-3's split, made by Triton's automatic warp
    specialisation): ONE key loop under ``tl.range(..., warp_specialize=True)``, compiled with
    ``num_warps=4``. Triton then builds three warpgroups: a producer that only issues the TMA loads of
    K and V (host descriptors; Q's descriptor is built on the device) into a ring of ``num_stages`` shared-memory buffers (mbarrier handshakes, registers given
    back with ``setmaxnreg``), and two consumer warpgroups that each take BLOCK_M / 2 of the query
    rows (QKᵀ, softmax, PV on wgmma), so the softmax of one overlaps the products of the other.

    Triton 3.6's pass (``NVGPUWarpSpecialization``) accepts one loop only (a second, masked loop or an
    ``if`` inside the loop aborts the compiler or switches the specialisation off), so the mask is
    applied in every step when ``MASK`` (causal, or S_k not a multiple of BLOCK_N; keys past S_k come
    from TMA as zeros and must be masked): key j of row i is kept iff j <= limit_i, with limit_i =
    min(i + S_k - S_q, S_k - 1) (bottom-right causal) or S_k - 1 — one compare and one select per
    logit. O and the lse are stored with masked pointer stores (a descriptor store of the full tile
    does not survive the split into two consumers). Grid: (cdiv(S_q, BLOCK_M), B * H), causal tiles
    heaviest first; dense layouts with 16-byte strides only (as ``attention_fwd_tma_kernel``)."""
    pid_m, b, h, h_kv = _query_tile(H, GROUP, CAUSAL)
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    io_mask = (offs_m[:, None] < S_Q) & (offs_d[None, :] < HEAD_DIM)
    # Q through a descriptor made here, on the device: the split into two consumers loads half a tile
    # each, and Triton 3.6 re-boxes only device-side descriptors (a host descriptor keeps the whole
    # tile's box: the copy overruns the half buffer and its barrier; pointer loads abort the pass).
    q_desc = tl.make_tensor_descriptor(Q + b64 * stride_qb + h64 * stride_qh, shape=[S_Q, HEAD_DIM],
                                       strides=[stride_qs, 1], block_shape=[BLOCK_M, BLOCK_D])
    k_desc = tl.make_tensor_descriptor(K + b64 * stride_kb + h_kv.to(tl.int64) * stride_kh, shape=[S_K, HEAD_DIM],
                                       strides=[stride_ks, 1], block_shape=[BLOCK_N, BLOCK_D])
    v_desc = tl.make_tensor_descriptor(V + b64 * stride_vb + h_kv.to(tl.int64) * stride_vh, shape=[S_K, HEAD_DIM],
                                       strides=[stride_vs, 1], block_shape=[BLOCK_N, BLOCK_D])
    q = q_desc.load([start_m, 0])
    acc, l_i, m_i = _softmax_state(BLOCK_M, BLOCK_D)
    diag = S_K - S_Q
    if CAUSAL:
        hi = tl.minimum(S_K, tl.maximum(start_m + BLOCK_M + diag, 0))
        limit = tl.minimum(offs_m + diag, S_K - 1)
    else:
        hi = S_K
        limit = offs_m * 0 + (S_K - 1)
    for start_n in tl.range(0, hi, BLOCK_N, warp_specialize=True):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([start_n, 0])
        qk = tl.dot(q, tl.trans(k))
        if MASK:
            qk = tl.where((start_n + offs_n)[None, :] <= limit[:, None], qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            # a row that has seen no visible key keeps m = -inf: subtract 0 there (its terms are 0)
            m_sub = tl.where(m_ij == float("-inf"), 0.0, m_ij)
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # scale > 0: max(qk) * scale = max(qk * scale)
            m_sub = m_ij
        p = tl.math.exp2(qk * qk_scale - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    l_div = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_div[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.math.log2(l_div)) * LN2)
    tl.store(_tile_ptrs(O, b64, h64, stride_ob, stride_oh, offs_m, stride_os, offs_d), out.to(O.dtype.element_ty),
             mask=io_mask)
    tl.store(LSE + b64 * stride_lb + h64 * stride_lh + offs_m, lse, mask=offs_m < S_Q)


@triton.jit
def attention_bwd_preprocess_kernel(
    O, DO, DELTA, CU_Q,
    stride_ob, stride_oh, stride_os,
    stride_dob, stride_doh, stride_dos,
    stride_lb, stride_lh,
    H, S_Q,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, VARLEN: tl.constexpr,
):
    """delta = rowsum(dO * O) in fp32, laid out like the LSE. Grid: (cdiv(max S_q, BLOCK_M), B * H)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    q0, _k0, len_q, _len_k = _seq_bounds(CU_Q, CU_Q, b, S_Q, S_Q, VARLEN)
    start_m = pid_m * BLOCK_M
    if start_m >= len_q:
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < len_q) & (offs_d[None, :] < HEAD_DIM)
    rows = q0 + offs_m
    o = tl.load(_tile_ptrs(O, b64, h64, stride_ob, stride_oh, rows, stride_os, offs_d), mask=mask, other=0.0)
    do = tl.load(_tile_ptrs(DO, b64, h64, stride_dob, stride_doh, rows, stride_dos, offs_d), mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + b64 * stride_lb + h64 * stride_lh + q0.to(tl.int64) + offs_m, delta, mask=offs_m < len_q)


@triton.jit
def _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, dq_base, lse_base, delta_base, stride_qs, stride_dos,
                    stride_dqs, lo, hi, offs_n, offs_d, len_q, diag, sm_scale, qk_scale, DQ_DESC, dq_plane, dq_row0,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                    ATOMIC_DQ: tl.constexpr, BLOCK_D: tl.constexpr = 0):
    """Query tiles [lo, hi) into this key tile's dK, dV (transposed products: P is (N, M)). ``ATOMIC_DQ``
    1: each tile's dQ share added element by element (``tl.atomic_add``); 2: as one bulk tensor
    reduction (TMA ``cp.reduce.async.bulk.tensor`` add, sm90+) into DQ_DESC's (plane, row, column)
    block [dq_plane, dq_row0 + start_m, 0]."""
    d_ok = offs_d[None, :] < HEAD_DIM
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        m_ok = offs_m < len_q
        rows = offs_m[:, None].to(tl.int64)
        q = tl.load(q_base + rows * stride_qs + offs_d[None, :], mask=m_ok[:, None] & d_ok, other=0.0)
        # A query row past the end, or one that saw no key (lse = -inf), has P = 0: make its
        # log2-sum-exp +inf so exp2(s - lse) is 0 for every finite or -inf logit.
        lse = tl.load(lse_base + offs_m, mask=m_ok, other=float("-inf"))
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
        qkT = tl.dot(k, tl.trans(q))
        pT = tl.math.exp2(qkT * qk_scale - lse2[None, :])
        if MASKED:
            pT = tl.where(offs_n[:, None] <= offs_m[None, :] + diag, pT, 0.0)
        do = tl.load(do_base + rows * stride_dos + offs_d[None, :], mask=m_ok[:, None] & d_ok, other=0.0)
        dv += tl.dot(pT.to(do.dtype), do)
        delta = tl.load(delta_base + offs_m, mask=m_ok, other=0.0)
        dpT = tl.dot(v, tl.trans(do))
        dsT = (pT * (dpT - delta[None, :])).to(q.dtype)
        dk += tl.dot(dsT, q)
        if ATOMIC_DQ == 1:
            dq = tl.dot(tl.trans(dsT), k) * sm_scale
            tl.atomic_add(dq_base + rows * stride_dqs + offs_d[None, :], dq, mask=m_ok[:, None] & d_ok,
                          sem="relaxed")
        elif ATOMIC_DQ == 2:
            # rows past len_q (and columns past HEAD_DIM) carry exact zeros (P = 0 there, K's padding is
            # 0), so a block reaching into the next sequence's rows adds nothing to them
            dq = tl.dot(tl.trans(dsT), k) * sm_scale
            DQ_DESC.atomic_add([dq_plane, dq_row0 + start_m, 0], dq.reshape([1, BLOCK_M, BLOCK_D]))
    return dk, dv


@triton.jit
def attention_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, DQ, DQ_DESC, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_dob, stride_doh, stride_dos,
    stride_dkb, stride_dkh, stride_dks,
    stride_dvb, stride_dvh, stride_dvs,
    stride_dqb, stride_dqh, stride_dqs,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, sm_scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr, ATOMIC_DQ: tl.constexpr, PAIRED: tl.constexpr = False,
    ORDER: tl.constexpr = 0,
):
    """One program: BLOCK_N keys of one (batch, K/V head); dK and dV summed over the GROUP query
    heads that read this K/V head and over all their query tiles. Grid: (cdiv(max S_k, BLOCK_N), B * H_kv).
    With ``ATOMIC_DQ`` also adds each tile's dQ share into the fp32 DQ with atomics (1: element-wise
    into DQ's pointers; 2: TMA bulk reductions through DQ_DESC, a (B*H, S_q, D) or, VARLEN, (H, T_q, D)
    descriptor of the fp32 accumulator, block [1, BLOCK_M, BLOCK_D]). ``PAIRED``
    (causal): grid (cdiv(n_k, 2), B * H_kv), program i taking key tile i (the heavy one: seen by the
    most queries) and then n_k - 1 - i, unrolled as the forward's. ``ORDER`` = G > 0 (causal, not paired):
    one key tile per program in the grouped heavy-first launch order (``_grouped_program``)."""
    # key tiles: the heavy one (seen by the most queries) is the first, so no reversal
    first, second, count, pid_bh = _program_coords(S_K, BLOCK_N, False, True, PAIRED, ORDER)
    h_kvs = H // GROUP
    b = pid_bh // h_kvs
    h_kv = pid_bh % h_kvs
    q0, k0, len_q, len_k = _seq_bounds(CU_Q, CU_K, b, S_Q, S_K, VARLEN)
    for t in tl.static_range(2 if PAIRED else 1):
        pid_n = first if t == 0 else second
        if (t < count) & (pid_n * BLOCK_N < len_k):
            _dkdv_tile(Q, K, V, DO, LSE, DELTA, DK, DV, DQ, DQ_DESC, q0, k0, len_q, len_k, pid_n, b, h_kv, H,
                       stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh,
                       stride_vs, stride_dob, stride_doh, stride_dos, stride_dkb, stride_dkh, stride_dks,
                       stride_dvb, stride_dvh, stride_dvs, stride_dqb, stride_dqh, stride_dqs, stride_lb, stride_lh,
                       GROUP, sm_scale, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL, ATOMIC_DQ, VARLEN)


@triton.jit
def _dkdv_tile(Q, K, V, DO, LSE, DELTA, DK, DV, DQ, DQ_DESC, q0, k0, len_q, len_k, pid_n, b, h_kv, H,
               stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
               stride_dob, stride_doh, stride_dos, stride_dkb, stride_dkh, stride_dks, stride_dvb, stride_dvh,
               stride_dvs, stride_dqb, stride_dqh, stride_dqs, stride_lb, stride_lh, GROUP, sm_scale, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, ATOMIC_DQ: tl.constexpr, VARLEN: tl.constexpr):
    """Key tile pid_n of (batch b, K/V head h_kv): the body of ``attention_bwd_dkdv_kernel``."""
    start_n = pid_n * BLOCK_N
    b64 = b.to(tl.int64)
    hk64 = h_kv.to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n[:, None] < len_k) & (offs_d[None, :] < HEAD_DIM)
    rows_n = k0 + offs_n
    k = tl.load(_tile_ptrs(K, b64, hk64, stride_kb, stride_kh, rows_n, stride_ks, offs_d), mask=kv_mask, other=0.0)
    v = tl.load(_tile_ptrs(V, b64, hk64, stride_vb, stride_vh, rows_n, stride_vs, offs_d), mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    diag = len_k - len_q
    hi = len_q
    if CAUSAL:
        # query i sees key j iff i >= j - diag: tiles before the first such row skip, tiles whose
        # first row sees the whole key tile need no mask.
        lo = tl.maximum(start_n - diag, 0) // BLOCK_M * BLOCK_M
        mid = tl.maximum(start_n + BLOCK_N - 1 - diag, 0)
        mid = tl.minimum((mid + BLOCK_M - 1) // BLOCK_M * BLOCK_M, tl.maximum(hi, lo))
        mid = tl.maximum(mid, lo)
    else:
        lo = hi * 0
        mid = lo
    for g in range(GROUP):
        h64 = (h_kv * GROUP + g).to(tl.int64)
        q_base = Q + b64 * stride_qb + h64 * stride_qh + q0.to(tl.int64) * stride_qs
        do_base = DO + b64 * stride_dob + h64 * stride_doh + q0.to(tl.int64) * stride_dos
        dq_base = DQ + b64 * stride_dqb + h64 * stride_dqh + q0.to(tl.int64) * stride_dqs
        l_off = b64 * stride_lb + h64 * stride_lh + q0.to(tl.int64)
        h = h_kv * GROUP + g
        dq_plane = h if VARLEN else b * H + h
        dq_row0 = q0 if VARLEN else q0 * 0
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, dq_base, LSE + l_off, DELTA + l_off, stride_qs,
                                 stride_dos, stride_dqs, lo, mid, offs_n, offs_d, len_q, diag, sm_scale, qk_scale,
                                 DQ_DESC, dq_plane, dq_row0, HEAD_DIM, BLOCK_M, True, ATOMIC_DQ, BLOCK_D)
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, dq_base, LSE + l_off, DELTA + l_off, stride_qs,
                                 stride_dos, stride_dqs, mid, hi, offs_n, offs_d, len_q, diag, sm_scale, qk_scale,
                                 DQ_DESC, dq_plane, dq_row0, HEAD_DIM, BLOCK_M, False, ATOMIC_DQ, BLOCK_D)
    tl.store(_tile_ptrs(DK, b64, hk64, stride_dkb, stride_dkh, rows_n, stride_dks, offs_d),
             (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(_tile_ptrs(DV, b64, hk64, stride_dvb, stride_dvh, rows_n, stride_dvs, offs_d),
             dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_vs, lo, hi, offs_m, offs_d, len_k,
                  diag, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                  MASKED: tl.constexpr):
    """Key tiles [lo, hi) into this query tile's dQ (unscaled)."""
    offs_n = tl.arange(0, BLOCK_N)
    d_ok = offs_d[None, :] < HEAD_DIM
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        rows = start_n + offs_n
        row_ok = rows[:, None] < len_k
        k = _load_tile(k_base + rows[:, None].to(tl.int64) * stride_ks + offs_d[None, :], row_ok, d_ok, MASKED,
                       BLOCK_D != HEAD_DIM)
        v = _load_tile(v_base + rows[:, None].to(tl.int64) * stride_vs + offs_d[None, :], row_ok, d_ok, MASKED,
                       BLOCK_D != HEAD_DIM)
        qk = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(qk * qk_scale - lse2[:, None])
        if MASKED:
            keep = rows[None, :] < len_k
            if CAUSAL:
                keep = keep & (rows[None, :] <= offs_m[:, None] + diag)
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = (p * (dp - delta[:, None])).to(k.dtype)
        dq = tl.dot(ds, k, dq)
    return dq


@triton.jit
def attention_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_dob, stride_doh, stride_dos,
    stride_dqb, stride_dqh, stride_dqs,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, sm_scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr, PAIRED: tl.constexpr = False, ORDER: tl.constexpr = 0,
):
    """One program: dQ of BLOCK_M queries of one (batch, head), over the key tiles they see (the
    forward's split: unmasked tiles, then the diagonal and tail). Grid: (cdiv(max S_q, BLOCK_M), B * H);
    ``PAIRED`` (causal): query tiles n_m - 1 - i and i per program, as the forward's; ``ORDER`` = G > 0
    (causal, not paired): the grouped heavy-first launch order (``_grouped_program``)."""
    first, second, count, pid_bh = _program_coords(S_Q, BLOCK_M, CAUSAL, False, PAIRED, ORDER)
    b = pid_bh // H
    h = pid_bh % H
    q0, k0, len_q, len_k = _seq_bounds(CU_Q, CU_K, b, S_Q, S_K, VARLEN)
    for t in tl.static_range(2 if PAIRED else 1):
        pid_m = first if t == 0 else second
        if (t < count) & (pid_m * BLOCK_M < len_q):
            _dq_tile(Q, K, V, DO, LSE, DELTA, DQ, q0, k0, len_q, len_k, pid_m, b, h, h // GROUP,
                     stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh,
                     stride_vs, stride_dob, stride_doh, stride_dos, stride_dqb, stride_dqh, stride_dqs, stride_lb,
                     stride_lh, sm_scale, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL)


@triton.jit
def _dq_tile(Q, K, V, DO, LSE, DELTA, DQ, q0, k0, len_q, len_k, pid_m, b, h, h_kv,
             stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
             stride_dob, stride_doh, stride_dos, stride_dqb, stride_dqh, stride_dqs, stride_lb, stride_lh,
             sm_scale, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Query tile pid_m of (batch b, head h): the body of ``attention_bwd_dq_kernel``."""
    start_m = pid_m * BLOCK_M
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    io_mask = (offs_m[:, None] < len_q) & (offs_d[None, :] < HEAD_DIM)
    rows_m = q0 + offs_m
    q = tl.load(_tile_ptrs(Q, b64, h64, stride_qb, stride_qh, rows_m, stride_qs, offs_d), mask=io_mask, other=0.0)
    do = tl.load(_tile_ptrs(DO, b64, h64, stride_dob, stride_doh, rows_m, stride_dos, offs_d), mask=io_mask, other=0.0)
    l_off = b64 * stride_lb + h64 * stride_lh + q0.to(tl.int64)
    lse = tl.load(LSE + l_off + offs_m, mask=offs_m < len_q, other=float("-inf"))
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    delta = tl.load(DELTA + l_off + offs_m, mask=offs_m < len_q, other=0.0)
    k_base = K + b64 * stride_kb + h_kv.to(tl.int64) * stride_kh + k0.to(tl.int64) * stride_ks
    v_base = V + b64 * stride_vb + h_kv.to(tl.int64) * stride_vh + k0.to(tl.int64) * stride_vs
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    diag = len_k - len_q
    lo, hi = _key_range(start_m, len_q, len_k, CAUSAL, BLOCK_M, BLOCK_N)
    dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_vs, 0, lo, offs_m, offs_d, len_k,
                       diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, False)
    dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_vs, lo, hi, offs_m, offs_d, len_k,
                       diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, True)
    tl.store(_tile_ptrs(DQ, b64, h64, stride_dqb, stride_dqh, rows_m, stride_dqs, offs_d),
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=io_mask)


@triton.jit
def attention_decode_kernel(
    Q, K, V, O_PART, LSE_PART,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_ps, stride_pb, stride_ph, stride_pm,
    H, GROUP, S_Q, S_K, keys_per_split, qk_scale,
    O, LSE, COUNT, stride_ob, stride_oh, stride_os, stride_lb, stride_lh, splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, FUSE: tl.constexpr = False,
):
    """Split-KV forward for few queries (decode): one program takes one key chunk of one (batch,
    K/V head), and its rows are the GROUP query heads x S_q queries that read that K/V head, so
    K and V are read from memory once per chunk however many query heads share them. Writes the
    chunk's normalised output (fp32) and log2-sum-exp; ``attention_combine_kernel`` merges chunks,
    or with FUSE the last of the ``splits`` programs of a row tile to finish does (``_merge_chunks``):
    each program bumps the tile's COUNT (int32, zero before the launch, left zero after it).
    Grid: (splits, B * H_kv, cdiv(GROUP * S_q, BLOCK_M)). Partials are (splits, B, H, S_q, D)."""
    pid_s = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_m = tl.program_id(2)
    h_kvs = H // GROUP
    b = pid_bh // h_kvs
    h_kv = pid_bh % h_kvs
    b64 = b.to(tl.int64)
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = r < GROUP * S_Q
    g = r // S_Q
    i = r % S_Q  # the query index of each row, for the causal mask
    h = (h_kv * GROUP + g).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    io_mask = r_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(Q + b64 * stride_qb + h[:, None] * stride_qh + i[:, None].to(tl.int64) * stride_qs + offs_d[None, :],
                mask=io_mask, other=0.0)
    k_base = K + b64 * stride_kb + h_kv.to(tl.int64) * stride_kh
    v_base = V + b64 * stride_vb + h_kv.to(tl.int64) * stride_vh
    k_lo = pid_s * keys_per_split
    k_hi = tl.minimum(k_lo + keys_per_split, S_K)
    diag = S_K - S_Q
    # keys j <= diag are visible to every query (i >= 0): only the last S_q keys need the mask
    vis = tl.minimum(k_hi, diag + 1) if CAUSAL else k_hi
    full_hi = k_lo + tl.maximum(vis - k_lo, 0) // BLOCK_N * BLOCK_N
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, k_lo, full_hi, i, offs_d,
                               k_hi, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, full_hi, k_hi, i, offs_d,
                               k_hi, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, CAUSAL, True)
    l_div = tl.where(l_i == 0.0, 1.0, l_i)
    lse2 = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_div))
    p_row = pid_s.to(tl.int64) * stride_ps + b64 * stride_pb + h * stride_ph + i.to(tl.int64) * stride_pm
    tl.store(O_PART + p_row[:, None] * BLOCK_D + offs_d[None, :], acc / l_div[:, None], mask=io_mask)
    tl.store(LSE_PART + p_row, lse2, mask=r_ok)
    if FUSE:
        _merge_chunks(O_PART, LSE_PART, O, LSE, COUNT + pid_bh * tl.num_programs(2) + pid_m, p_row - pid_s.to(
            tl.int64) * stride_ps, stride_ps, b64, h, i, r_ok, io_mask, offs_d, stride_ob, stride_oh, stride_os,
            stride_lb, stride_lh, splits, BLOCK_D)


@triton.jit
def _merge_chunks(O_PART, LSE_PART, O, LSE, count_ptr, row0, stride_ps, b64, h, i, r_ok, io_mask, offs_d,
                  stride_ob, stride_oh, stride_os, stride_lb, stride_lh, splits, BLOCK_D: tl.constexpr):
    """The split-KV merge inside the decode kernel: this program's partials are stored; the CTA
    barrier then one release/acquire atomic at GPU scope publish them (the usual semaphore pattern).
    The program that counts ``splits`` merges every chunk of its rows in chunk order from memory
    (the same arithmetic whichever program is last: deterministic) and re-arms the counter to 0
    (the launch is replayable, e.g. in a CUDA graph). Loads bypass L1 (.cg): the lines are other SMs'."""
    tl.debug_barrier()
    done = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if done == splits - 1:
        m = tl.full(row0.shape, float("-inf"), dtype=tl.float32)
        for s in range(0, splits):
            m = tl.maximum(m, tl.load(LSE_PART + s * stride_ps + row0, mask=r_ok, other=float("-inf"),
                                      cache_modifier=".cg"))
        m_sub = tl.where(m == float("-inf"), 0.0, m)
        total = tl.zeros(row0.shape, dtype=tl.float32)
        out = tl.zeros(io_mask.shape, dtype=tl.float32)
        for s in range(0, splits):
            w = tl.math.exp2(tl.load(LSE_PART + s * stride_ps + row0, mask=r_ok, other=float("-inf"),
                                     cache_modifier=".cg") - m_sub)
            total += w
            o_s = tl.load(O_PART + (s * stride_ps + row0)[:, None] * BLOCK_D + offs_d[None, :], mask=io_mask,
                          other=0.0, cache_modifier=".cg")
            out += o_s * w[:, None]
        none = total == 0.0
        out = out / tl.where(none, 1.0, total)[:, None]
        tl.store(O + b64 * stride_ob + h[:, None] * stride_oh + i[:, None].to(tl.int64) * stride_os + offs_d[None, :],
                 out.to(O.dtype.element_ty), mask=io_mask)
        lse = tl.where(none, float("-inf"), (m_sub + tl.math.log2(tl.where(none, 1.0, total))) * LN2)
        tl.store(LSE + b64 * stride_lb + h * stride_lh + i, lse, mask=r_ok)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")


@triton.jit
def attention_combine_kernel(
    O_PART, LSE_PART, O, LSE,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    stride_ps, H, S_Q, splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Merge the split-KV partials of one query row: weights 2^(lse_s - max), output the weighted
    mean, lse = log of the total (natural). A row no chunk saw keeps 0 and -inf. Grid: (B * H * S_q,)."""
    row = tl.program_id(0).to(tl.int64)  # = (b * H + h) * S_Q + i, the partials' row index
    i = row % S_Q
    bh = row // S_Q
    b = bh // H
    h = bh % H
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < splits
    lse_s = tl.load(LSE_PART + offs_s.to(tl.int64) * stride_ps + row, mask=s_ok, other=float("-inf"))
    m = tl.max(lse_s, 0)
    m_sub = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse_s - m_sub)
    total = tl.sum(w, 0)
    o_s = tl.load(O_PART + (offs_s.to(tl.int64) * stride_ps + row)[:, None] * BLOCK_D + offs_d[None, :],
                  mask=s_ok[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)
    out = tl.sum(o_s * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    tl.store(O + b * stride_ob + h * stride_oh + i * stride_os + offs_d, out.to(O.dtype.element_ty),
             mask=offs_d < HEAD_DIM)
    lse = tl.where(total == 0.0, float("-inf"), (m_sub + tl.math.log2(tl.where(total == 0.0, 1.0, total))) * LN2)
    tl.store(LSE + b * stride_lb + h * stride_lh + i, lse)
