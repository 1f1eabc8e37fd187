#!/usr/bin/env bash
# Nsight Compute on the Gluon GEMM, one launch per configuration.
#   tf32     tf32 8192^3 on the 128x256x32 s3 tile: NT (both operands K-major, shared-memory wgmma operands)
#            against NN (the MN-major operand read into registers, `mn_regs`): where NN's 3% goes
#   cluster  bf16 1000^3 TT on the short-K 64x128 s4 tile, without and with clusters of two CTAs sharing B
#            (`cluster_m`): L2 and tensor-pipe load, where the K steps wait
#   tf32pair tf32 8192^3 NN on the 128x256x32 s3 `mn_regs` tile, the register operand read as the tile stores it
#            against `row_perm=2` (in row pairs: LDS.64, and the transposed store in STS.64): bank conflicts,
#            tensor pipe, where the warps wait
# Usage (device machine, repository root): bash benchmarks/gemm_ncu.sh tf32|cluster|tf32pair OUTDIR
set -u
what=${1:?tf32, cluster or tf32pair}
out=${2:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
case "$what" in
  tf32) runs="NT:0 NN:0"; extra="--section ComputeWorkloadAnalysis --section LaunchStats" ;;
  cluster) runs="TT:1 TT:2"
    extra="--metrics lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed" ;;
  tf32pair) runs="NN:0 NN:2"
    extra="--section ComputeWorkloadAnalysis --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed" ;;
  *) echo "unknown case $what (tf32, cluster or tf32pair)"; exit 2 ;;
esac
for run in $runs; do
  lay=${run%%:*}; cl=${run##*:}
  name="ncu-$what-$lay${cl/#0/}"
  # shellcheck disable=SC2086
  timeout 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    $extra -k regex:matmul_ws -s 3 -c 1 python3 - "$what" "$lay" "$cl" > "$out/$name.txt" 2>&1 <<'PY'
import sys, torch
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig
what, lay, cl = sys.argv[1], sys.argv[2], int(sys.argv[3])
n, dtype = (8192, torch.float32) if what.startswith("tf32") else (1000, torch.bfloat16)
def rnd():
    return (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)
a = rnd().t() if lay[0] == "T" else rnd()
b = rnd().t() if lay[1] == "T" else rnd()
if what == "tf32":
    spec = ops.validate(a, b, precision="tf32")
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=(lay == "NN"))
elif what == "tf32pair":
    spec = ops.validate(a, b, precision="tf32")
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=cl)
else:
    spec = ops.validate(a, b)
    cfg = GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=cl)
for _ in range(5):
    ops.compute(a, b, spec, cfg=cfg)
torch.cuda.synchronize()
PY
  echo "== $name rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|lts__|sm__pipe_tensor|Registers Per|This stall type|bank_conflicts|wavefronts" \
    "$out/$name.txt" | head -20
done
