"""Matrix-vector tiles (the pointer kernel with BLOCK_M < 16: a broadcast multiply and a sum over K on
the CUDA cores instead of tl.dot) at M = 1, 4, 8, N = K = 4096, fp32 and bf16, against the heuristic
and torch.matmul (cuBLAS) in one run.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_gemv.py --out $OUT [--rounds 2]
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


def P(bm, bn, bk, stages, split, warps=4):
    return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, split_k=split)


VARIANTS = {
    1: [None, P(1, 128, 64, 4, 4), P(1, 128, 64, 4, 8), P(1, 128, 64, 3, 16), P(1, 256, 32, 4, 8), P(1, 64, 128, 4, 8),
        P(1, 256, 64, 3, 8, warps=8), P(1, 128, 32, 6, 8)],
    4: [None, P(4, 64, 32, 4, 4), P(4, 64, 32, 4, 8), P(4, 128, 32, 4, 8, warps=8)],
    8: [None, P(8, 64, 16, 4, 4), P(8, 64, 16, 4, 8), P(8, 128, 16, 4, 8, warps=8)],
}


def plan():
    return ([(bench.Case(dt, m, 4096, 4096), VARIANTS[m]) for dt in ("fp32", "bf16") for m in (1, 4, 8)]
            + [(bench.Case("fp32", 1, 8192, 8192), VARIANTS[1][:4]), (bench.Case("bf16", 1, 11008, 4096), VARIANTS[1][:4])])


if __name__ == "__main__":
    run_suite("gemm-gemv", plan)
