#!/usr/bin/env bash
# Full Nsight Compute sections and per-SASS-instruction stall samples of one call of ours or the peer
# (benchmarks/power_clock_diag.py cases). Usage: bash benchmarks/attention_ncu_source.sh OUTDIR CASE IMPL
# Writes OUTDIR/CASE-IMPL-sections.txt and OUTDIR/CASE-IMPL-sass.csv.gz (per instruction: samples by
# stall reason). Clocks are not locked (--clock-control none).
set -u
out=$1; case=$2; impl=$3
rep=/tmp/$case-$impl
ncu --clock-control none --set full --import-source no --nvtx --nvtx-include "prof/" -f -o "$rep" \
  python3 benchmarks/power_clock_diag.py once --case "$case" --impl "$impl" > "$out/$case-$impl-run.txt" 2>&1
ncu --import "$rep.ncu-rep" --print-details all > "$out/$case-$impl-sections.txt" 2>&1
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$out/$case-$impl-sass.csv.gz"
grep -E "Duration|SM Frequency|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Ipc A" "$out/$case-$impl-sections.txt" | head -20
