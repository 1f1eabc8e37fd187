"""Host time per call of tilecraft's public ops against the torch call for the same work, with the
device's time per call beside it (a call whose host time exceeds its device time is host-bound in a
loop of eager calls). Host time: a loop of ``--calls`` enqueues on small problems, divided by the
count (the device keeps up, so nothing waits); device time: ``time_rotating`` (device kept busy while
the host enqueues). Every op is checked against torch first. ``--rounds N``: the host time of each op
taken N times alternately with recorded launches replayed (the default) and with ``TILECRAFT_REPLAY=0``
(every call planned), medians of both in the record; ``--lean-ab`` adds each round with ``ops.launch.LEAN`` off
(a replay through ``CompiledKernel.run``, as before the thirty-fifth session).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/host_overhead.py --out $OUT --tag=-<hash>
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import tilecraft
from tilecraft.wave import wave_step
from tilecraft.bench.harness import Record, time_rotating, write_results
from tilecraft.hardware.device import detect
from tilecraft.ops import launch
from tilecraft.reference.stencil import laplacian_torch


def host_us(fn, calls: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def cases():
    g = torch.Generator(device="cuda").manual_seed(0)
    u = torch.rand(128, 128, 128, dtype=torch.float64, device="cuda", generator=g)
    out = torch.zeros_like(u)
    yield ("laplacian fp64 o2 128^3 (out=)", lambda: tilecraft.laplacian(u, out=out),
           lambda: laplacian_torch(u, 2, (1.0, 1.0, 1.0), out), lambda: (tilecraft.laplacian(u, out=out), laplacian_torch(u, 2, (1.0,) * 3)))
    a = torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda", generator=g)
    b = torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda", generator=g)
    yield ("matmul bf16 1000^3", lambda: tilecraft.matmul(a, b), lambda: torch.matmul(a, b),
           lambda: (tilecraft.matmul(a, b).float(), a.double().matmul(b.double()).float()))
    q, k, v = (torch.randn(1, 8, 256, 64, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(3))
    a1 = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda", generator=g)
    b1 = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda", generator=g)
    yield ("matmul bf16 16x4096x4096", lambda: tilecraft.matmul(a1, b1), lambda: torch.matmul(a1, b1),
           lambda: (tilecraft.matmul(a1, b1).float(), a1.double().matmul(b1.double()).float()))
    qd = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device="cuda", generator=g)
    kd, vd = (torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(2))
    yield ("attention decode bf16 H32/8 S1x4096 D128", lambda: tilecraft.attention(qd, kd, vd),
           lambda: F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True),
           lambda: (tilecraft.attention(qd, kd, vd).float(),
                    F.scaled_dot_product_attention(qd.float(), kd.float(), vd.float(), enable_gqa=True)))
    yield ("attention bf16 B1 H8 S256 D64", lambda: tilecraft.attention(q, k, v),
           lambda: F.scaled_dot_product_attention(q, k, v),
           lambda: (tilecraft.attention(q, k, v).float(), F.scaled_dot_product_attention(q.float(), k.float(),
                                                                                        v.float())))
    # a training step's attention: forward and backward, autograd recording (eager: tilecraft's autograd
    # function; "op": the registered torch.library op, as torch.compile and the modes see it)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    do = torch.randn_like(q)

    def train(fwd):
        return lambda: torch.autograd.grad(fwd(*leaves), leaves, do)
    eager = train(lambda q, k, v: tilecraft.attention(q, k, v))
    via_op = train(lambda q, k, v: torch.ops.tilecraft.attention_fwd(q, k, v, None, None, 256, 256, False, 0.125,
                                                                      "bhsd", True)[0])  # D64: deterministic, as the default
    sdpa = train(F.scaled_dot_product_attention)
    ref = lambda: torch.autograd.grad(F.scaled_dot_product_attention(*[t.float() for t in leaves]), leaves,  # noqa: E731
                                      do.float())[0].float()
    yield ("attention fwd+bwd bf16 B1 H8 S256 D64", eager, sdpa, lambda: (eager()[0].float(), ref()))
    yield ("attention fwd+bwd (registered op)", via_op, sdpa, lambda: (via_op()[0].float(), ref()))
    p, pp = (torch.rand(64, 64, 64, device="cuda", generator=g) for _ in range(2))
    m = torch.full_like(p, 0.1)
    w_out = torch.empty_like(p)
    yield ("wave_step fp32 o8 64^3 (out=)", lambda: wave_step(p, pp, m, w_out, order=8), None,
           None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--tag", default="")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=1, help="host times per op, replay on and off alternately")
    ap.add_argument("--lean-ab", action="store_true",
                    help="also each round with ops.launch.LEAN off (replays through CompiledKernel.run)")
    args = ap.parse_args()
    info = detect()
    records = []
    for name, ours, peer, check in cases():
        if check is not None:
            got, ref = check()
            err = float((got.double() - ref.double()).norm() / ref.double().norm())
            assert err < 2e-2, (name, err)
        on, off, lean_off = [], [], []
        for _ in range(args.rounds):
            on.append(host_us(ours, args.calls))
            if args.lean_ab:
                launch.LEAN = False
                lean_off.append(host_us(ours, args.calls))
                launch.LEAN = True
            if args.rounds > 1:
                os.environ["TILECRAFT_REPLAY"] = "0"
                off.append(host_us(ours, args.calls))
                del os.environ["TILECRAFT_REPLAY"]
        h_ours = statistics.median(on)
        h_off = statistics.median(off) if off else float("nan")
        d_ours = time_rotating(lambda _i: ours(), 1, budget_s=0.3).median_ms * 1e3
        h_peer = host_us(peer, args.calls) if peer else float("nan")
        d_peer = time_rotating(lambda _i: peer(), 1, budget_s=0.3).median_ms * 1e3 if peer else float("nan")
        h_lean_off = statistics.median(lean_off) if lean_off else float("nan")
        print(f"{name:42s} host {h_ours:6.1f} us (planned every call {h_off:6.1f}; lean off {h_lean_off:6.1f}; "
              f"torch {h_peer:6.1f})  device {d_ours:7.1f} us (torch {d_peer:7.1f})", flush=True)
        records.append(Record("host_overhead", {"case": name}, "host_time", "us", h_ours, peer="torch",
                              peer_value=h_peer, extra={"device_us": d_ours, "peer_device_us": d_peer,
                                                        "calls": args.calls, "rounds": args.rounds,
                                                        "host_us_rounds": on, "planned_host_us": h_off,
                                                        "planned_host_us_rounds": off,
                                                        "lean_off_host_us": h_lean_off,
                                                        "lean_off_host_us_rounds": lean_off}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_results(records, "host_overhead", out / f"host-overhead{args.tag}.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
