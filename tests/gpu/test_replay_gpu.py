"""Replayed launches on the GPU (``ops.launch.ReplayCache``): an eager ``matmul`` or ``attention`` call
whose tensors have the layouts of an earlier call's runs the compiled kernels Triton returned for that
call, with the new tensors. Each case must give the bits of the same calls planned afresh
(``TILECRAFT_REPLAY=0``) and agree with float64; also on a side stream and captured in a CUDA graph.

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_replay_gpu.py
"""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.ops import attention as attn_ops
from tilecraft.ops import gemm as gemm_ops
from tilecraft.ops import launch
from tilecraft.ops.launch import REPLAY_ENV, Replay
from tilecraft.reference.attention import attention_reference

GEMM_CASES = {  # name: (dtype, M, N, K, b transposed, kwargs)
    "bf16-1000": (torch.bfloat16, 1000, 1000, 1000, False, {}),
    "bf16-nt-epilogue": (torch.bfloat16, 512, 768, 256, True, {"bias": True, "activation": "gelu"}),
    "bf16-small-m": (torch.bfloat16, 16, 4096, 4096, False, {}),
    "bf16-batched": (torch.bfloat16, 3, 200, 136, False, {"batch": 4}),
    "fp32-512": (torch.float32, 512, 512, 512, False, {}),
    "fp16-odd": (torch.float16, 97, 131, 77, False, {}),
    "bf16-batch-stacked": (torch.bfloat16, 1000, 1024, 1024, False, {"batch": 8}),
    "bf16-4096": (torch.bfloat16, 4096, 4096, 4096, True, {}),
    "tf32-batch-nn": (torch.float32, 77, 768, 768, False, {"batch": 32, "precision": "tf32"}),
    # plans that copy an operand (rows the TMA cannot read) or split it (3xTF32): fresh buffers, replayed
    "bf16-odd-k-copy": (torch.bfloat16, 300, 256, 1001, False, {}),
    "bf16-k1-copy": (torch.bfloat16, 512, 512, 1, False, {}),
    "fp32-accurate-split": (torch.float32, 512, 384, 1000, False, {"precision": "fp32-accurate"}),
}


def _gemm_inputs(case, gen):
    dtype, m, n, k, bt, kw = GEMM_CASES[case]
    lead = (kw["batch"],) if "batch" in kw else ()
    a = torch.randn(*lead, m, k, device="cuda", generator=gen).to(dtype)
    b = (torch.randn(n, k, device="cuda", generator=gen).t() if bt
         else torch.randn(k, n, device="cuda", generator=gen)).to(dtype)
    extra = {}
    if kw.get("bias"):
        extra = {"bias": torch.randn(n, device="cuda", generator=gen), "activation": kw["activation"]}
    if "precision" in kw:
        extra["precision"] = kw["precision"]
    return a, b, extra


def _calls(fn, inputs):
    return [fn(*x) for x in inputs]


@pytest.mark.parametrize("case", list(GEMM_CASES))
def test_matmul_replay_gives_the_planned_bits(monkeypatch, case):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    gen = torch.Generator(device="cuda").manual_seed(1)
    inputs = [_gemm_inputs(case, gen) for _ in range(4)]
    fn = lambda a, b, extra: tilecraft.matmul(a, b, **extra)  # noqa: E731
    monkeypatch.setenv(REPLAY_ENV, "0")
    planned = _calls(fn, inputs)
    assert not gemm_ops._REPLAYS._entries
    monkeypatch.delenv(REPLAY_ENV)
    replayed = _calls(fn, inputs)
    entries = list(gemm_ops._REPLAYS._entries.values())
    assert len(entries) == 1
    for got, want, (a, b, extra) in zip(replayed, planned, inputs):
        assert torch.equal(got, want)
        ref = torch.matmul(a.double(), b.double())
        if "bias" in extra:
            ref = torch.nn.functional.gelu(ref + extra["bias"].double())
        err = float((got.double() - ref).norm() / ref.norm())
        assert err < 1e-2, err
    if not isinstance(entries[0], Replay):
        pytest.skip(f"{case}: planned afresh each call (checked above): {entries[0]}")
    # the lean replay (the launchers' C entry point, TMA maps kept per address) against CompiledKernel.run
    assert entries[0].lean is not None, [type(s[0]).__name__ for s in entries[0].steps]
    monkeypatch.setattr(launch, "LEAN", False)
    assert all(torch.equal(got, want) for got, want in zip(_calls(fn, inputs), planned))
    monkeypatch.setattr(launch, "LEAN", True)
    # on a side stream, and captured in a CUDA graph whose inputs then change
    a, b, extra = inputs[0]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        side = fn(a, b, extra)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(side, planned[0])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        captured = fn(a, b, extra)
    a2, b2, _ = inputs[1]
    a.copy_(a2)
    b.copy_(b2)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, planned[1] if not extra else fn(a2, b2, extra))


ATTN_CASES = {  # name: (B, H, H_kv, S_q, S_k, D, causal)
    "d128": (1, 8, 8, 512, 512, 128, False),
    "d128-causal": (1, 8, 8, 384, 384, 128, True),
    "d64-gqa": (2, 8, 2, 300, 300, 64, False),
    "d256": (1, 4, 4, 256, 256, 256, False),
    "decode-d128": (2, 32, 8, 1, 4096, 128, False),
    "decode-s16": (2, 32, 8, 16, 2048, 128, True),
    "d96": (1, 4, 4, 200, 200, 96, False),
}


@pytest.mark.parametrize("case", list(ATTN_CASES))
def test_attention_replay_gives_the_planned_bits(monkeypatch, case):
    bsz, h, h_kv, s_q, s_k, d, causal = ATTN_CASES[case]
    gen = torch.Generator(device="cuda").manual_seed(2)

    def qkv():
        q = torch.randn(bsz, h, s_q, d, device="cuda", generator=gen).to(torch.bfloat16)
        k, v = (torch.randn(bsz, h_kv, s_k, d, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(2))
        return q, k, v

    inputs = [qkv() for _ in range(4)]
    fn = lambda q, k, v: tilecraft.attention(q, k, v, causal=causal, return_lse=True)  # noqa: E731
    monkeypatch.setenv(REPLAY_ENV, "0")
    planned = _calls(fn, inputs)
    monkeypatch.delenv(REPLAY_ENV)
    replayed = _calls(fn, inputs)
    assert len(attn_ops._REPLAYS._entries) == 1
    for (o, lse), (o_ref_bits, lse_ref_bits), (q, k, v) in zip(replayed, planned, inputs):
        assert torch.equal(o, o_ref_bits) and torch.equal(lse, lse_ref_bits)
        ref, ref_lse = attention_reference(q, k, v, causal=causal)
        assert (o.double() - ref).abs().max() < 2e-2
        fin = torch.isfinite(ref_lse)
        assert (lse.double()[fin] - ref_lse[fin]).abs().max() < 1e-3
    if isinstance(next(iter(attn_ops._REPLAYS._entries.values())), Replay):
        assert next(iter(attn_ops._REPLAYS._entries.values())).lean is not None
        q, k, v = inputs[0]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            o, lse = fn(q, k, v)
        torch.cuda.current_stream().wait_stream(s)
        assert torch.equal(o, planned[0][0])


@pytest.mark.parametrize("order,dtype,shape", [(2, torch.float64, (64, 96, 128)), (8, torch.float32, (40, 72, 136)),
                                               (4, torch.float32, (17, 33, 61))])
def test_laplacian_replay_gives_the_planned_bits(monkeypatch, order, dtype, shape):
    from tilecraft.ops import stencil as stencil_ops
    from tilecraft.reference.stencil import laplacian_torch

    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    gen = torch.Generator(device="cuda").manual_seed(3)
    inputs = [torch.rand(shape, dtype=dtype, device="cuda", generator=gen) for _ in range(4)]
    fn = lambda u: tilecraft.laplacian(u, order=order, spacing=(0.5, 1.0, 2.0))  # noqa: E731
    monkeypatch.setenv(REPLAY_ENV, "0")
    planned = [fn(u) for u in inputs]
    monkeypatch.delenv(REPLAY_ENV)
    replayed = [fn(u) for u in inputs]
    entries = list(stencil_ops._REPLAYS._entries.values())
    assert len(entries) == 1 and isinstance(entries[0], Replay), entries
    assert entries[0].lean is not None
    r = order // 2
    inner = (slice(r, -r),) * 3
    for got, want, u in zip(replayed, planned, inputs):
        assert torch.equal(got, want)
        ref = laplacian_torch(u.double(), order, (0.5, 1.0, 2.0))
        assert (got[inner].double() - ref[inner]).abs().max() / ref[inner].abs().max() < 1e-5


BWD_CASES = {  # name: (B, H, H_kv, S, D, causal, deterministic, through the lse)
    "d128-atomic-tma": (1, 8, 8, 512, 128, False, False, False),
    "d128-causal-det": (1, 8, 8, 384, 128, True, True, False),
    "d64-gqa-det-lse": (2, 8, 2, 300, 64, False, True, True),
    "d256-causal-det": (1, 4, 4, 200, 256, True, True, False),
    "d96-atomic": (1, 4, 4, 200, 96, False, False, True),
}


@pytest.mark.parametrize("case", list(BWD_CASES))
def test_attention_backward_replay_and_eager_autograd(monkeypatch, case):
    """Training-style calls (autograd records them): the eager autograd function's forward and backward,
    planned afresh (TILECRAFT_REPLAY=0) and then replayed, against float64; deterministic cases bit for
    bit against the planned calls and against the registered op (torch.ops.tilecraft.attention_fwd)."""
    bsz, h, h_kv, s, d, causal, det, with_lse = BWD_CASES[case]
    gen = torch.Generator(device="cuda").manual_seed(3)

    def inputs():
        q = torch.randn(bsz, h, s, d, device="cuda", generator=gen).to(torch.bfloat16)
        k, v = (torch.randn(bsz, h_kv, s, d, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(2))
        do = torch.randn(bsz, h, s, d, device="cuda", generator=gen).to(torch.bfloat16)
        dlse = torch.randn(bsz, h, s, device="cuda", generator=gen) if with_lse else None
        return q, k, v, do, dlse

    def step(q, k, v, do, dlse, via_op=False):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        if via_op:
            out, lse = torch.ops.tilecraft.attention_fwd(*leaves, None, None, s, s, causal, d ** -0.5, "bhsd", det)
        else:
            out, lse = tilecraft.attention(*leaves, causal=causal, return_lse=True, deterministic=det)
            assert "_EagerAttention" in type(out.grad_fn).__name__
        outs, grads = ((out, lse), (do, dlse)) if with_lse else ((out,), (do,))
        return torch.autograd.grad(outs, leaves, grads)

    data = [inputs() for _ in range(4)]
    monkeypatch.setenv(REPLAY_ENV, "0")
    planned = [step(*x) for x in data]
    monkeypatch.delenv(REPLAY_ENV)
    replayed = [step(*x) for x in data]
    entries = list(attn_ops._BWD_REPLAYS._entries.values())
    assert len(entries) == 1 and isinstance(entries[0], Replay), entries
    via_op = step(*data[0], via_op=True)
    for got, want, (q, k, v, do, dlse) in zip(replayed, planned, data):
        ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
        ref_out, ref_lse = attention_reference(*ref_leaves, causal=causal)
        ref = torch.autograd.grad((ref_out, ref_lse) if with_lse else (ref_out,), ref_leaves,
                                  (do.double(), dlse.double()) if with_lse else (do.double(),))
        for a, b, r in zip(got, want, ref):
            err = float((a.double() - r).norm() / r.norm())
            assert err < 2e-2, (case, err)
            if det:
                assert torch.equal(a, b)
    if det:
        assert all(torch.equal(a, b) for a, b in zip(via_op, planned[0]))
