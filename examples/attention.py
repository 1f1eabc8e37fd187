"""tilecraft.attention in a few lines: grouped-query causal attention, forward and backward, checked
against the float64 reference.

    python examples/attention.py                      # GPU if there is one, else the CPU (torch reference path)
    TRITON_INTERPRET=1 python examples/attention.py   # CPU, the Triton kernels in the interpreter

On a GPU it also times the forward against SDPA (median of CUDA-event timings).
"""
from __future__ import annotations

import torch

import tilecraft
from tilecraft.reference.attention import attention_reference


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b).norm() / b.norm()).item()


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    b, h, h_kv, s_q, s_k, d = (2, 16, 4, 1000, 1000, 128) if device == "cuda" else (1, 4, 2, 37, 45, 64)
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(b, h, s_q, d, device=device, generator=gen).to(torch.bfloat16).requires_grad_()
    k = torch.randn(b, h_kv, s_k, d, device=device, generator=gen).to(torch.bfloat16).requires_grad_()
    v = torch.randn(b, h_kv, s_k, d, device=device, generator=gen).to(torch.bfloat16).requires_grad_()
    out, lse = tilecraft.attention(q, k, v, causal=True, return_lse=True)   # H=16 query heads share 4 K/V heads
    do = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)

    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref, ref_lse = attention_reference(*leaves, causal=True)
    ref_grads = torch.autograd.grad(ref, leaves, do.double())
    print(f"bf16 B{b} H{h}/{h_kv} S{s_q}x{s_k} D{d} causal: relative error out {rel(out, ref):.1e}, "
          f"lse {(lse.double() - ref_lse).abs().max().item():.1e} (max abs), "
          + ", ".join(f"d{n} {rel(g, r):.1e}" for n, g, r in zip("qkv", (dq, dk, dv), ref_grads)))
    if device == "cuda":
        import triton.testing

        q, k, v = (torch.randn(4, 16, 4096, 128, device=device, dtype=torch.bfloat16) for _ in range(3))
        ours = triton.testing.do_bench(lambda: tilecraft.attention(q, k, v, causal=True), return_mode="median")
        peer = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                                       return_mode="median")
        flops = 4 * 4 * 16 * 4096 * 4096 * 128 / 2
        print(f"B4 H16 S4096 D128 causal forward: tilecraft {flops / ours / 1e9:.0f} TFLOP/s, "
              f"SDPA {flops / peer / 1e9:.0f} TFLOP/s ({peer / ours:.2f}x)")


if __name__ == "__main__":
    main()
