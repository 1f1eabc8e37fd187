"""The Gluon forward (``kernels.attention_gluon``) on an sm90 GPU against the float64 reference.

Skipped without an sm90 CUDA GPU (the Triton interpreter cannot run Gluon); on the device machine:

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_attention_gluon.py

Odd lengths (1, 17, 1000), causal with S_q > S_k (rows that see no key), grouped- and multi-query,
both layouts, fp16 and bf16; outputs and lse poisoned with NaN before each launch.
"""
from __future__ import annotations

import pytest
import torch
from _attention_gpu import check, make, rel

import tilecraft
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import attention_reference

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.version.hip is None and torch.cuda.get_device_capability() == (9, 0)),
    reason="the Gluon forward needs an sm90 (Hopper) CUDA GPU")

FWD_TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# one config per head dimension with the overlap, and the plain order at D = 128; D = 64 also with
# the odd columns' exp2 on the FMA units (poly)
CONFIGS = {64: [ops.FwdConfig(128, 128, 8, 3, tma=True, gluon=True),
                ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, poly=1)],
           128: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True),
                 ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False)],
           256: [ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True)]}
# the warp-specialised kernel: plain order with and without ping-pong, and with the intra-warpgroup overlap
WS_CONFIGS = {d: [ops.FwdConfig(128, n, 8, st, tma=True, gluon=True, overlap=ov, ws=True, pingpong=pp)
                  for ov, pp in ((False, True), (False, False), (True, True))]
              for d, n, st in ((64, 128, 3), (128, 128, 2), (256, 64, 2))}
# persistent (one program per SM walking the tiles), with and without the FMA-unit exp2
PERSISTENT_CONFIGS = {d: [ops.FwdConfig(128, n, 8, st, tma=True, gluon=True, overlap=False, ws=True, persistent=True,
                                        poly=po) for po in (0, 1)]
                      for d, n, st in ((64, 128, 3), (128, 128, 2), (256, 64, 2))}
# round 16: the D = 64 default, three consumer warpgroups, persistent
PERSISTENT_CONFIGS[64].append(ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3,
                                            persistent=True))
# round 10: the ws kernel's softmax with the conversion (plain order: and the rescale) early and tree
# reductions, at every head dimension, plain order and overlap, and three consumer warpgroups
# (192-row tiles) at D = 64
ROUND10_CONFIGS = {64: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True, tree=True),
                        ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3,
                                      early=True, tree=True),
                        ops.FwdConfig(192, 64, 12, 3, tma=True, gluon=True, overlap=False, ws=True, consumers=3,
                                      early=True, tree=True),
                        ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3)],
                   128: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True),
                         ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, tree=True),
                         ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True,
                                       tree=True),
                         ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True,
                                       tree=True)],
                   256: [ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True),
                         ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True,
                                       tree=True),
                         ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True,
                                       tree=True)]}
# (B, H, H_kv, S_q, S_k, D, causal)
CASES = [
    (1, 2, 2, 1, 1, 64, False),
    (1, 2, 2, 1, 1, 128, True),
    (1, 4, 1, 17, 17, 64, True),          # multi-query, one partial tile
    (2, 8, 2, 1000, 1000, 128, False),    # grouped-query, ragged tails
    (2, 8, 2, 1000, 1000, 128, True),
    (1, 4, 2, 300, 170, 128, True),       # S_q > S_k: the first 130 rows see no key
    (1, 2, 2, 17, 1000, 256, True),       # S_q < S_k
    (1, 2, 1, 1000, 333, 256, False),
    (2, 2, 2, 1000, 1000, 64, True),
]
# more query tiles than an H200 has SMs (persistent programs take several), grouped-query, S_q > S_k
# (the first tiles see no key at all), ragged tails
MANY_TILE_CASES = [(2, 16, 4, 1000, 600, 64, True), (2, 16, 4, 1000, 600, 128, True), (2, 16, 4, 1000, 1000, 128, False),
                   (2, 16, 4, 1000, 600, 256, True)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_forward_matches_float64(case, dtype):
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    assert ops.gluon_ok(p, q, k, v, q)
    for cfg in CONFIGS[d]:
        out = torch.full_like(q, float("nan"))
        lse = torch.full((b, h, s_q), float("nan"), device="cuda")
        handle = ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
        torch.cuda.synchronize()
        assert handle is not None and handle.name == "attention_fwd_gluon_kernel"
        check(out, lse, ref_o, ref_l, FWD_TOL[dtype])


@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_ws_forward_matches_float64(case, dtype):
    """The warp-specialised kernel (loader partition, two consumer partitions, ping-pong turns);
    run twice per config on the same inputs: a race would show as a moving error."""
    ws_twice_matches_float64(case, dtype, WS_CONFIGS, seed=1)


def ws_twice_matches_float64(case, dtype, configs, seed):
    """Each of ``configs[d]`` launched twice on the same inputs: both against float64, and bit-equal
    (output and lse: a race would move the result)."""
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + seed)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    for cfg in configs[d]:
        outs = [gluon_launch_checked(q, k, v, p, cfg, ref_o, ref_l, dtype) for _ in range(2)]
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1]), \
            f"{cfg}: two launches on the same inputs differ"


def gluon_launch_checked(q, k, v, p, cfg, ref_o, ref_l, dtype):
    """``cfg`` on its Gluon kernel (ws or one partition) into NaN-poisoned outputs, checked against float64;
    returns (out, lse)."""
    out = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), device="cuda")
    handle = ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
    torch.cuda.synchronize()
    assert handle is not None
    assert handle.name == ("attention_fwd_gluon_ws_kernel" if cfg.ws else "attention_fwd_gluon_kernel")
    check(out, lse, ref_o, ref_l, FWD_TOL[dtype])
    return out, lse


@pytest.mark.parametrize("case", CASES + MANY_TILE_CASES[:1],
                         ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_ws_round10_matches_float64(case, dtype):
    """Round 10's ws variants (early rescale, tree reductions, three consumers) against float64; each
    launched twice on the same inputs (bit-equal: a race would move the result)."""
    ws_twice_matches_float64(case, dtype, ROUND10_CONFIGS, seed=3)


@pytest.mark.parametrize("case", MANY_TILE_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_ws_persistent_matches_float64(case, dtype):
    """The persistent kernel (the loader running ahead into the next tile, O stores in flight) and its
    FMA-unit exp2 variant against float64, and bit-for-bit against the one-tile-per-program kernel."""
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 2)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    assert ops.ws_grid(p, PERSISTENT_CONFIGS[d][0], q.device) < ops.ws_grid(p, WS_CONFIGS[d][0], q.device)
    for cfg in PERSISTENT_CONFIGS[d]:
        matches_its_twin(q, k, v, p, cfg, "persistent", ref_o, ref_l, dtype)


def matches_its_twin(q, k, v, p, cfg, option, ref_o, ref_l, dtype):
    """``cfg`` and the same config with ``option`` off, each into NaN-poisoned outputs: both against
    float64, and bit-equal to each other (the same tiles, scheduled differently)."""
    outs = []
    for c in (cfg, ops.FwdConfig(**{**cfg.as_dict(), option: type(getattr(cfg, option))()})):  # False / 0
        out = torch.full_like(q, float("nan"))
        lse = torch.full(q.shape[:3], float("nan"), device="cuda")
        ops.launch_fwd(q, k, v, out, lse, None, None, p, c)
        torch.cuda.synchronize()
        check(out, lse, ref_o, ref_l, FWD_TOL[dtype])
        outs.append((out, lse))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1]), cfg


def test_gluon_forward_bshd_and_scale():
    """(B, S, H, D) strides through the 4D descriptors, and a scale other than 1/sqrt(D)."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = make(gen, 2, 8, 2, 777, 999, 128, torch.bfloat16)
    ref_o, ref_l = attention_reference(q, k, v, causal=True, scale=0.3)
    qs, ks, vs = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    p = ops.validate(qs, ks, vs, causal=True, scale=0.3, layout="bshd")
    assert ops.gluon_ok(p, qs, ks, vs, qs)
    for cfg, name in ((CONFIGS[128][0], "attention_fwd_gluon_kernel"), (WS_CONFIGS[128][0], "attention_fwd_gluon_ws_kernel")):
        out = torch.full_like(qs, float("nan"))
        lse = torch.full((2, 8, 777), float("nan"), device="cuda")
        handle = ops.launch_fwd(qs, ks, vs, out, lse, None, None, p, cfg)
        torch.cuda.synchronize()
        assert handle.name == name
        check(out.transpose(1, 2), lse, ref_o, ref_l, FWD_TOL[torch.bfloat16])


def test_gluon_refuses_what_tma_cannot_address():
    """Misaligned strides, a padded head dimension and packed batches go to the Triton kernels."""
    gen = torch.Generator(device="cuda").manual_seed(8)
    q, k, v = make(gen, 1, 2, 2, 64, 64, 96, torch.float16)
    p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
    assert not ops.gluon_ok(p, q, k, v, q)  # D = 96
    base = torch.randn(1, 2, 64, 136, device="cuda").to(torch.float16)
    q2 = base[..., 1:129]  # 2-byte offset: not 16-byte aligned
    k2, v2 = make(gen, 1, 2, 2, 64, 64, 128, torch.float16)[1:]
    p2 = ops.validate(q2, k2, v2, causal=False, scale=None, layout="bhsd")
    assert not ops.gluon_ok(p2, q2, k2, v2, k2)
    out = torch.full((1, 2, 64, 128), float("nan"), device="cuda", dtype=torch.float16)
    lse = torch.full((1, 2, 64), float("nan"), device="cuda")
    handle = ops.launch_fwd(q2, k2, v2, out, lse, None, None, p2, CONFIGS[128][0])
    torch.cuda.synchronize()
    assert not handle.name.startswith("attention_fwd_gluon")
    ref_o, _ = attention_reference(q2, k2, v2, causal=False)
    assert rel(out, ref_o) < FWD_TOL[torch.float16]


@pytest.mark.parametrize("causal", [False, True])
def test_public_api_gradients_through_the_gluon_lse(monkeypatch, causal):
    """``tilecraft.attention`` with the Gluon forward as the default: the backward runs on its out
    and lse; gradients against float64 (a gradient on the lse too)."""
    monkeypatch.setitem(ops.GLUON_FWD, (128, causal), WS_CONFIGS[128][0] if causal else CONFIGS[128][0])
    gen = torch.Generator(device="cuda").manual_seed(9)
    q, k, v = make(gen, 1, 4, 2, 300, 300, 128, torch.bfloat16)
    do = torch.randn(q.shape, generator=gen, device="cuda").to(torch.bfloat16)
    dl = torch.randn(1, 4, 300, generator=gen, device="cuda")
    lv = [t.clone().requires_grad_() for t in (q, k, v)]
    o, lse = tilecraft.attention(*lv, causal=causal, return_lse=True)
    grads = torch.autograd.grad((o.float() * do.float()).sum() + (lse * dl).sum(), lv)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ro, rl = attention_reference(*leaves, causal=causal)
    rg = torch.autograd.grad((ro * do.double()).sum() + (rl * dl.double()).sum(), leaves)
    assert rel(o, ro.detach()) < FWD_TOL[torch.bfloat16]
    for g, r in zip(grads, rg):
        assert rel(g, r) < 2.5e-2


# paired causal tiles (n_m - 1 - i, then i, in one program): the one-partition Gluon kernel (the K/V rings'
# slots and phases carry on into the second tile), capped at 128 registers, and the Triton kernels
PAIRED_CONFIGS = [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, paired=True, maxnreg=128),
                  ops.FwdConfig(128, 64, 8, 3, tma=True, gluon=True, overlap=False, paired=True),
                  ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, paired=True),
                  ops.FwdConfig(128, 64, 8, 3, paired=True),
                  ops.FwdConfig(128, 64, 8, 3, tma=True, paired=True)]
PAIRED_CASES = [(2, 2, 2, 1000, 1000, 64, True), (1, 4, 1, 17, 17, 64, True), (1, 4, 2, 300, 170, 64, True),
                (1, 2, 2, 640, 1000, 64, True), (2, 16, 4, 1000, 600, 64, True), (1, 2, 2, 257, 257, 128, True)]


@pytest.mark.parametrize("case", PAIRED_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}".format(*c[:6]))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_paired_causal_tiles_match_float64_and_the_one_tile_grid(case, dtype):
    """Odd and even query-tile counts (the middle tile alone), S_q > S_k (heavy tiles with no key),
    S_q < S_k, grouped heads: against float64, and bit-equal to the same tiles one per program."""
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 11)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    for cfg in PAIRED_CONFIGS:
        matches_its_twin(q, k, v, p, cfg, "paired", ref_o, ref_l, dtype)


PAIRED_WS_CONFIGS = {64: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, paired=True)],
                     128: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True,
                                         tree=True, paired=True)],
                     256: [ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=False, ws=True, tree=True,
                                         paired=True),
                           ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True,
                                         paired=True)]}


@pytest.mark.parametrize("case", CASES + MANY_TILE_CASES,
                         ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_ws_paired_matches_float64(case, dtype):
    """The warp-specialised kernel with paired causal tiles (two tiles per program through the
    persistent loop's ring count and turns); non-causal cases take the one-tile grid."""
    ws_twice_matches_float64(case, dtype, PAIRED_WS_CONFIGS, seed=5)


# ``order``: the causal tiles launched heaviest first inside groups of G heads (a group size that does not
# divide B * H leaves a smaller last group); every kernel that takes it, against float64 and bit-equal to
# the same tiles in the default order
ORDER_CONFIGS = {64: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, maxnreg=128, order=3),
                      ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3,
                                    persistent=True, order=5)],
                 128: [ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True,
                                     tree=True, order=3),
                       ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, persistent=True,
                                     order=8)],
                 256: [ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True, order=3)]}
ORDER_CASES = [(2, 16, 4, 1000, 600, 64, True), (2, 16, 4, 1000, 1000, 128, True), (1, 4, 2, 300, 170, 128, True),
               (1, 2, 2, 17, 1000, 256, True), (2, 16, 4, 1000, 600, 256, True), (3, 5, 5, 700, 700, 64, True)]


@pytest.mark.parametrize("case", ORDER_CASES, ids=lambda c: "B{}H{}/{}S{}x{}D{}".format(*c[:6]))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_grouped_heavy_first_order_matches_float64_and_the_default_order(case, dtype):
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 17)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    for cfg in ORDER_CONFIGS[d]:
        matches_its_twin(q, k, v, p, cfg, "order", ref_o, ref_l, dtype)


# round 20: the consumers' turns and the ring's slot releases by named barriers (bar.sync / bar.arrive) on
# every ws default
@pytest.mark.parametrize("case", CASES + MANY_TILE_CASES,
                         ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_named_barrier_turns_match_float64_and_the_mbarrier_turns(case):
    """``pingpong=2`` and ``named_slots`` on each sm90 ws default (two and three consumers, persistent, paired
    causal): against float64 into NaN-poisoned outputs, launched twice (a race would move the bits), and
    bit-equal to the same config with mbarrier turns and slots (the same products in the same order)."""
    b, h, h_kv, s_q, s_k, d, causal = case
    dtype = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 20)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    base = ops.GLUON_FWD[(d, causal)]
    if not base.ws:
        base = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, ws=True, early=True, tree=True)
    outs = [gluon_launch_checked(q, k, v, p, ops.FwdConfig(**{**base.as_dict(), "pingpong": pp, "named_slots": slots}),
                              ref_o, ref_l, dtype)
            for pp, slots in ((2, True), (2, True), (2, False), (True, True), (True, False))]
    for out, lse in outs[1:]:
        assert torch.equal(outs[0][0], out) and torch.equal(outs[0][1], lse), base


# round 21: FlashAttention-4's conditional rescaling (``lazy``): logits that climb along the keys in some
# rows (the running max raised past 2^8 at many key tiles, in rows r and r + 8 of a warp independently)
# and not in others
def ramped(gen, b, h, h_kv, s_q, s_k, d, dtype):
    q, k, v = (x.float() for x in make(gen, b, h, h_kv, s_q, s_k, d, torch.float32))
    u = torch.randn(d, generator=gen, device="cuda")
    u = u / u.norm() * d ** 0.5
    k = k + (4.0 * torch.arange(s_k, device="cuda") / max(s_k, 1))[:, None] * u  # a ramp along the keys
    pick = torch.randint(0, 3, (b, h, s_q, 1), generator=gen, device="cuda")
    q = q + torch.tensor([0.0, 0.1, 3.0], device="cuda")[pick] * u / d ** 0.5 * 8
    return q.to(dtype), k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("case", CASES + MANY_TILE_CASES,
                         ids=lambda c: "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else ""))
def test_lazy_rescale_matches_float64(case):
    """``lazy`` on each sm90 Gluon default (the ws ones take it since round 21) against float64 into NaN-poisoned
    outputs, on random inputs and on inputs whose logits climb along the keys in a random third of the rows;
    launched twice (bit-equal). With the vote's flag forced to 0 (no rescale ever) 10 of these 13 cases failed."""
    b, h, h_kv, s_q, s_k, d, causal = case
    dtype = torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 21)
    cfg = ops.FwdConfig(**{**ops.GLUON_FWD[(d, causal)].as_dict(), "lazy": True})  # D64 causal: one partition
    for inputs in (make(gen, b, h, h_kv, s_q, s_k, d, dtype), ramped(gen, b, h, h_kv, s_q, s_k, d, dtype)):
        q, k, v = inputs
        ref_o, ref_l = attention_reference(q, k, v, causal=causal)
        p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
        first = gluon_launch_checked(q, k, v, p, cfg, ref_o, ref_l, dtype)
        again = gluon_launch_checked(q, k, v, p, cfg, ref_o, ref_l, dtype)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
