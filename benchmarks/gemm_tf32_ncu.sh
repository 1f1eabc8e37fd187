#!/usr/bin/env bash
# Nsight Compute on the Gluon GEMM's tf32 8192^3 kernels: NT (both operands K-major, shared-memory wgmma operands)
# against NN (the MN-major operand read into registers, `mn_regs`), to find where NN's 3% goes.
# Usage (device machine, repository root): bash benchmarks/gemm_tf32_ncu.sh OUTDIR
set -u
out=${1:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
for lay in NT NN; do
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section LaunchStats -k regex:matmul_ws -s 2 -c 1 \
    python3 - "$lay" > "$out/ncu-tf32-$lay.txt" 2>&1 <<'PY'
import sys, torch
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig
lay = sys.argv[1]
a = torch.rand(8192, 8192, device="cuda") * 2 - 1
b = (torch.rand(8192, 8192, device="cuda") * 2 - 1)
b = b.t() if lay == "NT" else b
spec = ops.validate(a, b, precision="tf32")
cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=(lay == "NN"))
for _ in range(4):
    ops.compute(a, b, spec, cfg=cfg)
torch.cuda.synchronize()
PY
  echo "== $lay rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Executed Ipc|Warp Cycles Per Issued|No Eligible|Shared Memory|Stall|Registers Per|SM Frequency|Theoretical Occupancy|Achieved Occupancy" "$out/ncu-tf32-$lay.txt" | head -40
done
