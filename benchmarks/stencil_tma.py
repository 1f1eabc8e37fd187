"""The sm90 Gluon TMA z-march (``kernels.stencil_gluon``) against ``auto`` on the issue's three
cases, in one run, with the cudaMemcpy copy ceiling measured in the same run.

    PYTHONPATH=src python benchmarks/stencil_tma.py --out DIR [--round 1]

Each configuration is first checked against the float64 reference (``measure_config(check=...)``:
"full" for the TMA kernel, i.e. a small grid and the timed grid itself), then timed with rotating
inputs; a failed check is reported and not timed.
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


def tma(warps: int, rows: int, bz: int, ahead: int) -> StencilConfig:
    """warps strips of `rows` box rows (2R of them halo) per program, bz planes, `ahead` planes requested ahead."""
    return StencilConfig("tma", block_y=rows, block_x=0, num_warps=warps, block_z=bz, prefetch=ahead, nontemporal=True)


ROUNDS: dict[int, dict[str, list[StencilConfig | None]]] = {
    # Round 1: shared memory per program S * warps * rows * 512 B (S = 2R + 1 + ahead) must stay
    # within 227 KB; 4 x 16 rows x 5 slots = 160 KB (one program per SM), 2 x 16 x 5 = 80 KB (two).
    1: {
        "fp64-o2": [None, tma(4, 16, 32, 2), tma(4, 16, 32, 1), tma(2, 16, 32, 2), tma(4, 16, 32, 3)],
        "fp32-o2": [None, tma(4, 16, 20, 2), tma(4, 16, 20, 1), tma(2, 16, 20, 2), tma(4, 16, 20, 3)],
        "fp32-o8": [None, tma(2, 16, 64, 1)],
    },
    # Round 2 (after round 1 at 9031451: 38-45% fp64, 25-29% fp32, 12.6% o8): the edge tiles no
    # longer read the boundary back per row (a second, element-masked store instead), and fewer
    # rows per strip (8: 16 KB of ring per warp at 4 slots) let 8-12 warps share an SM.
    2: {
        "fp64-o2": [None, tma(4, 16, 32, 2), tma(2, 16, 32, 1), tma(4, 8, 32, 2), tma(4, 8, 32, 1), tma(8, 8, 32, 1),
                    tma(2, 8, 32, 1), tma(4, 8, 64, 1)],
        "fp32-o2": [None, tma(4, 16, 20, 2), tma(2, 16, 20, 1), tma(4, 8, 20, 2), tma(4, 8, 20, 1), tma(8, 8, 20, 1),
                    tma(2, 8, 20, 1), tma(4, 8, 64, 1)],
        "fp32-o8": [None, tma(2, 16, 64, 1), tma(1, 16, 64, 1)],
    },
}
SWEEP_SIZES = (128, 256, 512, 1024, 2048, 4096)


def label(cfg: StencilConfig | None) -> str:
    if cfg is None:
        return "auto(today)"
    if cfg.kernel == "tma":
        return f"tma w{cfg.num_warps} rows{cfg.block_y} bz{cfg.block_z} ahead{cfg.prefetch}"
    return f"{cfg.kernel} by{cfg.block_y} bx{cfg.block_x} w{cfg.num_warps} bz{cfg.block_z}"


def measure(shape, dtype, order, cfg, info, budget, copy, suite, case):
    check = "full" if cfg is not None and cfg.kernel == "tma" else "small"
    return sc.measure(shape, dtype, order, cfg, info, budget, copy, suite, case, label, check=check, width=36)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--round", type=int, default=1, choices=sorted(ROUNDS))
    ap.add_argument("--sweep", action="store_true", help="also the fp64 o2 plane-size sweep (auto, best 2 TMA)")
    args = ap.parse_args()
    info, out, t0, copy = sc.start(args.out)
    records = []
    table = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        print(f"== {name} {shape} ({time.time() - t0:.0f}s)", flush=True)
        for cfg in ROUNDS[args.round][name]:
            rec = measure(shape, dtype, order, cfg, info, args.budget, copy, "stencil.tma",
                          {"case": name, "shape": list(shape), "dtype": dtype, "order": order})
            records.append(rec)
            table.append((name, label(cfg), rec.extra["fraction_of_copy"]))
    write_results(records, "stencil.tma", out / f"stencil-tma-r{args.round}.json", info)
    if args.sweep:
        # the cache-cliff sweep (fp64 o2) for auto and the two fastest TMA configs of the fp64 case
        fp64 = [(rec.extra["fraction_of_copy"], cfg) for rec, cfg in zip(records, ROUNDS[args.round]["fp64-o2"])
                if cfg is not None and rec.extra["ok"]]
        best = [cfg for _, cfg in sorted(fp64, key=lambda t: -t[0])[:2]]
        sweep_records = []
        for shape in sb.sweep_shapes(SWEEP_SIZES, 2, 8):
            print(f"== sweep fp64 o2 {shape} ({time.time() - t0:.0f}s)", flush=True)
            for cfg in [None, *best]:
                rec = measure(shape, "fp64", 2, cfg, info, args.budget, copy, "stencil.tma-sweep",
                              {"shape": list(shape), "plane": shape[1] * shape[2], "dtype": "fp64", "order": 2})
                sweep_records.append(rec)
                table.append((f"sw{shape[1]}", label(cfg), rec.extra["fraction_of_copy"]))
        write_results(sweep_records, "stencil.tma-sweep", out / f"stencil-tma-sweep-r{args.round}.json", info)
    print(f"\ncopy {copy:.3f} TB/s; % of copy ({time.time() - t0:.0f}s)")
    for name, lab, frac in table:
        print(f"{name:8s} {lab:36s} {frac:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
