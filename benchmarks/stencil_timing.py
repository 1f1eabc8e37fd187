"""How the timing method moves the stencil's figures: each call bracketed by events on an idle device
(``hide_launch=False``, the harness before 2026-11-27) against the same calls with the device kept busy
while the host enqueues them (``hide_launch=True``, a spin kernel ahead of the first event), in turn,
in one process; and the copy ceiling both ways. ``auto`` pays its configuration choice on the host at
every call; an explicit configuration (``--variants`` names of ``stencil_auto_ab.py``) does not.

    PYTHONPATH=src python benchmarks/stencil_timing.py --out $OUT --tag=-h200

Every case is checked against the float64 reference on the timed grid before it is timed."""
from __future__ import annotations

import argparse
import sys
import time
from functools import partial

import torch

import stencil_common as sc
from stencil_auto_ab import CASES, label, variant
from tilecraft.bench import stencil as sb
from tilecraft.bench.harness import Record, time_rotating, write_results


def copy_record(info, hide: bool, rnd: int, nbytes: int = 2 * 2**30) -> Record:
    n = nbytes // 4
    srcs = [torch.rand(n, device="cuda") for _ in range(2)]
    dst = torch.empty(n, device="cuda")
    t = time_rotating(lambda i: dst.copy_(srcs[i]), 2, budget_s=0.5, hide_launch=hide)
    tbps = 2 * n * 4 / (t.median_ms * 1e-3) / 1e12
    print(f"   copy hide_launch={hide!s:5s} {tbps:.3f} TB/s host {t.host_ms * 1e3:.1f} us", flush=True)
    return Record("stencil.timing", {"case": "copy", "bytes": 2 * n * 4, "hide_launch": hide, "round": rnd},
                  "bandwidth", "TB/s", tbps, extra={"timing": t.as_dict()})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--cases", default="fp64-o2,fp32-o2,fp32-o8")
    ap.add_argument("--variants", default="auto,zm")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    info, out, t0, copy = sc.start(args.out)
    records = []
    plain = sb.time_rotating
    for rnd in range(1, args.rounds + 1):
        for hide in (False, True):
            records.append(copy_record(info, hide, rnd))
        for name in args.cases.split(","):
            dtype, order, shape = CASES[name]
            print(f"== {name} {shape} round {rnd} ({time.time() - t0:.0f}s)", flush=True)
            for v in args.variants.split(","):
                if v != "auto" and order > 2 and v.startswith(("zm", "row")):
                    continue
                cfg = variant(v, dtype, order)
                for hide in (False, True):
                    sb.time_rotating = partial(plain, hide_launch=hide)
                    try:
                        rec = sc.measure(shape, dtype, order, cfg, info, args.budget, copy, "stencil.timing",
                                         {"case": name, "shape": list(shape), "dtype": dtype, "order": order,
                                          "variant": v, "hide_launch": hide, "round": rnd},
                                         lambda c, h=hide: f"{label(c)} hide={h}", check="full", width=60)
                    finally:
                        sb.time_rotating = plain
                    host = (rec.extra.get("timing") or {}).get("host_ms")
                    print(f"      host {host * 1e3 if host is not None else float('nan'):.1f} us per call", flush=True)
                    records.append(rec)
        write_results(records, "stencil.timing", out / f"stencil-timing{args.tag}.json", info)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
