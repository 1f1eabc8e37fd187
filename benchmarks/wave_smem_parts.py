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
from tilecraft.bench.wave import CPML_CONFIGS, _cpml_state, _setup, cpml_parts
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.wave import WaveConfig, smem_config


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s", flush=True)
    dev, _measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), _points = _setup(512, 8, 20, torch.float32, "cuda",
                                                                                      20261122)
    axes0, _lp = _cpml_state(layout, shape, torch.float32, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    out = torch.empty_like(p)
    zwin = WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="zwin", loop_unroll=8, l1_prefetch=2,
                      halo_ahead=1)
    records = []
    for name, cfg in (("zwin", zwin), ("smem", smem_config())):
        recs = cpml_parts(p, pp, m, out, 8, spacing, lo, hi, axes0, CPML_CONFIGS[0], cfg, {"interior": name}, copy,
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
