"""Rows padded to 128 bytes against 16 bytes (``wave.boundaries.ALIGN_POINTS``), one GPU, fp32 order 8, 512**3
model: the whole CPML step at several layer widths (checked against the float64 torch step first) and
``simulate`` (100 steps, three arrays) with the CPML and without a boundary, rounds in turn. Each
``simulate`` record is compared bit for bit with the 16-byte layout's (the frozen pad columns change no
updated point). The figure of merit counts each case's least traffic over its updated points, so the pad
columns (frozen, never updated) are not credited.

Why: the padded row pitch of a 512**3 model with a 20-point CPML is 560 points (2240 bytes, a multiple of 64
but not 128 bytes), with 12 points 544 (2176 = 17 x 128) and with 10 points 540 (2160 bytes, 16-byte
aligned only); the x-face launches were slower at 10 and 16 points than at 12 (docs/wave.md).

    PYTHONPATH=src python benchmarks/wave_row_align.py [--aligns 4,32] [--widths 12,20,10] [--rounds 2] [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import cpml_step_suite, simulate_step_ms, step_traffic, write_rounds
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops
from tilecraft.wave import boundaries


def simulate_ms(n: int, width: int | None, boundary: str, nt: int):
    return simulate_step_ms(n, nt, order=8, boundary=boundary, pml_width=width, backend="triton")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--aligns", default="4,32")
    ap.add_argument("--widths", default="12,20,10")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    aligns = [int(a) for a in args.aligns.split(",")]
    widths = [int(w) for w in args.widths.split(",")]
    copy = measure_copy_bandwidth()
    rows, ok, first = [], True, {}
    default_align = boundaries.ALIGN_POINTS, boundaries.CPML_ALIGN_POINTS
    for rnd in range(args.rounds):
        for w in widths + [0]:
            for a in aligns:
                boundaries.ALIGN_POINTS = boundaries.CPML_ALIGN_POINTS = a  # both layouts, the A/B's
                row = {"round": rnd, "align_points": a, "pml_width": w}
                if w:
                    recs = cpml_step_suite(args.n, 8, torch.float32, w, configs=[ops.default_cpml_config(torch.device("cuda"))],
                                           device="cuda", copy_tbps=copy, budget_s=0.4, unfused=False, parts=False,
                                           say=lambda _m: None)
                    step = next(r for r in recs if r.case.get("variant") == "cpml-fused")
                    ok = ok and bool(step.extra.get("ok"))
                    row.update(grid=step.case["grid"], step_ok=step.extra.get("ok"), step_error=step.extra.get("error"),
                               step_ms=step.extra["time_ms"], bytes=step.extra["bytes"],
                               step_pct_copy=100 * step.extra["bytes"] / (step.extra["time_ms"] * 1e-3) / 1e12 / copy)
                ms, record, info = simulate_ms(args.n, w or None, "pml" if w else "none", args.nt)
                lay = wave.Layout((args.n,) * 3, 8, w, False, a)
                lo, hi = lay.updated
                pts = 1
                for x0, x1 in zip(lo, hi):
                    pts *= x1 - x0
                nbytes = row.get("bytes") or step_traffic(pts, 8, 4).bytes
                ref = first.setdefault((rnd, w), record)
                same = bool(torch.equal(ref, record))
                ok = ok and same
                row.update(simulate_ms=ms, simulate_pct_copy=100 * nbytes / (ms * 1e-3) / 1e12 / copy,
                           simulate_grid=list(lay.shape), same_record_bits=same, in_place=info.get("in_place"))
                rows.append(row)
                print(f"round {rnd} W={w} align {a}: grid {lay.shape[-1]}: "
                      + (f"step {row['step_ms']:.3f} ms ({row['step_pct_copy']:.1f}%, ok={row['step_ok']}), " if w else "")
                      + f"simulate {ms:.3f} ms ({row['simulate_pct_copy']:.1f}%), record bits equal: {same}", flush=True)
    boundaries.ALIGN_POINTS, boundaries.CPML_ALIGN_POINTS = default_align
    info = detect()
    out = {"device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
           "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "copy_tbps": copy, "copy_tbps_end": measure_copy_bandwidth(), "rows": rows}
    write_rounds(out, rows, lambda r: f"median_W{r['pml_width']}_align{r['align_points']}",
                 ("step_ms", "step_pct_copy", "simulate_ms", "simulate_pct_copy"), args.out / "wave-row-align.json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
