"""The Triton attention kernels (``kernels.attention``) compiled for a CUDA GPU against float64.

The interpreter tests (tests/ops/test_attention.py) run these kernels with 16x16 tiles; here they run
at the tiles a GPU gets by default (``triton_fwd_config``: tensor descriptors on sm90 at D = 96 and 256,
``pointer_fwd_config``, ``default_bwd_config``), on a GPU machine:

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_attention_triton.py

Head dimensions 64, 96 (padded to 128) and 256, fp16 and bf16; outputs, lse and gradients poisoned
with NaN before each launch; the atomic dQ path (deterministic=False) against float64 only, the
deterministic path also twice bit-equal (the interpreter repeats the atomic path bitwise too, so only
a GPU can tell them apart); packed batches and the bshd layout through ``tilecraft.attention``.
"""
from __future__ import annotations

import pytest
import torch
from _attention_gpu import check, make, rel

import tilecraft
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import attention_backward_reference, attention_reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton kernels compiled for a CUDA GPU")

FWD_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
GRAD_TOL = {torch.float16: 5e-3, torch.bfloat16: 1e-2}
DTYPES = (torch.bfloat16, torch.float16)
# (B, H, H_kv, S_q, S_k, D, causal)
CASES = [
    (2, 4, 2, 300, 300, 64, True),      # grouped-query, ragged tails
    (2, 2, 2, 1000, 1000, 64, False),
    (1, 4, 1, 300, 170, 96, True),      # multi-query, S_q > S_k: the first 130 rows see no key; D padded to 128
    (1, 4, 2, 333, 777, 96, False),
    (1, 2, 2, 17, 1000, 256, True),     # S_q < S_k
    (1, 2, 1, 1000, 333, 256, False),
]


def case_id(c):
    return "B{}H{}/{}S{}x{}D{}{}".format(*c[:6], "c" if c[6] else "")


def forward(q, k, v, p, cfg):
    out = torch.full_like(q, float("nan"))
    lse = torch.full((p.batch, p.heads, p.seqlen_q), float("nan"), device="cuda")
    handle = ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
    torch.cuda.synchronize()
    assert "gluon" not in getattr(handle, "name", ""), "the Triton kernels were asked for"
    return out, lse


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_triton_forward_matches_float64(case, dtype):
    """The default Triton tiles and the pointer-load tiles (the fallback, and the choice off sm90)."""
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    for cfg in (ops.triton_fwd_config(d, q.device), ops.pointer_fwd_config(d, q.device)):
        out, lse = forward(q, k, v, p, cfg)
        check(out, lse, ref_o, ref_l, FWD_TOL[dtype])


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
def test_triton_backward_matches_float64(case, dtype, deterministic):
    """``default_bwd_config`` into NaN-poisoned gradients, twice: against float64 each time, and with
    deterministic=True bit-equal (dQ by its own kernel; the atomic path may differ in the last bits)."""
    b, h, h_kv, s_q, s_k, d, causal = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31 + 1)
    q, k, v = make(gen, b, h, h_kv, s_q, s_k, d, dtype)
    do = torch.randn(q.shape, generator=gen, device="cuda").to(dtype)
    p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
    out, lse = forward(q, k, v, p, ops.triton_fwd_config(d, q.device))
    ref = attention_backward_reference(q, k, v, do, causal=causal)
    runs = []
    for _ in range(2):
        grads = tuple(torch.full_like(t, float("nan")) for t in (q, k, v))
        ops.launch_bwd(do, q, k, v, out, lse, None, *grads, None, None, p, ops.default_bwd_config(d, q.device),
                       deterministic)
        torch.cuda.synchronize()
        for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
            assert not torch.isnan(g).any(), f"{name}: unwritten elements (NaN poison left)"
            assert rel(g, r) < GRAD_TOL[dtype], f"{name}: {rel(g, r):.2e}"
        runs.append(grads)
    if deterministic:
        for name, a, b_ in zip(("dq", "dk", "dv"), *runs):
            assert torch.equal(a, b_), f"{name}: two deterministic runs differ"


def _varlen_grads(q, k, v, do, cu_q, cu_k, causal):
    """float64 (dq, dk, dv) of a packed batch, sequence by sequence."""
    cq, ck = cu_q.tolist(), cu_k.tolist()
    grads = [torch.zeros(t.shape, dtype=torch.float64, device=t.device) for t in (q, k, v)]
    for i in range(len(cq) - 1):
        rq, rk = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        if cq[i + 1] == cq[i] or ck[i + 1] == ck[i]:
            continue  # no query or no key: gradient 0
        seq = [t.transpose(0, 1)[None] for t in (q[rq], k[rk], v[rk], do[rq])]
        for dst, src, rows in zip(grads, attention_backward_reference(*seq, causal=causal), (rq, rk, rk)):
            dst[rows] = src[0].transpose(0, 1)
    return grads


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 96, 128, 256])
def test_packed_batches_forward_and_backward(d, dtype):
    """Packed ("thd") sequences of lengths 1, 0, ragged and longer than a tile, causal (bottom-right
    per sequence, so some queries see no key), through ``tilecraft.attention``: output, lse and
    gradients against float64."""
    from tilecraft.reference.attention import attention_varlen_reference

    gen = torch.Generator(device="cuda").manual_seed(20 + d)
    lens_q, lens_k = [1, 300, 0, 129, 517], [7, 300, 5, 64, 517]
    cu_q, cu_k = (torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
                  for n in (lens_q, lens_k))
    q = torch.randn(sum(lens_q), 4, d, generator=gen, device="cuda").to(dtype)
    k, v = (torch.randn(sum(lens_k), 2, d, generator=gen, device="cuda").to(dtype) for _ in range(2))
    do = torch.randn(q.shape, generator=gen, device="cuda").to(dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tilecraft.attention(*leaves, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    grads = torch.autograd.grad(out, leaves, do)
    ref_o, ref_l = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert rel(out, ref_o) < FWD_TOL[dtype]
    # the first 65 queries of the 129-query, 64-key sequence see no key (bottom-right): lse -inf there
    blind = torch.isneginf(ref_l)
    assert int(blind.sum()) == 65 * 4 and torch.isneginf(lse[blind]).all()
    assert (lse.double()[~blind] - ref_l[~blind]).abs().max().item() < 1e-3
    for name, g, r in zip(("dq", "dk", "dv"), grads, _varlen_grads(q, k, v, do, cu_q, cu_k, True)):
        assert rel(g, r) < GRAD_TOL[dtype], f"{name}: {rel(g, r):.2e}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
def test_bshd_layout_backward(dtype, deterministic):
    """(B, S, H, D) views into one packed projection (sequence stride 3 H D), causal, grouped-query
    through the head strides: gradients against float64. D = 96: the Triton forward on sm90 too."""
    gen = torch.Generator(device="cuda").manual_seed(31)
    b, s, h, d = 2, 555, 8, 96
    qkv = torch.randn(b, s, 3, h, d, generator=gen, device="cuda").to(dtype)
    q, k, v = qkv.unbind(2)
    k, v = k[:, :, :2], v[:, :, :2]  # two K/V heads for eight query heads
    do = torch.randn(q.shape, generator=gen, device="cuda").to(dtype)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = tilecraft.attention(*leaves, causal=True, layout="bshd", deterministic=deterministic)
    grads = torch.autograd.grad(out, leaves, do)
    bhsd = [t.transpose(1, 2) for t in (q, k, v, do)]
    ref_o, _ = attention_reference(*bhsd[:3], causal=True)
    assert rel(out.transpose(1, 2), ref_o) < FWD_TOL[dtype]
    for name, g, r in zip(("dq", "dk", "dv"), grads, attention_backward_reference(*bhsd, causal=True)):
        assert not torch.isnan(g).any(), name
        assert rel(g.transpose(1, 2), r) < GRAD_TOL[dtype], f"{name}: {rel(g.transpose(1, 2), r):.2e}"


def test_default_dq_path_on_this_gpu():
    """``deterministic=None``: the atomic dQ by TMA bulk reductions at D = 128 on sm90+, the dQ kernel at
    D = 64 and under ``torch.use_deterministic_algorithms(True)``; the default backward at D = 128 then
    agrees with the deterministic one to rounding."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(2, 4, 333, 128, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    cfg = ops.default_bwd_config(128, q.device)
    hopper = torch.cuda.get_device_capability()[0] >= 9
    assert ops.dq_path(None, p, q, cfg) == ("atomic-tma" if hopper else "kernel")
    p64 = ops.validate(q[..., :64], k[..., :64], v[..., :64], causal=True, scale=None, layout="bhsd")
    assert ops.dq_path(None, p64, q, ops.default_bwd_config(64, q.device)) == "kernel"
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert ops.dq_path(None, p, q, cfg) == "kernel"
    finally:
        torch.use_deterministic_algorithms(was)
    do = torch.randn(q.shape, generator=gen, device="cuda").to(torch.bfloat16)
    grads = {}
    for det in (None, True):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = tilecraft.attention(*leaves, causal=True, deterministic=det)
        grads[det] = torch.autograd.grad(out, leaves, do)
    for name, a, b in zip(("dq", "dk", "dv"), grads[None], grads[True]):
        assert not torch.isnan(a).any(), name
        assert rel(a, b) < 1e-2, f"{name}: {rel(a, b):.2e}"



def test_atomic_backward_replays_in_a_cuda_graph():
    """The TMA-reduction backward (D = 128, deterministic=False) captured in a CUDA graph: replayed on new
    inputs it matches an eager call on them to rounding (its accumulator is zeroed inside the graph)."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    shape = (1, 4, 300, 128)
    q, k, v, do = (torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(4))
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    cfg = ops.default_bwd_config(128, q.device)
    out, lse = ops._fwd_compute(q, k, v, None, None, p)
    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.launch_bwd(do, q, k, v, out, lse, None, *grads, None, None, p, cfg, False)  # compile outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            ops.launch_bwd(do, q, k, v, out, lse, None, *grads, None, None, p, cfg, False)
    torch.cuda.current_stream().wait_stream(s)
    for t in (q, k, v, do):
        t.copy_(torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16))
    o2, l2 = ops._fwd_compute(q, k, v, None, None, p)
    out.copy_(o2), lse.copy_(l2)
    for t in grads:
        t.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    eager = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    ops.launch_bwd(do, q, k, v, out, lse, None, *eager, None, None, p, cfg, False)
    for name, a, b in zip(("dq", "dk", "dv"), grads, eager):
        assert not torch.isnan(a).any(), name
        assert rel(a, b) < 1e-2, f"{name}: {rel(a, b):.2e}"
