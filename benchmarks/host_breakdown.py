"""Where a replayed eager ``tilecraft.matmul`` call's host time goes, part by part, without a profiler (cProfile
more than doubles these times). Each part is timed alone in a loop of ``--calls`` calls on the same tensors
(median of ``--rounds`` loops), on products whose GPU work is shorter than the host's:

- ``matmul``: the public call; ``torch``: ``torch.matmul`` on the same tensors;
- ``compute``: ``ops.gemm.compute`` on a validated spec (the call without validation and dispatch);
- ``validated``: ``ops.gemm._validated`` (the remembered validation);
- ``key``: building the replay key; ``new_output``: allocating the output;
- ``replay``: ``ReplayCache.run`` with a built key (output, descriptors rebuilt, Triton's launcher);
- ``launch``: the recorded compiled kernels launched on prebuilt arguments (Triton's runner: the current device
  and stream, its TMA descriptors filled, the C launcher);
- ``launch_raw``: the same through ``CompiledKernel.run`` with the stream passed in (no device / stream lookup);
- ``key_before``: the key as it was built before the thirty-fifth session (``os.environ.get`` for each setting);
- ``matmul_lean_off``, ``replay_lean_off``: ``matmul`` and ``replay`` with ``ops.launch.LEAN`` off: the replay through
  ``CompiledKernel.run`` (Triton's descriptor wrapper, pointers by ``data_ptr()``), as in the thirty-fourth session;
- ``matmul_runner``, ``replay_runner``: ``matmul`` and ``replay`` with the replay forced onto Triton's runner
  (``ops.launch._RAW_STREAM`` None), as replays ran before 2026-12-01 (the A/B in one process).

GPU only. ``PYTHONPATH=src python benchmarks/host_breakdown.py [--calls 2000] [--rounds 3] [--out FILE]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import triton

import tilecraft
from tilecraft.bench.harness import git_commit
from tilecraft.ops import gemm as ops
from tilecraft.ops import launch as L
from tilecraft.tuning import cache as tcache
from tilecraft.tuning.gemm import clusters_enabled


def _env_before() -> tuple:  # the key's settings as read before the 35th session (os.environ.get)
    import os

    get = os.environ.get
    return get("TILECRAFT_PDL"), get("TILECRAFT_PDL_AT"), get("TILECRAFT_PDL_PREFETCH")


def _per_call_us(fn, calls: int, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def cases():
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape, dtype=torch.bfloat16):
        return (torch.rand(*shape, device="cuda", generator=g) * 2 - 1).to(dtype)

    yield "bf16 1000^3 (Gluon)", rnd(1000, 1000), rnd(1000, 1000), {}
    yield "bf16 16 x 4096^2 (small M)", rnd(16, 4096), rnd(4096, 4096), {}
    yield "8 x bf16 512^3 (stacked)", rnd(8, 512, 512), rnd(8, 512, 512), {}
    yield "fp64 256^3 (pointer kernel)", rnd(256, 256, dtype=torch.float64), rnd(256, 256, dtype=torch.float64), {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="host-breakdown.json")
    args = ap.parse_args()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "calls": args.calls, "records": []}
    stream = torch.cuda.current_stream().cuda_stream
    for name, a, b, kw in cases():
        for _ in range(5):  # the second call records, the third replays
            tilecraft.matmul(a, b, **kw)
        spec = ops.validate(a, b, **kw)
        out = ops._new_output(spec, a.device)
        key = ops.replay_key(a, b, spec)
        slots = (a, b, out, None, None, None, None)
        entry = ops._REPLAYS._entries.get(key)
        rec = {"case": name, "replayed": type(entry) is L.Replay,
               "kernels": [getattr(s[0], "name", type(s[0]).__name__) for s in entry.steps] if type(entry) is L.Replay
               else str(entry)}
        parts = {
            "torch": lambda: torch.matmul(a, b),
            "matmul": lambda: tilecraft.matmul(a, b, **kw),
            "compute": lambda: ops.compute(a, b, spec),
            "validated": lambda: ops._validated(a, b, None, 1.0, 0.0, None, None, None, None, None, None),
            "key": lambda: ops.replay_key(a, b, spec),
            "key_before": lambda: (L.signature(a), L.signature(b), spec, L.signature(None), L.signature(None),
                                   L.signature(None), L.signature(None), _env_before(), clusters_enabled(),
                                   tcache.tuning_enabled()),
            "new_output": lambda: ops._new_output(spec, a.device),
            "replay": lambda: ops._REPLAYS.run(key, slots),
        }
        if type(entry) is L.Replay:
            roots = list(slots)
            launches = []
            for fn, grid, values, fills, kwd in entry.steps:
                if kwd is not None:
                    continue
                vals = values.copy()
                for i, sp in fills:
                    vals[i] = L._rebuild(sp, roots)
                launches.append((fn, grid, vals))

            def launch():
                for fn, grid, vals in launches:
                    fn[grid](*vals)

            def launch_raw():
                for fn, grid, vals in launches:
                    fn.run(grid[0], grid[1], grid[2], stream, fn.function, fn.packed_metadata, None, None, None, *vals)

            parts["launch"] = launch
            parts["launch_raw"] = launch_raw
        raw = L._RAW_STREAM

        def runner_path(fn):  # the same call with the replay on Triton's runner (as before 2026-12-01's change)
            def call():
                L._RAW_STREAM = None
                try:
                    return fn()
                finally:
                    L._RAW_STREAM = raw
            return call

        if raw is not None:
            parts["matmul_runner"] = runner_path(parts["matmul"])
            parts["replay_runner"] = runner_path(parts["replay"])

        def lean_off(fn):  # the replay through CompiledKernel.run (as in the thirty-fourth session)
            def call():
                L.LEAN = False
                try:
                    return fn()
                finally:
                    L.LEAN = True
            return call

        rec["lean"] = type(entry) is L.Replay and entry.lean is not None
        parts["matmul_lean_off"] = lean_off(parts["matmul"])
        parts["replay_lean_off"] = lean_off(parts["replay"])
        for part, fn in parts.items():
            fn()
            rec[part] = _per_call_us(fn, args.calls, args.rounds)
        print(f"{name:32s} " + " ".join(f"{p} {rec[p]:6.1f}" for p in parts), flush=True)
        doc["records"].append(rec)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
