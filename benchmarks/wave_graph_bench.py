"""One GPU: the whole wave step with the CPML (fp32, order 8, 512**3 model + 20-point CPML) launched
from Python against the same step replayed from CUDA graphs (``ops.capture_steps``), and the
previous default, in one run with the copy ceiling; then ``simulate`` per step with and without
graphs. Every step variant is first checked against the float64 torch step; the ``simulate``
records carry whether the shot record has the bits of the uncaptured run.

    PYTHONPATH=src python benchmarks/wave_graph_bench.py [--n 512] [--rounds 3] [--out DIR]

Writes wave-graph.json (Records; extra has time_ms, round, cuda_graphs) and prints the medians over
the rounds (each round's time is itself a median of many steps).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import wave_rounds
from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, cpml_step_suite, simulate_suite
from tilecraft.hardware.ceilings import measure_copy_bandwidth


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    started = wave_rounds.start()
    if started is None:
        return 2
    info, copy = started
    say = wave_rounds.say
    labels = {0: "launched (default config)", 2: "previous default (75154d9)"}
    records = cpml_step_suite(args.n, 8, torch.float32, 20, configs=(CPML_CONFIGS[0], CPML_CONFIGS[2]),
                              device="cuda", copy_tbps=copy, budget_s=args.budget, unfused=False, say=say,
                              graphs=True, parts=False, rounds=args.rounds)
    torch.cuda.empty_cache()
    records += simulate_suite(args.n, 8, torch.float32, 20, nt=args.nt, device="cuda", copy_tbps=copy,
                              backends=("triton",), boundary="pml", say=say, graph_modes=(True, False),
                              rounds=args.rounds)
    copy2 = measure_copy_bandwidth()
    path = write_results(records, "wave", (args.out / "wave-graph.json") if args.out else None, info,
                         meta={"copy_TBps_start": copy, "copy_TBps_end": copy2,
                               "least_bytes": "cpml-*: 16 B per updated point + 16 B per point of each axis's layers; "
                                              "simulate-*: 16 B per updated point"})
    groups: dict[str, list] = {}
    for r in records:
        v = r.case.get("variant")
        if v == "cpml-fused":
            key = labels[0] if r.extra["config"].get("psi_tiles") else labels[2]
        elif v == "cpml-graph":
            key = "CUDA graphs (default config)"
        elif v == "simulate-triton":
            key = f"simulate, graphs: {r.extra.get('cuda_graphs')}"
        else:
            key = v
        groups.setdefault(key, []).append(r)
    wave_rounds.print_groups(groups, copy, copy2)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
