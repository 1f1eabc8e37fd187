"""The GEMM suites on the GPU, with the configurations ``tilecraft.matmul`` picks untuned
(``TILECRAFT_TUNE=0``: the measured heuristics of ``tilecraft.tuning.gemm``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_suite.py --out $OUT

Cases: 8192^3 in every dtype (bf16/fp16 in all four transposes, fp8/int8 NT against
``torch._scaled_mm``/``torch._int_mm``, tf32 NN/NT, fp32-accurate, fp32 FMA, fp64), 4096^3 bf16,
the LLM suite (M in {1, 16, 128, 4096}, N/K from 4096/11008/14336), the odd-shape suite and the
small-M suite (bf16). Every case is checked against float64 first, then ours and the peer are
timed in the same run (``tilecraft.bench.gemm.run_case``). Kernels are compiled first by a pool
of processes. Writes gemm-suite.json (and a log) under --out.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"  # heuristics, except where --tune asks
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gemm_tune import precompile

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import write_results
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import config_space


def _operands(c: bench.Case):
    """One operand set as run_case draws it first (same generator and seed)."""
    import torch
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1234)
    layout = bench.PEER_LAYOUT.get(c.dtype, c.layout)
    a, b = bench.make_operands(c.m, c.n, c.k, c.dtype, layout, dev, gen)
    return a, b, bench.call_kwargs(c.dtype, c.m, c.n, dev)


def cases() -> list[tuple[str, bench.Case]]:
    out = []
    big = 8192
    for dt in ("bf16", "fp16"):
        out += [("square", bench.Case(dt, big, big, big, lay)) for lay in bench.LAYOUTS]
    out += [("square", bench.Case("fp8", big, big, big, "NT")), ("square", bench.Case("int8", big, big, big, "NT")),
            ("square", bench.Case("tf32", big, big, big, "NN")), ("square", bench.Case("tf32", big, big, big, "NT")),
            ("square", bench.Case("fp32-accurate", big, big, big, "NN")),
            ("square", bench.Case("fp32-accurate", big, big, big, "NT")),
            ("square", bench.Case("fp32", big, big, big, "NN")), ("square", bench.Case("fp64", big, big, big, "NN")),
            ("square", bench.Case("bf16", 4096, 4096, 4096, "NN"))]
    for suite in ("llm", "odd", "smallm"):
        out += [(suite, bench.Case("bf16", m, n, k, "NN")) for (m, n, k) in bench.SUITES[suite]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/gemm-suite")
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--tune", default="", help="comma list of suites whose cases are tuned first "
                    "(tilecraft's own autotuner: the config space, each candidate checked, then timed)")
    args = ap.parse_args()
    tuned_suites = [t for t in args.tune.split(",") if t]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "gemm-suite.log", "w")  # noqa: SIM115 - lives as long as main

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()
    info = detect()
    todo = cases()
    jobs = [(c, None) for _, c in todo]
    tuned = {}
    for suite, c in todo:
        if suite in tuned_suites:
            a, b, kw = _operands(c)
            spec = ops.validate(a, b, **kw)
            tuned[c.name] = (a, b, kw, spec)
            jobs += [(c, cfg) for cfg in config_space(ops.problem_of(a, b, spec))]
    precompile(jobs, log)
    for name, (a, b, kw, spec) in tuned.items():
        cfg = ops.choose_config(a, b, spec, tune_now=True, scale_a=kw.get("scale_a"), scale_b=kw.get("scale_b"))
        log(f"tuned {name}: {cfg.short()}")
    tuned.clear()
    copy = measure_copy_bandwidth()
    log(f"{info.name}; copy bandwidth {copy:.3f} TB/s")
    records = []
    for suite, case in todo:
        try:
            rec = bench.run_case(case, info, copy_TBps=copy, budget_s=args.budget)
        except Exception as exc:  # noqa: BLE001
            log(f"{suite} {case.name}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        rec.extra["suite"] = suite
        rec.extra["tuned"] = suite in tuned_suites
        records.append(rec)
        e = rec.extra
        if e.get("failed"):
            log(f"{suite:6s} {case.name:34s} FAILED rel err {e['rel_err']:.1e}")
            continue
        log(f"{suite:6s} {case.name:34s} {e['kernel']:7s} {'tuned' if e['tuned'] else 'heur.'} ours {rec.ours:7.1f} {rec.peer:24s} {rec.peer_value:7.1f} "
            f"x{rec.ratio:.3f} copy {e.get('fraction_of_copy', 0):.1%} err {e['rel_err']:.1e}")
    path = write_results(records, "gemm-suite", out / "gemm-suite.json", info, meta={"copy_TBps": copy})
    for suite in ("llm", "odd"):
        rs = [r.ratio for r in records if r.extra.get("suite") == suite and r.ratio]
        if rs:
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            log(f"{suite}: geometric mean x{gm:.3f} over {len(rs)} shapes, worst x{min(rs):.3f}")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
