"""Where the host's time goes in one of tilecraft's public ops (cProfile over many eager calls after a
warm-up, sorted by own time and by cumulative time), on a small problem so the device keeps up.

    PYTHONPATH=src python benchmarks/host_profile.py --op matmul [--calls 300]"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

import torch

import tilecraft
from tilecraft.wave import wave_step


def call(op: str):
    g = torch.Generator(device="cuda").manual_seed(0)
    if op == "laplacian":
        u = torch.rand(128, 128, 128, dtype=torch.float64, device="cuda", generator=g)
        out = torch.zeros_like(u)
        return lambda: tilecraft.laplacian(u, out=out)
    if op == "matmul":
        a, b = (torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(2))
        return lambda: tilecraft.matmul(a, b)
    if op == "attention":
        q, k, v = (torch.randn(1, 8, 256, 64, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(3))
        return lambda: tilecraft.attention(q, k, v)
    if op == "wave_step":
        p, pp = (torch.rand(64, 64, 64, device="cuda", generator=g) for _ in range(2))
        m, out = torch.full_like(p, 0.1), torch.empty_like(p)
        return lambda: wave_step(p, pp, m, out, order=8)
    raise SystemExit(f"unknown op {op!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="matmul")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--lines", type=int, default=25)
    args = ap.parse_args()
    fn = call(args.op)
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof).sort_stats(key).print_stats(args.lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
