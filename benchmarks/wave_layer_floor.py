"""How fast the plain step (no CPML terms) runs on the boxes of each layer launch (2026-11-28): the floor a
layer kernel built on the same march could approach. For every ``wave_layer_kernel`` launch of the default
CPML step (512**3 model + 20-point CPML, fp32 order 8), the GPU time of the layer launch itself (one stream,
``cpml_parts``) beside the plain step on the same boxes with the register-window march (``zwin``, several
tiles) and the L1 z-march (``march_config``); per box ``launch_times`` (profiler records, median of 20).

    PYTHONPATH=src python benchmarks/wave_layer_floor.py --out DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, _record, cpml_parts, launch_times, parts_state, step_traffic
from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig

ZWIN = {  # name: (block_y, block_x, block_z, warps)
    "zwin-32x64-w16": (32, 64, 64, 16),
    "zwin-16x64-w8": (16, 64, 64, 8),
    "zwin-32x32-w8": (32, 32, 64, 8),
    "zwin-16x32-w4": (16, 32, 64, 4),
    "zwin-8x128-w8": (8, 128, 64, 8),
    "zwin-16x64-w8-z24": (16, 64, 24, 8),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    st = parts_state()
    info, copy, shape, lo, hi, spacing, p, pp, m, axes0 = (st.info, st.copy, st.shape, st.lo, st.hi, st.spacing, st.p,
                                                           st.pp, st.m, st.axes0)
    out = torch.empty_like(p)
    march = CPML_CONFIGS[0]
    records = cpml_parts(p, pp, m, out, 8, spacing, lo, hi, axes0, march, None, {"set": "layers"}, copy,
                         say=lambda s: print("  " + s, flush=True))
    for r in records:
        print(f"  {r.case['variant']:24s} {r.extra['time_ms']:.4f} ms  {r.ours / copy:6.1%} of copy (16 B/pt)", flush=True)
    kaxes = {ax.axis: ax for ax in axes0}
    _, _, launches = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, shape[2], march, 4, p.stride()[:2])
    cfgs = {name: WaveConfig(block_y=by, block_x=bx, block_z=bz, num_warps=w, kernel="zwin", loop_unroll=8,
                             l1_prefetch=2, halo_ahead=1) for name, (by, bx, bz, w) in ZWIN.items()}
    cfgs["march"] = ops.march_config(torch.float32, 8, p.device)
    for axes, _tile, table, _n in launches:
        boxes = [((r[0], r[2], r[4]), (r[1], r[3], r[5])) for r in table]
        pts = sum((b[0] - a[0]) * (b[1] - a[1]) * (b[2] - a[2]) for a, b in boxes)
        for name, cfg in cfgs.items():
            if cfg.kernel == "zwin" and any(ops.zwin_step_ok(p, 8, a, b, None, cfg) for a, b in boxes):
                print(f"  layers:{axes} {name}: {ops.zwin_step_ok(p, 8, *boxes[0], None, cfg)}", flush=True)
                continue

            def run():
                for a, b in boxes:
                    ops.step_into(p, pp, m, out, 8, spacing, a, b, None, "triton", cfg)

            seq = launch_times(run, 20)
            if not seq:
                continue
            ms = sum(t for _k, t in seq)
            rec = _record({"set": "floor", "variant": f"plain-{name}", "axes": list(axes)},
                          step_traffic(pts, 8, 4), ms, 0.0, copy, None, True, {"part": True, "gpu_time": True,
                                                                              "config": cfg.as_dict(), "boxes": boxes})
            records.append(rec)
            print(f"  layers:{','.join(map(str, axes)):6s} plain {name:20s} {ms:.4f} ms  {rec.ours / copy:6.1%} of copy "
                  f"({len(boxes)} boxes, {pts} points)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.layer_floor", args.out / "wave-layer-floor.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
