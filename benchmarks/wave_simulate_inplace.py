"""``simulate`` per step with p_next over p_prev (``in_place=True``) against the default since 2026-11-28
(``in_place=None``: p_next into a third array, three arrays rotated), 512**3 + 20-point CPML, fp32 order 8,
rounds in turn; each run's shot record compared bit for bit with the first run's (``simulate_suite``).

    PYTHONPATH=src python benchmarks/wave_simulate_inplace.py [--n 512] [--nt 100] [--rounds 3] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import simulate_suite
from tilecraft.hardware.ceilings import measure_copy_bandwidth


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--graphs", action="store_true", help="also time cuda_graphs=True (in place, both modes)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    gpu = args.device == "cuda"
    copy = measure_copy_bandwidth() if gpu else None
    recs = simulate_suite(args.n, 8, torch.float32, 20, nt=args.nt, device=args.device, copy_tbps=copy,
                          backends=("triton",), rounds=args.rounds, in_place_modes=(True, None),
                          graph_modes=(False, True) if args.graphs else (False,))
    rows = [{"in_place": r.extra["in_place"], "cuda_graphs": r.extra["cuda_graphs"], "round": r.extra["round"],
             "ms_per_step": r.extra["time_ms"],
             "same_record_bits": r.extra["same_record_bits"]} for r in recs]
    out = {"device": torch.cuda.get_device_name() if gpu else "cpu", "copy_tbps": copy, "commit": git_commit(),
           "torch": torch.__version__, "n": args.n, "nt": args.nt, "rows": rows}
    for key in sorted({(r["in_place"], str(r["cuda_graphs"])) for r in rows}):
        ms = [r["ms_per_step"] for r in rows if (r["in_place"], str(r["cuda_graphs"])) == key]
        out[f"median_ms_in_place_{key[0]}_graphs_{key[1]}"] = statistics.median(ms)
        print(f"in_place={key[0]} cuda_graphs={key[1]}: ms per step {', '.join(f'{v:.3f}' for v in ms)}; "
              f"median {statistics.median(ms):.3f}", flush=True)
    print(f"records identical: {all(r['same_record_bits'] for r in rows)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wave-simulate-inplace.json").write_text(json.dumps(out, indent=1))
    return 0 if all(r["same_record_bits"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
