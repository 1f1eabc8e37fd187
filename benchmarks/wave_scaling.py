"""Multi-GPU scaling of tilecraft.wave (slabs along z, halos through NCCL). torchrun-able:

    torchrun --nproc-per-node 4 benchmarks/wave_scaling.py --mode weak   --out DIR   # 512^3 per GPU
    torchrun --nproc-per-node 4 benchmarks/wave_scaling.py --mode strong --out DIR   # 512 x 1024 x 1024 in all
    python benchmarks/wave_scaling.py --summarize DIR/*.json                          # efficiency table

Run it with 1, 2 and 4 processes (one command each, e.g. in one device call: a shell loop), then
summarize. Each run: fp32, order 8, CPML width 20, a warm-up run (compiles), then --repeats runs of
--steps timed steps each; a run's time is the slowest rank's time loop (device synchronised), and the
figure is the median of the runs (all are kept in the JSON: on 2 H200s, 30-step loops read 1.45 or
1.95 ms per step for the same code, so short single loops mislead). Weak efficiency = t(1) / t(N); strong
efficiency = t(1) / (N t(N)). Every rank checks its record is finite and equal across ranks.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.distributed as dist


def run(args) -> int:
    from tilecraft import wave
    from tilecraft.bench.harness import git_commit
    from tilecraft.hardware.device import detect
    from tilecraft.wave.distributed import init_from_env

    rank, world, device = init_from_env()
    if args.mode == "weak":
        shape = (args.size * world, args.size, args.size)
    else:
        shape = (args.size, 2 * args.size, 2 * args.size)
    gen = torch.Generator().manual_seed(11)
    # The model stays on the CPU; each rank moves only its slab to its GPU.
    model = wave.Model(torch.rand(shape, generator=gen, dtype=torch.float32).mul_(1000).add_(1500), 10.0)
    c = [(n - 1) * 10.0 / 2 for n in shape]
    src = wave.Source([c], f0=15.0)
    rec = wave.Receivers.line((c[0], c[1], 0.0), (c[0], c[1], 2 * c[2]), 64)
    kw = {"order": 8, "boundary": "pml", "pml_width": 20, "device": device, "cuda_graphs": {"default": None, "on": True, "off": False}[args.graphs],
          "in_place": {"default": None, "on": True, "off": False}[args.in_place]}
    wave.simulate(model, src, rec, 3, **kw)  # warm-up: compiles, NCCL communicators
    runs = []
    for _ in range(args.repeats):
        dist.barrier()
        res = wave.simulate(model, src, rec, args.steps, **kw)
        t = torch.tensor([res.info["loop_seconds"]], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        runs.append(float(t) / args.steps)
    rec_sum = res.record.abs().sum().to(device)
    ref = rec_sum.clone()
    dist.broadcast(ref, 0)
    ok = bool(torch.isfinite(rec_sum)) and bool(torch.equal(rec_sum, ref))
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    if rank == 0:
        lo, hi = wave.Layout(shape, 8, 20, False).updated
        points = math.prod(b - a for a, b in zip(lo, hi))
        step_s = statistics.median(runs)
        info = detect()
        doc = {"suite": "wave-scaling", "mode": args.mode, "ranks": world, "model_shape": list(shape),
               "grid_points_updated": points, "nt": args.steps, "step_ms": step_s * 1e3,
               "step_ms_runs": [x * 1e3 for x in runs],
               "gpts": points / step_s / 1e9, "bytes_per_step": 16 * points,
               "fom_TBps_per_gpu": 16 * points / step_s / 1e12 / world, "records_ok": all(oks),
               "device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
               "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "backend": res.backend, "cuda_graphs": res.info["cuda_graphs"], "in_place": res.info.get("in_place")}
        print(json.dumps(doc))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            tag = ("" if args.graphs == "default" else f"-graphs-{args.graphs}") + (
                "" if args.in_place == "default" else f"-in-place-{args.in_place}")
            (args.out / f"wave-scaling-{args.mode}-{world}{tag}.json").write_text(json.dumps(doc, indent=1))
    dist.destroy_process_group()
    return 0


def summarize(paths: list[str]) -> int:
    docs = [json.loads(Path(p).read_text()) for p in paths]
    def graphed(d: dict) -> bool:  # one rank off and several on is the default: one table
        return d.get("cuda_graphs") == "on" or (d["ranks"] == 1 and d.get("cuda_graphs", "").startswith("off: one rank"))

    for mode in ("weak", "strong"):
        for graphs, in_place in ((g, i) for g in (False, True) for i in (False, True)):
            rows = sorted((d for d in docs if d["mode"] == mode and graphed(d) == graphs
                           and bool(d.get("in_place")) == in_place), key=lambda d: d["ranks"])
            base = next((d for d in rows if d["ranks"] == 1), None)
            if not rows:
                continue
            print(f"{mode} scaling" + (", CUDA graphs" if graphs else "") + (", in place" if in_place else ""))
            print(f"{'GPUs':>5}{'shape':>20}{'ms/step':>10}{'GPts/s':>9}{'efficiency':>12}")
            for d in rows:
                if base is None:
                    eff = float("nan")
                elif mode == "weak":
                    eff = base["step_ms"] / d["step_ms"]
                else:
                    eff = base["step_ms"] / (d["ranks"] * d["step_ms"])
                print(f"{d['ranks']:>5}{'x'.join(map(str, d['model_shape'])):>20}{d['step_ms']:>10.3f}"
                      f"{d['gpts']:>9.2f}{eff * 100:>11.1f}%")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("weak", "strong"), default="weak")
    ap.add_argument("--size", type=int, default=512, help="n: 512**3 per GPU (weak), n x 2n x 2n (strong)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--graphs", choices=("default", "on", "off"), default="default",
                    help="simulate's cuda_graphs: None (on with several ranks), True or False")
    ap.add_argument("--in-place", choices=("default", "on", "off"), default="default",
                    help="simulate's in_place (default None: p_next into a third array where there is room)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--summarize", nargs="+", default=None)
    args = ap.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    if "RANK" not in os.environ:
        print("start it with torchrun (see the docstring), or pass --summarize", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
