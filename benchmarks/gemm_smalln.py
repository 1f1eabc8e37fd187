"""Small N (a matrix times a few vectors: N <= 64, M = K large) on the configuration ``matmul`` chooses, against the
same product run transposed (``matmul(b.mT, a.mT).mT``: the small-M path on C^T = B^T A^T) and against torch, in one
run. Every variant is checked against float64 first; medians over four rotated input sets (each past the L2), per-call
events with the launch hidden (``harness.time_rotating``), each side settled 0.3 s first.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_smalln.py --out DIR [--ns 1,16,32,64] [--mk 4096,8192]
        [--epilogue none|bias|c]

With ``--epilogue bias`` (a bias along N) or ``c`` (beta * C, beta = 1) the peer is ``torch.addmm`` and the variant
"ours own tiles" pins the configuration the rule gave before such calls ran transposed (the product's own tiles).
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
from tilecraft.tuning import gemm as tg  # noqa: E402


def _transposed(a, b, kw):
    swapped = {**kw, "scale_a": kw.get("scale_b"), "scale_b": kw.get("scale_a")}
    return ops.matmul(b.mT, a.mT, **{k: v for k, v in swapped.items() if v is not None}).mT


_OWN: dict = {}


def _own_tiles(a, b, kw):
    """``matmul`` on the configuration the rule gives without the small-N transpose (cached per shape)."""
    spec = ops.validate(a, b, **kw)
    key = (tuple(a.shape), tuple(a.stride()), tuple(b.shape), tuple(b.stride()), spec.has_c, spec.has_bias)
    if key not in _OWN:
        real = tg.small_n_transposed
        tg.small_n_transposed = lambda p: False
        try:
            _OWN[key] = tg.heuristic(ops.problem_of(a, b, spec))
        finally:
            tg.small_n_transposed = real
    return ops.compute(a, b, spec, kw.get("c"), kw.get("bias"), kw.get("scale_a"), kw.get("scale_b"), cfg=_OWN[key])


def _torch(a, b, kw, dtype):
    if "bias" in kw:
        return torch.addmm(kw["bias"], a, b)
    if "c" in kw:
        return torch.addmm(kw["c"], a, b, beta=kw["beta"])
    return peer(dtype, a, b, kw)[1]()


VARIANTS = {
    "torch": _torch,
    "ours": lambda a, b, kw, dtype: ops.matmul(a, b, **kw),
    "ours transposed": lambda a, b, kw, dtype: _transposed(a, b, kw),
    "ours own tiles": lambda a, b, kw, dtype: _own_tiles(a, b, kw),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--ns", default="1,16,32,64")
    ap.add_argument("--mk", default="4096,8192")
    ap.add_argument("--layouts", default="NN,NT,TN,TT")
    ap.add_argument("--variants", default="torch,ours,ours transposed")
    ap.add_argument("--epilogue", default="none", choices=("none", "bias", "c"))
    ap.add_argument("--dtype", default="bf16", help="bf16, fp16 or fp8 (torch._scaled_mm: NT, N a multiple of 16)")
    ap.add_argument("--budget", type=float, default=0.5)
    args = ap.parse_args()
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    variants = args.variants.split(",")
    if args.epilogue != "none":  # ``matmul(b.mT, a.mT)`` has no bias along its rows: "ours" runs that transpose
        variants = [v for v in variants if v != "ours transposed"]
    records = []
    for mk in [int(x) for x in args.mk.split(",")]:
        for n in [int(x) for x in args.ns.split(",")]:
            for lay in args.layouts.split(","):
                gen = torch.Generator("cuda").manual_seed(n * 7 + mk)
                sets = [make_operands(mk, n, mk, args.dtype, lay, "cuda", gen) for _ in range(4)]
                a, b = sets[0]
                kw = call_kwargs(args.dtype, mk, n, "cuda")
                if args.epilogue == "bias":
                    kw["bias"] = (torch.rand(n, device="cuda", generator=gen) * 2 - 1).to(a.dtype)
                elif args.epilogue == "c":
                    kw.update(c=(torch.rand(mk, n, device="cuda", generator=gen) * 2 - 1).to(a.dtype), beta=1.0)
                ref = matmul_reference(a, b, out_dtype=torch.float64,
                                       **{k: v for k, v in kw.items() if k in ("scale_a", "scale_b", "bias", "c", "beta")})
                size = a.element_size()
                nbytes = size * (mk * mk + mk * n) + 2 * mk * n * (2 if args.epilogue == "c" else 1)
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
                        if v == "ours own tiles":
                            cfg = next(c_.short() for k_, c_ in _OWN.items() if k_[0] == tuple(a.shape))
                        else:
                            spec = ops.validate(x, y, **{**kw, **{k: v_ for k, v_ in skw.items() if v_ is not None}})
                            cfg = ops.choose_config(x, y, spec, **skw).short()
                    bw = nbytes / (t.median_ms * 1e-3) / 1e12
                    records.append(Record(suite="gemm.smalln", case={"m": mk, "n": n, "k": mk, "layout": lay,
                                                                      "dtype": args.dtype, "variant": v,
                                                                      "epilogue": args.epilogue},
                                          metric="bytes moved", unit="TB/s", ours=bw, ceiling="copy",
                                          ceiling_value=copy, extra={"us": times[v], "rel_err": err, "config": cfg}))
                line = "  ".join(f"{v} {times[v]:7.2f} us {nbytes / (times[v] * 1e-6) / 1e12 / copy:6.1%}"
                                 for v in variants)
                ratio = "  ".join(f"{v}/torch x{times['torch'] / times[v]:.3f}" for v in variants
                                  if v != "torch" and "torch" in times)
                print(f"{mk}x{n}x{mk} {lay}  {line}  {ratio}", flush=True)
    stamp(records, info)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "gemm.smalln", args.out / f"gemm-smalln-{args.dtype}-{args.epilogue}.json", info, meta={"copy_TBps": copy})
    return 0


if __name__ == "__main__":
    sys.exit(main())
