#!/usr/bin/env bash
# Nsight Compute sections (speed of light, memory workload, warp states) of the zwin interior launch of one
# CPML step, p_next over p_prev against into a third array (benchmarks/wave_inplace_ncu.py).
# Usage: bash benchmarks/wave_inplace_ncu_sections.sh OUTDIR
set -u
out=${1:-/tmp}
for mode in third in_place; do
  ncu --clock-control none --nvtx --nvtx-include "step/" -k regex:wave_zwin --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
    --section SchedulerStats python3 benchmarks/wave_inplace_ncu.py --mode "$mode" > "$out/wave-inplace-sections-$mode.txt" 2>&1
done
