"""bf16 1000^3 (issue 3: no odd shape below 0.8x torch; 0.76-0.79x): 16 K steps of 64 in a 4-deep ring
leave each program about four load round trips; deeper rings and shorter K steps keep more of the tile's
K in flight. The Gluon kernel's 64x128 tile at 4 warps with 4-12 stages, against torch in one run.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_1000_stages.py --out $OUT [--rounds 3]
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gemm_fma_split import run_suite  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402


def G(bm, bn, bk, stages, warps=4):
    return GemmConfig("gluon", bm, bn, bk, num_warps=warps, num_stages=stages)


VARIANTS = [None, G(64, 128, 64, 5), G(64, 128, 64, 6), G(64, 128, 64, 7), G(64, 128, 32, 8), G(64, 128, 32, 10),
            G(64, 128, 32, 12), G(128, 64, 64, 6), G(64, 64, 64, 10)]


def plan():
    return [(bench.Case("bf16", 1000, 1000, 1000, lay), VARIANTS) for lay in ("NN", "NT")]


if __name__ == "__main__":
    run_suite("gemm-1000-stages", plan, 3)
