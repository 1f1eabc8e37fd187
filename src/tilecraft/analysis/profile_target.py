"""The program ``tilecraft profile`` runs under ncu: builds random inputs for one op, launches it
twice (the first compiles and warms up; ncu is told to skip it), and prints one JSON line with the
op's least traffic. Not a user command: ``python -m tilecraft.analysis.profile_target laplacian ...``.
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


OPS = {"laplacian": _laplacian}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in OPS:
        print(f"usage: profile_target {{{','.join(OPS)}}} [options]", file=sys.stderr)
        return 2
    print(json.dumps(OPS[argv[0]](argv[1:])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
