"""Issue 3's two open GEMM targets on the GPU in one call, at one commit (docs/gemm.md follow-up 6):

* bf16 NN 1000^3 (0.772x torch at 44db7cb, target 0.8x): the Gluon kernel's 64x128 tile with fewer
  stages, other rasterisation groups, a 128-deep K step in 2 stages, a 128x64 tile on one
  warpgroup, a 64x256 tile; the heuristic timed first and last (noise), the NT layout for
  reference;
* tf32 NN / TT 8192^3 (0.944 / 0.940x torch with TF32, target 1.0x): the register operand read with
  its rows relabelled (``row_perm``: loads free of bank conflicts, Triton's count) against the
  current ``mn_regs`` default, each twice, interleaved; NT for reference;
* the cuBLAS kernels torch runs for these products (torch.profiler names: tile, cluster shape);
* last, 1000^3 as split-K 2 on 128x128 tiles with the halves joined inside the kernel (``fixup``:
  a flag per tile, no workspace pass or reduce launch), timed twice: first with the flags zeroed by
  the captured graph on every call (no buffer for the capture stream yet), then with the kept
  buffer (one call on the capture stream first), as ``matmul`` runs outside graphs.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_followup6.py --out $OUT

Correctness first: every configuration against float64 with NaN-poisoned outputs at odd shapes
(a configuration that fails is left out of the timing); then ``bench.run_case`` per (case,
config), torch timed again for every record (CUDA graphs over rotated input sets, median).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
from gemm_explore import log_checks, start, timed_runs
from gemm_gluon16 import C, compiled_and_checked, log_record

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import write_results
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

BIG = 8192
DEADLINE_S = float(os.environ.get("GEMM_DEADLINE_S", 150))  # seconds of timing, then stop


def GW(bm, bn, bk, warps, stages, group=8, **kw):
    return GemmConfig("gluon", bm, bn, bk, group, warps, stages, **kw)


def R(stages, perm):
    """tf32 on the Gluon kernel, the MN-major operand read into registers."""
    return GemmConfig("gluon", 128, 256, 32, 8, 8, stages, mn_regs=True, row_perm=perm)


K1000 = C(1000, 1000, 1000)
K1000_CFGS = [GW(64, 128, 64, 4, 3), GW(64, 128, 64, 4, 2), GW(64, 128, 64, 4, 4, group=1),
              GW(64, 128, 64, 4, 4, group=16), GW(64, 128, 128, 4, 2), GW(128, 64, 64, 4, 4), GW(64, 256, 64, 4, 3)]
TF_CFGS = [R(3, True), R(4, True)]
# split-K 2 joined inside the kernel (128 programs for 64 tiles): checked and timed last, after
# everything else is written (a wait that never ends would stop the run there)
FIXUP_CFGS = [GW(128, 128, 64, 8, 4, split_k=2, fixup=True), GW(128, 128, 64, 8, 5, split_k=2, fixup=True)]


def todo() -> list[tuple[bench.Case, GemmConfig | None]]:
    """(case, config): None is the heuristic's choice at this commit (timed before and after the variants)."""
    out: list[tuple[bench.Case, GemmConfig | None]] = [(K1000, None)] + [(K1000, c) for c in K1000_CFGS]
    out += [(K1000, None), (C(1000, 1000, 1000, "NT"), None)]
    nn, tt = C(BIG, BIG, BIG, "NN", "tf32"), C(BIG, BIG, BIG, "TT", "tf32")
    out += [(nn, None), (nn, R(3, True)), (nn, R(4, True)), (nn, None), (nn, R(3, True))]
    out += [(tt, None), (tt, R(3, True)), (C(BIG, BIG, BIG, "NT", "tf32"), None)]
    return out


CHECK_SHAPES = ((1000, 1000, 1000), (129, 264, 136), (8, 8, 16), (300, 264, 4104), (77, 136, 1012), (200, 520, 520))


def check(log) -> list[dict]:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(41)
    rows = []

    def rnd(r, c, dt):
        return (torch.rand(r, c, device=dev, generator=g) * 2 - 1).to(dt)

    def operands(lay, m, n, k, dt):
        a = rnd(k, m, dt).t() if lay[0] == "T" else rnd(m, k, dt)
        b = rnd(n, k, dt).t() if lay[1] == "T" else rnd(k, n, dt)
        return a, b

    def one(case, a, b, cfg, tol, **kw):
        spec = ops.validate(a, b, **kw)
        out = torch.full(spec.out_shape, float("nan"), device=dev, dtype=spec.out_dtype)
        plan = ops.launch_plan(a, b, out, spec, cfg)
        for k in plan:
            k.run()
        err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64))
        rows.append({"case": case, "config": cfg.short(), "ok": bool(err <= tol), "rel_err": err,
                     "perm": plan[-1].constexprs.get("ROW_PERM"), "trans": plan[-1].constexprs.get("TRANS_OUT")})
    for cfg in TF_CFGS:
        for lay in bench.LAYOUTS:
            for (m, n, k) in CHECK_SHAPES:
                one(f"tf32 {lay} {m}x{n}x{k}", *operands(lay, m, n, k, torch.float32), cfg, TOLERANCES["tf32"],
                    precision="tf32")
        # inf / NaN rows through the relabelled rows: NN (swapped: A's rows are C's rows, stored
        # transposed) and TT (A's rows read relabelled into registers)
        for lay in ("NN", "TT"):
            a, b = operands(lay, 256, 264, 520, torch.float32)
            b = b.abs() + 0.5
            a[3, 7], a[21, 9] = float("inf"), float("nan")  # rows 3 and 21: bits 2 and 4 differ
            spec = ops.validate(a, b, precision="tf32")
            out = torch.full(spec.out_shape, 0.0, device=dev)
            ops.launch(a, b, out, spec, cfg)
            ok = bool(torch.isposinf(out[3]).all() and torch.isnan(out[21]).all()
                      and torch.isfinite(out[[i for i in range(256) if i not in (3, 21)]]).all())
            rows.append({"case": f"tf32 {lay} inf/nan rows", "config": cfg.short(), "ok": ok, "rel_err": 0.0})
    for cfg in K1000_CFGS:
        for lay in ("NN", "NT"):
            for (m, n, k) in ((1000, 1000, 1000), (200, 264, 4104), (77, 136, 1012)):
                one(f"bf16 {lay} {m}x{n}x{k}", *operands(lay, m, n, k, torch.bfloat16), cfg, 1e-2)
    log_checks(rows, "follow-up 6", log)
    return rows


def check_fixup(log) -> list[dict]:
    """The in-kernel split-K join against float64, three calls in a row per case (each launch must
    leave its flags at zero for the next), NN and NT, odd shapes."""
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(43)
    rows = []
    for cfg in FIXUP_CFGS:
        for lay in ("NN", "NT"):
            for (m, n, k) in ((1000, 1000, 1000), (200, 264, 4104), (77, 136, 1012), (1000, 1000, 72)):
                for rep in range(3):
                    a = (torch.rand(m, k, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
                    b = (torch.rand(n, k, device=dev, generator=g) * 2 - 1).to(torch.bfloat16).t() if lay == "NT" \
                        else (torch.rand(k, n, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
                    spec = ops.validate(a, b)
                    out = torch.full(spec.out_shape, float("nan"), device=dev, dtype=spec.out_dtype)
                    ops.launch(a, b, out, spec, cfg)
                    torch.cuda.synchronize()
                    err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64))
                    rows.append({"case": f"bf16 {lay} {m}x{n}x{k} call {rep}", "config": cfg.short(),
                                 "ok": bool(err <= 1e-2), "rel_err": err})
    log_checks(rows, "fixup", log)
    return rows


def warm_capture_stream(cfg: GemmConfig) -> None:
    """One 1000^3 call of ``cfg`` on the stream CUDA graphs are captured on, so that its fixup flags
    buffer exists (kept) when the next graph is captured."""
    stream = torch.cuda.graph.default_capture_stream
    if stream is None:
        return
    a, b = bench.make_operands(1000, 1000, 1000, "bf16", "NN", "cuda", torch.Generator(device="cuda").manual_seed(7))
    spec = ops.validate(a, b)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ops.launch(a, b, torch.empty(spec.out_shape, device="cuda", dtype=spec.out_dtype), spec, cfg)
    torch.cuda.synchronize()


def cublas_kernels(log) -> list[dict]:
    """The CUDA kernels torch runs for each peer product (torch.profiler), names as cuBLAS gives them."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for case in (K1000, C(BIG, BIG, BIG, "NN", "tf32"), C(BIG, BIG, BIG, "NT", "tf32"), C(BIG, BIG, BIG, "TT", "tf32")):
        a, b = bench.make_operands(case.m, case.n, case.k, case.dtype, case.layout, "cuda",
                                   torch.Generator(device="cuda").manual_seed(5))
        _, call = bench.peer(case.dtype, a, b, {})
        call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events() if getattr(e, "device_type", None) is not None
                        and str(e.device_type).endswith("CUDA")})
        rows.append({"case": case.name, "kernels": names})
        log(f"torch kernels for {case.name}: {names}")
    return rows


def main() -> None:
    name = "gemm-followup6"
    t0 = time.time()
    out, log, info = start(name)
    jobs = todo()
    # (the fixup configurations compile at their checks, last: the pool runs what it compiles)
    meta, copy = compiled_and_checked(name, out, info, log, check, jobs, fatal=False)
    failed = {r["config"] for r in meta["checks"] if not r["ok"]}
    if failed:
        log(f"left out of the timing (a check failed): {sorted(failed)}")
    jobs = [(c, cfg) for c, cfg in jobs if cfg is None or cfg.short() not in failed]
    try:
        meta["torch_kernels"] = cublas_kernels(log)
    except Exception as exc:  # noqa: BLE001 - the names are information, not the measurement
        log(f"profiler: {type(exc).__name__}: {str(exc)[:200]}")
    records: list = []
    heur: dict[str, float] = {}
    for case, cfg, rec in timed_runs(jobs, info, log, records, budget_s=0.2, copy_TBps=copy,
                                     reuse_peer=lambda case: False):
        log_record(case, cfg, rec, heur, log)
        write_results(records, name, out / f"{name}.json", info, meta=meta)
        if time.time() - t0 > DEADLINE_S:
            log(f"deadline: stopped after {len(records)} records")
            break
    write_results(records, name, out / f"{name}.json", info, meta=meta)
    meta["fixup_checks"] = check_fixup(log)
    bad = {r["config"] for r in meta["fixup_checks"] if not r["ok"]}
    for flags in ("zeroed in the graph", "kept"):  # every config zeroed first: the kept buffer serves them all
        for cfg in [c for c in FIXUP_CFGS if c.short() not in bad]:
            if flags == "kept":
                warm_capture_stream(cfg)
            for case, _, rec in timed_runs([(K1000, cfg)], info, log, records, budget_s=0.2, copy_TBps=copy,
                                           reuse_peer=lambda case: False):
                rec.extra["fixup_flags"] = flags
                log(f"  (fixup flags {flags})")
                log_record(case, cfg, rec, heur, log)
            write_results(records, name, out / f"{name}.json", info, meta=meta)
    for case, cfg, rec in timed_runs([(K1000, None)], info, log, records, budget_s=0.2, copy_TBps=copy,
                                     reuse_peer=lambda case: False):
        log_record(case, cfg, rec, heur, log)
    write_results(records, name, out / f"{name}.json", info, meta=meta)
    log("done")


if __name__ == "__main__":
    main()
