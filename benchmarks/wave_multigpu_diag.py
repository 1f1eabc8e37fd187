"""Why a multi-GPU wave run is slow: per rank, the time loop of ``simulate`` with the default CPML
configuration and variants, the CPU's pace (``progress`` timestamps: when each step's launches were
issued) and the halo exchange alone. torchrun-able:

    torchrun --nproc-per-node 2 benchmarks/wave_multigpu_diag.py --mode strong --out DIR [--variants ...]
    TORCH_NCCL_HIGH_PRIORITY=1 torchrun ...   # NCCL on high-priority streams (torch's switch)

fp32, order 8, CPML 20; weak: 512**3 per GPU, strong: 512 x 1024 x 1024 in all. Variants: ``default``
(the day's defaults), ``one-stream`` (the CPML launches on one stream), ``march`` (the interior on the
L1 z-march kernel, ``march_config``, instead of the register-window zwin that fills every SM), ``graphs``
(``cuda_graphs=True``: interior and edge calls replayed from CUDA graphs), and two
that give wrong fields on purpose, to split the time: ``no-halo`` (the halo exchange skipped) and
``no-edges`` (the planes next to a neighbour skipped, so nothing waits for a halo). Prints
one JSON line per rank and variant, and writes them to DIR/wave-multigpu-diag-<mode>-<ranks>.json.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist

from tilecraft.wave import solver


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("weak", "strong"), default="strong")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--variants", default="default,one-stream,march,default")
    args = ap.parse_args()
    from tilecraft import wave
    from tilecraft.ops.wave import default_cpml_config, march_config
    from tilecraft.wave.distributed import init_from_env
    from tilecraft.wave.solver import _Halo

    rank, world, device = init_from_env()
    n = args.size
    shape = (n * world, n, n) if args.mode == "weak" else (n, 2 * n, 2 * n)
    gen = torch.Generator().manual_seed(11)
    model = wave.Model(torch.rand(shape, generator=gen, dtype=torch.float32).mul_(1000).add_(1500), 10.0)
    c = [(s - 1) * 10.0 / 2 for s in shape]
    src = wave.Source([c], f0=15.0)
    rec = wave.Receivers.line((c[0], c[1], 0.0), (c[0], c[1], 2 * c[2]), 64)
    base = default_cpml_config(device)
    known = {"default": (base, None), "one-stream": (replace(base, streams=False), None),
             "march": (base, march_config(torch.float32, 8, device)), "graphs": (base, None)}
    rows = []
    for i, name in enumerate(args.variants.split(",")):
        if name not in known and name not in ("no-halo", "no-edges"):
            raise SystemExit(f"unknown variant {name!r}: {sorted(known) + ['no-edges', 'no-halo']}")
        cfg, step_cfg = known.get(name, (base, None))
        with _patched(name):
            rows.append(_timed(wave, model, src, rec, args, name, i, cfg, step_cfg, device, rank, world, shape))

    # the halo exchange alone: p and psi_z's halo planes (2R = 8 of each per side), as a step sends them
    if world > 1 and device.type == "cuda":
        lz = shape[0] // world + 16
        ts = [torch.randn((lz,) + shape[1:], device=device) for _ in range(2)]
        h = _Halo(rank, world, 8)
        for _ in range(3):
            h.start(ts)
            h.wait()
        torch.cuda.synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(20):
            h.start(ts)
            h.wait()
        torch.cuda.synchronize(device)
        ex = (time.perf_counter() - t0) / 20
        nbytes = 2 * 8 * shape[1] * shape[2] * 4 * (2 if 0 < rank < world - 1 else 1)
        rows.append({"variant": "halo-exchange-only", "rank": rank, "world": world, "ms": ex * 1e3,
                     "bytes_sent": nbytes, "GBps_sent": nbytes / ex / 1e9})
    allrows = [None] * world
    dist.all_gather_object(allrows, rows)
    if rank == 0:
        flat = [r for rr in allrows for r in rr]
        for r in flat:
            print(json.dumps(r))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            tag = "-hp" if os.environ.get("TORCH_NCCL_HIGH_PRIORITY") == "1" else ""
            (args.out / f"wave-multigpu-diag-{args.mode}-{world}{tag}.json").write_text(json.dumps(
                {"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "rows": flat}, indent=1))
    dist.destroy_process_group()
    return 0


def _patched(name: str):
    """The solver with the halo exchange (``no-halo``) or the edge planes (``no-edges``) left out."""
    stack = contextlib.ExitStack()
    if name == "no-halo":
        stack.enter_context(mock.patch.object(solver._Halo, "start", lambda self, tensors: None))
        stack.enter_context(mock.patch.object(solver._Halo, "wait", lambda self: None))
    elif name == "no-edges":
        real = solver.split_planes
        stack.enter_context(mock.patch.object(solver, "split_planes", lambda *a: (real(*a)[0], [])))
    return stack


def _timed(wave, model, src, rec, args, name, i, cfg, step_cfg, device, rank, world, shape):
    kw = {"order": 8, "boundary": "pml", "pml_width": 20, "device": device, "pml_config": cfg,
          "step_config": step_cfg, "cuda_graphs": name == "graphs"}
    wave.simulate(model, src, rec, 3, **kw)
    dist.barrier()
    stamps = []
    res = wave.simulate(model, src, rec, args.steps, progress=lambda k, _n: stamps.append(time.perf_counter()),
                        **kw)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"variant": name, "run": i, "nccl_high_priority": os.environ.get("TORCH_NCCL_HIGH_PRIORITY", ""),
            "rank": rank, "world": world, "mode": args.mode, "shape": list(shape),
            "slab": res.info["slab"], "step_ms": res.info["loop_seconds"] / args.steps * 1e3,
            "cpu_step_ms_median": statistics.median(gaps) * 1e3, "cpu_step_ms_max": max(gaps) * 1e3,
            "cpu_step_ms_min": min(gaps) * 1e3}


if __name__ == "__main__":
    raise SystemExit(main())
