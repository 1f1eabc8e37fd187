"""What ``auto``'s tuning does on this GPU: for each grid, the first ``tilecraft.laplacian`` call with an
empty tuning cache (tuning: compiling and timing every candidate, then the run), a second call, and
the tuner's own CUDA-graph times of the heuristic and of the configuration it chose.

    PYTHONPATH=src python benchmarks/stencil_autotune.py --out FILE.json [--tag COMMIT]

The cache goes to a fresh temporary folder (``TILECRAFT_CACHE``), so every case is tuned here. Triton's
own kernel cache is not cleared: a kernel compiled by an earlier run on the machine is not compiled again.
Every candidate's result is checked against the heuristic's by the tuner before it is timed.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

CASES = [  # (dtype, order, shape): the ladder's grids, a mid-size grid, and the GPU tests' small grids
    ("fp64", 2, (512, 512, 512)),
    ("fp32", 8, (512, 512, 512)),
    ("fp32", 2, (512, 512, 512)),
    ("fp64", 4, (256, 256, 256)),
    ("fp32", 2, (128, 160, 192)),
    ("fp64", 8, (26, 45, 136)),
    ("fp32", 8, (30, 70, 200)),
    ("fp64", 4, (21, 33, 64)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tag", default=os.environ.get("TILECRAFT_COMMIT", ""))
    args = parser.parse_args()
    os.environ["TILECRAFT_CACHE"] = tempfile.mkdtemp(prefix="tilecraft-autotune-")
    os.environ["TILECRAFT_TUNE"] = "1"

    import tilecraft
    from tilecraft.hardware.device import detect
    from tilecraft.ops import stencil as ops

    rows = []
    for dtype_name, order, shape in CASES:
        dtype = {"fp32": torch.float32, "fp64": torch.float64}[dtype_name]
        u = torch.rand(shape, dtype=dtype, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = tilecraft.laplacian(u, order=order)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        tilecraft.laplacian(u, order=order, out=out)
        torch.cuda.synchronize()
        second_ms = (time.perf_counter() - t0) * 1e3
        choice = ops.choose_config(u, out, order)
        entry = choice.entry or {}
        heuristic = ops.StencilConfig.from_dict(entry["heuristic"]) if entry else choice.config
        row = {"dtype": dtype_name, "order": order, "shape": list(shape), "key": choice.key, "source": choice.source,
               "first_call_s": first_s, "second_call_ms": second_ms, "chosen": choice.config.short(),
               "chosen_ms": entry.get("ms"), "heuristic": heuristic.short(), "heuristic_ms": entry.get("heuristic_ms"),
               "candidates": [{"config": ops.StencilConfig.from_dict(c["config"]).short(), "ms": c["ms"],
                               **({"skipped": c["skipped"]} if "skipped" in c else {})}
                              for c in entry.get("candidates", [])]}
        rows.append(row)
        gain = f"{row['heuristic_ms'] / row['chosen_ms']:.2f}x" if entry else choice.source
        print(f"{dtype_name} o{order} {'x'.join(map(str, shape))}: first call {first_s:.1f} s "
              f"({len(row['candidates'])} candidates), chose {row['chosen']} {row['chosen_ms']} ms, "
              f"heuristic {row['heuristic']} {row['heuristic_ms']} ms ({gain})", flush=True)
        del u, out
        torch.cuda.empty_cache()
    doc = {"suite": "stencil-autotune", "tag": args.tag, "device": detect().as_dict(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
