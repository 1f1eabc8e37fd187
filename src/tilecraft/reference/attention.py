"""Reference scaled dot-product attention: plain torch, the oracle for tests.

``attention_reference`` computes softmax(Q·Kᵀ·scale)·V in float64 by default, with the same
conventions as ``tilecraft.attention``:

* tensors are (B, H, S, D) ("bhsd"); K and V may have fewer heads (H_kv divides H: grouped-query
  attention, H_kv = 1 multi-query); query head h reads key/value head h // (H / H_kv);
* ``causal`` masks with the bottom-right alignment of FlashAttention-2: query i (0-based, of S_q)
  sees key j (of S_k) when j <= i + S_k - S_q, so the last query sees every key. When S_q > S_k the
  first S_q - S_k queries see no key at all: their output is 0 and their log-sum-exp is -inf;
* the log-sum-exp is natural-log, of the scaled logits, per (B, H, S_q) row.

``attention_varlen_reference`` does the same for packed sequences (cumulative offsets).
The reference is also the CPU path of ``tilecraft.attention`` when the Triton interpreter is off.
"""
from __future__ import annotations

import math

import torch


def causal_mask(s_q: int, s_k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean (S_q, S_k) mask, True where query i may see key j (bottom-right: j <= i + S_k - S_q)."""
    i = torch.arange(s_q, device=device)[:, None]
    j = torch.arange(s_k, device=device)[None, :]
    return j <= i + (s_k - s_q)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                        scale: float | None = None, dtype: torch.dtype | None = torch.float64
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of softmax(Q Kᵀ scale) V for (B, H, S, D) tensors, computed in ``dtype``
    (float64 by default; None keeps the inputs' dtype). ``out`` has q's shape in ``dtype``;
    ``lse`` is (B, H, S_q). Rows that see no key give out = 0 and lse = -inf.
    Differentiable (autograd through torch ops), so it is also the gradient oracle."""
    if dtype is not None:
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    h, h_kv = q.shape[1], k.shape[1]
    if h != h_kv:
        k = k.repeat_interleave(h // h_kv, dim=1)
        v = v.repeat_interleave(h // h_kv, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        logits = logits.masked_fill(~causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    # Softmax with the row maximum held constant (detached): exact for the values, and the
    # gradients stay finite on rows that see no key (torch.logsumexp's backward gives NaN there).
    m = logits.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(logits - m)
    denom = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    lse = (m + torch.log(denom)).squeeze(-1)
    return torch.matmul(p, v), lse


def attention_backward_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor,
                                 grad_lse: torch.Tensor | None = None, *, causal: bool = False,
                                 scale: float | None = None, dtype: torch.dtype | None = torch.float64
                                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) by the explicit formulas the kernels use (no autograd), in ``dtype``:
    P = softmax(S), dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP - rowsum(dO ∘ O) + dlse), dQ = dS K · scale,
    dK = dSᵀ Q · scale; with grouped K/V heads, dK and dV sum over the query heads of each group."""
    if dtype is not None:
        q, k, v, grad_out = q.to(dtype), k.to(dtype), v.to(dtype), grad_out.to(dtype)
    h, h_kv = q.shape[1], k.shape[1]
    group = h // h_kv
    ke = k.repeat_interleave(group, dim=1) if group > 1 else k
    ve = v.repeat_interleave(group, dim=1) if group > 1 else v
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = torch.matmul(q, ke.transpose(-1, -2)) * scale
    if causal:
        logits = logits.masked_fill(~causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    m = logits.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(logits - m)
    denom = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    out = torch.matmul(p, ve)
    delta = (grad_out * out).sum(-1, keepdim=True)
    if grad_lse is not None:
        delta = delta - grad_lse.to(delta.dtype)[..., None]
    dp = torch.matmul(grad_out, ve.transpose(-1, -2))
    ds = p * (dp - delta)
    dq = torch.matmul(ds, ke) * scale
    dk = torch.matmul(ds.transpose(-1, -2), q) * scale
    dv = torch.matmul(p.transpose(-1, -2), grad_out)
    if group > 1:
        b, _, s_k, d = dk.shape
        dk = dk.view(b, h_kv, group, s_k, d).sum(2)
        dv = dv.view(b, h_kv, group, s_k, d).sum(2)
    return dq, dk, dv


def attention_varlen_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                               cu_seqlens_k: torch.Tensor, *, causal: bool = False, scale: float | None = None,
                               dtype: torch.dtype | None = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed ("thd") layout: q is (total_q, H, D), k and v (total_k, H_kv, D); sequence b holds rows
    cu_seqlens_q[b]:cu_seqlens_q[b+1] of q and cu_seqlens_k[b]:cu_seqlens_k[b+1] of k and v.
    Returns (out (total_q, H, D), lse (H, total_q))."""
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs, lses = [], []
    for b in range(len(cq) - 1):
        qb = q[cq[b]:cq[b + 1]].transpose(0, 1)[None]
        kb = k[ck[b]:ck[b + 1]].transpose(0, 1)[None]
        vb = v[ck[b]:ck[b + 1]].transpose(0, 1)[None]
        o, lse = attention_reference(qb, kb, vb, causal=causal, scale=scale, dtype=dtype)
        outs.append(o[0].transpose(0, 1))
        lses.append(lse[0])
    return torch.cat(outs, 0), torch.cat(lses, 1)
