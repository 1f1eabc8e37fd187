"""tilecraft.laplacian in a few lines: the Laplacian of u = (x(x-Lx) + y(y-Ly) + z(z-Lz)) / 2 is 3.

    python examples/laplacian.py            # GPU if there is one, else the CPU (torch path)
    TRITON_INTERPRET=1 python examples/laplacian.py   # CPU, the Triton kernels in the interpreter

On a GPU it also times tilecraft against torch slicing (median of CUDA-event timings).
"""
from __future__ import annotations

import torch

import tilecraft
from tilecraft.reference.stencil import quadratic_field


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    n = 256 if device == "cuda" else 24
    spacing = (0.01, 0.02, 0.015)  # (hz, hy, hx)
    u = quadratic_field((n, n + 2, n + 4), spacing, dtype=torch.float64, device=device)
    for order in (2, 8):
        lap = tilecraft.laplacian(u, order=order, spacing=spacing)
        r = order // 2
        interior = lap[r:-r, r:-r, r:-r]
        print(f"order {order:2d}: interior Laplacian in [{interior.min().item():.12f}, "
              f"{interior.max().item():.12f}] (exactly 3), boundary all zero: {bool((lap[:r] == 0).all())}")
    if device == "cuda":
        import triton.testing

        v = torch.rand(512, 512, 512, dtype=torch.float64, device=device)
        ours = triton.testing.do_bench(lambda: tilecraft.laplacian(v, order=2), return_mode="median")
        peer = triton.testing.do_bench(lambda: tilecraft.laplacian(v, order=2, variant="reference"),
                                       return_mode="median")
        print(f"512^3 fp64 order 2: tilecraft {ours:.3f} ms, torch slicing {peer:.3f} ms ({peer / ours:.1f}x)")


if __name__ == "__main__":
    main()
