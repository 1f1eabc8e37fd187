"""One GPU: the wave step (fp32, order 8, 512**3 model + the default CPML width, 12 points since 2026-11-28), measured in one run against
the copy ceiling and the plain torch step:

* the fused step without absorbing terms (``step_suite``: default configuration, sponge variant,
  torch step);
* the whole step with the CPML (``cpml_step_suite``): ``cpml_step`` (interior launch + the layers'
  launches) per CPML kernel configuration, the previous unfused path (step + slab kernels) and the
  torch step with the same CPML; least bytes = 16 B/pt + psi, zeta read and written in the layers;
* whole ``simulate`` steps (sources and receivers included), without a boundary and with the CPML.

    PYTHONPATH=src python benchmarks/wave_bench.py [--n 512] [--out DIR] [--all-step-configs]

Writes wave-step.json (Records: device, versions, commit, date, ours, peer, ceiling, ratio; extra has
flops, bytes, time_ms, gpts) and prints a table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import (
    GPU_CONFIGS,
    cpml_step_suite,
    simulate_suite,
    step_suite,
)
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.wave.boundaries import DEFAULT_WIDTH, Layout

W = DEFAULT_WIDTH["pml"]  # the layer width simulate uses by default
from tilecraft.ops.wave import default_config


def _config_text(r) -> str:
    cfg = r.extra.get("config") or {}
    if not cfg:
        return f"{r.case.get('boundary', '')} W={r.case.get('pml_width')}"
    text = f"{cfg['block_y']}x{cfg['block_x']}x{cfg['block_z']} w{cfg['num_warps']}"
    text += f" r{cfg['maxnreg']}" if cfg.get("maxnreg") else ""
    text += " nt" if cfg.get("nontemporal") else ""
    text += " loop" if cfg.get("unroll") is False else ""
    text += " by-axes" if cfg.get("by_axes") else ""
    text += " 2ph" if cfg.get("two_phase") else ""
    if cfg.get("march"):
        n = cfg.get("narrow") or ()
        text = f"march {text} n{'x'.join(map(str, n))}" + (" regs" if cfg.get("march_regs") else "")
        text += " psi-march" if cfg.get("psi_tiles") else ""
        text += " int-1st" if cfg.get("interior_first") else ""
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--order", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--all-step-configs", action="store_true", help="sweep GPU_CONFIGS for the plain step")
    ap.add_argument("--skip-simulate", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    info = detect()
    say = lambda m: print(m, flush=True)
    say("copy bandwidth")
    copy = measure_copy_bandwidth()
    say(f"  {copy:.3f} TB/s")
    dev = torch.device("cuda")
    # the plain step's default on its box (the ring on sm90 where the box is large enough: default_config)
    lo, hi = Layout((args.n,) * 3, args.order, W, False).updated
    step_cfgs = GPU_CONFIGS if args.all_step_configs else (default_config(torch.float32, args.order, dev, lo, hi),)
    records = step_suite(args.n, args.order, torch.float32, W, configs=step_cfgs, device="cuda", copy_tbps=copy,
                         budget_s=args.budget, say=say)
    torch.cuda.empty_cache()
    records += cpml_step_suite(args.n, args.order, torch.float32, W, device="cuda", copy_tbps=copy,
                               budget_s=args.budget, say=say)
    torch.cuda.empty_cache()
    if not args.skip_simulate:
        for boundary, width in (("none", 0), ("pml", W)):
            records += simulate_suite(args.n, args.order, torch.float32, width, nt=50, device="cuda", copy_tbps=copy,
                                      backends=("triton",) if boundary == "none" else ("triton", "torch"),
                                      boundary=boundary, say=say)
            torch.cuda.empty_cache()
    copy2 = measure_copy_bandwidth()
    path = write_results(records, "wave", (args.out / "wave-step.json") if args.out else None, info,
                         meta={"copy_TBps_start": copy, "copy_TBps_end": copy2,
                               "least_bytes": "16 B per updated point (read p, p_prev, m; write p_next), fp32; "
                                              "cpml-* records add 16 B per point of each axis's layers "
                                              "(psi, zeta read and written)",
                               "points": "every point R or more from the faces of the padded grid "
                                         "(model + PML + R halo per side)"})
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start/end)")
    print(f"{'variant':<16}{'config':<36}{'ms':>9}{'TB/s':>8}{'%copy':>7}{'GPts/s':>8}{'x torch':>9}{'regs':>6}")
    for r in records:
        ok = r.extra.get("ok", True)
        tp = r.extra.get("ratio_to_peer")
        print(f"{r.case.get('variant', ''):<16}{_config_text(r):<36}{r.extra['time_ms']:>9.3f}{r.ours:>8.3f}"
              f"{(r.ours / copy * 100 if ok else float('nan')):>7.1f}{r.extra['gpts']:>8.2f}"
              f"{(tp if tp else float('nan')):>9.2f}{r.extra.get('registers', '')!s:>6}"
              + ("" if ok else f"  FAILED {r.extra.get('message', r.extra.get('error'))}"))
    print(f"wrote {path}")

    def best(variant):
        return max((r.ours / copy * 100 for r in records if r.case.get("variant") == variant and r.extra.get("ok")),
                   default=None)
    print(json.dumps({"best_fused_pct_copy": best("fused"), "best_cpml_step_pct_copy": best("cpml-fused"),
                      "best_march_pct_copy": max((r.ours / copy * 100 for r in records if r.case.get("variant") ==
                                                  "cpml-fused" and r.extra.get("ok") and
                                                  (r.extra.get("config") or {}).get("march")), default=None),
                      "unfused_cpml_step_pct_copy": best("cpml-unfused")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
