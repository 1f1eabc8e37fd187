"""The program ``tilecraft profile`` runs under ncu: builds random inputs for one op, launches it
twice (the first compiles and warms up; ncu is told to skip it), and prints one JSON line with the
op's least traffic. Not a user command: ``python -m tilecraft.analysis.profile_target laplacian ...``
(also ``matmul`` and ``attention``).
"""
from __future__ import annotations

import argparse
import json
import sys


def _laplacian(argv: list[str]) -> dict:
    import torch

    from tilecraft.analysis.fom import stencil_traffic
    from tilecraft.ops.stencil import laplacian

    p = argparse.ArgumentParser(prog="profile_target laplacian")
    p.add_argument("--variant", default="auto")
    p.add_argument("--dtype", choices=("fp64", "fp32"), default="fp64")
    p.add_argument("--order", type=int, default=2)
    p.add_argument("--shape", type=int, nargs=3, default=(512, 512, 512))
    a = p.parse_args(argv)
    dtype = {"fp64": torch.float64, "fp32": torch.float32}[a.dtype]
    u = torch.rand(tuple(a.shape), dtype=dtype, device="cuda") * 2 - 1
    out = torch.zeros_like(u)
    for _ in range(2):
        laplacian(u, order=a.order, out=out, variant=a.variant)
    torch.cuda.synchronize()
    t = stencil_traffic(tuple(a.shape), a.order, u.element_size())
    return {"least_fetch_bytes": t.fetch_bytes, "least_write_bytes": t.write_bytes}


def _matmul(argv: list[str]) -> dict:
    import torch

    import tilecraft
    from tilecraft.bench import gemm as gb

    p = argparse.ArgumentParser(prog="profile_target matmul")
    p.add_argument("--dtype", default="bf16", choices=tuple(gb.DTYPES))
    p.add_argument("--layout", default="NN", choices=gb.LAYOUTS)
    p.add_argument("--shape", type=int, nargs=3, default=(8192, 8192, 8192))
    a = p.parse_args(argv)
    m, n, k = a.shape
    x, y = gb.make_operands(m, n, k, a.dtype, a.layout, "cuda")
    kw = gb.call_kwargs(a.dtype, m, n, "cuda")
    out = None
    for _ in range(2):
        out = tilecraft.matmul(x, y, **kw)
    torch.cuda.synchronize()
    return {"least_fetch_bytes": x.numel() * x.element_size() + y.numel() * y.element_size(),
            "least_write_bytes": out.numel() * out.element_size()}


def _attention(argv: list[str]) -> dict:
    import torch

    import tilecraft
    from tilecraft.bench import attention as ab

    p = argparse.ArgumentParser(prog="profile_target attention")
    p.add_argument("--dtype", default="bf16", choices=tuple(ab.DTYPES))
    p.add_argument("--shape", type=int, nargs=4, default=(4, 16, 4096, 128), metavar=("B", "H", "S", "D"))
    p.add_argument("--causal", action="store_true")
    a = p.parse_args(argv)
    b, h, s, d = a.shape
    shape = ab.Shape(b, h, h, s, s, d, a.causal)
    q, k, v = ab.make_inputs(shape, ab.DTYPES[a.dtype], "cuda")
    for _ in range(2):
        tilecraft.attention(q, k, v, causal=a.causal)
    torch.cuda.synchronize()
    item = q.element_size()
    out_bytes = q.numel() * item
    return {"least_fetch_bytes": ab.attention_bytes(shape, item) - out_bytes, "least_write_bytes": out_bytes}


OPS = {"laplacian": _laplacian, "matmul": _matmul, "attention": _attention}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in OPS:
        print(f"usage: profile_target {{{','.join(OPS)}}} [options]", file=sys.stderr)
        return 2
    print(json.dumps(OPS[argv[0]](argv[1:])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
