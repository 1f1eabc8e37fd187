#!/usr/bin/env bash
# Per-launch GPU time and DRAM bytes of one CPML step, p_next over p_prev against into a third array
# (benchmarks/wave_inplace_ncu.py). Usage: bash benchmarks/wave_inplace_ncu.sh OUTDIR
set -u
out=${1:-/tmp}
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
for mode in third in_place; do
  ncu --clock-control none --print-units base --nvtx --nvtx-include "step/" --metrics "$metrics" --csv \
    python3 benchmarks/wave_inplace_ncu.py --mode "$mode" > "$out/wave-inplace-ncu-$mode.csv" 2>&1
done
python3 - "$out" <<'PY'
import csv, sys, collections
out = sys.argv[1]
for mode in ("third", "in_place"):
    rows = [l for l in open(f"{out}/wave-inplace-ncu-{mode}.csv") if l.startswith('"')]
    k = collections.OrderedDict()
    for r in csv.DictReader(rows):
        key = (r["ID"], r["Kernel Name"][:40])
        k.setdefault(key, {})[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    print(f"== {mode}")
    tot = collections.Counter()
    for (i, name), m in k.items():
        t = float(m.get("gpu__time_duration.sum", 0))
        rd, wr = float(m.get("dram__bytes_read.sum", 0)), float(m.get("dram__bytes_write.sum", 0))
        tot["t"] += t; tot["rd"] += rd; tot["wr"] += wr
        print(f"  {i:>4} {name:40s} {t:>10.0f} ns  read {rd/1e6:9.1f} MB  write {wr/1e6:9.1f} MB  "
              f"L2 {float(m.get('lts__t_bytes.sum', 0))/1e6:9.1f} MB  dram% {m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed')}")
    print(f"  total {tot['t']/1e3:.1f} us read {tot['rd']/1e9:.3f} GB write {tot['wr']/1e9:.3f} GB")
PY
