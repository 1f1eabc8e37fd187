"""How the timing method moves the attention figures: ours and SDPA's cuDNN backend on the issue's forward
(and, with ``--bwd``, backward) shapes, each timed with every call bracketed by events on an idle device
(``hide_launch=False``, the harness before 2026-11-27) and with the device kept busy while the host
enqueues it (``hide_launch=True``, the harness now), in turn, for several rounds, in one process.
Forward calls are CUDA-graph replays either way (``bench.attention.measure``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/attention_timing.py --out $OUT [--rounds 3] [--bwd]

Every case is checked against float64 before it is timed (``bench.attention.measure``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tilecraft.bench import attention as ba  # noqa: E402
from tilecraft.bench import harness  # noqa: E402
from tilecraft.bench.harness import Record, write_results  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402


def start(rounds: int, budget: float, more=None):
    """(arguments, output folder, device) of an attention benchmark script: ``--out``, ``--rounds``,
    ``--budget``, ``--tag`` and whatever ``more(parser)`` adds; prints the device."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--budget", type=float, default=budget)
    ap.add_argument("--tag", default="")
    if more:
        more(ap)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = detect()
    print(f"device {info.name} {info.versions}", flush=True)
    return args, out, info


def main() -> int:
    args, out, info = start(3, 0.5, lambda ap: ap.add_argument("--bwd", action="store_true",
                                                               help="the two D128 backward shapes too"))
    shapes = [(s, "fwd") for s in ba.ISSUE_SHAPES if not ba.is_decode(s)]
    if args.bwd:
        shapes += [(s, "bwd") for s in ba.ISSUE_SHAPES[:2]]
    plain = harness.time_rotating
    records, ratios = [], {}
    t0 = time.time()
    for rnd in range(1, args.rounds + 1):
        for s, direction in shapes:
            for hide in ((False, True) if rnd % 2 else (True, False)):
                harness.time_rotating = partial(plain, hide_launch=hide)
                try:
                    res = ba.measure(s, torch.bfloat16, direction, backends=("cudnn",), budget_s=args.budget)
                finally:
                    harness.time_rotating = plain
                by = {r.impl: r for r in res}
                ours, peer = by.get("tilecraft"), by.get("sdpa-cudnn")
                if not (ours and peer and ours.ok and peer.ok and ours.time_ms and peer.time_ms):
                    print(f"   {s} {direction} hide={hide}: {[(r.impl, r.ok, r.message[:80]) for r in res]}", flush=True)
                    continue
                flops = ba.attention_flops(s, backward=direction == "bwd")
                ratio = peer.time_ms / ours.time_ms
                name = f"{direction} D{s.head_dim}{' causal' if s.causal else ''}"
                ratios.setdefault((name, hide), []).append(ratio)
                print(f"[{time.time() - t0:5.0f}s] r{rnd} {name:18s} hide={hide!s:5s} ours {flops / ours.time_ms / 1e9:6.1f} "
                      f"cuDNN {flops / peer.time_ms / 1e9:6.1f} TFLOP/s  x{ratio:.3f}  err {ours.rel_error:.1e}",
                      flush=True)
                records.append(Record("attention.timing", {"shape": str(s), "direction": direction, "hide_launch": hide,
                                                           "round": rnd}, "TFLOP/s", "TFLOP/s",
                                      flops / ours.time_ms / 1e9, peer="sdpa-cudnn",
                                      peer_value=flops / peer.time_ms / 1e9, ratio=ratio,
                                      extra={"ours": ours.timing, "peer_timing": peer.timing,
                                             "rel_error": ours.rel_error}))
        write_results(records, "attention.timing", out / f"attention-timing{args.tag}.json", info)
    for (name, hide), rs in ratios.items():
        print(f"{name:18s} hide={hide!s:5s} x cuDNN {' '.join(f'{r:.3f}' for r in rs)} median {statistics.median(rs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
