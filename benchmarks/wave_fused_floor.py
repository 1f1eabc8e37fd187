"""What one kernel over the whole CPML grid could reach (issue 7: the CPML step at 85% of copy): the plain step
(p_next = 2 p - p_prev + m lap p, no CPML terms) over the whole updated box of a 512**3 model + 12-point CPML
(536**3 points: 17 x 9 = 153 tiles of 32 x 64 for 132 SMs), by the cp.async ring at several marches and by the
register window, against the same on the grid without a boundary (512**3 updated points, 128 tiles) and the
default CPML step, in one run (fp32 order 8). A kernel that also did the CPML terms in the layers moves at least
the plain step's bytes at every point plus psi and zeta in the layers, so its fraction of copy would not be above
the plain step's over the same box unless it streamed the layers' extra bytes faster than the plain step streams
its own. Every plain configuration is checked against the torch step first (``bench.wave.step_suite``, which
also times the torch step as the peer); the CPML step against the float64 torch step (``cpml_rounds``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_fused_floor.py --out DIR [--rounds 2]
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
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=512)
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    ring = ops.smem_config()
    configs = [ring, replace(ring, block_z=128), replace(ring, block_z=256), replace(ring, block_z=536),
               replace(ring, block_y=16, num_warps=8), ops.zwin_config()]
    records = []
    for rnd in range(args.rounds):
        for width in (12, 0):
            recs = step_suite(args.n, 8, torch.float32, width, configs=configs, copy_tbps=copy, budget_s=1.0,
                              say=lambda m: None)
            for r in recs:
                r.case.update(round=rnd + 1)
                if r.case.get("variant") in ("fused", "torch"):
                    c = r.extra.get("config") or {}
                    name = (f"{c.get('kernel')} {c.get('block_y')}x{c.get('block_x')} z{c.get('block_z')}"
                            if c else "torch step")
                    print(f"round {rnd + 1} width {width:2d} {name:22s} {r.ours / copy:6.1%} of copy "
                          f"{r.extra['time_ms']:.4f} ms ok={r.extra.get('ok', True)}", flush=True)
            records += recs
        base = ops.default_cpml_config(torch.device("cuda"))
        records += cpml_rounds({"default": (base, None)}, 1, copy, n=args.n, pml_width=12)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.fused_floor", args.out / "wave-fused-floor.json", info, meta={"copy_TBps": copy})
    return 0


if __name__ == "__main__":
    sys.exit(main())
