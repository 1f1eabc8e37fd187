"""Flash-attention forward for sm90 (Hopper) in Gluon, Triton's explicit-layout dialect.

Why a second forward: Triton 3.6 compiles ``attention_fwd_kernel`` so that the softmax of a key tile
runs after both matrix products of that tile, never beside them; FlashAttention-3 overlaps the two
(the exp2 of tile j on the special-function units while the tensor cores compute P_{j-1} V_{j-1}).
Gluon states layouts, shared memory, barriers and the asynchronous ``wgmma`` waits by hand, so the
overlap is written here explicitly. sm90 only (``wgmma``, TMA); ``tilecraft.ops.attention`` routes
to it only for CUDA tensors on sm90 that tensor descriptors can address, and where it was measured
faster; everything else runs the portable Triton kernels. The Triton interpreter cannot run Gluon.

One program = BLOCK_M = 128 queries of one (batch, head), ``num_warps=8``: two warpgroups of 64
rows each (the wgmma accumulator layout puts 16 rows on each warp). Per program:

* Q (BLOCK_M x D) comes once by TMA into shared memory; K and V tiles (BLOCK_N x D) by TMA into a
  ring of ``STAGES`` slots, each with its own mbarrier (K and V separately, so Q K^T can start
  before V has landed); the tile ``STAGES`` ahead is issued as soon as its slot is free.
* S = Q K^T: ``warpgroup_mma`` with both operands in shared memory (K^T is a permuted view).
* Online softmax in base 2 with scale * log2(e) folded into one multiplier (``qk_scale``): one FFMA
  and one MUFU.EX2 per logit; rows that see no key keep m = -inf and subtract 0.
* P (bf16/fp16) feeds O += P V from registers (``DotOperandLayout`` of O's wgmma layout): S's
  accumulator layout and that operand layout hold the same elements in the same threads.
* ``PIPELINE`` (FlashAttention-3's intra-warpgroup overlap): in step j the program issues
  S_j = Q K_j^T and then O += P_{j-1} V_{j-1}, waits for S_j only (wgmma groups retire in order),
  computes the softmax of S_j while the P V product is still on the tensor cores, then waits for
  it and rescales O. Without ``PIPELINE``: S_j, wait, softmax, P_j V_j, wait (the plain order).
* Causal (bottom-right aligned, as the Triton kernels): key tiles every query of the tile sees take
  no mask; only tiles from ``lo`` on (the diagonal, and the ragged key tail) are masked (a uniform
  branch per tile); tiles past the diagonal are never loaded. Causal grids run the heaviest query
  tiles first.
* Epilogue: O / l in registers, cast, written to Q's shared memory (Q is dead by then) and stored
  by TMA (rows past S_q are clipped by the descriptor); lse (natural log) by pointer stores.

Tensor descriptors are 4D over (B, H, S, D) with any 16-byte aligned strides (bhsd and bshd), block
[1, 1, rows, D]: the copy engine clips at the end of each (batch, head) sequence, reading zeros.

``attention_fwd_gluon_ws_kernel`` is FlashAttention-3's warp-specialised schedule of the same
computation. In the kernel above both warpgroups of a program meet at a CTA barrier before every
K/V refill, so they run their softmax at the same time and the tensor cores idle meanwhile. Here
``gl.warp_specialize`` splits the program into a 1-warp TMA loader (24 registers by ``setmaxnreg``)
and two consumer partitions of one warpgroup each (64 query rows, 240 registers). The ring's slots
have "full" mbarriers (TMA bytes) and "empty" ones (count 2: each consumer arrives once the products
reading the slot have retired), so no CTA-wide barrier remains. With ``PINGPONG`` two "turn"
mbarriers hand the tensor cores from one consumer to the other: a consumer issues its products
(P_j V_j, then S_{j+1} = Q K_{j+1}^T) only on its turn and passes the turn right after issuing, so
one warpgroup's softmax runs while the other's products are on the tensor cores. Its grid is 1D over
tiles (``_tile_coords``): one program per tile, or with ``PERSISTENT`` one per SM walking tiles p,
p + programs, ... (the loader runs ahead into the next tile; where shared memory allows, O has its own
buffer and its TMA store stays in flight while the next tile starts).

Round 10 options of the warp-specialised kernel: ``BLOCK_M`` = 192 runs three consumer warpgroups
(turns passed round-robin); ``EARLY`` converts P (plain order: and rescales O) right after the softmax,
in its basic block, so ptxas can interleave that work with the MUFU.EX2s; ``TREE`` computes the row
max and row sum as in-register trees (``_row_partials``) and keeps l as per-lane partial sums.

``POLY`` (both kernels): in every POLY-th key tile the odd columns' exp2 runs on the FMA units
(``_exp2_fma``, FlashAttention-4's software exponential) and the even columns' on the MUFU, which
otherwise does every exp2 of the softmax.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from tilecraft.kernels.attention import _key_range
from tilecraft.kernels.barriers import named_arrive, named_sync, slot_release, slot_wait_free

LN2: gl.constexpr = gl.constexpr(0.6931471805599453)
# ``LAZY``: a row's max is raised only when a tile exceeds it by more than this (log2 units): P <= 2^8
LAZY_RESCALE: gl.constexpr = gl.constexpr(8.0)
#: 2^f ~ 1 + f (c1 + f (c2 + f c3)) on [-1/2, 1/2]: the relative-error minimax cubic with the constant
#: term held at 1 (so 2^n comes out exact); largest relative error 1.014e-4 (``_exp2_fma``).
EXP2_POLY = (0.6932829, 0.24221037, 0.05500858)
#: 1.5 * 2^23: x + this, in fp32, holds round(x) in its low mantissa bits (|x| < 2^22).
ROUND_MAGIC = 12582912.0
_C1: gl.constexpr = gl.constexpr(EXP2_POLY[0])
_C2: gl.constexpr = gl.constexpr(EXP2_POLY[1])
_C3: gl.constexpr = gl.constexpr(EXP2_POLY[2])
_MAGIC: gl.constexpr = gl.constexpr(ROUND_MAGIC)


@gluon.jit
def _issue_tile(desc, smem, bars, j, b, h_kv, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, pred, base=0):
    """TMA of key tile j of K (or V) into ring slot (base + j) % STAGES, completing on that slot's
    barrier (``base``: the ring's count of tiles loaded for the program's earlier query tiles)."""
    s = (base + j) % STAGES
    bar = bars.index(s)
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [b, h_kv, j * BLOCK_N, 0], bar, smem.index(s), pred=pred)


@gluon.jit
def _qk_issue(q2d, k_smem, k_bars, j, s_zero, tile2d_kv: gl.constexpr, STAGES: gl.constexpr):
    """Wait for key tile j in its ring slot and issue S = Q K_j^T (asynchronous wgmma, K^T a permuted view)."""
    s = j % STAGES
    mbarrier.wait(k_bars.index(s), (j // STAGES) & 1)
    BLOCK_N: gl.constexpr = k_smem.shape[3]
    HEAD_DIM: gl.constexpr = k_smem.shape[4]
    k_t = k_smem.index(s)._reinterpret(k_smem.dtype, [BLOCK_N, HEAD_DIM], tile2d_kv).permute((1, 0))
    return warpgroup_mma(q2d, k_t, s_zero, use_acc=False, is_async=True)


@gluon.jit
def _pv_issue(p, acc, v_smem, v_bars, j, p_layout: gl.constexpr, tile2d_kv: gl.constexpr, STAGES: gl.constexpr):
    """Wait for value tile j in its ring slot and issue O += P V_j (P from registers, asynchronous);
    returns (the accumulator token, P's operand, which the wait must keep alive)."""
    s = j % STAGES
    mbarrier.wait(v_bars.index(s), (j // STAGES) & 1)
    BLOCK_N: gl.constexpr = v_smem.shape[3]
    HEAD_DIM: gl.constexpr = v_smem.shape[4]
    v_t = v_smem.index(s)._reinterpret(v_smem.dtype, [BLOCK_N, HEAD_DIM], tile2d_kv)
    p_op = gl.convert_layout(p.to(v_smem.dtype), p_layout)
    return warpgroup_mma(p_op, v_t, acc, is_async=True), p_op


@gluon.jit
def _tile_coords(t, n_m, H, GROUP, S_Q, S_K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """Tile t of the (B * H) x n_m query tiles, query tiles of one (batch, head) consecutive (heaviest
    first when causal): ``_tile_at`` of that query tile."""
    pid_m = t % n_m
    if CAUSAL:
        pid_m = n_m - 1 - pid_m  # heaviest query tiles first
    return _tile_at(pid_m, t // n_m, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CAUSAL)


@gluon.jit
def _grouped(t, n_m, total, ORDER: gl.constexpr):
    """Launch position t -> ``_tile_coords``'s index (bh * n_m + rank, rank 0 the heaviest causal tile)
    when ``ORDER`` = G > 0: the (batch, head)s in groups of G, and inside a group every head's
    heaviest tile, then every head's second heaviest, and so on, so that the tiles launched last
    are the lightest of the last group (a near-LPT order: the launch's tail is short) while the
    programs in flight share the K/V of G heads in L2. ORDER = 0: t itself (each head's tiles
    together, heaviest first)."""
    if ORDER > 0:
        per: gl.constexpr = ORDER
        g = t // (per * n_m)
        r = t - g * (per * n_m)
        gh = gl.minimum(per, total // n_m - g * per)  # heads in this group (the last may have fewer)
        return (g * per + r % gh) * n_m + r // gh
    else:
        return t


@gluon.jit
def _tile_at(pid_m, pid_bh, H, GROUP, S_Q, S_K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """Query tile pid_m of (batch, head) pid_bh: its (batch, head, K/V head, first query) and key range:
    [0, lo) is seen by every query of the tile (no mask), [lo, hi) is masked; n_tiles key tiles in all."""
    b = pid_bh // H
    h = pid_bh % H
    start_m = pid_m * BLOCK_M
    diag = S_K - S_Q  # key j visible to query i iff j <= i + diag
    lo, hi = _key_range(start_m, S_Q, S_K, CAUSAL, BLOCK_M, BLOCK_N)  # the Triton kernels' split
    return b, h, h // GROUP, start_m, lo, hi, diag, gl.cdiv(hi, BLOCK_N)


@gluon.jit
def _exp2_fma(x):
    """2^x on the FMA units (FlashAttention-4's software exponential): round x to n by the 1.5 * 2^23
    trick, a degree-3 polynomial for 2^f on f = x - n in [-1/2, 1/2] (relative error 1.0e-4, far below
    bf16's 3.9e-3), n added to the exponent bits. x <= -127 (and -inf) gives exactly 0: x is clamped
    there, f = 0, the polynomial is 1.0 and its exponent field drops to 0."""
    x = gl.maximum(x, -127.0)
    t = x + _MAGIC
    f = x - (t - _MAGIC)
    p = f * _C3 + _C2
    p = p * f + _C1
    p = p * f + 1.0
    bits = p.to(gl.int32, bitcast=True) + (t.to(gl.int32, bitcast=True) << 23)
    return bits.to(gl.float32, bitcast=True)


@gluon.jit
def _exp2_split(x, poly):
    """exp2 of a (rows, BLOCK_N) tile in the wgmma accumulator layout; with ``poly`` (a uniform
    runtime flag) the odd columns (each thread holds column pairs, so the split moves no data) go
    to the FMA units and the even ones to the MUFU, which otherwise does every exp2 of the softmax."""
    if poly:
        M: gl.constexpr = x.shape[0]
        N: gl.constexpr = x.shape[1]
        even, odd = gl.split(x.reshape([M, N // 2, 2]))
        y = gl.join(gl.exp2(even), _exp2_fma(odd)).reshape([M, N])
        return gl.convert_layout(y, x.type.layout)
    else:
        return gl.exp2(x)


@gluon.jit
def _row_partials(x, IS_MAX: gl.constexpr):
    """(M, N) in the wgmma accumulator layout -> (M, 4): each thread's own columns of each row
    combined (max or sum) by a tree in registers, no data moved. A thread holds, per row, the
    columns 8k + 2 (lane % 4) + e (k < N/8, e < 2): the top column bits are register bits, so
    halving the columns from the top (reshape (M, 2, N/2), combine over the 2) stays inside each
    thread down to 8 columns, then the pair e; the 4 left are the 4 lanes of the row."""
    M: gl.constexpr = x.shape[0]
    y = x
    for _ in gl.static_range(x.shape[1].bit_length() - 4):  # N -> 8 columns
        y = y.reshape([M, 2, y.shape[1] // 2])
        if IS_MAX:
            y = gl.max(y, 1)
        else:
            y = gl.sum(y, 1)
    y = y.reshape([M, 4, 2])
    if IS_MAX:
        return gl.max(y, 2)
    else:
        return gl.sum(y, 2)


@gluon.jit
def _softmax_step(qk, m_i, l_i, start_n, lo, hi, rows, cols, diag, qk_scale, CAUSAL: gl.constexpr,
                  POLY: gl.constexpr = 0, TREE: gl.constexpr = False, LAZY: gl.constexpr = False):
    """One online-softmax step on raw logits ``qk`` (fp32, S's wgmma layout). Returns
    (p, alpha, m_new, l_new); m in log2 units of the scaled logits. ``POLY`` = k > 0: the odd
    columns of every k-th key tile take the FMA units' exp2 (``_exp2_split``). ``TREE``: the row
    max and the row sum by ``_row_partials`` (depth 5 instead of a chain of N/4 dependent
    instructions per row), and ``l`` kept as (M, 4) per-lane partial sums (no shuffles per key
    tile; ``gl.sum(l, 1)`` once at the end). ``LAZY``: a row keeps its max until the tile's raises it
    by more than ``LAZY_RESCALE`` (log2 units), FlashAttention-4's conditional rescaling: its alpha is
    then exactly 1 (``_rescale`` skips O's multiply when every row's is) and its P values are at most
    2^LAZY_RESCALE, which fp32 sums and bf16/fp16 P hold."""
    if start_n >= lo:
        # diagonal tile or ragged key tail: mask before the row max (scale > 0, so -inf stays -inf)
        keep = (start_n + cols)[None, :] < hi
        if CAUSAL:
            keep = keep & ((start_n + cols)[None, :] <= rows[:, None] + diag)
        qk = gl.where(keep, qk, float("-inf"))
    if TREE:
        m_new = gl.maximum(m_i, gl.convert_layout(gl.max(_row_partials(qk, True), 1), m_i.type.layout) * qk_scale)
    else:
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
    if LAZY:
        m_new = gl.where(m_new > m_i + LAZY_RESCALE, m_new, m_i)  # m_i = -inf: any key seen takes its max
    # A row that has seen no key yet keeps m = -inf: subtract 0 there (its terms are exp2(-inf) = 0).
    m_sub = gl.where(m_new == float("-inf"), 0.0, m_new)
    if TREE:
        alpha = gl.exp2(m_i - m_sub)  # first: O's rescale can then run beside the exp2s of P
    x = qk * qk_scale - m_sub[:, None]
    if POLY > 0:
        p = _exp2_split(x, (start_n // qk.shape[1]) % POLY == 0)
    else:
        p = gl.exp2(x)
    if not TREE:
        alpha = gl.exp2(m_i - m_sub)
    if TREE:
        ps = _row_partials(p, False)
        l_new = l_i * gl.convert_layout(alpha, gl.SliceLayout(1, ps.type.layout))[:, None] + ps
    else:
        l_new = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_new


@gluon.constexpr_function
def _lazy_scale_asm(n):
    """PTX for ``_rescale``'s lazy path on one thread's n accumulator elements: operands $0..$n-1 the
    results (tied to the inputs $n..$2n-1), $2n..$3n-1 each element's alpha, $3n.. the warp's flag
    (``_warp_any_below_one``, the same in every element). The multiplies are branched over (warp-uniform)
    when the flag is 0."""
    body = "\n\t".join(f"mul.f32 ${i}, ${i}, ${2 * n + i};" for i in range(n))
    return ("{\n\t.reg .pred %lz;\n\t"
            f"setp.ne.u32 %lz, ${3 * n}, 0;\n\t@!%lz bra.uni LZ${{:uid}};\n\t{body}\nLZ${{:uid}}:\n\t}}")


@gluon.constexpr_function
def _lazy_scale_constraints(n):
    return ",".join(["=f"] * n + [str(i) for i in range(n)] + ["f"] * n + ["r"] * n)


@gluon.jit
def _warp_any_below_one(alpha):
    """1 in every element where any row of the calling warp has alpha < 1, else 0 (``vote.sync.any``):
    ``alpha`` in the row slice of the accumulator layout, two rows (r, r + 8) per thread."""
    return gl.inline_asm_elementwise(
        "{\n\t.reg .pred %la, %lb;\n\tsetp.lt.f32 %la, $2, 0f3F800000;\n\tsetp.lt.f32 %lb, $3, 0f3F800000;"
        "\n\tor.pred %la, %la, %lb;\n\tvote.sync.any.pred %la, %la, -1;\n\tselp.u32 $0, 1, 0, %la;"
        "\n\tmov.u32 $1, $0;\n\t}",
        "=r,=r,f,f", [alpha], dtype=gl.int32, is_pure=True, pack=2)


@gluon.jit
def _rescale(acc, alpha, row_o: gl.constexpr, LAZY: gl.constexpr):
    """O's rows times alpha (the online softmax's correction). ``LAZY``: each warp branches over its
    multiplies when none of its 16 rows has alpha < 1 (no row's max moved; ``_softmax_step``'s lazy
    max): a warp holds whole rows of O, so the decision needs no other warp."""
    a = gl.convert_layout(alpha, row_o)
    if LAZY:
        # one warp holds 16 rows of O: D / 2 elements a thread, all in one asm instance
        N: gl.constexpr = acc.shape[1] // 2
        flag = _warp_any_below_one(a)
        acc = gl.inline_asm_elementwise(_lazy_scale_asm(N), _lazy_scale_constraints(N),
                                        [acc, a[:, None], flag[:, None]], dtype=gl.float32, is_pure=True, pack=N)
    else:
        acc = acc * a[:, None]
    return acc


@gluon.jit
def _fwd_gluon_tile(q_desc, k_desc, v_desc, o_desc, LSE, stride_lb, stride_lh, q_smem, k_smem, v_smem, q_bar, k_bars,
                    v_bars, pid_m, pid_bh, base, q_phase, H, GROUP, S_Q, S_K, qk_scale,
                    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                    CAUSAL: gl.constexpr, PIPELINE: gl.constexpr, num_warps: gl.constexpr, POLY: gl.constexpr,
                    LAZY: gl.constexpr = False):
    """Query tile pid_m of (batch, head) pid_bh (the body of ``attention_fwd_gluon_kernel``): Q into
    ``q_smem`` (its barrier's phase ``q_phase``), the key tiles through the K/V rings from ring count
    ``base``, O out through ``q_smem`` by TMA (waited for). Returns the number of key tiles it loaded."""
    dtype: gl.constexpr = q_desc.dtype
    # wgmma accumulator layouts: m16 per warp, 8 warps along M (two warpgroups of 64 rows each);
    # n = the whole tile width (BLOCK_N for S, HEAD_DIM for O), k = 16 for 16-bit operands.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    tile2d_q: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    tile2d_kv: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    b, h, h_kv, start_m, lo, hi, diag, n_tiles = _tile_at(pid_m, pid_bh, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CAUSAL)
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, h, start_m, 0], q_bar, q_smem)
    for t in gl.static_range(STAGES):
        _issue_tile(k_desc, k_smem, k_bars, t, b, h_kv, BLOCK_N, STAGES, t < n_tiles, base)
        _issue_tile(v_desc, v_smem, v_bars, t, b, h_kv, BLOCK_N, STAGES, t < n_tiles, base)

    q2d = q_smem._reinterpret(dtype, [BLOCK_M, HEAD_DIM], tile2d_q)
    rows = start_m + gl.arange(0, BLOCK_M, layout=row_s)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([BLOCK_M], 0.0, gl.float32, layout=row_s)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    mbarrier.wait(q_bar, q_phase)

    if n_tiles > 0:
        if PIPELINE:
            # prologue: S_0 and its softmax
            qk = _qk_issue(q2d, k_smem, k_bars, base, s_zero, tile2d_kv, STAGES)
            qk = warpgroup_mma_wait(0, deps=(qk,))
            p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, 0, lo, hi, rows, cols, diag, qk_scale, CAUSAL, POLY,
                                               LAZY=LAZY)
            for j in range(1, n_tiles):
                # S_j = Q K_j^T and O += P_{j-1} V_{j-1}, both asynchronous, in this order
                qk = _qk_issue(q2d, k_smem, k_bars, base + j, s_zero, tile2d_kv, STAGES)
                acc, p_op = _pv_issue(p, acc, v_smem, v_bars, base + j - 1, p_layout, tile2d_kv, STAGES)
                # S_j done (groups retire in order), P_{j-1} V_{j-1} may still run: softmax beside it
                qk = warpgroup_mma_wait(1, deps=(qk,))
                p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, j * BLOCK_N, lo, hi, rows, cols, diag, qk_scale,
                                                   CAUSAL, POLY, LAZY=LAZY)
                # Then wait for P_{j-1} V_{j-1}. The wait goes into a block of its own behind a branch
                # (qk_scale > 0 always holds; the other side orders its two statements differently,
                # so LLVM cannot merge the sides): in the same block as the softmax, ptxas scheduled
                # the blocking wait above the exp2s and nothing overlapped (SASS, and 420 against
                # 497 TFLOP/s for the plain order on an H200).
                if qk_scale > 0.0:
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                    gl.thread_barrier()
                else:
                    gl.thread_barrier()
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                acc = _rescale(o_done, alpha, row_o, LAZY)
                # K_{j-1} and V_{j-1} are consumed by both warpgroups (the barrier above): refill
                nxt = j - 1 + STAGES
                _issue_tile(k_desc, k_smem, k_bars, nxt, b, h_kv, BLOCK_N, STAGES, nxt < n_tiles, base)
                _issue_tile(v_desc, v_smem, v_bars, nxt, b, h_kv, BLOCK_N, STAGES, nxt < n_tiles, base)
            # epilogue: the last P V
            acc, p_op = _pv_issue(p, acc, v_smem, v_bars, base + n_tiles - 1, p_layout, tile2d_kv, STAGES)
            acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
        else:
            for j in range(n_tiles):
                qk = _qk_issue(q2d, k_smem, k_bars, base + j, s_zero, tile2d_kv, STAGES)
                qk = warpgroup_mma_wait(0, deps=(qk,))
                p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, j * BLOCK_N, lo, hi, rows, cols, diag, qk_scale,
                                                   CAUSAL, POLY, LAZY=LAZY)
                acc = _rescale(acc, alpha, row_o, LAZY)
                acc, p_op = _pv_issue(p, acc, v_smem, v_bars, base + j, p_layout, tile2d_kv, STAGES)
                acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                gl.thread_barrier()
                nxt = j + STAGES
                _issue_tile(k_desc, k_smem, k_bars, nxt, b, h_kv, BLOCK_N, STAGES, nxt < n_tiles, base)
                _issue_tile(v_desc, v_smem, v_bars, nxt, b, h_kv, BLOCK_N, STAGES, nxt < n_tiles, base)

    # Rows that saw no key: l = 0, acc = 0 -> output 0 and lse = -inf.
    l_o = gl.convert_layout(l_i, row_o)
    l_div = gl.where(l_o == 0.0, 1.0, l_o)
    out = acc / l_div[:, None]
    q2d.store(out.to(dtype))
    fence_async_shared()
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [b, h, start_m, 0], q_smem)

    lse = gl.where(l_i == 0.0, float("-inf"), (m_i + gl.log2(gl.where(l_i == 0.0, 1.0, l_i))) * LN2)
    l_ptrs = LSE + b.to(gl.int64) * stride_lb + h.to(gl.int64) * stride_lh + rows
    gl.store(l_ptrs, lse, mask=rows < S_Q)
    tma.store_wait(0)
    return n_tiles


@gluon.jit
def attention_fwd_gluon_kernel(
    q_desc, k_desc, v_desc, o_desc, LSE,
    stride_lb, stride_lh,
    H, GROUP, S_Q, S_K, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, PIPELINE: gl.constexpr, num_warps: gl.constexpr, POLY: gl.constexpr = 0,
    PAIRED: gl.constexpr = False, ORDER: gl.constexpr = 0, LAZY: gl.constexpr = False,
):
    """O = softmax(Q K^T scale) V and LSE (natural log) for one 128-query tile of one (batch, head).

    Grid (cdiv(S_q, BLOCK_M), B * H); ``qk_scale`` = scale * log2(e); ``num_warps`` = 8. ``PAIRED``
    (causal): grid (cdiv(n_m, 2), B * H), each program taking query tiles n_m - 1 - i and i one after
    the other through the same shared memory (the K/V rings' slots and phases carry on). ``ORDER`` = G > 0
    (causal, not paired): the launch order of ``_grouped`` (heads in groups of G, heaviest tiles first)."""
    gl.static_assert(not (PAIRED and ORDER > 0), "paired tiles keep their own order")
    # shared memory: Q (later O), the K and V rings, one barrier per slot and one for Q
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [1, 1, BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(s), count=1)
        mbarrier.init(v_bars.index(s), count=1)
    fence_async_shared()

    i = gl.program_id(0)
    bh = gl.program_id(1)
    if ORDER > 0:
        n_m = gl.num_programs(0)
        tt = _grouped(i + bh * n_m, n_m, n_m * gl.num_programs(1), ORDER)
        bh = tt // n_m
        first = n_m - 1 - tt % n_m
    elif PAIRED:
        first = gl.cdiv(S_Q, BLOCK_M) - 1 - i  # the heavy tile, then the light tile i
    elif CAUSAL:
        first = gl.num_programs(0) - 1 - i  # heaviest query tiles first
    else:
        first = i
    # the two tiles unrolled (a runtime loop around the key loop costs registers, as in the Triton kernel)
    base = _fwd_gluon_tile(q_desc, k_desc, v_desc, o_desc, LSE, stride_lb, stride_lh, q_smem, k_smem, v_smem, q_bar,
                           k_bars, v_bars, first, bh, 0, 0, H, GROUP, S_Q, S_K, qk_scale, HEAD_DIM,
                           BLOCK_M, BLOCK_N, STAGES, CAUSAL, PIPELINE, num_warps, POLY, LAZY)
    if PAIRED:
        if i < first:  # the middle tile of an odd count comes once
            # every warp done with the first tile's Q/O buffer and ring slots before new loads land there
            gl.thread_barrier()
            _fwd_gluon_tile(q_desc, k_desc, v_desc, o_desc, LSE, stride_lb, stride_lh, q_smem, k_smem, v_smem, q_bar,
                            k_bars, v_bars, i, bh, base, 1, H, GROUP, S_Q, S_K, qk_scale, HEAD_DIM,
                            BLOCK_M, BLOCK_N, STAGES, CAUSAL, PIPELINE, num_warps, POLY, LAZY)

    mbarrier.invalidate(q_bar)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(s))
        mbarrier.invalidate(v_bars.index(s))


# ------------------------------------------------------------------------------------------------
# Warp-specialised ping-pong forward (FlashAttention-3's schedule, sm90)
# ------------------------------------------------------------------------------------------------
@gluon.jit
def _ws_loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty, v_empty,
               n_m, total, H, GROUP, S_Q, S_K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr, PERSISTENT: gl.constexpr, PAIRED: gl.constexpr,
               ORDER: gl.constexpr, SLOT_THREADS: gl.constexpr):
    """One warp, over this program's tiles: K_0 and V_0, each consumer's Q rows once its Q buffer is
    free (``q_empty``), then K_j and V_j into ring slot (count % STAGES) as soon as both consumers
    have released the slot (``*_empty``, count 2); the copies complete on ``*_full``. The ring's
    count runs on across tiles, so the loads of the next tile start while this one is computed."""
    if PERSISTENT or PAIRED:
        count = 0
        it = 0
        first, end, step = _ws_tiles(n_m, total, PAIRED)
        for t in range(first, end, step):
            count = _ws_load_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full,
                                  k_empty, v_empty, _grouped(t, n_m, total, ORDER), it, count, n_m, H, GROUP, S_Q,
                                  S_K, BLOCK_M, BLOCK_N, CONSUMERS, CAUSAL, SLOT_THREADS)
            it += 1
    else:
        _ws_load_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty, v_empty,
                      _grouped(gl.program_id(0), n_m, total, ORDER), 0, 0, n_m, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N,
                      CONSUMERS, CAUSAL, SLOT_THREADS)


@gluon.jit
def _ws_tiles(n_m, total, PAIRED: gl.constexpr):
    """The program's tiles t (``_tile_coords``'s index) as range(first, end, step): with ``PAIRED`` program
    p of the cdiv(n_m, 2) x BH grid takes t = bh * n_m + i (query tile n_m - 1 - i, causal's heavy one)
    and t = bh * n_m + n_m - 1 - i (query tile i), once when they coincide (the middle of an odd n_m);
    else (persistent) p, p + programs, ... up to ``total``."""
    if PAIRED:
        half = (n_m + 1) // 2
        bh = gl.program_id(0) // half
        i = gl.program_id(0) % half
        return bh * n_m + i, bh * n_m + n_m - i, gl.maximum(n_m - 1 - 2 * i, 1)
    else:
        return gl.program_id(0), total, gl.num_programs(0)


@gluon.jit
def _ws_load_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty, v_empty,
                  t, it, count, n_m, H, GROUP, S_Q, S_K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr, SLOT_THREADS: gl.constexpr):
    """The loads of tile t, the loader's it-th; ``count``: K/V tiles loaded before (returned advanced)."""
    STAGES: gl.constexpr = k_smem.type.shape[0]
    ROWS: gl.constexpr = q_smem.type.shape[3]
    b, h, h_kv, start_m, lo, hi, diag, n_tiles = _tile_coords(t, n_m, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CAUSAL)
    for j in range(n_tiles):
        s = (count + j) % STAGES
        slot_wait_free(k_empty, s, SLOT_BAR + s, count + j, SLOT_THREADS)
        mbarrier.expect(k_full.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [b, h_kv, j * BLOCK_N, 0], k_full.index(s), k_smem.index(s))
        slot_wait_free(v_empty, s, SLOT_BAR + STAGES + s, count + j, SLOT_THREADS)
        mbarrier.expect(v_full.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [b, h_kv, j * BLOCK_N, 0], v_full.index(s), v_smem.index(s))
        if j == 0:
            _ws_load_q(q_desc, q_smem, q_full, q_empty, b, h, start_m, it, ROWS, CONSUMERS)
    if n_tiles == 0:
        _ws_load_q(q_desc, q_smem, q_full, q_empty, b, h, start_m, it, ROWS, CONSUMERS)
    return count + n_tiles


@gluon.jit
def _ws_load_q(q_desc, q_smem, q_full, q_empty, b, h, start_m, it, ROWS: gl.constexpr, CONSUMERS: gl.constexpr):
    """Each consumer's Q rows of the program's it-th tile, once that consumer freed its Q buffer."""
    for c in gl.static_range(CONSUMERS):
        mbarrier.wait(q_empty.index(c), (it & 1) ^ 1)
        mbarrier.expect(q_full.index(c), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [b, h, start_m + c * ROWS, 0], q_full.index(c), q_smem.index(c))


#: hardware (named) barrier ids of the consumers' turns with ``PINGPONG`` = 2: consumer c syncs on TURN_BAR + c.
#: Triton's warp specialisation takes the low ids (0-3 in these kernels' sm90 PTX: ``kernels.barriers``), so the turns
#: start well above them.
TURN_BAR: gl.constexpr = gl.constexpr(8)


#: named barrier ids of the ring's slots with named slot releases (``SLOT_THREADS`` > 0): K slot s SLOT_BAR + s, V slot
#: s SLOT_BAR + STAGES + s (STAGES <= 2: ids up to 14 of the 16)
SLOT_BAR: gl.constexpr = gl.constexpr(11)


@gluon.jit
def _ws_turn_wait(turns, c: gl.constexpr, t, PINGPONG: gl.constexpr):
    """Consumer c's t-th turn at the tensor cores: wait until the other consumer has issued its
    products of the turn before (consumer 0's first turn was granted at init). ``PINGPONG`` 1: the
    "turn" mbarriers; 2: named barriers (``kernels.barriers``, consumer c's id TURN_BAR + c, 256 threads: the
    waiting warpgroup and the one passing the turn)."""
    if PINGPONG == 1:
        mbarrier.wait(turns.index(c), t & 1)
    elif PINGPONG == 2:
        named_sync(TURN_BAR + c, 256)


@gluon.jit
def _ws_turn_pass(turns, c: gl.constexpr, CONSUMERS: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG == 1:
        mbarrier.arrive(turns.index((c + 1) % CONSUMERS))
    elif PINGPONG == 2:
        named_arrive(TURN_BAR + (c + 1) % CONSUMERS, 256)


@gluon.jit
def _ws_consumer(o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full,
                 k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, c: gl.constexpr,
                 BLOCK_M: gl.constexpr, CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr, PIPELINE: gl.constexpr,
                 PINGPONG: gl.constexpr, SEPARATE_O: gl.constexpr, POLY: gl.constexpr, PERSISTENT: gl.constexpr,
                 EARLY: gl.constexpr, TREE: gl.constexpr, PAIRED: gl.constexpr, ORDER: gl.constexpr,
                 SLOT_THREADS: gl.constexpr, LAZY: gl.constexpr = False):
    """One warpgroup: ROWS = 64 query rows (rows c*64.. of each of the program's tiles) over every key tile.

    Plain order, rotated so that a turn issues P_j V_j and then S_{j+1} = Q K_{j+1}^T back to back;
    with ``PINGPONG`` the consumers take turns (an mbarrier each), so one warpgroup's softmax runs
    while the other's products are on the tensor cores. ``PIPELINE`` adds FlashAttention-3's
    intra-warpgroup overlap: a turn issues S_{j+1} first, then P_j V_j, and the softmax of S_{j+1}
    runs while P_j V_j is still on the tensor cores. The ring index and the turn count run on across
    tiles. ``SEPARATE_O``: O leaves through its own buffer and its TMA store stays in flight while the
    next tile starts (Q's buffer is released after the tile's last Q K^T); otherwise through Q's buffer,
    released once the store has completed."""
    if PINGPONG == 2 and c == CONSUMERS - 1:
        named_arrive(TURN_BAR, 256)  # consumer 0 takes the first turn
    if PERSISTENT or PAIRED:
        base = 0  # ring index of the tile's first key tile
        turn = 0  # turns taken so far
        it = 0
        first, end, step = _ws_tiles(n_m, total, PAIRED)
        for t in range(first, end, step):
            base, turn = _ws_consumer_tile(o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full,
                                           q_empty, k_full, v_full, k_empty, v_empty, turns,
                                           _grouped(t, n_m, total, ORDER), it, base, turn, n_m, H,
                                           GROUP, S_Q, S_K, qk_scale, c, BLOCK_M, CONSUMERS, CAUSAL, PIPELINE, PINGPONG,
                                           SEPARATE_O, POLY, EARLY, TREE, SLOT_THREADS, LAZY)
            it += 1
    else:
        _ws_consumer_tile(o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                          v_full, k_empty, v_empty, turns, _grouped(gl.program_id(0), n_m, total, ORDER), 0, 0, 0, n_m,
                          H, GROUP, S_Q, S_K, qk_scale,
                          c, BLOCK_M, CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, EARLY, TREE, SLOT_THREADS,
                          LAZY)
    tma.store_wait(0)


@gluon.jit
def _ws_consumer_tile(o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                      v_full, k_empty, v_empty, turns, t, it, base, turn, n_m, H, GROUP, S_Q, S_K, qk_scale,
                      c: gl.constexpr, BLOCK_M: gl.constexpr, CONSUMERS: gl.constexpr, CAUSAL: gl.constexpr,
                      PIPELINE: gl.constexpr, PINGPONG: gl.constexpr, SEPARATE_O: gl.constexpr, POLY: gl.constexpr,
                      EARLY: gl.constexpr, TREE: gl.constexpr, SLOT_THREADS: gl.constexpr, LAZY: gl.constexpr = False):
    """One tile t (the consumer's it-th) of ``_ws_consumer``: ``base`` is the ring index of its first
    key tile, ``turn`` the turns taken before; returns both advanced. ``EARLY``: P's conversion to the
    operand type (and in the plain order O's rescale by alpha) follow the softmax in the same basic
    block (ptxas can interleave them with the MUFU.EX2s), not after the next turn's barrier waits;
    P crosses the loop as bf16/fp16. ``TREE``: ``_softmax_step``'s tree reductions."""
    dtype: gl.constexpr = k_smem.dtype
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[3]
    HEAD_DIM: gl.constexpr = k_smem.type.shape[4]
    ROWS: gl.constexpr = q_smem.type.shape[3]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    tile_q: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS, HEAD_DIM], dtype)
    tile_kv: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q2d = q_smem.index(c)._reinterpret(dtype, [ROWS, HEAD_DIM], tile_q)
    o_buf = o_smem.index(c) if SEPARATE_O else q_smem.index(c)
    o2d = o_buf._reinterpret(dtype, [ROWS, HEAD_DIM], tile_q)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    b, h, h_kv, start_m, lo, hi, diag, n_tiles = _tile_coords(t, n_m, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CAUSAL)
    rows = start_m + c * ROWS + gl.arange(0, ROWS, layout=row_s)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
    if TREE:
        l_i = _row_partials(s_zero, False)  # (ROWS, 4) per-lane partial sums, zero
    else:
        l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    mbarrier.wait(q_full.index(c), it & 1)

    if n_tiles > 0:
        # turn 0: S_0
        s0 = base % STAGES
        mbarrier.wait(k_full.index(s0), (base // STAGES) & 1)
        k_t = k_smem.index(s0)._reinterpret(dtype, [BLOCK_N, HEAD_DIM], tile_kv).permute((1, 0))
        _ws_turn_wait(turns, c, turn, PINGPONG)
        qk = warpgroup_mma(q2d, k_t, s_zero, use_acc=False, is_async=True)
        _ws_turn_pass(turns, c, CONSUMERS, PINGPONG)
        qk = warpgroup_mma_wait(0, deps=(qk,))
        slot_release(k_empty, s0, SLOT_BAR + s0, True, SLOT_THREADS)
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, 0, lo, hi, rows, cols, diag, qk_scale, CAUSAL, POLY, TREE, LAZY)
        if EARLY:
            p_op = gl.convert_layout(p.to(dtype), p_layout)  # O is still 0: no rescale
        for j in range(n_tiles - 1):
            # turn j + 1: P_j V_j and S_{j+1}
            g = base + j
            s = g % STAGES
            s1 = (g + 1) % STAGES
            mbarrier.wait(v_full.index(s), (g // STAGES) & 1)
            mbarrier.wait(k_full.index(s1), ((g + 1) // STAGES) & 1)
            v_t = v_smem.index(s)._reinterpret(dtype, [BLOCK_N, HEAD_DIM], tile_kv)
            k_t = k_smem.index(s1)._reinterpret(dtype, [BLOCK_N, HEAD_DIM], tile_kv).permute((1, 0))
            if not EARLY:
                p_op = gl.convert_layout(p.to(dtype), p_layout)
            if PIPELINE:
                _ws_turn_wait(turns, c, turn + j + 1, PINGPONG)
                qk = warpgroup_mma(q2d, k_t, s_zero, use_acc=False, is_async=True)
                acc = warpgroup_mma(p_op, v_t, acc, is_async=True)
                _ws_turn_pass(turns, c, CONSUMERS, PINGPONG)
                # S_{j+1} done (groups retire in order); P_j V_j may still run: softmax beside it
                qk = warpgroup_mma_wait(1, deps=(qk,))
                slot_release(k_empty, s1, SLOT_BAR + s1, True, SLOT_THREADS)
                pn, alpha_n, m_i, l_i = _softmax_step(qk, m_i, l_i, (j + 1) * BLOCK_N, lo, hi, rows, cols, diag,
                                                      qk_scale, CAUSAL, POLY, TREE, LAZY)
                if EARLY:
                    pn_op = gl.convert_layout(pn.to(dtype), p_layout)  # beside the exp2s, before the wait
                else:
                    p = pn
                # the blocking wait in a block of its own (see attention_fwd_gluon_kernel): ptxas
                # would otherwise hoist it above the exp2s
                if qk_scale > 0.0:
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                    slot_release(v_empty, s, SLOT_BAR + STAGES + s, True, SLOT_THREADS)
                else:
                    slot_release(v_empty, s, SLOT_BAR + STAGES + s, True, SLOT_THREADS)
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                acc = _rescale(o_done, alpha_n, row_o, LAZY)
                if EARLY:
                    p_op = pn_op
            else:
                if not EARLY:
                    acc = _rescale(acc, alpha, row_o, LAZY)
                _ws_turn_wait(turns, c, turn + j + 1, PINGPONG)
                acc = warpgroup_mma(p_op, v_t, acc, is_async=True)
                qk = warpgroup_mma(q2d, k_t, s_zero, use_acc=False, is_async=True)
                _ws_turn_pass(turns, c, CONSUMERS, PINGPONG)
                acc, qk, p_op = warpgroup_mma_wait(0, deps=(acc, qk, p_op))
                slot_release(v_empty, s, SLOT_BAR + STAGES + s, True, SLOT_THREADS)
                slot_release(k_empty, s1, SLOT_BAR + s1, True, SLOT_THREADS)
                pn, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, (j + 1) * BLOCK_N, lo, hi, rows, cols, diag,
                                                    qk_scale, CAUSAL, POLY, TREE, LAZY)
                if EARLY:
                    acc = _rescale(acc, alpha, row_o, LAZY)
                    p_op = gl.convert_layout(pn.to(dtype), p_layout)
                else:
                    p = pn
        if SEPARATE_O:
            mbarrier.arrive(q_empty.index(c))  # every Q K^T of the tile has retired
        # turn n_tiles: the last P V
        g = base + n_tiles - 1
        if not PIPELINE and not EARLY:
            acc = _rescale(acc, alpha, row_o, LAZY)
        mbarrier.wait(v_full.index(g % STAGES), (g // STAGES) & 1)
        v_t = v_smem.index(g % STAGES)._reinterpret(dtype, [BLOCK_N, HEAD_DIM], tile_kv)
        if not EARLY:
            p_op = gl.convert_layout(p.to(dtype), p_layout)
        _ws_turn_wait(turns, c, turn + n_tiles, PINGPONG)
        acc = warpgroup_mma(p_op, v_t, acc, is_async=True)
        _ws_turn_pass(turns, c, CONSUMERS, PINGPONG)
        acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
        slot_release(v_empty, g % STAGES, SLOT_BAR + STAGES + g % STAGES, True, SLOT_THREADS)
    elif SEPARATE_O:
        mbarrier.arrive(q_empty.index(c))

    if TREE:
        l_i = gl.convert_layout(gl.sum(l_i, 1), row_s)  # the 4 lanes' partial sums of each row
    # Rows that saw no key: l = 0, acc = 0 -> output 0 and lse = -inf.
    l_o = gl.convert_layout(l_i, row_o)
    out = acc / gl.where(l_o == 0.0, 1.0, l_o)[:, None]
    if SEPARATE_O:
        tma.store_wait(0)  # the previous tile's O has left the buffer
        gl.thread_barrier()
    o2d.store(out.to(dtype))
    fence_async_shared()
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [b, h, start_m + c * ROWS, 0], o_buf)
    lse = gl.where(l_i == 0.0, float("-inf"), (m_i + gl.log2(gl.where(l_i == 0.0, 1.0, l_i))) * LN2)
    l_ptrs = LSE + b.to(gl.int64) * stride_lb + h.to(gl.int64) * stride_lh + rows
    gl.store(l_ptrs, lse, mask=rows < S_Q)
    if not SEPARATE_O:
        tma.store_wait(0)
        mbarrier.arrive(q_empty.index(c))  # O has left Q's buffer
    return base + n_tiles, turn + gl.where(n_tiles > 0, n_tiles + 1, 0)


@gluon.jit
def attention_fwd_gluon_ws_kernel(
    q_desc, k_desc, v_desc, o_desc, LSE,
    stride_lb, stride_lh,
    BH, H, GROUP, S_Q, S_K, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, PIPELINE: gl.constexpr, PINGPONG: gl.constexpr, SEPARATE_O: gl.constexpr,
    POLY: gl.constexpr, PERSISTENT: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
    num_warps: gl.constexpr, EARLY: gl.constexpr = False, TREE: gl.constexpr = False, PAIRED: gl.constexpr = False,
    ORDER: gl.constexpr = 0, NAMED_SLOTS: gl.constexpr = False, LAZY: gl.constexpr = False,
):
    """The warp-specialised forward: tiles of CONSUMERS x 64 queries of one (batch, head), CONSUMERS =
    BLOCK_M / 64 = 2 or 3 (consumer 2, rows 128..191, is a second 4-warp worker; the turns go round).

    ``num_warps`` = 4: the default partition is consumer 0 (rows 0..63 of each tile), a 4-warp worker
    partition consumer 1 (rows 64..127) and a 1-warp worker the TMA loader (``LOADER_REGS``
    registers; consumer 1 gets ``CONSUMER_REGS``). ``q_desc``/``o_desc`` boxes are 64 rows, K/V
    boxes BLOCK_N rows. Grid (programs,): program p takes tiles p, p + programs, ... of the
    cdiv(S_q, 128) x BH tiles (``_tile_coords``): one tile each when there are as many programs as
    tiles, persistent (the loader running ahead into the next tile) with one program per SM; ``PAIRED``
    (causal): cdiv(n_m, 2) x BH programs, each the heavy tile n_m - 1 - i and the light tile i (``_ws_tiles``).
    ``qk_scale`` = scale * log2(e); ``POLY``: ``_softmax_step``'s exp2 split.
    No CTA-wide barrier after the split: the ring's slots have a "full" mbarrier (TMA bytes) and an
    "empty" one (count 2: each consumer arrives once its products reading the slot have retired),
    each consumer's Q buffer a full/empty pair, and with ``PINGPONG`` two "turn" mbarriers hand the
    tensor cores from one consumer to the other. ``ORDER`` = G > 0 (causal, not paired): tiles in the order
    of ``_grouped`` (heads in groups of G, heaviest tiles first inside each group). ``NAMED_SLOTS``: the
    consumers release the ring's slots by named barriers (``kernels.barriers.slot_release`` /
    ``slot_wait_free``) instead of the "empty" mbarriers; ``PINGPONG`` = 2: the turns too."""
    gl.static_assert(not (PAIRED and ORDER > 0), "paired tiles keep their own order")
    gl.static_assert(not NAMED_SLOTS or STAGES <= 2, "named slot barriers: ids for 2 stages of K and V")
    ROWS: gl.constexpr = q_desc.block_type.shape[2]
    CONSUMERS: gl.constexpr = BLOCK_M // ROWS
    # named slot releases: every consumer thread and the loader's warp meet at the slot's barrier
    SLOT_THREADS: gl.constexpr = CONSUMERS * 128 + 32 if NAMED_SLOTS else 0
    gl.static_assert(BLOCK_M == CONSUMERS * ROWS, "the Q/O boxes hold one consumer's rows")
    gl.static_assert(CONSUMERS == 2 or CONSUMERS == 3, "two or three consumer warpgroups")
    dtype: gl.constexpr = q_desc.dtype
    n_m = gl.cdiv(S_Q, BLOCK_M)
    total = n_m * BH

    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, 1, 1, ROWS, HEAD_DIM], q_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [CONSUMERS if SEPARATE_O else 1, 1, 1, ROWS if SEPARATE_O else 8,
                                               HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_full = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CONSUMERS):
        mbarrier.init(q_full.index(c), count=1)
        mbarrier.init(q_empty.index(c), count=1)
        mbarrier.init(turns.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_full.index(s), count=1)
        mbarrier.init(v_full.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=CONSUMERS)
        mbarrier.init(v_empty.index(s), count=CONSUMERS)
    if PINGPONG == 1:
        mbarrier.arrive(turns.index(0))  # consumer 0 takes the first turn
    fence_async_shared()

    # the same consumer function two or three times, told apart by its constexpr index (0: the default
    # partition)
    C0: gl.constexpr = 0
    C1: gl.constexpr = 1
    C2: gl.constexpr = 2
    if CONSUMERS == 2:
        gl.warp_specialize([
            (_ws_consumer, (o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                            v_full, k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, C0, BLOCK_M,
                            CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, PERSISTENT, EARLY, TREE,
                            PAIRED, ORDER, SLOT_THREADS, LAZY)),
            (_ws_consumer, (o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                            v_full, k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, C1, BLOCK_M,
                            CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, PERSISTENT, EARLY, TREE,
                            PAIRED, ORDER, SLOT_THREADS, LAZY)),
            (_ws_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty,
                          v_empty, n_m, total, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CONSUMERS, CAUSAL, PERSISTENT,
                          PAIRED, ORDER, SLOT_THREADS)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])
    else:
        gl.warp_specialize([
            (_ws_consumer, (o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                            v_full, k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, C0, BLOCK_M,
                            CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, PERSISTENT, EARLY, TREE,
                            PAIRED, ORDER, SLOT_THREADS, LAZY)),
            (_ws_consumer, (o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                            v_full, k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, C1, BLOCK_M,
                            CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, PERSISTENT, EARLY, TREE,
                            PAIRED, ORDER, SLOT_THREADS, LAZY)),
            (_ws_consumer, (o_desc, LSE, stride_lb, stride_lh, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_full,
                            v_full, k_empty, v_empty, turns, n_m, total, H, GROUP, S_Q, S_K, qk_scale, C2, BLOCK_M,
                            CONSUMERS, CAUSAL, PIPELINE, PINGPONG, SEPARATE_O, POLY, PERSISTENT, EARLY, TREE,
                            PAIRED, ORDER, SLOT_THREADS, LAZY)),
            (_ws_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, v_full, k_empty,
                          v_empty, n_m, total, H, GROUP, S_Q, S_K, BLOCK_M, BLOCK_N, CONSUMERS, CAUSAL, PERSISTENT,
                          PAIRED, ORDER, SLOT_THREADS)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, LOADER_REGS])


# ------------------------------------------------------------------------------------------------
# Split-KV decode (few queries against many keys), sm90
# ------------------------------------------------------------------------------------------------
@gluon.jit
def _decode_release(desc, smem, bars, nxt, n_tiles, k_lo, b, h_kv, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Every warp of the warpgroup is past its wgmma wait on slot nxt % STAGES (the barrier): refill
    it with key tile nxt of this program's chunk."""
    gl.thread_barrier()
    s = nxt % STAGES
    pred = nxt < n_tiles
    mbarrier.expect(bars.index(s), desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [b, h_kv, k_lo + nxt * BLOCK_N, 0], bars.index(s), smem.index(s), pred=pred)


@gluon.jit
def attention_decode_gluon_kernel(
    Q, k_desc, v_desc, O_PART, LSE_PART,
    stride_qb, stride_qh, stride_qs,
    stride_ps, stride_pb, stride_ph, stride_pm,
    H, GROUP, S_Q, S_K, keys_per_split, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
    PIPELINE: gl.constexpr, num_warps: gl.constexpr,
):
    """The split-KV program of ``attention_decode_kernel`` (same grid, partials and combine) as one
    warpgroup on sm90: its 64 rows are the GROUP query heads x S_q queries of one (batch, K/V head)
    (pointer-gathered once into shared memory), so each K/V byte of the key chunk is read once for
    all of them; K and V come by TMA into a ring of ``STAGES`` slots (a barrier per slot, K and V
    apart), both products are ``wgmma`` (S = Q K^T from shared memory, O += P V with P from
    registers). A K slot is refilled as soon as its S has retired, a V slot once its P V has, so the
    copy engine always has up to STAGES tiles of each in flight. ``PIPELINE``: FlashAttention-3's
    order (S_j and P_{j-1} V_{j-1} in flight together, the softmax of S_j beside the second).

    Grid (splits, B * H_kv, cdiv(GROUP * S_q, 64)); partials (splits, B, H, S_q, HEAD_DIM) fp32,
    normalised, and their log2-sum-exp."""
    BLOCK_M: gl.constexpr = 16 * num_warps
    dtype: gl.constexpr = k_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    tile2d_q: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    tile2d_kv: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    pid_s = gl.program_id(0)
    pid_bh = gl.program_id(1)
    pid_m = gl.program_id(2)
    h_kvs = H // GROUP
    b = pid_bh // h_kvs
    h_kv = pid_bh % h_kvs
    b64 = b.to(gl.int64)
    k_lo = pid_s * keys_per_split
    k_hi = gl.minimum(k_lo + keys_per_split, S_K)
    diag = S_K - S_Q  # key j visible to query i iff j <= i + diag
    # tiles from lo on need the mask: the ragged tail of S_k, and (causal) keys past diag
    vis = gl.minimum(k_hi, diag + 1) if CAUSAL else k_hi
    lo = k_lo + gl.maximum(vis - k_lo, 0) // BLOCK_N * BLOCK_N
    n_tiles = gl.cdiv(gl.maximum(k_hi - k_lo, 0), BLOCK_N)

    k_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, 1, BLOCK_N, HEAD_DIM], v_desc.layout)
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(s), count=1)
        mbarrier.init(v_bars.index(s), count=1)
    fence_async_shared()
    for t in gl.static_range(STAGES):
        mbarrier.expect(k_bars.index(t), k_desc.block_type.nbytes, pred=t < n_tiles)
        tma.async_copy_global_to_shared(k_desc, [b, h_kv, k_lo + t * BLOCK_N, 0], k_bars.index(t),
                                        k_smem.index(t), pred=t < n_tiles)
        mbarrier.expect(v_bars.index(t), v_desc.block_type.nbytes, pred=t < n_tiles)
        tma.async_copy_global_to_shared(v_desc, [b, h_kv, k_lo + t * BLOCK_N, 0], v_bars.index(t),
                                        v_smem.index(t), pred=t < n_tiles)

    # Q: row r of the tile is query r % S_q of query head h_kv * GROUP + r // S_q (rows past
    # GROUP * S_q load zeros and are never stored), gathered by pointers while K/V are in flight
    r = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, q_ld))
    d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, q_ld))
    hq = (h_kv * GROUP + r // S_Q).to(gl.int64)
    iq = (r % S_Q).to(gl.int64)
    q_mask = (r < GROUP * S_Q)[:, None] & (d < HEAD_DIM)[None, :]
    q = gl.load(Q + b64 * stride_qb + hq[:, None] * stride_qh + iq[:, None] * stride_qs + d[None, :], mask=q_mask,
                other=0.0)
    q2d = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], tile2d_q, q)
    fence_async_shared()
    gl.thread_barrier()

    rows = (pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_s)) % S_Q  # query index, for the causal mask
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([BLOCK_M], 0.0, gl.float32, layout=row_s)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)

    if n_tiles > 0:
        if PIPELINE:
            qk = _qk_issue(q2d, k_smem, k_bars, 0, s_zero, tile2d_kv, STAGES)
            qk = warpgroup_mma_wait(0, deps=(qk,))
            _decode_release(k_desc, k_smem, k_bars, STAGES, n_tiles, k_lo, b, h_kv, BLOCK_N, STAGES)
            p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, k_lo, lo, k_hi, rows, cols, diag, qk_scale, CAUSAL)
            for j in range(1, n_tiles):
                qk = _qk_issue(q2d, k_smem, k_bars, j, s_zero, tile2d_kv, STAGES)
                acc, p_op = _pv_issue(p, acc, v_smem, v_bars, j - 1, p_layout, tile2d_kv, STAGES)
                qk = warpgroup_mma_wait(1, deps=(qk,))  # S_j retired (groups retire in order)
                _decode_release(k_desc, k_smem, k_bars, j + STAGES, n_tiles, k_lo, b, h_kv, BLOCK_N, STAGES)
                p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, k_lo + j * BLOCK_N, lo, k_hi, rows, cols, diag,
                                                   qk_scale, CAUSAL)
                # the blocking wait in a block of its own (see attention_fwd_gluon_kernel)
                if qk_scale > 0.0:
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                else:
                    gl.thread_barrier()
                    o_done, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                acc = o_done * gl.convert_layout(alpha, row_o)[:, None]
                _decode_release(v_desc, v_smem, v_bars, j - 1 + STAGES, n_tiles, k_lo, b, h_kv, BLOCK_N, STAGES)
            acc, p_op = _pv_issue(p, acc, v_smem, v_bars, n_tiles - 1, p_layout, tile2d_kv, STAGES)
            acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
        else:
            for j in range(n_tiles):
                qk = _qk_issue(q2d, k_smem, k_bars, j, s_zero, tile2d_kv, STAGES)
                qk = warpgroup_mma_wait(0, deps=(qk,))
                _decode_release(k_desc, k_smem, k_bars, j + STAGES, n_tiles, k_lo, b, h_kv, BLOCK_N, STAGES)
                p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, k_lo + j * BLOCK_N, lo, k_hi, rows, cols, diag,
                                                   qk_scale, CAUSAL)
                acc = acc * gl.convert_layout(alpha, row_o)[:, None]
                acc, p_op = _pv_issue(p, acc, v_smem, v_bars, j, p_layout, tile2d_kv, STAGES)
                acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                _decode_release(v_desc, v_smem, v_bars, j + STAGES, n_tiles, k_lo, b, h_kv, BLOCK_N, STAGES)

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(s))
        mbarrier.invalidate(v_bars.index(s))

    # the chunk's normalised output and log2-sum-exp (l = 0: no key seen, output 0, lse -inf)
    ro = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_o)
    do = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    l_o = gl.convert_layout(l_i, row_o)
    out = acc / gl.where(l_o == 0.0, 1.0, l_o)[:, None]
    p_row = (pid_s.to(gl.int64) * stride_ps + b64 * stride_pb + (h_kv * GROUP + ro // S_Q).to(gl.int64) * stride_ph
             + (ro % S_Q).to(gl.int64) * stride_pm)
    o_mask = (ro < GROUP * S_Q)[:, None] & (do < HEAD_DIM)[None, :]
    gl.store(O_PART + p_row[:, None] * HEAD_DIM + do[None, :], out, mask=o_mask)
    rs = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_s)
    lse2 = gl.where(l_i == 0.0, float("-inf"), m_i + gl.log2(gl.where(l_i == 0.0, 1.0, l_i)))
    l_row = (pid_s.to(gl.int64) * stride_ps + b64 * stride_pb + (h_kv * GROUP + rs // S_Q).to(gl.int64) * stride_ph
             + (rs % S_Q).to(gl.int64) * stride_pm)
    gl.store(LSE_PART + l_row, lse2, mask=rs < GROUP * S_Q)
