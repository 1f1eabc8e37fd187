"""Two plain time steps a pass (``ops.wave.two_steps_into``, the temporal-blocking prototype, docs/wave.md) against
one step a pass, fp32 order 8, on the updated box of an n**3 model without a boundary (512**3 by default), in one run.

Per step, as the issue's FOM counts it (the least bytes of one step, 4 words a point, over the time of a step):
- ``ring``: the plain step's default on this box (the cp.async ring, ``step_into``);
- ``march``: the plain step on ``wave_step_kernel``, whose loads the prototype shares (z terms through L1);
- ``two steps``: the prototype's pass time over two, in its configurations.

The prototype's p1 and p2 are checked first against two ``step_into`` calls (the ring's default) on the same fields:
p1 and p2 on the box, relative to their largest values (the arithmetic differs in FMA contraction only).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_two_steps.py --out DIR [--n 512] [--rounds 2]

``--rounds 0``: the checks and one march step only, untimed (for a profiler: ``ncu -k regex:wave ...``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from tilecraft.bench.harness import time_rotating, write_results
from tilecraft.bench.wave import _record, _setup, step_traffic
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run in the interpreter (TRITON_INTERPRET=1)")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth() if args.device == "cuda" else float("nan")
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    order, dtype = 8, torch.float32
    dev, measured, _layout, shape, lo, hi, spacing, _gen, (p, pp, m), points = _setup(
        args.n, order, 0, dtype, args.device, 20261130)
    traffic = step_traffic(points, order, p.element_size())
    case = {"model": [args.n] * 3, "grid": list(shape), "order": order, "dtype": "float32"}
    box = tuple(slice(a, b) for a, b in zip(lo, hi))

    # correctness first: the prototype against two steps of the default one-step kernel
    ring = ops.default_config(dtype, order, dev, lo, hi)
    r1, r2 = torch.zeros_like(p), torch.zeros_like(p)
    ops.step_into(p, pp, m, r1, order, spacing, lo, hi, None, "triton", ring)
    ops.step_into(r1, p, m, r2, order, spacing, lo, hi, None, "triton", ring)
    base = ops.two_steps_config(dtype)
    protos = [base, replace(base, block_z=128), replace(base, block_y=16, num_warps=8), replace(base, num_warps=8)]
    p1, p2 = torch.zeros_like(p), torch.zeros_like(p)
    ok = []
    for cfg in protos:
        p1.fill_(float("nan"))
        p1[~_inside(shape, lo, hi, p.device)] = 0.0  # outside the box: the frame's zeros, as the one-step runs leave them
        p2.fill_(float("nan"))
        ops.two_steps_into(pp, p, m, p1, p2, order, spacing, lo, hi, cfg)
        errs = [float((a[box] - b[box]).abs().max() / b[box].abs().max()) for a, b in ((p1, r1), (p2, r2))]
        ok.append(all(e < 1e-5 for e in errs))
        print(f"check {_name(cfg)}: p1 {errs[0]:.2e} p2 {errs[1]:.2e} {'ok' if ok[-1] else 'FAILED'}", flush=True)

    march = ops.march_config(dtype, order, dev)
    if args.rounds == 0:  # the checks and one plain march step, untimed: a run for a profiler (ncu -k regex:wave)
        ops.step_into(p, pp, m, r1, order, spacing, lo, hi, None, "triton", march)
        return 0 if all(ok) else 1
    records = []
    for rnd in range(args.rounds):
        for name, fn, per, cfg in (
                ("ring", lambda _i: ops.step_into(p, pp, m, r1, order, spacing, lo, hi, None, "triton", ring), 1, ring),
                ("march", lambda _i: ops.step_into(p, pp, m, r1, order, spacing, lo, hi, None, "triton", march), 1,
                 march),
                *[(f"two steps {_name(c)}", (lambda _i, c=c: ops.two_steps_into(pp, p, m, p1, p2, order, spacing, lo,
                                                                                  hi, c)), 2, c)
                  for c, good in zip(protos, ok) if good]):
            t = time_rotating(fn, 1, device=dev, budget_s=args.budget, min_runs=5)
            step_ms = t.median_ms / per
            rec = _record({**case, "variant": name, "round": rnd + 1}, traffic, step_ms, t.spread, copy, None,
                          measured, {"config": cfg.as_dict(), "pass_ms": t.median_ms, "steps_a_pass": per})
            records.append(rec)
            print(f"round {rnd + 1} {name:34s} {step_ms:.4f} ms a step  {rec.ours / copy:6.1%} of copy (FOM)",
                  flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.two_steps", args.out / "wave-two-steps.json", info, meta={"copy_TBps": copy})
    return 0


def _inside(shape, lo, hi, device) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    mask[tuple(slice(a, b) for a, b in zip(lo, hi))] = True
    return mask


def _name(cfg) -> str:
    return f"{cfg.block_y}x{cfg.block_x} z{cfg.block_z} w{cfg.num_warps}"


if __name__ == "__main__":
    sys.exit(main())
