import triton
import triton.language as tl

@triton.jit
def probe(a_ptr, b_ptr, out_ptr, ws_ptr, cnt_ptr, N, K_BLOCKS, UNITS, stride_am, stride_bk,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, VAR: tl.constexpr):
    P = tl.num_programs(0)
    p = tl.program_id(0)
    u0 = (p * UNITS) // P
    u1 = ((p + 1) * UNITS) // P
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for u in range(u0, u1):
        t = u // K_BLOCKS
        kb = u - t * K_BLOCKS
        offs_m = tl.arange(0, BM)
        offs_n = t * BN + tl.arange(0, BN)
        k = kb * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :])
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :])
        acc = tl.dot(a, b, acc)
        if VAR >= 1:
            if (kb == K_BLOCKS - 1) | (u == u1 - 1):
                if VAR == 1:
                    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
                else:
                    first = ((t * K_BLOCKS + 1) * P - 1) // UNITS
                    last = ((t * K_BLOCKS + K_BLOCKS) * P - 1) // UNITS
                    if first == last:
                        tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], acc)
                    else:
                        tile_ws = ws_ptr + t * 4 * BM * BN + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
                        tl.store(tile_ws + (p - first) * (BM * BN), acc)
                        if VAR == 5:
                            cp = cnt_ptr + t + tl.zeros([128], dtype=tl.int32)
                            seen = tl.atomic_add(cp, 1, sem="acq_rel", scope="gpu")
                            if tl.max(seen, 0) == (last - first + 1) * 128 - 1:
                                tl.atomic_add(cp, 0, sem="acquire", scope="gpu")
                                tot = tl.load(tile_ws, cache_modifier=".cg")
                                tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], tot)
                                tl.atomic_xchg(cp, 0, sem="relaxed", scope="gpu")
                        if VAR >= 3 and VAR < 5:
                            tl.debug_barrier()
                        if VAR == 4:
                            seen = tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel", scope="gpu")
                            if seen == last - first:
                                tot = tl.load(tile_ws, cache_modifier=".cg")
                                tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], tot)
                acc = tl.zeros((BM, BN), dtype=tl.float32)
    if VAR == 0:
        tl.store(out_ptr + tl.arange(0, BM)[:, None] * N + tl.arange(0, BN)[None, :], acc)
