"""16-bit products on the sm90 Gluon kernel with the operands' roles swapped (``GemmConfig.swap_ab``: C^T =
B^T A^T, each tile stored transposed), against the configuration ``matmul`` chooses, in turn (the order
rotating by round), torch in the same round; CUDA graphs of calls over rotated input sets
(``bench.time_graph``).

Why: on an H200 the bf16 1000^3 TT product measured 0.76x torch against 0.84-0.87x for NN, NT and TN with
the same tile (benchmarks/results/2026-11-27-h200/gemm-prefetch-*). Swapped, TT runs with NN's operand
layouts (A K-major, B MN-major).

Each configuration is checked against float64 on the timed shape first (``bench.run_case``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_swap.py --out $OUT [--rounds 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402
from gemm_explore import start  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.bench.harness import write_results  # noqa: E402
from tilecraft.ops import gemm as ops  # noqa: E402

C = bench.Case
CASES = ([C("bf16", s, s, s, lay) for s in (1000, 2048) for lay in ("TT", "NN", "NT", "TN")]
         + [C("fp16", 1000, 1000, 1000, lay) for lay in ("TT", "NN")]
         + [C("bf16", 512, 512, 512, "TT"), C("bf16", 4096, 4096, 4096, "TT"), C("bf16", 8192, 8192, 8192, "TT"),
            C("fp16", 8192, 8192, 8192, "TT"), C("bf16", 3000, 7000, 5000, "TT"), C("bf16", 4096, 11008, 4096, "TT"),
            C("bf16", 128, 4096, 14336, "TT"), C("bf16", 997, 1009, 1013, "TT")])


def chosen(case) -> ops.GemmConfig | None:
    """The configuration ``matmul`` takes for the case here (the heuristic: tuning is off)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b = bench.make_operands(case.m, case.n, case.k, case.dtype, case.layout, "cuda", gen)
    kw = bench.call_kwargs(case.dtype, case.m, case.n, "cuda")
    spec = ops.validate(a, b, **kw)
    return ops.choose_config(a, b, spec)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="keep the cases whose name contains this")
    args = ap.parse_known_args()[0]
    out, log, info = start("gemm-swap")
    records, summary = [], {}
    for case in [c for c in CASES if args.only in c.name]:
        base = chosen(case)
        if base.kernel != "gluon":
            log(f"{case.name}: matmul takes {base.short()}, not the Gluon kernel: swapped on Gluon's default tile")
        variants = {"default": base, "swap": dataclasses.replace(base, swap_ab=True) if base.kernel == "gluon"
                    else ops.GemmConfig("gluon", 128, 256, 64, group_m=8, num_warps=8, num_stages=3, swap_ab=True)}
        names = list(variants)
        for r in range(args.rounds):
            peer_ms = None
            for name in names[r % 2:] + names[:r % 2]:
                cfg = variants[name]
                try:
                    rec = bench.run_case(case, info, cfg=cfg, budget_s=0.3, peer_ms=peer_ms)
                except Exception as exc:  # noqa: BLE001 - one failed case must not stop the others
                    log(f"{case.name} {name}: {type(exc).__name__}: {str(exc)[:300]}")
                    continue
                rec.extra.update(group=f"round{r}", variant=name)
                records.append(rec)
                if rec.extra.get("failed"):
                    log(f"{case.name:26s} {name:7s} FAILED rel err {rec.extra['rel_err']:.1e}")
                    continue
                peer_ms = peer_ms or rec.extra["peer_time_ms"]
                log(f"{case.name:26s} {name:7s} {cfg.short():40s} {rec.extra['time_ms'] * 1e3:9.2f} us "
                    f"{rec.peer} {peer_ms * 1e3:9.2f} us x{rec.ratio:.3f} err {rec.extra['rel_err']:.1e}")
                summary.setdefault((case.name, name), []).append(rec.ratio)
    for (cname, name), rs in summary.items():
        log(f"{cname:26s} {name:7s} ratios {' '.join(f'{x:.3f}' for x in rs)} median {statistics.median(rs):.3f}")
    write_results(records, "gemm-swap", out / "gemm-swap.json", info)
    log("done")


if __name__ == "__main__":
    main()
