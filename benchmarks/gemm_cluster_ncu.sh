#!/usr/bin/env bash
# Nsight Compute on the Gluon GEMM's short-K 64x128 tile at 1000^3 (bf16 TT), with and without clusters of two
# CTAs sharing B (cluster_m): L2 and tensor-pipe load, where the K steps wait.
# Usage (device machine, repository root): bash benchmarks/gemm_cluster_ncu.sh OUTDIR
set -u
out=${1:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
for cl in 1 2; do
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
    -k regex:matmul_ws -s 3 -c 1 python3 - "$cl" > "$out/ncu-1000-tt-c$cl.txt" 2>&1 <<'PY'
import sys, torch
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig
a = (torch.rand(1000, 1000, device="cuda") * 2 - 1).to(torch.bfloat16).t()
b = (torch.rand(1000, 1000, device="cuda") * 2 - 1).to(torch.bfloat16).t()
spec = ops.validate(a, b)
cfg = GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=int(sys.argv[1]))
for _ in range(5):
    ops.compute(a, b, spec, cfg=cfg)
torch.cuda.synchronize()
PY
  echo "== cluster_m $cl rc $?"
  grep -E "Duration|L2 Cache Throughput|lts__|sm__pipe_tensor|Compute \(SM\) Throughput|DRAM Throughput|This stall type" "$out/ncu-1000-tt-c$cl.txt" | head -12
done
