"""A linear layer's training step, forward and backward, through ``tilecraft.matmul`` (its autograd:
dA = dZ Bᵀ, dB = Aᵀ dZ by tilecraft's own products, dZ from one more product for gelu/silu) against torch's
``act(F.linear(x, W, bias))`` with autograd, in one process, alternating rounds. Gradients are checked against
float32 torch first. TFLOP/s counts 6 M N K (the forward and two backward products) for both.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_train.py --out $OUT --tag=-<hash>
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import tilecraft
from tilecraft.bench.harness import Record, time_rotating, write_results
from tilecraft.hardware.device import detect

CASES = {  # name: (M tokens, K in, N out, activation, bias)
    "4096x4096x4096": (4096, 4096, 4096, None, False),
    "mlp-up-gelu": (4096, 4096, 11008, "gelu", True),
    "mlp-down": (4096, 11008, 4096, None, True),
    "512x4096x4096-silu": (512, 4096, 4096, "silu", True),
}
ACTS = {None: lambda x: x, "gelu": F.gelu, "silu": F.silu, "relu": torch.relu}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--tag", default="")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sets", type=int, default=2)
    ap.add_argument("--parts", action="store_true", help="also time the step's three products apart (no autograd)")
    args = ap.parse_args()
    info = detect()
    records = []
    g = torch.Generator(device="cuda").manual_seed(0)
    for name in args.cases.split(","):
        m, k, n, act, has_bias = CASES[name]
        sets = []
        for _ in range(args.sets):
            x = (torch.randn(m, k, device="cuda", generator=g) / 2).to(torch.bfloat16).requires_grad_()
            w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).to(torch.bfloat16).requires_grad_()
            bias = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16).requires_grad_() if has_bias else None
            dy = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
            sets.append((x, w, bias, dy))
        leaves = lambda s: [t for t in s[:3] if t is not None]  # noqa: E731

        def ours(i):
            x, w, bias, dy = sets[i]
            return torch.autograd.grad(tilecraft.matmul(x, w.t(), bias=bias, activation=act), leaves(sets[i]), dy)

        def peer(i):
            x, w, bias, dy = sets[i]
            return torch.autograd.grad(ACTS[act](F.linear(x, w, bias)), leaves(sets[i]), dy)

        x, w, bias, dy = sets[0]
        ref_leaves = [t.detach().float().requires_grad_() for t in leaves(sets[0])]
        ref = torch.autograd.grad(ACTS[act](F.linear(*ref_leaves[:2], ref_leaves[2] if has_bias else None)),
                                  ref_leaves, dy.float())
        errs = {}
        for label, fn in (("ours", ours), ("torch", peer)):
            got = fn(0)
            errs[label] = [float((a.float() - r).norm() / r.norm()) for a, r in zip(got, ref)]
        assert max(errs["ours"]) < 2e-2, (name, errs)
        t_ours, t_peer = [], []
        for _ in range(args.rounds):
            t_ours.append(time_rotating(ours, args.sets, budget_s=1.5).median_ms)
            t_peer.append(time_rotating(peer, args.sets, budget_s=1.5).median_ms)
        mo, mp = statistics.median(t_ours), statistics.median(t_peer)
        if args.parts:  # forward x Wᵀ (NT), dX = dZ W (NN), dW-shaped xᵀ dZ (TN), each against torch's product
            with torch.no_grad():
                for part, (fa, fb) in {"fwd NT": (lambda s: s[0], lambda s: s[1].t()),
                                       "dX NN": (lambda s: s[3], lambda s: s[1]),
                                       "dW TN": (lambda s: s[0].t(), lambda s: s[3])}.items():
                    po = statistics.median(time_rotating(lambda i: tilecraft.matmul(fa(sets[i]), fb(sets[i])),
                                                         args.sets, budget_s=1.0).median_ms for _ in range(2))
                    pp = statistics.median(time_rotating(lambda i: fa(sets[i]) @ fb(sets[i]),
                                                         args.sets, budget_s=1.0).median_ms for _ in range(2))
                    print(f"    {part}: ours {po:.3f} ms, torch {pp:.3f} ms, ratio {pp / po:.3f}", flush=True)
        tflops = lambda ms: 6 * m * n * k / (ms * 1e-3) / 1e12  # noqa: E731
        print(f"{name:22s} ours {mo:7.3f} ms ({tflops(mo):5.0f} TFLOP/s)  torch {mp:7.3f} ms ({tflops(mp):5.0f})  "
              f"ratio {mp / mo:.3f}  grad errors ours {max(errs['ours']):.1e} torch {max(errs['torch']):.1e}",
              flush=True)
        records.append(Record("gemm_train", {"case": name, "m": m, "k": k, "n": n, "activation": act,
                                             "bias": has_bias, "dtype": "bf16"},
                              "tflops", "TFLOP/s", tflops(mo), peer="torch F.linear + autograd",
                              peer_value=tflops(mp),
                              extra={"ms": mo, "peer_ms": mp, "ms_rounds": t_ours, "peer_ms_rounds": t_peer,
                                     "grad_rel_err": errs}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_results(records, "gemm_train", out / f"gemm-train{args.tag}.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
