"""Unaligned rows (2026-11-25): the flat kernel (``kernel="flat"``: tiles of the flat array on 16-byte
boundaries, every access 128-bit) against what ``auto`` ran on such grids before it (the tiled plane
kernel, banded beyond L2; ``auto_config(..., flat_ok=False)``), in one run, with ``auto`` as it
dispatches now and an aligned grid as the copy-rate sanity check.

    PYTHONPATH=src python benchmarks/stencil_unaligned.py --out DIR --tag COMMIT

Every configuration is checked against the float64 reference (a small grid of the same
specialisation, then the timed grid itself, both into NaN-poisoned outputs whose boundary must stay
NaN: ``check="full"``) before it is timed; the cudaMemcpy copy bandwidth is measured in the same run.
Writes one JSON (after every case, so a run cut short keeps what it measured) and prints a table.
``--dry`` runs tiny grids of the same residues on the CPU interpreter (TRITON_INTERPRET=1).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import stencil_common as sc
from tilecraft.bench import stencil as sb
from tilecraft.bench.harness import write_results
from tilecraft.hardware.device import detect
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

CASES = {  # name: (dtype, order, shape); the brief's four unaligned grids first, then the aligned check
    "fp64-o2": ("fp64", 2, (515, 515, 515)),
    "fp32-o2": ("fp32", 2, (514, 514, 514)),
    "fp32-o4": ("fp32", 4, (518, 518, 518)),
    "fp64-o4": ("fp64", 4, (517, 517, 517)),
    "fp64-o2-aligned": ("fp64", 2, (512, 512, 512)),
    "fp32-o4-seismic": ("fp32", 4, (256, 1001, 1001)),
    "fp32-o2-bigplane": ("fp32", 2, (64, 2050, 2050)),  # 2R+1 planes > half the L2: auto keeps the plane kernel
}

LEGACY = "legacy"  # marker: auto's choice before the flat kernel


def flat(bx: int, nw: int) -> StencilConfig:
    return StencilConfig("flat", block_y=1, block_x=bx, num_warps=nw, nontemporal=True)


FLAT = {"fp64": [flat(256, 4), flat(512, 4), flat(1024, 8)], "fp32": [flat(512, 4), flat(1024, 4), flat(2048, 8)]}


def candidates(name: str, dtype: str) -> list:
    if name.endswith("aligned"):
        return [None, None]
    if name.endswith("bigplane") or name.endswith("seismic"):
        return [LEGACY, FLAT[dtype][1], None]
    return [LEGACY, *FLAT[dtype], None, LEGACY]


def label(cfg) -> str:
    if cfg is None:
        return "auto(now)"
    if cfg.kernel == "flat":
        return f"flat bx{cfg.block_x} w{cfg.num_warps}"
    return f"auto(before) {cfg.kernel} by{cfg.block_y} bx{cfg.block_x} w{cfg.num_warps} go{cfg.grid_order}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--tag", default="")
    ap.add_argument("--dry", action="store_true", help="tiny grids of the same residues on the CPU interpreter")
    args = ap.parse_args()
    if args.dry:
        info, out, t0, copy = detect(), Path(args.out), time.time(), 1.0
        out.mkdir(parents=True, exist_ok=True)
    else:
        info, out, t0, copy = sc.start(args.out)
    records = []
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        if args.dry:
            shape = tuple(n % 16 + 16 for n in shape)
        tdt = sb.DTYPES[dtype]
        now = ops.auto_config(tdt, order, shape, info.l2_bytes, shape[2] % (16 // (torch.finfo(tdt).bits // 8)) == 0, True)
        print(f"== {name} {shape} ({time.time() - t0:.0f}s) auto now: {now.kernel} by{now.block_y} bx{now.block_x} "
              f"w{now.num_warps}", flush=True)
        for cfg in candidates(name, dtype):
            if cfg == LEGACY:
                cfg = ops.auto_config(tdt, order, shape, info.l2_bytes, vector_aligned=False, flat_ok=False)
            case = {"case": name, "shape": list(shape), "dtype": dtype, "order": order}
            if args.dry:
                res = sb.measure_config(shape, tdt, order, "auto", cfg, device="cpu", l2_bytes=info.l2_bytes,
                                        budget_s=0.01, check="full")
                print(f"   {label(cfg):42s} ok={res.ok} err={res.error} {res.message}", flush=True)
                if not res.ok:
                    return 1
                continue
            records.append(sc.measure(shape, dtype, order, cfg, info, args.budget, copy, "stencil.unaligned", case,
                                      label, check="full"))
        if not args.dry:
            write_results(records, "stencil.unaligned", out / f"stencil-unaligned{args.tag}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
