"""One GPU: the CPML layers' z-march launches (``wave_layer_kernel``) swept per kind of box, fp32,
order 8, 512**3 model + a CPML of ``--width`` points (default: ``simulate``'s, 12 since 2026-11-28; 20 before;
the set-up of ``benchmarks/wave_bench.py``).

The march step runs one launch per kind of layer box (z, y, x faces, edges, corners). For each kind
this times that launch alone for several (tile, planes per program, warps, register budget)
candidates, each after the whole march step with the candidate in place was checked against the
float64 torch step; then the whole step with the best candidate of every kind, the default march
configuration and the unfused launches, in the same run.

    PYTHONPATH=src python benchmarks/wave_layers_sweep.py [--width 12] [--kinds 0,1,2,3,4] [--out DIR]
    PYTHONPATH=src python benchmarks/wave_layers_sweep.py --kinds 0,1 --zwin --out DIR   # the windowed faces

Writes wave-layers-sweep.json (harness Records; ``extra`` has the kind, tile, registers, time_ms,
gpts) and prints a table.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import time_rotating, write_results
from tilecraft.bench.wave import (
    _copy_axes,
    _cpml_state,
    _record,
    _setup,
    cpml_traffic,
    step_traffic,
)
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops
from tilecraft.wave.boundaries import DEFAULT_WIDTH

KINDS = ("z faces", "y faces", "x faces", "edges", "corners")
# (block_y, block_x, block_z, num_warps, register budget) per kind
CANDIDATES = {
    0: [(8, 128, 8, 8, 80), (4, 128, 8, 4, 80), (4, 128, 16, 4, 80), (8, 128, 4, 8, 80), (2, 128, 8, 2, 80),
        (4, 128, 8, 4, 72), (4, 128, 8, 4, 96), (4, 64, 8, 2, 80)],
    1: [(8, 128, 8, 8, 96), (4, 128, 8, 4, 96), (4, 128, 16, 4, 96), (8, 128, 16, 8, 96), (2, 128, 8, 2, 96),
        (4, 128, 8, 4, 104), (4, 128, 8, 4, 88), (8, 64, 8, 4, 96)],
    2: [(8, 32, 8, 2, 72), (16, 32, 8, 4, 72), (8, 32, 16, 2, 72), (4, 32, 8, 1, 72), (32, 32, 8, 8, 72),
        (8, 32, 8, 2, 64), (8, 32, 8, 2, 80), (8, 32, 4, 2, 72),
        # 16-column tiles (2026-11-28, thirteenth session): at W = 12 the x store is 16 columns from x = 4, so a
        # tile from its origin holds it exactly instead of reading 32 + 8 columns for 16. Measured slower (H200:
        # 0.257-0.287 ms against 0.194 for (8, 32, 4, 2); results/2026-11-28-h200-thirteenth/x16.log)
        (8, 16, 4, 1, 72), (16, 16, 4, 2, 72), (32, 16, 4, 4, 72), (16, 16, 8, 2, 72), (32, 16, 2, 4, 72),
        (16, 16, 4, 2, 80)],
    3: [(8, 32, 8, 2, 128), (16, 32, 8, 4, 128), (4, 32, 8, 1, 128), (8, 32, 8, 2, 0), (8, 32, 16, 2, 128),
        (8, 32, 2, 2, 128), (16, 16, 2, 2, 128), (8, 16, 2, 1, 128)],
    4: [(8, 32, 8, 2, 168), (4, 32, 8, 1, 168)],
}
# The z and y faces with the z window in registers (``CpmlConfig.layer_zwin``, the default since 2026-11-29; the z faces
# with psi_z's planes too, ``psi_zwin``): every candidate 128 registers without spills (cross-compiled for sm90), 4
# points a thread; taller tiles cut the y halo's rows (y faces: 16 rows, the whole face), more planes a program the
# window's first 2R planes (``--zwin``).
CANDIDATES_ZWIN = {
    0: [(4, 128, 8, 4, 128), (4, 128, 16, 4, 128), (8, 128, 8, 8, 128), (8, 128, 16, 8, 128), (8, 64, 8, 4, 128),
        (8, 64, 16, 4, 128), (2, 128, 16, 2, 128)],
    1: [(4, 128, 8, 4, 128), (4, 128, 16, 4, 128), (4, 128, 32, 4, 128), (8, 128, 8, 8, 128), (8, 128, 16, 8, 128),
        (16, 64, 8, 8, 128), (16, 64, 16, 8, 128), (16, 32, 16, 4, 128), (8, 64, 16, 4, 128)],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget", type=float, default=0.15)
    ap.add_argument("--width", type=int, default=DEFAULT_WIDTH["pml"], help="CPML width in points")
    ap.add_argument("--kinds", default="0,1,2,3,4", help="kinds of box swept (0 z, 1 y, 2 x faces, 3 edges, 4 corners)")
    ap.add_argument("--zwin", action="store_true", help="the z and y faces' candidates with the z window (128 registers)")
    args = ap.parse_args()
    kinds = {int(k) for k in args.kinds.split(",")}
    candidates = {**CANDIDATES, **CANDIDATES_ZWIN} if args.zwin else CANDIDATES
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"copy {copy:.3f} TB/s", flush=True)
    order = 8
    dev, _measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(
        args.n, order, args.width, torch.float32, "cuda", 20261122)
    axes0, layer_points = _cpml_state(layout, shape, torch.float32, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    ref_axes = _copy_axes(axes0, torch.float64)
    ref = pp.to(torch.float64, copy=True)
    ops.cpml_step(p.double(), pp.double(), m.double(), ref, order, spacing, lo, hi, ref_axes, "torch")
    ref_scale = float(ref[box].abs().max())
    out = torch.empty_like(pp)
    base = ops.default_cpml_config(dev)
    base_tiles = tuple(ops._march_tile_of(base, a) for a in ((0,), (1,), (2,), (0, 1), (0, 1, 2)))
    base_regs = base.march_regs or (base.maxnreg or 0,) * 5

    def config(kind, cand):
        tiles = list(base_tiles)
        regs = list(base_regs)
        tiles[kind], regs[kind] = cand[:4], cand[4]
        return replace(base, march_tiles=tuple(tiles), march_regs=tuple(regs))

    def check(cfg) -> float:
        axes = _copy_axes(axes0)
        out.fill_(float("nan"))
        ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes, "triton", None, cfg)
        err = float((out[box].double() - ref[box]).abs().max()) / ref_scale
        for a, r_ in zip(axes, ref_axes):
            for got, want in ((a.psi[1], r_.psi[1]), (a.zeta, r_.zeta)):
                err = max(err, float((got.double() - want).abs().max()) / max(float(want.abs().max()), 1e-300))
        return err

    kaxes = {ax.axis: ax for ax in axes0}
    records, best = [], {}
    case = {"model": [args.n] * 3, "grid": list(shape), "order": order, "dtype": "float32", "pml_width": args.width}
    for kind, cands in ((k, c) for k, c in candidates.items() if k in kinds):
        for cand in cands:
            cfg = config(kind, cand)
            _, _, launches = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, shape[2], cfg, 4, p.stride()[:2])
            names = {"layers:" + ",".join(map(str, a)) for a, *_ in launches if ops._box_kind(a) == kind}
            pts = sum((r[1] - r[0]) * (r[3] - r[2]) * (r[5] - r[4]) for a, _t, tab, _n in launches
                      if ops._box_kind(a) == kind for r in tab)
            err = check(cfg)
            ok = err < 1e-5
            part_axes = _copy_axes(axes0)
            pk = {ax.axis: ax for ax in part_axes}
            ms = math.inf
            if ok:
                def run(_i, cfg=cfg, part_axes=part_axes, pk=pk, names=tuple(names)):
                    ops._march_layers(p, pp, m, out, order, spacing, lo, hi, part_axes, pk, None, cfg, names)
                t = time_rotating(run, 1, device=dev, budget_s=args.budget)
                ms = t.median_ms
            rec = _record({**case, "variant": f"layers-{KINDS[kind].replace(' ', '-')}"}, step_traffic(pts, order, 4),
                          ms, 0.0, copy, None, True, {"ok": ok, "error": err, "kind": KINDS[kind], "tile": cand[:4],
                                                      "registers": cand[4], "layer_points": pts})
            records.append(rec)
            print(f"{KINDS[kind]:<8} {cand[:4]!s:<18} r{cand[4]:<4} {ms:8.4f} ms {pts / ms / 1e6 if ok else 0:8.1f} "
                  f"GPts/s err {err:.1e}", flush=True)
            if ok and ms < best.get(kind, (math.inf,))[0]:
                best[kind] = (ms, cand)
    tiles = tuple(best[k][1][:4] if k in best else base_tiles[k] for k in range(5))
    regs = tuple(best[k][1][4] if k in best else base_regs[k] for k in range(5))
    composed = replace(base, march_tiles=tiles, march_regs=regs)
    print("best per kind:", {KINDS[k]: v for k, v in best.items()}, flush=True)
    traffic = cpml_traffic(points, layer_points, order, 4)
    for variant, cfg in (("cpml-march-best", composed), ("cpml-march-default", base),
                         ("cpml-unfused", ops.CpmlConfig(4, 64, 8, 4, maxnreg=96, by_axes=True, two_phase=True,
                                                         fused=False))):
        err = check(cfg)
        axes = _copy_axes(axes0)

        def timed(_i, cfg=cfg, axes=axes):
            ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes, "triton", None, cfg)
            for ax in axes:
                ax.swap()
        t = time_rotating(timed, 1, device=dev, budget_s=0.7)
        records.append(_record({**case, "variant": variant, "layer_points": layer_points}, traffic, t.median_ms,
                               t.spread, copy, None, True, {"ok": err < 1e-5, "error": err, "config": cfg.as_dict()}))
        print(f"{variant:<20} {t.median_ms:.4f} ms  {traffic.bytes / t.median_ms / 1e9 / copy * 100:.1f}% of copy  "
              f"err {err:.1e}", flush=True)
    print("composed:", composed, flush=True)
    path = write_results(records, "wave", (args.out / "wave-layers-sweep.json") if args.out else None, info,
                         meta={"copy_TBps_start": copy})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
