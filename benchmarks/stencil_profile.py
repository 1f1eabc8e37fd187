"""Run one stencil configuration a few times, for a profiler (ncu) to read the hardware counters.

    ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum ... \
        python benchmarks/stencil_profile.py --dtype fp64 --order 2 --shape 512 512 512 --config '{...}'
"""
from __future__ import annotations

import argparse
import json

import torch

from tilecraft.analysis.fom import stencil_traffic
from tilecraft.ops import stencil as ops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="fp64")
    ap.add_argument("--order", type=int, default=2)
    ap.add_argument("--shape", type=int, nargs=3, default=[512, 512, 512])
    ap.add_argument("--variant", default="auto")
    ap.add_argument("--config", default=None, help="StencilConfig fields as JSON (overrides --variant)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    dtype = {"fp32": torch.float32, "fp64": torch.float64}[args.dtype]
    shape = tuple(args.shape)
    u = torch.rand(shape, dtype=dtype, device="cuda")
    out = torch.zeros_like(u)
    # the tensors' facts (alignment, the flat kernel, an sm90 GPU for the ring), as ``laplacian`` reads them: before
    # 2026-11-29 this took ``config_for`` without them, so ``auto`` here was the register-window march on an sm90 GPU
    cfg = (ops.StencilConfig(**json.loads(args.config)) if args.config
           else ops.config_for_tensors(args.variant, u, out, args.order))
    for _ in range(args.runs):
        ops.launch(u, out, args.order, (1.0, 1.0, 1.0), cfg)
    torch.cuda.synchronize()
    t = stencil_traffic(shape, args.order, u.element_size())
    print(json.dumps({"config": cfg.as_dict(), "min_fetch_bytes": t.fetch_bytes, "min_write_bytes": t.write_bytes}))


if __name__ == "__main__":
    main()
