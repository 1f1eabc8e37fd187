"""GEMM exploration on the GPU in one call (issue 3's remaining targets), at one commit:

* 3xTF32 with the operands split before the GEMM (``presplit``: tf32 hi + lo buffers, three tf32
  wgmmas per K step on the loaded tiles) against the in-kernel ``tf32x3`` and cuBLAS fp32, 8192^3
  NT and NN, with the error against float64 at K = 4096 and 16384;
* int8 8192^3 NT: the epilogue in halves, pipeline depths;
* small M at N = K = 4096 (bf16 NN): 16-wide column tiles (two programs per SM) and deeper pipelines;
* 1000^3 and 3000x7000x5000 (bf16 NN) on contiguous operands against the same values in buffers whose
  rows are padded to 128 bytes (the lead: rows 16- but not 128-byte aligned), ours and torch;
* the K-major fp32 copy (tf32 NN): torch's transposing copy against ``tf32_split_kernel``.

(At f49c9d4 ``tf32_split_kernel`` also had a plain-copy mode, timed here at 0.138 ms against torch's
0.128 ms for 8192^2 fp32; it was dropped after this run.)

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_explore.py --out $OUT

Every configuration is checked against float64 (output poisoned) before it is timed; ours and torch
are timed in the same run (``bench.run_case`` / ``bench.time_graph``: CUDA graphs over rotated
input sets). Writes gemm-explore.json and gemm-explore.log under --out.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ["TILECRAFT_TUNE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
from gemm_tune import precompile

from tilecraft.bench import gemm as bench
from tilecraft.bench.harness import Record, write_results
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

T = GemmConfig
BIG = 8192
F32ACC = [T("tma", 128, 128, 64, 8, 8, 2), T("tma", 128, 128, 32, 8, 8, 3, presplit=True),
          T("tma", 128, 256, 32, 8, 8, 2, presplit=True), T("tma", 256, 128, 32, 8, 16, 2, presplit=True),
          T("tma", 128, 128, 16, 8, 8, 6, presplit=True)]
INT8 = [T("tma", 128, 256, 128, 8, 8, 3), T("tma", 128, 256, 128, 8, 8, 3, epilogue_split=True),
        T("tma", 128, 256, 128, 8, 8, 4, epilogue_split=True), T("tma", 256, 128, 128, 8, 8, 3, epilogue_split=True)]


def smallm_cfgs(m: int) -> list[GemmConfig]:
    bm = 16 if m <= 16 else (32 if m <= 32 else 64)
    return [T("pointer", bm, 16, 256, 1, 4, 4), T("pointer", bm, 16, 128, 1, 4, 6), T("pointer", bm, 16, 256, 1, 2, 4),
            T("pointer", bm, 16, 128, 1, 4, 8), T("pointer", bm, 32, 128, 1, 4, 8), T("pointer", bm, 32, 256, 1, 4, 3)]


def timed_cases() -> list[tuple[bench.Case, GemmConfig | None]]:
    out: list[tuple[bench.Case, GemmConfig | None]] = []
    for lay in ("NT", "NN"):
        out += [(bench.Case("fp32-accurate", BIG, BIG, BIG, lay), c) for c in F32ACC]
    out += [(bench.Case("int8", BIG, BIG, BIG, "NT"), c) for c in INT8]
    for m in (1, 16, 32, 64):
        out += [(bench.Case("bf16", m, 4096, 4096, "NN"), None)]
        out += [(bench.Case("bf16", m, 4096, 4096, "NN"), c) for c in smallm_cfgs(m)]
    return out


def check_presplit(log) -> list[dict]:
    """presplit against float64 in every layout, odd aligned shapes, batched with the epilogue,
    poisoned outputs; the split of special values; the errors at K = 4096 / 16384."""
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(5)
    rows = []

    def rnd(*s):
        return torch.rand(*s, device=dev, generator=g) * 2 - 1
    cfgs = [T("tma", 128, 256, 32, 8, 8, 2, presplit=True), T("tma", 128, 128, 32, 8, 8, 3, presplit=True),
            T("tma", 64, 128, 32, 8, 4, 3, presplit=True)]  # first two as timed below
    for cfg in cfgs:
        for lay in bench.LAYOUTS:
            for (m, n, k) in ((1000, 1016, 1040), (300, 200, 4104), (8, 264, 136)):
                a = rnd(k, m).t() if lay[0] == "T" else rnd(m, k)
                b = rnd(n, k).t() if lay[1] == "T" else rnd(k, n)
                spec = ops.validate(a, b, precision="fp32-accurate")
                out = torch.full(spec.out_shape, float("nan"), device=dev)
                ops.launch(a, b, out, spec, cfg)
                err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64))
                rows.append({"case": f"{lay} {m}x{n}x{k}", "config": cfg.short(), "ok": err <= 1e-5, "rel_err": err})
    a, b = rnd(3, 136, 264), rnd(264, 520)
    kw = {"alpha": 0.7, "beta": -1.3, "c": rnd(3, 136, 520), "bias": rnd(520), "activation": "gelu"}
    spec = ops.validate(a, b, precision="fp32-accurate", **kw)
    out = torch.full(spec.out_shape, float("nan"), device=dev)
    ops.launch(a, b, out, spec, cfgs[1], kw["c"], kw["bias"])
    err = relative_error(out, matmul_reference(a, b, out_dtype=torch.float64, **kw))
    rows.append({"case": "batched epilogue", "config": cfgs[1].short(), "ok": err <= 1e-5, "rel_err": err})
    rows.append(special_values_row(cfgs[1], rnd, dev, "inf/nan rows"))
    acc = fp32_accurate_accuracy([("presplit 128x256x32", cfgs[0]), ("presplit 128x128x32", cfgs[1]),
                                  ("tf32x3 in-kernel", F32ACC[0])], rnd, dev, log)
    log_checks(rows, "presplit", log)
    return rows, acc


def timed_runs(todo, info, log, records: list, *, budget_s: float, copy_TBps: float | None = None,
               reuse_peer=lambda case: True):
    """Check and time each (case, config) against torch (``bench.run_case``), the torch time of a
    case reused for its later configs where ``reuse_peer(case)``; every record goes to ``records``
    (failed checks too, logged); yields (case, config, record) of those that passed."""
    peers: dict[str, float] = {}
    for case, cfg in todo:
        try:
            rec = bench.run_case(case, info, copy_TBps=copy_TBps, cfg=cfg, budget_s=budget_s,
                                 peer_ms=peers.get(case.name))
        except Exception as exc:  # noqa: BLE001 - one bad case does not end the run
            log(f"{case.name} {cfg.short() if cfg else 'heuristic'}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        rec.extra["pinned"] = cfg is not None
        records.append(rec)
        if rec.extra.get("failed"):
            log(f"{case.name:30s} {cfg.short() if cfg else 'heuristic':40s} FAILED rel err {rec.extra['rel_err']:.1e}")
            continue
        if reuse_peer(case):
            peers[case.name] = rec.extra["peer_time_ms"]
        yield case, cfg, rec


def special_values_row(cfg: GemmConfig, rnd, dev, case: str) -> dict:
    """fp32-accurate with special values: inf stays inf, NaN stays NaN (rows of A with one of them)."""
    a, b = rnd(256, 512), rnd(512, 256)
    a[3, 7], a[5, 9] = float("inf"), float("nan")
    b = b.abs() + 0.5  # positive: the inf row must be +inf everywhere
    spec = ops.validate(a, b, precision="fp32-accurate")
    out = torch.full(spec.out_shape, float("nan"), device=dev)
    ops.launch(a, b, out, spec, cfg)
    ok = bool(torch.isposinf(out[3]).all() and torch.isnan(out[5]).all() and torch.isfinite(out[0]).all())
    return {"case": case, "config": cfg.short(), "ok": ok, "rel_err": 0.0}


def fp32_accurate_accuracy(named: list[tuple[str | None, GemmConfig | None]], rnd, dev, log,
                           ks: tuple[int, ...] = (4096, 16384)) -> list[dict]:
    """Error against float64 of each (name, config) in fp32-accurate mode (config None: the
    heuristic's; name None: the config's short name) and of cuBLAS fp32, 1024 x K x 1024."""
    acc = []
    for k in ks:
        a, b = rnd(1024, k), rnd(k, 1024)
        ref = matmul_reference(a, b, out_dtype=torch.float64)
        row: dict = {"k": k}
        spec = ops.validate(a, b, precision="fp32-accurate")
        for name, cfg in named:
            out = torch.full(spec.out_shape, float("nan"), device=dev)
            c = cfg or ops.choose_config(a, b, spec)
            ops.launch(a, b, out, spec, c)
            row[name or c.short()] = relative_error(out, ref)
        torch.backends.cuda.matmul.allow_tf32 = False
        row["cuBLAS fp32"] = relative_error(a @ b, ref)
        acc.append(row)
        log(f"accuracy K={k}: " + ", ".join(f"{n} {v:.2e}" for n, v in row.items() if n != "k"))
    return acc


def log_checks(rows: list[dict], what: str, log) -> None:
    """Log every failed check and the count passed."""
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        log(f"CHECK FAILED {r}")
    log(f"{what} correctness: {len(rows) - len(bad)}/{len(rows)} passed")


def padded(x: torch.Tensor, align_elems: int) -> torch.Tensor:
    """x's values in a buffer whose rows are padded to ``align_elems`` elements."""
    r, c = x.shape
    cp = -(-c // align_elems) * align_elems
    buf = torch.empty(r, cp, dtype=x.dtype, device=x.device)
    buf[:, :c].copy_(x)
    return buf[:, :c]


def alignment(info, log) -> list[Record]:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(9)
    recs = []
    for (m, n, k) in ((1000, 1000, 1000), (3000, 7000, 5000)):
        nbytes = bench.gemm_bytes(m, n, k, 2, 2)
        n_sets = max(2, min(8, -(-2 * (info.l2_bytes or 64 << 20) // nbytes) + 1))
        base = [((torch.rand(m, k, device=dev, generator=g) * 2 - 1).bfloat16(),
                 (torch.rand(k, n, device=dev, generator=g) * 2 - 1).bfloat16()) for _ in range(n_sets)]
        for name, sets in (("contiguous", base), ("rows padded to 128 B", [(padded(a, 64), padded(b, 64)) for a, b in base])):
            a0, b0 = sets[0]
            spec = ops.validate(a0, b0)
            cfg = ops.choose_config(a0, b0, spec)
            out = ops.compute(a0, b0, spec, cfg=cfg)
            err = relative_error(out, matmul_reference(a0, b0, out_dtype=torch.float64))
            if err > 1e-2:
                log(f"CHECK FAILED alignment {m}x{n}x{k} {name}: {err:.2e}")
                continue
            est = 2 * m * n * k / 500e12 * 1e3
            t = bench.time_graph([lambda s=s, spec=spec, cfg=cfg: ops.compute(s[0], s[1], spec, cfg=cfg) for s in sets], dev,
                                 budget_s=0.2, est_ms=est).median_ms
            tp = bench.time_graph([lambda s=s: torch.matmul(s[0], s[1]) for s in sets], dev, budget_s=0.2,
                                  est_ms=est).median_ms
            fl = 2 * m * n * k
            r = Record(suite="gemm-explore", case={"dtype": "bf16", "layout": "NN", "m": m, "n": n, "k": k,
                                                   "operands": name},
                       metric="TFLOP/s", unit="TFLOP/s", ours=fl / t / 1e9, peer="torch.matmul", peer_value=fl / tp / 1e9,
                       extra={"config": cfg.as_dict(), "time_ms": t, "peer_time_ms": tp, "rel_err": err})
            r.ratio = tp / t
            recs.append(r)
            log(f"align {m}x{n}x{k} {name:22s} {cfg.short():34s} ours {r.ours:6.1f} torch {r.peer_value:6.1f} "
                f"x{r.ratio:.3f}")
    return recs


def kmajor_copy(log) -> list[dict]:
    """8192^2 fp32, MN-major to K-major: torch's copy against tf32_split_kernel (copy and split)."""
    dev = torch.device("cuda")
    x = [torch.rand(BIG, BIG, device=dev).t() for _ in range(2)]  # K-major view needed of an MN-major one
    rows = []
    for name, fn in [("torch copy", lambda t: ops.aligned_kmajor_copy(t, -2)),
                     ("triton split 64x64", lambda t: _run_split(t, (64, 64)))]:
        got = fn(x[0])
        if not torch.equal(got, x[0]) if "split" not in name else (got - x[0]).abs().max() > 2**-11 * x[0].abs().max():
            log(f"CHECK FAILED kmajor copy {name}")
            continue
        ms = bench.time_graph([lambda t=t, fn=fn: fn(t) for t in x], dev, budget_s=0.2, est_ms=0.3).median_ms
        moved = BIG * BIG * 4 * (3 if "split" in name else 2)
        rows.append({"name": name, "ms": ms, "TBps": moved / ms / 1e9})
        log(f"kmajor {name:24s} {ms:.3f} ms {moved / ms / 1e9:.2f} TB/s")
    return rows


def _run_split(t, block):
    hi, _, launch = ops.tf32_split(t, -2, block)
    launch.run()
    return hi


def start(name: str):
    """(out folder, log function, device info) of a run writing ``<name>.log`` under ``--out``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=f"benchmarks/results/{name}")
    out = Path(ap.parse_known_args()[0].out)  # a caller's own options pass through
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / f"{name}.log", "w")  # noqa: SIM115 - lives as long as the run
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:5.0f}s] {msg}", flush=True)
        logf.write(msg + "\n")
        logf.flush()
    info = detect()
    log(f"{info.name} torch {info.versions.get('torch')} triton {info.versions.get('triton')} "
        f"commit {os.environ.get('TILECRAFT_COMMIT')}")
    return out, log, info


def main() -> None:
    out, log, info = start("gemm-explore")
    cases = timed_cases()
    precompile([(c, cfg) for c, cfg in cases if cfg is not None]
               + [(bench.Case("bf16", m, n, k, "NN"), None) for m, n, k in ((1000, 1000, 1000), (3000, 7000, 5000))], log)
    checks, acc = check_presplit(log)
    meta = {"checks": checks, "accuracy": acc}
    if not all(r["ok"] for r in checks):
        write_results([], "gemm-explore", out / "gemm-explore.json", info, meta=meta)
        log("correctness failed: no timing")
        sys.exit(1)
    copy = measure_copy_bandwidth()
    meta["copy_TBps"] = copy
    log(f"copy bandwidth {copy:.3f} TB/s")
    records: list[Record] = []
    for case, cfg, rec in timed_runs(cases, info, log, records, budget_s=0.15, copy_TBps=copy):
        e = rec.extra
        log(f"{case.name:32s} {GemmConfig.from_dict(e['config']).short():44s} ours {rec.ours:7.1f} "
            f"peer {rec.peer_value:7.1f} x{rec.ratio:.3f} err {e['rel_err']:.1e} copy {e.get('fraction_of_copy', 0):.1%}")
    write_results(records, "gemm-explore", out / "gemm-explore.json", info, meta=meta)
    records += alignment(info, log)
    write_results(records, "gemm-explore", out / "gemm-explore.json", info, meta=meta)
    meta["kmajor_copy"] = kmajor_copy(log)
    write_results(records, "gemm-explore", out / "gemm-explore.json", info, meta=meta)
    log("done")


if __name__ == "__main__":
    main()
