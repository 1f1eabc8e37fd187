"""The CPML's reflection in 2D at several layer widths and peak frequencies (CPU, torch backend, float64), as
``tests/wave/test_wave_physics.py::test_pml_reflects_under_one_percent`` measures it: a 1000 m square with the
layer against a square large enough that its walls are not reached in the window. Receivers facing a face
(two), near two corners, at the source. Prints one line per (f0, width): the reflection in % per receiver.

    PYTHONPATH=src python benchmarks/wave_pml_reflection_2d.py [--widths 5,8,10,12,16,20,30] [--f0 15,7.5,4]
"""
from __future__ import annotations

import argparse
import sys

import torch

from tilecraft import wave


def run(n, offset, boundary, width, f0, nt, dt=0.002):
    model = wave.Model.constant((n, n), 1500.0, spacing=10.0, dtype=torch.float64)
    src = wave.Source([[offset + 500.0, offset + 500.0]], f0=f0)
    rec = wave.Receivers([[offset + 500.0, offset + 900.0], [offset + 100.0, offset + 100.0],
                          [offset + 500.0, offset + 500.0], [offset + 900.0, offset + 500.0],
                          [offset + 120.0, offset + 880.0]])
    return wave.simulate(model, src, rec, nt, dt=dt, order=8, boundary=boundary, pml_width=width, backend="torch")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="5,8,10,12,16,20,30")
    ap.add_argument("--f0", default="15,7.5,4")
    args = ap.parse_args()
    for f0 in (float(f) for f in args.f0.split(",")):
        low = f0 < 15
        nt = 1000 if low else 700
        big = run(401 if low else 301, 1500.0 if low else 1000.0, "none", 0, f0, nt)
        for w in (int(x) for x in args.widths.split(",")):
            small = run(101, 0.0, "pml", w, f0, nt)
            r = (small.record - big.record).abs().max(0).values / big.record.abs().max(0).values
            print(f"f0 {f0} Hz, W={w}: reflection % (face, corner, source, face, corner) "
                  f"{[round(float(x) * 100, 3) for x in r]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
