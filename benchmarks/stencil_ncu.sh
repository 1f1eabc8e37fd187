#!/usr/bin/env bash
# Hardware counters of stencil configurations and of torch's copy (NVIDIA, ncu).
# Usage: bash benchmarks/stencil_ncu.sh OUTDIR; each line of CONFIGS (default
# benchmarks/stencil_ncu.txt): dtype order nz ny nx config-json, or "copy" for torch's copy.
# EXTRA_METRICS=a,b adds metrics to the list.
set -u
out=${1:-/tmp}
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed,lts__d_sectors.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum${EXTRA_METRICS:+,$EXTRA_METRICS}
i=0
while read -r dtype order nz ny nx cfg; do
  [ -z "$dtype" ] && continue
  i=$((i + 1))
  echo "=== $i $dtype $order $nz $ny $nx $cfg"
  if [ "$dtype" = copy ]; then
    ncu --clock-control none --metrics "$metrics" -s 2 -c 1 --csv python3 -c "
import torch
a = torch.rand(2**28, device='cuda'); b = torch.empty_like(a)
for _ in range(4): b.copy_(a)
torch.cuda.synchronize()" > "$out/ncu-$i.csv" 2>&1
  else
    ncu --clock-control none --metrics "$metrics" -k regex:laplacian -s 1 -c 1 --csv \
      python3 benchmarks/stencil_profile.py --dtype "$dtype" --order "$order" --shape "$nz" "$ny" "$nx" \
      --runs 2 --config "$cfg" > "$out/ncu-$i.csv" 2>&1
  fi
  python3 - "$out/ncu-$i.csv" <<'PY'
import csv, sys, json
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
info = [l for l in open(sys.argv[1]) if l.startswith('{')]
for r in csv.DictReader(rows):
    print(f"  {r['Metric Name']:60s} {r['Metric Value']:>18s} {r['Metric Unit']}")
if info:
    mf = json.loads(info[0])
    print(f"  least bytes: fetch {mf['min_fetch_bytes']:,} write {mf['min_write_bytes']:,}")
PY
done < "${CONFIGS:-benchmarks/stencil_ncu.txt}"
