"""The whole CPML step (512**3 model + 20-point CPML, fp32 order 8, the default configuration) timed three
ways in one run (2026-11-28): each call alone (events around one call, synchronised, a spin kernel hiding
the host: ``time_rotating``, as ``cpml_step_suite`` times it), and ``--steps`` calls back to back with no
synchronisation between them (events around the loop; p and p_prev swapped and psi's buffers swapped after
every call, as ``simulate`` runs), launched and replayed from CUDA graphs, and back to back with p_next
written into a third array instead of over p_prev. Checked against the float64
torch step first (``cpml_step_suite``'s check, by calling it once with ``budget_s`` small).

    PYTHONPATH=src python benchmarks/wave_steady.py [--steps 200] [--rounds 2] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit, time_rotating
from tilecraft.bench.wave import _copy_axes, axis_layer_points, cpml_step_suite, cpml_traffic, graphed_cpml_step, parts_state
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    st = parts_state()
    dev = st.p.device
    # the float64 check of the default configuration (and its alone-timed figure, for the record)
    recs = cpml_step_suite(512, 8, torch.float32, 20, configs=[ops.default_cpml_config(dev)], device="cuda",
                           copy_tbps=st.copy, budget_s=0.3, unfused=False, parts=False, say=lambda m: None)
    checked = [r.extra.get("error") for r in recs if r.case.get("variant") == "cpml-fused"]
    if not checked or not all(r.extra.get("ok") for r in recs if r.case.get("variant") == "cpml-fused"):
        print(f"the default step failed its float64 check: {checked}", flush=True)
        return 1
    points = 1
    for a, b in zip(st.lo, st.hi):
        points *= b - a
    traffic = cpml_traffic(points, sum(axis_layer_points(ax, st.lo, st.hi) for ax in st.axes0), 8, 4)
    out = {"device": st.info.name, "copy_tbps": st.copy, "commit": git_commit(), "bytes": traffic.bytes,
           "checked_errors": checked, "torch": torch.__version__, "rounds": []}
    for rnd in range(args.rounds):
        row = {}
        axes = _copy_axes(st.axes0)
        bufs = [st.p.clone(), st.pp.clone()]

        def one(_i):
            ops.cpml_step(bufs[0], bufs[1], st.m, bufs[1], 8, st.spacing, st.lo, st.hi, axes, "triton")
            for ax in axes:
                ax.swap()
            bufs.reverse()

        row["alone_ms"] = time_rotating(one, 1, device=dev, budget_s=0.5, min_runs=20).median_ms
        graphed = graphed_cpml_step(bufs[0], bufs[1], st.m, bufs[1], 8, st.spacing, st.lo, st.hi,
                                    ops.default_cpml_config(dev))

        def loop(step):
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            for _ in range(args.steps):
                step()
            e.record()
            e.synchronize()
            return b.elapsed_time(e) / args.steps

        row["back_to_back_ms"] = loop(lambda: one(0))
        three = [st.p.clone(), st.pp.clone(), torch.empty_like(st.pp)]
        taxes = _copy_axes(st.axes0)

        def one3():  # p_next into a third array (not in place over p_prev), then p_prev <- p <- p_next
            ops.cpml_step(three[0], three[1], st.m, three[2], 8, st.spacing, st.lo, st.hi, taxes, "triton")
            for ax in taxes:
                ax.swap()
            three[:] = [three[2], three[0], three[1]]

        row["three_buffers_back_to_back_ms"] = loop(one3)
        gaxes = _copy_axes(st.axes0)

        def gstep():
            graphed(gaxes)
            for ax in gaxes:
                ax.swap()

        row["graphs_back_to_back_ms"] = loop(gstep)
        for k in list(row):
            row[k.replace("_ms", "_pct_copy")] = traffic.bytes / (row[k] * 1e-3) / 1e12 / st.copy * 100
        print(f"round {rnd + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
        out["rounds"].append(row)
    for k in out["rounds"][0]:
        out[f"median_{k}"] = statistics.median(r[k] for r in out["rounds"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wave-steady.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
