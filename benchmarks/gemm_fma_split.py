"""fp32 ``ieee`` products that leave SMs idle (issue 3: fp32 ieee >= 0.9x cuBLAS fp32): M = 64 (32 output
tiles of 64x128 on 132 SMs: 0.25x), 1000^3 (128 tiles, one 4-warp block per SM: 0.64x), and small M,
on the Gluon FMA kernel with split-K (the partials' reduce launch runs the epilogue) against the
current heuristic and cuBLAS fp32 (TF32 off), in one run.

Each configuration is checked against float64 on the timed shape (``bench.run_case``) before it is
timed; ours and cuBLAS from CUDA graphs over rotated input sets; ``--rounds`` rounds, variants in turn.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_fma_split.py --out $OUT [--rounds 2] [--suite sweep]

``--suite heuristic`` (after ``tuning.gemm.split_to_fill`` and ``FP32_SMALL_M`` became the heuristic):
what ``matmul`` picks without tuning over M = 1..256 at N = K = 4096, 1000^3 in every layout, 512^3,
2048^3, batches and the big squares it must leave alone, plus M = 1 alternatives.
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

from gemm_explore import start  # noqa: E402

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.bench.harness import write_results  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.tuning.gemm import FMA_HEURISTIC, FMA_SMALL_M, GemmConfig  # noqa: E402

F = GemmConfig
T64 = F("fma", 64, 64, 32, num_warps=2, num_stages=3, warps_m=2)
T128x64 = F("fma", 128, 64, 32, num_warps=4, num_stages=3, warps_m=4)


def sp(cfg: GemmConfig, s: int) -> GemmConfig:
    return dataclasses.replace(cfg, split_k=s)


def variants(m: int) -> list[GemmConfig | None]:
    if m <= 64:
        out = [None] + [sp(FMA_SMALL_M, s) for s in (2, 4, 8)] + [sp(FMA_HEURISTIC, s) for s in (2, 4, 8)]
        out += [sp(T64, s) for s in (1, 2, 4)]
        if m <= 16:
            out += [F("pointer", 16, 64, 64, group_m=1, num_warps=4, num_stages=4, split_k=s) for s in (1, 2, 4)]
        return out
    return [None, sp(FMA_HEURISTIC, 2), sp(FMA_HEURISTIC, 3), sp(FMA_HEURISTIC, 4), sp(FMA_SMALL_M, 2),
            T64, sp(T64, 2), T128x64, sp(T128x64, 2), F("fma", 64, 128, 16, num_warps=4, num_stages=4, warps_m=2)]


def sweep(plan, rounds: int, info, copy: float, log) -> list:
    """Run ``plan`` ((case, [configs; None: the heuristic]) pairs) ``rounds`` times, the configurations
    in turn, cuBLAS timed once per case and round; log each and the medians; the records."""
    records = []
    summary: dict[tuple[str, str], list[float]] = {}
    for case, cfgs in plan:
        for r in range(rounds):
            peer_ms = None
            for cfg in cfgs:
                try:
                    rec = bench.run_case(case, info, copy_TBps=copy, cfg=cfg, budget_s=0.3, peer_ms=peer_ms)
                except Exception as exc:  # noqa: BLE001 - one failed variant must not stop the others
                    log(f"{case.name} {cfg}: {type(exc).__name__}: {str(exc)[:300]}")
                    continue
                name = "heuristic " + GemmConfig.from_dict(rec.extra["config"]).short() if cfg is None else cfg.short()
                rec.extra["group"] = f"round{r}"
                records.append(rec)
                if rec.extra.get("failed"):
                    log(f"{case.name:26s} {name:48s} FAILED rel err {rec.extra['rel_err']:.1e}")
                    continue
                peer_ms = peer_ms or rec.extra["peer_time_ms"]
                frac = rec.extra["bytes"] / (rec.extra["time_ms"] * 1e-3) / 1e12 / copy
                log(f"{case.name:26s} {name:48s} {rec.extra['time_ms'] * 1e3:9.1f} us {rec.peer} "
                    f"{rec.extra['peer_time_ms'] * 1e3:9.1f} us x{rec.ratio:.3f} {100 * frac:5.1f}% of copy "
                    f"err {rec.extra['rel_err']:.1e}")
                summary.setdefault((case.name, name), []).append((rec.ratio, frac))
    for (case, name), rs in summary.items():
        log(f"{case:26s} {name:48s} ratios {' '.join(f'{x:.3f}' for x, _ in rs)} median "
            f"{statistics.median(x for x, _ in rs):.3f}, % of copy {statistics.median(f for _, f in rs) * 100:.1f}")
    return records


def run_suite(name: str, plan, default_rounds: int = 2) -> None:
    """A whole benchmark run for the small GEMM scripts: ``--rounds``, the device line, the copy bandwidth,
    :func:`sweep` over ``plan()`` ((case, configs) pairs), ``<name>.json`` and ``<name>.log`` under ``--out``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=default_rounds)
    rounds = ap.parse_known_args()[0].rounds
    out, log, info = start(name)
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    records = sweep(plan(), rounds, info, copy, log)
    write_results(records, name, out / f"{name}.json", info, meta={"copy_TBps": copy})
    log("done")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--suite", choices=["sweep", "heuristic", "mid", "midcheck", "midm"], default="sweep")
    ap.add_argument("--rounds-only-small", action="store_true", help="heuristic suite: M = 1, 24, 32 and 2048^3 only")
    args = ap.parse_known_args()[0]
    rounds = args.rounds
    out, log, info = start(f"gemm-fma-{ {'sweep': 'split'}.get(args.suite, args.suite)}")
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    cases = [bench.Case("fp32", 64, 4096, 4096), bench.Case("fp32", 1000, 1000, 1000), bench.Case("fp32", 16, 4096, 4096),
             bench.Case("fp32", 1, 4096, 4096), bench.Case("fp32", 64, 11008, 4096), bench.Case("fp32", 1000, 1000, 1000, "NT"),
             bench.Case("fp32", 512, 512, 512), bench.Case("fp32", 2048, 2048, 2048), bench.Case("fp32", 128, 4096, 4096)]
    pick = variants
    if args.suite == "heuristic":
        cases = [bench.Case("fp32", m, 4096, 4096) for m in (1, 8, 16, 32, 48, 64, 96, 128, 256)]
        cases += [bench.Case("fp32", 1000, 1000, 1000, lay) for lay in ("NN", "NT", "TN", "TT")]
        cases += [bench.Case("fp32", 512, 512, 512), bench.Case("fp32", 2048, 2048, 2048),
                  bench.Case("fp32", 64, 11008, 4096), bench.Case("fp32", 16, 14336, 4096),
                  bench.Case("fp32", 256, 256, 1024), bench.Case("fp32", 4096, 4096, 4096),
                  bench.Case("fp32", 3000, 7000, 5000)]
        cases += [bench.Case("fp32", 4096, 4096, 4096, lay) for lay in ("NT", "TN", "TT")]
        cases += [bench.Case("fp32", 8192, 8192, 8192, lay) for lay in ("NN", "NT")]
        cases += [bench.Case("fp32", 3000, 7000, 5000, "TT"), bench.Case("fp32", 4096, 11008, 4096, "NT"),
                  bench.Case("fp32", 2048, 2048, 2048, "NT"), bench.Case("fp32", 2048, 2048, 2048, "TT"),
                  bench.Case("fp32", 1536, 1536, 1536), bench.Case("fp32", 1024, 4096, 4096)]
        small = [F("pointer", 16, 64, 64, group_m=1, num_warps=4, num_stages=4, split_k=s) for s in (8, 16)]
        small += [F("pointer", 16, 32, 128, group_m=1, num_warps=4, num_stages=4, split_k=s) for s in (4, 8)]
        small += [F("pointer", 16, 128, 64, group_m=1, num_warps=8, num_stages=4, split_k=s) for s in (4, 8)]
        small += [F("pointer", 16, 64, 64, group_m=1, num_warps=4, num_stages=6, split_k=4)]

        mid = [F("pointer", 32, 64, 64, group_m=1, num_warps=4, num_stages=4, split_k=s) for s in (2, 4, 8)]
        mid += [F("pointer", 32, 32, 128, group_m=1, num_warps=4, num_stages=4, split_k=s) for s in (4, 8)]
        if args.rounds_only_small:
            cases = [c for c in cases if c.m in (1, 32, 2048)] + [bench.Case("fp32", 24, 4096, 4096),
                                                               bench.Case("fp32", 32, 11008, 4096)]

        def pick(m):
            if m == 2048:
                return [None, T64]
            return [None] + (small if m == 1 else []) + (mid if 16 < m <= 32 else [])
    if args.suite == "mid":  # a few waves of 64x128 tiles: the 64x64 tile at 2 warps, split or not
        cases = [bench.Case("fp32", 2048, 2048, 2048, lay) for lay in ("NN", "NT", "TT")]
        cases += [bench.Case("fp32", m, n, k) for m, n, k in ((1024, 4096, 4096), (1536, 1536, 1536), (3072, 3072, 3072),
                                                             (512, 4096, 4096), (256, 4096, 4096), (2048, 4096, 1024))]

        def pick(m):
            return [None, T64, sp(T64, 2), sp(FMA_HEURISTIC, 2), F("fma", 64, 64, 32, num_warps=2, num_stages=4, warps_m=2)]
    if args.suite == "midcheck":  # the heuristic for a few waves against the unsplit 64x128 tile it replaced
        cases = [bench.Case("fp32", m, n, k, lay) for m, n, k, lay in (
            (2048, 2048, 2048, "NN"), (2048, 2048, 2048, "TT"), (1792, 1792, 1792, "NN"), (1024, 3072, 4096, "NN"),
            (2048, 2048, 4096, "NN"), (1536, 1536, 1536, "NN"), (1536, 1536, 1536, "TT"), (1280, 4096, 2048, "NN"),
            (2048, 4096, 1024, "NN"), (1024, 4096, 4096, "NT"))]

        def pick(m):
            return [None, FMA_HEURISTIC]
    if args.suite == "midm":  # M = 96-384 at N = K = 4096 (0.88-0.89x): other tiles and splits
        cases = [bench.Case("fp32", m, 4096, 4096) for m in (96, 128, 192, 256, 384)] + [bench.Case("fp32", 64, 11008, 4096)]
        T128 = F("fma", 128, 128, 32, num_warps=8, num_stages=3)

        def pick(m):
            return ([None] + [sp(FMA_HEURISTIC, s) for s in (2, 4, 8)] + [sp(T64, s) for s in (1, 2, 4)]
                    + [sp(T128, s) for s in (2, 4)] + [sp(T128x64, s) for s in (2, 4)])
    records = sweep([(c, pick(c.m)) for c in cases], rounds, info, copy, log)
    name = "gemm-fma-" + {"sweep": "split"}.get(args.suite, args.suite)
    write_results(records, name, out / f"{name}.json", info, meta={"copy_TBps": copy})
    log("done")


if __name__ == "__main__":
    main()
