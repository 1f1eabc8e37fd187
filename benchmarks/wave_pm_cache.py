"""Cache hints on the zwin interior's p_prev and m loads (read once a point), and the in-place write
(2026-11-28, tenth session). Nsight Compute showed the interior launch alone costing 775 us with p_next over
p_prev against 637 us into a third array (same DRAM bytes, ``wave_inplace_ncu.sh``), while torch's in-place
addcmul costs nothing extra: so is it the L1 (p_prev's line cached by the load, then written by the store)?

For each interior configuration (the default zwin; p_prev and m loaded ``.cg``, L2 only; ``evict_first``;
the store ``.cs``; ``.cg`` and ``.cs``):
* the float64 check: the default configuration's whole CPML step against the float64 torch step
  (``cpml_step_suite``), and every other configuration's step bit for bit against the default's, from the
  same state into a NaN-filled output;
* the interior launch alone (the 512**3 box, ``_launch_step``), back to back, into a spare array and over p_prev;
* the whole step back to back (psi swapped after each), p_next into a third array and over p_prev.
Rounds in turn; medians.

    PYTHONPATH=src python benchmarks/wave_pm_cache.py [--rounds 3] [--steps 100] [--out DIR]

Measured on an H200 at 4bb0c9f (no hint moved either figure) and removed: the WaveConfig fields
``pm_cache`` / ``pm_evict`` this script sets exist only in commits 806326c..4bb0c9f; run it there.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import _copy_axes, axis_layer_points, cpml_step_suite, cpml_traffic, parts_state
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    st = parts_state()
    dev = st.p.device
    base = ops.default_config(torch.float32, 8, dev)
    variants = {"default": base, "cg": replace(base, pm_cache=".cg"), "evict_first": replace(base, pm_evict="evict_first"),
                "cs_store": replace(base, nontemporal=True), "cg_cs": replace(base, pm_cache=".cg", nontemporal=True)}
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
            row["interior_in_place_ms"] = loop(lambda: ops._launch_step(bufs[0], bufs[1], st.m, bufs[1], 8,
                                                                        st.spacing, ilo, ihi, None, cfg), 50)
            for mode in ("third", "in_place"):
                axes = _copy_axes(st.axes0)
                bufs = [st.p.clone(), st.pp.clone(), torch.zeros_like(st.pp)]

                def one():
                    o = bufs[1] if mode == "in_place" else bufs[2]
                    ops.cpml_step(bufs[0], bufs[1], st.m, o, 8, st.spacing, st.lo, st.hi, axes, "triton", config=cfg)
                    for ax in axes:
                        ax.swap()
                    bufs[:] = [bufs[1], bufs[0], bufs[2]] if mode == "in_place" else [bufs[2], bufs[0], bufs[1]]

                row[f"step_{mode}_ms"] = loop(one, args.steps)
            row["interior_third_pct_copy"] = inner_bytes / (row["interior_third_ms"] * 1e-3) / 1e12 / st.copy * 100
            row["interior_in_place_pct_copy"] = inner_bytes / (row["interior_in_place_ms"] * 1e-3) / 1e12 / st.copy * 100
            row["step_third_pct_copy"] = traffic.bytes / (row["step_third_ms"] * 1e-3) / 1e12 / st.copy * 100
            row["step_in_place_pct_copy"] = traffic.bytes / (row["step_in_place_ms"] * 1e-3) / 1e12 / st.copy * 100
            print(f"round {rnd} {name:12s} " + " ".join(f"{k} {v:.3f}" for k, v in row.items()
                                                        if isinstance(v, float)), flush=True)
            rows.append(row)
    res = {"device": st.info.name, "copy_tbps": st.copy, "commit": git_commit(), "torch": torch.__version__,
           "step_bytes": traffic.bytes, "interior_bytes": inner_bytes, "rows": rows, "median": {}}
    for name in variants:
        res["median"][name] = {k: statistics.median(r[k] for r in rows if r["variant"] == name)
                               for k in rows[0] if k not in ("variant", "round")}
        print(f"median {name:12s} " + " ".join(f"{k} {v:.3f}" for k, v in res["median"][name].items()), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wave-pm-cache.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
