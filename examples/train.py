"""Training with tilecraft: a small transformer block (causal self-attention and a gelu MLP) whose linear
layers are ``tilecraft.matmul`` and whose attention is ``tilecraft.attention``, both differentiable. Its
gradients are checked against the same block written with torch (``F.linear``, SDPA) in float32, then it is
trained for a few steps of Adam on a toy sequence task.

    python examples/train.py                      # GPU if there is one, else the CPU (torch reference paths)
    TRITON_INTERPRET=1 python examples/train.py   # CPU, the Triton kernels in the interpreter
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tilecraft


def block(x, p, ops):
    """x (B, S, E) -> (B, S, E): x + attention(x), then + MLP; ``ops`` = (linear, attention)."""
    linear, attend = ops
    b, s, e = x.shape
    h = p["heads"]
    q, k, v = (linear(x, p[w], None, None).view(b, s, h, e // h) for w in ("wq", "wk", "wv"))
    x = x + linear(attend(q, k, v).reshape(b, s, e), p["wo"], None, None)
    return x + linear(linear(x, p["w1"], p["b1"], "gelu"), p["w2"], p["b2"], None)


def tilecraft_ops():
    def linear(x, w, bias, act):  # x (B, S, in) @ Wᵀ: a transposed view of the (out, in) weight, no copy
        return tilecraft.matmul(x, w.t(), bias=bias, activation=act)

    return linear, lambda q, k, v: tilecraft.attention(q, k, v, causal=True, layout="bshd")


def torch_ops():
    def linear(x, w, bias, act):
        y = F.linear(x, w, bias)
        return F.gelu(y) if act == "gelu" else y

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=True).transpose(1, 2)

    return linear, attend


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    b, s, e, heads, hidden, steps = (8, 256, 512, 8, 2048, 200) if device == "cuda" else (2, 16, 32, 2, 64, 12)
    dtype = torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)
    params = {"heads": heads}
    for name, shape in (("wq", (e, e)), ("wk", (e, e)), ("wv", (e, e)), ("wo", (e, e)), ("w1", (hidden, e)),
                        ("w2", (e, hidden))):
        params[name] = (torch.randn(shape, device=device, generator=gen) / shape[1] ** 0.5).to(dtype).requires_grad_()
    params["b1"] = torch.zeros(hidden, device=device).requires_grad_()
    params["b2"] = torch.zeros(e, device=device).requires_grad_()
    leaves = [v for v in params.values() if isinstance(v, torch.Tensor)]
    x = torch.randn(b, s, e, device=device, generator=gen).to(dtype)
    target = torch.roll(x, 1, dims=1).float()  # the task: output the previous token's embedding

    def loss_of(ops, ps, inp):
        return F.mse_loss(block(inp, ps, ops).float(), target)

    # gradients against the torch block in float32
    ours = torch.autograd.grad(loss_of(tilecraft_ops(), params, x), leaves)
    ref_params = {k: (v.detach().float().requires_grad_() if isinstance(v, torch.Tensor) else v)
                  for k, v in params.items()}
    ref_leaves = [v for v in ref_params.values() if isinstance(v, torch.Tensor)]
    ref = torch.autograd.grad(loss_of(torch_ops(), ref_params, x.float()), ref_leaves)
    errs = [((g.float() - r).norm() / r.norm().clamp_min(1e-30)).item() for g, r in zip(ours, ref)]
    print(f"block B{b} S{s} E{e} H{heads} MLP {hidden} ({dtype}, {device}): worst gradient relative error "
          f"against torch float32 {max(errs):.1e}; gradients match torch: {max(errs) < 5e-2}")

    opt = torch.optim.Adam(leaves, lr=3e-3)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(tilecraft_ops(), params, x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"trained {steps} Adam steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
