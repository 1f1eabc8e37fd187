"""The float64 attention reference: against a naive per-row softmax, and its explicit backward
formulas against autograd."""
from __future__ import annotations

import math

import torch

from tilecraft.reference.attention import (
    attention_backward_reference,
    attention_reference,
    attention_varlen_reference,
    causal_mask,
)


def test_reference_against_naive_loops(gen):
    q, k, v = (torch.randn(1, 2, n, 8, generator=gen, dtype=torch.float64) for n in (5, 3, 3))
    k, v = k[:, :1], v[:, :1]  # multi-query
    out, lse = attention_reference(q, k, v, causal=True)
    for h in range(2):
        for i in range(5):
            keys = [j for j in range(3) if j <= i + 3 - 5]
            if not keys:
                assert out[0, h, i].abs().max() == 0 and lse[0, h, i] == -math.inf
                continue
            s = torch.stack([q[0, h, i] @ k[0, 0, j] / math.sqrt(8) for j in keys])
            w = torch.softmax(s, 0)
            assert torch.allclose(out[0, h, i], sum(w[n] * v[0, 0, j] for n, j in enumerate(keys)))
            assert torch.allclose(lse[0, h, i], torch.logsumexp(s, 0))


def test_causal_mask_top_rows_empty_when_more_queries():
    m = causal_mask(4, 2)
    assert m.tolist() == [[False, False], [False, False], [True, False], [True, True]]


def test_backward_formulas_match_autograd(gen):
    q = torch.randn(2, 4, 7, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, 5, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, 5, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    do = torch.randn(2, 4, 7, 16, generator=gen, dtype=torch.float64)
    dlse = torch.randn(2, 4, 7, generator=gen, dtype=torch.float64)
    out, lse = attention_reference(q, k, v, causal=True, scale=0.4)
    lse_finite = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    auto = torch.autograd.grad((out * do).sum() + (lse_finite * dlse).sum(), (q, k, v))
    mask = torch.isfinite(lse)  # rows that see no key carry no lse gradient
    formulas = attention_backward_reference(q, k, v, do, torch.where(mask, dlse, 0), causal=True, scale=0.4)
    for a, b in zip(auto, formulas):
        assert torch.allclose(a, b, atol=1e-12)
        assert torch.isfinite(b).all()


def test_varlen_reference_is_per_sequence(gen):
    q = torch.randn(9, 2, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(6, 1, 8, generator=gen, dtype=torch.float64)
    v = torch.randn(6, 1, 8, generator=gen, dtype=torch.float64)
    cu_q, cu_k = torch.tensor([0, 4, 9]), torch.tensor([0, 1, 6])
    out, lse = attention_varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    o1, l1 = attention_reference(q[4:].transpose(0, 1)[None], k[1:].transpose(0, 1)[None],
                                 v[1:].transpose(0, 1)[None], causal=True)
    assert torch.equal(out[4:], o1[0].transpose(0, 1)) and torch.equal(lse[:, 4:], l1[0])
    assert lse.shape == (2, 9)
