"""Helpers shared by the GPU attention tests (tests/gpu/test_attention_gluon.py and
test_attention_triton.py): relative error against float64, random q/k/v on the GPU, and the forward
check (every element written, error bound, lse -inf exactly on rows that see no key, those rows 0)."""
from __future__ import annotations

import torch


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-300)).item()


def make(gen, b, h, h_kv, s_q, s_k, d, dtype):
    def one(heads, n):
        return torch.randn(b, heads, n, d, generator=gen, device="cuda").to(dtype)
    return one(h, s_q), one(h_kv, s_k), one(h_kv, s_k)


def check(out, lse, ref_o, ref_l, tol: float) -> None:
    assert not torch.isnan(out).any(), "every output element must be written (NaN poison left)"
    assert rel(out, ref_o) < tol
    fin = torch.isfinite(ref_l)
    assert torch.equal(torch.isfinite(lse), fin), "lse must be -inf exactly on rows that see no key"
    assert (lse[~fin] == float("-inf")).all()
    assert (out.double()[~fin] == 0).all(), "rows that see no key must be exactly 0"
    if fin.any():
        assert (lse.double()[fin] - ref_l[fin]).abs().max().item() < 1e-3
