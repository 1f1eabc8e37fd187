"""Where the wave step's time goes with each interior (2026-11-27): the GPU time of every launch of one CPML
step on one stream (``bench.wave.cpml_parts``: profiler records, median of 20 steps), the register-window
interior (zwin) against the cp.async-ring interior (smem), 512**3 model + 20-point CPML, fp32 order 8.

    PYTHONPATH=src python benchmarks/wave_smem_parts.py --out DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, cpml_parts, parts_state
from tilecraft.ops.wave import default_config, smem_config


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    st = parts_state()
    info, copy, p, pp, m = st.info, st.copy, st.p, st.pp, st.m
    out = torch.empty_like(p)
    zwin = default_config(torch.float32, 8, p.device)
    records = []
    for name, cfg in (("zwin", zwin), ("smem", smem_config())):
        recs = cpml_parts(p, pp, m, out, 8, st.spacing, st.lo, st.hi, st.axes0, CPML_CONFIGS[0], cfg, {"interior": name}, copy,
                          say=lambda s: print("  " + s, flush=True))
        for r in recs:
            print(f"  {name:5s} {r.case['variant']:24s} {r.extra['time_ms']:.3f} ms  {r.ours / copy:6.1%} of copy",
                  flush=True)
        records += recs
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.smem_parts", args.out / "wave-smem-parts.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
