#!/usr/bin/env bash
# Nsight Compute sections (speed of light, occupancy, launch statistics, memory workload, warp states,
# scheduler) of every launch of one default CPML step (fp32 order 8, 512**3 + a CPML of WIDTH points,
# p_next into a third array; benchmarks/wave_inplace_ncu.py), launch by launch (ncu serialises them).
# Usage: bash benchmarks/wave_layers_ncu.sh OUTDIR [WIDTH]   (WIDTH: 12, the library's default)
set -u
out=${1:-/tmp}
width=${2:-12}
ncu --clock-control none --nvtx --nvtx-include "step/" --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  python3 benchmarks/wave_inplace_ncu.py --mode third --width "$width" > "$out/wave-layers-ncu-w$width.txt" 2>&1
grep -E "wave_|cpml_|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Memory Throughput|L1/TEX Hit|L2 Hit|Issue Slots|No Eligible|Warp Cycles Per Issued" \
  "$out/wave-layers-ncu-w$width.txt" > "$out/wave-layers-ncu-w$width-summary.txt"
