"""The odd-shape, tf32 NN and fp16 leftovers of issue 3 on the GPU in one call, at one commit:

* 3000x7000x5000 (bf16 NN, rows 16- but not 128-byte aligned): the Gluon and TMA kernels with
  ``pad_rows`` (``pad_rows_kernel`` copies both operands into 128-byte rows inside the call)
  against the unpadded heuristic and torch, with the padding copies timed alone;
* 1000^3 (bf16 NN, ~8 us): split-K on the Gluon kernel (each split's rows padded to whole tiles,
  so M need not be a multiple of BLOCK_M), larger tiles with split-K, a deeper K step, the TMA
  kernel's split-K, padded rows;
* tf32 8192^3: the Gluon kernel reading the MN-major operand into registers (``mn_regs``: NN runs
  as C^T = B^T A^T, TT with A from registers) against the TMA kernel (which copies that operand
  K-major first) and torch with TF32 on; the K-major copy of B timed alone;
* fp16 8192^3 in four layouts on the Gluon kernel against the heuristic (TMA) and torch;
* then ``gemm_gluon16.py --final``'s re-measure (the LLM, odd and small-M suites, bf16 8192^3 in
  four layouts, int8 and 3xTF32) through ``matmul``'s own dispatch, until ``GEMM_DEADLINE_S``.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_odd_tf32.py --out $OUT

Correctness first: every new variant against float64 with NaN-poisoned outputs at odd shapes; a
configuration that fails a check is left out of the timing (logged). Then ``bench.run_case`` per (case, config), torch timed
once per case in the same run and reused (CUDA graphs over rotated input sets).
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
from gemm_gluon16 import C, G, compiled_and_checked, final, log_record, pad_copy_times, suite_summary, timed_copy

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import write_results
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

BIG = 8192
DEADLINE_S = float(os.environ.get("GEMM_DEADLINE_S", 190))  # seconds of timing, then stop
TMA = GemmConfig


def R(bm, bn, stages):
    """tf32 on the Gluon kernel, the MN-major operand read into registers."""
    return GemmConfig("gluon", bm, bn, 32, 8, 8, stages, mn_regs=True)


ODD = C(3000, 7000, 5000)
ODD_CFGS = [G(128, 256, 64, 4), G(128, 256, 64, 4, pad=True), TMA("tma", 256, 128, 64, 8, 8, 4, pad_rows=True),
            G(128, 256, 64, 3, pad=True)]
K1000 = C(1000, 1000, 1000)
K1000_CFGS = [G(64, 128, 64, 4), G(128, 128, 64, 5, split=2), G(128, 128, 64, 4, split=2),
              G(64, 128, 64, 6, split=2), G(128, 256, 64, 4, split=4), G(128, 256, 64, 4, split=2),
              GemmConfig("gluon", 64, 128, 128, 8, 4, 3), GemmConfig("gluon", 64, 128, 32, 8, 4, 8),
              TMA("tma", 128, 128, 64, 8, 8, 4, split_k=2),
              G(64, 128, 64, 4, pad=True)]
TF32_CFGS = {"NT": [None], "NN": [None, R(128, 256, 3), R(128, 256, 4), R(128, 128, 4)],
             "TT": [None, R(128, 256, 3)], "TN": [None]}


def todo() -> list[tuple[bench.Case, GemmConfig | None]]:
    # the first configuration of each list is the heuristic's choice at this commit: checked, not timed twice
    out: list[tuple[bench.Case, GemmConfig | None]] = [(ODD, None)] + [(ODD, c) for c in ODD_CFGS[1:]]
    out += [(K1000, None)] + [(K1000, c) for c in K1000_CFGS[1:]]
    for lay, cfgs in TF32_CFGS.items():
        out += [(C(BIG, BIG, BIG, lay, "tf32"), c) for c in cfgs]
    for lay in bench.LAYOUTS:
        out += [(C(BIG, BIG, BIG, lay, "fp16"), None), (C(BIG, BIG, BIG, lay, "fp16"), G(128, 256, 64, 4))]
    return out


CHECK_SHAPES = ((1000, 1000, 1000), (129, 264, 136), (8, 8, 16), (300, 264, 4104), (77, 136, 1012), (200, 520, 520))


def check(log) -> list[dict]:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(31)
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
        names = "+".join(k.kernel.__name__ for k in plan)
        rows.append({"case": case, "config": cfg.short(), "ok": bool(err <= tol), "rel_err": err, "plan": names,
                     "regs": plan[-1].constexprs.get("A_REGS"), "trans": plan[-1].constexprs.get("TRANS_OUT")})
    # tf32 with the MN-major operand in registers: every layout (NN swaps, TT reads A into
    # registers, NT and TN fall back to the K-major reads/copies), odd shapes, unaligned rows
    for cfg in (R(128, 256, 3), R(128, 128, 4)):
        for lay in bench.LAYOUTS:
            for (m, n, k) in CHECK_SHAPES:
                one(f"tf32 {lay} {m}x{n}x{k}", *operands(lay, m, n, k, torch.float32), cfg, TOLERANCES["tf32"],
                    precision="tf32")
    # inf / NaN through the swapped NN product: a row of A with inf (B positive) and one with NaN
    a, b = operands("NN", 256, 264, 520, torch.float32)
    b = b.abs() + 0.5
    a[3, 7], a[5, 9] = float("inf"), float("nan")
    spec = ops.validate(a, b, precision="tf32")
    out = torch.full(spec.out_shape, 0.0, device=dev)
    ops.launch(a, b, out, spec, R(128, 256, 3))
    special = bool(torch.isposinf(out[3]).all() and torch.isnan(out[5]).all()
                   and torch.isfinite(out[[i for i in range(256) if i not in (3, 5)]]).all())
    rows.append({"case": "tf32 NN inf/nan rows", "config": R(128, 256, 3).short(), "ok": special, "rel_err": 0.0})
    # split-K with each split's rows padded to whole tiles (M not a multiple of BLOCK_M)
    for cfg in K1000_CFGS:
        for lay in ("NN", "NT"):
            for (m, n, k) in ((1000, 1000, 1000), (200, 264, 4104), (77, 136, 1012)):
                one(f"bf16 {lay} {m}x{n}x{k}", *operands(lay, m, n, k, torch.bfloat16), cfg, 1e-2)
    one("bf16 NN 200x264x4104 fp32 out", *operands("NN", 200, 264, 4104, torch.bfloat16), G(128, 128, 64, 5, split=2),
        1e-4, out_dtype=torch.float32)
    for cfg in ODD_CFGS:
        one("bf16 NN 3000x7000x5000", *operands("NN", 3000, 7000, 5000, torch.bfloat16), cfg, 1e-2)
    for lay in bench.LAYOUTS:
        for (m, n, k) in CHECK_SHAPES:
            one(f"fp16 {lay} {m}x{n}x{k}", *operands(lay, m, n, k, torch.float16), G(128, 256, 64, 4), 2e-3)
    log_checks(rows, "odd/tf32/fp16", log)
    return rows


def kmajor_copy_time(log) -> dict:
    """torch's transposing copy of an 8192^2 fp32 B into K-major rows (what the TMA kernel does
    for tf32 NN before the product), alone."""
    srcs = [torch.rand(BIG, BIG, device="cuda") for _ in range(2)]
    return timed_copy([lambda s=s: ops.aligned_kmajor_copy(s, -2) for s in srcs], 2 * BIG * BIG * 4,
                      "K-major copy of 8192^2 fp32", log, budget_s=0.3)


def main() -> None:
    name = "gemm-odd-tf32"
    t0 = time.time()
    out, log, info = start(name)
    jobs = todo()
    # then the suites through matmul's own dispatch (gemm_gluon16.py --final), cases not timed above
    seen = {(c.name, cfg) for c, cfg in jobs}
    finals = [(c, cfg) for c, cfg in final() if (c.name, cfg) not in seen or c.dtype == "int8"]
    meta, copy = compiled_and_checked(
        name, out, info, log, check,
        jobs + finals
        + [(C(1000, 1000, 1000, lay, "tf32"), c) for lay in ("NN", "TT") for c in (R(128, 256, 3), R(128, 128, 4))]
        + [(C(200, 264, 4104, lay), c) for lay in ("NN", "NT") for c in K1000_CFGS], fatal=False)
    failed = {r["config"] for r in meta["checks"] if not r["ok"]}
    if failed:
        log(f"left out of the timing (a check failed): {sorted(failed)}")
    jobs = [(c, cfg) for c, cfg in jobs if cfg is None or cfg.short() not in failed]
    meta.update(pad_copies=pad_copy_times(log), kmajor_copy=kmajor_copy_time(log))
    records: list = []
    heur: dict[str, float] = {}
    n_explore = len(jobs)
    for i, (case, cfg, rec) in enumerate(timed_runs(jobs + finals, info, log, records, budget_s=0.15,
                                                    copy_TBps=copy, reuse_peer=lambda case: case.dtype != "int8")):
        log_record(case, cfg, rec, heur, log)
        if len(records) % 10 == 0:
            write_results(records, name, out / f"{name}.json", info, meta=meta)
        if time.time() - t0 > DEADLINE_S:
            log(f"deadline: stopped after {len(records)} records ({n_explore} exploration cases)")
            break
    meta["summary"] = suite_summary(records, log)
    write_results(records, name, out / f"{name}.json", info, meta=meta)
    log("done")


if __name__ == "__main__":
    main()
