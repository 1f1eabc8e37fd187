"""Where the host's time goes in a ``tilecraft.laplacian`` call (cProfile over many calls after a warm-up),
and the host time per call of the public op against ``ops.launch`` with a fixed configuration.

    PYTHONPATH=src python benchmarks/stencil_host_profile.py [--calls 300] [--shape 256 256 256]"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import torch

import tilecraft
from tilecraft.ops import stencil as ops


def per_call_us(fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--shape", type=int, nargs=3, default=[128, 128, 128])
    ap.add_argument("--dtype", default="fp64")
    ap.add_argument("--order", type=int, default=2)
    args = ap.parse_args()
    dtype = torch.float64 if args.dtype == "fp64" else torch.float32
    u = torch.rand(*args.shape, dtype=dtype, device="cuda")
    out = torch.zeros_like(u)
    cfg = ops.choose_config(u, out, args.order, (1.0, 1.0, 1.0)).config
    paths = {
        "tilecraft.laplacian(out=)": lambda: tilecraft.laplacian(u, order=args.order, out=out),
        "ops._compute(auto)": lambda: ops._compute(u, args.order, (1.0, 1.0, 1.0), out, "auto"),
        "ops.launch(fixed cfg)": lambda: ops.launch(u, out, args.order, (1.0, 1.0, 1.0), cfg),
    }
    for name, fn in paths.items():
        for _ in range(5):
            fn()
        print(f"{name:32s} {per_call_us(fn, args.calls):7.1f} us per call (host, enqueue only)", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        tilecraft.laplacian(u, order=args.order, out=out)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
