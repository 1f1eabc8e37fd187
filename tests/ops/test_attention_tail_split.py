"""The tail split of the warp-specialised forward (``FwdConfig.tail_split``): the plan, the config
checks, the merge kernel (run by the interpreter against float64 on CPU tensors) and the split kernel
cross-compiled for sm90. The split kernel itself runs on the GPU only (tests/gpu/test_attention_gluon.py)."""
from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest
import torch

from tilecraft.bench import attention as ba
from tilecraft.kernels import attention as _k
from tilecraft.ops import attention as ops

WS = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True, tree=True)


def shape(b, h, s_q, s_k=None, d=128, causal=False):
    return ba.Shape(b, h, h, s_q, s_q if s_k is None else s_k, d, causal)


@pytest.mark.parametrize("s,limit,slots,want", [
    (shape(4, 16, 4096), 3, 132, (1980, 3)),    # 2048 tiles: 68 in the last wave, 3 parts -> 2/3 of a wave
    (shape(4, 16, 4096), 5, 132, (1980, 5)),    # 5 parts -> 3/5
    (shape(4, 16, 4096), 8, 132, (1980, 7)),    # 7 parts -> 4/7 (8 parts: 5/8)
    (shape(4, 16, 4096), 2, 132, (2048, 1)),    # 2 parts: 136 halves still take a whole wave
    (shape(4, 16, 4096), 3, 128, (2048, 1)),    # 128 SMs: the tiles fill 16 waves exactly
    (shape(1, 3, 4096), 4, 132, (0, 4)),        # 96 tiles, less than one wave: all in 4 parts
    (shape(1, 1, 256, 256), 4, 132, (2, 1)),    # 2 key tiles: too few to cut
    (shape(2, 16, 4096, d=256), 8, 132, (924, 5)),
])
def test_tail_plan(s, limit, slots, want):
    assert ops.tail_plan(s, replace(WS, tail_split=limit), None, slots=slots) == want


def test_tail_plan_is_off_without_tail_split_and_for_paired_causal_tiles():
    s = shape(4, 16, 4096)
    assert ops.tail_plan(s, WS, None, slots=132) == (2048, 1)
    paired = replace(WS, tail_split=3, paired=True)
    assert ops.tail_plan(shape(4, 16, 4096, causal=True), paired, None, slots=132) == (2048, 1)
    # non-causal calls ignore paired: the split applies
    assert ops.tail_plan(s, paired, None, slots=132) == (1980, 3)


@pytest.mark.parametrize("bad", [1, -2, 2.0, True])
def test_tail_split_must_be_zero_or_a_part_count(bad):
    with pytest.raises(ValueError, match="tail_split"):
        replace(WS, tail_split=bad)


def test_tail_split_needs_the_one_tile_ws_kernel():
    with pytest.raises(ValueError, match="tail_split"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, tail_split=3)
    with pytest.raises(ValueError, match="tail_split"):
        replace(WS, persistent=True, tail_split=3)
    with pytest.raises(ValueError, match="tail_split"):
        ops.FwdConfig(64, 64, 4, 2, tail_split=3)


def _partials(s_parts, logits_list, v, gen):
    """Each part's normalised output and log2-sum-exp for the logits it saw (rows x keys)."""
    o_parts, l_parts = [], []
    for lg in logits_list:
        m = lg.max(dim=-1, keepdim=True).values
        ok = torch.isfinite(m)
        w = torch.where(ok, torch.exp2(lg - torch.where(ok, m, 0.0)), 0.0)
        l = w.sum(-1, keepdim=True)
        o = torch.where(l > 0, (w @ v[: lg.shape[-1]]) / torch.where(l > 0, l, 1.0), 0.0)
        o_parts.append(o)
        l_parts.append(torch.where(l[..., 0] > 0, m[..., 0] + torch.log2(torch.where(l[..., 0] > 0, l[..., 0], 1.0)),
                                   float("-inf")))
    return o_parts, l_parts


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the Triton merge kernel in the interpreter")
@pytest.mark.parametrize("causal", [False, True])
def test_tail_merge_kernel_matches_float64(causal):
    """Tiles n_full.. of a (B, H) x n_m grid, each cut into SPLIT key parts: the merge of the parts'
    partials equals the softmax over all keys; rows no part saw get 0 and -inf; rows past S_q and tiles
    before n_full are never written."""
    gen = torch.Generator().manual_seed(3)
    B, H, S_Q, D, BLOCK_M, SPLIT, keys = 1, 3, 40, 16, 16, 3, 24
    n_m = math.ceil(S_Q / BLOCK_M)
    total = B * H * n_m
    n_full = 4
    tail = total - n_full
    logits = torch.randn(total, BLOCK_M, keys, generator=gen, dtype=torch.float64) * 4
    logits[-1, 5] = float("-inf")  # a row no key is visible to
    logits[-2, :, :8] = float("-inf")  # part 0 of a tile sees no key
    v = torch.randn(keys, D, generator=gen, dtype=torch.float64)
    cuts = [0, 8, 16, keys]
    o_part = torch.full((tail * SPLIT * BLOCK_M, D), float("nan"), dtype=torch.float32)
    l_part = torch.full((tail * SPLIT * BLOCK_M,), float("nan"), dtype=torch.float32)
    want_o = torch.zeros(B, H, S_Q, D, dtype=torch.float64)
    want_l = torch.full((B, H, S_Q), float("-inf"), dtype=torch.float64)
    for u in range(tail):
        t = n_full + u
        lg = logits[t]
        o_s, l_s = _partials(SPLIT, [torch.where(torch.arange(keys) >= cuts[j], lg, float("-inf"))[:, :cuts[j + 1]]
                                     for j in range(SPLIT)], v, gen)
        for j in range(SPLIT):
            rows = slice((u * SPLIT + j) * BLOCK_M, (u * SPLIT + j + 1) * BLOCK_M)
            o_part[rows], l_part[rows] = o_s[j].float(), l_s[j].float()
        pid_m = t % n_m
        if causal:
            pid_m = n_m - 1 - pid_m
        bh = t // n_m
        r = torch.arange(BLOCK_M)
        i = pid_m * BLOCK_M + r
        ok = i < S_Q
        m = lg.max(-1, keepdim=True).values
        fin = torch.isfinite(m)[:, 0]
        w = torch.where(torch.isfinite(m), torch.exp2(lg - torch.where(torch.isfinite(m), m, 0.0)), 0.0)
        ref = (w @ v) / torch.where(w.sum(-1, keepdim=True) > 0, w.sum(-1, keepdim=True), 1.0)
        lse = torch.where(fin, (m[:, 0] + torch.log2(torch.where(fin, w.sum(-1), 1.0))) * math.log(2), float("-inf"))
        want_o[bh // H, bh % H, i[ok]] = ref[ok]
        want_l[bh // H, bh % H, i[ok]] = lse[ok]
    out = torch.full((B, H, S_Q, D), float("nan"))
    lse_out = torch.full((B, H, S_Q), float("nan"))
    _k.attention_tail_merge_kernel[(tail, BLOCK_M // 8)](
        o_part, l_part, out, lse_out, *out.stride()[:3], *lse_out.stride()[:2], n_full, n_m, H, S_Q, SPLIT=SPLIT,
        HEAD_DIM=D, BLOCK_M=BLOCK_M, ROWS=8, CAUSAL=causal)
    written = torch.zeros(B, H, S_Q, dtype=torch.bool)
    for t in range(n_full, total):
        pid_m = t % n_m
        if causal:
            pid_m = n_m - 1 - pid_m
        i = torch.arange(pid_m * BLOCK_M, min(S_Q, (pid_m + 1) * BLOCK_M))
        written[t // n_m // H, t // n_m % H, i] = True
    assert torch.isnan(out[~written]).all() and torch.isnan(lse_out[~written]).all(), "only tail rows are written"
    assert not torch.isnan(out[written]).any()
    assert (out[written].double() - want_o[written]).abs().max().item() < 1e-5
    fin = torch.isfinite(want_l) & written
    assert torch.equal(torch.isfinite(lse_out[written]), fin[written])
    assert (lse_out[fin].double() - want_l[fin]).abs().max().item() < 1e-5
    assert (out[written & ~torch.isfinite(want_l)] == 0).all()


def test_split_ws_kernel_cross_compiles_for_sm90():
    """The split kernel (tail parts write fp32 partials) compiles with the registers and no spills of
    the unsplit one."""
    pytest.importorskip("triton.experimental.gluon")
    s = shape(4, 16, 4096)
    plain = ba.gluon_compile_report(s, torch.bfloat16, WS)
    split = ba.gluon_compile_report(s, torch.bfloat16, replace(WS, tail_split=3))
    assert plain["error"] is None and split["error"] is None, (plain["error"], split["error"])
    assert split["spills"] == 0 and split["registers"] == plain["registers"]
