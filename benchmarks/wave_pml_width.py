"""The CPML step and ``simulate`` at several layer widths (512**3 model, fp32, order 8), rounds in turn, one
run. Each width's whole step (``cpml_step_suite``: checked against the float64 torch step first, from a
NaN-poisoned output) and ``simulate`` (``simulate_suite``: 100 steps, sources and receivers, the default
three arrays) are timed; the figure of merit of both counts that width's least traffic (16 B a point plus
ψ and ζ read and written at each layer point of each axis: ``cpml_traffic``), so a thinner layer is not
credited with bytes it does not move. The reflection of each width is measured on the CPU
(``tests/wave/test_wave_physics.py``, docs/wave.md).

    PYTHONPATH=src python benchmarks/wave_pml_width.py [--widths 20,10] [--rounds 2] [--nt 100] [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import cpml_step_suite, simulate_suite, write_rounds
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--widths", default="20,10")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    copy = measure_copy_bandwidth()
    quiet = lambda _m: None  # noqa: E731
    rows, ok = [], True
    for rnd in range(args.rounds):
        for w in widths:
            recs = cpml_step_suite(args.n, 8, torch.float32, w, configs=[ops.default_cpml_config(torch.device("cuda"))],
                                   device="cuda", copy_tbps=copy, budget_s=0.5, unfused=False, parts=False, say=quiet)
            step = next(r for r in recs if r.case.get("variant") == "cpml-fused")
            torch_step = next(r for r in recs if r.case.get("variant") == "cpml-torch")
            ok = ok and bool(step.extra.get("ok"))
            sim = simulate_suite(args.n, 8, torch.float32, w, nt=args.nt, device="cuda", copy_tbps=copy,
                                 backends=("triton",), say=quiet)[0]
            nbytes = step.extra["bytes"]
            row = {"round": rnd, "pml_width": w, "grid": step.case["grid"], "layer_points": step.case["layer_points"],
                   "points": step.extra["points"], "bytes": nbytes, "step_ok": step.extra.get("ok"),
                   "step_error": step.extra.get("error"), "step_ms": step.extra["time_ms"],
                   "step_pct_copy": 100 * nbytes / (step.extra["time_ms"] * 1e-3) / 1e12 / copy,
                   "torch_step_ms": torch_step.extra["time_ms"], "peer": "torch step (same CPML, elementwise ops)",
                   "ratio_to_torch": torch_step.extra["time_ms"] / step.extra["time_ms"],
                   "ceiling": "copy bandwidth (measured, same run)",
                   "simulate_ms": sim.extra["time_ms"], "simulate_in_place": sim.extra.get("in_place"),
                   "simulate_pct_copy": 100 * nbytes / (sim.extra["time_ms"] * 1e-3) / 1e12 / copy,
                   "simulate_gpts": step.extra["points"] / sim.extra["time_ms"] / 1e6}
            rows.append(row)
            print(f"round {rnd} W={w}: step {row['step_ms']:.3f} ms ({row['step_pct_copy']:.1f}% of copy, "
                  f"ok={row['step_ok']}, error {row['step_error']:.2e}), simulate {row['simulate_ms']:.3f} ms "
                  f"({row['simulate_pct_copy']:.1f}%, {row['simulate_gpts']:.0f} GPts/s), torch step "
                  f"{row['torch_step_ms']:.2f} ms", flush=True)
    info = detect()
    out = {"device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
           "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "copy_tbps": copy, "copy_tbps_end": measure_copy_bandwidth(), "n": args.n,
           "rows": rows}
    write_rounds(out, rows, lambda r: f"median_W{r['pml_width']}",
                 ("step_ms", "step_pct_copy", "simulate_ms", "simulate_pct_copy", "simulate_gpts"), args.out / "wave-pml-width.json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
