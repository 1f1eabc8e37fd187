"""Would a lagged CPML absorb as well? A physics experiment on the CPU (torch backend, float64, 2D), no kernel.

The GPU's CPML step spends two launches a step on psi_new = b psi_old + a dp/dx over the z and y layers, because
the step's d(psi_new)/dx needs psi_new at the R neighbours of each point (Pasalic & McGarry 2010, as
``tilecraft.reference.wave.cpml_terms_torch`` computes it). In the *lagged* form (as Deepwave's scalar propagator
writes it) that derivative uses psi_old instead:

    D = d(psi_old)/dx,  zeta = b zeta + a (d2p/dx2 + D),  p_next += m (D + zeta),  psi_new = b psi_old + a dp/dx,

so each point reads psi_old at its neighbours and writes psi_new at itself: one pass, no psi launch. It is a
different discretisation (psi one step behind in D), so before any kernel is built this script measures what it
absorbs: the reflection as ``tests/wave/test_wave_physics.py::test_pml_reflects_under_one_percent`` measures it
(a 1000 m square with the layer against a domain large enough that its walls are not reached; receivers facing a
face, in a corner, at the source, near an edge), at two widths and two frequencies, both forms; and whether the
energy left in the domain after the wave has gone stays gone over a long run (no late growth).

    PYTHONPATH=src python benchmarks/wave_pml_lagged_cpu.py [--out DIR]

The lagged form is swapped in for the torch backend's ``cpml_terms_torch`` for its runs only (monkeypatched in this
process); the library is unchanged.
"""
from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.ops import wave as ow
from tilecraft.reference.wave import _box, apply_terms, cpml_regions, psi_points

REFERENCE_TERMS = ow.cpml_terms_torch


def cpml_terms_lagged(p, m, out, psi_old, psi_new, zeta, a, b, axis, order, h, lo, hi, regions) -> None:
    """``cpml_terms_torch``'s arguments and stores, with D = d(psi_old)/dx (psi_old at the neighbours as stored)
    and psi_new = b psi_old + a dp/dx at the box's points only."""
    r, n = order // 2, p.shape[axis]
    for k, origin, s0, s1, slo, shi, nlo, nhi in cpml_regions(axis, r, lo, hi, regions, psi_old.shape[0]):
        old = psi_old[k][_box(nlo, nhi, axis, -origin)]
        _tlo, _thi, pbox = apply_terms(p, m, out, zeta[k], old, a, b, axis, order, h, s0, s1, slo, shi, origin)
        new = psi_old[k][pbox].clone()
        i0, i1 = max(s0, r), min(s1, n - r)  # where p's neighbours exist (a = 0 elsewhere)
        if i0 < i1:
            sl = tuple(slice(i0 - s0, i1 - s0) if d == axis else slice(None) for d in range(p.dim()))
            new[sl] = psi_points(p, psi_old[k], a, b, axis, order, h, i0, i1, lo, hi, origin)
        psi_new[k][pbox] = new


def run(n, offset, boundary, width, f0, nt, dt=0.002, order=8, lagged=False, snapshots=0):
    ow.cpml_terms_torch = cpml_terms_lagged if lagged else REFERENCE_TERMS
    try:
        model = wave.Model.constant((n, n), 1500.0, spacing=10.0, dtype=torch.float64)
        src = wave.Source([[offset + 500.0, offset + 500.0]], f0=f0)
        rec = wave.Receivers([[offset + 500.0, offset + 900.0], [offset + 100.0, offset + 100.0],
                              [offset + 500.0, offset + 500.0], [offset + 900.0, offset + 300.0]])
        kw = {"snapshots": snapshots} if snapshots else {}
        return wave.simulate(model, src, rec, nt, dt=dt, order=order, boundary=boundary, pml_width=width,
                             backend="torch", **kw)
    finally:
        ow.cpml_terms_torch = REFERENCE_TERMS


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--widths", default="12,20")
    ap.add_argument("--freqs", default="15,4")
    ap.add_argument("--long-nt", type=int, default=6000)
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    for f0 in [float(v) for v in args.freqs.split(",")]:
        nt = 700 if f0 >= 10 else 900
        big = run(301, 1000.0, "none", 0, f0, nt).record
        for width in [int(v) for v in args.widths.split(",")]:
            for lagged in (False, True):
                small = run(101, 0.0, "pml", width, f0, nt, lagged=lagged).record
                refl = ((small - big).abs().max(0).values / big.abs().max(0).values).tolist()
                rows.append({"f0": f0, "width": width, "form": "lagged" if lagged else "reference", "nt": nt,
                             "reflection_by_receiver": refl})
                print(f"{f0:4.0f} Hz W={width:2d} {'lagged   ' if lagged else 'reference'} reflection "
                      + " ".join(f"{100 * v:.3f}%" for v in refl) + f"  ({time.time() - t0:.0f}s)", flush=True)
    # energy left in the domain long after the wave has gone (the 1000 m square, default width)
    energy = []
    for lagged in (False, True):
        res = run(101, 0.0, "pml", None, 15.0, args.long_nt, lagged=lagged, snapshots=args.long_nt // 12)
        e = [float((f.double() ** 2).sum()) for _, f in res.snapshots]
        energy.append({"form": "lagged" if lagged else "reference", "nt": args.long_nt,
                       "snapshot_every": args.long_nt // 12, "sum_p2": e,
                       "max_abs_record_last_quarter": float(res.record[-args.long_nt // 4:].abs().max())})
        print(f"energy {'lagged' if lagged else 'reference'}: " + " ".join(f"{v:.2e}" for v in e), flush=True)
    out = {"what": "2D CPML reflection and late energy, reference (psi_new in D) against lagged (psi_old in D)",
           "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "device": "cpu", "torch": torch.__version__, "dtype": "float64", "order": 8, "rows": rows,
           "energy": energy}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wave-pml-lagged-cpu.json").write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
