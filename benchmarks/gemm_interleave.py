"""Configurations of one GEMM and torch timed in fine interleaving: each variant (our configs and the torch call) is a
CUDA graph of ``--reps`` calls over input sets rotated beyond the L2; a slice replays every variant's graph once, in
an order that rotates from slice to slice, and ``--slices`` slices follow each other after a warm-up. At the 700 W
cap the clock drifts over seconds (docs/gemm.md, follow-up 32: 3-4% from round to round), so variants timed
seconds apart differ by the drift; here every slice sees all of them within ~0.1 s, and each variant's ratio to
torch is the median over slices of the ratio within the slice. Every configuration is checked against float64
(NaN-poisoned output) before it is timed.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_interleave.py --out $OUT --cases tf32pair [--slices 40]

``--cases`` names groups of ``benchmarks/gemm_cluster_probe.py`` (tuples: dtype, m, n, k, layout, config, more configs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TILECRAFT_TUNE", "0")

from gemm_cluster_probe import CASES  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.bench.harness import Record, stamp, write_results  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import gemm as ops  # noqa: E402
from tilecraft.tuning.measure import calls_graph  # noqa: E402


def interleave(graphs: list[torch.cuda.CUDAGraph], slices: int, warmup_s: float, dev) -> list[list[float]]:
    """ms per replay of each graph in each slice (the order rotating, reversed every other slice)."""
    v = len(graphs)
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(v)]
          for _ in range(slices)]
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for g in graphs:
        g.replay()
    stop.record()
    torch.cuda.synchronize(dev)
    one = max(start.elapsed_time(stop), 1e-3)  # ms for one slice
    for _ in range(max(1, round(warmup_s * 1e3 / one))):  # to the cap's steady clock
        for g in graphs:
            g.replay()
    for s in range(slices):
        order = [(s + j) % v for j in range(v)]
        if s % 2:
            order.reverse()
        for j in order:
            ev[s][j][0].record()
            graphs[j].replay()
            ev[s][j][1].record()
    torch.cuda.synchronize(dev)
    return [[ev[s][j][0].elapsed_time(ev[s][j][1]) for s in range(slices)] for j in range(v)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/gemm-interleave")
    ap.add_argument("--cases", default="tf32pair")
    ap.add_argument("--slices", type=int, default=40)
    ap.add_argument("--reps", type=int, default=0, help="calls per replay (0: about 20 ms of work)")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of replays before the slices")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = detect()
    dev = torch.device("cuda")
    records = []
    for group in args.cases.split(","):
        for dt, m, n, k, lay, *cfgs in CASES[group]:
            case = bench.Case(dt, m, n, k, lay)
            gen = torch.Generator(device=dev).manual_seed(1234)
            kw = bench.call_kwargs(dt, m, n, dev)
            in_size = torch.empty((), dtype=bench.DTYPES[dt]).element_size()
            nbytes = bench.gemm_bytes(m, n, k, in_size, 4)
            sets = [bench.make_operands(m, n, k, dt, lay, dev, gen)
                    for _ in range(bench.rotation_sets(nbytes, info.l2_bytes, maximum=8))]
            spec = ops.validate(*sets[0], **kw)
            names, calls, errs = [], [], []
            for cfg in cfgs:
                ok, err, _ = bench.check(case, *sets[0], kw, cfg)
                if not ok:
                    raise SystemExit(f"{case.name} {cfg.short()}: relative error {err:.2e}, above the tolerance")
                names.append(cfg.short())
                errs.append(err)
                calls.append([(lambda s=s, c=cfg: ops.compute(s[0], s[1], spec, cfg=c)) for s in sets])
            peer_name, _ = bench.peer(dt, *sets[0], kw)
            names.append(peer_name)
            errs.append(None)
            calls.append([bench.peer(dt, s[0], s[1], kw)[1] for s in sets])
            # a call's time at about the peak rate or the copy rate, whichever is slower (small M: the bytes)
            est_ms = max(bench.gemm_flops(m, n, k) / (350e12 if in_size >= 4 else 650e12), nbytes / 3.5e12) * 1e3
            reps = args.reps or max(len(sets), round(20 / est_ms / len(sets)) * len(sets))
            graphs = [calls_graph(c, dev, reps) for c in calls]
            times = interleave(graphs, args.slices, args.warmup, dev)
            peer_t = times[-1]
            flops = bench.gemm_flops(m, n, k)
            for name, cfg, t, err in zip(names[:-1], cfgs, times[:-1], errs[:-1]):
                per_call = [x / reps for x in t]
                ratios = [p / x for p, x in zip(peer_t, t)]
                med = statistics.median(per_call)
                peer_med = statistics.median(peer_t) / reps
                rec = Record(suite="gemm-interleave", case={"dtype": dt, "layout": lay, "m": m, "n": n, "k": k},
                             metric="TFLOP/s", unit="TFLOP/s", ours=flops / (med * 1e-3) / 1e12, peer=peer_name,
                             peer_value=flops / (peer_med * 1e-3) / 1e12,
                             extra={"config": cfg.as_dict(), "name": name, "rel_err": err, "reps": reps,
                                    "slices": args.slices, "slice_ms": per_call,
                                    "peer_slice_ms": [x / reps for x in peer_t], "slice_ratios": ratios,
                                    "time_ms": med, "peer_time_ms": peer_med})
                rec.ratio = statistics.median(ratios)
                q = sorted(ratios)
                print(f"{case.name:26s} {name:36s} {med * 1e3:8.1f} us  torch {peer_med * 1e3:8.1f} us  "
                      f"x{rec.ratio:.3f} (slices p10 {q[len(q) // 10]:.3f} p90 {q[len(q) * 9 // 10]:.3f})",
                      flush=True)
                records.append(rec)
            del graphs
            torch.cuda.empty_cache()
    stamp(records, info)
    print(f"wrote {write_results(records, 'gemm-interleave', out / 'gemm-interleave.json', info)}")


if __name__ == "__main__":
    main()
