"""Attention on a GPU in one call: correctness of every path, then tile configurations timed against
SDPA's backends (forward, backward, decode). Writes JSON as it goes (a timeout keeps what was done).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/attention_tune.py OUT_DIR [sections]

sections: any of check,fwd,bwd,decode (default all); later rounds: fwd2, bwd2, pccheck, pc, decode2, decode3,
gluoncheck, gluon (the Gluon forward of ``kernels.attention_gluon``), wscheck, ws (its warp-specialised ping-pong kernel).
Each configuration is checked against the float64 reference (``bench.attention.measure``) before it is timed.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from tilecraft.bench import attention as ba
from tilecraft.bench.harness import stamp
from tilecraft.hardware.device import detect
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import (
    attention_reference,
    attention_varlen_reference,
)

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "out")
SECTIONS = set((sys.argv[2] if len(sys.argv) > 2 else "check,fwd,bwd,decode").split(","))
BUDGET = 0.3
F, B, D = ops.FwdConfig, ops.BwdConfig, ops.DecodeConfig

FWD_CONFIGS = {
    128: [F(128, 64, 8, 3), F(128, 128, 8, 3), F(128, 64, 8, 4), F(128, 128, 8, 2), F(128, 64, 8, 3, True),
          F(128, 128, 8, 2, True)],
    64: [F(128, 64, 4, 3), F(128, 128, 8, 3), F(128, 64, 8, 3), F(128, 64, 4, 3, True), F(128, 128, 8, 3, True)],
    256: [F(64, 32, 4, 3), F(128, 32, 8, 3), F(64, 32, 4, 3, True), F(128, 64, 8, 2, True)],
}
FWD_SHAPES = {128: (4, 16, 4096), 64: (8, 16, 2048), 256: (2, 16, 4096)}
BWD_CONFIGS = {
    128: [B(32, 128, 128, 32, 8, 2), B(64, 128, 128, 64, 8, 2), B(64, 64, 64, 64, 8, 2)],
    64: [B(64, 128, 128, 64, 8, 2), B(32, 128, 128, 32, 4, 3)],
    256: [B(32, 64, 64, 32, 8, 2)],
}
DECODE_CONFIGS = [D(64, 4, 3), D(128, 4, 3), D(64, 8, 4)]
# second round (after the first run's results): warp specialisation, TMA at 128x128, split dQ launches
FWD2_CONFIGS = {
    128: [F(128, 128, 8, 3), F(128, 128, 8, 3, False, True), F(128, 64, 8, 3, True, True), F(128, 128, 8, 3, True)],
    64: [F(128, 64, 8, 3), F(128, 64, 8, 3, True), F(128, 64, 8, 3, False, True)],
}
BWD2_CONFIGS = {
    128: [B(64, 128, 128, 64, 8, 2), B(64, 128, 128, 64, 8, 3, 8, 3), B(128, 64, 128, 64, 8, 2),
          B(64, 128, 64, 128, 8, 2, 4, 2), B(64, 128, 64, 64, 8, 2, 4, 3)],
    256: [B(32, 64, 64, 32, 8, 2), B(32, 64, 128, 32, 8, 2), B(32, 64, 64, 64, 8, 2)],
}
# third round: the producer/consumer forward (attention_fwd_ws_kernel; num_warps=4 = one consumer
# warpgroup, Triton adds the producer and splits block_m over two consumers), the current default first
def PC(m: int, n: int, stages: int) -> ops.FwdConfig:
    return F(m, n, 4, stages, True, producer_consumer=True)


WS_CONFIGS = {
    128: [F(128, 128, 8, 3, True), PC(128, 128, 2), PC(128, 64, 3)],
    64: [F(128, 64, 8, 3), PC(128, 64, 3), PC(128, 128, 2)],
    256: [F(128, 64, 8, 2, True), PC(128, 64, 2)],
}
# split counts for the decode path (0: the default rule); S_q = 16 with GQA fills 2 programs per SM
# 1.2 times over with the default (320 programs), so whole waves are tried
DECODE2_CONFIGS = [D(64, 4, 3), D(64, 4, 3, 4), D(64, 4, 3, 8), D(128, 4, 3, 4), D(64, 4, 4, 4)]
# third round (lead, after decode2): more programs per SM for the 64-row GQA case (fewer stages, narrower
# key tiles, more splits) next to the one-wave default
DECODE3_CONFIGS = [D(64, 4, 3), D(64, 4, 2, 6), D(32, 4, 3, 6), D(32, 4, 4, 4), D(64, 8, 3, 4), D(128, 8, 2, 4),
                   D(32, 2, 3, 8), D(64, 4, 2, 8)]
# round 5: the Gluon forward (sm90), Triton's default first, then Gluon tiles; G(n, stages, overlap)
def G(n: int, stages: int, overlap: bool = True) -> ops.FwdConfig:
    return F(128, n, 8, stages, True, gluon=True, overlap=overlap)


GLUON_CONFIGS = {
    128: [G(128, 2), G(128, 3), G(128, 2, False), G(128, 3, False)],
    64: [G(128, 3), G(128, 2, False), G(128, 3, False), G(64, 4, False)],
    256: [G(64, 2), G(64, 2, False), G(32, 4, False)],
}
# round 6: the warp-specialised ping-pong forward (attention_fwd_gluon_ws_kernel), the current sm90
# default first; W(n, stages, overlap, pingpong)
def W(n: int, stages: int, overlap: bool = False, pingpong: bool = True) -> ops.FwdConfig:
    return F(128, n, 8, stages, True, gluon=True, overlap=overlap, ws=True, pingpong=pingpong)


WS_GLUON_CONFIGS = {
    128: [W(128, 2), W(128, 2, pingpong=False), W(128, 2, True), W(128, 3), W(128, 3, True)],
    64: [W(128, 2), W(128, 3), W(128, 3, pingpong=False), W(128, 3, True), W(128, 4)],
    256: [W(64, 2), W(64, 2, pingpong=False), W(64, 2, True), W(32, 4)],
}


def label(cfg: ops.FwdConfig) -> str:
    """A short name of a forward config for the printed table."""
    kind = ("gluon-ws" + ("-pp" if cfg.pingpong else "") if cfg.ws else "gluon") if cfg.gluon else "triton"
    return f"{kind} {cfg.block_m}x{cfg.block_n} s{cfg.num_stages}" + (" overlap" if cfg.gluon and cfg.overlap else "")


DECODE_SHAPES = [ba.Shape(8, 32, 8, 1, 8192, 128), ba.Shape(8, 32, 8, 16, 8192, 128),
                 ba.Shape(16, 32, 32, 1, 4096, 128), ba.Shape(4, 32, 8, 4, 32768, 128)]

doc: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": [], "records": []}


def save() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "attention-tune.json").write_text(json.dumps(doc, indent=1, default=str))


def rel(a, b) -> float:
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-300)).item()


def check_paths() -> None:
    """Public API on the GPU: every path against float64, forward and backward."""
    g = torch.Generator(device="cuda").manual_seed(3)
    cases = [("gqa causal Sq>Sk D96", (2, 8, 2, 300, 170, 96), True, "bhsd"),
             ("mha D64 ragged", (1, 4, 4, 1000, 1000, 64), False, "bhsd"),
             ("causal D128 Sq<Sk", (1, 4, 4, 257, 1000, 128), True, "bhsd"),
             ("D256 causal", (1, 2, 2, 333, 333, 256), True, "bhsd"),
             ("bshd mqa D40", (2, 4, 1, 77, 77, 40), True, "bshd"),
             ("decode gqa", (2, 8, 2, 3, 3000, 128), True, "bhsd")]
    for n, (name, (b, h, hk, sq, sk, d), causal, layout) in enumerate(cases):
        for dtype in (torch.bfloat16, torch.float16)[:2 if n == 0 else 1]:
            q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dtype)
            k = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dtype)
            v = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dtype)
            do = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dtype)
            leaves = [t.double().requires_grad_() for t in (q, k, v)]
            ref_o, _ = attention_reference(*leaves, causal=causal)
            ref_g = torch.autograd.grad(ref_o, leaves, do.double())
            for det in (True, False)[:2 if n == 0 else 1]:
                lv = [t.clone().requires_grad_() for t in (q, k, v)]
                if layout == "bshd":
                    o = ops.attention(*(t.transpose(1, 2) for t in lv), causal=causal, layout="bshd",
                                      deterministic=det).transpose(1, 2)
                else:
                    o = ops.attention(*lv, causal=causal, deterministic=det)
                grads = torch.autograd.grad(o, lv, do)
                errs = [rel(o, ref_o)] + [rel(a, r) for a, r in zip(grads, ref_g)]
                doc["checks"].append({"case": name, "dtype": str(dtype), "deterministic": det, "errors": errs,
                                      "nan": any(torch.isnan(x).any().item() for x in (o, *grads))})
                print(f"check {name:24s} {dtype!s:15s} det={det!s:5s} " + " ".join(f"{e:.1e}" for e in errs),
                      flush=True)
    # packed variable-length batch
    lens_q, lens_k = [1, 300, 17, 1000], [5, 300, 600, 999]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn(sum(lens_k), 2, 128, device="cuda", generator=g).to(torch.bfloat16)
    lv = [t.clone().requires_grad_() for t in (q, k, v)]
    o = ops.attention(*lv, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, lv, do)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ro, _ = attention_varlen_reference(*leaves, cu_q, cu_k, causal=True)
    rg = torch.autograd.grad(ro, leaves, do.double())
    errs = [rel(o, ro)] + [rel(a, r) for a, r in zip(grads, rg)]
    doc["checks"].append({"case": "varlen gqa causal", "dtype": "bf16", "errors": errs})
    print("check varlen gqa causal bf16 " + " ".join(f"{e:.1e}" for e in errs), flush=True)
    save()


def check_producer_consumer() -> None:
    """The warp-specialised forward on odd shapes against float64 (outputs poisoned with NaN)."""
    g = torch.Generator(device="cuda").manual_seed(5)
    cases = [(2, 8, 2, 300, 170, 96, True), (1, 4, 4, 1000, 1000, 64, False), (1, 4, 4, 257, 1000, 128, True),
             (1, 2, 2, 333, 333, 256, True), (2, 4, 1, 77, 77, 40, True), (1, 4, 2, 1024, 1024, 128, False),
             (1, 2, 2, 1000, 1000, 256, False)]
    for b, h, hk, sq, sk, d, causal in cases:
        q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(torch.bfloat16)
        k = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(torch.bfloat16)
        v = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(torch.bfloat16)
        ref_o, ref_l = attention_reference(q, k, v, causal=causal)
        p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
        for cfg in WS_CONFIGS[ops.block_d(d)][1:]:
            out = torch.full_like(q, float("nan"))
            lse = torch.full((b, h, sq), float("nan"), device="cuda")
            try:
                ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
                torch.cuda.synchronize()
                fin = torch.isfinite(ref_l)
                errs = [rel(out, ref_o), (lse.double()[fin] - ref_l[fin]).abs().max().item(),
                        float(torch.equal(torch.isfinite(lse), fin))]
                msg = ""
            except Exception as exc:  # noqa: BLE001 - a compile or launch failure is a result here
                errs, msg = [], f"{type(exc).__name__}: {exc}"[:200]
            doc["checks"].append({"case": f"pc B{b} H{h}/{hk} {sq}x{sk} D{d} causal={causal}", "config": cfg.as_dict(),
                                  "errors": errs, "message": msg})
            print(f"check pc B{b} H{h}/{hk} {sq}x{sk} D{d} c={causal!s:5s} {cfg.block_m}x{cfg.block_n}/s{cfg.num_stages} "
                  + " ".join(f"{e:.1e}" for e in errs) + msg, flush=True)
    save()


def check_gluon(configs: dict | None = None) -> None:
    """The Gluon forward on odd shapes against float64 (outputs and lse poisoned with NaN), every
    candidate config (``GLUON_CONFIGS`` unless given); a compile or launch failure is recorded, not raised."""
    configs = configs or GLUON_CONFIGS
    g = torch.Generator(device="cuda").manual_seed(11)
    cases = [(1, 2, 2, 1, 1, 128, True), (2, 4, 1, 17, 17, 64, True), (2, 8, 2, 1000, 1000, 128, False),
             (1, 4, 2, 300, 170, 128, True), (1, 2, 2, 17, 1000, 256, True), (1, 2, 1, 1000, 333, 256, False),
             (2, 2, 2, 1000, 1000, 64, True), (1, 4, 4, 4096, 4096, 128, True)]
    for b, h, hk, sq, sk, d, causal in cases:
        for dtype in (torch.bfloat16, torch.float16):
            q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dtype)
            k = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dtype)
            v = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dtype)
            ref_o, ref_l = attention_reference(q, k, v, causal=causal)
            p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
            for cfg in configs[d]:
                out = torch.full_like(q, float("nan"))
                lse = torch.full((b, h, sq), float("nan"), device="cuda")
                try:
                    hnd = ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
                    torch.cuda.synchronize()
                    fin = torch.isfinite(ref_l)
                    errs = [rel(out, ref_o), (lse.double()[fin] - ref_l[fin]).abs().max().item() if fin.any() else 0.0,
                            float(torch.equal(torch.isfinite(lse), fin))]
                    msg = f" {hnd.name} {hnd.n_regs}r/{hnd.n_spills}s"
                except Exception as exc:  # noqa: BLE001 - a compile or launch failure is a result here
                    errs, msg = [], f" {type(exc).__name__}: {exc}"[:300]
                doc["checks"].append({"case": f"gluon B{b} H{h}/{hk} {sq}x{sk} D{d} causal={causal}",
                                      "dtype": str(dtype), "config": cfg.as_dict(), "errors": errs, "message": msg})
                print(f"check B{b} H{h}/{hk} {sq}x{sk} D{d} c={causal!s:5s} {str(dtype)[6:]:8s} {label(cfg):30s} "
                      + " ".join(f"{e:.1e}" for e in errs) + msg, flush=True)
    save()


def square_shapes(dims):
    """(D, the issue's S_q = S_k shape at D) for each D, non-causal then causal."""
    for d in dims:
        b, h, s = FWD_SHAPES[d]
        for causal in (False, True):
            yield d, ba.Shape(b, h, h, s, s, d, causal)


def run(shape: ba.Shape, direction: str, cfgs, backends, deterministic: bool = True) -> None:
    for i, cfg in enumerate(cfgs):
        t0 = time.time()
        kw = {"bwd": cfg} if direction == "bwd" else {"fwd": cfg}
        res = ba.measure(shape, torch.bfloat16, direction, backends=backends if i == 0 else (),
                         deterministic=deterministic, budget_s=BUDGET, l2_bytes=INFO.l2_bytes, **kw)
        recs = stamp(ba.records_for(shape, "bf16", direction, res, COPY, cfg.as_dict()), INFO)
        tag = "" if deterministic else " atomic-dQ"
        for r in recs:
            r.case["tune_index"] = i
            r.extra["deterministic"] = deterministic
            doc["records"].append(r.as_dict())
        for r in res:
            val = (ba.attention_bytes(shape, 2, direction == "bwd") if ba.is_decode(shape) and direction == "fwd"
                   else ba.attention_flops(shape, direction == "bwd")) / (r.time_ms * 1e-3) / 1e12 if r.time_ms else None
            unit = "TB/s" if ba.is_decode(shape) and direction == "fwd" else "TFLOP/s"
            extra = f" {100 * val / COPY:.1f}% copy" if unit == "TB/s" and val and COPY else ""
            regs = ",".join(f"{x['registers']}r/{x['spills']}s" for x in (r.resources or []))
            print(f"{direction} {shape.label:30s} {r.impl:16s} {label(cfg) if r.impl == 'tilecraft' else '':32s}"
                  f"{tag} ok={r.ok} err={r.rel_error if r.rel_error is None else f'{r.rel_error:.1e}'} "
                  f"{'' if val is None else f'{val:.1f} {unit}'}{extra} {regs} {r.message[:80]} ({time.time() - t0:.1f}s)",
                  flush=True)
        save()
        torch.cuda.empty_cache()


ops.PRODUCER_CONSUMER_ON_GPU = True  # the experimental forward is measured (and checked) here
INFO = detect()
COPY = None
if __name__ == "__main__":
    t_start = time.time()
    doc["device"] = INFO.as_dict()
    if "check" in SECTIONS:
        check_paths()
    if SECTIONS & {"decode", "fwd", "decode2", "decode3", "gluon", "ws"}:
        from tilecraft.hardware.ceilings import measure_copy_bandwidth
        COPY = measure_copy_bandwidth()
        doc["copy_TBps"] = COPY
        print(f"copy bandwidth {COPY:.2f} TB/s", flush=True)
    if "fwd" in SECTIONS:
        for d, shape in square_shapes((128, 64, 256)):
            run(shape, "fwd", FWD_CONFIGS[d], ("cudnn", "flash"))
    if "bwd" in SECTIONS:
        for d in (128, 64, 256):
            b, h, s = FWD_SHAPES[d]
            for causal in (False, True):
                run(ba.Shape(b, h, h, s, s, d, causal), "bwd", BWD_CONFIGS[d], ("cudnn", "flash"))
            if d == 128:
                for causal in (False, True):
                    run(ba.Shape(b, h, h, s, s, d, causal), "bwd", BWD_CONFIGS[d][:1], (), deterministic=False)
    if "fwd2" in SECTIONS:
        for d, shape in square_shapes((128, 64)):
            run(shape, "fwd", FWD2_CONFIGS[d], ())
    if "bwd2" in SECTIONS:
        for d, shape in square_shapes((128, 256)):
            run(shape, "bwd", BWD2_CONFIGS[d], ("flash",) if d == 128 else ())
    if "pccheck" in SECTIONS:
        check_producer_consumer()
    if "pc" in SECTIONS:
        for d, shape in square_shapes((128, 64, 256)):
            run(shape, "fwd", WS_CONFIGS[d], ("cudnn", "flash"))
    if "gluoncheck" in SECTIONS:
        check_gluon()
    if "gluon" in SECTIONS:
        for d, shape in square_shapes((128, 64, 256)):
            run(shape, "fwd", [ops.triton_fwd_config(d, torch.device("cuda"))] + GLUON_CONFIGS[d], ("cudnn", "flash"))
    if "wscheck" in SECTIONS:
        check_gluon(WS_GLUON_CONFIGS)
    if "ws" in SECTIONS:
        for d, shape in square_shapes((128, 64, 256)):
            run(shape, "fwd", [ops.default_fwd_config(d, torch.device("cuda"), causal=shape.causal)]
                + WS_GLUON_CONFIGS[d], ("cudnn", "flash"))
    if "decode2" in SECTIONS:
        for shape in DECODE_SHAPES[:2]:
            run(shape, "fwd", DECODE2_CONFIGS, ("cudnn",))
    if "decode3" in SECTIONS:
        for shape in DECODE_SHAPES[:2] + DECODE_SHAPES[3:]:
            run(shape, "fwd", DECODE3_CONFIGS, ("cudnn",))
    if "decode" in SECTIONS:
        for shape in DECODE_SHAPES:
            run(shape, "fwd", DECODE_CONFIGS, ("cudnn", "flash", "efficient"))
            run(shape, "fwd", [FWD_CONFIGS[128][0]], ())  # the tiled kernel on the same shape, for contrast
    doc["wall_s"] = time.time() - t_start
    save()
    print(f"done in {doc['wall_s']:.0f}s", flush=True)
