"""The Gluon GEMM with and without clusters of two CTAs sharing B (``cluster_m``), interleaved in rounds,
torch in the same run, every config checked against float64 first (``bench.gemm.run_case``); and the eager
host time per call of each (``ops.compute`` with the config pinned, 1000^3, many calls, one sync).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/gemm_cluster_probe.py --out $OUT [--rounds 3] [--cases big]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("TILECRAFT_TUNE", "0")

from tilecraft.bench import gemm as bench  # noqa: E402
from tilecraft.bench.harness import stamp, write_results  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.ops import gemm as ops  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig as T  # noqa: E402

G64, G256 = T("gluon", 64, 128, 64, 8, 4, 4), T("gluon", 128, 256, 64, 8, 8, 4)
CASES = {
    "short": [("bf16", 1000, 1000, 1000, "NT", G64), ("bf16", 1000, 1000, 1000, "TT", G64)],
    "big": [("bf16", 8192, 8192, 8192, lay, G256) for lay in ("NN", "NT", "TN", "TT")]
           + [("fp16", 8192, 8192, 8192, "NN", G256), ("bf16", 4096, 4096, 4096, "NT", G256)],
    # rows of 10000 bytes (not 128-byte aligned): the TMA kernel pads them (pad_rows); the Gluon tile padded too
    "odd": [("bf16", 3000, 7000, 5000, lay, replace(G256, pad_rows=True)) for lay in ("NN", "TT")]
           + [("fp16", 3000, 7000, 5000, "TT", replace(G256, pad_rows=True))],
}
# the short-K cluster tile holds one tile a CTA: more stages put more of its K in flight from the start
_C = replace(G64, cluster_m=2)
CASES["stages"] = [(dt, 1000, 1000, 1000, lay, _C, replace(_C, num_stages=6), replace(_C, num_stages=8))
                   for dt, lay in (("bf16", "NN"), ("bf16", "NT"), ("bf16", "TN"), ("bf16", "TT"), ("fp16", "NN"))]
CASES["stages2"] = [(dt, 1000, 1000, 1000, lay, replace(_C, num_stages=5), replace(_C, num_stages=6),
                     replace(_C, num_stages=7), replace(G64, num_stages=6), G64)
                    for dt, lay in (("bf16", "NN"), ("bf16", "TT"), ("fp16", "NN"))]
# tf32 NN at 8192^3 (0.97x torch): the register operand's rows in bank-conflict-free order (row_perm) and a
# fourth stage, against the rule's tile, in alternating rounds (docs/gemm.md, follow-ups 6 and 32)
_TF = T("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True)
CASES["tf32nn"] = [("tf32", 8192, 8192, 8192, "NN", replace(_TF, row_perm=1), replace(_TF, num_stages=4),
                    replace(_TF, num_stages=4, row_perm=1), _TF)]
# the register operand read in row pairs (row_perm=2: LDS.64, and NN's transposed store in 64-bit stores)
CASES["tf32pair"] = [("tf32", s, s, s, lay, replace(_TF, row_perm=2), _TF, replace(_TF, row_perm=2, num_stages=4))
                     for s in (8192, 4096) for lay in ("NN", "TT")]
CASES["tf32pair8k"] = CASES["tf32pair"][:2]
# the pair tile with other L2 groupings (fewer DRAM bytes, less power at the cap) and four stages
_TP = replace(_TF, row_perm=2)
CASES["tf32group"] = [("tf32", 8192, 8192, 8192, "NN", _TP, replace(_TP, num_stages=4), replace(_TP, group_m=16),
                       replace(_TP, group_m=32), replace(_TP, group_m=4), replace(_TP, num_stages=4, group_m=16))]
# GROUP_M 16 on the other 8192^3 products' rule tiles
_TMA = T("tma", 128, 256, 64, 8, 8, 3)
CASES["group16"] = [(dt, 8192, 8192, 8192, lay, c, replace(c, group_m=16))
                    for dt, lay, c in (("bf16", "NN", G256), ("bf16", "TT", G256), ("fp16", "NN", _TMA),
                                       ("tf32", "NT", replace(_TMA, block_k=32)), ("tf32", "TT", replace(_TP, group_m=8)))]
# tf32 8192^3 by layout with the rules' tiles (NN / TT: the pair tile grouped by 16; NT: the TMA kernel)
CASES["tf32rule"] = [("tf32", 8192, 8192, 8192, lay, c) for lay, c in
                     (("NN", replace(_TP, group_m=16)), ("TT", replace(_TP, group_m=16)), ("NT", replace(_TMA, block_k=32)))]
# 8192^3 on 128x256 tiles is 2048 tiles: 15.5 rounds of 132 programs, the last half empty; 128 programs take 16 each
CASES["programs"] = [(dt, 8192, 8192, 8192, lay, c, replace(c, programs=128)) for dt, lay, c in
                     (("tf32", "NN", replace(_TP, group_m=16)), ("tf32", "TT", replace(_TP, group_m=16)),
                      ("tf32", "NT", replace(_TMA, block_k=32)), ("bf16", "NN", G256), ("fp16", "NN", _TMA))]
# the launcher's even rounds (ops.persistent_programs, programs 0) against one program per SM (programs 132)
_EVEN = [("bf16", 4096, 4096, 4096, "NN", G256), ("bf16", 4096, 11008, 4096, "NN", T("tma", 256, 128, 64, 8, 8, 4)),
         ("bf16", 4096, 14336, 4096, "NT", G256), ("tf32", 4096, 4096, 4096, "NN", replace(_TP, group_m=16)),
         ("int8", 8192, 8192, 8192, "NT", T("gluon", 128, 256, 128, 8, 8, 4))]
CASES["even"] = [(dt, m, n, k, lay, c, replace(c, programs=132)) for dt, m, n, k, lay, c in _EVEN]
# tf32 on 64-deep K steps with two stages (half the barrier waits a MAC; 229.5 KB of shared memory, no spills)
CASES["tf32bk64"] = [("tf32", 8192, 8192, 8192, lay, replace(_TP, group_m=16), replace(_TP, group_m=16, block_k=64,
                                                                                    num_stages=2))
                     for lay in ("NN", "TT")]
# tf32 NT (both operands K-major: no register operand) on the Gluon kernel, GROUP_M 16, against the TMA kernel's rule
_GT = T("gluon", 128, 256, 32, 16, 8, 3)
CASES["tf32nt"] = [("tf32", s, s, s, "NT", replace(_TMA, block_k=32), _GT, replace(_GT, num_stages=4),
                    replace(_GT, group_m=8)) for s in (8192, 4096)]
# small M, NT (B's rows contiguous along K): the pointer kernel reads NT 8-12 points of copy below NN at the same tile.
# Longer contiguous runs of each row a K step (512-deep steps) and narrower column tiles, against the rule
def _pt(bm, bn, bk, st, split=1):
    return T("pointer", bm, bn, bk, 1, 4, st, split_k=split)


CASES["smallnt"] = (
    [("bf16", m, 4096, 4096, "NT", _pt(16, 32, 128, 6), _pt(16, 16, 256, 4), _pt(16, 16, 512, 4), _pt(16, 32, 512, 3),
      _pt(16, 64, 512, 2), _pt(16, 128, 128, 4, 4)) for m in (1, 16)]
    + [("bf16", 32, 8192, 8192, "NT", _pt(32, 64, 256, 4), _pt(32, 32, 512, 3), _pt(32, 64, 512, 2), _pt(32, 16, 512, 4),
        _pt(32, 32, 256, 6))]
    + [("bf16", 64, 8192, 8192, "NT", _pt(64, 64, 128, 4), _pt(64, 64, 256, 3), _pt(64, 32, 256, 4), _pt(64, 32, 512, 2),
        _pt(64, 16, 512, 2))]
    + [("bf16", 32, 8192, 8192, "NN", _pt(32, 64, 256, 4))])
# M = 32 NT (0.92x torch at 8192): the shallower, deeper rings M = 64 and M <= 16 take, against the rule
CASES["smallnt32"] = (
    [("bf16", 32, 8192, 8192, lay, _pt(32, 64, 256, 4), _pt(32, 64, 128, 4), _pt(32, 64, 128, 6), _pt(32, 64, 128, 8))
     for lay in ("NT", "NN")]
    + [("bf16", 32, 4096, 4096, "NT", _pt(32, 32, 256, 4), _pt(32, 32, 128, 6), _pt(32, 64, 128, 6), _pt(32, 32, 128, 8))])
# N = K = 4096: an 8-deep ring of 128-deep steps (M = 32 NT: 1.227x torch against 1.155x for the rule's 256-deep s4)
CASES["smalls8"] = (
    [("bf16", 32, 4096, 4096, lay, _pt(32, 32, 256, 4), _pt(32, 32, 128, 8), _pt(32, 32, 128, 7)) for lay in ("NT", "NN", "TT")]
    + [("bf16", m, 4096, 4096, lay, _pt(16, 32, 128, 6), _pt(16, 32, 128, 8)) for m in (1, 16) for lay in ("NT", "NN")])
# Small M with 8 warps: at 4 warps an SM holds one program (1 warp a scheduler), and NT M = 32 stalls on shared-memory
# results (ncu 2026-11-30: short scoreboard 2.7 cycles an issue against TT's 1.3, 52 against 41 us)
def _pw(bm, bn, bk, st, w=8):
    return T("pointer", bm, bn, bk, 1, w, st)


CASES["smallw8"] = (
    [("bf16", 32, 8192, 8192, lay, _pt(32, 64, 256, 4), _pw(32, 64, 256, 4), _pw(32, 64, 128, 8), _pw(32, 128, 128, 4),
      _pw(32, 64, 256, 3)) for lay in ("NT", "TT")]
    + [("bf16", 64, 8192, 8192, "NT", _pt(64, 64, 128, 4), _pw(64, 64, 128, 4), _pw(64, 64, 256, 3), _pw(64, 64, 128, 6))]
    + [("bf16", m, 8192, 8192, "NT", _pt(16, 64, 256, 4), _pw(16, 64, 256, 4)) for m in (1, 16)]
    + [("bf16", 32, 4096, 4096, "NT", _pt(32, 32, 128, 8), _pw(32, 32, 128, 8), _pw(32, 32, 256, 4))]
    + [("bf16", 64, 4096, 4096, "NT", _pt(64, 64, 128, 6), _pw(64, 64, 128, 6), _pw(64, 32, 128, 8))]
    + [("bf16", 16, 4096, 4096, "NT", _pt(16, 32, 128, 6), _pw(16, 32, 128, 6))])
# Small N run transposed (GemmConfig.transposed): NN (C^T on TT's layout) read 82.8% of copy at 8192 x 32 against
# TN / TT's 95% with the same tile (gemm bench, 2026-11-30); 8 warps, and TT M = 32 (the same kernel) beside it
CASES["smalln"] = (
    [("bf16", 8192, 32, 8192, lay, replace(_pt(32, 64, 256, 4), transposed=True),
      replace(_pw(32, 64, 256, 4), transposed=True)) for lay in ("NN", "TN")]
    + [("bf16", 32, 8192, 8192, "TT", _pt(32, 64, 256, 4))]
    + [("bf16", 4096, 64, 4096, "NT", replace(_pt(64, 64, 128, 6), transposed=True), T("pointer", 64, 64, 64, 8, 4, 4,
                                                                                          split_k=2))])
# fp16 NN at 8192^3: the TMA kernel (matmul's choice since 2026-11-25) against the Gluon tile the other layouts take
CASES["fp16nn"] = [("fp16", 8192, 8192, 8192, "NN", T("tma", 128, 256, 64, 8, 8, 3), G256)]
#: with ``--cases odd`` also the configuration ``matmul`` chooses (its heuristic), once per round
HEURISTIC_TOO = {"odd"}


def host_us(case: bench.Case, cfg: T | None, calls: int = 300) -> float:
    """Wall time per eager call (host-bound at 1000^3): ``cfg`` pinned (planned every call), or None
    (``matmul``'s choice, whose calls replay the first call's launches)."""
    dev = torch.device("cuda")
    a, b = bench.make_operands(case.m, case.n, case.k, case.dtype, case.layout, dev, torch.Generator(dev).manual_seed(1))
    spec = ops.validate(a, b)
    for _ in range(10):
        ops.compute(a, b, spec, cfg=cfg)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        ops.compute(a, b, spec, cfg=cfg)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/gemm-cluster")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default="short,big")
    ap.add_argument("--no-host", action="store_true", help="skip the eager host-time and replay checks")
    ap.add_argument("--budget", type=float, default=0.2)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = detect()
    records = []
    for group in args.cases.split(","):
        for dt, m, n, k, lay, cfg, *alt in CASES[group]:
            case = bench.Case(dt, m, n, k, lay)
            peer_ms = None
            trio = (*alt, cfg) if alt else (replace(cfg, cluster_m=2), cfg)  # explicit other configs, or the cluster
            if group in HEURISTIC_TOO:
                trio += (None,)
            for rnd in range(args.rounds):
                for c in (trio if rnd % 2 == 0 else trio[::-1]):
                    r = bench.run_case(case, info, cfg=c, budget_s=args.budget, peer_ms=peer_ms if rnd else None)
                    peer_ms = r.extra["peer_time_ms"]
                    r.extra["round"] = rnd
                    records.append(r)
                    name = c.short() if c else "matmul: " + T.from_dict(r.extra["config"]).short()
                    print(f"{case.name:26s} {name:34s} round {rnd} ours {r.ours:7.1f} peer {r.peer_value:7.1f} "
                          f"x{r.ratio:.3f} {r.extra['time_ms'] * 1e3:.2f} us", flush=True)
    host = {}
    for c in () if args.no_host else (replace(G64, cluster_m=2), G64, None):
        name = c.short() if c else "matmul's choice (replayed launches)"
        host[name] = host_us(bench.Case("bf16", 1000, 1000, 1000, "NN"), c)
        print(f"eager host time per call, bf16 1000^3 NN, {name}: {host[name]:.1f} us", flush=True)
    # the public path's replayed launches give the float64 answer call after call
    dev = torch.device("cuda")
    if args.no_host:
        stamp(records, info)
        print(f"wrote {write_results(records, 'gemm-cluster', out / 'gemm-cluster-probe.json', info)}")
        return
    a, b = bench.make_operands(1000, 1000, 1000, "bf16", "TT", dev, torch.Generator(dev).manual_seed(2))
    ref = a.double() @ b.double()
    errs = [float((ops.matmul(a, b).double() - ref).norm() / ref.norm()) for _ in range(5)]
    print(f"tilecraft.matmul bf16 1000^3 TT, five eager calls: relative errors {errs}", flush=True)
    host["replay_rel_errors"] = errs
    stamp(records, info)
    path = write_results(records, "gemm-cluster", out / "gemm-cluster-probe.json", info, meta={"host_us": host})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
