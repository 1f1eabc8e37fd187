"""Two GPUs against one where each rank's slab takes the cp.async ring interior (``cpml_interior_config``: 256+
planes a slab, 91+ tiles of 32 x 64): the slab run through NCCL must give the one-GPU record and last snapshot bit
for bit. fp32, order 8, the default CPML (12 points), the GPU defaults of the day.

    PYTHONPATH=src python benchmarks/wave_multigpu_ring_check.py [--shape 560,384,768] [--steps 12]
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from tilecraft import wave
from tilecraft.ops import wave as ops
from tilecraft.wave.distributed import simulate_spawned


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="560,384,768")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split(","))
    v = torch.rand(shape, dtype=torch.float32, generator=torch.Generator().manual_seed(3)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[shape[0] * 4.0, shape[1] * 5.0, shape[2] * 5.0]], f0=15.0)
    rec = wave.Receivers([[10.0 * i, shape[1] * 5.0, shape[2] * 5.0] for i in range(0, shape[0], 8)])
    kw = {"order": 8, "boundary": "pml", "snapshots": [args.steps - 1]}
    slab = (shape[0] // args.ranks, shape[1], shape[2])
    print(f"slab {slab}: the ring interior on a rank's slab: "
          f"{ops.cpml_interior_config(torch.float32, 8, torch.device('cuda'), (4, 4, 4), tuple(s - 4 for s in slab)).kernel}",
          flush=True)
    t0 = time.time()
    one = wave.simulate(model, src, rec, args.steps, backend="triton", device="cuda", **kw)
    two = simulate_spawned(model, src, rec, args.steps, ranks=args.ranks, device="cuda", backend="triton", **kw)
    same_rec = torch.equal(one.record, two.record)
    same_snap = len(one.snapshots) == len(two.snapshots) and all(
        a[0] == b[0] and torch.equal(a[1], b[1]) for a, b in zip(one.snapshots, two.snapshots))
    print(f"record max {float(one.record.abs().max()):.3g}, snapshot max {float(one.snapshots[-1][1].abs().max()):.3g}; "
          f"bit-identical: record {same_rec}, snapshots {same_snap} ({time.time() - t0:.0f} s)", flush=True)
    return 0 if same_rec and same_snap and float(one.snapshots[-1][1].abs().max()) > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
