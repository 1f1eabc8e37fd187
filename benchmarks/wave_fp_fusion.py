"""One GPU call: does FMA contraction explain the 3D slab run's last-bit differences from one GPU, and
what does turning it off cost?

1. With two or more GPUs: the cases of ``wave_multigpu_check.py`` (3D 160x128x136 and 2D 300x260, fp32,
   order 8, CPML 20, GPU defaults) one GPU against ``--ranks`` GPUs, with the compiler's FMA contraction
   on (Triton's default), off in every wave kernel (``TILECRAFT_WAVE_NO_FP_FUSION=all``: every operation
   rounds on its own) and off in one kind of kernel at a time (``VARIANTS``).
2. On GPU 0: the whole CPML step at 512**3 (``cpml_step_suite``, checked against float64 first) with
   contraction on and off in alternating rounds, against the copy bandwidth measured in the same run.

    PYTHONPATH=src python benchmarks/wave_fp_fusion.py OUT_DIR [--ranks 2] [--rounds 3] [--n 512]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wave_multigpu_check import case  # noqa: E402

from tilecraft import wave  # noqa: E402
from tilecraft.bench.harness import git_commit, write_results  # noqa: E402
from tilecraft.bench.wave import cpml_step_suite, table  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import wave as ops  # noqa: E402
from tilecraft.wave.distributed import simulate_spawned  # noqa: E402


# which kernels compile without FMA contraction ("" none, "all", or names)
# (run 2 at c2918dd found the culprit: contraction off in wave_zwin_kernel alone made the slabs identical)
VARIANTS = tuple(os.environ.get("WAVE_FP_FUSION_VARIANTS", ",all").split(",")) if "WAVE_FP_FUSION_VARIANTS" in os.environ \
    else ("", "all")


def set_fusion(off: str) -> None:
    os.environ["TILECRAFT_WAVE_NO_FP_FUSION"] = off  # the spawned ranks read it
    ops.NO_FP_FUSION = off


def identity(ranks: int, say) -> list[dict]:
    rows = []
    for on in VARIANTS:
        set_fusion(on)
        for shape, nt in (((160, 128, 136), 40),):
            model, src, rec = case(shape)
            kw = {"order": 8, "boundary": "pml", "pml_width": 20, "snapshots": [nt - 1]}
            one = wave.simulate(model, src, rec, nt, backend="triton", device="cuda", **kw)
            many = simulate_spawned(model, src, rec, nt, ranks=ranks, device="cuda", backend="triton", **kw)
            d = (one.snapshots[0][1].cpu() - many.snapshots[0][1].cpu()).abs()
            row = {"no_fp_fusion": on, "shape": list(shape), "nt": nt, "ranks": ranks,
                   "record_bit_identical": torch.equal(one.record.cpu(), many.record.cpu()),
                   "snapshot_bit_identical": torch.equal(one.snapshots[0][1].cpu(), many.snapshots[0][1].cpu()),
                   "record_max": float(one.record.abs().max()),
                   "record_max_abs_diff": float((one.record.cpu() - many.record.cpu()).abs().max()),
                   "snapshot_max": float(one.snapshots[0][1].abs().max()), "snapshot_max_abs_diff": float(d.max()),
                   "snapshot_points_differing": int((d > 0).sum())}
            if d.max() > 0 and len(shape) == 3:  # where: the planes (depth) holding differences
                planes = (d > 0).flatten(1).any(1).nonzero().flatten().tolist()
                row["snapshot_differing_planes"] = planes[:40] + (["..."] if len(planes) > 40 else [])
            rows.append(row)
            say(json.dumps(row))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args()
    say = lambda m: print(m, flush=True)  # noqa: E731
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "".join(ch if ch.isalnum() else "-" for ch in git_commit())
    doc = {"suite": "wave.fp-fusion", "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
           "torch": torch.__version__, "commit": tag, "date": time.strftime("%Y-%m-%d")}
    if torch.cuda.device_count() >= args.ranks:
        doc["identity"] = identity(args.ranks, say)
        (args.out / f"wave-fp-fusion-identity-{tag}.json").write_text(json.dumps(doc, indent=1))
    if args.skip_timing:
        return 0
    info = detect()
    copy = measure_copy_bandwidth()
    say(f"copy {copy:.3f} TB/s")
    cfg = ops.default_cpml_config(torch.device("cuda"))
    records = []
    for rnd in range(args.rounds):
        for on in VARIANTS:
            set_fusion(on)
            for r in cpml_step_suite(args.n, 8, torch.float32, 20, configs=(cfg,), copy_tbps=copy,
                                     budget_s=args.budget, unfused=False, say=say, parts=False, rounds=1):
                if r.case.get("variant") == "cpml-torch" and (rnd or on):
                    continue  # the torch peer once is enough
                r.extra["no_fp_fusion"] = on
                r.extra["round"] = rnd
                records.append(r)
            torch.cuda.empty_cache()
    copy2 = measure_copy_bandwidth()
    path = args.out / f"wave-fp-fusion-{tag}.json"
    write_results(records, "wave", path, info, {"copy_TBps_start": copy, "copy_TBps_end": copy2})
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start / end)")
    print("\n".join(table(records, copy, [("no fusion in", 42, lambda r: r.extra.get("no_fp_fusion", "")),
                                           ("round", 6, lambda r: r.extra.get("round", "")),
                                           ("err", 10, lambda r: f"{r.extra.get('error', float('nan')):.2e}")])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
