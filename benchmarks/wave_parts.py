"""The GPU time of every launch of the default CPML step (512**3 model + a CPML of ``--width`` points, 12 the
library's default; fp32 order 8) on one stream (``bench.wave.cpml_parts``: profiler records, median of 20 steps),
each as % of the copy bandwidth measured first, counting 16 B per point of its boxes. Run it from two checkouts
in turn to compare kernel versions launch by launch (2026-11-29, sixteenth session: psi and zeta moved only in
the layers).

    PYTHONPATH=src python benchmarks/wave_parts.py --out DIR [--width 12] [--tag new]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import cpml_parts, parts_state
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--width", type=int, default=12)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    st = parts_state(width=args.width)
    out = torch.empty_like(st.p)
    cfg = ops.default_cpml_config(st.p.device)
    records = cpml_parts(st.p, st.pp, st.m, out, 8, st.spacing, st.lo, st.hi, st.axes0, cfg, None,
                         {"pml_width": args.width, "tag": args.tag}, st.copy, say=lambda s: print("  " + s, flush=True))
    for r in records:
        print(f"  {args.tag:6s} {r.case['variant']:24s} {r.extra['time_ms']:.4f} ms  {r.ours / st.copy:6.1%} of copy",
              flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.parts", args.out / f"wave-parts-w{args.width}{'-' + args.tag if args.tag else ''}.json",
                  st.info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
