"""One GPU: the whole wave step with the CPML (fp32, order 8, 512**3 model + 20-point CPML) with
its psi and layer launches on a second CUDA stream, concurrently with the interior launch
(``CpmlConfig.streams``), against the one-stream default, in one run with the copy ceiling.

Variants (each first checked against the float64 torch step, then timed ``--rounds`` times in turn):

* the default (one stream);
* streams, the side stream at normal or high priority, the interior launched first or last (the x
  faces, whose 32-column tiles rewrite interior columns, run after the interior);
* x tiles of 8 columns from multiples of 4 (x faces and the psi x launch: 24 columns computed for
  the 24-column layer instead of 32) with the interior split so no tile passes its box
  (``x_align``, ``split_interior``): one stream (with the GPU time of each launch), and on two
  streams where nothing waits for the interior;
* the default and the fastest-expected stream variants replayed from CUDA graphs;
  (run 1, 0465214);
* ``simulate`` per step with the default and a stream variant (``--simulate``).

* run 2: psi_x computed inside the x layer launches (``psi_x_fused``, no psi launch for x), with
  the x faces' register budget at 80 or 96, on one and two streams.

    PYTHONPATH=src python benchmarks/wave_streams_bench.py [--run 2] [--rounds 3] [--out DIR] [--simulate]

Writes wave-streams.json (Records) and prints the medians over the rounds.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch

import wave_rounds
from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, cpml_step_suite, simulate_suite
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.ops.wave import MARCH_REGS, MARCH_TILES, PSI_TILES

D = CPML_CONFIGS[-1]  # the default before this round (one stream, a psi launch for x)
X8_TILES = MARCH_TILES[:2] + ((32, 8, 4, 2),) + MARCH_TILES[3:]
X8 = replace(D, x_align=4, split_interior=True, march_tiles=X8_TILES, psi_tiles=PSI_TILES[:2] + ((32, 8, 8, 2),))
X8W = replace(X8, march_tiles=MARCH_TILES[:2] + ((64, 8, 4, 4),) + MARCH_TILES[3:])
HI = replace(D, streams=True, side_priority=-1)
FX80 = replace(D, psi_x_fused=True, march_regs=MARCH_REGS[:2] + (80,) + MARCH_REGS[3:])
FX96 = replace(FX80, march_regs=MARCH_REGS[:2] + (96,) + MARCH_REGS[3:])
RUN1 = {  # run 1 (0465214)
    "default": D,
    "streams": replace(D, streams=True),
    "streams hi": HI,
    "streams hi, psi first": replace(HI, interior_first=False),
    "x8 split": X8,
    "x8 split streams": replace(X8, streams=True),
    "x8 split streams hi": replace(X8, streams=True, side_priority=-1),
    "x8w split streams hi": replace(X8W, streams=True, side_priority=-1),
}
RUN2 = {  # run 2: psi_x inside the x layer launches
    "default": D,
    "streams hi": HI,
    "psi_x fused r80": FX80,
    "streams hi psi_x fused r80": replace(FX80, streams=True, side_priority=-1),
    "streams hi psi_x fused r96": replace(FX96, streams=True, side_priority=-1),
}
RUNS = {1: (RUN1, ("default", "streams hi", "x8 split streams hi"), X8, ("streams hi", "x8 split streams hi")),
        2: (RUN2, ("default", "streams hi", "streams hi psi_x fused r80"), FX80,
            ("streams hi", "streams hi psi_x fused r80"))}
VARIANTS = dict(RUN1) | dict(RUN2)


def _label(cfg) -> str:
    return next((k for k, v in VARIANTS.items() if v == cfg), str(cfg))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.4)
    ap.add_argument("--simulate", action="store_true")
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--run", type=int, default=2, choices=sorted(RUNS))
    args = ap.parse_args()
    variants, graphed, parts, simulated = RUNS[args.run]
    started = wave_rounds.start()
    if started is None:
        return 2
    info, copy = started
    say = wave_rounds.say
    records = cpml_step_suite(args.n, 8, torch.float32, 20, configs=tuple(variants.values()), device="cuda",
                              copy_tbps=copy, budget_s=args.budget, unfused=False, say=say,
                              graphs=[variants[k] for k in graphed], parts=parts, rounds=args.rounds)
    torch.cuda.empty_cache()
    for key in graphed:  # when each kernel of one step runs (two streams overlap)
        records += timeline_records(variants[key], key, copy, args.n, say)
    if args.simulate:
        records += simulate_suite(args.n, 8, torch.float32, 20, nt=args.nt, device="cuda", copy_tbps=copy,
                                  backends=("triton",), boundary="pml", say=say, rounds=args.rounds,
                                  pml_configs=(None, *(variants[k] for k in simulated)))
    copy2 = measure_copy_bandwidth()
    path = write_results(records, "wave", (args.out / "wave-streams.json") if args.out else None, info,
                         meta={"copy_TBps_start": copy, "copy_TBps_end": copy2, "variants": list(variants), "run": args.run,
                               "simulate_pml_configs": ["default", *simulated],
                               "least_bytes": "cpml-*: 16 B per updated point + 16 B per point of each axis's layers; "
                                              "simulate-*, part-*: 16 B per updated point"})
    groups: dict[str, list] = {}
    for r in records:
        v = r.case.get("variant")
        if v in ("cpml-fused", "cpml-graph"):
            key = _label(CpmlConfigOf(r)) + (" [graphs]" if v == "cpml-graph" else "")
        elif v == "timeline":
            key = f"timeline (GPU span) {r.case.get('label')}"
        elif v.startswith("simulate"):
            key = f"simulate, pml config {r.extra.get('pml_config')}"
        else:
            key = v
        groups.setdefault(key, []).append(r)
    wave_rounds.print_groups(groups, copy, copy2, key_width=40, rounds_width=24, gpts=True)
    print(f"wrote {path}")
    return 0


def timeline_records(cfg, key: str, copy: float, n: int, say) -> list:
    """One record (variant "timeline") with the kernels' (name, start us, end us) of one step."""
    from tilecraft.bench.wave import _copy_axes, _cpml_state, _record, _setup, cpml_traffic, launch_timeline
    from tilecraft.ops import wave as ops

    dev, measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(n, 8, 20, torch.float32, "cuda",
                                                                                  20261122)
    axes, layer_points = _cpml_state(layout, shape, torch.float32, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    out = torch.empty_like(pp)
    tl = launch_timeline(lambda: ops.cpml_step(p, pp, m, out, 8, spacing, lo, hi, axes, "triton", None, cfg))
    if tl is None:
        return []
    say(f"timeline {key}: " + ", ".join(f"{name[:18]} {s:.0f}-{e:.0f}" for name, s, e in tl))
    span = max(e for _, _, e in tl) - min(s for _, s, _ in tl)
    traffic = cpml_traffic(points, layer_points, 8, 4)
    return [_record({"variant": "timeline", "label": key}, traffic, span / 1e3, 0.0, copy, None, measured,
                    {"timeline_us": tl, "config": cfg.as_dict()})]


def CpmlConfigOf(r):  # noqa: N802 - the record's config back as a CpmlConfig
    from tilecraft.ops.wave import CpmlConfig

    d = dict(r.extra["config"])
    for k in ("narrow", "march_regs"):
        d[k] = tuple(d[k])
    for k in ("march_tiles", "psi_tiles"):
        d[k] = tuple(tuple(t) for t in d[k])
    return CpmlConfig(**d)


if __name__ == "__main__":
    raise SystemExit(main())
