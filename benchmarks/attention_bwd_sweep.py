"""Backward tiles for D128 (the issue's B4 H16 S4096, causal and not) against FlashAttention-2's backward in
every round, bf16, eager backward timed with the launch hidden (the harness since 2026-11-27); every config
checked against float64 first (``bench.attention.measure``). ``atomic`` is the default tiles with
``deterministic=False`` (dQ by fp32 atomics inside the dK/dV kernel), element-wise (``dq_tma=False``); ``tma*``
dQ by TMA bulk reductions (``BwdConfig.dq_tma``, sm90). ``--profile a,b`` prints each named config's GPU time per
kernel (torch profiler) first.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/attention_bwd_sweep.py --out $OUT [--rounds 2]
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from attention_timing import start  # noqa: E402

from tilecraft.bench import attention as ba  # noqa: E402
from tilecraft.bench.harness import Record, write_results  # noqa: E402
from tilecraft.ops import attention as ops  # noqa: E402


def configs(head_dim: int = 128) -> dict[str, tuple[ops.BwdConfig, bool]]:
    """name -> (config, deterministic), around the head dimension's default tiles."""
    d = ops.default_bwd_config(head_dim, torch.device("cuda"))
    return {"default": (d, True), "atomic": (replace(d, dq_tma=False), False), "s4": (replace(d, num_stages=4), True),
            "dq-s2": (replace(d, dq_num_stages=2), True), "dq-w4": (replace(d, dq_num_warps=4), True),
            "m1-32": (replace(d, block_m1=32), True), "m2-64": (replace(d, block_m2=64), True),
            "n2-32": (replace(d, block_n2=32), True), "s2": (replace(d, num_stages=2), True),
            # dQ by TMA bulk reductions (sm90; ``atomic`` is element-wise since dq_tma=False)
            "tma": (replace(d, dq_tma=True), False), "tma-m32": (replace(d, dq_tma=True, block_m1=32), False),
            "tma-n64": (replace(d, dq_tma=True, block_n1=64), False),
            "tma-s2": (replace(d, dq_tma=True, num_stages=2), False),
            # for D256 (dK/dV 32x64 tiles, 8 warps, 2 stages by default)
            "n1-32": (replace(d, block_n1=32), True), "m1-16": (replace(d, block_m1=16), True),
            "s1": (replace(d, num_stages=1), True), "s3": (replace(d, num_stages=3), True),
            "w4": (replace(d, num_warps=4), True), "s3-dq2": (replace(d, num_stages=3, dq_num_stages=2), True),
            "s3-dq4": (replace(d, num_stages=3, dq_num_stages=4), True),
            "s4-dq3": (replace(d, num_stages=4, dq_num_stages=3), True)}


def profile(name: str, cfg: ops.BwdConfig, det: bool, out: Path) -> None:
    """GPU time per kernel of one config's backward on the causal shape (torch profiler, 10 calls)."""
    from torch.profiler import ProfilerActivity, profile as prof

    s = ba.Shape(4, 16, 16, 4096, 4096, 128, True)
    q, k, v, do = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    out_, lse = ops._fwd_compute(q, k, v, None, None, p)
    grads = tuple(torch.empty_like(t) for t in (q, k, v))
    run = lambda: ops.launch_bwd(do, q, k, v, out_, lse, None, *grads, None, None, p, cfg, det)  # noqa: E731
    run()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as pr:
        for _ in range(10):
            run()
        torch.cuda.synchronize()
    rows = sorted(((e.key, e.device_time_total / e.count, e.count) for e in pr.key_averages() if e.device_time_total > 0),
                  key=lambda r: -r[1] * r[2])
    text = "\n".join(f"{name:8s} {key[:70]:70s} {us:9.1f} us x{n}" for key, us, n in rows)
    print(text, flush=True)
    (out / f"attention-bwd-profile-{name}.txt").write_text(text + "\n")
    del s


def main() -> int:
    def extra(ap):
        ap.add_argument("--only", default="", help="comma-separated config names")
        ap.add_argument("--profile", default="", help="comma-separated config names to profile per kernel")
        ap.add_argument("--dims", default="128", help="head dimensions: the issue's shapes of each (64, 128, 256)")
    args, out, info = start(2, 0.4, extra)
    for name in filter(None, args.profile.split(",")):
        profile(name, *configs()[name], out)
    keep = args.only.split(",") if args.only else None
    dims = [int(x) for x in args.dims.split(",")]
    shapes = [s for d in dims for s in ba.ISSUE_SHAPES if s.head_dim == d and not ba.is_decode(s)]
    shapes.sort(key=lambda s: (dims.index(s.head_dim), not s.causal))
    records, ratios = [], {}
    t0 = time.time()
    for rnd in range(1, args.rounds + 1):
        for s in shapes:
            flops = ba.attention_flops(s, backward=True)
            flash = [r for r in ba.measure(s, torch.bfloat16, "bwd", backends=("flash",), budget_s=args.budget)
                     if r.impl == "sdpa-flash" and r.ok]
            fa2 = flash[0].time_ms if flash else None
            cfgs = {k: v for k, v in configs(s.head_dim).items() if keep is None or k in keep}
            names = list(cfgs) if rnd % 2 else list(cfgs)[::-1]
            for name in names:
                cfg, det = cfgs[name]
                try:
                    res = ba.measure(s, torch.bfloat16, "bwd", backends=(), bwd=cfg, deterministic=det,
                                     budget_s=args.budget)
                except Exception as exc:  # noqa: BLE001 - one failed config must not stop the others
                    print(f"   {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                    continue
                ours = next((r for r in res if r.impl == "tilecraft"), None)
                if ours is None or not ours.ok or not ours.time_ms:
                    print(f"   {name}: {ours.message if ours else 'no result'}", flush=True)
                    continue
                case = f"D{s.head_dim}{' causal' if s.causal else ''}"
                ratio = fa2 / ours.time_ms if fa2 else None
                ratios.setdefault((case, name), []).append(ratio)
                print(f"[{time.time() - t0:5.0f}s] r{rnd} {case:12s} {name:8s} {flops / ours.time_ms / 1e9:6.1f} TFLOP/s"
                      + (f"  FA2 {flops / fa2 / 1e9:6.1f}  x{ratio:.3f}" if fa2 else "") + f"  err {ours.rel_error:.1e}",
                      flush=True)
                records.append(Record("attention.bwd_sweep", {"shape": str(s), "config": name, "round": rnd,
                                                              "deterministic": det, "bwd": cfg.as_dict()},
                                      "TFLOP/s", "TFLOP/s", flops / ours.time_ms / 1e9, peer="sdpa-flash",
                                      peer_value=flops / fa2 / 1e9 if fa2 else None, ratio=ratio,
                                      extra={"timing": ours.timing, "rel_error": ours.rel_error}))
        write_results(records, "attention.bwd_sweep", out / f"attention-bwd-sweep{args.tag}.json", info)
    for (case, name), rs in ratios.items():
        rs = [r for r in rs if r]
        if rs:
            print(f"{case:12s} {name:8s} x FA2 {' '.join(f'{r:.3f}' for r in rs)} median {statistics.median(rs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
