"""What bounds small-M GEMM at N = K = 4096 (issue 3: bf16, M <= 64, >= 85% of copy bandwidth).

Follow-up 4 compared our M = 1 product with a device-to-device copy of the same byte count (16 MiB
read + 16 MiB written: 79.5% of the large copy) and called that the ceiling. But the product only
*reads* its 32 MiB (B; A and the output are tiny), and a read-only stream is not a copy. This script
measures, in one process, timed the same way (CUDA graphs of calls cycling through rotated input sets
larger than twice the L2, median per call):

* the large copy (``measure_copy_bandwidth``, the issue's ceiling);
* a read-only stream of one 32 MiB bf16 buffer (``_read_kernel``: every program sums a contiguous
  chunk with 16-byte loads and writes one float), at several program counts and chunk sizes;
* a copy of the same 32 MiB (torch ``copy_``: 32 MiB read + 32 MiB written) and of 16 + 16 MiB;
* ``tilecraft.matmul`` at M = 1, 16, 64 with N = K = 4096 (NN, the heuristic) and torch.matmul, with
  explicit small-M configurations around the heuristic (checked against float64 first).

    PYTHONPATH=src python benchmarks/gemm_smallm_ceiling.py OUT_DIR [--reads-only]

The read stream is timed with and without programmatic dependent launch ("early", as the small-M
products launch; 2026-11-28), from 512 programs up.

If the read-only stream of B's bytes reaches 85% of the large copy, the target is a kernel problem;
if it does not, the target is above what the memory system gives this transfer size.
"""
from __future__ import annotations

import itertools
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import triton
import triton.language as tl

from tilecraft.bench import gemm as bg
from tilecraft.bench.harness import git_commit, rotation_sets
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.kernels.pdl import pdl_start
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig


@triton.jit
def _read_kernel(X, OUT, n_per_prog, BLOCK: tl.constexpr, PDL: tl.constexpr = 0):
    """Sum of X[pid * n_per_prog : (pid + 1) * n_per_prog] (bf16, a multiple of BLOCK) into OUT[pid].
    ``PDL`` 1: launched with programmatic dependent launch, "early" (``kernels.pdl``), as the small-M
    products are."""
    pdl_start(PDL)
    pid = tl.program_id(0)
    base = X + pid.to(tl.int64) * n_per_prog
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n_per_prog, BLOCK):
        acc += tl.load(base + i + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(OUT + pid, tl.sum(acc, 0))


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out_dir = Path(args[0] if args else "benchmarks/results")
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"{info.name}: copy {copy:.3f} TB/s", flush=True)
    rows: list[dict] = []

    def note(kind: str, label: str, ms: float, nbytes: int, **extra) -> None:
        tbps = nbytes / (ms * 1e-3) / 1e12
        rows.append({"kind": kind, "label": label, "time_us": ms * 1e3, "bytes": nbytes, "TBps": tbps,
                     "fraction_of_copy": tbps / copy, **extra})
        print(f"{kind:10s} {label:44s} {ms * 1e3:8.2f} us  {tbps:6.3f} TB/s  {100 * tbps / copy:5.1f}% of copy",
              flush=True)

    n = 4096 * 4096  # B's elements at N = K = 4096
    nbytes = 2 * n
    n_sets = rotation_sets(nbytes, info.l2_bytes, maximum=8)
    gen = torch.Generator(device=dev).manual_seed(5)
    bufs = [torch.rand(n, device=dev, generator=gen).to(torch.bfloat16) for _ in range(n_sets)]
    ref = [b.double().sum().item() for b in bufs]
    for progs in (128, 256, 512, 1024, 2048, 4096):
        for (block, warps), pdl in itertools.product(((2048, 4), (4096, 8)), (0, 1)):
            per = n // progs
            if per % block or (pdl and progs < 512):
                continue
            opts = {"launch_pdl": True, "PDL": 1} if pdl else {}
            sums = torch.empty(progs, device=dev, dtype=torch.float32)
            _read_kernel[(progs,)](bufs[0], sums, per, BLOCK=block, num_warps=warps, **opts)
            err = abs(sums.double().sum().item() - ref[0]) / abs(ref[0])
            assert err < 1e-4, f"read kernel wrong: {err}"
            calls = [(lambda b=b, s=sums, p=progs, pp=per, o=opts: _read_kernel[(p,)](b, s, pp, BLOCK=block,
                                                                                     num_warps=warps, **o))
                     for b in bufs]
            t = bg.time_graph(calls, dev, budget_s=0.3, est_ms=0.012)
            note("read", f"{progs} programs x {per * 2 // 1024} KiB, {block}/{warps}w{' PDL' if pdl else ''}",
                 t.median_ms, nbytes, spread=t.spread, pdl=pdl)
    if "--reads-only" in sys.argv:
        path = out_dir / f"gemm-smallm-reads-{git_commit()}.json"
        path.write_text(json.dumps({"device": info.name, "copy_tbps": copy, "commit": git_commit(), "rows": rows},
                                   indent=1))
        print(f"wrote {path}", flush=True)
        return 0
    for half in (False, True):
        m = n // 2 if half else n
        src = [b[:m] for b in bufs]
        dst = [torch.empty_like(s) for s in src]
        calls = [(lambda d=d, s=s: d.copy_(s)) for d, s in zip(dst, src)]
        t = bg.time_graph(calls, dev, budget_s=0.3, est_ms=0.012)
        note("copy", f"copy_ {m * 2 // 2**20} MiB (read + write)", t.median_ms, 2 * 2 * m, spread=t.spread)

    def P(bm, bn, bk, stages, split=1, warps=4):
        return GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=warps, num_stages=stages, split_k=split)
    # None: what matmul picks (tuned on first use: since TUNER_VERSION 2 with operands rotated through the
    # L2); then unsplit configs and split-K with its reduce launch. (At c27ca68 this list also had split-K
    # joined inside the pointer kernel, 512-4096 programs: 41-63% of copy, every one slower; removed.)
    configs = {1: [None, P(16, 32, 256, 4), P(16, 32, 128, 8), P(16, 32, 128, 4, 4)],
               16: [None, P(16, 32, 128, 8)],
               64: [None, P(64, 64, 128, 6)]}
    for m, cfgs in configs.items():
        case = bg.Case("bf16", m, 4096, 4096)
        peer_ms = None
        for cfg in cfgs:
            try:
                rec = bg.run_case(case, info, copy_TBps=copy, cfg=cfg, budget_s=0.3, peer_ms=peer_ms,
                                  say=lambda s: print("  " + s, flush=True))
            except Exception as exc:  # noqa: BLE001 - a config the kernel refuses: reported, next
                print(f"  M={m} {cfg}: {type(exc).__name__}: {exc}"[:300], flush=True)
                continue
            if rec.extra.get("failed"):
                continue
            peer_ms = rec.extra["peer_time_ms"]
            cd = rec.extra["config"]
            note("gemm", f"M={m} {'matmul: ' if cfg is None else ''}{cd['kernel']} {cd['block_m']}x{cd['block_n']}"
                 f"x{cd['block_k']} s{cd['num_stages']} w{cd['num_warps']} split{cd.get('split_k', 1)}",
                 rec.extra["time_ms"], rec.extra["bytes"], ratio_to_torch=rec.ratio, config=rec.extra["config"],
                 rel_err=rec.extra["rel_err"])
            if cfg is None:
                note("torch", f"M={m} torch.matmul", peer_ms, rec.extra["bytes"])
    doc = {"suite": "gemm.smallm-ceiling", "device": info.as_dict(), "torch": torch.__version__,
           "triton": triton.__version__, "commit": git_commit(), "date": time.strftime("%Y-%m-%d"),
           "copy_TBps": copy, "rows": rows}
    tag = "".join(ch if ch.isalnum() else "-" for ch in git_commit())
    path = out_dir / f"gemm-smallm-ceiling-{tag}.json"
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
