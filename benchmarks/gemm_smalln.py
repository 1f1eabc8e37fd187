"""Small N (a matrix times a few vectors: N <= 64, M = K large) on the configuration ``matmul`` chooses, against the
same product run transposed (``matmul(b.mT, a.mT).mT``: the small-M path on C^T = B^T A^T) and against torch, in one
run. Every variant is checked against float64 first; medians over four rotated input sets (each past the L2), per-call
events with the launch hidden (``harness.time_rotating``), each side settled 0.3 s first.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_smalln.py --out DIR [--ns 1,16,32,64] [--mk 4096,8192]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("TILECRAFT_TUNE", "0")

from tilecraft.bench.gemm import call_kwargs, make_operands, peer  # noqa: E402
from tilecraft.bench.harness import Record, stamp, time_rotating, write_results  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import gemm as ops  # noqa: E402
from tilecraft.reference.gemm import matmul_reference  # noqa: E402


def _transposed(a, b, kw):
    swapped = {**kw, "scale_a": kw.get("scale_b"), "scale_b": kw.get("scale_a")}
    return ops.matmul(b.mT, a.mT, **{k: v for k, v in swapped.items() if v is not None}).mT


VARIANTS = {
    "torch": lambda a, b, kw, dtype: peer(dtype, a, b, kw)[1](),
    "ours": lambda a, b, kw, dtype: ops.matmul(a, b, **kw),
    "ours transposed": lambda a, b, kw, dtype: _transposed(a, b, kw),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--ns", default="1,16,32,64")
    ap.add_argument("--mk", default="4096,8192")
    ap.add_argument("--layouts", default="NN,NT,TN,TT")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dtype", default="bf16", help="bf16, fp16 or fp8 (torch._scaled_mm: NT, N a multiple of 16)")
    ap.add_argument("--budget", type=float, default=0.5)
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    variants = args.variants.split(",")
    records = []
    for mk in [int(x) for x in args.mk.split(",")]:
        for n in [int(x) for x in args.ns.split(",")]:
            for lay in args.layouts.split(","):
                gen = torch.Generator("cuda").manual_seed(n * 7 + mk)
                sets = [make_operands(mk, n, mk, args.dtype, lay, "cuda", gen) for _ in range(4)]
                a, b = sets[0]
                kw = call_kwargs(args.dtype, mk, n, "cuda")
                ref = matmul_reference(a, b, out_dtype=torch.float64, scale_a=kw.get("scale_a"),
                                       scale_b=kw.get("scale_b"))
                size = a.element_size()
                nbytes = size * (mk * mk + mk * n) + 2 * mk * n
                times = {}
                for v in variants:
                    got = VARIANTS[v](a, b, kw, args.dtype).double()
                    err = float((got - ref).abs().max() / ref.abs().max())
                    if not err < 2e-2:
                        raise SystemExit(f"{mk}x{n}x{mk} {lay} {v}: wrong result (rel err {err})")
                    fn = VARIANTS[v]
                    t = time_rotating(lambda i, fn=fn: fn(*sets[i % 4], kw, args.dtype), 4, budget_s=args.budget,
                                      min_runs=20, settle_s=0.3)
                    times[v] = t.median_ms * 1e3
                    cfg = ""
                    if v != "torch":
                        x, y = (b.mT, a.mT) if "transposed" in v else (a, b)
                        skw = {"scale_a": kw.get("scale_b"), "scale_b": kw.get("scale_a")} if "transposed" in v else \
                            {"scale_a": kw.get("scale_a"), "scale_b": kw.get("scale_b")}
                        spec = ops.validate(x, y, **{**kw, **{k: v_ for k, v_ in skw.items() if v_ is not None}})
                        cfg = ops.choose_config(x, y, spec, **skw).short()
                    bw = nbytes / (t.median_ms * 1e-3) / 1e12
                    records.append(Record(suite="gemm.smalln", case={"m": mk, "n": n, "k": mk, "layout": lay,
                                                                      "dtype": args.dtype, "variant": v},
                                          metric="bytes moved", unit="TB/s", ours=bw, ceiling="copy",
                                          ceiling_value=copy, extra={"us": times[v], "rel_err": err, "config": cfg}))
                line = "  ".join(f"{v} {times[v]:7.2f} us {nbytes / (times[v] * 1e-6) / 1e12 / copy:6.1%}"
                                 for v in variants)
                ratio = "  ".join(f"{v}/torch x{times['torch'] / times[v]:.3f}" for v in variants
                                  if v != "torch" and "torch" in times)
                print(f"{mk}x{n}x{mk} {lay}  {line}  {ratio}", flush=True)
    stamp(records, info)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "gemm.smalln", args.out / f"gemm-smalln-{args.dtype}.json", info, meta={"copy_TBps": copy})
    return 0


if __name__ == "__main__":
    sys.exit(main())
