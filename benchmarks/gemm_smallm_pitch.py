"""Small M NT against TT / NN with the same tile: is NT's deficit (M = 32, N = K = 8192: 85% of copy against TT's 94%,
2026-11-30) the row pitch? With both operands K-major, every row of A and of B starts at a multiple of the same
power-of-two pitch (K * 2 bytes), so at one K step all of a program's rows sit at one offset modulo the pitch. The
variants move one operand's rows off that pitch (a view of a wider buffer), or read A as TT does (an M-major copy of
A made inside the timed call). Each is checked against float64 first; torch's NT in the same run; medians over
rotated inputs (four sets, each past the L2).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_smallm_pitch.py --out DIR [--ms 32,64] [--n 8192]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("TILECRAFT_TUNE", "0")

from tilecraft.bench.harness import Record, stamp, time_rotating, write_results  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import gemm as ops  # noqa: E402

PAD = 64  # elements (128 bytes) past each row


def _operands(m, n, k, variant, gen):
    dev = "cuda"

    def rnd(r, c, pad=0):
        x = torch.rand(r, c + pad, device=dev, generator=gen).mul_(2).sub_(1).to(torch.bfloat16)
        return x[:, :c]
    if variant.startswith("TT"):
        return rnd(k, m).t(), rnd(n, k).t()
    if variant.startswith("NN"):
        return rnd(m, k), rnd(k, n)
    a = rnd(m, k, PAD if "A+" in variant else 0)
    b = rnd(n, k, PAD if "B+" in variant else 0).t()
    return a, b


def _call(variant):
    if variant == "torch NT":
        return lambda a, b: torch.matmul(a, b)
    if variant == "NT A copied M-major":
        return lambda a, b: ops.matmul(a.t().contiguous().t(), b)
    return ops.matmul


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--ms", default="32,64")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=2, help="0: the checks only (a run for ncu -k regex:^matmul_kernel)")
    ap.add_argument("--variants", default="", help="a comma-separated subset of the variants (default: all)")
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    variants = ["torch NT", "NT", "NT A+pitch", "NT B+pitch", "NT A+B+pitch", "NT A copied M-major", "TT", "NN"]
    if args.variants:
        unknown = set(args.variants.split(",")) - set(variants)
        if unknown:
            raise SystemExit(f"unknown variants {sorted(unknown)}; known: {variants}")
        variants = [v for v in variants if v in args.variants.split(",")]
    n = k = args.n
    records = []
    for m in [int(x) for x in args.ms.split(",")]:
        gen = torch.Generator("cuda").manual_seed(m)
        sets = {v: [_operands(m, n, k, v, gen) for _ in range(4 if args.rounds else 1)] for v in variants}
        for v in variants:
            a, b = sets[v][0]
            ref = a.double() @ b.double()
            got = _call(v)(a, b).double()
            torch.cuda.synchronize()
            err = float((got - ref).abs().max() / ref.abs().max())
            cfg = "torch" if v.startswith("torch") else ops.choose_config(a, b, ops.validate(a, b)).short()
            print(f"check {m}x{n}x{k} {v:22s} rel err {err:.2e} {cfg}", flush=True)
            if not err < 2e-2:
                raise SystemExit(f"{v}: wrong result (rel err {err})")
        nbytes = 2 * (m * k + k * n + m * n)
        for rnd in range(args.rounds):
            for v in variants:
                fn = _call(v)
                t = time_rotating(lambda i, v=v, fn=fn: fn(*sets[v][i % 4]), 4, budget_s=args.budget, min_runs=20,
                                  settle_s=0.3)
                bw = nbytes / (t.median_ms * 1e-3) / 1e12
                print(f"round {rnd + 1} {m}x{n}x{k} {v:22s} {t.median_ms * 1e3:8.2f} us  {bw / copy:6.1%} of copy",
                      flush=True)
                records.append(Record(suite="gemm.smallm_pitch", case={"m": m, "n": n, "k": k, "variant": v,
                                                                        "round": rnd + 1},
                                      metric="bytes moved", unit="TB/s", ours=bw, ceiling="copy", ceiling_value=copy,
                                      extra={"bytes": nbytes, "us": t.median_ms * 1e3, "spread": t.spread}))
    if not records:
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    stamp(records, info)
    write_results(records, "gemm.smallm_pitch", args.out / "gemm-smallm-pitch.json", info, meta={"copy_TBps": copy})
    return 0


if __name__ == "__main__":
    sys.exit(main())
