"""Products on pinned configurations against torch, in one run (2026-12-01, thirty-third session): ``--suite
batch``, batched bf16 products (which tile the heuristic should take for a batch stacked on the Gluon kernel);
``--suite fp64``, fp64 squares under two waves of tiles (smaller tiles and split-K against the 64x64 heuristic);
``--suite fp32``, fp32 ``ieee`` squares on the FMA kernel's tiles and K splits (against cuBLAS fp32, TF32 off);
``--suite ragged`` (2026-12-01, thirty-fourth session), batches whose M ends inside a tile or whose K ends inside a
K step, bf16 and tf32, on the heuristic, on its choice without the Gluon kernel, and on pinned tiles.
Each case: every configuration is checked against float64 (output poisoned) on the first input set, then ours and
torch are timed from CUDA graphs over rotated input sets in alternating order (``--rounds``), the medians and the
ratio x torch recorded.

    PYTHONPATH=src python -u benchmarks/gemm_batch_probe.py --suite batch --out results.json [--rounds 2]
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
import statistics
import time

import torch
import triton

from tilecraft.bench.gemm import time_graph
from tilecraft.bench.harness import git_commit, json_safe, rotation_sets
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning import gemm as tg
from tilecraft.tuning.gemm import GemmConfig

G128S5 = GemmConfig("gluon", 128, 128, 64, group_m=8, num_warps=8, num_stages=5)
G128S4 = GemmConfig("gluon", 128, 128, 64, group_m=8, num_warps=8, num_stages=4)
G64 = GemmConfig("gluon", 64, 128, 64, group_m=8, num_warps=4, num_stages=4)
G64C = GemmConfig("gluon", 64, 128, 64, group_m=8, num_warps=4, num_stages=5, cluster_m=2)
G256 = GemmConfig("gluon", 128, 256, 64, group_m=8, num_warps=8, num_stages=4)
TMA128 = GemmConfig("tma", 128, 128, 64, group_m=8, num_warps=8, num_stages=4)
TMA64 = GemmConfig("tma", 64, 128, 64, group_m=8, num_warps=4, num_stages=6)

# (batch, m, n, k): one wave of 128x128 tiles at K 512 / 1024 / 2048, and the 64 x 128^3 short-K family
CASES = [(32, 256, 256, 512), (32, 256, 256, 1024), (32, 256, 256, 2048), (8, 512, 512, 512), (8, 512, 512, 1024),
         (8, 512, 512, 2048), (64, 128, 128, 128), (32, 128, 256, 128), (16, 256, 256, 256)]
CONFIGS = [G128S5, G128S4, G64, G64C, G256, TMA128, TMA64]

FP64_CASES = [(1, 512, 512, 512), (1, 768, 768, 768), (1, 1024, 1024, 1024), (1, 2048, 2048, 2048)]
FP64_CONFIGS = [GemmConfig("pointer", 64, 64, 32, num_warps=4, num_stages=3),
                GemmConfig("pointer", 64, 64, 32, num_warps=4, num_stages=3, split_k=2),
                GemmConfig("pointer", 64, 64, 32, num_warps=4, num_stages=3, split_k=4),
                GemmConfig("pointer", 64, 64, 16, num_warps=4, num_stages=3, split_k=2),
                GemmConfig("pointer", 32, 64, 32, num_warps=4, num_stages=3),
                GemmConfig("pointer", 32, 64, 32, num_warps=2, num_stages=3),
                GemmConfig("pointer", 64, 32, 32, num_warps=2, num_stages=3),
                GemmConfig("pointer", 32, 32, 32, num_warps=2, num_stages=3),
                GemmConfig("pointer", 32, 64, 32, num_warps=4, num_stages=3, split_k=2),
                GemmConfig("pointer", 64, 128, 16, num_warps=4, num_stages=3),
                GemmConfig("pointer", 64, 128, 16, num_warps=4, num_stages=3, split_k=2)]


FP32_CASES = [(1, s, s, s) for s in (512, 768, 1024, 1536, 2048, 3072)]
FMA = GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2)
FP32_CONFIGS = [FMA, *(replace(FMA, split_k=s) for s in (2, 4, 8, 16)),
                GemmConfig("fma", 64, 64, 32, num_warps=2, num_stages=3, warps_m=2),
                GemmConfig("fma", 64, 64, 32, num_warps=2, num_stages=3, warps_m=2, split_k=2),
                GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3),
                GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3, split_k=2),
                GemmConfig("fma", 128, 64, 32, num_warps=4, num_stages=3, warps_m=4)]


# (batch, m, n, k, dtype, layout): M ending inside a tile
RAGGED_CASES = [(8, 1000, 1024, 1024, "bf16", "NN"), (16, 500, 512, 512, "bf16", "NN"), (64, 200, 256, 64, "bf16", "NT"),
                (4, 3000, 2048, 1024, "bf16", "NN"), (32, 77, 768, 768, "bf16", "NN"), (8, 320, 4096, 1024, "bf16", "TN"),
                (8, 1000, 1024, 1024, "tf32", "NN"), (16, 500, 512, 512, "tf32", "NN"), (4, 1000, 2048, 512, "tf32", "TT"),
                (32, 77, 768, 768, "tf32", "NN"),
                # K ending inside a K step with B (or A) read MN-major: rank-3 operand boxes
                (16, 256, 256, 1000, "bf16", "NN"), (96, 197, 64, 197, "bf16", "NN"), (4, 4096, 4096, 16, "bf16", "NN"),
                (8, 512, 1024, 1000, "bf16", "TN"), (8, 512, 512, 1000, "tf32", "NN"), (16, 200, 256, 100, "tf32", "TT"),
                # beta * C (0.5) read per entry in the stacked epilogue (the peer: torch.baddbmm)
                (8, 1000, 1024, 1024, "bf16", "NN", "c"), (16, 512, 512, 512, "bf16", "NT", "c"),
                (8, 1024, 1024, 1024, "tf32", "NN", "c"), (4, 2048, 2048, 2048, "bf16", "NN", "c"),
                # whole tiles (as before this suite: the rank-3 output store on a measured case)
                (8, 1024, 1024, 1024, "bf16", "TN"), (8, 1024, 1024, 1024, "tf32", "NN")]
REGS = GemmConfig("gluon", 128, 256, 32, group_m=8, num_warps=8, num_stages=4, mn_regs=True, row_perm=2)
RAGGED_CONFIGS = ["no-gluon", "heuristic", G128S4, G64, G256]
RAGGED_TF32 = ["no-gluon", "heuristic", REGS, GemmConfig("gluon", 128, 128, 32, group_m=8, num_warps=8,
                                                               num_stages=5, mn_regs=True, row_perm=2)]


def _pinned(cfg, a, b, spec):
    """A pinned config; "heuristic", the heuristic's choice (the rules in force); "no-gluon", its choice without the
    Gluon kernel, which is what the rule before 2026-12-01 ran for batches whose entries end inside a tile (M) or
    inside a K step with an operand read MN-major (K). (The first device run of this suite named the heuristic
    "heuristic-pad" and the choice under the old M rule "heuristic".)"""
    if isinstance(cfg, GemmConfig):
        return cfg
    p = ops.problem_of(a, b, spec)
    if cfg == "no-gluon":
        return tg.heuristic(replace(p, gluon_ok=False, mn_regs_ok=False))
    return tg.heuristic(p)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gemm-batch-probe.json")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--suite", choices=("batch", "fp64", "fp32", "ragged"), default="batch")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text (e.g. '+0.5C')")
    args = ap.parse_args()
    dt, tol = {"fp64": (torch.float64, 1e-12), "fp32": (torch.float32, 1e-5)}.get(args.suite, (torch.bfloat16, 1e-2))
    cases, configs = {"fp64": (FP64_CASES, FP64_CONFIGS), "fp32": (FP32_CASES, FP32_CONFIGS)}.get(args.suite,
                                                                                               (CASES, CONFIGS))
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 peer is cuBLAS fp32 (TF32 off)
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(5)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "commit": git_commit(),
           "date": time.strftime("%Y-%m-%d"), "records": []}
    if args.suite == "ragged":
        cases = RAGGED_CASES
    for case in cases:
        batch, m, n, k = case[:4]
        kind, layout = case[4:6] if len(case) > 4 else (args.suite if args.suite != "batch" else "bf16", "NN")
        with_c = len(case) > 6 and case[6] == "c"
        if args.only and args.only not in f"{batch} x {kind} {layout} {m}x{n}x{k}" + (" +0.5C" if with_c else ""):
            continue
        if args.suite == "ragged":
            dt, tol = (torch.float32, 3e-3) if kind == "tf32" else (torch.bfloat16, 1e-2)
            configs = RAGGED_TF32 if kind == "tf32" else RAGGED_CONFIGS
            torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
        kw = {"precision": "tf32"} if kind == "tf32" else {}
        nbytes = batch * (m * k + k * n + m * n) * dt.itemsize
        lead = (batch,) if batch > 1 else ()

        def rnd(*shape):
            return (torch.rand(*lead, *shape, device=dev, generator=gen, dtype=torch.float64) * 2 - 1).to(dt)

        sets = [(rnd(k, m).mT if layout[0] == "T" else rnd(m, k), rnd(n, k).mT if layout[1] == "T" else rnd(k, n))
                for _ in range(rotation_sets(nbytes, 50 * 2**20, maximum=8))]
        cs = [rnd(m, n) if with_c else None for _ in sets]
        if with_c:
            kw["beta"] = 0.5
        spec = ops.validate(*sets[0], c=cs[0], **kw)
        ref = matmul_reference(*sets[0], out_dtype=torch.float64)
        if with_c:
            ref = ref + 0.5 * cs[0].double()
            peer_calls = [lambda a=a, b=b, c=c: torch.baddbmm(c, a, b, beta=0.5) for (a, b), c in zip(sets, cs)]
        else:
            peer_calls = [lambda a=a, b=b: torch.matmul(a, b) for a, b in sets]
        for f in peer_calls:
            f()
        name = f"{batch} x " if batch > 1 else ""
        for want in configs:
            rec = {"case": f"{name}{kind} {layout} {m}x{n}x{k}" + (" +0.5C" if with_c else ""),
                   "config": want if isinstance(want, str) else want.short()}
            try:
                cfg = _pinned(want, *sets[0], spec)
                rec["config"] = f"{want}: {cfg.short()}" if isinstance(want, str) else cfg.short()
                out = torch.full(spec.out_shape, float("nan"), dtype=dt, device=dev)
                ops.launch(*sets[0], out, spec, cfg, c=cs[0])
                rec["rel_err"] = err = relative_error(out, ref)
                if not err <= tol:
                    raise AssertionError(f"relative error {err:.2e}")
                calls = [lambda a=a, b=b, c=c: ops.compute(a, b, spec, c=c, cfg=cfg) for (a, b), c in zip(sets, cs)]
                for f in calls:
                    f()
                ours, peer = [], []
                for _ in range(args.rounds):
                    ours.append(time_graph(calls, dev).median_ms)
                    peer.append(time_graph(peer_calls, dev).median_ms)
                rec.update(ours_ms=statistics.median(ours), peer_ms=statistics.median(peer),
                           ratio=statistics.median(peer) / statistics.median(ours), rounds_ours=ours, rounds_peer=peer)
                print(f"{rec['case']:28s} {rec['config']:48s} ours {rec['ours_ms'] * 1e3:7.1f} us torch "
                      f"{rec['peer_ms'] * 1e3:7.1f} us -> {rec['ratio']:.3f}x", flush=True)
            except Exception as exc:  # noqa: BLE001 - a config the launcher refuses: recorded
                rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                print(f"{rec['case']:28s} {rec['config']:48s} {rec['error'][:90]}", flush=True)
            doc["records"].append(rec)
            with open(args.out, "w") as fh:
                json.dump(json_safe(doc), fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
