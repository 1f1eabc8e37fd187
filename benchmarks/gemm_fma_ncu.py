"""One fp32 GEMM launch of a given configuration, for Nsight Compute (``benchmarks/gemm_fma.py``'s kernels):

    ncu --kernel-name regex:matmul --launch-skip 2 --launch-count 1 --metrics <list> \\
        python benchmarks/gemm_fma_ncu.py '{"kernel": "fma", "block_m": 128, ...}' [M N K]
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from tilecraft.ops import gemm as ops  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402

cfg = GemmConfig.from_dict(json.loads(sys.argv[1]))
m, n, k = (int(x) for x in sys.argv[2:5]) if len(sys.argv) >= 5 else (4096, 4096, 4096)
a = torch.rand(m, k, device="cuda") * 2 - 1
b = torch.rand(k, n, device="cuda") * 2 - 1
spec = ops.validate(a, b)
out = torch.empty(m, n, device="cuda")
for _ in range(3):
    ops.launch(a, b, out, spec, cfg)
torch.cuda.synchronize()
print(cfg.short(), "done")
