"""One GPU call: psi_z inside the layer launches (``CpmlConfig.psi_z_fused``) against the default CPML
configuration on an H100 (fp32, order 8, 512**3 model + 20-point CPML, the zwin interior of
``default_config``): the whole step (``cpml_step_suite``: each configuration first checked against the
float64 torch step, p_next, psi and zeta, from a NaN-poisoned output; then timed) in alternating rounds,
and the GPU time of each launch (profiler, one stream).

* default: ``default_cpml_config`` (a psi launch for z and one for y, psi_x in the x launches);
* psiz: no psi launch for z, the launches with z terms compute psi_z R planes ahead of their march;
  the z faces at 128 registers (cross-compiled for sm90: 116 bytes spilled at 96, none at 128);
* psiz-e: the same with the edges at 168 registers and no budget for the corners (the edges with
  psi_z spill 252-396 bytes at 128).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_psi_z_h100.py OUT_DIR [--rounds 3]

Writes wave-psiz-<commit>.json and prints the step's ms and % of the copy bandwidth of the same run.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit, write_results
from tilecraft.bench.wave import cpml_step_suite
from tilecraft.ops.wave import default_cpml_config

CUDA = torch.device("cuda")
DEFAULT = default_cpml_config(CUDA)
R = DEFAULT.march_regs
PSIZ = replace(DEFAULT, psi_z_fused=True, march_regs=(128,) + R[1:])
PSIZE = replace(PSIZ, march_regs=(128, R[1], R[2], 168, 0))
NAMED = {"default": DEFAULT, "psiz": PSIZ, "psiz-e": PSIZE}


def name_of(cfg: dict | None) -> str:
    if not cfg:
        return ""
    for name, c in NAMED.items():
        if c.as_dict() == cfg:
            return name
    for name, c in NAMED.items():
        if {**c.as_dict(), "streams": None} == {**cfg, "streams": None}:
            return name
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    say = lambda m: print(m, flush=True)  # noqa: E731
    copy = copy2 = 1.0
    info = None
    if cuda:
        from tilecraft.hardware.ceilings import measure_copy_bandwidth
        from tilecraft.hardware.device import detect
        info = detect()
        copy = measure_copy_bandwidth()
    say(f"copy {copy:.3f} TB/s")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"wave-psiz-{git_commit()}.json"
    meta = {"copy_TBps_start": copy, "least_bytes": "16 B per updated point + psi and zeta in the layers",
            "configs": {k: v.as_dict() for k, v in NAMED.items()}}
    configs = tuple(NAMED.values()) if cuda else tuple(replace(c, streams=False) for c in NAMED.values())
    records = cpml_step_suite(args.n, 8, torch.float32, 20 if cuda else 3, configs=configs, device=args.device,
                              copy_tbps=copy, budget_s=args.budget, unfused=False, say=say,
                              parts=configs if cuda else False, rounds=args.rounds)
    if cuda:
        meta["copy_TBps_end"] = copy2 = measure_copy_bandwidth()
        write_results(records, "wave", path, info, meta)
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start / end)")
    print(f"{'variant':<20}{'config':<10}{'round':>6}{'ms':>8}{'%copy':>7}{'GPts/s':>8}{'err':>10}")
    for r in records:
        ok = r.extra.get("ok", True)
        print(f"{r.case.get('variant', ''):<20}{name_of(r.extra.get('config')):<10}{r.extra.get('round', ''):>6}"
              f"{r.extra.get('time_ms', float('nan')):>8.3f}{(r.ours / copy * 100 if ok else float('nan')):>7.1f}"
              f"{r.extra.get('gpts', float('nan')):>8.1f}{r.extra.get('error', float('nan')):>10.2e}"
              + ("" if ok else f"  FAILED {r.extra.get('message', r.extra.get('error'))}"))
        if r.extra.get("parts_ms"):
            print("   parts:", r.extra["parts_ms"])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
