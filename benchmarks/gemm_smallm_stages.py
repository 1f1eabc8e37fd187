"""Small-M bf16 at N = K = 4096 (issue 3: >= 85% of copy bandwidth): deeper pipelines and longer K steps
keep more of B in flight per SM (the heuristic, 16x32x128 in 6 stages, keeps 5 x 8 KiB), in one run
against the heuristic and torch.matmul; N = K = 8192 as the control.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_smallm_stages.py --out $OUT [--rounds 2]
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


def P(bm, bn, bk, stages, warps=4, split=1):
    return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, split_k=split)


def variants(m: int) -> list[GemmConfig | None]:
    bm = 16 if m <= 16 else (32 if m <= 32 else 64)
    if m > 32:
        return [None, P(64, 64, 128, 8), P(64, 64, 64, 10), P(64, 32, 128, 8), P(64, 64, 256, 4), P(64, 32, 256, 5)]
    return [None, P(bm, 32, 128, 8), P(bm, 32, 128, 10), P(bm, 32, 128, 12), P(bm, 32, 256, 5), P(bm, 32, 256, 6),
            P(bm, 32, 256, 8), P(bm, 32, 128, 8, warps=8), P(bm, 32, 512, 4), P(bm, 64, 256, 6)]


def plan():
    return ([(bench.Case("bf16", m, 4096, 4096), variants(m)) for m in (1, 16, 32, 64)]
            + [(bench.Case("bf16", 16, 8192, 8192), [None, P(16, 64, 256, 6), P(16, 64, 128, 10)])])


if __name__ == "__main__":
    run_suite("gemm-smallm-stages", plan)
