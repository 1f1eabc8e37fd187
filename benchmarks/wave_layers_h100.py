"""One GPU call: the CPML step's layer launches on an H100 (fp32, order 8, 512**3 model + 20-point CPML,
the zwin interior of ``default_config``).

1. The whole step (``cpml_step_suite``: each configuration first checked against the float64 torch step,
   p_next, psi and zeta, from a NaN-poisoned output; then timed) with the previous default CPML
   configuration and the candidates, in alternating rounds (run 1, 20e084c: the previous default and
   xstore; run 2 adds psi4, xstore with smaller psi tiles, the side stream at normal priority and one stream): ``x_store_boxes`` (the x layer boxes cut
   at their x stores' bounds, so the x faces' 32-column tiles own their columns and run beside the
   zwin interior instead of after it) and, with ``--sweep``, tile variants per kind of layer box.
2. The GPU time of each launch (profiler, one stream) of every configuration: the per-kind numbers
   from which the tiles of a composed configuration are picked.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_layers_h100.py OUT_DIR [--rounds 3] [--sweep]

Writes wave-layers-<commit>.json (Records; rewritten after each stage) and prints tables of % of the
copy bandwidth measured in the same run.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit, write_results
from tilecraft.bench.wave import cpml_step_suite, table
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.wave import PSI_TILES, default_cpml_config

CUDA = torch.device("cuda")
PREVIOUS = replace(default_cpml_config(CUDA), x_store_boxes=False)  # the default before this round
XSTORE = replace(PREVIOUS, x_store_boxes=True)
P = PSI_TILES
# run 2: x_store_boxes with the psi tiles of s4 (run 1: psi z 0.082 / y 0.073 ms against 0.086 / 0.079)
PSI4 = replace(XSTORE, psi_tiles=((4, 128, 5, 4), (4, 128, 4, 4), P[2]))
# run 2: the side stream at normal priority (the zwin interior fills an SM's registers: the side
# stream's programs start only where interior programs end), both, and xstore on one stream
P0 = replace(XSTORE, side_priority=0)
PSI4P0 = replace(PSI4, side_priority=0)
ONE = replace(XSTORE, streams=False)
NAMED = {"previous": PREVIOUS, "xstore": XSTORE, "psi4": PSI4, "p0": P0, "psi4p0": PSI4P0, "one": ONE}
# (z, y, x faces, edges, corners) tiles (block_y, block_x, block_z, warps); psi (z, y, x)
SWEEP = {
    "s1": replace(XSTORE, march_tiles=((4, 128, 12, 4), (4, 128, 12, 4), (16, 32, 4, 4), (16, 32, 2, 4), (4, 32, 2, 1)),
                  psi_tiles=((4, 128, 20, 4), (4, 128, 12, 4), P[2])),
    "s2": replace(XSTORE, march_tiles=((4, 128, 24, 4), (4, 128, 24, 4), (8, 32, 8, 2), (8, 32, 4, 2), (4, 32, 4, 1)),
                  psi_tiles=((8, 128, 10, 8), (8, 128, 8, 8), P[2])),
    "s3": replace(XSTORE, march_regs=(0, 0, 96, 0, 0)),  # no register budgets (z faces 145 registers, no spills)
    "s4": replace(XSTORE, march_tiles=((8, 128, 8, 8), (8, 128, 8, 8), (32, 32, 4, 8), (4, 128, 2, 4), (4, 32, 2, 1)),
                  psi_tiles=((4, 128, 5, 4), (4, 128, 4, 4), P[2])),
}


def name_of(cfg: dict | None) -> str:
    if not cfg:
        return ""
    for name, c in (*NAMED.items(), *SWEEP.items()):
        if c.as_dict() == cfg:
            return name
    for name, c in (*NAMED.items(), *SWEEP.items()):
        if {**c.as_dict(), "streams": None} == {**cfg, "streams": None}:  # the parts run on one stream
            return name
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.6)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    say = lambda m: print(m, flush=True)  # noqa: E731
    info = detect()
    copy = measure_copy_bandwidth()
    say(f"copy {copy:.3f} TB/s")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"wave-layers-{git_commit()}.json"
    meta = {"copy_TBps_start": copy, "least_bytes": "16 B per updated point + psi and zeta in the layers",
            "configs": {**{k: v.as_dict() for k, v in NAMED.items()},
                        **{k: v.as_dict() for k, v in SWEEP.items()}}}
    configs = (PREVIOUS, XSTORE) + (tuple(SWEEP.values()) if args.sweep else ())
    records = cpml_step_suite(args.n, 8, torch.float32, 20, configs=tuple(NAMED.values()), copy_tbps=copy,
                              budget_s=args.budget, unfused=False, say=say, parts=(PREVIOUS, XSTORE, PSI4),
                              rounds=args.rounds)
    write_results(records, "wave", path, info, meta)
    if args.sweep:
        torch.cuda.empty_cache()
        records += [r for r in cpml_step_suite(args.n, 8, torch.float32, 20, configs=configs[2:], copy_tbps=copy,
                                               budget_s=args.budget, unfused=False, say=say, parts=configs[2:],
                                               rounds=1) if r.case.get("variant") != "cpml-torch"]
    meta["copy_TBps_end"] = copy2 = measure_copy_bandwidth()
    write_results(records, "wave", path, info, meta)
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start / end)")
    print("\n".join(table(records, copy, [("config", 10, lambda r: name_of(r.extra.get("config"))),
                                           ("round", 6, lambda r: r.extra.get("round", "")),
                                           ("err", 10, lambda r: f"{r.extra.get('error', float('nan')):.2e}")])))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
