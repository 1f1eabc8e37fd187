"""The CPML's reflection in 3D at several layer widths (GPU, fp32, order 8): the record of a 1000 m cube with
the layer against the record of a 3000 m cube whose walls the wave does not reach in the window, the
difference being the reflected wave (as ``tests/wave/test_wave_physics.py`` measures it in 2D on the CPU).
Receivers 100 m from the model's edge facing a face, near an edge and near a corner, and at the source.

    PYTHONPATH=src python benchmarks/wave_pml_reflection.py [--widths 8,10,12,20] [--f0 15,4] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.hardware.device import detect

RECEIVERS = {"face": (500.0, 500.0, 900.0), "edge": (500.0, 100.0, 100.0), "corner": (100.0, 100.0, 100.0),
             "source": (500.0, 500.0, 500.0)}


def run(n: int, offset: float, boundary: str, width: int, f0: float, nt: int, dt: float):
    model = wave.Model.constant((n, n, n), 1500.0, spacing=10.0, dtype=torch.float32)
    src = wave.Source([[offset + 500.0] * 3], f0=f0)
    rec = wave.Receivers([[offset + c for c in xyz] for xyz in RECEIVERS.values()])
    return wave.simulate(model, src, rec, nt, dt=dt, order=8, boundary=boundary, pml_width=width, device="cuda")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="8,10,12,20")
    ap.add_argument("--f0", default="15,4")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    dt = 0.0015
    rows = []
    for f0 in (float(f) for f in args.f0.split(",")):
        nt = int(1.4 / dt) if f0 >= 10 else int(1.9 / dt)
        # the big cube's walls: 1000 m beyond the small cube on every side (1500 m at low frequency)
        off = 1000.0 if f0 >= 10 else 1500.0
        big = run(int((1000 + 2 * off) / 10) + 1, off, "none", 0, f0, nt, dt).record.double().cpu()
        scale = big.abs().max(0).values
        for w in (int(x) for x in args.widths.split(",")):
            small = run(101, 0.0, "pml", w, f0, nt, dt).record.double().cpu()
            refl = ((small - big).abs().max(0).values / scale).tolist()
            rows.append({"f0": f0, "pml_width": w, "nt": nt, "dt": dt,
                         "reflection_pct": {k: 100 * r for k, r in zip(RECEIVERS, refl)}})
            print(f"f0 {f0} Hz, W={w}: " + ", ".join(f"{k} {100 * r:.3f}%" for k, r in zip(RECEIVERS, refl)), flush=True)
        rigid = run(101, 0.0, "none", 0, f0, nt, dt).record.double().cpu()
        walls = ((rigid - big).abs().max(0).values / scale).tolist()
        rows.append({"f0": f0, "pml_width": 0, "rigid_walls": True, "reflection_pct": {k: 100 * r for k, r in zip(RECEIVERS, walls)}})
        print(f"f0 {f0} Hz, rigid walls (the check can fail): " + ", ".join(f"{k} {100 * r:.1f}%" for k, r in zip(RECEIVERS, walls)), flush=True)
    info = detect()
    out = {"device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
           "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wave-pml-reflection-3d.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
