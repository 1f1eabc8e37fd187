"""Round 3 (2026-11-25): the register-window z-march with tall tiles (each thread keeps its own
column's z window, one 128-bit vector of points per thread), its loop unrolled by 2R so the window's
rotation is register renames, and L1 prefetch (``prefetch.global.L1`` of every sector a plane tile
reads, some planes ahead) so the y-neighbour rows and x chunks hit L1 without registers to hold
them. Against ``auto`` in the same run, for the issue's three cases.

    PYTHONPATH=src python benchmarks/stencil_round3.py --out DIR

Every configuration is checked against the float64 reference (a small grid of the same
specialisation, then the timed grid itself: ``check="full"``) before it is timed; the cudaMemcpy
copy bandwidth is measured in the same run. Writes one JSON and prints a table per case.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import torch

import stencil_common as sc
from tilecraft.bench.harness import write_results
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

CASES = {  # (dtype, order, shape): the three targets, then other orders (round d)
    "fp32-o8": ("fp32", 8, (520, 520, 520)),
    "fp32-o2": ("fp32", 2, (512, 512, 512)),
    "fp64-o2": ("fp64", 2, (512, 512, 512)),
    "fp32-o4": ("fp32", 4, (516, 516, 516)),
    "fp32-o6": ("fp32", 6, (518, 518, 518)),
    "fp64-o8": ("fp64", 8, (520, 520, 520)),
    "fp64-o4": ("fp64", 4, (516, 516, 516)),
    "fp32-o6a": ("fp32", 6, (520, 520, 520)),  # 518 rows are not 16-byte multiples: zwin refuses them
    "fp64-o6": ("fp64", 6, (520, 520, 520)),
}


def win(by: int, bx: int, nw: int, pf: int = 1, lu: int = 1, l1: int = 0, ss: bool = False, bz: int = 64,
        maxnreg: int | None = None) -> StencilConfig:
    """The register-window z-march (``z_in_regs``): tile by x bx, nw warps, pf centre tiles ahead in
    registers, loop unrolled lu times, L1 prefetch l1 planes ahead (0: none), static strides."""
    return StencilConfig("zmarch", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True, zorder=2,
                         prefetch=pf, loop_unroll=lu, l1_prefetch=l1, static_strides=ss, maxnreg=maxnreg)


AUTO8 = ops.auto_config(torch.float32, 8, (520, 520, 520))
CANDIDATES: dict[str, list[StencilConfig | None]] = {  # None: what ``auto`` runs today
    "fp32-o8": [None, replace(AUTO8, l1_prefetch=2, maxnreg=None), replace(AUTO8, l1_prefetch=4, maxnreg=None),
                win(16, 128, 16, pf=2), win(16, 128, 16, pf=2, lu=8, ss=True),
                win(16, 128, 16, l1=2), win(16, 128, 16, l1=4), win(16, 128, 16, lu=8, ss=True, l1=2),
                win(16, 128, 16, lu=8, ss=True, l1=3), win(32, 64, 16, lu=8, ss=True, l1=2),
                win(8, 128, 8, l1=2), None],
    "fp32-o2": [None, win(16, 128, 16, lu=2, l1=2), win(8, 128, 8, lu=2, l1=3), win(4, 128, 4, lu=2, l1=2),
                win(8, 128, 8, lu=2, l1=3, bz=32), None],
    "fp64-o2": [None, win(16, 64, 16, lu=2, l1=2), win(8, 64, 8, lu=2, l1=3), win(4, 128, 8, lu=2, l1=2),
                win(4, 128, 8, pf=2, lu=2, l1=2, bz=32), None],
}

# Second call (after the first at aa91c13: 32 x 64 tiles, loop unrolled by 8, L1 prefetch 2 planes
# ahead, static strides measured 46.9% against 38.5% for auto): around that point, fp32 order 8 only.
CANDIDATES_B: dict[str, list[StencilConfig | None]] = {
    "fp32-o8": [None, win(32, 64, 16, lu=8, ss=True, l1=2), win(32, 64, 16, lu=8, ss=True, l1=1),
                win(32, 64, 16, lu=8, ss=True, l1=3), win(32, 64, 16, lu=4, ss=True, l1=2),
                win(32, 64, 16, lu=8, ss=True, l1=2, bz=128), win(32, 64, 16, lu=8, ss=True, l1=2, bz=32),
                win(64, 32, 16, lu=8, ss=True, l1=2), win(16, 64, 8, lu=8, ss=True, l1=2),
                win(32, 32, 8, lu=8, ss=True, l1=2), win(32, 64, 16, pf=2, lu=8, ss=True, l1=2),
                win(16, 128, 16, lu=8, ss=True, l1=2), None],
}



def zwin(by: int, bx: int, nw: int, pf: int = 1, lu: int = 1, l1: int = 0, ss: bool = False, bz: int = 64,
         maxnreg: int | None = None) -> StencilConfig:
    """The register-window march without load masks (``kernel="zwin"``), knobs as ``win``."""
    return StencilConfig("zwin", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True, prefetch=pf,
                         loop_unroll=lu, l1_prefetch=l1, static_strides=ss, maxnreg=maxnreg)


# The second call: the zwin kernel (loads unmasked but for the x chunks) around the first call's best.
CANDIDATES_C: dict[str, list[StencilConfig | None]] = {
    "fp32-o8": [None, win(32, 64, 16, lu=8, ss=True, l1=2), zwin(32, 64, 16, lu=8, ss=True, l1=2),
                zwin(32, 64, 16, lu=8, l1=2), zwin(16, 64, 8, lu=8, ss=True, l1=2), zwin(16, 64, 8, lu=8, l1=2),
                zwin(32, 64, 16, lu=8, ss=True, l1=1), zwin(32, 64, 16, lu=8, ss=True, l1=3),
                zwin(32, 64, 16, lu=8, ss=True, l1=2, bz=128), zwin(32, 64, 16, lu=8, ss=True, l1=2, bz=32),
                zwin(64, 32, 16, lu=8, ss=True, l1=2), zwin(32, 32, 8, lu=8, ss=True, l1=2),
                zwin(32, 64, 16, lu=4, ss=True, l1=2), zwin(32, 64, 16, pf=2, lu=8, ss=True, l1=2),
                zwin(32, 64, 16, lu=8, ss=True), None],
    "fp32-o2": [None, zwin(16, 128, 16, lu=2, l1=2), zwin(8, 128, 8, lu=2, l1=2, bz=32), None],
    "fp64-o2": [None, zwin(16, 64, 16, lu=2, l1=2), zwin(8, 64, 8, lu=2, l1=2, bz=32), None],
}


# Round d (third session of 2026-11-25, H100): the zwin kernel at the orders and dtypes `auto` does not send
# there yet (fp32 orders 4 and 6, fp64 orders 4 and 8), loop unrolled by 2R, against `auto` in the same run.
CANDIDATES_D: dict[str, list[StencilConfig | None]] = {
    "fp32-o4": [None, zwin(32, 64, 16, lu=4, l1=2), zwin(16, 128, 16, lu=4, l1=2), None],
    "fp32-o6": [None, zwin(32, 64, 16, lu=6, l1=2), zwin(16, 128, 16, lu=6, l1=2), None],
    "fp64-o8": [None, zwin(32, 32, 16, lu=8, l1=2), zwin(16, 64, 16, lu=8, l1=2), None],
    "fp64-o4": [None, zwin(32, 32, 16, lu=4, l1=2), zwin(16, 64, 16, lu=4, l1=2), None],
    "fp32-o8": [None, zwin(32, 64, 16, lu=8, l1=2, bz=128), None],
    "fp32-o6a": [None, zwin(32, 64, 16, lu=6, l1=2), zwin(16, 128, 16, lu=6, l1=2), None],
    "fp64-o6": [None, zwin(32, 32, 16, lu=6, l1=2), None],
}


def label(cfg: StencilConfig | None) -> str:
    if cfg is None:
        return "auto(today)"
    mode = "u" if cfg.unroll_z else ("w" if cfg.z_in_regs or cfg.kernel == "zwin" else "l1z")
    return (f"{cfg.kernel}-{mode} by{cfg.block_y} bx{cfg.block_x} w{cfg.num_warps} bz{cfg.block_z} pf{cfg.prefetch}"
            + (f" lu{cfg.loop_unroll}" if cfg.loop_unroll > 1 else "")
            + (f" l1pf{cfg.l1_prefetch}" if cfg.l1_prefetch else "")
            + (" ss" if cfg.static_strides else "") + (f" mr{cfg.maxnreg}" if cfg.maxnreg else ""))


def measure(shape, dtype, order, cfg, info, budget, copy, case):
    return sc.measure(shape, dtype, order, cfg, info, budget, copy, "stencil.round3", case, label, check="full",
                      width=58)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--tag", default="")
    ap.add_argument("--round", default="a", choices=("a", "b", "c", "d"))
    args = ap.parse_args()
    info, out, t0, copy = sc.start(args.out)
    records = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        print(f"== {name} {shape} ({time.time() - t0:.0f}s)", flush=True)
        for cfg in {"a": CANDIDATES, "b": CANDIDATES_B, "c": CANDIDATES_C, "d": CANDIDATES_D}[args.round].get(name, []):
            records.append(measure(shape, dtype, order, cfg, info, args.budget, copy,
                                   {"case": name, "shape": list(shape), "dtype": dtype, "order": order}))
        write_results(records, "stencil.round3", out / f"stencil-round3{args.round}{args.tag}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
