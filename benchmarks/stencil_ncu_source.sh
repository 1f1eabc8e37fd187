#!/usr/bin/env bash
# Full Nsight Compute sections and per-SASS-instruction stall samples of one stencil configuration
# (NVIDIA). Usage: bash benchmarks/stencil_ncu_source.sh OUTDIR NAME dtype order nz ny nx [config-json|variant]
# Writes OUTDIR/NAME-sections.txt (speed of light, memory, warp states, scheduler, occupancy,
# instruction mix, source counters) and OUTDIR/NAME-sass.csv (per instruction: samples by stall reason).
set -u
out=$1; name=$2; dtype=$3; order=$4; nz=$5; ny=$6; nx=$7; cfg=${8:-auto}
if [[ "$cfg" == \{* ]]; then sel=(--config "$cfg"); else sel=(--variant "$cfg"); fi
rep=/tmp/$name
ncu --clock-control none --set full --import-source no -k regex:laplacian -s 1 -c 1 -f -o "$rep" \
  python3 benchmarks/stencil_profile.py --dtype "$dtype" --order "$order" --shape "$nz" "$ny" "$nx" --runs 2 "${sel[@]}" \
  > "$out/$name-run.txt" 2>&1
ncu --import "$rep.ncu-rep" --print-details all > "$out/$name-sections.txt" 2>&1
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$out/$name-sass.csv" 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Issued Warp|No Eligible|Stall|Warp Cycles Per Issued|Mem Busy|Max Bandwidth|Mem Pipes" \
  "$out/$name-sections.txt" | head -60
