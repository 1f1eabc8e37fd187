"""One GPU call: the wave step's interior as the stencil's register-window march (``WaveConfig(kernel="zwin")``,
``wave_zwin_kernel``) against the L1 z-march default, fp32 order 8, 512**3 model + 20-point CPML.

1. The plain step over the whole updated box (552**3): the default and each zwin configuration, each
   checked against the float64 torch step first (``step_suite``), with the torch step as the peer.
2. The whole step with the CPML (``cpml_step_suite``, the default CPML configuration) with the march
   interior (``march_config``, the default before zwin) and with the fastest zwin configuration of
   part 1, in alternating rounds, plus the GPU time of each launch (profiler) for both. (The run at
   1852e69 passed None, then the march default, for the first.)

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_zwin.py OUT_DIR [--rounds 2]

Writes wave-zwin-<commit>.json (Records) and prints a table of % of the copy bandwidth measured in the
same run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit, write_results
from tilecraft.bench.wave import cpml_step_suite, step_suite, table
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.wave import WaveConfig, march_config

Z = dict(kernel="zwin", nontemporal=True, l1_prefetch=2)
ZWIN = (WaveConfig(32, 64, 64, 16, loop_unroll=8, **Z), WaveConfig(32, 64, 64, 16, loop_unroll=4, **Z),
        WaveConfig(16, 64, 64, 8, loop_unroll=8, maxnreg=168, **Z),
        WaveConfig(32, 64, 64, 16, loop_unroll=8, **{**Z, "nontemporal": False}))


def label(cfg: dict | None) -> str:
    if not cfg:
        return "default"
    text = f"{cfg['kernel']} {cfg['block_y']}x{cfg['block_x']}x{cfg['block_z']} w{cfg['num_warps']}"
    text += f" u{cfg['loop_unroll']}" if cfg.get("loop_unroll", 1) > 1 else ""
    text += f" l1p{cfg['l1_prefetch']}" if cfg.get("l1_prefetch") else ""
    text += f" r{cfg['maxnreg']}" if cfg.get("maxnreg") else ""
    return text + (" nt" if cfg.get("nontemporal") else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.7)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    say = lambda m: print(m, flush=True)  # noqa: E731
    info = detect()
    copy = measure_copy_bandwidth()
    say(f"copy {copy:.3f} TB/s")
    default = march_config(torch.float32, 8, torch.device("cuda"))  # the march default before zwin
    records = step_suite(args.n, 8, torch.float32, 20, configs=(default, *ZWIN), copy_tbps=copy, budget_s=args.budget,
                         say=say)
    torch.cuda.empty_cache()
    fused = [r for r in records if r.case.get("variant") == "fused" and r.extra.get("ok")
             and r.extra["config"]["kernel"] == "zwin"]
    best = WaveConfig(**max(fused, key=lambda r: r.ours).extra["config"]) if fused else None
    for rnd in range(args.rounds):
        for step_cfg in (default, best) if best else (default,):
            say(f"cpml step, interior {label(step_cfg and step_cfg.as_dict())}, round {rnd}")
            recs = cpml_step_suite(args.n, 8, torch.float32, 20, copy_tbps=copy, budget_s=args.budget, unfused=False,
                                   say=say, parts=rnd == 0, step_config=step_cfg)
            for r in recs:
                r.extra["round"] = rnd
                r.extra["step_config"] = step_cfg and step_cfg.as_dict()
            records += [r for r in recs if r.case.get("variant") != "cpml-torch" or rnd == 0]
            torch.cuda.empty_cache()
    copy2 = measure_copy_bandwidth()
    args.out.mkdir(parents=True, exist_ok=True)
    path = write_results(records, "wave", args.out / f"wave-zwin-{git_commit()}.json", info,
                         meta={"copy_TBps_start": copy, "copy_TBps_end": copy2,
                               "least_bytes": "16 B per updated point; cpml-* records add psi and zeta in the layers"})
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start / end)")

    def interior(r):
        return label(r.extra.get("step_config") if r.case.get("variant", "").startswith(("cpml", "part"))
                     else r.extra.get("config"))
    print("\n".join(table(records, copy, [("interior", 34, interior),
                                           ("regs", 6, lambda r: r.extra.get("registers", "")),
                                           ("spill", 6, lambda r: r.extra.get("spills", ""))])))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
