"""Does writing over an array just read cost time on this GPU's memory system, with no Triton kernel involved?
torch.addcmul(pp, m, p) (read three 560**3 fp32 arrays, write one) into pp itself against into a fourth
array, back to back, events around 20 calls, rounds alternating (2026-11-28: the wave step in place ran 8% slower
than into a third array on an H200, ``benchmarks/wave_steady.py``).

    python benchmarks/inplace_probe.py [--n 560] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=560)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(1)
    p, pp, m = (torch.rand((args.n,) * 3, device="cuda", generator=g) for _ in range(3))
    spare = torch.empty_like(p)
    nbytes = 4 * p.numel() * 4

    def timed(out_of: str) -> float:
        for _ in range(2):
            torch.addcmul(pp, m, p, out=pp if out_of == "in place" else spare)
        torch.cuda.synchronize()
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        for _ in range(20):
            torch.addcmul(pp, m, p, out=pp if out_of == "in place" else spare)
        e.record()
        e.synchronize()
        return b.elapsed_time(e) / 20

    res = {"in place": [], "separate": []}
    for _ in range(args.rounds):
        for k in res:
            res[k].append(timed(k))
    out = {"device": torch.cuda.get_device_name(), "n": args.n, "bytes": nbytes}
    for k, v in res.items():
        ms = statistics.median(v)
        out[k] = {"ms": v, "median_ms": ms, "tbps": nbytes / ms / 1e9}
        print(f"{k:9s} {ms:.3f} ms  {nbytes / ms / 1e9:.3f} TB/s  rounds {[round(x, 3) for x in v]}", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
