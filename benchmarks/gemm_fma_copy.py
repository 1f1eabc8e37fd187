"""fp32 ``ieee``: K-contiguous operands copied MN-contiguous before the FMA kernel (``GemmConfig.mn_copy``,
the copy timed with the product) against the heuristic and cuBLAS fp32 (TF32 off), in one run (issue 3:
fp32 ieee >= 0.9x cuBLAS; NT was 0.86x). The FMA kernel is fastest in the TN layout (both operands
MN-contiguous: 0.94x at 4096^3); a transposing copy costs O(N^2) against the product's O(N^3).

Each configuration is checked against float64 on the timed shape (``bench.run_case``) before it is
timed; ours (copies included) and cuBLAS from CUDA graphs over rotated input sets; ``--rounds`` rounds.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_fma_copy.py --out $OUT [--rounds 2]
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gemm_fma_split import run_suite  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.tuning.gemm import FMA_HEURISTIC, GemmConfig  # noqa: E402


def variants(layout: str, split: int = 1) -> list[GemmConfig | None]:
    h = dataclasses.replace(FMA_HEURISTIC, split_k=split)
    ks = ("a" if layout[0] == "N" else "") + ("b" if layout[1] == "T" else "")
    return [None] + [dataclasses.replace(h, mn_copy=o) for o in ("a", "b", "ab") if set(o) <= set(ks)]


def plan():
    cases = [(bench.Case("fp32", 4096, 4096, 4096, lay), 1) for lay in ("NN", "NT", "TT", "TN")]
    cases += [(bench.Case("fp32", 8192, 8192, 8192, lay), 1) for lay in ("NN", "NT")]
    cases += [(bench.Case("fp32", 3000, 7000, 5000, lay), 1) for lay in ("NN", "TT")]
    cases += [(bench.Case("fp32", 4096, 11008, 4096, "NT"), 1), (bench.Case("fp32", 2048, 2048, 2048, "NN"), 1),
              (bench.Case("fp32", 2048, 2048, 2048, "NT"), 1), (bench.Case("fp32", 1000, 1000, 1000, "NN"), 2),
              (bench.Case("fp32", 1000, 1000, 1000, "TT"), 2)]
    if "--only-b" in sys.argv:  # the B copies again (a7e7303 copied B to itself: K-contiguous stayed)
        cases = [c for c in cases if c[0].layout[1] == "T" and c[0].m >= 2048]
    return [(case, variants(case.layout, split)) for case, split in cases]


if __name__ == "__main__":
    run_suite("gemm-fma-copy", plan)
