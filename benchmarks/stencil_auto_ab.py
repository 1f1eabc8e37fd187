"""``auto`` at the high orders, and variants of the register-window march (``--variants``), timed in
turn: an A/B of knobs in one process, or of two checkouts in one device call. ``--variants`` names:
``auto``, ``win`` (``window_march``, what the heuristic takes at the high orders), ``zm`` (``short_march``),
``row`` (``row_march``), ``long`` (``long_march``), ``smem`` (16-row cp.async ring), ``ring`` (``smem_march``, ``auto``'s
ring on sm90); each followed by ``haN`` (``win`` with
``halo_ahead=N``), ``haN-pfM`` (and ``l1_prefetch=M``), ``-ss`` (and ``static_strides``), and the tile knobs of ``KNOBS``
(``win-by16-bx128-w8``). Used on
2026-11-27 (H200) for the zwin kernel's x tiles starting at the first interior vector (e7fb3ce) against
5afdd33:

    git archive OLD src | tar -x -C old_src
    for i in 1 2; do
      PYTHONPATH=old_src/src TILECRAFT_COMMIT=OLD python benchmarks/stencil_auto_ab.py --out $OUT --tag=-old-$i
      PYTHONPATH=src TILECRAFT_COMMIT=NEW python benchmarks/stencil_auto_ab.py --out $OUT --tag=-new-$i
    done

Every case is checked against the float64 reference on the timed grid (``check="full"``) before it is
timed; the copy bandwidth is measured at the start of each run. (The rows-per-thread experiment of the
same day ran from this script's first version, ``benchmarks/stencil_rows.py`` at 5afdd33.)
"""
from __future__ import annotations

import argparse
import sys
import time

from dataclasses import replace

import torch

import stencil_common as sc
from tilecraft.bench.harness import write_results
from tilecraft.ops.stencil import (StencilConfig, auto_config, l1_march, long_march, row_march, short_march, smem_march,
                                   window_march)

CASES = {  # (dtype, order, shape)
    "fp32-o8": ("fp32", 8, (520, 520, 520)),
    "fp64-o8": ("fp64", 8, (520, 520, 520)),
    "fp32-o6": ("fp32", 6, (520, 520, 520)),
    "fp32-o4": ("fp32", 4, (516, 516, 516)),
    "fp64-o4": ("fp64", 4, (516, 516, 516)),
    "fp64-o2": ("fp64", 2, (512, 512, 512)),
    "fp32-o2": ("fp32", 2, (512, 512, 512)),
    "fp64-o2-256": ("fp64", 2, (2048, 256, 256)),
    "fp64-o2-384": ("fp64", 2, (1024, 384, 384)),
    "fp64-o2-small": ("fp64", 2, (128, 160, 192)),
    "fp64-o2-odd": ("fp64", 2, (301, 257, 520)),
    "fp32-o2-256": ("fp32", 2, (2048, 256, 256)),
    "fp32-o2-384": ("fp32", 2, (1024, 384, 384)),
    "fp32-o2-odd": ("fp32", 2, (301, 257, 520)),
    "fp64-o6": ("fp64", 6, (520, 520, 520)),
    "fp32-o4-256": ("fp32", 4, (2052, 260, 260)),
    "fp32-o6-256": ("fp32", 6, (2056, 264, 264)),
    "fp32-o4-1024": ("fp32", 4, (132, 1028, 1028)),
    "fp32-o8-tall": ("fp32", 8, (1032, 520, 520)),
    "fp32-o8-short": ("fp32", 8, (264, 520, 520)),
    "fp64-o8-short": ("fp64", 8, (264, 520, 520)),
    "fp64-o8-tall": ("fp64", 8, (1032, 520, 520)),
    "fp64-o8-776": ("fp64", 8, (776, 776, 776)),
    "fp64-o8-wide": ("fp64", 8, (520, 1032, 1032)),
    "fp32-o8-wide": ("fp32", 8, (520, 1032, 1032)),
    "fp32-o8-776": ("fp32", 8, (776, 776, 776)),
    "fp32-o8-264": ("fp32", 8, (520, 264, 264)),
    # the high orders on 512^3 interiors, rows of whole 16-byte vectors (the ring at R = 5..8, 2026-12-01)
    **{f"{dt}-o{o}": (dt, o, (512 + o, 512 + o, -(-(512 + o) // 4) * 4)) for dt in ("fp32", "fp64") for o in (10, 12, 14, 16)},
    # fp32 rows of 8-byte vectors (nx = 2 mod 4: 512 + 2R for odd R), the unaligned cases of the cliff hunt
    **{f"fp32-o{o}-odd": ("fp32", o, (512 + o,) * 3) for o in (2, 6, 10, 14)},
    **{f"fp32-o{o}-half": ("fp32", o, (512 + o, 512 + o, 514 + o)) for o in (4, 8, 12, 16)},
    # fp32 rows of an odd number of points (4-byte copies)
    **{f"fp32-o{o}-word": ("fp32", o, (512 + o, 512 + o, 513 + o)) for o in (2, 4, 8, 12, 16)},
    # fp64 rows of an odd number of points (8-byte vectors)
    **{f"fp64-o{o}-odd": ("fp64", o, (512 + o, 512 + o, 513 + o)) for o in (2, 4, 8, 12)},
    **{f"{dt}-o{o}-256": (dt, o, (256 + o, 256 + o, -(-(256 + o) // 4) * 4)) for dt in ("fp32", "fp64") for o in (10, 12, 14, 16)},
}
#: ``--variants`` parts that set a tile knob of ``win``: byN block_y, bxN block_x, wN num_warps, bzN block_z,
#: uN loop_unroll, rN maxnreg, zoN zorder, dN prefetch (the smem kernel's planes ahead), sN num_stages
#: (its ring's slack slots with mbarriers; s0: a CTA barrier per plane), vN vec (the smem kernel's elements a thread
#: computes: v2 in fp32; give its num_warps and block_y to match), pbN planes_per_barrier (the CTA-barrier ring: a
#: barrier every N planes; dM with M + N a multiple of N). (``rptN``, the ring's rows per thread, lived in
#: 1e17f44: measured no faster, removed with the knob.)
KNOBS = {"by": "block_y", "bx": "block_x", "bz": "block_z", "w": "num_warps", "u": "loop_unroll", "r": "maxnreg",
         "zo": "zorder", "d": "prefetch", "s": "num_stages", "v": "vec", "pb": "planes_per_barrier"}


def label(cfg) -> str:
    return "auto" if cfg is None else cfg.short()


def variant(name: str, dtype: str, order: int) -> StencilConfig | None:
    """The configuration a ``--variants`` name stands for (None: ``auto``)."""
    if name == "auto":
        return None
    if name == "noring":  # what auto takes without the ring (not sm90): contiguous grids of this case
        raise KeyError("noring needs the shape: resolved in main()")
    torch_dtype = torch.float32 if dtype == "fp32" else torch.float64
    bases = {"win": lambda: window_march(torch_dtype, order // 2), "zm": lambda: short_march(torch_dtype, order // 2),
             "row": row_march, "long": lambda: long_march(torch_dtype),
             "smem": lambda: StencilConfig("smem", block_y=16, block_x=64 if dtype == "fp32" else 32, num_warps=8,
                                           block_z=64, prefetch=3),
             "ring": lambda: smem_march(torch_dtype, order // 2),
             "l1": lambda: l1_march(torch_dtype, order // 2)}
    first = name.split("-")[0]
    cfg = bases[first]() if first in bases else bases["win"]()
    for part in name.split("-"):
        if part.startswith("ha"):
            cfg = replace(cfg, halo_ahead=int(part[2:]))
        elif part.startswith("pf"):
            cfg = replace(cfg, l1_prefetch=int(part[2:]))
        elif part == "ss":
            cfg = replace(cfg, static_strides=True)
        elif part.rstrip("0123456789") in KNOBS and part[len(part.rstrip("0123456789")):]:
            cfg = replace(cfg, **{KNOBS[part.rstrip("0123456789")]: int(part[len(part.rstrip("0123456789")):])})
        elif part not in bases:
            raise ValueError(f"unknown variant {name!r}")
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default="fp32-o8,fp64-o8")
    ap.add_argument("--tag", default="")
    ap.add_argument("--variants", default="auto")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    info, out, t0, copy = sc.start(args.out)
    records = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        for rnd in range(args.rounds):
            print(f"== {name} {shape} round {rnd + 1} ({time.time() - t0:.0f}s)", flush=True)
            for v in args.variants.split(","):
                cfg = (variant(v, dtype, order) if v != "noring" else
                       auto_config(torch.float32 if dtype == "fp32" else torch.float64, order, shape, None,
                                   shape[2] % (4 if dtype == "fp32" else 2) == 0, True))
                records.append(sc.measure(shape, dtype, order, cfg, info, args.budget, copy,
                                          "stencil.auto_ab", {"case": name, "shape": list(shape), "dtype": dtype,
                                                              "order": order, "variant": v, "round": rnd + 1},
                                          label, check="full", width=60))
            write_results(records, "stencil.auto_ab", out / f"stencil-auto-ab{args.tag}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
