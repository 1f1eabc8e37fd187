"""The sm90 Gluon GEMM on fp16/bf16 (``tilecraft.kernels.gemm_gluon``) on the GPU in one call:
correctness, then Gluon variants against the heuristic of the same commit and torch, same run.

* correctness first (a failure stops the run before any timing): bf16 and fp16 against float64,
  every layout (16-bit operands are read K- or MN-major as they are), odd shapes, K not a multiple
  of the block, tiny shapes, unaligned rows (copied), fp32 output, split-K inside the persistent
  loop, padded-row copies (``pad_rows``), NaN-poisoned outputs;
* copy bandwidth: the large copy (2 GiB) and, for the small-M shapes, device-to-device copies of
  the same bytes (a copy of B itself, read + write; and one moving the GEMM's read + write total)
  timed as the GEMM is (CUDA graph, rotated buffers beyond twice the L2);
* timed (``bench.run_case``; torch once per case, reused): bf16 8192^3 in four layouts, the
  M = 4096 and M = 128 LLM products, 1000^3, 3000x7000x5000 (as is and with rows padded), small M,
  each with the heuristic and the Gluon variants.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_gluon16.py --out $OUT [--final]

``--final`` times the heuristic choices only: the LLM, odd and small-M suites (with the same-size
copies), bf16 8192^3 in four layouts, int8 and 3xTF32 8192^3.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
from gemm_explore import start, timed_runs
from gemm_tune import _compile_job

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import rotation_sets, write_results
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

FINAL = "--final" in sys.argv
if FINAL:
    sys.argv.remove("--final")
BIG = 8192


def G(bm, bn, bk, stages, split=1, pad=False):
    return GemmConfig("gluon", bm, bn, bk, 8, 8 if bm == 128 else 4, stages, split_k=split, pad_rows=pad)


def C(m, n, k, layout="NN", dtype="bf16"):
    return bench.Case(dtype, m, n, k, layout)


LLM_NK = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336))
M128 = [G(64, 128, 64, 6), G(64, 64, 64, 8), G(128, 64, 64, 6), G(128, 128, 64, 5), G(64, 256, 64, 4)]


def sweep() -> list[tuple[bench.Case, GemmConfig | None]]:
    out: list[tuple[bench.Case, GemmConfig | None]] = []
    for lay in bench.LAYOUTS:
        out += [(C(BIG, BIG, BIG, lay), None), (C(BIG, BIG, BIG, lay), G(128, 256, 64, 4))]
    out.append((C(BIG, BIG, BIG), G(128, 256, 64, 3)))
    for n, k in LLM_NK:
        out += [(C(4096, n, k), None), (C(4096, n, k), G(128, 256, 64, 4))]
    for n, k in LLM_NK:
        out += [(C(128, n, k), None)] + [(C(128, n, k), g) for g in M128]
        out.append((C(128, n, k), G(64, 128, 64, 6, split=2)))
    out += [(C(1000, 1000, 1000), None)] + [(C(1000, 1000, 1000), g) for g in (
        G(64, 128, 64, 4), G(64, 128, 64, 6), G(64, 64, 64, 6), G(128, 128, 64, 4), G(128, 64, 64, 4))]
    odd = C(3000, 7000, 5000)
    out += [(odd, None), (odd, G(128, 256, 64, 4)), (odd, G(128, 256, 64, 4, pad=True)),
            (odd, GemmConfig("tma", 256, 128, 64, 8, 8, 4, pad_rows=True)), (odd, G(128, 128, 64, 5))]
    for nk in (4096, 8192):
        out += [(C(m, nk, nk), None) for m in (1, 16, 32, 64)]
    return out


def final() -> list[tuple[bench.Case, GemmConfig | None]]:
    out = [(C(BIG, BIG, BIG, lay), None) for lay in bench.LAYOUTS]
    for suite in ("llm", "odd", "smallm"):
        out += [(C(m, n, k), None) for (m, n, k) in bench.SUITES[suite]]
    odd = C(3000, 7000, 5000)  # the heuristic pads its rows: the unpadded Gluon and the old TMA choice beside it
    out += [(odd, G(128, 256, 64, 4)), (odd, GemmConfig("tma", 256, 128, 64, 8, 8, 4))]
    i8 = bench.Case("int8", BIG, BIG, BIG, "NT")
    out += [(i8, None), (bench.Case("fp32-accurate", BIG, BIG, BIG, "NT"), None),
            (bench.Case("fp32-accurate", BIG, BIG, BIG, "NN"), None), (i8, None)]
    return out


def compile_all(jobs, log) -> None:
    """Every (case, config) compiled by a pool of processes (each its own shape: the Gluon
    kernel's grid size is a constexpr)."""
    t0 = time.time()
    uniq = list({(c.name, cfg): (c, cfg) for c, cfg in jobs}.values())
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=min(15, os.cpu_count() or 4), mp_context=ctx) as pool:
        errors = [r for r in pool.map(_compile_job, uniq) if r]
    log(f"compiled {len(uniq)} kernels in {time.time() - t0:.0f} s; {len(errors)} failed")
    for e in errors:
        log("  " + e)


CHECK_CFGS = [G(128, 256, 64, 4), G(64, 128, 64, 6), G(128, 64, 64, 6), G(64, 64, 64, 8, pad=True)]
CHECK_SHAPES = ((1000, 1000, 1000), (129, 264, 136), (8, 8, 16), (300, 264, 4104), (77, 136, 1013))
CHECK_PAIRS = [(torch.bfloat16, c) for c in CHECK_CFGS] + [(torch.float16, CHECK_CFGS[1])]


def check(log) -> list[dict]:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(29)
    rows = []

    def one(case, a, b, cfg, **kw):
        spec = ops.validate(a, b, **kw)
        out = torch.full(spec.out_shape, float("nan"), device=dev, dtype=spec.out_dtype)
        ops.launch(a, b, out, spec, cfg)
        err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64))
        tol = 2e-3 if torch.float16 in (a.dtype, spec.out_dtype) else 1e-2
        if spec.out_dtype == torch.float32:
            tol = 1e-4
        rows.append({"case": case, "config": cfg.short(), "ok": bool(err <= tol), "rel_err": err})

    def rnd(r, c, dt):
        return (torch.rand(r, c, device=dev, generator=g) * 2 - 1).to(dt)
    for dt, cfg in CHECK_PAIRS:
        for lay in bench.LAYOUTS:
            for (m, n, k) in CHECK_SHAPES:
                a = rnd(k, m, dt).t() if lay[0] == "T" else rnd(m, k, dt)
                b = rnd(n, k, dt).t() if lay[1] == "T" else rnd(k, n, dt)
                one(f"{dt} {lay} {m}x{n}x{k}", a, b, cfg)
    a, b = rnd(128, 4104, torch.bfloat16), rnd(4104, 1024, torch.bfloat16)
    for cfg in (G(64, 128, 64, 6, split=2), G(128, 128, 64, 5, split=3), G(64, 64, 64, 8, split=4)):
        one("bf16 NN 128x1024x4104 split", a, b, cfg)
        one("bf16 NT 128x1024x4104 split", a, b.t().contiguous().t(), cfg)
    one("bf16 fp32 out", a, b, G(128, 256, 64, 4), out_dtype=torch.float32)
    one("bf16 fp16 out", a, b, G(64, 128, 64, 6), out_dtype=torch.float16)
    big_a, big_b = rnd(3000, 5000, torch.bfloat16), rnd(5000, 7000, torch.bfloat16)
    for cfg in (G(128, 256, 64, 4), G(128, 256, 64, 4, pad=True), GemmConfig("tma", 256, 128, 64, 8, 8, 4, pad_rows=True)):
        one("bf16 NN 3000x7000x5000", big_a, big_b, cfg)
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        log(f"CHECK FAILED {r}")
    log(f"gluon 16-bit correctness: {len(rows) - len(bad)}/{len(rows)} passed")
    return rows


def same_size_copies(info, log) -> list[dict]:
    """Copies of the small-M products' bytes, timed as the GEMM is (graph, rotated buffers)."""
    dev = torch.device("cuda")
    rows = []
    for nk in (4096, 8192):
        b_bytes = nk * nk * 2
        for name, nbytes in (("copy of B (read + write 2x B)", b_bytes), ("copy moving B's bytes (read + write)",
                                                                           b_bytes // 2)):
            n = nbytes // 2
            sets = rotation_sets(2 * nbytes, info.l2_bytes, maximum=8)
            srcs = [torch.rand(n, device=dev).to(torch.bfloat16) for _ in range(sets)]
            dsts = [torch.empty_like(s) for s in srcs]
            t = bench.time_graph([lambda d=d, s=s: d.copy_(s) for d, s in zip(dsts, srcs)], dev, budget_s=0.2,
                                 est_ms=2 * nbytes / 3e12 * 1e3)
            tbps = 2 * nbytes / (t.median_ms * 1e-3) / 1e12
            rows.append({"nk": nk, "copy": name, "bytes_moved": 2 * nbytes, "time_us": t.median_ms * 1e3,
                         "TBps": tbps})
            log(f"N = K = {nk}: {name}: {2 * nbytes / 2**20:.0f} MiB moved in {t.median_ms * 1e3:.2f} us, "
                f"{tbps:.3f} TB/s")
    return rows


def timed_copy(calls, moved_bytes: int, what: str, log, budget_s: float = 0.2) -> dict:
    """One copy routine alone (``calls``: one per source buffer), timed as the GEMM is (graph)."""
    t = bench.time_graph(calls, torch.device("cuda"), budget_s=budget_s)
    tbps = moved_bytes / (t.median_ms * 1e-3) / 1e12
    log(f"{what}: {t.median_ms * 1e3:.1f} us, {tbps:.3f} TB/s")
    return {"copy": what, "time_us": t.median_ms * 1e3, "TBps": tbps}


def pad_copy_times(log) -> list[dict]:
    """The row-padding copies of 3000x7000x5000's operands alone (aligned_copy: pad_rows_kernel)."""
    rows = []
    for r, c in ((3000, 5000), (5000, 7000)):
        srcs = [torch.rand(r, c, device="cuda").to(torch.bfloat16) for _ in range(3)]
        rows.append({"rows": r, "cols": c, **timed_copy([lambda s=s: ops.aligned_copy(s, -1) for s in srcs],
                                                        2 * r * c * 2, f"pad copy {r}x{c} bf16", log)})
    return rows


def compiled_and_checked(name: str, out, info, log, check, jobs, fatal: bool = True) -> tuple[dict, float]:
    """Compile ``jobs`` in a process pool, run ``check(log)`` (its rows into the results' meta; a
    failure writes them and ends the run before any timing, unless not ``fatal``: then the caller
    leaves the failed configurations out), then measure the copy bandwidth. Returns (meta, copy TB/s)."""
    compile_all(jobs, log)
    checks = check(log)
    meta: dict = {"checks": checks}
    if fatal and not all(r["ok"] for r in checks):
        write_results([], name, out / f"{name}.json", info, meta=meta)
        log("correctness failed: no timing")
        sys.exit(1)
    copy = measure_copy_bandwidth()
    log(f"copy bandwidth {copy:.3f} TB/s")
    meta["copy_TBps"] = copy
    return meta, copy


def log_record(case, cfg, rec, heur: dict[str, float], log) -> None:
    """One timed (case, config) as a log line; ``heur`` collects the heuristic's ratio per case
    (shown beside the pinned configurations timed after it)."""
    e = rec.extra
    if cfg is None:
        heur[case.name] = rec.ratio
    base = heur.get(case.name)
    log(f"{case.name:30s} {GemmConfig.from_dict(e['config']).short():44s} ours {rec.ours:7.1f} "
        f"peer {rec.peer_value:7.1f} x{rec.ratio:.3f}" + (f" [heur x{base:.3f}]" if cfg and base else "")
        + (f" copy {e['fraction_of_copy']:.1%}" if case.m <= 64 and e.get("fraction_of_copy") else "")
        + f" {e['time_ms'] * 1e3:.1f} us err {e['rel_err']:.1e}")


def suite_summary(records, log) -> dict:
    """Geometric mean and worst ratio per suite (llm, odd, smallm; bf16 NN) over the records of
    ``matmul``'s own choice (configurations not pinned)."""
    summary = {}
    for suite in ("llm", "odd", "smallm"):
        names = {C(m, n, k).name for (m, n, k) in bench.SUITES[suite]}
        rs = [r.ratio for r in records if r.extra.get("kernel") and not r.extra.get("failed")
              and not r.extra.get("pinned")
              and f"{r.case['dtype']} {r.case['layout']} {r.case['m']}x{r.case['n']}x{r.case['k']}" in names]
        if rs:
            summary[suite] = {"geomean": math.exp(sum(map(math.log, rs)) / len(rs)), "worst": min(rs), "n": len(rs)}
            log(f"{suite}: geomean x{summary[suite]['geomean']:.3f} worst x{min(rs):.3f} over {len(rs)}")
    return summary


def main() -> None:
    name = "gemm-gluon16-final" if FINAL else "gemm-gluon16"
    out, log, info = start(name)
    todo = final() if FINAL else sweep()
    names = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    meta, copy = compiled_and_checked(
        name, out, info, log, check,
        todo + [(C(1000, 1000, 1000, lay, names[dt]), c) for dt, c in CHECK_PAIRS for lay in bench.LAYOUTS]
        + [(C(128, 1024, 4104, lay), G(bm, bn, 64, st, split=sp)) for lay in ("NN", "NT")
           for bm, bn, st, sp in ((64, 128, 6, 2), (128, 128, 5, 3), (64, 64, 8, 4))])
    meta["same_size_copies"] = same_size_copies(info, log)
    meta["pad_copies"] = pad_copy_times(log)
    records: list = []
    heur: dict[str, float] = {}
    # int8 twice in the final run, each with its own peer
    for case, cfg, rec in timed_runs(todo, info, log, records, budget_s=0.2, copy_TBps=copy,
                                     reuse_peer=lambda case: not (FINAL and case.dtype == "int8")):
        log_record(case, cfg, rec, heur, log)
        if len(records) % 20 == 0:
            write_results(records, name, out / f"{name}.json", info, meta=meta)
    summary = suite_summary(records, log) if FINAL else {}
    meta["summary"] = summary
    write_results(records, name, out / f"{name}.json", info, meta=meta)
    log("done")


if __name__ == "__main__":
    main()
