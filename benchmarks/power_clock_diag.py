"""Clocks, power and throughput of ours against the peer on one product, run for seconds (NVIDIA).

Where ours sits a few percent under the peer on a compute-bound product (attention forward D128 and
D64 against cuDNN, bf16 NN 8192^3 against cuBLAS on an H100), the question is whether the gap is the
kernel's cycles or the card's clock: an H100 at 700 W lowers its SM clock under dense tensor-core work,
and two kernels of equal cycle counts run at different speeds if one draws more power. This script
runs one implementation back to back for ``--seconds`` (inputs rotated over 4 sets) while
``nvidia-smi`` samples SM clock, power, temperature and the active throttle reasons every 50 ms
(read-only queries: the card's settings are left alone), and reports medians beside the throughput.

    PYTHONPATH=src python benchmarks/power_clock_diag.py loop --case attn-d128 --impl ours
    PYTHONPATH=src python benchmarks/power_clock_diag.py loop --case gemm-nn --impl peer
    PYTHONPATH=src python benchmarks/power_clock_diag.py once --case attn-d128 --impl ours   # for ncu

``once`` warms up and then runs one call inside the NVTX range "prof" (ncu --nvtx --nvtx-include prof/).
Every implementation is checked against float64 before anything is timed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

CASES = {
    "attn-d128": ("attn", (4, 16, 4096, 128, False)),
    "attn-d128c": ("attn", (4, 16, 4096, 128, True)),
    "attn-d64": ("attn", (8, 16, 2048, 64, False)),
    "attn-d64c": ("attn", (8, 16, 2048, 64, True)),
    "attn-d256": ("attn", (2, 16, 4096, 256, False)),
    "gemm-nn": ("gemm", (8192, 8192, 8192, "NN")),
    "gemm-nt": ("gemm", (8192, 8192, 8192, "NT")),
}


def build(case: str, impl: str):
    """(calls over 4 input sets, flop per call, check message)."""
    kind, p = CASES[case]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    if kind == "attn":
        from tilecraft.bench import attention as ba
        b, h, s, d, causal = p
        shape = ba.Shape(b, h, h, s, s, d, causal)
        flop = ba.attention_flops(shape)
        run = (ba._ours_fwd(shape, None) if impl == "ours" else None)
        sdpa = ba._sdpa("cudnn")
        if impl == "ours":
            ok, err, msg = ba.check_forward(shape, torch.bfloat16, lambda q, k, v: run(q, k, v)[:2])
        else:
            ok, err, msg = ba.check_forward(shape, torch.bfloat16, lambda q, k, v: (sdpa(q, k, v, causal), None))
        if not ok:
            raise SystemExit(f"{case} {impl}: check failed: {msg}")
        sets = [ba.make_inputs(shape, torch.bfloat16, dev, gen) for _ in range(4)]
        if impl == "ours":
            outs = [(torch.empty_like(q), torch.empty(b, h, s, device=dev, dtype=torch.float32)) for q, _, _ in sets]
            calls = [lambda i=i: run(*sets[i], *outs[i]) for i in range(4)]
        else:
            calls = [lambda i=i: sdpa(*sets[i], causal) for i in range(4)]
        return calls, flop, f"rel. error {err:.2e}"
    import tilecraft
    from tilecraft.bench import gemm as bg
    m, n, k, layout = p
    flop = 2.0 * m * n * k
    a, bm = bg.make_operands(m, n, k, "bf16", layout, dev)[:2]
    ref = a.double() @ bm.double()
    fn = (lambda x, y: tilecraft.matmul(x, y)) if impl == "ours" else (lambda x, y: torch.matmul(x, y))
    got = fn(a, bm).double()
    err = ((got - ref).norm() / ref.norm()).item()
    if not err < 1e-2:
        raise SystemExit(f"{case} {impl}: check failed: relative error {err:.2e}")
    sets = [bg.make_operands(m, n, k, "bf16", layout, dev)[:2] for _ in range(4)]
    calls = [lambda i=i: fn(*sets[i]) for i in range(4)]
    return calls, flop, f"rel. error {err:.2e}"


def loop(case: str, impl: str, seconds: float) -> dict:
    calls, flop, check = build(case, impl)
    for c in calls * 3:
        c()
    torch.cuda.synchronize()
    fields = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "50",
                            "-i", str(torch.cuda.current_device())],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.3)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 0
    t0 = time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            calls[n % 4]()
            n += 1
        if n % 64 == 0:
            torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    out, _ = smi.communicate()
    ms = start.elapsed_time(end) / n
    rows = [r.split(", ") for r in out.strip().splitlines() if r.count(",") == 4]
    # drop the first 10 samples (the loop ramping up), keep the loop's span
    rows = rows[10:] or rows
    def med(j):
        vals = [float(r[j]) for r in rows if r[j].replace(".", "", 1).isdigit()]
        return statistics.median(vals) if vals else None
    reasons = sorted({r[4] for r in rows})
    import triton

    from tilecraft.bench.harness import git_commit
    rec = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "commit": git_commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "case": case, "impl": impl, "calls": n, "ms_per_call": ms, "TFLOPs": flop / ms / 1e9,
           "sm_clock_MHz": med(0), "mem_clock_MHz": med(1), "power_W": med(2), "temp_C": med(3),
           "throttle_reasons": reasons, "samples": len(rows), "check": check}
    print(json.dumps(rec), flush=True)
    return rec


def once(case: str, impl: str) -> None:
    calls, _, check = build(case, impl)
    for c in calls * 3:
        c()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    calls[0]()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"{case} {impl}: {check}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["loop", "once"])
    ap.add_argument("--case", choices=sorted(CASES), required=True)
    ap.add_argument("--impl", choices=["ours", "peer"], required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args(argv)
    if a.mode == "loop":
        loop(a.case, a.impl, a.seconds)
    else:
        once(a.case, a.impl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
