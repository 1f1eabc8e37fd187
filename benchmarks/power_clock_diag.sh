#!/usr/bin/env bash
# Clocks/power of ours against the peer (alternating rounds), then ncu sections of one call each.
# Usage: bash benchmarks/power_clock_diag.sh OUTDIR "case1 case2 ..." ROUNDS SECONDS "ncu-cases"
set -u
out=${1:-/tmp}; cases=${2:-"attn-d128 attn-d64 gemm-nn"}; rounds=${3:-2}; secs=${4:-4}; ncases=${5:-"attn-d128"}
mkdir -p "$out"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,clocks.sm,temperature.gpu --format=csv | tee "$out/smi.txt"
for r in $(seq 1 "$rounds"); do
  for c in $cases; do
    for impl in ours peer; do
      python3 benchmarks/power_clock_diag.py loop --case "$c" --impl "$impl" --seconds "$secs" \
        2>>"$out/loop.err" | tee -a "$out/loop.jsonl"
    done
  done
done
for c in $ncases; do
  for impl in ours peer; do
    timeout 240 ncu --clock-control none --nvtx --nvtx-include "prof/" \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,sm__cycles_active.avg \
      python3 benchmarks/power_clock_diag.py once --case "$c" --impl "$impl" > "$out/ncu-$c-$impl.txt" 2>&1
    echo "ncu $c $impl rc=$?"; grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|^  [a-z_]+[a-z0-9_]*kernel|Registers Per|Achieved Occupancy|inst_executed.sum|cycles_active" "$out/ncu-$c-$impl.txt" | head -40
  done
done
