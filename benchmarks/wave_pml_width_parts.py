"""GPU time of each launch of the CPML step (one stream, profiler) at layer widths 20, 16, 12, 10 (512**3, fp32 o8).

    PYTHONPATH=src OUT=DIR python benchmarks/wave_pml_width_parts.py
"""
import torch, json, os
from tilecraft.bench.wave import cpml_step_suite
from tilecraft.ops import wave as ops
from tilecraft.hardware.ceilings import measure_copy_bandwidth
copy = measure_copy_bandwidth()
res = {}
for w in (20, 16, 12, 10):
    recs = cpml_step_suite(512, 8, torch.float32, w, configs=[ops.default_cpml_config(torch.device("cuda"))], device="cuda",
                           copy_tbps=copy, budget_s=0.3, unfused=False, parts=True, say=lambda m: None)
    rows = [(r.case["variant"], round(r.extra["time_ms"], 4), r.extra.get("kernel")) for r in recs if r.case["variant"] not in ("cpml-torch", "cpml-fused")]
    res[w] = rows
    print(w, rows, flush=True)
from datetime import datetime, timezone
from tilecraft.bench.harness import git_commit
from tilecraft.hardware.device import detect
info = detect()
doc = {"device": info.name, "torch": info.versions.get("torch"), "triton": info.versions.get("triton"),
       "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "copy_tbps": copy,
       "parts_ms_by_width": res}
json.dump(doc, open(os.environ["OUT"] + "/wave-pml-width-parts.json", "w"), indent=1)
