"""Programmatic dependent launch for short GEMMs (issue 3: small M >= 85% of copy, no odd shape below 0.8x
torch): every case through ``matmul``'s own choice of configuration, with PDL off (``TILECRAFT_PDL=0``)
and in its "early" and "late" modes (``--modes``), in turn (the order rotating by round), torch in the same round; CUDA graphs of calls over rotated input sets
(``bench.time_graph``), so consecutive calls in the graph are joined by programmatic edges when on.

Each configuration is checked against float64 on the timed shape first (``bench.run_case``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_pdl.py --out $OUT [--rounds 3] [--quick]
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
from tilecraft.ops.gemm import PDL_AT_ENV, PDL_PREFETCH_ENV  # noqa: E402
from tilecraft.ops.launch import PDL_ENV  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402

C = bench.Case
CASES = ([C("bf16", m, 4096, 4096) for m in (1, 16, 32, 64)]
         + [C("bf16", m, 8192, 8192) for m in (1, 16, 64)]
         + [C("bf16", 16, 11008, 4096), C("bf16", 1, 14336, 4096), C("bf16", 128, 4096, 14336)]
         + [C("bf16", 1000, 1000, 1000, lay) for lay in ("NN", "NT", "TN", "TT")]
         + [C("fp16", 1000, 1000, 1000), C("bf16", 997, 1009, 1013), C("bf16", 512, 512, 512),
            C("bf16", 3000, 7000, 5000)]
         + [C("fp32", 1, 4096, 4096), C("fp32", 512, 512, 512), C("fp32", 1000, 1000, 1000),
            C("fp32", 64, 4096, 4096)]
         + [C("tf32", 8192, 8192, 8192), C("bf16", 8192, 8192, 8192)])
#: explicit configurations timed beside the heuristic: (case, config)
PINNED = [(C("fp16", 1000, 1000, 1000), GemmConfig("gluon", 64, 128, 64, 8, 4, 4))]


def _p(bm, bn, bk, stages, warps=4, split=1):
    return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, split_k=split)


#: ``--suite smallm``: small-M tiles with PDL (the heuristic first), and fp32 products whose split-K reduce
#: follows the FMA kernel
SMALLM = ([(C("bf16", 32, 4096, 4096), c) for c in (None, _p(32, 32, 128, 6), _p(32, 32, 128, 8), _p(32, 64, 128, 4),
                                                     _p(32, 32, 64, 8), _p(16, 32, 128, 6), _p(32, 16, 256, 4))]
          + [(C("bf16", 64, 4096, 4096), c) for c in (None, _p(64, 32, 128, 6), _p(64, 64, 64, 8), _p(64, 32, 256, 4),
                                                      _p(32, 64, 128, 6), _p(64, 64, 128, 4), _p(64, 32, 64, 8))]
          + [(C("bf16", 1, 4096, 4096), c) for c in (None, _p(16, 16, 256, 4), _p(16, 32, 256, 4))]
          + [(C("bf16", 16, 4096, 4096), c) for c in (None, _p(16, 16, 256, 4), _p(16, 32, 256, 4))]
          + [(C("fp32", m, n, k), None) for m, n, k in ((997, 1009, 1013), (1000, 1000, 1000), (512, 512, 512))])
#: ``--suite mid``: the small-M products under PDL "mid" (follow-up 21), and a wider and a square one
MID = ([C("bf16", m, 4096, 4096) for m in (1, 16, 32, 64)] + [C("bf16", 16, 8192, 8192), C("bf16", 16, 11008, 4096),
                                                              C("bf16", 1000, 1000, 1000)])
#: ``--suite midcfg``: small-M tiles with deeper rings, so that a program takes more than half an SM's
#: shared memory and PDL "mid" applies (the heuristic first)
MIDCFG = ([(C("bf16", m, 4096, 4096), c) for m in (1, 16) for c in (
              None, _p(16, 32, 128, 10), _p(16, 32, 128, 12), _p(16, 32, 256, 6))]
          + [(C("bf16", 32, 4096, 4096), c) for c in (None, _p(32, 32, 128, 8), _p(32, 32, 256, 5))]
          + [(C("bf16", 64, 4096, 4096), c) for c in (None, _p(64, 64, 128, 5), _p(64, 32, 128, 8), _p(64, 32, 256, 4))])
QUICK = {("bf16", 1, 4096), ("bf16", 16, 4096), ("bf16", 64, 4096), ("bf16", 1000, 1000), ("fp32", 1, 4096)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="five cases only")
    ap.add_argument("--modes", default="0,early,late", help="TILECRAFT_PDL values timed, comma-separated; "
                    "'midN' is 'mid' with TILECRAFT_PDL_AT=N, '+pfN' sets TILECRAFT_PDL_PREFETCH=N (unset: the library's rule)")
    ap.add_argument("--suite", choices=["cases", "smallm", "split", "mid", "midcfg"], default="cases")
    ap.add_argument("--only", default="", help="keep the cases whose name contains this (e.g. 'tf32')")
    args = ap.parse_known_args()[0]
    out, log, info = start("gemm-pdl")
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    cases = [(c, None) for c in CASES if not args.quick or (c.dtype, c.m, c.n) in QUICK]
    cases += [] if args.quick else PINNED
    if args.suite == "smallm":
        cases = SMALLM
    if args.suite == "mid":
        cases = [(c, None) for c in MID]
    if args.suite == "midcfg":
        cases = MIDCFG
    if args.suite == "split":  # M = 32 / 64: split K so each program re-reads less of A from L2
        cases = [(C("bf16", 32, 4096, 4096), c) for c in (
            None, _p(32, 64, 128, 6, split=2), _p(32, 64, 256, 4, split=2), _p(32, 64, 64, 8, split=2),
            _p(32, 128, 128, 4, split=4), _p(32, 32, 256, 4, split=2))]
        cases += [(C("bf16", 64, 4096, 4096), c) for c in (
            None, _p(64, 64, 128, 6, split=2), _p(64, 64, 64, 8, split=2), _p(64, 128, 64, 4, split=4),
            _p(64, 64, 128, 4, split=4), _p(64, 32, 128, 6, split=2))]
    cases = [(c, cfg) for c, cfg in cases if args.only in c.name]
    modes = args.modes.split(",")
    records, summary = [], {}
    for case, cfg in cases:
        label = case.name + ("" if cfg is None else f" [{cfg.short()}]")
        for r in range(args.rounds):
            peer_ms = None
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                pdl, _, pf = mode.partition("+pf")  # "mid8+pf4": PDL "mid" at 8 K blocks, 4 prefetched
                at = pdl[3:] if pdl.startswith("mid") else ""
                os.environ[PDL_ENV] = "mid" if at else pdl
                for env, value in ((PDL_AT_ENV, at), (PDL_PREFETCH_ENV, pf)):
                    if value:  # else the library's own rule (ops.gemm.pdl_steps)
                        os.environ[env] = value
                    else:
                        os.environ.pop(env, None)
                try:
                    rec = bench.run_case(case, info, copy_TBps=copy, cfg=cfg, budget_s=0.3, peer_ms=peer_ms)
                except Exception as exc:  # noqa: BLE001 - one failed case must not stop the others
                    log(f"{label} pdl={mode}: {type(exc).__name__}: {str(exc)[:300]}")
                    continue
                rec.extra.update(group=f"round{r}", pdl_env=mode)  # "pdl": what the call ran (run_case)
                records.append(rec)
                if rec.extra.get("failed"):
                    log(f"{label:26s} pdl={mode} FAILED rel err {rec.extra['rel_err']:.1e}")
                    continue
                peer_ms = peer_ms or rec.extra["peer_time_ms"]
                frac = rec.extra["fraction_of_copy"]
                log(f"{label:26s} pdl={mode:5s} {rec.extra['config'].get('kernel'):8s} {rec.extra['time_ms'] * 1e3:9.2f} us "
                    f"{rec.peer} {peer_ms * 1e3:9.2f} us x{rec.ratio:.3f} {100 * frac:5.1f}% of copy "
                    f"err {rec.extra['rel_err']:.1e}")
                summary.setdefault((label, mode), []).append((rec.ratio, frac, rec.extra["time_ms"]))
    for env in (PDL_ENV, PDL_AT_ENV, PDL_PREFETCH_ENV):
        os.environ.pop(env, None)
    for (name, mode), rs in summary.items():
        log(f"{name:26s} pdl={mode:5s} ratios {' '.join(f'{x:.3f}' for x, _, _ in rs)} median "
            f"{statistics.median(x for x, _, _ in rs):.3f}, {statistics.median(t for _, _, t in rs) * 1e3:.2f} us, "
            f"% of copy {statistics.median(f for _, f, _ in rs) * 100:.1f}")
    write_results(records, "gemm-pdl", out / "gemm-pdl.json", info, meta={"copy_TBps": copy})
    log("done")


if __name__ == "__main__":
    main()
