"""GEMM re-measure on the GPU in one call, at the commit of this session's changes (issue 3 follow-up):
the cases the changes touch, with the heuristic configurations, against torch in the same run.

* correctness first: the presplit 3xTF32 checks of ``gemm_explore`` (every layout, odd shapes, the
  epilogue, inf/NaN, errors at K = 4096 / 16384), and the TMA path on rows 16- but not 128-byte
  aligned (3000x7000x5000 bf16 in every layout, a batch of 8 against a broadcast B with the
  epilogue; at 0d2713b these were copied into 128-byte rows, a rule removed after this run), each
  against float64 with a poisoned output; a failure stops the run before any timing;
* timed (``bench.run_case``): bf16 NN 8192^3 (the regression guard), the odd suite (bf16 NN; 128-byte
  padded copies), fp32-accurate 8192^3 NT / NN (heuristic, and presplit pinned), int8 NT 8192^3,
  tf32 NT / NN 8192^3 (the kernel's signature changed; the K-major copies now pad to 128 bytes).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_remeasure.py --out $OUT
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
from gemm_explore import check_presplit, start
from gemm_tune import precompile

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import write_results
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

BIG = 8192
PRESPLIT = GemmConfig("tma", 128, 256, 32, 8, 8, 2, presplit=True)


def cases() -> list[tuple[str, bench.Case, GemmConfig | None]]:
    out = [("guard", bench.Case("bf16", BIG, BIG, BIG, "NN"), None)]
    out += [("odd", bench.Case("bf16", m, n, k, "NN"), None) for m, n, k in bench.SUITES["odd"]]
    for lay in ("NT", "NN"):
        out.append(("fp32-accurate", bench.Case("fp32-accurate", BIG, BIG, BIG, lay), None))
    out.append(("fp32-accurate", bench.Case("fp32-accurate", BIG, BIG, BIG, "NT"), PRESPLIT))
    out.append(("int8", bench.Case("int8", BIG, BIG, BIG, "NT"), None))
    out += [("tf32", bench.Case("tf32", BIG, BIG, BIG, lay), None) for lay in ("NT", "NN")]
    return out


def check_padding(log) -> list[dict]:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(17)
    rows = []

    def rnd(*s, dt=torch.bfloat16):
        return (torch.rand(*s, device=dev, generator=g) * 2 - 1).to(dt)
    for lay in bench.LAYOUTS:
        m, n, k = 3000, 7000, 5000
        a = rnd(k, m).t() if lay[0] == "T" else rnd(m, k)
        b = rnd(n, k).t() if lay[1] == "T" else rnd(k, n)
        copies = ops.tma_plan(a, b, "bf16")[0]
        spec = ops.validate(a, b)
        cfg = ops.choose_config(a, b, spec)
        out = torch.full(spec.out_shape, float("nan"), device=dev, dtype=torch.bfloat16)
        ops.launch(a, b, out, spec, cfg)
        err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64))
        rows.append({"case": f"pad {lay} {m}x{n}x{k}", "copies": copies, "config": cfg.short(), "ok": err <= 1e-2,
                     "rel_err": err})
    a, b = rnd(8, 1000, 2000), rnd(2000, 3000)
    kw = {"bias": rnd(3000), "activation": "silu", "alpha": 0.5, "beta": 1.5, "c": rnd(8, 1000, 3000)}
    spec = ops.validate(a, b, **kw)
    cfg = ops.choose_config(a, b, spec)
    out = torch.full(spec.out_shape, float("nan"), device=dev, dtype=torch.bfloat16)
    ops.launch(a, b, out, spec, cfg, kw["c"], kw["bias"])
    err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64, **kw))
    rows.append({"case": "pad batch 8 x 1000x3000x2000 broadcast B, epilogue", "copies": ops.tma_plan(a, b, "bf16")[0],
                 "config": cfg.short(), "ok": err <= 1e-2, "rel_err": err})
    for r in rows:
        log(f"{r['case']:52s} copies {r['copies']} {r['config']:34s} err {r['rel_err']:.1e} {'ok' if r['ok'] else 'FAILED'}")
    return rows


def main() -> None:
    out, log, info = start("gemm-remeasure")
    todo = cases()
    precompile([(c, cfg) for _, c, cfg in todo], log)
    checks, acc = check_presplit(log)
    checks += check_padding(log)
    meta = {"checks": checks, "accuracy": acc}
    if not all(r["ok"] for r in checks):
        write_results([], "gemm-remeasure", out / "gemm-remeasure.json", info, meta=meta)
        log("correctness failed: no timing")
        sys.exit(1)
    meta["copy_TBps"] = copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    records = []
    for group, case, cfg in todo:
        try:
            rec = bench.run_case(case, info, copy_TBps=copy, cfg=cfg, budget_s=0.3)
        except Exception as exc:  # noqa: BLE001
            log(f"{case.name}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        rec.extra["group"] = group
        records.append(rec)
        e = rec.extra
        if e.get("failed"):
            log(f"{case.name:32s} FAILED rel err {e['rel_err']:.1e}")
            continue
        log(f"{case.name:32s} {GemmConfig.from_dict(e['config']).short():40s} "
            f"ours {rec.ours:7.1f} peer {rec.peer_value:7.1f} x{rec.ratio:.3f} err {e['rel_err']:.1e}")
    write_results(records, "gemm-remeasure", out / "gemm-remeasure.json", info, meta=meta)
    log("done")


if __name__ == "__main__":
    main()
