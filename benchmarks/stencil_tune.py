"""Stencil configuration sweep, ladder and cliff sweep on a GPU, in one run.

    PYTHONPATH=src python benchmarks/stencil_tune.py --sections tune,ladder,sweep --out DIR

Every configuration is checked against the float64 reference before it is timed; the copy
bandwidth ceiling is measured in the same run. Prints a table per section and writes JSON.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from tilecraft.bench import stencil as sb
from tilecraft.bench.harness import Record, write_results
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect
from tilecraft.ops.stencil import StencilConfig

CASES = {  # (dtype, order, shape): the three targets
    "fp64-o2": ("fp64", 2, (512, 512, 512)),
    "fp32-o2": ("fp32", 2, (512, 512, 512)),
    "fp32-o8": ("fp32", 8, (520, 520, 520)),
}


def zmarch_space(dtype: str, order: int):
    itemsize = 8 if dtype == "fp64" else 4
    vec = 16 // itemsize
    r = order // 2
    # z terms through L1: tall tiles (few halo rows per row), registers stay low
    for by, bx, nw, bz, pf in itertools.product((8, 16, 32), (128, 256), (4, 8, 16), (64, 256), (1, 2)):
        per_thread = by * bx / (32 * nw)
        if not vec <= per_thread <= 2 * vec or bx * itemsize < 512:
            continue
        yield StencilConfig("zmarch", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True,
                            zorder=2, prefetch=pf, z_in_regs=False)
    # z terms in a register window
    for by, bx, nw, bz, pf in itertools.product((2, 4, 8, 16), (128, 256), (2, 4, 8, 16), (32, 128), (1, 2)):
        per_thread = by * bx / (32 * nw)
        if not vec <= per_thread <= (vec if r >= 3 else 2 * vec) or bx * itemsize < 512:
            continue
        yield StencilConfig("zmarch", block_y=by, block_x=bx, num_warps=nw, block_z=bz, nontemporal=True,
                            zorder=2, prefetch=pf, z_in_regs=True)


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n, cache_modifier=".cs")


def triton_copy_TBps(block: int, nw: int, nbytes: int = 2 * 2**30) -> float:
    from tilecraft.bench.harness import time_rotating
    n = nbytes // 4
    srcs = [torch.rand(n, device="cuda") for _ in range(2)]
    dst = torch.empty(n, device="cuda")
    t = time_rotating(lambda i: _copy_kernel[(triton.cdiv(n, block),)](srcs[i], dst, n, BLOCK=block, num_warps=nw),
                      2, budget_s=0.5)
    return 2 * n * 4 / (t.median_ms * 1e-3) / 1e12


def extra_space(dtype: str, order: int):
    """The long z-march handed to Triton's software pipeliner (cp.async into shared memory: loads
    in flight without holding registers; Nsight Compute says the kernels wait on loads)."""
    from dataclasses import replace

    itemsize = 8 if dtype == "fp64" else 4
    base = StencilConfig("zmarch", block_y=4, block_x=128, num_warps=8 if itemsize == 8 else 4, block_z=32,
                         nontemporal=True, zorder=2)
    yield base
    for stages, by, nw in itertools.product((2, 3, 4), (2, 4, 8), (4, 8)):
        if by * 128 / (32 * nw) < 16 // itemsize:
            continue
        yield replace(base, num_stages=stages, block_y=by, num_warps=nw)


def plane_space(dtype: str, order: int):
    for by, bx, nw, mr in itertools.product((1, 4, 8), (128, 256, 512), (4, 8), (None, 64)):
        per_thread = by * bx / (32 * nw)
        if per_thread < 2 or per_thread > 8:
            continue
        yield StencilConfig("plane", block_y=by, block_x=bx, num_warps=nw, maxnreg=mr, ascending=True,
                            nontemporal=True)


def log(msg: str) -> None:
    print(msg, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="tune,ladder,sweep")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget", type=float, default=0.4)
    ap.add_argument("--max-configs", type=int, default=80)
    ap.add_argument("--spaces", default="zmarch,plane")
    ap.add_argument("--sizes", default="256,512,768,1024,1536,2048,3072,4096")
    ap.add_argument("--sweep-variants", default="baseline,tiling,nontemporal,grid_order,subdomains,auto")
    args = ap.parse_args()
    info = detect()
    log(f"device {info.name} sms={info.multiprocessors} l2={info.l2_bytes} {info.versions}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    copy = measure_copy_bandwidth()
    log(f"copy {copy:.3f} TB/s")
    for block, nw in ((1024, 4), (2048, 4), (4096, 8), (8192, 8)):
        log(f"triton copy block={block} w={nw}: {triton_copy_TBps(block, nw) / copy:6.1%} of torch copy")
    sections = args.sections.split(",")
    summary = {"copy_TBps": copy, "tune": {}, "ladder": {}, "sweep": []}
    for name in args.cases.split(","):
        dtype, order, shape = CASES[name]
        if "tune" in sections:
            records = []
            spaces = {"zmarch": zmarch_space, "plane": plane_space, "extra": extra_space}
            for space_name in args.spaces.split(","):
                space = spaces[space_name]
                cfgs = list(space(dtype, order))[: args.max_configs]
                log(f"== tune {name} {space_name}: {len(cfgs)} configs ({time.time() - t0:.0f}s)")
                rows = []
                for cfg in cfgs:
                    res = sb.measure_config(shape, sb.DTYPES[dtype], order, "auto", cfg, l2_bytes=info.l2_bytes,
                                            budget_s=args.budget, check="small")
                    frac = res.fom_TBps / copy if res.ok else float("nan")
                    regs = res.resources[0]["registers"] if res.resources else None
                    spills = res.resources[0]["spills"] if res.resources else None
                    rows.append((frac, cfg, res))
                    records.append(Record("stencil.tune", {"case": name, "config": cfg.as_dict()}, "fom", "TB/s",
                                          res.fom_TBps if res.ok else float("nan"), ceiling="copy",
                                          ceiling_value=copy,
                                          extra={"ok": res.ok, "msg": res.message, "regs": regs, "spills": spills,
                                                 "err": res.error}))
                    if not res.ok:
                        log(f"   FAIL {cfg.as_dict()} {res.message}")
                rows.sort(key=lambda t: -(t[0] if t[0] == t[0] else -1))
                for frac, cfg, res in rows[:10]:
                    r0 = res.resources[0] if res.resources else {}
                    log(f"   {frac:6.1%} by={cfg.block_y} bx={cfg.block_x} bz={cfg.block_z} w={cfg.num_warps} "
                        f"zo={cfg.zorder} ns={cfg.num_stages} zr={int(cfg.z_in_regs)} u={int(cfg.unroll_z)} mr={cfg.maxnreg} regs={r0.get('registers')} spills={r0.get('spills')} "
                        f"spread={res.timing.spread:.3f}")
                summary["tune"][f"{name}-{space_name}"] = [(f, c.as_dict()) for f, c, _ in rows[:10]]
            write_results(records, f"stencil-tune-{name}", out / f"tune-{name}.json", info)
        if "ladder" in sections:
            log(f"== ladder {name} ({time.time() - t0:.0f}s)")
            recs = sb.ladder(shape, dtype, order, copy_TBps=copy, info=info, budget_s=args.budget * 2)
            write_results(recs, "stencil.ladder", out / f"ladder-{name}.json", info)
            for r in recs:
                ex = r.extra
                res = ex.get("resources") or [{}]
                log(f"   {r.case['variant']:14s} {r.ours:6.3f} TB/s {r.ratio:6.1%} of copy "
                    f"x{ex.get('speedup_vs_baseline', float('nan')):.2f} regs={res[0].get('registers')} "
                    f"spills={res[0].get('spills')} err={ex.get('rel_error')} {ex.get('message')}")
                summary["ladder"][f"{name}-{r.case['variant']}"] = r.ratio
    if "orders" in sections:
        # auto against baseline and torch at other orders and dtypes, 512^3 interior; one JSON
        records = []
        for dtype, order, n in (("fp64", 4, 516), ("fp32", 4, 516), ("fp32", 6, 518), ("fp32", 6, 528),
                                ("fp64", 8, 520), ("fp32", 16, 528), ("fp64", 16, 528)):
            shape = (n, n, n)
            log(f"== orders {dtype} o{order} {shape}")
            recs = sb.ladder(shape, dtype, order, variants=("baseline", "auto", "reference"), copy_TBps=copy,
                             info=info, budget_s=args.budget)
            records += recs
            for r in recs:
                log(f"   {r.case['variant']:10s} {r.ours:6.3f} TB/s {r.ratio:6.1%} of copy "
                    f"x{r.extra.get('speedup_vs_baseline', float('nan')):.2f} {r.extra.get('message')}")
        write_results(records, "stencil.orders", out / "orders.json", info)
    if "unaligned" in sections:
        # grids whose rows are not 16-byte aligned (nx not a multiple of 16 bytes): scalar loads
        records = []
        for dtype, order, n in (("fp64", 2, 515), ("fp32", 2, 514), ("fp32", 4, 518), ("fp32", 8, 522)):
            itemsize = 8 if dtype == "fp64" else 4
            shape = (n, n, n)
            cands = {
                "unrolled": StencilConfig("zmarch", block_y=4, block_x=128, num_warps=4 if itemsize == 8 else 2,
                                          block_z=8 if order == 4 else (4 if itemsize == 8 else 2), nontemporal=True,
                                          zorder=2, unroll_z=True),
                "long-pipe": StencilConfig("zmarch", block_y=4, block_x=128, num_warps=8 if itemsize == 8 else 4,
                                           block_z=32, nontemporal=True, zorder=2, prefetch=2, pipeline_xy=True),
                "long": StencilConfig("zmarch", block_y=4, block_x=128, num_warps=4, block_z=32, nontemporal=True,
                                      zorder=2),
            }
            log(f"== unaligned {dtype} o{order} {shape}")
            for name in ("baseline", "tiling", "auto", *cands):
                cfg = cands.get(name)
                res = sb.measure_config(shape, sb.DTYPES[dtype], order, name if cfg is None else "auto", cfg,
                                        l2_bytes=info.l2_bytes, budget_s=args.budget, check="small")
                frac = res.fom_TBps / copy if res.ok else float("nan")
                r0 = res.resources[0] if res.resources else {}
                log(f"   {name:10s} {frac:6.1%} regs={r0.get('registers')} spills={r0.get('spills')} {res.message}")
                records.append(Record("stencil.unaligned", {"shape": list(shape), "dtype": dtype, "order": order,
                                                            "variant": name, "config": res.config}, "fom", "TB/s",
                                      res.fom_TBps if res.ok else float("nan"), ceiling="copy", ceiling_value=copy,
                                      extra={"ok": res.ok, "message": res.message, "resources": res.resources}))
        write_results(records, "stencil.unaligned", out / "unaligned.json", info)
    if "bigcheck" in sections:
        # A grid of more than 2**31 points: 64-bit offsets must hold. Checked on planes at the far end.
        from tilecraft import laplacian
        from tilecraft.reference.stencil import laplacian_reference
        for order in (2, 8):
            n = 1300
            r = order // 2
            u = torch.rand((n, n, n), dtype=torch.float32, device="cuda")
            lap = torch.full_like(u, float("nan"))
            laplacian(u, order=order, out=lap)
            torch.cuda.synchronize()
            zs = slice(n - 1 - r - 3, n - 1 - r + 1)  # the last 4 interior planes
            ref = laplacian_reference(u[n - 1 - 2 * r - 3: n, :, :], order)[:, :, :]
            got = lap[zs, r:-r, r:-r].double()
            err = ((got - ref).norm() / ref.norm()).item()
            nan_inside = bool(torch.isnan(lap[r:-r, r:-r, r:-r]).any())
            log(f"== bigcheck {n}^3 fp32 order {order} ({u.numel():,} points > 2**31): rel err {err:.2e}, "
                f"unwritten interior points: {nan_inside}")
            summary[f"bigcheck-o{order}"] = {"points": u.numel(), "rel_error": err, "unwritten": nan_inside}
            del u, lap
            torch.cuda.empty_cache()
    if "sweep" in sections:
        sizes = [int(s) for s in args.sizes.split(",")]
        log(f"== sweep fp64 o2 ({time.time() - t0:.0f}s)")
        recs = sb.sweep(sizes, "fp64", 2, variants=args.sweep_variants.split(","), copy_TBps=copy, info=info,
                        budget_s=args.budget)
        write_results(recs, "stencil.sweep", out / "sweep-fp64-o2.json", info)
        for r in recs:
            log(f"   {r.case['variant']:12s} {r.case['shape']} {r.ours:6.3f} TB/s {r.ratio:6.1%} "
                f"{r.extra.get('message', '')}")
            summary["sweep"].append((r.case["variant"], r.case["shape"], r.ratio))
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    log(f"done in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
