"""Two (or more) GPUs against one, with the GPU defaults of the day: the slab run through NCCL must give
the one-GPU record and last snapshot bit for bit (issue 7: "results identical to the one-GPU run").

    PYTHONPATH=src python benchmarks/wave_multigpu_check.py OUT_DIR [--ranks 2]

fp32, order 8, the CPML (width 20) on a 3D grid whose interior takes the register-window (zwin) march
and whose x faces take ``x_store_boxes`` (the defaults since 2026-11-25), plus a 2D case; JSON out.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.wave.distributed import simulate_spawned


def case(shape):
    nd = len(shape)
    v = torch.rand(shape, dtype=torch.float32, generator=torch.Generator().manual_seed(3)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[shape[0] * 4.0] + [shape[1] * 5.0] * (nd - 1)], f0=15.0)
    rec = wave.Receivers([[10.0 * i] + [shape[1] * 5.0] * (nd - 1) for i in range(0, shape[0], 4)])
    return model, src, rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for shape, nt in (((160, 128, 136), 40), ((300, 260), 80)):
        model, src, rec = case(shape)
        kw = {"order": 8, "boundary": "pml", "pml_width": 20, "snapshots": [nt - 1]}
        t0 = time.time()
        one = wave.simulate(model, src, rec, nt, backend="triton", device="cuda", **kw)
        t1 = time.time()
        many = simulate_spawned(model, src, rec, nt, ranks=args.ranks, device="cuda", backend="triton", **kw)
        t2 = time.time()
        same_rec = torch.equal(one.record.cpu(), many.record.cpu())
        same_snap = torch.equal(one.snapshots[0][1].cpu(), many.snapshots[0][1].cpu())
        peak = float(one.record.abs().max())
        row = {"shape": list(shape), "nt": nt, "ranks": args.ranks, "record_bit_identical": same_rec,
               "snapshot_bit_identical": same_snap, "record_max": peak, "one_gpu_s": t1 - t0,
               "multi_gpu_s": t2 - t1, "ranks_info": many.info.get("ranks"),
               "max_abs_diff": float((one.record.cpu() - many.record.cpu()).abs().max())}
        rows.append(row)
        print(row, flush=True)
    doc = {"suite": "wave.multigpu-check", "devices": [torch.cuda.get_device_name(i)
                                                      for i in range(torch.cuda.device_count())],
           "torch": torch.__version__, "commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    tag = "".join(ch if ch.isalnum() else "-" for ch in git_commit())
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"wave-multigpu-check-{tag}.json").write_text(json.dumps(doc, indent=1))
    ok = all(r["record_bit_identical"] and r["snapshot_bit_identical"] and r["record_max"] > 0 for r in rows)
    print("bit-identical" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
