"""tilecraft.attention: the Triton kernels in the interpreter against the float64 reference.

Tiny shapes with the interpreter's 16x16 tiles (and explicit other tiles), so every case crosses
several tiles, the causal diagonal and the ragged tails; outputs are poisoned with NaN first.
"""
from __future__ import annotations

import math

import pytest
import torch

import tilecraft
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import (
    attention_reference,
    attention_varlen_reference,
    causal_mask,
)

# bf16: the interpreter rounds float32 -> bf16 to nearest even as a GPU does (``ops._fix_interpreter_bf16_rounding``;
# its truncation had needed 1.6e-2 / 2.5e-2); measured at most 2.5e-3 forward and 3.2e-3 for the gradients here
FWD_TOL = {torch.float16: 2e-3, torch.bfloat16: 5e-3}
GRAD_TOL = {torch.float16: 3e-3, torch.bfloat16: 5e-3}
DTYPES = (torch.float16, torch.bfloat16)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def make(gen, b, h, h_kv, s_q, s_k, d, dtype, scale=1.0):
    def one(heads, n):
        return (torch.randn(b, heads, n, d, generator=gen, dtype=torch.float64) * scale).to(dtype)
    return one(h, s_q), one(h_kv, s_k), one(h_kv, s_k)


def run_poisoned(q, k, v, causal, cfg=None, scale=None):
    """Launch the forward kernel into NaN-poisoned out and lse (bhsd)."""
    p = ops.validate(q, k, v, causal=causal, scale=scale, layout="bhsd")
    out = torch.full_like(q, float("nan"))
    lse = torch.full((p.batch, p.heads, p.seqlen_q), float("nan"), dtype=torch.float32)
    ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg or ops.INTERPRETER_FWD)
    return out, lse


def check_lse(lse, ref_lse):
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), fin), "lse must be -inf exactly on rows that see no key"
    assert (lse[~fin] == float("-inf")).all()
    if fin.any():
        assert (lse.double()[fin] - ref_lse[fin]).abs().max().item() < 1e-4


# (B, H, H_kv, S_q, S_k, D, causal)
FWD_CASES = [
    (1, 2, 2, 1, 1, 64, False),        # length 1
    (1, 2, 2, 1, 1, 64, True),
    (1, 4, 1, 17, 17, 64, False),      # multi-query, ragged tail
    (2, 4, 2, 100, 37, 96, True),      # grouped-query, S_q > S_k (all-masked rows), D padded to 128
    (1, 2, 2, 33, 100, 128, True),     # S_q < S_k
    (1, 2, 1, 64, 64, 32, True),       # lengths a multiple of the tile
    (1, 1, 1, 20, 23, 40, False),      # odd head dimension
    (1, 1, 1, 17, 17, 256, True),      # the largest head dimension
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", FWD_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_forward_matches_reference(case, dtype, gen):
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    out, lse = run_poisoned(q, k, v, causal)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    assert not torch.isnan(out).any(), "unwritten output elements"
    assert rel(out, ref) < FWD_TOL[dtype]
    check_lse(lse, ref_lse)


def test_all_masked_rows_are_zero_with_minus_inf_lse(gen):
    """Causal with S_q > S_k: the first S_q - S_k queries see no key (bottom-right alignment)."""
    q, k, v = make(gen, 1, 2, 2, 40, 9, 64, torch.float16)
    out, lse = tilecraft.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out[:, :, :31], torch.zeros_like(out[:, :, :31]))
    assert (lse[:, :, :31] == float("-inf")).all()
    assert torch.isfinite(lse[:, :, 31:]).all()
    # the last query sees every key
    ref, _ = attention_reference(q, k, v, causal=True)
    assert rel(out[:, :, 31:], ref[:, :, 31:]) < FWD_TOL[torch.float16]


def test_causal_convention_is_bottom_right():
    m = causal_mask(3, 5)
    assert m.tolist() == [[True, True, True, False, False], [True, True, True, True, False], [True] * 5]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_large_magnitude_logits(dtype, gen):
    """Logits of hundreds (exp would overflow float32 at 89): the online softmax must not overflow."""
    q, k, v = make(gen, 1, 2, 2, 30, 45, 64, dtype, scale=12.0)
    q2, k2, v2 = q, k, v / 12
    out, lse = run_poisoned(q2, k2, v2, causal=True)
    ref, ref_lse = attention_reference(q2, k2, v2, causal=True)
    assert ref_lse[torch.isfinite(ref_lse)].abs().max() > 200
    assert rel(out, ref) < 4 * FWD_TOL[dtype]
    fin = torch.isfinite(ref_lse)
    assert ((lse.double()[fin] - ref_lse[fin]).abs() / ref_lse[fin].abs().clamp_min(1)).max() < 1e-5


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_large_magnitude_logits_backward(dtype, gen):
    """Gradients with logits of hundreds (a saturated softmax): finite, and near the float64 reference.
    fp16 and dV: 4x the usual bound (fp16 dQ measured 3.4e-3). bf16 dQ and dK: delta = rowsum(dO * O)
    is taken from the stored bf16 O (as in FlashAttention-2), and with near one-hot rows dS = P (dP -
    delta) cancels, so O's bf16 error is amplified: measured 0.046 / 0.034, which a float64 emulation
    of the same algorithm gives too (O from bf16 P, delta from the bf16 O, dS in bf16: 0.046 / 0.034;
    the delta rounding alone 0.033 / 0.024). Bound 0.08. (The 0.27 / 0.25 measured here before came
    from the interpreter truncating float32 -> bf16 casts, not from the algorithm.)"""
    q, k, v = make(gen, 1, 2, 2, 30, 45, 64, dtype, scale=12.0)
    v = (v.double() / 12).to(dtype)
    do = torch.randn(1, 2, 30, 64, generator=gen).to(dtype)
    assert attention_reference(q, k, v, causal=True)[1].abs().max() > 200
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True), q, k, v, do)
    ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
    for name, a, r in zip("qkv", ours, ref):
        assert torch.isfinite(a).all(), f"d{name} not finite"
        tol = 8e-2 if dtype == torch.bfloat16 and name != "v" else 4 * GRAD_TOL[dtype]
        assert rel(a, r) < tol, f"d{name}: {rel(a, r):.2e}"


@pytest.mark.parametrize("s_q,s_k", [(1000, 17), (17, 1000)], ids=["Sq1000", "Sk1000"])
def test_length_1000_forward_and_backward(s_q, s_k, gen):
    """A length of 1000 (not a multiple of any tile) against 17, causal: with S_q = 1000, 983 rows
    see no key; with S_k = 1000 (17 queries: not the split-KV path), 63 key tiles per query tile."""
    q, k, v = make(gen, 1, 2, 1, s_q, s_k, 16, torch.float16)
    do = torch.randn(1, 2, s_q, 16, generator=gen).to(torch.float16)
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    assert not ops.uses_decode(p)
    out, lse = run_poisoned(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, causal=True)
    assert rel(out, ref) < FWD_TOL[torch.float16]
    check_lse(lse, ref_lse)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True), q, k, v, do)
    refg = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
    for name, a, r in zip("qkv", ours, refg):
        assert rel(a, r) < GRAD_TOL[torch.float16], f"d{name}: {rel(a, r):.2e}"


def test_length_1000_square_with_large_tiles(gen):
    """S_q = S_k = 1000 with 128x128 tiles (the GPU's D = 128 tile shape): 8 ragged tiles each way."""
    q, k, v = make(gen, 1, 1, 1, 1000, 1000, 16, torch.bfloat16)
    for causal in (False, True):
        out, lse = run_poisoned(q, k, v, causal, ops.FwdConfig(128, 128, 4, 1))
        ref, ref_lse = attention_reference(q, k, v, causal=causal)
        assert rel(out, ref) < FWD_TOL[torch.bfloat16]
        check_lse(lse, ref_lse)


@pytest.mark.parametrize("cfg", [ops.FwdConfig(32, 16, 4, 1), ops.FwdConfig(16, 32, 4, 1)], ids=["M32N16", "M16N32"])
def test_other_tiles_and_explicit_scale(cfg, gen):
    """BLOCK_M != BLOCK_N moves the diagonal inside a tile differently; the causal split must hold."""
    q, k, v = make(gen, 1, 2, 1, 70, 53, 64, torch.float16)
    for causal in (True, False):
        out, lse = run_poisoned(q, k, v, causal, cfg, scale=0.3)
        ref, ref_lse = attention_reference(q, k, v, causal=causal, scale=0.3)
        assert rel(out, ref) < FWD_TOL[torch.float16]
        check_lse(lse, ref_lse)


@pytest.mark.parametrize("case", [(2, 4, 2, 40, 21, 96, True), (1, 2, 1, 17, 50, 64, False)], ids=["gqa-c", "mqa"])
def test_tma_forward_matches_reference(case, gen):
    """The tensor-descriptor forward (TMA on sm90): ragged tails come in as zeros, stores are clipped."""
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.bfloat16)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    assert ops.tma_ok(p, q, k, v)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    # one tile per program, and persistent programs (4 in the interpreter) walking all the tiles
    for cfg in (ops.FwdConfig(16, 32, 4, 1, tma=True), ops.FwdConfig(16, 16, 4, 1, tma=True, persistent=True)):
        out, lse = run_poisoned(q, k, v, causal, cfg)
        assert rel(out, ref) < FWD_TOL[torch.bfloat16]
        check_lse(lse, ref_lse)
    # a layout descriptors cannot address (rows of 8 bytes) falls back to pointer loads
    q4, k4, v4 = make(gen, 1, 2, 2, 9, 9, 4, torch.bfloat16)
    assert not ops.tma_ok(ops.validate(q4, k4, v4, causal=False, scale=None, layout="bhsd"), q4, k4, v4)
    out4, _ = run_poisoned(q4, k4, v4, False, ops.FwdConfig(16, 16, 4, 1, tma=True))
    assert rel(out4, attention_reference(q4, k4, v4)[0]) < FWD_TOL[torch.bfloat16]


# (B, H, H_kv, S_q, S_k, D): 1, 3 (odd: a middle tile alone) and 4 query tiles of 16, S_q > S_k
# (rows that see no key, heavy tiles with no key tile), S_q < S_k, a ragged tail
PAIRED_CASES = [(1, 2, 2, 9, 9, 64), (2, 4, 2, 40, 21, 96), (1, 3, 3, 64, 64, 32), (1, 2, 1, 33, 100, 128),
                (1, 1, 1, 17, 17, 64)]


@pytest.mark.parametrize("kind", ["pointer", "tma"])
@pytest.mark.parametrize("case", PAIRED_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}".format(*c))
def test_paired_causal_tiles_match_reference(case, kind, gen):
    """``paired``: each program takes query tiles n_m - 1 - i and i (half the grid): every tile is
    written once, as the reference has it; non-causal calls ignore the option (the plain grid)."""
    b, h, h_kv, s_q, s_k, d = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.bfloat16)
    cfg = ops.FwdConfig(16, 16, 4, 1, tma=kind == "tma", paired=True)
    for causal in (True, False):
        p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
        tiles = -(-s_q // 16)
        assert ops.fwd_grid(p, cfg) == ((tiles + 1) // 2 if causal else tiles, b * h)
        out, lse = run_poisoned(q, k, v, causal, cfg)
        ref, ref_lse = attention_reference(q, k, v, causal=causal)
        assert rel(out, ref) < FWD_TOL[torch.bfloat16]
        check_lse(lse, ref_lse)
        # the same bits as one tile per program (the same tiles, the same order of key tiles)
        plain, plain_lse = run_poisoned(q, k, v, causal, ops.FwdConfig(16, 16, 4, 1, tma=kind == "tma"))
        assert torch.equal(out, plain) and torch.equal(lse, plain_lse)


@pytest.mark.parametrize("case", [(1, 2, 2, 40, 40, 64), (2, 4, 2, 37, 21, 96), (1, 2, 1, 20, 50, 32), (1, 1, 1, 48, 48, 64)],
                         ids=["S40", "gqa-sq>sk", "mqa-sq<sk", "3-tiles"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
def test_paired_backward_matches_unpaired(case, deterministic, gen):
    """``BwdConfig(paired=True)``: the dK/dV programs take key tiles i and n_k - 1 - i, the dQ programs
    query tiles n_m - 1 - i and i: the same bits as one tile per program (deterministic path), and
    the float64 gradients."""
    b, h, h_kv, s_q, s_k, d = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.bfloat16)
    do = torch.randn(q.shape, generator=gen).to(torch.bfloat16)
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    bwd_twice_matches(q, k, v, do, p, ops.BwdConfig(16, 16, 16, 16, 4, 1, paired=True), deterministic)


def bwd_twice_matches(q, k, v, do, p, cfg, deterministic):
    """The causal backward with ``cfg`` and with the default one-tile grid, each into NaN-poisoned
    gradients: bit-equal on the deterministic path (the same tiles, launched in another order), and
    ``cfg``'s within the float64 tolerance."""
    out, lse = run_poisoned(q, k, v, True)
    grads = []
    for c in (cfg, ops.BwdConfig(16, 16, 16, 16, 4, 1)):
        g = tuple(torch.full_like(t, float("nan")) for t in (q, k, v))
        ops.launch_bwd(do, q, k, v, out, lse, None, *g, None, None, p, c, deterministic)
        assert not any(torch.isnan(t).any() for t in g)
        grads.append(g)
    if deterministic:
        assert all(torch.equal(a, b_) for a, b_ in zip(*grads))
    ref = _grads(lambda *x: attention_reference(*x, causal=True), q, k, v, do)
    for got, want in zip(grads[0], ref):
        assert rel(got, want) < GRAD_TOL[torch.bfloat16]


@pytest.mark.parametrize("case,order", [((2, 6, 2, 40, 40, 64), 2), ((3, 4, 2, 37, 21, 32), 4), ((1, 5, 5, 48, 48, 32), 3),
                                        ((2, 6, 2, 40, 40, 64), ops.ORDER_AUTO)],
                         ids=["groups-of-2", "gqa-sq>sk-one-group", "uneven-last-group", "auto"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
def test_grouped_backward_matches_the_default_order(case, order, deterministic, gen):
    """``BwdConfig(order=G)``: the dK/dV programs over groups of G K/V heads, the dQ programs over groups of
    G query heads, heaviest tiles first (a last group smaller than G, G beyond B * H): every tile once,
    so the same bits as one tile per program in the default order (deterministic path), and the
    float64 gradients either way. Outputs poisoned with NaN first."""
    b, h, h_kv, s_q, s_k, d = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.bfloat16)
    do = torch.randn(q.shape, generator=gen).to(torch.bfloat16)
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    cfg = ops.BwdConfig(16, 16, 16, 16, 4, 1, order=order)
    if order == ops.ORDER_AUTO:  # the tiny problem fits the L2: one group of every K/V head, every query head
        assert ops.bwd_orders(p, cfg, 50 * 2**20) == (4, 8)
    else:
        assert ops.bwd_orders(p, cfg, 50 * 2**20) == (order, order)
    bwd_twice_matches(q, k, v, do, p, cfg, deterministic)
    # non-causal calls ignore the order; paired and grouped exclude each other
    assert ops.bwd_orders(ops.validate(q, k, v, causal=False, scale=None, layout="bhsd"), cfg, 50 * 2**20) == (0, 0)
    with pytest.raises(ValueError, match="exclude each other"):
        ops.BwdConfig(16, 16, 16, 16, 4, 1, order=2, paired=True)


def test_paired_varlen_forward(gen, monkeypatch):
    """Packed batches with paired tiles: a short sequence's heavy tile (past its length) is skipped."""
    monkeypatch.setattr(ops, "INTERPRETER_FWD", ops.FwdConfig(16, 16, 4, 1, paired=True))
    grids = []
    fwd_grid = ops.fwd_grid
    monkeypatch.setattr(ops, "fwd_grid", lambda p, cfg: grids.append(fwd_grid(p, cfg)) or grids[-1])
    lens_q, lens_k = [1, 47, 0, 20], [3, 47, 5, 20]
    cu_q, cu_k = (torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32) for n in (lens_q, lens_k))
    q = torch.randn(sum(lens_q), 2, 64, generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(sum(lens_k), 2, 64, generator=gen).to(torch.bfloat16) for _ in range(2))
    out, lse = tilecraft.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    ref, ref_lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert grids == [(2, 4 * 2)]  # 3 tiles of the longest sequence, paired
    assert rel(out, ref) < FWD_TOL[torch.bfloat16]
    check_lse(lse, ref_lse)


def test_paired_config_rules():
    for bad in (dict(tma=True, persistent=True), dict(tma=True, producer_consumer=True)):
        with pytest.raises(ValueError, match="paired"):
            ops.FwdConfig(16, 16, 4, 1, paired=True, **bad)
    with pytest.raises(ValueError, match="paired"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, persistent=True, paired=True)
    ws = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, paired=True)
    causal = ops.validate(*make(torch.Generator().manual_seed(0), 2, 4, 4, 300, 300, 64, torch.bfloat16), causal=True,
                          scale=None, layout="bhsd")
    assert ops.ws_grid(causal, ws, torch.device("cpu")) == 2 * 4 * 2  # 3 query tiles of 128: 2 programs per head
    assert ops.ws_separate_o(ws, 128)  # O's own buffer, its store in flight into the second tile
    for bad in (dict(maxnreg=16), dict(maxnreg=256), dict(maxnreg=128, tma=True, gluon=True, ws=True)):
        with pytest.raises(ValueError, match="maxnreg"):
            ops.FwdConfig(128, 128, 8, 2, **bad)
    with pytest.raises(TypeError, match="paired"):
        ops.FwdConfig(16, 16, 4, 1, paired=1)
    with pytest.raises(TypeError, match="paired"):
        ops.BwdConfig(16, 16, 16, 16, 4, 1, paired="yes")
    # the interpreter takes no register cap: the launch leaves it out on CPU tensors
    assert ops._maxnreg(ops.FwdConfig(16, 16, 4, 1, maxnreg=128), torch.device("cpu")) == {}
    assert ops._maxnreg(ops.FwdConfig(16, 16, 4, 1, maxnreg=128), torch.device("cuda")) == {"maxnreg": 128}


@pytest.mark.parametrize("case", [(2, 4, 2, 40, 21, 96, True), (1, 2, 1, 17, 50, 64, False), (1, 2, 2, 24, 64, 64, False),
                                  (1, 3, 3, 19, 45, 128, True), (1, 2, 1, 1, 1, 64, True)],
                         ids=["gqa-causal-sq>sk", "mqa-ragged", "aligned-no-mask", "causal-sq<sk", "one"])
def test_producer_consumer_forward_matches_reference(case, gen):
    """The warp-specialised forward (one key loop, the mask applied in every step when causal or S_k
    is ragged): against float64, NaN-poisoned outputs, rows that see no key give 0 and -inf."""
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.bfloat16)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    for cfg in (ops.FwdConfig(16, 16, 4, 1, tma=True, producer_consumer=True),
                ops.FwdConfig(32, 16, 4, 2, tma=True, producer_consumer=True)):
        out, lse = run_poisoned(q, k, v, causal, cfg)
        assert rel(out, ref) < FWD_TOL[torch.bfloat16], cfg
        check_lse(lse, ref_lse)
    q16, k16, v16 = (t.to(torch.float16) for t in (q, k, v))
    out, lse = run_poisoned(q16, k16, v16, causal, ops.FwdConfig(16, 32, 4, 1, tma=True, producer_consumer=True), scale=0.2)
    ref16, ref16_lse = attention_reference(q16, k16, v16, causal=causal, scale=0.2)
    assert rel(out, ref16) < FWD_TOL[torch.float16]
    check_lse(lse, ref16_lse)


def test_producer_consumer_config_is_checked():
    with pytest.raises(ValueError, match="tma"):
        ops.FwdConfig(128, 128, 4, 2, producer_consumer=True)
    with pytest.raises(ValueError, match="persistent"):
        ops.FwdConfig(128, 128, 4, 2, tma=True, persistent=True, producer_consumer=True)


def test_producer_consumer_is_refused_on_a_gpu_unless_enabled(monkeypatch):
    """Wrong on an H200 so far: a GPU launch raises before anything runs, unless switched on."""
    with pytest.raises(RuntimeError, match="experimental"):
        ops._check_producer_consumer(torch.device("cuda"))
    ops._check_producer_consumer(torch.device("cpu"))  # the interpreter runs it
    monkeypatch.setattr(ops, "PRODUCER_CONSUMER_ON_GPU", True)
    ops._check_producer_consumer(torch.device("cuda"))


def test_producer_consumer_falls_back_where_descriptors_cannot_address(gen):
    """Rows of 8 bytes: no tensor descriptor; the launch takes the pointer kernel and stays right."""
    q, k, v = make(gen, 1, 2, 2, 9, 9, 4, torch.bfloat16)
    out, lse = run_poisoned(q, k, v, True, ops.FwdConfig(16, 16, 4, 1, tma=True, producer_consumer=True))
    ref, ref_lse = attention_reference(q, k, v, causal=True)
    assert rel(out, ref) < FWD_TOL[torch.bfloat16]
    check_lse(lse, ref_lse)


def test_bshd_layout_and_strided_views(gen):
    """q, k, v as views into one packed (B, S, 3, H, D) projection: strides taken as they are."""
    qkv = torch.randn(2, 29, 3, 4, 64, generator=gen).to(torch.float16)
    q, k, v = qkv.unbind(2)  # (B, S, H, D) views, sequence stride 3*H*D
    out = tilecraft.attention(q, k, v, causal=True, layout="bshd")
    assert out.shape == q.shape and out.is_contiguous()
    ref, _ = attention_reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert rel(out.transpose(1, 2), ref) < FWD_TOL[torch.float16]
    # the same through bhsd views
    out2 = tilecraft.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert torch.equal(out2, out.transpose(1, 2))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_forward(causal, gen):
    lens_q = [1, 17, 0, 40]
    lens_k = [5, 17, 3, 26]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(sum(lens_q), 4, 64, generator=gen).to(torch.bfloat16)
    k = torch.randn(sum(lens_k), 2, 64, generator=gen).to(torch.bfloat16)
    v = torch.randn(sum(lens_k), 2, 64, generator=gen).to(torch.bfloat16)
    out, lse = tilecraft.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    ref, ref_lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=causal)
    assert out.shape == q.shape and lse.shape == (4, sum(lens_q))
    assert rel(out, ref) < FWD_TOL[torch.bfloat16]
    check_lse(lse, ref_lse)


def _grads(fn, q, k, v, do, dlse=None):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = fn(*leaves)
    loss = (out.double() * do.double()).sum()
    if dlse is not None:
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0).double() * dlse).sum()
    return torch.autograd.grad(loss, leaves)


# (B, H, H_kv, S_q, S_k, D, causal)
BWD_CASES = [
    (1, 2, 2, 17, 17, 64, False),
    (2, 4, 2, 37, 21, 96, True),       # GQA, all-masked rows, padded head dim
    (1, 2, 1, 20, 50, 32, True),       # MQA, S_q < S_k
    (1, 2, 2, 33, 40, 128, True),      # D = 128, ragged tails, S_q < S_k
    (1, 1, 1, 20, 17, 256, True),      # the largest head dimension, all-masked rows
    (1, 2, 1, 1, 19, 64, True),        # one query (S_q = S_k = 1: test_backward_length_1)
]


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", BWD_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_backward_matches_reference(case, dtype, deterministic, gen):
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    do = torch.randn(b, h, s_q, d, generator=gen).to(dtype)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=causal, return_lse=True, deterministic=deterministic),
                  q, k, v, do)
    ref = _grads(lambda *t: attention_reference(*t, causal=causal), q.double(), k.double(), v.double(), do)
    for name, a, r in zip("qkv", ours, ref):
        assert not torch.isnan(a).any(), f"d{name} has NaN"
        assert rel(a, r) < GRAD_TOL[dtype], f"d{name}: {rel(a, r):.2e}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_backward_length_1(dtype, gen):
    """S_q = S_k = 1: P = 1, so dV = dO (summed over the group's query heads) and dQ = dK = 0 (up to the
    rounding of dP - delta)."""
    q, k, v = make(gen, 2, 2, 1, 1, 1, 64, dtype)
    do = torch.randn(2, 2, 1, 64, generator=gen).to(dtype)
    for deterministic in (True, False):
        dq, dk, dv = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True,
                                                           deterministic=deterministic), q, k, v, do)
        assert dq.abs().max() < 1e-4 and dk.abs().max() < 1e-4
        assert rel(dv, do.double().sum(1, keepdim=True)) < GRAD_TOL[dtype]


def test_gradient_through_lse(gen):
    q, k, v = make(gen, 1, 2, 2, 19, 19, 64, torch.float16)
    do = torch.randn(1, 2, 19, 64, generator=gen).to(torch.float16)
    dlse = torch.randn(1, 2, 19, generator=gen, dtype=torch.float64)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True), q, k, v, do, dlse)
    ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do, dlse)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_backward_other_tiles_and_deterministic(gen):
    q, k, v = make(gen, 1, 2, 1, 45, 33, 64, torch.float16)
    do = torch.randn(1, 2, 45, 64, generator=gen).to(torch.float16)
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    out, lse = run_poisoned(q, k, v, True)
    ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
    results = []
    for cfg in (ops.BwdConfig(16, 32, 32, 16, 4, 1), ops.BwdConfig(32, 16, 16, 32, 4, 1)):
        grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        ops.launch_bwd(do, q, k, v, out, lse, None, *grads, None, None, p, cfg, deterministic=True)
        for a, r in zip(grads, ref):
            assert rel(a, r) < GRAD_TOL[torch.float16]
        results.append(grads)
        again = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        ops.launch_bwd(do, q, k, v, out, lse, None, *again, None, None, p, cfg, deterministic=True)
        assert all(torch.equal(a, b) for a, b in zip(grads, again)), "deterministic backward must repeat bitwise"


def test_varlen_backward(gen):
    lens_q, lens_k = [3, 20, 9], [7, 20, 1]
    cu_q = torch.tensor([0, 3, 23, 32], dtype=torch.int32)
    cu_k = torch.tensor([0, 7, 27, 28], dtype=torch.int32)
    q = torch.randn(sum(lens_q), 2, 32, generator=gen).to(torch.float16)
    k = torch.randn(sum(lens_k), 1, 32, generator=gen).to(torch.float16)
    v = torch.randn(sum(lens_k), 1, 32, generator=gen).to(torch.float16)
    do = torch.randn_like(q, dtype=torch.float32).to(torch.float16)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                                 max_seqlen_q=20, max_seqlen_k=20, return_lse=True), q, k, v, do)
    ref = _grads(lambda *t: attention_varlen_reference(*t, cu_q, cu_k, causal=True), q.double(), k.double(),
                 v.double(), do)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_reference_path_without_interpreter(monkeypatch, gen):
    """CPU tensors with the interpreter off run the float32 torch reference, forward and backward."""
    monkeypatch.setattr(ops, "triton_on_cpu", lambda: False)
    q, k, v = make(gen, 1, 2, 1, 12, 9, 24, torch.bfloat16)
    do = torch.randn(1, 2, 12, 24, generator=gen).to(torch.bfloat16)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True), q, k, v, do)
    ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.bfloat16]
    # packed sequences and the bshd layout take the same path
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    qp = q[0].transpose(0, 1).reshape(12, 2, 24)
    kp, vp = (t[0].transpose(0, 1)[:, :, :].reshape(9, 1, 24)[:12] for t in (k, v))
    cu_k = torch.tensor([0, 4, 9], dtype=torch.int32)
    dop = do[0].transpose(0, 1).reshape(12, 2, 24)
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu_k,
                                                 return_lse=True), qp, kp, vp, dop)
    ref = _grads(lambda *t: attention_varlen_reference(*t, cu, cu_k, causal=True), qp.double(), kp.double(),
                 vp.double(), dop)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.bfloat16]
    tr = [t.transpose(1, 2) for t in (q, k, v, do)]
    ours = _grads(lambda *t: tilecraft.attention(*t, layout="bshd", return_lse=True), *tr)
    ref = _grads(lambda *t: attention_reference(*t), q.double(), k.double(), v.double(), do)
    for a, r in zip(ours, ref):
        assert rel(a.transpose(1, 2), r) < GRAD_TOL[torch.bfloat16]


# ----------------------------------------------------------------------------------------------
# bad input: clear errors before any launch
# ----------------------------------------------------------------------------------------------
def _qkv(b=1, h=2, h_kv=2, s=8, d=64, dtype=torch.float16):
    return (torch.randn(b, h, s, d).to(dtype), torch.randn(b, h_kv, s, d).to(dtype),
            torch.randn(b, h_kv, s, d).to(dtype))


@pytest.mark.parametrize("mutate,exc,match", [
    (lambda q, k, v: (q.float(), k.float(), v.float()), TypeError, "float16 and bfloat16"),
    (lambda q, k, v: (q, k.bfloat16(), v), TypeError, "share a dtype"),
    (lambda q, k, v: (q, k[:, :, :5], v), ValueError, "same shape"),
    (lambda q, k, v: (q, k[..., :32], v[..., :32]), ValueError, "head dimension"),
    (lambda q, k, v: (q[:1], k[:1, :1].expand(1, 1, 8, 64).contiguous(), v[:1, :1].contiguous()), None, None),
    (lambda q, k, v: (q.repeat(1, 3, 1, 1)[:, :3], k, v), ValueError, "must divide"),
    (lambda q, k, v: (q[0], k[0], v[0]), ValueError, "must be 4D"),
    (lambda q, k, v: (q.transpose(2, 3), k, v), ValueError, "contiguous in the head dimension"),
    (lambda q, k, v: (q, k.repeat(2, 1, 1, 1), v.repeat(2, 1, 1, 1)), ValueError, "batch"),
    (lambda q, k, v: (q, k.to("meta"), v), ValueError, "one device"),
    (lambda q, k, v: ([1.0], k, v), TypeError, "torch.Tensor"),
    (lambda q, k, v: (q.bool(), k.bool(), v.bool()), TypeError, "torch.bool"),
    (lambda q, k, v: (q.bfloat16(), k, v), TypeError, "share a dtype"),
    (lambda q, k, v: (q[..., :0], k[..., :0], v[..., :0]), ValueError, "head dimension must be in \\[1, 256\\], got 0"),
    (lambda q, k, v: (torch.zeros(1, 2, 8, 257, dtype=torch.float16),) * 3, ValueError, "got 257"),
    (lambda q, k, v: (q, k[:, :0], v[:, :0]), ValueError, "key/value heads \\(0\\) must divide"),
    (lambda q, k, v: (q[None], k[None], v[None]), ValueError, "must be 4D"),
], ids=["fp32", "mixed", "kv-shape", "head-dim", "mqa-ok", "heads", "3d", "stride", "batch", "device", "list", "bool",
        "q-mixed", "d0", "d257", "hkv0", "5d"])
def test_validation(mutate, exc, match):
    q, k, v = mutate(*_qkv())
    if exc is None:
        ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
        return
    with pytest.raises(exc, match=match):
        tilecraft.attention(q, k, v)


def test_validation_of_options():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="head dimension must be in"):
        big = torch.zeros(1, 1, 2, 300, dtype=torch.float16)
        tilecraft.attention(big, big, big)
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        tilecraft.attention(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="scale must be finite"):
        tilecraft.attention(q, k, v, scale=math.nan)
    with pytest.raises(ValueError, match="scale is too large"):  # was an OverflowError
        tilecraft.attention(q, k, v, scale=10**400)
    with pytest.raises(ValueError, match="max_seqlen_q/max_seqlen_k need layout='thd'"):  # ignored before
        tilecraft.attention(q, k, v, max_seqlen_q=3)
    with pytest.raises(TypeError, match="return_lse must be a bool"):
        tilecraft.attention(q, k, v, return_lse="yes")
    with pytest.raises(ValueError, match="unknown layout"):
        tilecraft.attention(q, k, v, layout="sbhd")
    with pytest.raises(TypeError, match="causal must be a bool"):
        tilecraft.attention(q, k, v, causal=1)
    with pytest.raises(ValueError, match="need layout='thd'"):
        tilecraft.attention(q, k, v, layout="bshd", cu_seqlens_q=torch.tensor([0, 8], dtype=torch.int32),
                            cu_seqlens_k=torch.tensor([0, 8], dtype=torch.int32))
    t = torch.randn(8, 2, 64).to(torch.float16)
    with pytest.raises(TypeError, match="int32"):
        tilecraft.attention(t, t, t, cu_seqlens_q=torch.tensor([0, 8]), cu_seqlens_k=torch.tensor([0, 8]))
    with pytest.raises(ValueError, match="never decrease"):
        cu = torch.tensor([0, 5, 3], dtype=torch.int32)
        tilecraft.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(ValueError, match="needs cu_seqlens_q"):
        tilecraft.attention(t, t, t, layout="thd")
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="needs cu_seqlens_q and cu_seqlens_k"):  # not "must be 4D"
        tilecraft.attention(t, t, t, cu_seqlens_k=cu)
    for bad in ([1, 3, 8], [0, 3, 9]):
        with pytest.raises(ValueError, match="must start at 0"):
            tilecraft.attention(t, t, t, cu_seqlens_q=torch.tensor(bad, dtype=torch.int32), cu_seqlens_k=cu)
    with pytest.raises(ValueError, match="cu_seqlens_k is on meta"):
        tilecraft.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu.to("meta"))
    # max_seqlen_q/k below the longest sequence would leave rows uncomputed
    with pytest.raises(ValueError, match="max_seqlen_q=4 is less than the longest sequence in the offsets \\(5\\)"):
        tilecraft.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=4, max_seqlen_k=5)
    with pytest.raises(ValueError, match="max_seqlen_k=2 is less"):
        tilecraft.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5, max_seqlen_k=2)
    with pytest.raises(ValueError, match="non-negative int"):
        tilecraft.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5.0, max_seqlen_k=5)


@pytest.fixture
def poisoned_allocations(monkeypatch):
    """Every float tensor torch.empty/torch.empty_like hands out in the test is NaN-filled, so an
    output or gradient element the op leaves unwritten shows up."""
    empty, empty_like = torch.empty, torch.empty_like

    def poison(t):
        return t.fill_(float("nan")) if t.is_floating_point() and t.device.type == "cpu" else t
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poison(empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: poison(empty_like(*a, **kw)))


@pytest.mark.parametrize("path", ["interpreter", "reference"])
def test_varlen_rows_past_the_offsets(path, gen, monkeypatch, poisoned_allocations):
    """Packed rows after cu_seqlens_q[-1] / cu_seqlens_k[-1] belong to no sequence: output 0, lse -inf,
    gradient 0 (not whatever the allocation held); the sequences themselves match the reference."""
    if path == "reference":
        monkeypatch.setattr(ops, "triton_on_cpu", lambda: False)
    cu_q = torch.tensor([0, 3, 12], dtype=torch.int32)  # q has 14 rows, k and v 11
    cu_k = torch.tensor([0, 4, 9], dtype=torch.int32)
    q = torch.randn(14, 2, 32, generator=gen).to(torch.float16)
    k = torch.randn(11, 1, 32, generator=gen).to(torch.float16)
    v = torch.randn(11, 1, 32, generator=gen).to(torch.float16)
    do = torch.randn(14, 2, 32, generator=gen).to(torch.float16)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tilecraft.attention(*leaves, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    assert torch.equal(out[12:], torch.zeros_like(out[12:]))
    assert (lse[:, 12:] == float("-inf")).all()
    ours = torch.autograd.grad((out.double() * do.double()).sum(), leaves)
    ref_out, ref_lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert rel(out[:12], ref_out) < FWD_TOL[torch.float16]
    check_lse(lse[:, :12], ref_lse)
    ref = _grads(lambda *t: attention_varlen_reference(*t, cu_q, cu_k, causal=True), q.double(), k.double(),
                 v.double(), do[:12])
    assert torch.equal(ours[0][12:], torch.zeros_like(ours[0][12:]))
    assert torch.equal(ours[1][9:], torch.zeros_like(ours[1][9:])) and torch.equal(ours[2][9:], torch.zeros_like(ours[2][9:]))
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_no_query_heads_gives_zero_kv_gradients(poisoned_allocations):
    """H = 0 query heads against H_kv = 1 (0 % 1 == 0, so accepted): an empty output, and K and V,
    which no query reads, get gradient 0."""
    q = torch.zeros(1, 0, 8, 16, dtype=torch.float16, requires_grad=True)
    k, v = (torch.randn(1, 1, 8, 16).to(torch.float16).requires_grad_() for _ in range(2))
    out = tilecraft.attention(q, k, v, causal=True)
    assert out.shape == (1, 0, 8, 16)
    dq, dk, dv = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert dq.shape == q.shape and torch.equal(dk, torch.zeros_like(dk)) and torch.equal(dv, torch.zeros_like(dv))


# ----------------------------------------------------------------------------------------------
# torch.library and torch.compile
# ----------------------------------------------------------------------------------------------
def test_opcheck_forward_and_backward(gen):
    q, k, v = make(gen, 1, 2, 1, 9, 17, 32, torch.float16)
    q.requires_grad_()
    k.requires_grad_()
    v.requires_grad_()
    args = (q, k, v, None, None, 9, 17, True, 0.25, "bhsd", True)
    torch.library.opcheck(torch.ops.tilecraft.attention_fwd.default, args,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    out, lse = torch.ops.tilecraft.attention_fwd(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args])
    do = torch.randn_like(out, dtype=torch.float32).to(out.dtype)
    torch.library.opcheck(torch.ops.tilecraft.attention_bwd.default,
                          (do, None, q.detach(), k.detach(), v.detach(), out, lse, None, None, 9, 17, True, 0.25,
                           "bhsd", True), test_utils=("test_schema", "test_faketensor"))


def test_torch_compile_forward_and_backward(gen):
    q, k, v = make(gen, 1, 2, 2, 20, 20, 32, torch.float16)
    do = torch.randn(1, 2, 20, 32, generator=gen).to(torch.float16)

    def f(q, k, v):
        return tilecraft.attention(q, k, v, causal=True) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = compiled(*leaves)
    grads = torch.autograd.grad(out, leaves, do)
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref_out = attention_reference(*ref_leaves, causal=True)[0] * 2
    ref_grads = torch.autograd.grad(ref_out, ref_leaves, do.double())
    assert rel(out, ref_out) < FWD_TOL[torch.float16]
    for a, r in zip(grads, ref_grads):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_torch_compile_varlen(gen):
    """A packed batch under torch.compile: the offsets are traced tensors, max_seqlen_q/k given."""
    cu_q = torch.tensor([0, 3, 23, 32], dtype=torch.int32)
    cu_k = torch.tensor([0, 7, 27, 28], dtype=torch.int32)
    q = torch.randn(32, 2, 32, generator=gen).to(torch.float16)
    k, v = (torch.randn(28, 1, 32, generator=gen).to(torch.float16) for _ in range(2))
    do = torch.randn(32, 2, 32, generator=gen).to(torch.float16)

    def f(q, k, v, cu_q, cu_k):
        return tilecraft.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=20,
                                   max_seqlen_k=20, return_lse=True)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    ours = _grads(lambda *t: compiled(*t, cu_q, cu_k), q, k, v, do)
    out, lse = compiled(q, k, v, cu_q, cu_k)
    ref_out, ref_lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert rel(out, ref_out) < FWD_TOL[torch.float16]
    check_lse(lse, ref_lse)
    ref = _grads(lambda *t: attention_varlen_reference(*t, cu_q, cu_k, causal=True), q.double(), k.double(),
                 v.double(), do)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_torch_compile_dynamic_shapes(gen):
    """dynamic=True: symbolic batch and sequence lengths reach the op; two shapes through one graph."""
    from torch._dynamo.testing import CompileCounterWithBackend

    backend = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda q, k, v: tilecraft.attention(q, k, v, causal=True, return_lse=True),
                             backend=backend, fullgraph=True, dynamic=True)
    # sizes distinct from each other and not 0 or 1, which torch would specialise or tie (duck sizing)
    for b, s_q, s_k in ((3, 20, 27), (5, 9, 33)):
        q, k, v = make(gen, b, 2, 1, s_q, s_k, 32, torch.bfloat16)
        do = torch.randn(b, 2, s_q, 32, generator=gen).to(torch.bfloat16)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out, lse = compiled(*leaves)
        ours = torch.autograd.grad(out, leaves, do)
        ref_out, ref_lse = attention_reference(q, k, v, causal=True)
        assert rel(out, ref_out) < FWD_TOL[torch.bfloat16]
        check_lse(lse.detach(), ref_lse)
        ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
        for a, r in zip(ours, ref):
            assert rel(a, r) < GRAD_TOL[torch.bfloat16]
    assert backend.frame_count == 1, "the second shape recompiled"


# ----------------------------------------------------------------------------------------------
# split-KV (decode) path
# ----------------------------------------------------------------------------------------------
# (B, H, H_kv, S_q, S_k, D, causal)
DECODE_CASES = [
    (2, 4, 2, 1, 200, 64, False),     # GQA, one query
    (1, 8, 2, 3, 150, 96, True),      # rows = 4 heads x 3 queries, padded head dim
    (1, 2, 2, 16, 130, 32, True),     # 16 queries: the last 16 keys on the diagonal
    (1, 4, 1, 5, 3, 32, True),        # S_q > S_k: all-masked rows through the combine
    (1, 32, 1, 3, 70, 16, False),     # multi-query: 96 rows, two row tiles per chunk
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_decode_split_kv_matches_reference(case, gen):
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.float16)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    cfg = ops.DecodeConfig(16, 4, 1, splits=3)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, s_q), float("nan"))
    ops.launch_decode(q, k, v, out, lse, p, cfg)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    assert rel(out, ref) < FWD_TOL[torch.float16]
    check_lse(lse, ref_lse)


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_decode_fused_merge_matches_reference_and_combine(case, gen):
    """``fuse``: the last program of each row tile merges the chunks (no combine kernel). Against
    float64, against the two-kernel path (same merge arithmetic, up to the summation order), and
    twice bit-equal with the arrival counters left zero (replayable)."""
    b, h, h_kv, s_q, s_k, d, causal = case
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, torch.float16)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    runs = []
    for cfg in (ops.DecodeConfig(16, 4, 1, splits=3, fuse=True),) * 2 + (ops.DecodeConfig(16, 4, 1, splits=3),):
        out = torch.full_like(q, float("nan"))
        lse = torch.full((b, h, s_q), float("nan"))
        assert len(ops.launch_decode(q, k, v, out, lse, p, cfg)) == (1 if cfg.fuse else 2)
        runs.append((out, lse))
    assert not ops.decode_counters(1, q.device).any()
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    assert rel(runs[0][0], ref) < FWD_TOL[torch.float16]
    check_lse(runs[0][1], ref_lse)
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    torch.testing.assert_close(runs[0][0], runs[2][0], atol=2e-3, rtol=0)
    torch.testing.assert_close(runs[0][1], runs[2][1], equal_nan=True)


def test_decode_fused_is_a_triton_option():
    with pytest.raises(ValueError, match="fuse"):
        ops.DecodeConfig(64, 4, 3, gluon=True, fuse=True)


def test_decode_is_taken_for_few_queries_and_many_keys(gen):
    q, k, v = make(gen, 1, 2, 1, 1, ops.DECODE_MIN_KEYS + 7, 32, torch.bfloat16)
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    assert ops.uses_decode(p) and ops.decode_splits(p, ops.INTERPRETER_DECODE, q.device)[0] > 1
    out, lse = tilecraft.attention(q, k, v, causal=True, return_lse=True)
    ref, ref_lse = attention_reference(q, k, v, causal=True)
    assert rel(out, ref) < FWD_TOL[torch.bfloat16]
    check_lse(lse, ref_lse)


@pytest.mark.parametrize("batch,kv_heads,s_q,expect", [
    (8, 8, 16, 4),    # 64 programs of 64 rows: 4 chunks fill 256 of 264 slots (5 would spill into a 2nd wave)
    (8, 8, 1, 4),     # 64 programs of 16 rows
    (1, 1, 1, 16),    # one program: capped by 4 key tiles per chunk (8192 keys / (4 x 128))
    (300, 1, 1, 1),   # more programs than slots: no split
])
def test_decode_splits_fill_one_wave(batch, kv_heads, s_q, expect, monkeypatch):
    monkeypatch.setattr(ops, "_sm_count", lambda device: 132)
    p = ops.Problem(batch=batch, heads=4 * kv_heads, kv_heads=kv_heads, seqlen_q=s_q, seqlen_k=8192,
                    head_dim=128, causal=False, scale=1.0, layout="bhsd", varlen=False)
    splits, per, _ = ops.decode_splits(p, ops.DecodeConfig(128, 4, 3), torch.device("cpu"))
    assert splits == expect and splits * per >= 8192


def test_decode_path_backward(gen):
    """Gradients of a call that took the split-KV forward (its lse feeds the tiled backward)."""
    q, k, v = make(gen, 1, 4, 2, 2, ops.DECODE_MIN_KEYS + 3, 16, torch.float16)
    do = torch.randn(1, 4, 2, 16, generator=gen).to(torch.float16)
    assert ops.uses_decode(ops.validate(q, k, v, causal=True, scale=None, layout="bhsd"))
    ours = _grads(lambda *t: tilecraft.attention(*t, causal=True, return_lse=True), q, k, v, do)
    ref = _grads(lambda *t: attention_reference(*t, causal=True), q.double(), k.double(), v.double(), do)
    for a, r in zip(ours, ref):
        assert rel(a, r) < GRAD_TOL[torch.float16]


def test_deterministic_default_resolution(gen):
    """``deterministic=None`` (the default): the dQ kernel on CPUs and under
    ``torch.use_deterministic_algorithms(True)``; the given bool otherwise; anything else a TypeError
    before a launch."""
    q, k, v = make(gen, 1, 2, 1, 5, 5, 16, torch.float16)
    p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
    cfg = ops.BwdConfig(16, 16, 16, 16, 4, 1)
    assert ops.resolve_deterministic(None, p, q) is True  # no TMA bulk reductions here
    assert ops.resolve_deterministic(False, p, q) is False and ops.resolve_deterministic(True, p, q) is True
    assert ops.dq_path(None, p, q, cfg) == "kernel" and ops.dq_path(False, p, q, cfg) == "atomic"
    assert not ops.dq_tma_ok(p, q)
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        assert ops.resolve_deterministic(None, p, q) is True
    finally:
        torch.use_deterministic_algorithms(was)
    with pytest.raises(TypeError, match="deterministic must be a bool or None"):
        tilecraft.attention(q, k, v, deterministic="yes")
    with pytest.raises(TypeError, match="dq_tma must be a bool"):
        ops.BwdConfig(16, 16, 16, 16, 4, 1, dq_tma=1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="atomic_num_stages"):
            ops.BwdConfig(16, 16, 16, 16, 4, 1, atomic_num_stages=bad)


@pytest.mark.parametrize("layout", ["bhsd", "bshd", "thd"])
def test_dq_planes_map_to_the_layout(layout):
    """The TMA path's fp32 accumulator, (B*H, S_q, D) planes (packed: (H, T_q, D)), read back in dq's
    layout: element (plane of (b, h), row s, column d) lands at dq[b, h, s, d] / dq[b, s, h, d] /
    dq[t, h, d]."""
    b, h, s, d = 2, 3, 5, 8
    if layout == "thd":
        q = torch.zeros(7, h, d)
        p = ops.Problem("thd", 2, h, h, 4, 4, d, False, 1.0, True)
        acc = torch.arange(h * 7 * d, dtype=torch.float32).view(h, 7, d)
        view = ops._dq_planes_as(acc, p)
        assert view.shape == q.shape and torch.equal(view[4, 1], acc[1, 4])
        return
    p = ops.Problem(layout, b, h, h, s, s, d, False, 1.0, False)
    acc = torch.arange(b * h * s * d, dtype=torch.float32).view(b * h, s, d)
    view = ops._dq_planes_as(acc, p)
    assert view.shape == ((b, h, s, d) if layout == "bhsd" else (b, s, h, d))
    got = view[1, 2, 3] if layout == "bhsd" else view[1, 3, 2]
    assert torch.equal(got, acc[1 * h + 2, 3])
