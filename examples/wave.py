"""tilecraft.wave in a few lines: a shot over a two-layer model, checked against the analytic
solution first, then modelled with a CPML and a free surface.

    python examples/wave.py                          # GPU if there is one, else the CPU (torch step)
    TRITON_INTERPRET=1 python examples/wave.py       # CPU, the Triton step in the interpreter (part 1)

Prints the error against the analytic 2D Green's function, the PML's reflection, and the record's
shape; writes nothing.
"""
from __future__ import annotations

import os

import numpy as np
import torch

from tilecraft import wave
from tilecraft.reference.wave import green_2d


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    interpreted = device == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
    # The interpreter pays per kernel program: there the Triton step runs on a small grid (part 1) and
    # the larger runs take the torch step, which simulate() would otherwise pick on a CPU anyway.
    big_backend = "torch" if interpreted else "auto"
    h, v, f0 = 10.0, 1500.0, 15.0

    # 1. Homogeneous medium against the analytic 2D Green's function (receiver 150 m from the source).
    n = 31 if interpreted else 121
    model = wave.Model.constant((n, n), v, spacing=h, dtype=torch.float64, device=device)
    c = (n - 1) * h / 2
    dt = 2e-3 if interpreted else 1e-3  # both under the CFL limit (3.9 ms here)
    res = wave.simulate(model, wave.Source([[c, c]], f0=f0), wave.Receivers([[c, c + 150.0]]), int(0.26 / dt),
                        dt=dt, order=8, boundary="pml", pml_width=10)
    g = green_2d(150.0, res.times.numpy(), f0, 1.5 / f0, v)
    err = np.abs(res.record[:, 0].numpy() - g).max() / np.abs(g).max()
    print(f"[{res.backend} step on {device}] homogeneous, order 8: error against the analytic solution {err:.2%}")

    # 2. What the PML reflects: a receiver 50 m inside the model's edge, against the same shot in a
    #    domain three times as wide whose walls are not reached in the time window.
    n = 121
    model = wave.Model.constant((n, n), v, spacing=h, dtype=torch.float64, device=device)
    big = wave.Model.constant((3 * n, 3 * n), v, spacing=h, dtype=torch.float64, device=device)
    c, off, nt = (n - 1) * h / 2, n * h, 900
    small = wave.simulate(model, wave.Source([[c, c]], f0=f0), wave.Receivers([[c, 2 * c - 50.0]]), nt, dt=1e-3,
                          order=8, boundary="pml", pml_width=10, backend=big_backend)
    ref = wave.simulate(big, wave.Source([[c + off, c + off]], f0=f0), wave.Receivers([[c + off, 2 * c + off - 50.0]]),
                        nt, dt=1e-3, order=8, boundary="none", backend=big_backend)
    refl = float((small.record - ref.record).abs().max() / ref.record.abs().max())
    print(f"PML (10 points): reflected {refl:.3%} of the direct wave's amplitude")

    # 3. A two-layer model with a free surface: a line of receivers, one trace per receiver.
    layered = wave.Model.layered((n, 2 * n), [1500.0, 2500.0], [(n - 1) * h / 2], spacing=h, device=device)
    src = wave.Source([[20.0, (2 * n - 1) * h / 2]], f0=f0)
    line = wave.Receivers.line((10.0, 0.0), (10.0, (2 * n - 1) * h), 2 * n)
    shot = wave.simulate(layered, src, line, 600, order=8, boundary="pml", pml_width=10, free_surface=True,
                         backend=big_backend)
    print(f"layered shot: record {tuple(shot.record.shape)} (time steps x receivers), dt {shot.dt * 1e3:.3f} ms "
          f"({shot.info['courant']:.2f} of the CFL limit), max |p| {float(shot.record.abs().max()):.3e}")


if __name__ == "__main__":
    main()
