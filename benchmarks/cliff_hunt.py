"""Cliff hunt: ours against the torch call a user would otherwise make, over shapes the issues' suites
leave out (medium squares, batches, broadcast operands, short or long K, padded rows, epilogues, fp32 and
fp64 by default precision; attention at short sequences, grouped heads, head dims that are not powers of
two, backward; the Laplacian at every order), to find where a user's first try lands far below the peer.

Every GEMM case is checked against float64 before it is timed; both sides are timed from CUDA graphs over
rotated input sets (device time), in alternating order, and also as an eager loop of calls (what a Python
caller sees when the host is slower than the GPU). Attention uses ``bench.attention.measure`` (ours
against each SDPA backend, checked first); the Laplacian ``bench.stencil.measure_config`` (variant
``auto``, % of the copy bandwidth measured in the same run).

    TILECRAFT_TUNE=0 PYTHONPATH=src python -u benchmarks/cliff_hunt.py --out results.json [--only gemm,attention,stencil]

Records go to the JSON after every case, so a run cut short keeps what it measured. Ratios below
``--flag`` (default 0.9) are listed at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import tilecraft
from tilecraft.bench import attention as batt
from tilecraft.bench import stencil as bst
from tilecraft.bench.gemm import time_graph
from tilecraft.bench.harness import git_commit, json_safe, rotation_sets, time_rotating
from tilecraft.hardware import ceilings
from tilecraft.hardware.device import detect
from tilecraft.reference.gemm import matmul_reference

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
      "int8": torch.int8}
TOL = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5, "fp64": 1e-12, "int8": 0.0, "tf32": 3e-3}
ACT = {None: lambda x: x, "gelu": F.gelu, "relu": F.relu, "silu": F.silu}


def gemm_cases() -> list[dict]:
    c: list[dict] = []
    for n in (256, 512, 1024, 2048, 3072):
        for lay in ("NN", "NT"):
            c.append(dict(dtype="bf16", m=n, n=n, k=n, layout=lay))
    for b, m, n, k in ((8, 512, 512, 512), (64, 128, 128, 128), (16, 1024, 1024, 64), (4, 2048, 2048, 2048),
                       (32, 256, 256, 1024), (128, 64, 64, 64)):
        c.append(dict(dtype="bf16", m=m, n=n, k=k, batch=b))
    c.append(dict(dtype="bf16", m=512, n=1024, k=1024, batch=16, broadcast_b=True))
    c.append(dict(dtype="bf16", m=2048, n=2048, k=2048, batch=4, layout="NT"))
    for m, n, k in ((8192, 8192, 64), (4096, 4096, 16), (512, 512, 65536), (2048, 2048, 32768),
                    (65536, 128, 128), (65536, 256, 4096), (128, 65536, 128), (4096, 4096, 1)):
        c.append(dict(dtype="bf16", m=m, n=n, k=k))
    c.append(dict(dtype="bf16", m=4097, n=4097, k=4097))
    c.append(dict(dtype="bf16", m=2048, n=2048, k=2048, pad=8))       # rows padded: ld = K + 8
    c.append(dict(dtype="bf16", m=2048, n=2048, k=2048, pad=1))       # ld = K + 1: not 16-byte rows
    c.append(dict(dtype="bf16", m=4096, n=4096, k=4096, bias=True, act="gelu"))
    c.append(dict(dtype="bf16", m=1024, n=4096, k=4096, bias=True, act="gelu", layout="NT"))
    c.append(dict(dtype="bf16", m=4096, n=4096, k=4096, beta=1.0))
    c.append(dict(dtype="fp16", m=1024, n=1024, k=1024))
    c.append(dict(dtype="fp16", m=8, n=4096, k=4096, batch=8))
    for n in (512, 1024, 2048, 4096):
        c.append(dict(dtype="fp32", m=n, n=n, k=n))
    c.append(dict(dtype="tf32", m=2048, n=2048, k=2048))
    c.append(dict(dtype="tf32", m=1024, n=1024, k=1024, batch=8))
    # more batches (the Gluon kernel's stacked batch, 2026-12-01): TN / NT layouts, attention-like products,
    # tf32 with both operands K-major, a bias and activation, tf32 TT
    c.append(dict(dtype="bf16", m=1024, n=1024, k=1024, batch=8, layout="TN"))
    c.append(dict(dtype="bf16", m=1024, n=1024, k=128, batch=32, layout="NT"))
    c.append(dict(dtype="bf16", m=2048, n=4096, k=1024, batch=4, bias=True, act="gelu"))
    c.append(dict(dtype="tf32", m=1024, n=1024, k=1024, batch=8, layout="NT"))
    c.append(dict(dtype="tf32", m=2048, n=2048, k=512, batch=4, layout="TT"))
    # batches whose entries end inside a tile (M) or a K step (K, an operand read MN-major), and beta * C on the
    # stacked batch (2026-12-01, thirty-fourth session)
    c.append(dict(dtype="bf16", m=1000, n=1024, k=1024, batch=8))
    c.append(dict(dtype="bf16", m=77, n=768, k=768, batch=32))
    c.append(dict(dtype="bf16", m=4096, n=4096, k=16, batch=4))
    c.append(dict(dtype="bf16", m=512, n=1024, k=1000, batch=8, layout="TN"))
    c.append(dict(dtype="bf16", m=256, n=256, k=1000, batch=16))
    c.append(dict(dtype="tf32", m=77, n=768, k=768, batch=32))
    c.append(dict(dtype="tf32", m=512, n=512, k=1000, batch=8))
    c.append(dict(dtype="tf32", m=1024, n=1024, k=1024, batch=8, beta=0.5))
    for n in (512, 1024, 2048):
        c.append(dict(dtype="fp64", m=n, n=n, k=n))
    c.append(dict(dtype="int8", m=2048, n=2048, k=2048, layout="NT"))
    c.append(dict(dtype="int8", m=1024, n=1024, k=1024, layout="NT"))
    return c


def _name(cs: dict) -> str:
    s = f"{cs['dtype']} {cs.get('layout', 'NN')} {cs['m']}x{cs['n']}x{cs['k']}"
    if cs.get("batch"):
        s = f"{cs['batch']} x " + s + (" (B broadcast)" if cs.get("broadcast_b") else "")
    for key in ("pad", "bias", "act", "beta"):
        if cs.get(key):
            s += f" {key}={cs[key]}"
    return s


def gemm_operands(cs: dict, dev, gen):
    dt = torch.float32 if cs["dtype"] == "tf32" else DT[cs["dtype"]]
    m, n, k, lay, batch, pad = cs["m"], cs["n"], cs["k"], cs.get("layout", "NN"), cs.get("batch"), cs.get("pad", 0)

    def rnd(rows, cols, bt):
        shape = ((bt,) if bt else ()) + (rows, cols + pad)
        if dt == torch.int8:
            x = torch.randint(-64, 64, shape, device=dev, dtype=torch.int8, generator=gen)
        else:
            x = (torch.rand(shape, device=dev, generator=gen, dtype=torch.float32) * 2 - 1).to(dt)
        return x[..., :cols]
    a = rnd(k, m, batch).transpose(-1, -2) if lay[0] == "T" else rnd(m, k, batch)
    bb = None if cs.get("broadcast_b") else batch
    b = rnd(n, k, bb).transpose(-1, -2) if lay[1] == "T" else rnd(k, n, bb)
    extra = {}
    if cs.get("bias"):
        extra["bias"] = (torch.rand(n, device=dev, generator=gen) * 2 - 1).to(dt)
    if cs.get("beta"):
        extra["c"] = (torch.rand(((batch,) if batch else ()) + (m, n), device=dev, generator=gen) * 2 - 1).to(dt)
    return a, b, extra


def gemm_calls(cs: dict, a, b, extra):
    kw = {}
    if cs["dtype"] == "tf32":
        kw["precision"] = "tf32"
    if "bias" in extra:
        kw["bias"] = extra["bias"]
    if "c" in extra:
        kw.update(c=extra["c"], beta=cs["beta"])
    if cs.get("act"):
        kw["activation"] = cs["act"]

    def ours():
        return tilecraft.matmul(a, b, **kw)

    act = ACT[cs.get("act")]
    if cs["dtype"] == "int8":
        def peer():
            return torch._int_mm(a, b)
    elif "c" in extra:
        def peer():
            return torch.baddbmm(extra["c"], a, b, beta=cs["beta"]) if a.dim() == 3 else \
                torch.addmm(extra["c"], a, b, beta=cs["beta"])
    elif "bias" in extra:
        def peer():
            return act(torch.addmm(extra["bias"], a, b) if a.dim() == 2 else torch.matmul(a, b) + extra["bias"])
    else:
        def peer():
            return act(torch.matmul(a, b))
    return ours, peer


def run_gemm(cs: dict, dev, say) -> dict:
    rec = {"section": "gemm", "case": _name(cs), "params": cs}
    gen = torch.Generator(device=dev).manual_seed(11)
    m, n, k, bt = cs["m"], cs["n"], cs["k"], cs.get("batch") or 1
    isz = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp64": 8, "int8": 1}[cs["dtype"]]
    osz = 4 if cs["dtype"] == "int8" else isz
    nbytes = bt * (m * k + n * k) * isz + bt * m * n * osz
    flops = 2 * bt * m * n * k
    n_sets = rotation_sets(nbytes, 50 * 2**20, maximum=8)

    def body():
        sets = [gemm_operands(cs, dev, gen) for _ in range(n_sets)]
        a, b, extra = sets[0]
        ours0, _ = gemm_calls(cs, a, b, extra)
        y = ours0()
        ref = matmul_reference(a, b, out_dtype=torch.float64 if cs["dtype"] != "int8" else torch.int64,
                               c=extra.get("c"), beta=cs.get("beta", 0.0), bias=extra.get("bias"),
                               activation=cs.get("act"))
        if cs["dtype"] == "int8":
            err = float((y.long() - ref).abs().max())
        else:
            err = float((y.double() - ref).norm() / ref.norm().clamp_min(1e-300))
        rec["rel_err"] = err
        try:
            from tilecraft.ops import gemm as og
            kw = {"precision": "tf32"} if cs["dtype"] == "tf32" else {}
            if "bias" in extra:
                kw["bias"] = extra["bias"]
            if "c" in extra:
                kw.update(c=extra["c"], beta=cs["beta"])
            spec = og.validate(a, b, activation=cs.get("act"), **kw)
            cfg = og.choose_config(a, b, spec, c=extra.get("c"), bias=extra.get("bias"))
            rec["config"] = cfg.as_dict()
            rec["kernel"] = cfg.kernel
        except Exception as exc:  # noqa: BLE001
            rec["config_error"] = repr(exc)[:200]
        if not err <= TOL[cs["dtype"]] or torch.isnan(y).any():
            rec["failed"] = f"check: error {err:.2e}"
            say(f"{rec['case']}: FAILED check ({err:.2e})")
            return
        calls = [gemm_calls(cs, *s) for s in sets]
        for o, p in calls:
            o(), p()
        torch.cuda.synchronize()
        est = flops / (300e12 if isz <= 2 else 30e12) * 1e3 + 0.005
        t_o, t_p = [], []
        for r in range(2):
            order = (("o", "p") if r == 0 else ("p", "o"))
            for side in order:
                fns = [c[0] if side == "o" else c[1] for c in calls]
                t = time_graph(fns, dev, budget_s=0.3, est_ms=est)
                (t_o if side == "o" else t_p).append(t.median_ms)
        rec["ours_ms"], rec["peer_ms"] = statistics.median(t_o), statistics.median(t_p)
        rec["ratio"] = rec["peer_ms"] / rec["ours_ms"]
        # eager: a loop of 20 calls, events around the loop (host-bound calls show here)
        eager = {}
        for side in ("o", "p"):
            fns = [c[0] if side == "o" else c[1] for c in calls]
            for f in fns:
                f()
            torch.cuda.synchronize()
            ts = []
            for _ in range(5):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(20):
                    fns[i % len(fns)]()
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) / 20)
            eager[side] = statistics.median(ts)
        rec["ours_eager_ms"], rec["peer_eager_ms"] = eager["o"], eager["p"]
        rec["eager_ratio"] = eager["p"] / eager["o"]
        rec["ours_TFLOPs"] = flops / rec["ours_ms"] / 1e9
        say(f"{rec['case']}: ours {rec['ours_ms'] * 1e3:.1f} us, torch {rec['peer_ms'] * 1e3:.1f} us "
            f"-> {rec['ratio']:.3f}x (eager {rec['eager_ratio']:.3f}x: {eager['o'] * 1e3:.1f} / {eager['p'] * 1e3:.1f} us)"
            f", err {err:.1e} [{rec.get('kernel')}]")

    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = cs["dtype"] == "tf32"
    try:
        return _recorded(rec, say, body)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32


def attention_shapes() -> list[tuple[batt.Shape, str]]:
    S = batt.Shape
    out = []
    for s in (S(32, 16, 16, 512, 512, 128), S(32, 16, 16, 512, 512, 128, True), S(64, 16, 16, 256, 256, 64),
              S(64, 16, 16, 256, 256, 64, True), S(8, 32, 32, 1024, 1024, 128, True), S(4, 32, 8, 4096, 4096, 128, True),
              S(4, 32, 8, 4096, 4096, 128), S(4, 16, 16, 1024, 4096, 128), S(4, 16, 16, 2048, 2048, 80),
              S(4, 16, 16, 2048, 2048, 96, True), S(2, 16, 16, 8192, 8192, 128, True), S(16, 32, 32, 128, 128, 128),
              S(1, 32, 8, 16384, 16384, 128, True)):
        out.append((s, "fwd"))
    for s in (S(8, 16, 16, 1024, 1024, 64), S(4, 16, 16, 2048, 2048, 128, True), S(4, 32, 8, 4096, 4096, 128, True),
              S(16, 16, 16, 512, 512, 128, True), S(4, 16, 16, 2048, 2048, 96, True)):
        out.append((s, "bwd"))
    return out


def run_attention(s: batt.Shape, direction: str, say) -> dict:
    rec = {"section": "attention", "case": f"{direction} {s.label}", "params": {**s.as_dict(), "direction": direction}}

    def body():
        res = batt.measure(s, torch.bfloat16, direction, budget_s=0.4, l2_bytes=50 * 2**20)
        rec["results"] = [{"impl": r.impl, "ok": r.ok, "ms": r.time_ms, "err": r.rel_error, "msg": r.message}
                          for r in res]
        ours = res[0]
        peers = [r for r in res[1:] if r.ok and r.time_ms]
        if not ours.ok:
            rec["failed"] = ours.message
            say(f"{rec['case']}: ours FAILED {ours.message}")
            return
        best = min(peers, key=lambda r: r.time_ms) if peers else None
        rec["ours_ms"] = ours.time_ms
        if best:
            rec.update(peer=best.impl, peer_ms=best.time_ms, ratio=best.time_ms / ours.time_ms)
        say(f"{rec['case']}: ours {ours.time_ms:.3f} ms, best peer {best.impl if best else '-'} "
            f"{best.time_ms if best else float('nan'):.3f} ms -> {rec.get('ratio', float('nan')):.3f}x")
    return _recorded(rec, say, body)


def stencil_cases() -> list[tuple[tuple[int, int, int], str, int]]:
    out = []
    for dt in ("fp32", "fp64"):
        for order in (2, 4, 6, 8, 10, 12, 14, 16):
            r = order // 2
            out.append(((256 + 2 * r,) * 3, dt, order))
            out.append(((512 + 2 * r,) * 3, dt, order))
    out.append(((128, 128, 128), "fp32", 8))
    out.append(((64, 1024, 1024), "fp32", 8))
    out.append(((1024, 256, 250), "fp64", 2))
    return out


def run_stencil(shape, dt, order, copy_TBps, say) -> dict:
    rec = {"section": "stencil", "case": f"{dt} o{order} {'x'.join(map(str, shape))}",
           "params": {"shape": shape, "dtype": dt, "order": order}}

    def body():
        res = bst.measure_config(shape, DT[dt], order, "auto", l2_bytes=50 * 2**20, budget_s=0.4, check="small")
        if not res.ok:
            rec["failed"] = res.message or f"error {res.error}"
            say(f"{rec['case']}: FAILED {rec['failed']}")
            return
        rec.update(ours_ms=res.timing.median_ms, fom_TBps=res.fom_TBps, copy_TBps=copy_TBps,
                   ratio=res.fom_TBps / copy_TBps, config=res.config, resources=res.resources)
        say(f"{rec['case']}: {res.timing.median_ms:.3f} ms, FOM {res.fom_TBps:.2f} TB/s = "
            f"{100 * rec['ratio']:.1f}% of copy ({res.config.get('kernel')})")
    return _recorded(rec, say, body)


def _recorded(rec: dict, say, body) -> dict:
    """``body()`` (which fills ``rec``); an exception is recorded as the case's failure and the hunt goes on."""
    try:
        body()
    except Exception as exc:  # noqa: BLE001 - a hunt records every failure and goes on
        rec["failed"] = f"{type(exc).__name__}: {exc}"[:400]
        say(f"{rec['case']}: ERROR {rec['failed']}")
    return rec


def _wanted(name: str, match: str) -> bool:
    return not match or any(m and m in name for m in match.split(","))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="cliff-hunt.json")
    ap.add_argument("--only", default="gemm,attention,stencil")
    ap.add_argument("--flag", type=float, default=0.9)
    ap.add_argument("--match", default="", help="only cases whose name contains one of these (comma-separated) texts")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    info = detect()
    t0 = time.time()

    def say(msg):
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)
    copy = ceilings.measure_copy_bandwidth(dev)
    say(f"{info.name}: copy {copy:.3f} TB/s; torch {torch.__version__}")
    doc = {"device": info.name, "torch": torch.__version__, "commit": git_commit(),
           "date": time.strftime("%Y-%m-%d"), "copy_TBps": copy, "records": []}
    out = Path(args.out)

    def save():
        out.write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False))
    sections = args.only.split(",")
    if "gemm" in sections:
        for cs in gemm_cases():
            if _wanted(_name(cs), args.match):
                doc["records"].append(run_gemm(cs, dev, say))
                save()
    if "attention" in sections:
        for s, d in attention_shapes():
            if _wanted(f"{d} {s.label}", args.match):
                doc["records"].append(run_attention(s, d, say))
                save()
    if "stencil" in sections:
        for shape, dt, order in stencil_cases():
            if not _wanted(f"{dt} o{order} {'x'.join(map(str, shape))}", args.match):
                continue
            doc["records"].append(run_stencil(shape, dt, order, copy, say))
            save()
    low = [r for r in doc["records"] if r.get("failed") or (r.get("ratio") is not None and r["section"] != "stencil"
                                                            and r["ratio"] < args.flag)]
    say(f"{len(low)} cases below {args.flag}x or failed:")
    for r in low:
        say(f"  {r['case']}: {r.get('ratio', r.get('failed'))}")
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
