"""The whole CPML step (512**3 model + 20-point CPML, fp32 order 8) with the ring interior (``smem_config``)
under the CPML configuration's launch orders, against the register-window interior with the default
(2026-11-28): the default (side stream at high priority), the side stream at normal priority, one stream with
the interior first, one stream with the layers first. ``cpml_step_suite`` (checked against the float64 torch
step first), ``--rounds`` rounds in turn.

    PYTHONPATH=src python benchmarks/wave_ring_streams.py --out DIR [--rounds 2] [--set regs]

``--set regs``: the ring interior under register budgets (``WaveConfig.maxnreg``) with the default launch
order, so that the side stream's launches fit beside its CTAs.

Timed on an H200 on 2026-11-28 and removed (the sets are in the commits named in
``benchmarks/results/2026-11-28-h200/README.md``): ``--set psiz``, ``psi_z_fused``, 51.3-52.2%
of copy against 56.4%; ``--set psiy``, ``psi_y_fused`` with 32-row tiles for the kinds with y terms, 49.7-51.2%
against 56.4%, the same tiles without it 51.1%; ``--set xfaces``, the x layer boxes widened into the interior
to 64 / 96 / 128 columns with x-face tiles as wide, 52.3-52.7 / 45.0 / 45.8% against 56.3%; ``--set corun``,
a persistent zwin interior of one 8-warp program per SM marching its tiles in turn, so that the side stream's
programs fit beside it, 44.4-44.8% against 56.4% (41.3% on one stream; 16x64 tiles of 8 warps without
persistence 55.5%, the 32x64 default persistent 46.9%).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import cpml_rounds
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.wave import default_config, default_cpml_config, smem_config


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", choices=("orders", "regs"), default="orders")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s", flush=True)
    dev = torch.device("cuda")
    base = default_cpml_config(dev)
    cases = {"zwin-default": (default_config(torch.float32, 8, dev), base),
             "ring-default": (smem_config(), base),
             "ring-side-prio0": (smem_config(), replace(base, side_priority=0)),
             "ring-one-stream": (smem_config(), replace(base, streams=False, interior_first=True)),
             "ring-layers-first": (smem_config(), replace(base, streams=False, interior_first=False)),
             "zwin-one-stream": (default_config(torch.float32, 8, dev), replace(base, streams=False,
                                                                               interior_first=True))}
    if args.set == "regs":  # ring interiors under a register budget, leaving room beside them for the side stream
        cases = {"zwin-default": (default_config(torch.float32, 8, dev), base),
                 "ring-default": (smem_config(), base),
                 "ring-r112": (replace(smem_config(), maxnreg=112), base),
                 "ring-16x64w8-r128": (replace(smem_config(), block_y=16, num_warps=8, ahead=3, maxnreg=128), base),
                 "ring-16x64w8-r112": (replace(smem_config(), block_y=16, num_warps=8, ahead=3, maxnreg=112), base)}
        # (cross-compiled for sm90: 112 registers no spill; 104 spills 8 bytes, 96 72 bytes)
    records = cpml_rounds({name: (pcfg, icfg) for name, (icfg, pcfg) in cases.items()}, args.rounds, copy, 512, 20,
                          say=lambda m: print(m, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.ring_streams", args.out / f"wave-ring-streams-{args.set}.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
