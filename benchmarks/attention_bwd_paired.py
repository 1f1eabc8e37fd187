"""Paired causal tiles in the backward (``BwdConfig(paired=True)``) against the default tiles, cuDNN and
FlashAttention-2, bf16, the issue's causal shapes (D128 B4 H16 S4096, D64 B8 H16 S2048), in alternating
rounds in one process; every config checked against float64 first (``bench.attention.measure``).
``--set grouped`` (round 17): the paired default against the grouped heavy-first order
(``BwdConfig(order=...)``: the L2's choice and fixed groups), cuDNN and FlashAttention-2 in every round.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/attention_bwd_paired.py OUT_DIR [--rounds 3]
        [--set paired|grouped] [--shapes d128c,d64c,d256c]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from tilecraft.bench import attention as ba
from tilecraft.bench.harness import git_commit
from tilecraft.hardware.device import detect
from tilecraft.ops import attention as ops

SHAPES = {"d128c": ba.Shape(4, 16, 16, 4096, 4096, 128, True), "d64c": ba.Shape(8, 16, 16, 2048, 2048, 64, True),
          "d256c": ba.Shape(2, 16, 16, 4096, 4096, 256, True)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--set", default="paired", choices=("paired", "grouped"))
    ap.add_argument("--shapes", default="d128c,d64c", help=f"comma list of {','.join(SHAPES)}")
    args = ap.parse_args()
    info = detect()
    doc = {"device": info.as_dict(), "commit": git_commit(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "method": f"{args.rounds} rounds: default, paired, and SDPA cudnn/flash (first round); eager backward, "
                     "medians", "shapes": {}}
    import triton
    doc["triton"] = triton.__version__
    for name in args.shapes.split(","):
        s = SHAPES[name]
        base = ops.default_bwd_config(s.head_dim, torch.device("cuda"))
        if args.set == "grouped":
            cfgs = {"paired": replace(base, paired=True, order=0),
                    "grouped-auto": replace(base, paired=False, order=ops.ORDER_AUTO),
                    **{f"grouped-{g}": replace(base, paired=False, order=g) for g in (4, 16)}}
        else:
            cfgs = {"default": replace(base, paired=False, order=0), "paired": replace(base, paired=True, order=0)}
        flops = ba.attention_flops(s, backward=True)
        rows = {k: [] for k in (*cfgs, "sdpa-cudnn", "sdpa-flash")}
        for rnd in range(args.rounds):
            order = list(cfgs.items()) if rnd % 2 == 0 else list(cfgs.items())[::-1]
            for label, cfg in order:
                first = label == order[0][0] if args.set == "grouped" else (rnd == 0 and label == "default")
                res = ba.measure(s, torch.bfloat16, "bwd", backends=("cudnn", "flash") if first else (), bwd=cfg,
                                 budget_s=args.budget)
                for r in res:
                    key = label if r.impl == "tilecraft" else r.impl
                    if not r.ok:
                        print(f"{name} {key}: FAILED {r.message}", flush=True)
                        continue
                    rows[key].append(flops / (r.time_ms * 1e-3) / 1e12)
                print(f"{name} round {rnd} {label}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rows.items() if v),
                      flush=True)
        med = {k: statistics.median(v) for k, v in rows.items() if v}
        doc["shapes"][name] = {"shape": asdict(s), "tflops": rows, "median": med,
                               "configs": {k: c.as_dict() for k, c in cfgs.items()}}
        if args.set == "grouped":
            print(f"{name}: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()) + "; x flash: "
                  + ", ".join(f"{k} {med[k] / med['sdpa-flash']:.3f}" for k in cfgs if k in med and "sdpa-flash" in med),
                  flush=True)
        print(f"{name}: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items())
              + (f"; paired/default {med['paired'] / med['default']:.3f}" if "paired" in med and "default" in med else "")
              + (f"; paired/flash {med['paired'] / med['sdpa-flash']:.3f}" if "sdpa-flash" in med and "paired" in med else "")
              + (f"; paired/cudnn {med['paired'] / med['sdpa-cudnn']:.3f}" if "sdpa-cudnn" in med and "paired" in med else ""),
              flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "-grouped" if args.set == "grouped" else ""
    (args.out / f"attention-bwd-paired{tag}-{git_commit()}.json").write_text(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
