"""Property test: the forward against the float64 reference on shapes hypothesis draws (tiny, in the
Triton interpreter): any lengths, head dims, head groupings, causal or not, either layout."""
from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecraft
from tilecraft.reference.attention import attention_reference


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.integers(1, 2), kv_heads=st.integers(1, 2), group=st.sampled_from([1, 3]), s_q=st.integers(1, 40),
       s_k=st.integers(1, 40), d=st.sampled_from([8, 16, 24, 64, 80]), causal=st.booleans(),
       layout=st.sampled_from(["bhsd", "bshd"]), seed=st.integers(0, 2**16))
def test_forward_matches_reference_on_drawn_shapes(b, kv_heads, group, s_q, s_k, d, causal, layout, seed):
    gen = torch.Generator().manual_seed(seed)
    h = kv_heads * group
    q = torch.randn(b, h, s_q, d, generator=gen).to(torch.float16)
    k = torch.randn(b, kv_heads, s_k, d, generator=gen).to(torch.float16)
    v = torch.randn(b, kv_heads, s_k, d, generator=gen).to(torch.float16)
    if layout == "bshd":
        out, lse = tilecraft.attention(*(t.transpose(1, 2) for t in (q, k, v)), causal=causal, layout="bshd",
                                       return_lse=True)
        out = out.transpose(1, 2)
    else:
        out, lse = tilecraft.attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    assert not torch.isnan(out).any()
    err = (out.double() - ref).norm() / ref.norm().clamp_min(1e-300)
    assert err < 2e-3 or ref.norm() == 0
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    if fin.any():
        assert (lse.double()[fin] - ref_lse[fin]).abs().max() < 1e-4
