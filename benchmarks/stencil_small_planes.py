"""The sweep's small planes (issue 2: fp64 order 2, no point of the plane-size sweep below 90% of the best;
256^2 planes read 70-77% of copy against 80-85% for 512^2 and 4096^2): the flat kernel (1D over the
contiguous grid, neighbours at +-1, +-nx, +-nx*ny: every program a contiguous run, the copy's own
pattern), which the tuner tries only on unaligned rows, against the heuristic and the other candidates,
at 2048 x 256^2, 512^3 and 32 x 2048^2, three rounds in turn, copy bandwidth in the same run.

    PYTHONPATH=src python benchmarks/stencil_small_planes.py --out $OUT
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from tilecraft.bench import stencil as sb  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import stencil as ops  # noqa: E402
from tilecraft.ops.stencil import StencilConfig  # noqa: E402
from tilecraft.tuning.stencil import plane_sweep_best  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"{info.name} copy {copy:.3f} TB/s commit {os.environ.get('TILECRAFT_COMMIT')}", flush=True)
    dt = torch.float64
    cfgs = {"heuristic": None,
            "flat 1024 w8 nt": StencilConfig("flat", block_y=1, block_x=1024, num_warps=8, nontemporal=True),
            "flat 2048 w8 nt": StencilConfig("flat", block_y=1, block_x=2048, num_warps=8, nontemporal=True),
            "flat 512 w4 nt": StencilConfig("flat", block_y=1, block_x=512, num_warps=4, nontemporal=True),
            "plane 8x128 asc nt": plane_sweep_best(dt),
            "short march 64": ops.short_march(dt, 1, 64), "short march 128": ops.short_march(dt, 1, 128),
            "long march": ops.long_march(dt)}
    rows = []
    for shape in ((2048, 256, 256), (512, 512, 512), (32, 2048, 2048)):
        per: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for name, cfg in cfgs.items():
                res = sb.measure_config(shape, dt, 2, "auto", cfg, l2_bytes=info.l2_bytes, budget_s=0.3,
                                        check="full" if r == 0 else "small")
                frac = res.fom_TBps / copy if res.ok else float("nan")
                per.setdefault(name, []).append(frac)
                rows.append({"shape": shape, "config": name, "round": r, "ok": res.ok, "fraction_of_copy": frac,
                             "config_dict": res.config, "message": res.message})
                if not res.ok:
                    print(f"{shape} {name}: {res.message}", flush=True)
        for name, fr in per.items():
            print(f"{str(shape):18s} {name:22s} % of copy {' '.join(f'{100 * x:.1f}' for x in fr)} "
                  f"median {100 * statistics.median(fr):.1f}", flush=True)
    doc = {"suite": "stencil.small-planes", "device": info.as_dict(), "torch": torch.__version__,
           "commit": os.environ.get("TILECRAFT_COMMIT"), "copy_TBps": copy, "rows": rows}
    (out / "stencil-small-planes.json").write_text(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
