"""The zwin interior's configurations A/B, inside the whole CPML step (512**3 + 20-point CPML, fp32 order 8).

``--set pm_cache`` (2026-11-28, tenth session; needs commits 806326c..4bb0c9f, where ``WaveConfig`` had the
fields ``pm_cache`` / ``pm_evict``): cache hints on the interior's p_prev and m loads (read once a point) and the
store ``.cs``, in place and out of place. Nsight Compute had shown the interior launch alone costing 775 us with
p_next over p_prev against 637 us into a third array (same DRAM bytes, ``wave_inplace_ncu.sh``), while torch's
in-place addcmul costs nothing: was it the L1 line of p_prev? (No hint moved either figure.)

``--set spills`` (the same day): the default interior (32 x 64 tiles, 16 warps, unroll 8, x chunks a plane
ahead) spills 64 bytes a thread at its 128-register cap on sm90, and Nsight Compute counted 1.34 M local
memory requests in the launch; tiles, warps, unroll and ``halo_ahead`` that compile without spills
(cross-compiled for sm90 first).

``--set bz`` (2026-11-28, twelfth session): planes per program of the interior, zwin (64, the default; 128, 256, 512) and the
cp.async ring (``smem_config``, 64 and 256): the stencil's ring gained 2-4 points of copy on an H200 from
256-512 planes per program (fewer z-halo planes and program starts; ``ops.stencil.smem_march``).

For each configuration:
* the float64 check: the default configuration's whole CPML step against the float64 torch step
  (``cpml_step_suite``), and every other configuration's step bit for bit against the default's, from the
  same state into a NaN-filled output;
* the interior launch alone (the 512**3 box, ``_launch_step``), back to back, into a spare array (and over
  p_prev with ``--in-place``);
* the whole step back to back (psi swapped after each), p_next into a third array (and over p_prev).
Rounds in turn; medians.

    PYTHONPATH=src python benchmarks/wave_interior_ab.py --set spills|pm_cache|bz [--in-place] [--rounds 3]
        [--steps 100] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import _copy_axes, axis_layer_points, cpml_step_suite, cpml_traffic, parts_state
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("spills", "pm_cache", "bz"), required=True)
    ap.add_argument("--in-place", action="store_true", help="also time p_next over p_prev")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    st = parts_state()
    dev = st.p.device
    base = ops.default_config(torch.float32, 8, dev)
    if args.set == "pm_cache":
        variants = {"default": base, "cg": replace(base, pm_cache=".cg"),
                    "evict_first": replace(base, pm_evict="evict_first"),
                    "cs_store": replace(base, nontemporal=True), "cg_cs": replace(base, pm_cache=".cg", nontemporal=True)}
    elif args.set == "bz":
        variants = {"default": base}
        for bz in (128, 256, 512):
            variants[f"zwin z{bz}"] = replace(base, block_z=bz)
        ring = ops.smem_config()
        variants["ring z64"] = ring
        variants["ring z256"] = replace(ring, block_z=256)
    else:  # (block_y, block_x, warps, halo_ahead, unroll): no spills on sm90 (Triton 3.6)
        variants = {"default": base}
        for by, bx, w, ha, un in ((32, 64, 16, 1, 2), (32, 64, 16, 0, 2), (16, 64, 8, 1, 8), (32, 32, 8, 1, 8),
                                  (16, 64, 16, 1, 4), (8, 128, 8, 1, 8)):
            variants[f"{by}x{bx} w{w} ha{ha} u{un}"] = replace(base, block_y=by, block_x=bx, num_warps=w,
                                                                  halo_ahead=ha, loop_unroll=un)
    modes = ("third", "in_place") if args.in_place else ("third",)
    recs = cpml_step_suite(512, 8, torch.float32, 20, configs=[ops.default_cpml_config(dev)], device="cuda",
                           copy_tbps=st.copy, budget_s=0.3, unfused=False, parts=False, say=lambda m: None)
    fused = [r for r in recs if r.case.get("variant") == "cpml-fused"]
    if not fused or not all(r.extra.get("ok") for r in fused):
        print(f"the default step failed its float64 check: {[r.extra.get('error') for r in fused]}", flush=True)
        return 1
    ref = None
    for name, cfg in variants.items():
        axes = _copy_axes(st.axes0)
        out = torch.full_like(st.pp, float("nan"))
        ops.cpml_step(st.p, st.pp, st.m, out, 8, st.spacing, st.lo, st.hi, axes, "triton", config=cfg)
        torch.cuda.synchronize()
        got = (out, *(ax.psi[1] for ax in axes), *(ax.zeta for ax in axes))
        if ref is None:
            ref = [t.clone() for t in got]
        elif not all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(ref, got)):  # NaN halo
            print(f"{name}: not the default's bits", flush=True)
            return 1
    print("every variant gives the default's bits", flush=True)
    points = 1
    for a, b in zip(st.lo, st.hi):
        points *= b - a
    traffic = cpml_traffic(points, sum(axis_layer_points(ax, st.lo, st.hi) for ax in st.axes0), 8, 4)
    ilo = tuple(a + 20 for a in st.lo)
    ihi = tuple(b - 20 for b in st.hi)
    inner_bytes = 16
    for a, b in zip(ilo, ihi):
        inner_bytes *= b - a

    def loop(step, n):
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        for _ in range(n):
            step()
        e.record()
        e.synchronize()
        return b.elapsed_time(e) / n

    rows = []
    for rnd in range(args.rounds):
        for name, cfg in variants.items():
            row = {"variant": name, "round": rnd}
            bufs = [st.p.clone(), st.pp.clone(), torch.zeros_like(st.pp)]
            row["interior_third_ms"] = loop(lambda: ops._launch_step(bufs[0], bufs[1], st.m, bufs[2], 8, st.spacing,
                                                                     ilo, ihi, None, cfg), 50)
            if args.in_place:
                row["interior_in_place_ms"] = loop(lambda: ops._launch_step(bufs[0], bufs[1], st.m, bufs[1], 8,
                                                                            st.spacing, ilo, ihi, None, cfg), 50)
            for mode in modes:
                axes = _copy_axes(st.axes0)
                bufs = [st.p.clone(), st.pp.clone(), torch.zeros_like(st.pp)]

                def one():
                    o = bufs[1] if mode == "in_place" else bufs[2]
                    ops.cpml_step(bufs[0], bufs[1], st.m, o, 8, st.spacing, st.lo, st.hi, axes, "triton", config=cfg)
                    for ax in axes:
                        ax.swap()
                    bufs[:] = [bufs[1], bufs[0], bufs[2]] if mode == "in_place" else [bufs[2], bufs[0], bufs[1]]

                row[f"step_{mode}_ms"] = loop(one, args.steps)
            for mode in modes:
                row[f"interior_{mode}_pct_copy"] = inner_bytes / (row[f"interior_{mode}_ms"] * 1e-3) / 1e12 / st.copy * 100
                row[f"step_{mode}_pct_copy"] = traffic.bytes / (row[f"step_{mode}_ms"] * 1e-3) / 1e12 / st.copy * 100
            print(f"round {rnd} {name:22s} " + " ".join(f"{k} {v:.3f}" for k, v in row.items()
                                                        if isinstance(v, float)), flush=True)
            rows.append(row)
    res = {"device": st.info.name, "copy_tbps": st.copy, "commit": git_commit(), "torch": torch.__version__,
           "triton": st.info.versions.get("triton"), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "step_bytes": traffic.bytes, "interior_bytes": inner_bytes, "rows": rows, "median": {}}
    for name in variants:
        res["median"][name] = {k: statistics.median(r[k] for r in rows if r["variant"] == name)
                               for k in rows[0] if k not in ("variant", "round")}
        print(f"median {name:22s} " + " ".join(f"{k} {v:.3f}" for k, v in res["median"][name].items()), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"wave-interior-ab-{args.set}.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
