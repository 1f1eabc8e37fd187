"""One GPU: the psi launches rebuilt as a z-march (``cpml_psi_march_kernel``) and fewer planes per
program for the layers' edge and corner launches, fp32, order 8, 512**3 model + 20-point CPML (the
set-up of ``benchmarks/wave_bench.py``).

1. per axis, the marching psi launch for several (tile, planes, warps) against the slab kernel
   (``cpml_psi_kernel``), each candidate first run in the whole march step and checked against the
   float64 torch step, its psi_new compared bit for bit with the slab kernel's;
2. the edge and corner launches of ``wave_layer_kernel`` for several tiles and plane counts, checked
   the same way;
3. the whole step: the previous default, the marching psi alone, and the fastest of every part,
   checked, then timed alternately (two rounds), with the GPU time of each launch of one step.

Parts are timed as the GPU time of their kernels (``bench.wave.launch_times``, the profiler's kernel
records; a short launch timed alone with events measures the CPU's launch latency), the whole step
with events (``time_rotating``).

    PYTHONPATH=src python benchmarks/wave_psi_sweep.py [--out DIR]
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
    StepTraffic,
    _copy_axes,
    _cpml_state,
    _record,
    _setup,
    axis_layer_points,
    cpml_traffic,
    launch_times,
    step_traffic,
)
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops

AXES = ("z", "y", "x")
# (block_y, block_x, block_z, num_warps) per axis of the psi launch; the first is the composed default
PSI_CANDIDATES = {  # run 1 (e0b1e2f): the first three candidates of each axis; run 2: the rest
    0: [(4, 128, 10, 4), (4, 128, 20, 4), (8, 128, 20, 8)],
    1: [(4, 128, 8, 4), (4, 128, 16, 4), (8, 128, 8, 8)],
    2: [(16, 32, 8, 4), (64, 8, 8, 4), (32, 8, 8, 2), (32, 16, 8, 4)],
}
# (block_y, block_x, block_z, num_warps, register budget) for the edges (kind 3) and corners (kind 4)
LAYER_CANDIDATES = {
    3: [(16, 32, 8, 4, 128), (8, 32, 4, 2, 128), (8, 32, 2, 2, 128), (16, 32, 4, 4, 128), (16, 32, 2, 4, 128)],
    4: [(4, 32, 8, 1, 168), (4, 32, 2, 1, 168), (8, 32, 2, 2, 168)],
}
KIND = {3: "edges", 4: "corners"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--width", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--psi-only", action="store_true", help="skip the edge and corner candidates")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"copy {copy:.3f} TB/s", flush=True)
    order = 8
    dev, _measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(
        args.n, order, args.width, torch.float32, args.device, 20261122)
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
    case = {"model": [args.n] * 3, "grid": list(shape), "order": order, "dtype": "float32", "pml_width": args.width}

    def run_step(cfg):
        axes = _copy_axes(axes0)
        out.fill_(float("nan"))
        ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes, "triton", None, cfg)
        return out.clone(), axes

    base_out, base_axes = run_step(base)

    def check(cfg) -> tuple[float, bool, float]:
        """(error against float64, psi_new bitwise the previous default's, largest |p_next - previous|)."""
        got, axes = run_step(cfg)
        err = float((got[box].double() - ref[box]).abs().max()) / ref_scale
        for a, r_ in zip(axes, ref_axes):
            for g, want in ((a.psi[1], r_.psi[1]), (a.zeta, r_.zeta)):
                err = max(err, float((g.double() - want).abs().max()) / max(float(want.abs().max()), 1e-300))
        same_psi = all(torch.equal(a.psi[1], b.psi[1]) for a, b in zip(axes, base_axes))
        return err, same_psi, float((got[box] - base_out[box]).abs().max())

    records = []

    def gpu_ms(fn) -> tuple[float, list]:
        seq = launch_times(fn, args.reps)
        return (sum(t for _, t in seq) if seq else math.nan), seq or []

    # 1. psi launches per axis
    part_axes = _copy_axes(axes0)
    best_psi = {}
    for d, ax in enumerate(part_axes):
        pts = axis_layer_points(ax, lo, hi)
        ms, _ = gpu_ms(lambda ax=ax: ops._psi_phase(p, order, lo, hi, [ax]))
        print(f"psi {AXES[d]} slab kernel        {ms:8.4f} ms {pts / ms / 1e6:7.1f} GPts/s", flush=True)
        records.append(_record({**case, "variant": f"psi-{AXES[d]}-slab"}, psi_traffic(pts), ms, 0.0, copy, None, True,
                               {"part": True, "gpu_time": True, "layer_points": pts}))
        for cand in PSI_CANDIDATES[d]:
            tiles = [PSI_CANDIDATES[k][0] for k in range(3)]
            tiles[d] = cand
            cfg = replace(base, psi_tiles=tuple(tiles))
            err, same, diff = check(cfg)
            ok = err < 1e-5  # psi_new may differ from the slab kernel's in the last bit (FMA contraction)
            ms = gpu_ms(lambda ax=ax, tiles=tuple(tiles): ops._psi_march(p, order, lo, hi, [ax], tiles))[0] \
                if ok else math.inf
            print(f"psi {AXES[d]} march {cand!s:<16} {ms:8.4f} ms {pts / ms / 1e6:7.1f} GPts/s err {err:.1e} "
                  f"psi==slab {same} |dp| {diff:.1e}", flush=True)
            records.append(_record({**case, "variant": f"psi-{AXES[d]}-march"}, psi_traffic(pts), ms, 0.0, copy, None,
                                   True, {"part": True, "gpu_time": True, "layer_points": pts, "tile": cand, "ok": ok,
                                          "error": err, "psi_bitwise_slab": same}))
            if ok and ms < best_psi.get(d, (math.inf,))[0]:
                best_psi[d] = (ms, cand)
    psi_tiles = tuple(best_psi[d][1] if d in best_psi else PSI_CANDIDATES[d][0] for d in range(3))

    # 2. edge and corner launches
    kaxes = {ax.axis: ax for ax in part_axes}
    best_layer = {}
    for kind, cands in ({} if args.psi_only else LAYER_CANDIDATES).items():
        for cand in cands:
            tiles, regs = list(base_tiles), list(base_regs)
            tiles[kind], regs[kind] = cand[:4], cand[4]
            cfg = replace(base, march_tiles=tuple(tiles), march_regs=tuple(regs))
            _, _, launches = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, shape[2], cfg, 4, p.stride()[:2])
            names = tuple({"layers:" + ",".join(map(str, a)) for a, *_ in launches if ops._box_kind(a) == kind})
            pts = sum((r[1] - r[0]) * (r[3] - r[2]) * (r[5] - r[4]) for a, _t, tab, _n in launches
                      if ops._box_kind(a) == kind for r in tab)
            err, same, diff = check(cfg)
            ok = err < 1e-5
            ms = math.inf
            if ok:
                ms = gpu_ms(lambda cfg=cfg, names=names: ops._march_layers(
                    p, pp, m, out, order, spacing, lo, hi, part_axes, kaxes, None, cfg, names))[0]
            print(f"{KIND[kind]:<8} {cand[:4]!s:<18} r{cand[4]:<4} {ms:8.4f} ms {pts / ms / 1e6:7.1f} GPts/s "
                  f"err {err:.1e} |dp| {diff:.1e}", flush=True)
            records.append(_record({**case, "variant": f"layers-{KIND[kind]}"}, step_traffic(pts, order, 4), ms, 0.0,
                                   copy, None, True, {"part": True, "gpu_time": True, "ok": ok, "error": err,
                                                      "kind": KIND[kind], "tile": cand[:4], "registers": cand[4],
                                                      "layer_points": pts}))
            if ok and ms < best_layer.get(kind, (math.inf,))[0]:
                best_layer[kind] = (ms, cand)

    # 3. whole steps, alternately
    tiles, regs = list(base_tiles), list(base_regs)
    for kind, (_, cand) in best_layer.items():
        tiles[kind], regs[kind] = cand[:4], cand[4]
    variants = {"march-default": base, "march-psi": replace(base, psi_tiles=psi_tiles),
                "march-psi-best": replace(base, psi_tiles=psi_tiles, march_tiles=tuple(tiles), march_regs=tuple(regs))}
    if args.psi_only:
        variants = {"march-default": base, "march-psi-best": replace(base, psi_tiles=psi_tiles)}
    traffic = cpml_traffic(points, layer_points, order, 4)
    checks, times = {}, {name: [] for name in variants}
    for name, cfg in variants.items():
        checks[name] = check(cfg)
    for _round in range(2):
        for name, cfg in variants.items():
            if checks[name][0] >= 1e-5:
                continue
            axes = _copy_axes(axes0)

            def timed(_i, cfg=cfg, axes=axes):
                ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes, "triton", None, cfg)
                for ax in axes:
                    ax.swap()
            times[name].append(time_rotating(timed, 1, device=dev, budget_s=0.6))
    for name, cfg in variants.items():
        err, same, diff = checks[name]
        ok = err < 1e-5
        t = min(times[name], key=lambda t: t.median_ms) if times[name] else None
        axes = _copy_axes(axes0)
        seq = launch_times(lambda cfg=cfg, axes=axes: ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes,
                                                                     "triton", None, cfg), args.reps) if ok else None
        ms = t.median_ms if t else math.inf
        records.append(_record({**case, "variant": f"cpml-{name}", "layer_points": layer_points}, traffic, ms,
                               t.spread if t else 0.0, copy, None, True,
                               {"ok": ok, "error": err, "psi_bitwise_default": same, "max_abs_diff_default": diff,
                                "rounds_ms": [x.median_ms for x in times[name]], "config": cfg.as_dict(),
                                "launches_gpu_ms": seq}))
        print(f"{name:<16} {ms:.4f} ms (rounds {[round(x.median_ms, 4) for x in times[name]]}) "
              f"{traffic.bytes / ms / 1e9 / copy * 100:.1f}% of copy {points / ms / 1e6:.0f} GPts/s err {err:.1e} "
              f"psi==default {same} |dp| {diff:.1e}", flush=True)
        if seq:
            print("   launches (GPU ms): " + ", ".join(f"{n.split('_kernel')[0]} {t_:.4f}" for n, t_ in seq)
                  + f"; sum {sum(t_ for _, t_ in seq):.4f}", flush=True)
    print("psi tiles:", psi_tiles, "layer tiles:", tiles, "regs:", regs, flush=True)
    copy2 = measure_copy_bandwidth()
    path = write_results(records, "wave", (args.out / "wave-psi-sweep.json") if args.out else None, info,
                         meta={"copy_TBps_start": copy, "copy_TBps_end": copy2})
    print(f"copy {copy:.3f} / {copy2:.3f} TB/s; wrote {path}")
    return 0


def psi_traffic(points: int):
    """psi_old read, psi_new written, p read once: 3 words per layer point (fp32)."""
    return StepTraffic(points=points, bytes=12 * points, flops=points * 3 * 8)


if __name__ == "__main__":
    raise SystemExit(main())
