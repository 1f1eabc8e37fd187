"""Where an eager call's host time goes: cProfile over a loop of calls of each public op on small
problems (the device keeps up, so the profile is the host's work), after the host time per call
unprofiled; top functions by own time and by cumulative time. GPU only.

    PYTHONPATH=src python benchmarks/host_profile.py [--op matmul,attention] [--calls 300] [--out DIR]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

import torch

import tilecraft
from tilecraft.wave import wave_step


def cases():
    g = torch.Generator(device="cuda").manual_seed(0)
    u = torch.rand(128, 128, 128, dtype=torch.float64, device="cuda", generator=g)
    out = torch.zeros_like(u)
    yield "laplacian", lambda: tilecraft.laplacian(u, out=out)
    a = torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda", generator=g)
    b = torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda", generator=g)
    yield "matmul", lambda: tilecraft.matmul(a, b)
    a1 = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda", generator=g)
    b1 = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda", generator=g)
    yield "matmul_smallm", lambda: tilecraft.matmul(a1, b1)
    q, k, v = (torch.randn(1, 8, 256, 64, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(3))
    yield "attention", lambda: tilecraft.attention(q, k, v)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    do = torch.randn_like(q)
    # forward and backward (the backward on this thread, so that cProfile sees it)
    yield "attention_train", lambda: torch.autograd.grad(tilecraft.attention(*leaves), leaves, do)
    qd = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device="cuda", generator=g)
    kd, vd = (torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16, device="cuda", generator=g) for _ in range(2))
    yield "attention_decode", lambda: tilecraft.attention(qd, kd, vd)
    # the cliff hunt's small GEMMs (benchmarks/cliff_hunt.py, 2026-12-01): eager calls 60-240 us against torch's 12-30
    def mm(name, m, n, k, dtype=torch.bfloat16, tb=False, pad=0, **kw):
        x = torch.randn(m, k + pad, device="cuda", generator=g).to(dtype)[:, :k]
        y = (torch.randn(n, k, device="cuda", generator=g).to(dtype).t() if tb else
             torch.randn(k, n + pad, device="cuda", generator=g).to(dtype)[:, :n])
        return name, lambda: tilecraft.matmul(x, y, **kw)
    yield mm("mm_bf16_256", 256, 256, 256)
    yield mm("mm_bf16_1024", 1024, 1024, 1024)
    yield mm("mm_bf16_1024_nt", 1024, 1024, 1024, tb=True)
    yield mm("mm_bf16_k16", 4096, 4096, 16)
    yield mm("mm_bf16_pad1", 2048, 2048, 2048, pad=1)
    yield mm("mm_tf32_2048", 2048, 2048, 2048, dtype=torch.float32, precision="tf32")
    yield mm("mm_fp32_512", 512, 512, 512, dtype=torch.float32)
    yield mm("mm_fp64_512", 512, 512, 512, dtype=torch.float64)
    yield mm("mm_int8_1024_nt", 1024, 1024, 1024, dtype=torch.int8, tb=True)
    p, pp = (torch.rand(64, 64, 64, device="cuda", generator=g) for _ in range(2))
    m, w_out = torch.full_like(p, 0.1), torch.empty_like(p)
    yield "wave_step", lambda: wave_step(p, pp, m, w_out, order=8)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out", default="")
    ap.add_argument("--op", default="", help="comma-separated cases (default: all)")
    ap.add_argument("--lines", type=int, default=25)
    args = ap.parse_args()
    text = []
    torch.autograd.set_multithreading_enabled(False)
    for name, fn in cases():
        if args.op and name not in args.op.split(","):
            continue
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        host = (time.perf_counter() - t0) / args.calls * 1e6
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            fn()
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        st = pstats.Stats(pr, stream=s)
        st.sort_stats("tottime").print_stats(args.lines)
        st.sort_stats("cumulative").print_stats(args.lines + 15)
        from tilecraft.ops.launch import _CACHES
        why = sorted({e for c in _CACHES for e in c._entries.values() if type(e) is str})
        block = (f"===== {name}: host {host:.1f} us per call (unprofiled); not replayed so far: {why}\n"
                 + s.getvalue())
        print(block, flush=True)
        text.append(block)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "host-profile.txt").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
