"""Small-M GEMM (issue 3: bf16, M <= 64, N = K in 4096..8192, >= 85% of copy bandwidth): the stream-K
pointer kernel (``GemmConfig(streamk=True)``: one program per SM, the (tile, K step) units shared
evenly, split tiles joined in the kernel) against the heuristic (one program per output tile: 128
tiles on 132 SMs at N = 4096) and torch.matmul, in one run.

Each configuration is checked against float64 on the timed shape (``bench.run_case``) before it is
timed; ours and torch from CUDA graphs over rotated input sets larger than the L2; ``--rounds``
rounds with the variants in turn. % of copy = the bytes moved (A + B + out) over the time, against
the copy bandwidth measured at the start of the run.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_streamk.py --out $OUT [--rounds 2]
"""
from __future__ import annotations

import argparse
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
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402


def S(bm, bn, bk, stages, warps=4):
    return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, streamk=True)


def variants(m: int, full: bool) -> list[GemmConfig | None]:
    bm = 16 if m <= 16 else (32 if m <= 32 else 64)
    if not full:
        return [None, S(bm, 32, 128, 6), S(bm, 64, 128, 4)]
    return [None, S(bm, 32, 128, 6), S(bm, 32, 128, 4), S(bm, 64, 128, 4), S(bm, 64, 128, 6), S(bm, 32, 256, 4),
            S(bm, 64, 64, 8), S(bm, 128, 64, 4), S(bm, 32, 128, 6, warps=2)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    rounds = ap.parse_known_args()[0].rounds
    out, log, info = start("gemm-streamk")
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    records = []
    summary: dict[tuple[str, str], list[float]] = {}
    cases = [(bench.Case("bf16", m, 4096, 4096), True) for m in (1, 16, 32, 64)]
    cases += [(bench.Case("bf16", m, 8192, 8192), False) for m in (1, 16, 64)]
    cases += [(bench.Case("bf16", m, n, k), False) for m, n, k in ((1, 11008, 4096), (16, 11008, 4096),
                                                                  (16, 4096, 11008), (16, 14336, 4096))]
    cases += [(bench.Case("fp16", 16, 4096, 4096), False)]
    for case, full in cases:
        for r in range(rounds):
            peer_ms = None
            for cfg in variants(case.m, full):
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
                torch_frac = rec.extra["bytes"] / (rec.extra["peer_time_ms"] * 1e-3) / 1e12 / copy
                log(f"{case.name:26s} {name:48s} {rec.extra['time_ms'] * 1e3:7.2f} us {100 * frac:5.1f}% of copy "
                    f"(torch {100 * torch_frac:5.1f}%) x{rec.ratio:.3f}")
                summary.setdefault((case.name, name), []).append(frac)
    for (case, name), fr in summary.items():
        log(f"{case:26s} {name:48s} % of copy {' '.join(f'{100 * x:.1f}' for x in fr)} median {100 * statistics.median(fr):.1f}")
    write_results(records, "gemm-streamk", out / "gemm-streamk.json", info, meta={"copy_TBps": copy})
    log("done")


if __name__ == "__main__":
    main()
