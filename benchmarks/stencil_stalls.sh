#!/usr/bin/env bash
# Warp-stall breakdown (Nsight Compute WarpStateStats + memory tables) of stencil configurations.
# Usage: bash benchmarks/stencil_stalls.sh OUTDIR; lines of CONFIGS: dtype order nz ny nx config-json|variant
set -u
out=${1:-/tmp}
i=0
while read -r dtype order nz ny nx cfg; do
  [ -z "$dtype" ] && continue
  i=$((i + 1))
  if [[ "$cfg" == \{* ]]; then sel=(--config "$cfg"); else sel=(--variant "$cfg"); fi
  echo "=== $i $dtype o$order $nz $ny $nx $cfg"
  ncu --clock-control none --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    -k regex:laplacian -s 1 -c 1 python3 benchmarks/stencil_profile.py --dtype "$dtype" --order "$order" \
    --shape "$nz" "$ny" "$nx" --runs 2 "${sel[@]}" > "$out/stalls-$i.txt" 2>&1
  grep -E "Stall|Warp Cycles|Achieved Occupancy|Theoretical Occupancy|Mem Busy|Max Bandwidth|L1/TEX Hit|L2 Hit|Mem Pipes|Issued Warp" "$out/stalls-$i.txt" | head -30
done < "${CONFIGS:-benchmarks/stencil_stalls.txt}"
