"""The Gluon split-KV decode kernel (``attention_decode_gluon_kernel``) and the Triton one with the
fused merge (``DecodeConfig(fuse=True)``: no combine kernel) on an sm90 GPU against float64.

Skipped without an sm90 CUDA GPU (the Triton interpreter cannot run Gluon); on the device machine:

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_attention_decode_gluon.py

Every candidate config, launched through ``ops.launch_decode`` (the partials and the combine kernel
as ``attention`` runs them): odd key lengths (1, 17, 1000, 4099: fewer keys than one tile, ragged
tails, ragged last chunk), S_q 1..16, grouped-query (1, 3, 4 and 8 query heads per K/V head: 64-row
tiles full, partial, and two row tiles), causal with S_q > S_k (rows that see no key), both layouts,
fp16 and bf16, explicit and default split counts; out and lse poisoned with NaN first.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import attention_reference

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.version.hip is None and torch.cuda.get_device_capability() == (9, 0)),
    reason="the Gluon decode kernel needs an sm90 (Hopper) CUDA GPU")

TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
D = ops.DecodeConfig
#: (name, config): the round-8 candidates (docs/attention.md)
CONFIGS = [
    ("g64s3", D(64, 4, 3, gluon=True)),
    ("g64s3o", D(64, 4, 3, gluon=True, overlap=True)),
    ("g32s4", D(32, 4, 4, gluon=True)),
    ("g32s4o", D(32, 4, 4, gluon=True, overlap=True)),
    ("g64s6x2", D(64, 4, 6, splits=2, gluon=True)),
    ("g32s6", D(32, 4, 6, gluon=True)),
    # round 9: the Triton kernel whose last program per row tile merges the chunks
    ("f64s4p1", D(64, 4, 4, programs_per_sm=1, fuse=True)),
    ("f64s5p1", D(64, 4, 5, programs_per_sm=1, fuse=True)),
    ("f64s3", D(64, 4, 3, fuse=True)),
    ("f64s4p1w8", D(64, 8, 4, programs_per_sm=1, fuse=True)),
]
# (B, H, H_kv, S_q, S_k, D, causal, layout, splits)
CASES = [
    (2, 8, 2, 16, 1000, 128, False, "bhsd", 0),     # 64 rows (4 heads x 16), ragged tail
    (1, 8, 1, 16, 4099, 128, True, "bhsd", 3),      # 128 rows: two row tiles; ragged chunks
    (2, 4, 4, 1, 17, 128, False, "bhsd", 0),        # one row, fewer keys than a tile
    (1, 6, 2, 3, 2049, 64, True, "bshd", 0),        # 9 rows, D = 64, bshd
    (1, 4, 1, 16, 1, 128, True, "bhsd", 0),         # S_q > S_k: 15 of 16 queries see no key
    (1, 4, 4, 5, 3000, 128, True, "bshd", 2),
]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-300)).item()


def _case_id(c):
    return "B{}H{}/{}S{}x{}D{}{}{}s{}".format(*c[:6], "c" if c[6] else "", c[7], c[8])


@pytest.mark.parametrize("name,cfg", CONFIGS, ids=[n for n, _ in CONFIGS])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gluon_decode_matches_float64(name, cfg, case, dtype):
    b, h, h_kv, s_q, s_k, d, causal, layout, splits = case
    gen = torch.Generator(device="cuda").manual_seed(hash(case) % 2**31)
    q, k, v = (torch.randn(b, n, s, d, generator=gen, device="cuda").to(dtype)
               for n, s in ((h, s_q), (h_kv, s_k), (h_kv, s_k)))
    ref_o, ref_l = attention_reference(q, k, v, causal=causal)
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
        qa, ka, va = (x.transpose(1, 2) for x in (q, k, v))
    else:
        qa, ka, va = q, k, v
    p = ops.validate(qa, ka, va, causal=causal, scale=None, layout=layout)
    assert ops.gluon_ok(p, qa, ka, va)
    c = ops.DecodeConfig(**{**cfg.as_dict(), "splits": splits or cfg.splits})
    outs = []
    for _ in range(2):
        out = torch.full_like(qa, float("nan"))
        lse = torch.full((b, h, s_q), float("nan"), device="cuda")
        handles = ops.launch_decode(qa, ka, va, out, lse, p, c)
        torch.cuda.synchronize()
        assert handles[0].name == ("attention_decode_gluon_kernel" if cfg.gluon else "attention_decode_kernel")
        assert len(handles) == (1 if cfg.fuse else 2)
        if cfg.fuse:
            assert not ops.decode_counters(1, q.device).any(), "the fused merge must re-arm its counters"
        o = out.transpose(1, 2) if layout == "bshd" else out
        assert not torch.isnan(o).any(), "every output element must be written (NaN poison left)"
        assert rel(o, ref_o) < TOL[dtype], rel(o, ref_o)
        fin = torch.isfinite(ref_l)
        assert torch.equal(torch.isfinite(lse), fin), "lse must be -inf exactly on rows that see no key"
        assert (o.double()[~fin] == 0).all(), "rows that see no key must be exactly 0"
        if fin.any():
            assert (lse.double()[fin] - ref_l[fin]).abs().max().item() < 1e-3
        outs.append(o)
    assert torch.equal(outs[0], outs[1]), f"{cfg}: two launches on the same inputs differ"


@pytest.mark.parametrize("s_q", [16, 1])
def test_public_api_dispatches_measured_decode(s_q):
    """``tilecraft.attention`` runs ``SM90_DECODE``'s choice for a decode call (the Gluon kernel for
    fewer than 64 rows per K/V head, one Triton program per SM for full tiles), matching float64."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(2, 8, s_q, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k = torch.randn(2, 2, 2000, 128, generator=gen, device="cuda").to(torch.bfloat16)
    v = torch.randn(2, 2, 2000, 128, generator=gen, device="cuda").to(torch.bfloat16)
    p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
    assert ops.uses_decode(p)
    cfg = ops.decode_config(p, q, k, v)
    assert cfg == ops.sm90_decode_choice(128, 4 * s_q) and cfg.gluon == (s_q == 1)
    out = tilecraft.attention(q, k, v)
    ref_o, _ = attention_reference(q, k, v)
    assert rel(out, ref_o) < TOL[torch.bfloat16]


def test_fused_decode_replays_in_a_cuda_graph():
    """The fused merge's arrival counters are re-armed by the launch itself: a captured launch replays
    bit-equal to the eager one, many times (the benchmark times graph replays)."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    q = torch.randn(3, 12, 16, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(3, 3, 3001, 128, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    cfg = D(64, 4, 4, splits=5, fuse=True)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((3, 12, 16), float("nan"), device="cuda")
    ops.launch_decode(q, k, v, out, lse, p, cfg)
    eager, eager_lse = out.clone(), lse.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.launch_decode(q, k, v, out, lse, p, cfg)  # the counters of this stream, allocated before capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            ops.launch_decode(q, k, v, out, lse, p, cfg)
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(20):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager) and torch.equal(lse, eager_lse)
    ref_o, _ = attention_reference(q, k, v, causal=True)
    assert rel(out, ref_o) < TOL[torch.bfloat16]
