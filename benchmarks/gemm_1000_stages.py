"""bf16 1000^3 (issue 3: no odd shape below 0.8x torch; 0.76-0.79x): 16 K steps of 64 in a 4-deep ring
leave each program about four load round trips; deeper rings and shorter K steps keep more of the tile's
K in flight. The Gluon kernel's 64x128 tile at 4 warps with 4-12 stages, against torch in one run.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_1000_stages.py --out $OUT [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gemm_explore import start  # noqa: E402
from gemm_fma_split import sweep  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.bench.harness import write_results  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402


def G(bm, bn, bk, stages, warps=4):
    return GemmConfig("gluon", bm, bn, bk, num_warps=warps, num_stages=stages)


VARIANTS = [None, G(64, 128, 64, 5), G(64, 128, 64, 6), G(64, 128, 64, 7), G(64, 128, 32, 8), G(64, 128, 32, 10),
            G(64, 128, 32, 12), G(128, 64, 64, 6), G(64, 64, 64, 10)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    rounds = ap.parse_known_args()[0].rounds
    out, log, info = start("gemm-1000-stages")
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    plan = [(bench.Case("bf16", 1000, 1000, 1000, lay), VARIANTS) for lay in ("NN", "NT")]
    records = sweep(plan, rounds, info, copy, log)
    write_results(records, "gemm-1000-stages", out / "gemm-1000-stages.json", info, meta={"copy_TBps": copy})
    log("done")


if __name__ == "__main__":
    main()
