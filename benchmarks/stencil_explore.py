"""Candidate stencil configurations against ``auto`` on a GPU, in one run (the tuning behind the
row kernel's entries in ``auto_config``).

    PYTHONPATH=src python benchmarks/stencil_explore.py --out DIR

Every configuration is checked against the float64 reference on a small grid of the same
specialisation before it is timed (``bench.stencil.measure_config``); the cudaMemcpy copy
bandwidth is measured in the same run. Writes one JSON per section and prints a table per case.
"""
from __future__ import annotations

import argparse
import sys
import time

from tilecraft.bench import stencil as sb
import stencil_common as sc
from tilecraft.bench.harness import write_results
from tilecraft.ops.stencil import StencilConfig

CASES = {  # (dtype, order, shape): the three targets
    "fp64-o2": ("fp64", 2, (512, 512, 512)),
    "fp32-o2": ("fp32", 2, (512, 512, 512)),
    "fp32-o8": ("fp32", 8, (520, 520, 520)),
}


def rows(by: int, bx: int, nw: int, bz: int, mode: int, maxnreg: int | None = None) -> StencilConfig:
    """A row-kernel configuration (mode 0 unrolled short march, 1 register window loop, 2 z via L1)."""
    return StencilConfig("rows", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True, zorder=2,
                         unroll_z=mode == 0, z_in_regs=mode == 1, maxnreg=maxnreg)


def tiles(by: int, bx: int, nw: int, bz: int, unroll: bool, z_in_regs: bool = True,
          maxnreg: int | None = None) -> StencilConfig:
    return StencilConfig("zmarch", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True, zorder=2,
                         unroll_z=unroll, z_in_regs=z_in_regs, maxnreg=maxnreg)


CANDIDATES: dict[str, list[StencilConfig | None]] = {  # None: what ``auto`` runs today
    "fp64-o2": [None, tiles(2, 256, 4, 4, True),
                *[rows(*t, 0) for t in ((1, 256, 4, 4), (1, 256, 4, 8), (1, 512, 8, 8), (1, 128, 2, 8),
                                        (2, 64, 1, 4), (2, 128, 2, 4), (2, 256, 4, 4), (2, 128, 2, 8),
                                        (2, 256, 4, 8), (4, 128, 2, 4))],
                *[rows(*t, 1) for t in ((1, 256, 4, 32), (2, 128, 2, 32), (2, 256, 4, 32), (4, 128, 2, 32))]],
    "fp32-o2": [None, tiles(2, 256, 2, 2, True),
                *[rows(*t, 0) for t in ((1, 256, 2, 4), (1, 512, 4, 4), (1, 512, 4, 8), (1, 1024, 8, 4),
                                        (2, 128, 1, 2), (2, 256, 2, 2), (2, 256, 2, 4), (2, 512, 4, 2),
                                        (4, 128, 1, 2))],
                *[rows(*t, 1) for t in ((1, 512, 4, 32), (2, 256, 2, 32))]],
    "fp32-o8": [None, tiles(16, 256, 32, 64, False, False, 56), tiles(8, 128, 8, 64, False, False, 56),
                rows(1, 128, 1, 8, 0), rows(2, 128, 1, 4, 0), rows(1, 256, 2, 8, 0),
                rows(1, 128, 1, 64, 1), rows(2, 128, 1, 64, 1),
                rows(2, 128, 1, 64, 2), rows(2, 256, 2, 64, 2), rows(2, 128, 1, 64, 2, 128)],
}
SWEEP_SIZES = (256, 1024, 2048, 4096)
SWEEP_CANDIDATES = [None, tiles(4, 128, 4, 4, True), rows(1, 256, 4, 8, 0), rows(2, 128, 2, 4, 0),
                    rows(2, 256, 4, 4, 0), rows(2, 128, 2, 32, 1), rows(2, 256, 4, 32, 1)]

# Round 2 (after round 1 at 5c869fb; the row kernel's partial-x-tile store fixed since): around
# round 1's best, the high orders on the row kernel, and x-tile widths on small planes (every
# tile of a 256-wide plane is an edge tile with BLOCK_X = 128).
ROUND2: dict[str, list[StencilConfig | None]] = {
    "fp64-o2": [None, rows(2, 128, 2, 4, 0), rows(3, 128, 2, 4, 0), rows(2, 512, 8, 4, 0), rows(1, 512, 8, 4, 0),
                rows(1, 512, 8, 8, 0), tiles(4, 256, 8, 4, True), tiles(8, 128, 8, 4, True),
                tiles(4, 128, 4, 3, True), tiles(4, 64, 2, 4, True)],
    "fp32-o2": [None, rows(2, 512, 4, 2, 0), rows(2, 1024, 8, 2, 0), rows(1, 1024, 8, 2, 0), rows(3, 512, 4, 2, 0),
                rows(2, 512, 4, 3, 0), tiles(2, 512, 4, 2, True), tiles(4, 512, 8, 2, True)],
    "fp32-o8": [None, rows(1, 128, 1, 8, 0), rows(1, 512, 4, 8, 0), rows(2, 128, 1, 4, 0), rows(1, 128, 1, 64, 1),
                rows(1, 512, 4, 64, 1), rows(2, 128, 1, 64, 2), rows(2, 512, 4, 64, 2), rows(2, 512, 4, 64, 2, 128),
                rows(4, 128, 1, 64, 2)],
}
ROUND2_SWEEP_SIZES = (256, 768, 1536)
ROUND2_SWEEP = [None, tiles(4, 64, 2, 4, True), tiles(4, 256, 8, 4, True), tiles(2, 256, 4, 4, True),
                rows(2, 512, 8, 4, 0), StencilConfig("zmarch", block_y=4, block_x=128, num_warps=8, block_z=32,
                                                     nontemporal=True, zorder=2, prefetch=2, pipeline_xy=True)]


def label(cfg: StencilConfig | None) -> str:
    if cfg is None:
        return "auto(today)"
    mode = "u" if cfg.unroll_z else ("w" if cfg.z_in_regs else "l1")
    return (f"{cfg.kernel}-{mode} by{cfg.block_y} bx{cfg.block_x} w{cfg.num_warps} bz{cfg.block_z}"
            + (f" mr{cfg.maxnreg}" if cfg.maxnreg else ""))


def measure(shape, dtype, order, cfg, info, budget, copy, suite, case):
    return sc.measure(shape, dtype, order, cfg, info, budget, copy, suite, case, label)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--round", type=int, default=1, choices=(1, 2))
    args = ap.parse_args()
    cands, sweep_sizes, sweep_cands = ((CANDIDATES, SWEEP_SIZES, SWEEP_CANDIDATES) if args.round == 1
                                       else (ROUND2, ROUND2_SWEEP_SIZES, ROUND2_SWEEP))
    info, out, t0, copy = sc.start(args.out)
    records = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        print(f"== {name} {shape} ({time.time() - t0:.0f}s)", flush=True)
        for cfg in cands[name]:
            records.append(measure(shape, dtype, order, cfg, info, args.budget, copy, "stencil.explore",
                                   {"case": name, "shape": list(shape), "dtype": dtype, "order": order}))
    write_results(records, "stencil.explore", out / f"explore-cases-r{args.round}.json", info)
    if not args.no_sweep:
        records = []
        for shape in sb.sweep_shapes(sweep_sizes, 2, 8):
            print(f"== sweep fp64 o2 {shape} ({time.time() - t0:.0f}s)", flush=True)
            for cfg in sweep_cands:
                records.append(measure(shape, "fp64", 2, cfg, info, args.budget, copy, "stencil.explore-sweep",
                                       {"shape": list(shape), "plane": shape[1] * shape[2], "dtype": "fp64",
                                        "order": 2}))
        write_results(records, "stencil.explore-sweep", out / f"explore-sweep-r{args.round}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
