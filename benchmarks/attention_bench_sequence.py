"""Clock, power and per-call times along ``tilecraft attention bench``'s sequence on one shape (NVIDIA).

The bench times, each round, ours then SDPA's cuDNN, flash and efficient backends (0.4 s each with
``--budget 0.4``). At D256 our first round was the fastest of any implementation in three bench runs
and the later ones 8-10% slower, while cuDNN's moved 2-5% (2026-11-30, H200). This script runs the
bench's own ``measure`` in several orders while ``nvidia-smi`` samples SM clock, power, temperature
and throttle reasons every 20 ms (read-only queries), keeps every timed call's start and time
(``time_rotating(trace=...)``), and prints, per timing, the median clock and power over its window and
the median time of its first and last quarter of calls.

Orders:
  bench     ours, cudnn, flash, efficient (the bench's)
  reverse   ours, efficient, flash, cudnn (ours after cuDNN, cuDNN after efficient)
  settle    the bench's order, each implementation run untimed for ``--settle`` s before its timing
            (``measure(settle_s=...)``, what ``tilecraft attention bench --settle`` does)

    PYTHONPATH=src python benchmarks/attention_bench_sequence.py OUT --shapes d256 --rounds 4
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

SHAPES = {
    "d256": (2, 16, 4096, 256, False),
    "d256c": (2, 16, 4096, 256, True),
    "d128": (4, 16, 4096, 128, False),
    "d64": (8, 16, 2048, 64, False),
}
ORDERS = {"bench": ("cudnn", "flash", "efficient"), "reverse": ("efficient", "flash", "cudnn"),
          "settle": ("cudnn", "flash", "efficient")}
FIELDS = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


class Sampler:
    """nvidia-smi every ``ms`` milliseconds; each line stamped with the host's wall clock on arrival."""

    def __init__(self, ms: int = 20):
        self.rows: list[tuple[float, list[str]]] = []
        line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.proc = subprocess.Popen([*line_buffered, "nvidia-smi", f"--query-gpu={FIELDS}",
                                      "--format=csv,noheader,nounits", "-lms", str(ms),
                                      "-i", str(torch.cuda.current_device())],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 4:
                self.rows.append((time.time(), parts))

    def window(self, t0: float, t1: float) -> dict:
        rows = [r for t, r in self.rows if t0 <= t <= t1]

        def med(j):
            vals = []
            for r in rows:
                try:
                    vals.append(float(r[j]))
                except ValueError:
                    pass
            return statistics.median(vals) if vals else None
        return {"samples": len(rows), "sm_MHz": med(0), "power_W": med(1), "temp_C": med(2),
                "reasons": sorted({r[3] for r in rows})}

    def stop(self):
        self.proc.terminate()
        self.thread.join(timeout=2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shapes", nargs="+", default=["d256"], choices=sorted(SHAPES))
    ap.add_argument("--orders", nargs="+", default=["bench", "reverse", "settle"], choices=sorted(ORDERS))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--budget", type=float, default=0.4)
    ap.add_argument("--settle", type=float, default=0.3)
    ap.add_argument("--pause", type=float, default=5.0, help="idle seconds before each order")
    a = ap.parse_args(argv)

    import triton

    from tilecraft.bench import attention as ba
    from tilecraft.bench import harness
    from tilecraft.hardware.device import detect

    info = detect()
    a.out.mkdir(parents=True, exist_ok=True)
    orig = harness.time_rotating
    state = {"trace": None}

    def traced(fn, n_sets, **kw):
        state["trace"] = []
        t0 = time.time()
        t = orig(fn, n_sets, **kw, trace=state["trace"])
        state["window"] = (t0, time.time())
        return t

    harness.time_rotating = traced
    orig_time = ba._time
    timings = []

    def recorded(fn, n_sets, device, budget_s, use_graphs, settle_s=0.0):
        ms, d = orig_time(fn, n_sets, device, budget_s, use_graphs, settle_s)
        timings.append({"ms": ms, "window": state["window"], "trace": state["trace"]})
        return ms, d

    ba._time = recorded
    smi = Sampler()
    records = []
    try:
        for key in a.shapes:
            b, h, s, d, causal = SHAPES[key]
            shape = ba.Shape(b, h, h, s, s, d, causal)
            for order in a.orders:
                time.sleep(a.pause)
                settle = a.settle if order == "settle" else 0.0
                for r in range(a.rounds):
                    timings.clear()
                    results = ba.measure(shape, torch.bfloat16, "fwd", backends=ORDERS[order], budget_s=a.budget,
                                         l2_bytes=info.l2_bytes, settle_s=settle)
                    assert all(x.ok for x in results), [(x.impl, x.message) for x in results]
                    # measure times ours first, then the backends in the given order
                    for res, tm in zip(results, timings):
                        calls = [ms for _, ms in tm["trace"]]
                        q = max(1, len(calls) // 4)
                        rec = {"shape": key, "order": order, "round": r, "impl": res.impl, "ms": tm["ms"],
                               "first_q_ms": statistics.median(calls[:q]), "last_q_ms": statistics.median(calls[-q:]),
                               "calls": len(calls), "window_s": tm["window"][1] - tm["window"][0],
                               **smi.window(*tm["window"]), "trace": tm["trace"]}
                        records.append(rec)
                        print(f"{key:6s} {order:8s} r{r} {res.impl:16s} {rec['ms']:.3f} ms "
                              f"(first q {rec['first_q_ms']:.3f}, last q {rec['last_q_ms']:.3f}, n {len(calls)}) "
                              f"sm {rec['sm_MHz']} MHz {rec['power_W']} W {rec['temp_C']} C {rec['reasons']}",
                              flush=True)
                    ours = next(x for x in results if x.impl == "tilecraft").time_ms
                    cud = next(x for x in results if x.impl == "sdpa-cudnn").time_ms
                    print(f"  ratio x cudnn {cud / ours:.3f}", flush=True)
                torch.cuda.empty_cache()
    finally:
        smi.stop()
        ba._time, harness.time_rotating = orig_time, orig
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "commit": harness.git_commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "args": vars(a) | {"out": str(a.out)},
            "smi": [(t, r) for t, r in smi.rows]}
    path = a.out / f"attention-bench-sequence-{meta['commit']}.json"
    path.write_text(json.dumps({**meta, "records": records}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
