"""The whole CPML step (512**3 model + a CPML of ``--width`` points, 12 the library's default, fp32 order 8)
with its layer launches spread over several side streams (``CpmlConfig.side_streams``), against the default
(one side stream: the psi launches, then the layer launches in turn, beside the interior). ``cpml_step_suite``
(each configuration checked against the float64 torch step first, from a NaN-poisoned output), ``--rounds``
rounds in turn, then one step's kernel timeline (profiler: name, start, end in us) per configuration.

    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR [--rounds 3] [--width 12] [--lanes 1,2,3,4,7]
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --x-box-tiles 1,2,3   # CpmlConfig.x_box_tiles
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --interiors [--width 20]
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --sizes 384,512,640   # zwin or ring interior
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --ring --rounds 2   # around the new default
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --corun --rounds 2  # ring under register budgets
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --layer-regs --rounds 2  # layers' budgets
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --default --rounds 2 --tag new  # one checkout
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --layer-zwin --rounds 2  # CpmlConfig.layer_zwin
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --zwin-faces --rounds 2  # around its best
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --zwin-x --rounds 2  # the x faces' window, 4 warps
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --zwin-psi --rounds 3  # psi_z's window too
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --psi-x-launch --rounds 2  # psi_x's own launch
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --layer-order --rounds 2  # launch orders
    PYTHONPATH=src python benchmarks/wave_side_streams.py --out DIR --x-face-pairs --rounds 3  # the x faces interleaved

"previous" is the default before 2026-11-29 (fifteenth session: one side stream, no ``x_box_tiles``, no ``layer_zwin``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import _copy_axes, _cpml_state, _record, _setup, cpml_rounds, cpml_traffic, launch_timeline
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops


def timeline(cfg, icfg, width: int, key: str, copy: float) -> list:
    dev, measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(512, 8, width, torch.float32,
                                                                                  "cuda", 20261122, cpml=True)
    axes, layer_points = _cpml_state(layout, shape, torch.float32, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    axes = _copy_axes(axes)
    out = torch.empty_like(pp)
    tl = launch_timeline(lambda: ops.cpml_step(p, pp, m, out, 8, spacing, lo, hi, axes, "triton", icfg, cfg))
    if tl is None:
        return []
    print(f"timeline {key}: " + ", ".join(f"{name.split('_kernel')[0][-18:]} {s:.0f}-{e:.0f}" for name, s, e in tl),
          flush=True)
    span = max(e for _, _, e in tl) - min(s for _, s, _ in tl)
    return [_record({"variant": "timeline", "label": key, "pml_width": width}, cpml_traffic(points, layer_points, 8, 4),
                    span / 1e3, 0.0, copy, None, measured, {"timeline_us": tl, "config": cfg.as_dict()})]


SETS = {
    "layer-regs": "the layer launches under other register budgets",
    "default": "the default alone (and its z faces under 104 registers): run from two checkouts in turn to compare "
               "kernel versions",
    "corun": "the ring interior under register budgets that leave room for layer CTAs beside it",
    "ring": "the default (ring interior) under other side-stream counts, launch orders, priorities and ring lengths",
    "interiors": "the default against the previous default, and both with the cp.async-ring interior",
    "layer-zwin": "layer launches with the tile's z window of p in registers (CpmlConfig.layer_zwin), budgets, tiles",
    "zwin-faces": "the z and y faces' z window (--layer-zwin's best), by kind, budget, planes per program, the edges",
    "zwin-x": "the x faces' z window on 4-warp tiles (2 points a thread, no spills at 80 registers)",
    "zwin-psi": "the z faces with psi_z's planes in registers too (CpmlConfig.psi_zwin; the default since 2026-11-29) against without",
    "layer-order": "the layer launches issued in other orders (CpmlConfig.layer_order): edges and corners first, "
                   "the x faces first, reversed",
    "x-face-pairs": "the two x faces' programs interleaved in their launch (CpmlConfig.x_face_pairs: rows neighbouring "
                    "in memory read together) against one box after the other",
    "psi-x-launch": "psi_x by its own launch beside the ring (as psi_z and psi_y) instead of inside the x faces "
                    "(psi_x_fused=False), the x faces' budgets",
    "interior-z": "the default (the ring interior, 256 planes a program) against its marches of 64, 128, 168 and 192 "
                  "planes (the plain step without a boundary runs fastest at 64: 2026-11-29, wave_fused_floor.py)",
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--width", type=int, default=12)
    ap.add_argument("--lanes", default="1,2,3,4,7")
    ap.add_argument("--sizes", default="", help="model sizes: zwin against the ring interior at each (e.g. 384,512,640)")
    for name, text in SETS.items():  # the sets of cases (one at a time)
        ap.add_argument(f"--{name}", action="store_true", help=text)
    ap.add_argument("--tag", default="", help="added to the results file's name (e.g. the checkout)")
    ap.add_argument("--x-box-tiles", default="", help="side-stream counts to time with x_box_tiles (e.g. 1,2,3), "
                                                         "beside the default, instead of --lanes")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s", flush=True)
    dev = torch.device("cuda")
    base = ops.default_cpml_config(dev)
    # the default before 2026-11-29 (fifteenth session; the sixteenth added layer_zwin and its budgets)
    previous = replace(base, x_box_tiles=False, side_streams=1, layer_zwin=(), psi_zwin=False,
                       march_regs=ops.MARCH_REGS_PSI_X)
    cases = {f"side-streams-{k}": (replace(previous, side_streams=int(k)), None) for k in args.lanes.split(",")}
    if args.x_box_tiles:  # the x boxes widened to whole x tiles (no x tile stores an interior column), then lanes
        cases = {"previous": (previous, None), **{f"x-box-tiles-{k}": (replace(previous, x_box_tiles=True,
                                                                               side_streams=int(k)), None)
                                                  for k in args.x_box_tiles.split(",")}}
    sizes = [int(v) for v in args.sizes.split(",")] if args.sizes else [512]
    if args.sizes:  # the default's zwin interior against the ring's (128, 256 planes) at several model sizes
        ring = ops.smem_config()
        cases = {"default": (base, ops.zwin_config()), "default-ring-z128": (base, replace(ring, block_z=128)),
                 "default-ring-z256": (base, replace(ring, block_z=256))}
    if args.ring:  # the default (the ring interior with 256 planes on this grid) under other launch settings
        ring = ops.smem_config()
        cases = {"default": (base, None), **{f"side-streams-{k}": (replace(base, side_streams=k), None) for k in (1, 5)},
                 "layers-first": (replace(base, interior_first=False), None),
                 "side-prio0": (replace(base, side_priority=0), None),
                 "ring-z512": (base, replace(ring, block_z=512)), "ring-z128": (base, replace(ring, block_z=128))}
    if args.corun:  # ring interiors under register budgets, so that layer CTAs fit beside them (not yet timed)
        ring = replace(ops.smem_config(), block_z=256)
        # z and y faces at 2 warps (6144 registers a CTA at 96): they fit beside a 112-register ring CTA (8192 left)
        small = replace(base, march_tiles=((4, 64, 8, 2), (4, 64, 8, 2)) + tuple(base.march_tiles[2:]))
        cases = {"default": (base, None), "ring-z256-r112": (base, replace(ring, maxnreg=112)),
                 "ring-z256-r112-faces-w2": (small, replace(ring, maxnreg=112)),
                 "faces-w2": (small, None),
                 "ring-16x64w8-z256-r112": (base, replace(ring, block_y=16, num_warps=8, ahead=3, maxnreg=112)),
                 "ring-16x64w8-z256-r128": (base, replace(ring, block_y=16, num_warps=8, ahead=3, maxnreg=128))}
    if args.layer_regs:  # the layer launches' register budgets (tuned with each launch alone) now that they share
        # the GPU with each other after the interior: lower budgets, more warps per SM (spills where they spill)
        cases = {"default": (base, None), **{f"regs-{'-'.join(map(str, r))}": (replace(base, march_regs=r), None)
                                             for r in ((80, 80, 72, 112, 128), (72, 72, 64, 96, 128),
                                                       (64, 64, 64, 80, 96), (128, 128, 96, 168, 168))}}
    if args.default:  # the default, and its z faces under 104 registers (96 spill 16 bytes since the layer launches
        # read and write zeta only in the layers, cross-compiled for sm90)
        regs = tuple(base.march_regs) or (0,) * 5
        cases = {"default": (base, None), "z-faces-r104": (replace(base, march_regs=(104,) + regs[1:]), None)}
    if args.layer_zwin:  # the layer launches' z window of p in registers (one load a plane): more registers
        # (cross-compiled for sm90: the x faces spill 312 bytes at 80, 8 at 112, none at 128; z and y faces none at 112)
        regs = tuple(base.march_regs)
        tiles = tuple(base.march_tiles)

        def zw(kinds, r, t=None):
            return replace(base, layer_zwin=kinds, march_regs=r, march_tiles=t or tiles), None

        cases = {"default": (base, None), "x-r112": (replace(base, march_regs=regs[:2] + (112,) + regs[3:]), None),
                 "x-zwin-r112": zw((2,), regs[:2] + (112,) + regs[3:]),
                 "x-zwin-r128": zw((2,), regs[:2] + (128,) + regs[3:]),
                 "x-zwin-bz8-r112": zw((2,), regs[:2] + (112,) + regs[3:], tiles[:2] + ((8, 32, 8, 2),) + tiles[3:]),
                 "x-zwin-bz16-r112": zw((2,), regs[:2] + (112,) + regs[3:], tiles[:2] + ((8, 32, 16, 2),) + tiles[3:]),
                 "zy-zwin-r112": zw((0, 1), (112, 112) + regs[2:]),
                 "faces-zwin-r112": zw((0, 1, 2), (112, 112, 112) + regs[3:]),
                 "all-zwin": zw((0, 1, 2, 3, 4), (112, 112, 112, 144, 168))}
    if args.zwin_faces:  # around "zy-zwin-r112" of --layer-zwin (1.010-1.011 ms against 1.018 for the default, H200):
        # z or y alone, 128 registers (the same 4 CTAs of 4 warps an SM as 112), 16 planes a program, the edges too
        regs = tuple(base.march_regs)
        tiles = tuple(base.march_tiles)
        cases = {"default": (base, None),
                 "zy-zwin-r112": (replace(base, layer_zwin=(0, 1), march_regs=(112, 112) + regs[2:]), None),
                 "zy-zwin-r128": (replace(base, layer_zwin=(0, 1), march_regs=(128, 128) + regs[2:]), None),
                 "z-zwin-r112": (replace(base, layer_zwin=(0,), march_regs=(112,) + regs[1:]), None),
                 "y-zwin-r112": (replace(base, layer_zwin=(1,), march_regs=regs[:1] + (112,) + regs[2:]), None),
                 "zy-zwin-r112-bz16": (replace(base, layer_zwin=(0, 1), march_regs=(112, 112) + regs[2:],
                                               march_tiles=((4, 128, 16, 4), (4, 128, 16, 4)) + tiles[2:]), None),
                 "zy-edges-zwin": (replace(base, layer_zwin=(0, 1, 3), march_regs=(112, 112, regs[2], 144, regs[4])),
                                   None)}
    if args.zwin_x:  # the x faces with the z window lost on their 2-warp tiles (spills at 80 registers, fewer CTAs at
        # 112-128); on 4-warp tiles of 8 x 32 (2 points a thread, 64-bit accesses) it fits 80 registers without spills
        # (cross-compiled for sm90), the same 24 warps an SM as the default's 2-warp tiles
        tiles = tuple(base.march_tiles)
        kinds = tuple(base.layer_zwin)

        def xt(t, zw):
            return replace(base, march_tiles=tiles[:2] + (t,) + tiles[3:],
                           layer_zwin=tuple(sorted(set(kinds) | ({2} if zw else set())))), None

        cases = {"default": (base, None), "x-w4": xt((8, 32, 4, 4), False), "x-w4-zwin": xt((8, 32, 4, 4), True),
                 "x-w4-zwin-bz8": xt((8, 32, 8, 4), True)}
    if args.zwin_psi:  # the z faces gained nothing from p's window alone (2026-11-29); they also read psi_z at the
        # 2R planes around each output plane: with those in registers too they take 128 registers, no spills (sm90)
        tiles = tuple(base.march_tiles)
        cases = {"no-psi-zwin": (replace(base, psi_zwin=False), None), "default": (base, None),
                 "z-psi-zwin-bz16": (replace(base, psi_zwin=True, march_tiles=((4, 128, 16, 4),) + tiles[1:]), None)}
    if args.layer_order:  # the step ends with the edges and corners (927-997 us of a 1.0 ms step, after the x faces):
        # latency-bound launches of few planes; issued first, their latency would overlap the faces' work
        cases = {"default": (base, None), **{f"order-{''.join(map(str, o))}": (replace(base, layer_order=o), None)
                                             for o in ((3, 4), (4, 3, 2, 1, 0), (2, 3, 4), (3, 4, 2))}}
    if args.x_face_pairs:  # a stream over the x faces' boxes took 0.0975 ms with their programs interleaved against
        # 0.1012 box by box (benchmarks/wave_xface_ring.py, 2026-11-29): the right face's row y and the left face's
        # row y + 1 are neighbours in memory
        cases = {"default": (base, None), "x-face-pairs": (replace(base, x_face_pairs=True), None),
                 "default-again": (base, None), "x-face-pairs-again": (replace(base, x_face_pairs=True), None)}
    if args.psi_x_launch:  # the x faces store psi_x, wait at a barrier of the program and read it back shifted at
        # every plane (a latency chain; computing the shifted copies instead measured slower, 2026-11-29); with psi_x
        # from its own launch, which runs with psi_z and psi_y on the SMs the ring's second wave leaves free, the x
        # faces only read it (72 registers without spills before the fusion)
        regs = tuple(base.march_regs)

        def pl(r):
            return replace(base, psi_x_fused=False, march_regs=regs[:2] + (r,) + regs[3:]), None

        cases = {"default": (base, None), **{f"psi-x-launch-r{r}": pl(r) for r in (64, 72, 80)}}
    if args.interiors:  # the default against the previous one, and with the cp.async-ring interior
        ring = ops.smem_config()
        cases = {"previous": (previous, None), "default": (base, None), "default-ring-z64": (base, ring),
                 "default-ring-z256": (base, replace(ring, block_z=256)),
                 "previous-ring-z256": (previous, replace(ring, block_z=256))}
    if args.interior_z:
        ring = ops.smem_config()
        cases = {"default": (base, None), **{f"ring-z{bz}": (base, replace(ring, block_z=bz)) for bz in (64, 128, 168, 192)}}
    records = []
    for n in sizes:
        records += cpml_rounds(cases, args.rounds, copy, n, args.width, say=lambda m: print(m, flush=True))
    for name, (pcfg, icfg) in cases.items():
        if not args.sizes:
            records += timeline(pcfg, icfg, args.width, name, copy)
    copy2 = measure_copy_bandwidth()
    print(f"copy at the end {copy2:.3f} TB/s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    sets = "".join(f"-{n}" for n in SETS if getattr(args, n.replace("-", "_")))
    write_results(records, "wave.side_streams", args.out / f"wave-side-streams-w{args.width}{'-xtiles' if args.x_box_tiles else ''}{'-sizes' if args.sizes else ''}{sets}{'-' + args.tag if args.tag else ''}.json", info,
                  meta={"copy_TBps_start": copy, "copy_TBps_end": copy2})
    return 0


if __name__ == "__main__":
    sys.exit(main())
