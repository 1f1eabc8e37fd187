"""Small M's ceiling on the H200, by TMA: can bulk tensor copies read B's 32 MiB faster than 16-byte loads?

Follow-ups 8 and 22 (docs/gemm.md) bounded small-M products at N = K = 4096 by the best read-only stream of B's
32 MiB. That stream used 16-byte loads (``gemm_smallm_ceiling._read_kernel``) and reached 84.3% of copy on the H200,
under the issue's 85% (87.5% on the H100). The small-M products read through cp.async and reach 94-96% of it. TMA
was never measured as the read engine. Here every program walks its contiguous band of B, viewed as 128-byte
rows, in boxes of ROWS rows (ROWS x 128 bytes) through a ring of STAGES shared-memory slots, one mbarrier each. It
sums the box from shared memory (as a GEMM's wgmma reads B there), so the data is used and checked. Timed as the other script times, in the same
process: CUDA graphs of calls cycling through buffers larger than twice the L2, median per call, against the large
copy (``measure_copy_bandwidth``) and the 16-byte-load stream at its best shape (4096 programs x 8 KiB, PDL early).

    PYTHONPATH=src python benchmarks/gemm_smallm_tma_reads.py OUT_DIR

If a TMA stream of these bytes passes 85% of copy, a small-M product reading B by TMA can meet the target on the
H200; if not, the target is above what this GPU gives a 32 MiB read. The same run times the small-M products
(M = 1, 16, 64; N = K = 4096; NT and NN) on the TMA kernel's 64-row tiles against the rule (the pointer kernel).
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tilecraft.bench import gemm as bg  # noqa: E402
from tilecraft.bench.harness import git_commit, rotation_sets  # noqa: E402
from tilecraft.hardware.ceilings import measure_copy_bandwidth  # noqa: E402
from tilecraft.hardware.device import detect  # noqa: E402
from tilecraft.kernels.pdl import pdl_start_gluon  # noqa: E402
from tilecraft.ops.launch import gluon_descriptor  # noqa: E402

COLS = 64  # bf16 elements in a 128-byte row


@gluon.jit
def tma_read_kernel(desc, OUT, rows_per_prog, ROWS: gl.constexpr, STAGES: gl.constexpr, PDL: gl.constexpr):
    """OUT[pid] = the sum of rows [pid * rows_per_prog, (pid + 1) * rows_per_prog) (a multiple of ROWS) of
    ``desc``'s (rows, 64) bf16 view, brought into shared memory by TMA in ROWS-row boxes and read from there."""
    BCOLS: gl.constexpr = desc.block_type.shape[1]
    pid = gl.program_id(0)
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES, ROWS, BCOLS], desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(bars.index(j), count=1)
    pdl_start_gluon(PDL)  # after the shared-memory set-up, before any global access
    n = rows_per_prog // ROWS
    row0 = pid * rows_per_prog
    for j in gl.static_range(STAGES):
        mbarrier.expect(bars.index(j), desc.block_type.nbytes, pred=j < n)
        tma.async_copy_global_to_shared(desc, [row0 + j * ROWS, 0], bars.index(j), bufs.index(j), pred=j < n)
    tile_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    acc = gl.zeros([ROWS, BCOLS], gl.float32, tile_layout)  # summed across threads once, at the end
    for i in range(n):
        s = i % STAGES
        mbarrier.wait(bars.index(s), (i // STAGES) & 1)
        acc += bufs.index(s).load(tile_layout).to(gl.float32)  # the whole box, as a GEMM reads B
        gl.thread_barrier()  # every warp's read of slot s done before the next copy overwrites it
        fence_async_shared()
        nxt = i + STAGES
        mbarrier.expect(bars.index(s), desc.block_type.nbytes, pred=nxt < n)
        tma.async_copy_global_to_shared(desc, [row0 + nxt * ROWS, 0], bars.index(s), bufs.index(s), pred=nxt < n)
    total = gl.sum(gl.sum(acc, 1), 0)
    gl.store(OUT + pid, total)


def band_sums(buf: torch.Tensor, progs: int) -> torch.Tensor:
    """What :func:`tma_read_kernel` computes, by torch: per program the float64 sum of its band."""
    return buf.view(progs, -1).double().sum(dim=1)


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    info = detect()
    copy = measure_copy_bandwidth()
    print(f"{info.name}: copy {copy:.3f} TB/s", flush=True)
    n = 4096 * 4096  # B's elements at N = K = 4096, bf16
    nbytes = 2 * n
    n_sets = rotation_sets(nbytes, info.l2_bytes, maximum=8)
    gen = torch.Generator(device=dev).manual_seed(5)
    bufs = [torch.rand(n, device=dev, generator=gen).to(torch.bfloat16) for _ in range(n_sets)]
    total_rows = n // COLS
    rows_out: list[dict] = []

    def note(label: str, ms: float, **extra) -> None:
        tbps = nbytes / (ms * 1e-3) / 1e12
        rows_out.append({"label": label, "time_us": ms * 1e3, "TBps": tbps, "fraction_of_copy": tbps / copy, **extra})
        print(f"{label:52s} {ms * 1e3:8.2f} us  {tbps:6.3f} TB/s  {100 * tbps / copy:5.1f}% of copy", flush=True)

    # the 16-byte-load stream at its best shape on the H200 (follow-up 22), for the same-run comparison
    from gemm_smallm_ceiling import _read_kernel
    sums = torch.empty(4096, device=dev, dtype=torch.float32)
    per = n // 4096
    calls = [(lambda b=b: _read_kernel[(4096,)](b, sums, per, BLOCK=2048, num_warps=4, launch_pdl=True, PDL=1))
             for b in bufs]
    t = bg.time_graph(calls, dev, budget_s=0.3, est_ms=0.012)
    note("16-byte loads, 4096 x 8 KiB, PDL early", t.median_ms, spread=t.spread)
    for progs, box_rows, stages, warps, pdl in itertools.product((128, 256, 512, 1024, 2048), (32, 64, 128, 256),
                                                                (2, 4, 8), (4, 8), (0, 1)):
        rows_per_prog = total_rows // progs
        if total_rows % progs or rows_per_prog % box_rows or rows_per_prog // box_rows < stages:
            continue
        if box_rows * 128 * stages > 200 * 1024:
            continue
        descs = [gluon_descriptor(b.view(-1, COLS), [total_rows, COLS], [COLS, 1], [box_rows, COLS]) for b in bufs]
        out = torch.full((progs,), float("nan"), device=dev, dtype=torch.float32)
        opts = {"launch_pdl": True} if pdl else {}
        tma_read_kernel[(progs,)](descs[0], out, rows_per_prog, ROWS=box_rows, STAGES=stages, PDL=pdl,
                                  num_warps=warps, **opts)
        want = band_sums(bufs[0], progs)
        err = float(((out.double() - want).abs() / want.abs().clamp_min(1.0)).max())
        if not err < 1e-3:
            raise SystemExit(f"TMA read kernel wrong at {progs} programs, {box_rows} rows, {stages} stages: {err}")
        calls = [(lambda d=d, o=out, p=progs, r=rows_per_prog, br=box_rows, st=stages, w=warps, pd=pdl, op=opts:
                  tma_read_kernel[(p,)](d, o, r, ROWS=br, STAGES=st, PDL=pd, num_warps=w, **op)) for d in descs]
        t = bg.time_graph(calls, dev, budget_s=0.2, est_ms=0.012)
        note(f"TMA {progs} x {rows_per_prog * 128 // 1024} KiB, box {box_rows} rows, s{stages} w{warps}"
             f"{' PDL' if pdl else ''}", t.median_ms, spread=t.spread, programs=progs, box_rows=box_rows,
             stages=stages, warps=warps, pdl=pdl)
    # small-M products on the TMA kernel (64-row tiles: TMA zero-fills A's rows past M, nothing read for them)
    # against the rule (the pointer kernel, cp.async), each checked against float64 first, % of copy by the
    # least bytes (A and B read once, C written once)
    from tilecraft.ops import gemm as ops
    from tilecraft.tuning.gemm import GemmConfig
    tma_cfgs = [GemmConfig("tma", 64, 32, 128, 1, 4, st) for st in (4, 6, 8)] + [GemmConfig("tma", 64, 64, 128, 1, 4, 6)]
    for m, lay in itertools.product((1, 16, 64), ("NT", "NN")):
        case = bg.Case("bf16", m, 4096, 4096, lay)
        pbytes = bg.gemm_bytes(m, 4096, 4096, 2, 2)
        sets = [bg.make_operands(m, 4096, 4096, "bf16", lay, dev, gen)
                for _ in range(rotation_sets(pbytes, info.l2_bytes, maximum=8))]
        spec = ops.validate(*sets[0])
        for cfg in (None, *tma_cfgs):
            ok, err, _ = bg.check(case, *sets[0], {}, cfg)
            chosen = cfg or ops.choose_config(*sets[0], spec)
            if not ok:
                raise SystemExit(f"{case.name} {chosen.short()}: relative error {err:.2e}")
            calls = [(lambda s=s_, c=chosen: ops.compute(s[0], s[1], spec, cfg=c)) for s_ in sets]
            t = bg.time_graph(calls, dev, budget_s=0.2, est_ms=0.012)
            tbps = pbytes / (t.median_ms * 1e-3) / 1e12
            label = f"{case.name} {'rule: ' if cfg is None else ''}{chosen.short()}"
            rows_out.append({"label": label, "time_us": t.median_ms * 1e3, "TBps": tbps, "fraction_of_copy": tbps / copy,
                             "product": True, "config": chosen.as_dict(), "rel_err": err, "spread": t.spread})
            print(f"{label:52s} {t.median_ms * 1e3:8.2f} us  {tbps:6.3f} TB/s  {100 * tbps / copy:5.1f}% of copy",
                  flush=True)
    best = max(r["fraction_of_copy"] for r in rows_out if r["label"].startswith("TMA"))
    print(f"best TMA stream: {100 * best:.1f}% of copy", flush=True)
    path = out_dir / f"gemm-smallm-tma-reads-{git_commit()}.json"
    path.write_text(json.dumps({"device": info.name, "copy_tbps": copy, "commit": git_commit(), "rows": rows_out},
                               indent=1))
    print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
