"""The plain step's interior as the cp.async ring (``ops.wave.smem_config``) with 64 to 512 planes per program,
against the default interior (the register window when this was written; since then the ring on large plain
steps, ``ops.wave.default_config``), inside ``simulate`` (one GPU, fp32 order 8, a 512**3 model,
100 steps, three arrays): without a boundary and with the default CPML. Every configuration's shot record is
compared bit for bit with the default's (the ring gives zwin's bits) before its time counts.

Why: the stencil's ring gained 2-4 points of copy on an H200 from 256-512 planes per program at order 8, and
in the CPML step's interior launch alone (``wave_interior_ab.py --set bz``, 20-point CPML) the ring with 256
planes ran 0.598 ms (84.6% of copy) against 0.662 ms for zwin, while the whole step stayed at par (1.375
against 1.372 ms): the side stream's layer launches overlap zwin's interior, not the ring's.

    PYTHONPATH=src python benchmarks/wave_ring_bz.py [--bz 64,128,256,512] [--rounds 3] [--nt 100] [--out DIR]

``--against-zwin --sizes 256,384,640`` (the same day): the defaults against the register window (``zwin_config``)
at other model sizes. Run while the defaults were the ring everywhere (64 planes per program in the plain step,
256 in the CPML step's interior, at 0769e1c's parent): the CPML step with the ring was slower at 256, 384 and
640 cubed, so its interior went back to zwin; the plain step keeps the ring on boxes of 128+ tiles
(``ops.wave.ring_box``). Run now, it compares the plain step's ring against zwin where ``ring_box`` takes it.

``--ring-vs-zwin --graphs 0,1 --boundaries none --sizes 256,384,512`` (2026-11-28, thirteenth session): the ring
and zwin whatever the defaults take, each launched and from CUDA graphs (``simulate(cuda_graphs=...)``): whether
the ring's round-to-round spread below 512 cubed is the host's launch path (``loop_seconds`` is wall time).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import cpml_step_suite, simulate_step_ms, step_traffic, write_rounds
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops


def simulate_ms(n: int, boundary: str, nt: int, cfg, graphs: bool = False):
    ms, record, _info = simulate_step_ms(n, nt, order=8, boundary=boundary, backend="triton", step_config=cfg,
                                         cuda_graphs=graphs)
    return ms, record


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--bz", default="64,128,256,512")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--sizes", default=None, help="model sizes (default: --n)")
    ap.add_argument("--against-zwin", action="store_true", help="the defaults against zwin_config only")
    ap.add_argument("--ring-vs-zwin", action="store_true",
                    help="the ring (smem_config, 64 planes) against zwin_config, whatever the defaults take")
    ap.add_argument("--graphs", default="0", help="simulate's cuda_graphs values timed, e.g. 0,1")
    ap.add_argument("--boundaries", default="none,pml")
    args = ap.parse_args()
    copy = measure_copy_bandwidth()
    ring = ops.smem_config()
    if args.against_zwin:
        configs = {"default": None, "zwin": ops.zwin_config()}
    elif args.ring_vs_zwin:
        configs = {"zwin": ops.zwin_config(), "ring": ring}
    else:
        configs = {"default": None, **{f"ring z{b}": replace(ring, block_z=int(b)) for b in args.bz.split(",")}}
    width = wave.boundaries.layer_width("pml", None)
    sizes = [int(v) for v in args.sizes.split(",")] if args.sizes else [args.n]
    bytes_ = {}
    for n in sizes:
        recs = cpml_step_suite(n, 8, torch.float32, width, configs=[ops.default_cpml_config(torch.device("cuda"))],
                               device="cuda", copy_tbps=copy, budget_s=0.4, unfused=False, parts=False,
                               say=lambda _m: None)
        step = next(r for r in recs if r.case.get("variant") == "cpml-fused")
        if not step.extra.get("ok"):
            print(f"n={n}: the default CPML step failed its float64 check: {step.extra.get('error')}", flush=True)
            return 1
        bytes_[n, "pml"] = step.extra["bytes"]
        lo, hi = wave.Layout((n,) * 3, 8, 0, False).updated
        pts = 1
        for a, b in zip(lo, hi):
            pts *= b - a
        bytes_[n, "none"] = step_traffic(pts, 8, 4).bytes
    rows, ok, first = [], True, {}
    boundaries = args.boundaries.split(",")
    graph_modes = [bool(int(g)) for g in args.graphs.split(",")]
    if len(graph_modes) > 1:  # each configuration with and without CUDA graphs: names carry the mode
        configs = {f"{name}{' graphs' if g else ''}": (cfg, g) for name, cfg in configs.items() for g in graph_modes}
    else:
        configs = {name: (cfg, graph_modes[0]) for name, cfg in configs.items()}
    for rnd in range(args.rounds):
        for n in sizes:
            for boundary in boundaries:
                for name, (cfg, graphs) in configs.items():
                    ms, record = simulate_ms(n, boundary, args.nt, cfg, graphs)
                    ref = first.setdefault((n, boundary), record)
                    same = bool(torch.equal(ref, record))
                    ok = ok and same
                    row = {"round": rnd, "n": n, "boundary": boundary, "pml_width": width if boundary == "pml" else 0,
                           "config": name, "cuda_graphs": graphs, "simulate_ms": ms, "bytes": bytes_[n, boundary],
                           "simulate_pct_copy": 100 * bytes_[n, boundary] / (ms * 1e-3) / 1e12 / copy,
                           "same_record_bits": same}
                    rows.append(row)
                    print(f"round {rnd} n={n} {boundary:4s} {name:16s} simulate {ms:.3f} ms "
                          f"({row['simulate_pct_copy']:.1f}% of copy), record bits equal to the first's: {same}",
                          flush=True)
    info = detect()
    out = {"device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
           "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "copy_tbps": copy, "copy_tbps_end": measure_copy_bandwidth(), "rows": rows}
    # ours against the peer in the same run: zwin (--against-zwin) or the default, medians per (size, boundary)
    peer = next(iter(configs)) if args.ring_vs_zwin else "zwin" if args.against_zwin else "default"
    out["ratios"] = {}
    for n in sizes:
        for boundary in boundaries:
            med = {c: statistics.median(r["simulate_ms"] for r in rows
                                        if r["n"] == n and r["boundary"] == boundary and r["config"] == c)
                   for c in configs}
            for c, ms in med.items():
                out["ratios"][f"{n}/{boundary}/{c}"] = {"ours_ms": ms, "peer": peer, "peer_ms": med[peer],
                                                        "ratio_peer_over_ours": med[peer] / ms,
                                                        "ceiling": "copy bandwidth", "ceiling_tbps": copy}
    name = ("wave-ring-vs-zwin.json" if args.against_zwin else "wave-ring-or-zwin.json" if args.ring_vs_zwin
            else "wave-ring-bz.json")
    write_rounds(out, rows, lambda r: f"median_n{r['n']}_{r['boundary']}_{r['config'].replace(' ', '_')}",
                 ("simulate_ms", "simulate_pct_copy"), args.out / name)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
