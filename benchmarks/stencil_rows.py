"""Rows per thread in the register-window march (2026-11-27): each thread computes ``rows_per_thread``
consecutive rows of its tile, which share their y-neighbour loads (order 8, fp32: 7 instead of 11
128-bit loads per 4 points with two rows), against ``auto`` (one row per thread) in the same run.

    PYTHONPATH=src python benchmarks/stencil_rows.py --out DIR [--cases fp32-o8,fp64-o8] [--rounds 2]

Every configuration is checked against the float64 reference on the timed grid (``check="full"``)
before it is timed; the copy bandwidth is measured in the same run; the candidates run in turn, each
round in the same order, ``auto`` first and last. One JSON per run.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import torch

import stencil_common as sc
from tilecraft.bench.harness import write_results
from tilecraft.ops.stencil import StencilConfig, window_march

CASES = {  # (dtype, order, shape)
    "fp32-o8": ("fp32", 8, (520, 520, 520)),
    "fp64-o8": ("fp64", 8, (520, 520, 520)),
    "fp32-o6": ("fp32", 6, (520, 520, 520)),
    "fp32-o4": ("fp32", 4, (516, 516, 516)),
    "fp64-o4": ("fp64", 4, (516, 516, 516)),
}


def rows(dtype: torch.dtype, r: int, n: int = 2, **kw) -> StencilConfig:
    """``window_march`` with n rows per thread, 8 warps unless given (the window's registers double)."""
    return replace(window_march(dtype, r), rows_per_thread=n, **{"num_warps": 8, **kw})


def candidates(name: str) -> list[StencilConfig | None]:
    dtype, order, _ = CASES[name]
    dt = torch.float32 if dtype == "fp32" else torch.float64
    r = order // 2
    bx = 64 if dt == torch.float32 else 32
    if dt == torch.float64:  # 255 registers and 40 bytes spilled at 8 warps, order 8 (sm90)
        return [None, rows(dt, r), rows(dt, r, block_y=16, num_warps=4)]
    # sm90, order 8: 232 registers at 8 warps (230 with 16-row tiles at 4 warps), no spills; four rows
    # per thread at 4 warps spill tens of kilobytes: not timed
    return [None, rows(dt, r), rows(dt, r, loop_unroll=max(1, r)), rows(dt, r, block_y=16, num_warps=4),
            rows(dt, r, l1_prefetch=3)]


def label(cfg: StencilConfig | None) -> str:
    return "auto" if cfg is None else cfg.short()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default="fp32-o8,fp64-o8")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tag", default="")
    ap.add_argument("--auto-only", action="store_true", help="time auto alone (e.g. two checkouts in one call)")
    args = ap.parse_args()
    info, out, t0, copy = sc.start(args.out)
    records = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        for rnd in range(args.rounds):
            print(f"== {name} {shape} round {rnd + 1} ({time.time() - t0:.0f}s)", flush=True)
            for cfg in [None] if args.auto_only else candidates(name) + [None]:
                records.append(sc.measure(shape, dtype, order, cfg, info, args.budget, copy, "stencil.rows",
                                          {"case": name, "shape": list(shape), "dtype": dtype, "order": order,
                                           "round": rnd + 1}, label, check="full", width=60))
            write_results(records, "stencil.rows", out / f"stencil-rows{args.tag}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
