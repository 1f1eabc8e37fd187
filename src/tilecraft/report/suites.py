"""The report's suites. Each takes the run's :class:`Context` and returns a :class:`Section`; a suite
that raises becomes a failed section (the rest of the report still comes out). ``SUITES`` is the
order on the page; other modules add theirs with :func:`register`.

On a GPU the suites measure. On a CPU-only machine they run what can run there, each labelled: the
kernels in Triton's interpreter (correctness), the compiler's reports for GPUs that are not here,
and the roofline model of ``--target``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tilecraft.bench import DEFAULT_ROUNDS
from tilecraft.report.model import (
    Point,
    datasheet_roofline,
    measured_roofline,
    point_from_record,
)
from tilecraft.report.sections import Context, Figure, Section, Table, fmt


@dataclass(frozen=True)
class Suite:
    key: str
    title: str
    run: Callable[[Context], Section]
    full_only: bool = False  # runs with --full only


SUITES: list[Suite] = []


def register(suite: Suite, *, before: str | None = None) -> None:
    """Add a suite (replacing one of the same key), at the end or before the suite ``before``."""
    SUITES[:] = [s for s in SUITES if s.key != suite.key]
    keys = [s.key for s in SUITES]
    SUITES.insert(keys.index(before) if before in keys else len(SUITES), suite)


def suite(key: str, title: str, *, full_only: bool = False):
    def deco(fn: Callable[[Context], Section]) -> Callable[[Context], Section]:
        register(Suite(key, title, fn, full_only))
        return fn
    return deco


def _pct(x: float | None) -> str:
    return fmt(None if x is None else 100 * x, ".1f")


# ------------------------------------------------------------------------------------------------
# the machine
# ------------------------------------------------------------------------------------------------
@suite("device", "The machine")
def device_suite(ctx: Context) -> Section:
    info = ctx.info
    rows = [["device", info.name], ["backend", info.backend],
            ["SMs / CUs", fmt(info.multiprocessors)], ["L2", fmt(info.l2_bytes and f"{info.l2_bytes / 2**20:.0f} MiB")],
            ["memory", fmt(info.memory_bytes and f"{info.memory_bytes / 2**30:.0f} GiB")],
            ["capability", fmt(info.capability)], *[[k, v] for k, v in info.versions.items()]]
    sec = Section("device", "The machine", source="measured" if ctx.gpu else "none",
                  tables=[Table("Device and software", ["", ""], rows)])
    if not ctx.gpu:
        sec.notes.append(f"No GPU is visible to torch. Kernels run in Triton's interpreter (correctness only); "
                         f"speeds are the roofline model of a {ctx.target} (--target), from its datasheet.")
    return sec


@suite("ceilings", "Ceilings: copy bandwidth and matmul rates")
def ceilings_suite(ctx: Context) -> Section:
    from tilecraft.hardware.device import DATASHEET, datasheet_key

    key = datasheet_key(ctx.info.name)
    if not ctx.gpu:
        roof = ctx.roofline = datasheet_roofline(ctx.target)
        sheet = DATASHEET.get(ctx.target, {})
        rows = [[c.name, fmt(c.value, ".4g"), "TB/s", fmt(sheet.get("bandwidth_TBps")), c.formula] for c in roof.bandwidth]
        rows += [[c.name, fmt(c.value, ".4g"), "TOPS" if c.name == "int8" else "TFLOP/s", fmt(sheet.get(c.name)), c.formula]
                 for c in roof.compute]
        return Section("ceilings", f"Ceilings of the model's target, {ctx.target} (datasheet)", source="model",
                       status="skipped", message="no GPU here: the ceilings cannot be measured; the model uses the "
                       f"{ctx.target}'s paper peaks", tables=[Table(
                           f"{ctx.target} peaks (not measured)", ["ceiling", "value", "unit", "vendor datasheet", "made of"],
                           rows, "rate × units × clock from the instruction tables (tilecraft.hardware.peaks), "
                           "next to the vendor's figure")])
    from tilecraft.hardware.ceilings import measure_copy_bandwidth, measure_matmul

    dtypes = ("bf16", "fp32", "fp64") if ctx.quick else ("bf16", "fp16", "tf32", "fp32", "fp64")
    ctx.progress("copy bandwidth")
    result = {"copy_TBps": measure_copy_bandwidth(), "matmul_TFLOPs": {}}
    for dt in dtypes:
        ctx.progress(f"matmul {dt}")
        result["matmul_TFLOPs"][dt] = measure_matmul(dt)
    ctx.ceilings = result
    ctx.roofline = measured_roofline(ctx.info.name, result, key)
    sheet = DATASHEET.get(key or "", {})
    rows = [["copy (read + write)", fmt(result["copy_TBps"], ".3f"), "TB/s", fmt(sheet.get("bandwidth_TBps")),
             _pct(result["copy_TBps"] / sheet["bandwidth_TBps"] if sheet.get("bandwidth_TBps") else None)]]
    for dt, v in result["matmul_TFLOPs"].items():
        peak = sheet.get(dt)
        rows.append([f"torch.matmul {dt} 8192³", fmt(v, ".1f"), "TFLOP/s", fmt(peak), _pct(v / peak if peak else None)])
    return Section("ceilings", "Ceilings: copy bandwidth and matmul rates", source="measured", records=[result],
                   tables=[Table("Measured in this run, against the datasheet",
                                 ["ceiling", "measured", "unit", "datasheet", "% of datasheet"], rows,
                                 "copy: device-to-device torch copy of 2 GiB, bytes read + written / median time")])


# ------------------------------------------------------------------------------------------------
# stencils
# ------------------------------------------------------------------------------------------------
STENCIL_PEAK = {"fp64": "fp64_vector", "fp32": "fp32"}


def _ladder_cases(ctx: Context) -> list[tuple[str, int]]:
    return [("fp64", 2)] if ctx.quick else [("fp64", 2), ("fp32", 2), ("fp32", 8)]


def _gpu_shape(ctx: Context) -> tuple[int, int, int]:
    small = ctx.info.memory_bytes and ctx.info.memory_bytes < 16 * 2**30
    return (256, 256, 256) if small else (512, 512, 512)


def _model_points(ctx: Context, cases: list[tuple[str, int]], shape: tuple[int, int, int]) -> tuple[list[Point], Table]:
    """Least time of each case on the target's roofline (the model for a machine without a GPU)."""
    from tilecraft.analysis.fom import stencil_traffic

    roof = ctx.roofline or datasheet_roofline(ctx.target)
    points, rows = [], []
    for dtype, order in cases:
        t = stencil_traffic(shape, order, 8 if dtype == "fp64" else 4)
        least = roof.least_time_ms(t.flops, t.bytes, STENCIL_PEAK[dtype])
        points.append(Point(f"laplacian {dtype} o{order}", "stencil", t.flops, t.bytes, least, STENCIL_PEAK[dtype], False))
        rows.append([f"{dtype} order {order}", "×".join(map(str, shape)), fmt(t.bytes / 2**30, ".3f"),
                     fmt(least, ".3f"), fmt(t.points / (least * 1e-3) / 1e9, ".1f")])
    bw = roof.best_bandwidth()
    table = Table(f"Model: the least time on a {roof.device} (not measured)",
                  ["case", "grid", "least GiB moved", "least ms", "GPts/s at that time"], rows,
                  f"least traffic (tilecraft.analysis.fom) / {bw.value:.2f} TB/s ({bw.source}); compute is far from the limit")
    return points, table


@suite("stencil", "Stencil: the seeds' Laplacian ladder")
def stencil_suite(ctx: Context) -> Section:
    from tilecraft.bench.stencil import ladder, ladder_interpreter

    cases = _ladder_cases(ctx)
    if not ctx.gpu:
        from tilecraft.bench import INTERPRETER_LABEL

        sec = Section("stencil", "Stencil: the seeds' Laplacian ladder", source="interpreter")
        shape = (18, 22, 40)
        records = ladder_interpreter(shape, "fp64", 2, progress=lambda v: ctx.progress(f"ladder {v} (interp.)"))
        rows = []
        for r in records:
            x = r.extra
            sm90 = (x.get("sm90") or [{}])[0]
            rows.append([r.case["variant"], "ok" if x["ok"] else f"FAILED {x['message']}", fmt(r.ours, ".1e"),
                         fmt(x["tolerance"], ".0e"), fmt(sm90.get("registers")), fmt(sm90.get("spills")),
                         fmt(sm90.get("occupancy"))])
            if not x["ok"]:
                sec.status, sec.message = "failed", f"{r.case['variant']}: {x['message']}"
        sec.tables.append(Table(f"fp64 order 2, {'×'.join(map(str, shape))}: {INTERPRETER_LABEL}",
                                ["variant", "check", "rel. error", "tolerance", "sm90 regs", "sm90 spills",
                                 "sm90 warps/SM"], rows,
                                "rel. error against the float64 reference, boundary checked unwritten; sm90 columns "
                                "from the compiler (cross-compiled, no GPU)"))
        sec.records = [r.as_dict() for r in records]
        points, table = _model_points(ctx, [("fp64", 2), ("fp32", 2), ("fp32", 8)], (512, 512, 512))
        sec.points, sec.tables = points, [*sec.tables, table]
        sec.notes.append("Interpreter runs check correctness only; the model table is the least time the minimal "
                         "traffic can take on the target GPU, not a measurement.")
        return sec

    from tilecraft.report import plots

    shape = _gpu_shape(ctx)
    sec = Section("stencil", "Stencil: the seeds' Laplacian ladder", source="measured")
    for dtype, order in cases:
        records = ladder(shape, dtype, order, copy_TBps=ctx.copy_TBps, info=ctx.info,
                         progress=lambda v, d=dtype, o=order: ctx.progress(f"ladder {d} o{o} {v}"),
                         budget_s=0.5 if ctx.quick else 1.0)
        rows, labels, values = [], [], []
        for r in records:
            x = r.extra
            res = x.get("resources") or []
            regs = max((d.get("registers") or 0 for d in res), default=None)
            spills = max((d.get("spills") or 0 for d in res), default=None)
            v = r.case["variant"]
            labels.append(v)
            values.append(r.ours if x.get("ok") else None)
            if not x.get("ok"):
                sec.status, sec.message = "failed", f"{dtype} o{order} {v}: {x.get('message')}"
            rows.append([v, fmt(x.get("time_ms"), ".3f"), fmt(r.ours, ".3f"), _pct(r.ratio), fmt(x.get("gpts"), ".1f"),
                         fmt(x.get("speedup_vs_baseline"), ".2f"), fmt(x.get("ratio_to_peer"), ".2f"), fmt(regs),
                         fmt(spills), fmt(x.get("rel_error"), ".1e")])
            d = r.as_dict()
            p = point_from_record(d, f"{v} {dtype} o{order}", STENCIL_PEAK[dtype])
            if p and v in ("baseline", "auto", "reference"):
                sec.points.append(p)
            sec.records.append(d)
        copy = records[0].ceiling_value if records else None
        title = f"{dtype} order {order}, {'×'.join(map(str, shape))}"
        sec.tables.append(Table(title, ["variant", "median ms", "FOM TB/s", "% copy", "GPts/s", "× baseline",
                                        "× torch", "regs", "spills", "rel. error"], rows,
                                f"FOM = least traffic / median time (the median of {DEFAULT_ROUNDS} rounds, the "
                                f"variants timed in turn); "
                                f"copy measured in this run: {fmt(copy, '.3f')} TB/s"))
        sec.figures.append(Figure(f"Ladder, {title}", "bars",
                                  plots.bars(labels, values, ylabel="FOM (TB/s)", title=f"Laplacian ladder, {title}",
                                             line=copy, line_label="copy bandwidth (measured)")))
    return sec


SWEEP_QUICK = (256, 512, 1024, 2048, 4096)
SWEEP_FULL = (128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)


@suite("sweep", "Stencil: the cache-cliff sweep")
def sweep_suite(ctx: Context) -> Section:
    if not ctx.gpu:
        return Section("sweep", "Stencil: the cache-cliff sweep", status="skipped",
                       message="needs a GPU: the cliff is a property of a real cache; the roofline model has none")
    from tilecraft.bench.stencil import sweep
    from tilecraft.report import plots

    sizes = SWEEP_QUICK if ctx.quick else SWEEP_FULL
    records = sweep(sizes, "fp64", 2, copy_TBps=ctx.copy_TBps, info=ctx.info,
                    progress=lambda m: ctx.progress(f"sweep {m}"), budget_s=0.3 if ctx.quick else 0.5)
    sec = Section("sweep", "Stencil: the cache-cliff sweep", source="measured", records=[r.as_dict() for r in records])
    series: dict[str, tuple[list[float], list[float]]] = {}
    by_plane: dict[int, dict[str, float]] = {}
    for r in records:
        v, plane = r.case["variant"], r.case["plane"]
        if not r.extra.get("ok"):
            sec.status, sec.message = "failed", f"{v} {r.case['shape']}: {r.extra.get('message')}"
            continue
        xs, ys = series.setdefault(v, ([], []))
        xs.append(plane)
        ys.append(100 * r.ratio)
        by_plane.setdefault(plane, {})[v] = r.ratio
    variants = sorted({r.case["variant"] for r in records})
    rows = [[f"{math.isqrt(p)}²", *[_pct(by_plane[p].get(v)) for v in variants]] for p in sorted(by_plane)]
    auto = [by_plane[p]["auto"] for p in by_plane if "auto" in by_plane[p]]
    caption = "% of the copy bandwidth measured in this run; fp64, order 2, nz chosen for about 1 GiB a grid"
    if auto:
        caption += f"; auto worst/best = {min(auto) / max(auto):.2f} (target ≥ 0.90: no cliff)"
    sec.tables.append(Table("FOM as % of copy against plane size", ["plane", *variants], rows, caption))
    sec.figures.append(Figure("Cache-cliff sweep", "lines", plots.lines(
        series, xlabel="plane size nx·ny (points)", ylabel="% of copy bandwidth", title="Cache-cliff sweep, fp64 order 2",
        line=100.0, line_label="copy bandwidth")))
    return sec


# ------------------------------------------------------------------------------------------------
# the compiler's view, and the hardware counters
# ------------------------------------------------------------------------------------------------
@suite("inspect", "Cross-target inspection: registers, spills, occupancy, instructions")
def inspect_suite(ctx: Context) -> Section:
    from tilecraft.analysis.inspect import (
        COLUMNS,
        DEFAULT_TARGETS,
        inspect_stencil,
        row_cells,
    )
    from tilecraft.ops.stencil import LADDER

    variants = [*LADDER, "auto"]
    sec = Section("inspect", "Cross-target inspection: registers, spills, occupancy, instructions", source="compiled")

    def say(row) -> None:
        ctx.progress(f"compile {row.target} {row.label.split()[0]}")
    for dtype, order in _ladder_cases(ctx):
        rows = inspect_stencil(variants, dtype, order, (512, 512, 512), DEFAULT_TARGETS, progress=say)
        failed = [r for r in rows if r.error]
        # gfx942/gfx90a have no fp64 matrix path problem for stencils; any failure is a real one
        if failed:
            sec.status, sec.message = "failed", f"{len(failed)} compile(s) failed, e.g. {failed[0].label} on {failed[0].target}"
        sec.tables.append(Table(f"Laplacian ladder {dtype} order {order}, compiled for {', '.join(DEFAULT_TARGETS)}",
                                list(COLUMNS), [row_cells(r) for r in rows],
                                "from Triton's compiler (ptxas / AMDGCN reports), no GPU involved; loads/stores: "
                                "128-bit / all, static counts"))
        sec.records.extend(r.as_dict() for r in rows)
    # GEMM and attention as tilecraft launches them on each target (the config chosen there)
    import importlib.util

    from tilecraft.analysis import inspect as ins

    others = []
    if importlib.util.find_spec("tilecraft.ops.gemm") is not None:
        others.append(("GEMM bf16 NN 8192³ (the heuristic's config per target, no tuning cache)",
                       lambda: ins.inspect_gemm("bf16", (8192, 8192, 8192), "NN", DEFAULT_TARGETS, progress=say)))
    if importlib.util.find_spec("tilecraft.ops.attention") is not None:
        others.append(("Attention bf16 B4 H16 S4096 D128, forward and backward",
                       lambda: ins.inspect_attention(4, 16, 16, 4096, 128, False, "bf16", DEFAULT_TARGETS, progress=say)))
    for title, run in others:
        rows = run()
        failed = [r for r in rows if r.error]
        if failed:
            sec.notes.append(f"{title}: {len(failed)} compile(s) failed, e.g. {failed[0].label} on {failed[0].target}: "
                             f"{failed[0].error.strip().splitlines()[0][:160]}")
        sec.tables.append(Table(title, list(COLUMNS), [row_cells(r) for r in rows],
                                "as `tilecraft inspect gemm|attention` reports it; an error row is a configuration the "
                                "compiler rejects for that target (the page says which), not a failure of the report"))
        sec.records.extend(r.as_dict() for r in rows)
    return sec


@suite("profile", "Hardware counters: DRAM traffic against the least")
def profile_suite(ctx: Context) -> Section:
    from tilecraft.analysis.profile import ProfileError, find_ncu, profile_op

    title = "Hardware counters: DRAM traffic against the least"
    if not ctx.profile:
        return Section("profile", title, status="skipped", message="switched off (--no-profile)")
    if not ctx.gpu or ctx.info.backend != "cuda":
        return Section("profile", title, status="skipped", message="needs an NVIDIA GPU (Nsight Compute)")
    if find_ncu() is None:
        return Section("profile", title, status="skipped", message="Nsight Compute (ncu) was not found")
    sec = Section("profile", title, source="measured")
    # the seeds' grid, and a grid past the cache cliff (4096² planes: the baseline's plane reuse no
    # longer fits in L2, which is what the seeds' FETCH_SIZE table showed on an 8 MB-L2 GPU)
    grids = [list(_gpu_shape(ctx))]
    if not (ctx.info.memory_bytes and ctx.info.memory_bytes < 32 * 2**30):
        grids.append([40, 4096, 4096])
    rows = []
    for shape, variant in [(g, v) for g in grids for v in ("baseline", "auto")]:
        case = {"variant": variant, "dtype": "fp64", "order": 2, "shape": shape}
        grid = "×".join(map(str, shape))
        ctx.progress(f"ncu laplacian {variant} {grid}")
        try:
            res = profile_op("laplacian", case)
        except ProfileError as exc:
            sec.status, sec.message = "failed", f"{variant} {grid}: {exc}"
            continue
        m = res.metrics
        sec.records.append(res.as_dict())
        rows.append([grid, variant, fmt(m["dram_read_bytes"] and m["dram_read_bytes"] / 1e6, ".1f"),
                     fmt(res.least_fetch_bytes / 1e6, ".1f"), _pct(res.fetch_efficiency),
                     fmt(m["dram_write_bytes"] and m["dram_write_bytes"] / 1e6, ".1f"),
                     fmt(res.least_write_bytes / 1e6, ".1f"), _pct(res.write_efficiency),
                     fmt(m["l2_hit_rate_pct"], ".1f"), fmt(m["smem_bank_conflicts_ld"], ".0f"),
                     fmt(m["time_ns"] and m["time_ns"] / 1e3, ".1f")])
    sec.tables.append(Table("Laplacian fp64 order 2: ncu --clock-control none",
                            ["grid", "variant", "FETCH MB", "least fetch MB", "fetch eff. %", "WRITE MB", "least write MB",
                             "write eff. %", "L2 hit %", "smem bank confl.", "kernel µs (profiled)"], rows,
                            "FETCH/WRITE = dram__bytes_read/write.sum; efficiency = least / measured (tilecraft.analysis.fom: the least "
                            "traffic); above 100 %, part of the output was still in L2 when the kernel ended. The profiled kernel "
                            "time is under the profiler, not a benchmark"))
    return sec
