"""Interiors of the wave step timed in turn in one run (2026-11-27): the whole step with the 20-point CPML
on the 512**3 model (``cpml_step_suite``, checked against the float64 torch step before timing; least
bytes 16 B/pt + the layers' psi and zeta), each interior configuration ``--rounds`` times.

``--set halo``: the register-window interior with the halo's loads a plane ahead (``halo_ahead``) and the L1
prefetch distance (``wave-halo.json``). ``--set smem``: the cp.async-ring interior (``kernel="smem"``; ``--set ring``: its 8-warp tiles,
``ops.wave.smem_config``, 3 and 4 planes ahead) against the register window (``wave-smem.json``).

    PYTHONPATH=src python benchmarks/wave_halo.py --out DIR [--rounds 2] [--set smem]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, cpml_step_suite
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.wave import WaveConfig, default_config, smem_config


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.7)
    ap.add_argument("--set", choices=("halo", "smem", "ring"), default="halo")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s", flush=True)
    base = default_config(torch.float32, 8, torch.device("cuda"))
    # the default takes halo_ahead=1 since 3fd24e2 (the run of a4715a6 named the then default, ha0, "default")
    variants = {"ha0": replace(base, halo_ahead=0, l1_prefetch=2),
                "ha2-pf3": replace(base, halo_ahead=2, l1_prefetch=3),
                "ha1": replace(base, halo_ahead=1, l1_prefetch=2)}
    if args.set == "smem":
        zwin = WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="zwin", loop_unroll=8,
                          l1_prefetch=2, halo_ahead=1)  # default_config
        variants = {"zwin": zwin, "smem": smem_config(), "smem-s1": replace(smem_config(), slack=1)}
    if args.set == "ring":  # ring interiors that leave registers and shared memory to the side stream's launches
        zwin = WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="zwin", loop_unroll=8,
                          l1_prefetch=2, halo_ahead=1)
        variants = {"zwin": zwin, "16x64w8d3s0": replace(smem_config(), block_y=16, num_warps=8, ahead=3),
                    "16x64w8d4s2": replace(smem_config(), block_y=16, num_warps=8, ahead=4, slack=2),
                    "32x32w8d3s2": replace(smem_config(), block_x=32, num_warps=8, ahead=3, slack=2)}
    records = []
    for rnd in range(args.rounds):
        for name, cfg in variants.items():
            print(f"== round {rnd + 1} interior {name}: {cfg}", flush=True)
            recs = cpml_step_suite(512, 8, torch.float32, 20, configs=CPML_CONFIGS[:1], device="cuda", copy_tbps=copy,
                                   budget_s=args.budget, unfused=False, parts=False, step_config=cfg,
                                   say=lambda m: print("  " + m, flush=True))
            for r in recs:
                r.case["interior"] = name
                r.case["round"] = rnd + 1
                print(f"   {r.case.get('variant', '')} {name}: {r.ours:.3f} {r.unit}, {r.ours / copy:.1%} of copy, "
                      f"{(r.extra or {}).get('time_ms', float('nan')):.3f} ms", flush=True)
            records += recs
            args.out.mkdir(parents=True, exist_ok=True)
            write_results(records, f"wave.{args.set}", args.out / f"wave-{args.set}.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
