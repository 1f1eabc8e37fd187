"""The wave step's cp.async-ring interior with a balanced grid (``WaveConfig(balanced=1)``: one program an SM, each an
equal run of the tiles' planes, ``ops.stencil.ring_segments``) against the ring's grid of (tile, z chunk) programs,
in one run on one GPU (fp32 order 8, a 512**3 model):

* the plain step over the whole updated box of the 12-point-CPML grid (536**3 points: 17 x 9 = 153 tiles of 32 x 64
  for 132 SMs, the grid a step with the CPML terms inside one ring would march), and of the grid without a boundary
  (520**3: 128 tiles), at 64 and 256 planes a chunk and balanced; each checked against the torch step first
  (``bench.wave.step_suite``, which also times the torch step as the peer);
* the whole CPML step (12 points), the default against the same step with the balanced ring interior, rounds in
  turn, each checked against the float64 torch step first (``bench.wave.cpml_rounds``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_balanced.py --out DIR [--rounds 3]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import cpml_rounds, step_suite
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--skip-plain", action="store_true")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    ring = ops.smem_config()
    records = []
    if not args.skip_plain:
        configs = [ring, replace(ring, block_z=256), replace(ring, balanced=1)]
        for width in (12, 0):
            print(f"== plain step, {args.n}^3 model + {width}-point layer", flush=True)
            for rnd in range(args.rounds):
                recs = step_suite(args.n, 8, torch.float32, width, configs=configs, copy_tbps=copy, budget_s=1.0,
                                  say=lambda m: None)
                for r in recs:
                    r.case.update(round=rnd + 1)
                    if r.case.get("variant") == "fused":
                        c = r.extra["config"]
                        print(f"  round {rnd + 1} z{c['block_z']} bal{c.get('balanced', 0)} "
                              f"{r.ours / copy:6.1%} of copy {r.extra['time_ms']:.4f} ms ok={r.extra.get('ok')} "
                              f"err={r.extra.get('error', float('nan')):.1e}", flush=True)
                records += [r for r in recs if r.case.get("variant") == "fused"]
    base = ops.default_cpml_config(torch.device("cuda"))
    cases = {"default": (base, None), "balanced interior": (base, replace(ring, balanced=1))}
    print(f"== CPML step, {args.n}^3 + 12", flush=True)
    records += cpml_rounds(cases, args.rounds, copy, n=args.n, pml_width=12)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.balanced", args.out / "wave-balanced.json", info, meta={"copy_TBps": copy})
    return 0


if __name__ == "__main__":
    sys.exit(main())
