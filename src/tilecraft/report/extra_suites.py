"""Report suites for the kernels beyond the stencil: GEMM, attention and the wave solver. Each runs
the kernel family's own bench functions (``tilecraft.bench.<family>``), so the report measures
exactly what ``tilecraft <family> bench`` does; on a CPU each checks the kernels in the interpreter
and models the target GPU.
"""
from __future__ import annotations

import importlib.util

from tilecraft.report.model import Point, datasheet_roofline, point_from_record
from tilecraft.report.sections import Context, Figure, Section, Table, fmt
from tilecraft.report.suites import Suite, register


def _pct(x: float | None) -> str:
    return fmt(None if x is None else 100 * x, ".1f")


# ------------------------------------------------------------------------------------------------
# GEMM
# ------------------------------------------------------------------------------------------------
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp32-accurate", "fp64", "int8", "fp8")
GEMM_PEAK = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp32": "fp32", "fp32-accurate": "tf32",
             "fp64": "fp64", "int8": "int8", "fp8": "fp8", "fp8_e5m2": "fp8"}


def _gemm_cases(ctx: Context):
    from tilecraft.bench import gemm as gb

    big = (8192, 8192, 8192)
    mid = (4096, 4096, 4096)
    cases = [gb.Case("bf16", *big, lay) for lay in gb.LAYOUTS]
    cases += [gb.Case("fp16", *big), gb.Case("tf32", *big), gb.Case("fp32-accurate", *mid), gb.Case("fp32", *mid),
              gb.Case("fp64", *mid), gb.Case("int8", *big, "NT"), gb.Case("fp8", *big, "NT")]
    llm = [(1, 4096, 4096), (16, 11008, 4096), (128, 4096, 14336), (4096, 14336, 4096)]
    odd = [(1000, 1000, 1000), (3000, 7000, 5000), (997, 1009, 1013)]
    if ctx.quick:
        cases += [gb.Case("bf16", *s) for s in llm + odd[:2]]
    else:
        cases += [gb.Case(c.dtype, c.m, c.n, c.k, c.layout) for c in gb.cases_for("all", ["bf16"])
                  if (c.m, c.n, c.k) != big]
        cases += [gb.Case("fp16", *big, lay) for lay in gb.LAYOUTS[1:]]
        # a linear layer's forward x Wᵀ at prefill rows (the weakest: N = 11008 at M = 256 / 512) and a
        # training step's weight gradient over 512 tokens (gb.SUITES "prefill" and "train")
        cases += [gb.Case("bf16", m, n, k, "NT") for m, n, k in ((256, 11008, 4096), (512, 11008, 4096),
                                                                 (2048, 4096, 4096))]
        cases.append(gb.Case("bf16", 4096, 4096, 512, "TN"))
    return cases


def gemm_suite(ctx: Context) -> Section:
    from tilecraft.bench import gemm as gb
    from tilecraft.report import plots

    title = "GEMM: tilecraft.matmul against torch"
    if not ctx.gpu:
        sec = Section("gemm", title, source="interpreter")
        records = gb.interpreter_check(GEMM_DTYPES, say=lambda m: ctx.progress(f"gemm {m.split(':')[0]} (interp.)"))
        rows = [[r.case["dtype"], r.case["layout"], f"{r.case['m']}×{r.case['n']}×{r.case['k']}",
                 "ok" if r.extra["ok"] else "FAILED", fmt(r.ours, ".1e")] for r in records]
        bad = [r for r in records if not r.extra["ok"]]
        if bad:
            sec.status, sec.message = "failed", f"{len(bad)} case(s) failed the float64 check"
        from tilecraft.bench import INTERPRETER_LABEL

        sec.tables.append(Table(f"Every dtype and transpose: {INTERPRETER_LABEL}",
                                ["dtype", "layout", "shape", "check", "rel. error"], rows,
                                "against the float64 reference, output poisoned first"))
        sec.records = [r.as_dict() for r in records]
        roof = ctx.roofline or datasheet_roofline(ctx.target)
        mrows = []
        for dt in ("bf16", "fp16", "fp8", "int8", "tf32", "fp32", "fp64"):
            m = n = k = 8192
            isz = {"fp8": 1, "int8": 1, "bf16": 2, "fp16": 2}.get(dt, 8 if dt == "fp64" else 4)
            osz = 4 if dt in ("int8", "tf32", "fp32") else (8 if dt == "fp64" else 2)
            flops, nbytes = gb.gemm_flops(m, n, k), gb.gemm_bytes(m, n, k, isz, osz)
            least = roof.least_time_ms(flops, nbytes, GEMM_PEAK[dt])
            pk = roof.peak(GEMM_PEAK[dt])
            if least is None or pk is None:
                continue
            sec.points.append(Point(f"gemm {dt} 8192³", "gemm", flops, nbytes, least, GEMM_PEAK[dt], False))
            mrows.append([dt, "8192³", fmt(least, ".3f"), fmt(flops / (least * 1e-3) / 1e12, ".0f"), pk.source])
        sec.tables.append(Table(f"Model: least time on a {roof.device} (not measured)",
                                ["dtype", "shape", "least ms", "TFLOP/s at that time", "peak from"], mrows,
                                "max(least bytes / bandwidth, FLOPs / peak)"))
        return sec

    from tilecraft.bench.harness import SETTLE_S

    sec = Section("gemm", title, source="measured")
    cases = _gemm_cases(ctx)
    records = []
    for i, c in enumerate(cases):
        ctx.progress(f"gemm {i + 1}/{len(cases)} {c.name}")
        try:
            rec = gb.run_case(c, ctx.info, copy_TBps=ctx.copy_TBps, budget_s=0.3 if ctx.quick else 0.5,
                              settle_s=SETTLE_S)
        except Exception as exc:  # noqa: BLE001 - one case failing is a row, the suite goes on
            sec.status, sec.message = "failed", f"{c.name}: {type(exc).__name__}: {exc}"[:300]
            continue
        records.append(rec)
    rows = []
    heat: dict[tuple[str, str], float] = {}
    for r in records:
        x, cs = r.extra, r.case
        shape = f"{cs['m']}×{cs['n']}×{cs['k']}"
        failed = bool(x.get("failed"))
        if failed:
            sec.status, sec.message = "failed", f"{cs['dtype']} {cs['layout']} {shape} failed the float64 check"
        rows.append([cs["dtype"], cs["layout"], shape, "FAILED" if failed else fmt(x.get("time_ms"), ".4g"),
                     fmt(r.ours, ".1f"), r.peer or "–", fmt(r.peer_value, ".1f"), fmt(r.ratio, ".2f"),
                     _pct(x.get("fraction_of_peak")), _pct(x.get("fraction_of_copy")), fmt(x.get("rel_err"), ".1e"),
                     x.get("kernel", "–")])
        if not failed and r.ratio:
            heat[(f"{shape} {cs['layout']}", cs["dtype"])] = r.ratio
            d = r.as_dict()
            p = point_from_record({**d, "extra": {**x, "ok": True}}, f"{cs['dtype']} {cs['layout']} {shape}",
                                  GEMM_PEAK.get(cs["dtype"]))
            if p:
                sec.points.append(p)
        sec.records.append(r.as_dict())
    sec.tables.append(Table("Ours against the torch call, same inputs, same run",
                            ["dtype", "layout", "shape", "ms", "TFLOP/s", "peer", "peer TFLOP/s", "× peer",
                             "% datasheet", "% copy BW", "rel. error", "kernel"], rows,
                            "time per call from CUDA-graph replays over rotated inputs (median); % copy BW: least "
                            "bytes / time against the copy bandwidth measured in this run (the small-M figure)"))
    if heat:
        row_keys = sorted({k[0] for k in heat}, key=lambda s: (len(s), s))
        col_keys = [d for d in GEMM_DTYPES if any(k[1] == d for k in heat)]
        sec.figures.append(Figure("GEMM ratio to torch", "heatmap", plots.heatmap(
            row_keys, col_keys, [[heat.get((r, c)) for c in col_keys] for r in row_keys],
            title="tilecraft.matmul / torch (TFLOP/s ratio, same run)")))
    return sec


# ------------------------------------------------------------------------------------------------
# attention
# ------------------------------------------------------------------------------------------------
def _attention_interpreter(ctx: Context, sec: Section) -> None:
    import torch

    import tilecraft
    from tilecraft.bench import INTERPRETER_LABEL
    from tilecraft.bench import attention as ab

    shapes = [ab.Shape(1, 2, 1, 17, 33, 64), ab.Shape(1, 2, 2, 40, 40, 64, True), ab.Shape(1, 4, 1, 3, 70, 128),
              ab.Shape(1, 1, 1, 33, 17, 96, True)]
    rows = []
    for s in shapes:
        ctx.progress(f"attention {s.label} (interp.)")

        def run(q, k, v, s=s):
            return tilecraft.attention(q, k, v, causal=s.causal, return_lse=True)
        try:
            ok, err, msg = ab.check_forward(s, torch.float16, run, device="cpu")
        except Exception as exc:  # noqa: BLE001 - a failing case is a failed row
            ok, err, msg = False, None, f"{type(exc).__name__}: {exc}"[:200]
        if not ok:
            sec.status, sec.message = "failed", f"{s.label}: {msg}"
        rows.append([s.label, "fp16", "ok" if ok else f"FAILED {msg}", fmt(err, ".1e"), fmt(ab.TOLERANCE[torch.float16], ".0e")])
        sec.records.append({"case": s.as_dict(), "ok": ok, "rel_error": err, "message": msg, "measured": False})
    sec.tables.append(Table(f"Forward against the float64 reference: {INTERPRETER_LABEL}",
                            ["shape", "dtype", "check", "rel. error", "tolerance"], rows,
                            "lengths not multiples of the block, grouped-query heads, causal with S_q ≠ S_k, head dim 96"))
    roof = ctx.roofline or datasheet_roofline(ctx.target)
    mrows = []
    for s in (ab.Shape(4, 16, 16, 4096, 4096, 128), ab.Shape(4, 16, 16, 4096, 4096, 128, True),
              ab.Shape(8, 32, 8, 1, 8192, 128)):
        flops, nbytes = ab.attention_flops(s), ab.attention_bytes(s, 2)
        least = roof.least_time_ms(flops, nbytes, "bf16")
        if least is None:
            continue
        sec.points.append(Point(f"attention {s.label}", "attention", flops, nbytes, least, "bf16", False))
        mrows.append([s.label, fmt(least, ".4g"), fmt(flops / (least * 1e-3) / 1e12, ".0f"),
                      fmt(nbytes / (least * 1e-3) / 1e12, ".2f")])
    sec.tables.append(Table(f"Model: least forward time on a {roof.device}, bf16 (not measured)",
                            ["shape", "least ms", "TFLOP/s at that time", "TB/s at that time"], mrows,
                            "max(least bytes / bandwidth, FLOPs / bf16 peak)"))


def attention_suite(ctx: Context) -> Section:
    from tilecraft.bench import attention as ab
    from tilecraft.report import plots

    title = "Attention: tilecraft.attention against SDPA"
    if not ctx.gpu:
        sec = Section("attention", title, source="interpreter")
        _attention_interpreter(ctx, sec)
        return sec
    sec = Section("attention", title, source="measured")
    shapes = list(ab.ISSUE_SHAPES)
    records = []
    for direction in ("fwd", "bwd"):
        chosen = shapes if direction == "fwd" or not ctx.quick else [s for s in shapes if s.head_dim == 128]
        # rounds: one pass can be several percent off (cuDNN's own time moves between passes); settle: each
        # implementation timed in its own clock state at the power cap, as `tilecraft attention bench` does
        records += ab.bench(chosen, "bf16", (direction,), budget_s=0.25 if ctx.quick else 0.4, info=ctx.info,
                            progress=lambda m: ctx.progress(f"attention {m}"), rounds=2 if ctx.quick else 3,
                            settle_s=ab.SETTLE_S)
    ours = [r for r in records if r.case["impl"] == "tilecraft"]
    backends = [f"sdpa-{b}" for b in ab.SDPA_BACKENDS]
    rows, heat_rows, heat = [], [], []
    for r in ours:
        x, cs = r.extra, r.case
        name = f"{cs['direction']} {cs['label']}"
        if not x.get("ok"):
            sec.status, sec.message = "failed", f"{name}: {x.get('message')}"
        same = {o.case["impl"]: o for o in records if o.case["label"] == cs["label"]
                and o.case["direction"] == cs["direction"]}
        vals = [same[b].ours if b in same and same[b].extra.get("ok") else None for b in backends]
        ratios = x.get("ratio_to") or {}
        res = x.get("resources") or []
        regs = "/".join(str(d.get("registers")) for d in res if d.get("registers") is not None) or "–"
        spills = max((d.get("spills") or 0 for d in res), default=None)
        rows.append([name, r.unit, "FAILED" if not x.get("ok") else fmt(r.ours, ".1f"),
                     *[fmt(v, ".1f") for v in vals], fmt(ratios.get("sdpa-cudnn"), ".2f"),
                     fmt(r.extra.get("ratio_to_peer"), ".2f"), r.peer or "–",
                     fmt(r.extra.get("ratio_to_ceiling") and 100 * r.extra["ratio_to_ceiling"], ".1f"), regs,
                     fmt(spills)])
        heat_rows.append(name)
        heat.append([ratios.get(b) for b in backends])
        p = point_from_record(r.as_dict(), name, "bf16")
        if p:
            sec.points.append(p)
    sec.records = [r.as_dict() for r in records]
    sec.tables.append(Table("Ours against SDPA's backends, bf16, same inputs, same run",
                            ["case", "unit", "ours", *backends, "× cuDNN", "× best", "best peer", "% copy", "regs",
                             "spills"], rows,
                            "TFLOP/s (forward 4·B·H·S_q·S_k·D over visible pairs, backward 2.5×); decode shapes in TB/s "
                            "over the least bytes, against the copy bandwidth measured in this run; – : the backend "
                            "does not take the shape; regs/spills: our launched kernels' (per kernel)"))
    if heat_rows:
        sec.figures.append(Figure("Attention ratio to SDPA", "heatmap", plots.heatmap(
            heat_rows, backends, heat, title="tilecraft.attention / SDPA backend (same run)")))
    return sec


# ------------------------------------------------------------------------------------------------
# the wave solver
# ------------------------------------------------------------------------------------------------
def wave_suite(ctx: Context) -> Section:
    import torch

    from tilecraft.bench import wave as wb
    from tilecraft.ops import wave as wops

    title = "Wave: the fused acoustic time step"
    order = 8
    if not ctx.gpu:
        from tilecraft.bench import INTERPRETER_LABEL

        sec = Section("wave", title, source="interpreter")
        ctx.progress("wave step (interp.)")
        records = wb.step_suite(n=8, order=order, pml_width=2, device="cpu", budget_s=0.0,
                                configs=(wops.default_config(torch.float32, order, torch.device("cpu")),),
                                say=lambda m: ctx.progress(f"wave {m} (interp.)"))
        rows = []
        for r in records:
            if r.case.get("variant") == "torch":
                continue
            ok = bool(r.extra.get("ok"))
            if not ok:
                sec.status, sec.message = "failed", f"{r.case['variant']}: {r.extra.get('message') or r.extra.get('error')}"
            rows.append([r.case["variant"], "×".join(map(str, r.case["grid"])), f"order {order}",
                         "ok" if ok else "FAILED", fmt(r.extra.get("error"), ".1e")])
        sec.records = [{**r.as_dict(), "measured": False} for r in records]
        sec.tables.append(Table(f"Fused step against the torch step: {INTERPRETER_LABEL}",
                                ["variant", "grid", "order", "check", "max error / max |p|"], rows))
        roof = ctx.roofline or datasheet_roofline(ctx.target)
        t = wb.step_traffic(512**3, order, 4)
        least = roof.least_time_ms(t.flops, t.bytes, "fp32")
        if least:
            sec.points.append(Point(f"wave step fp32 o{order} 512³", "wave", t.flops, t.bytes, least, "fp32", False))
            sec.tables.append(Table(f"Model: least time of one step on a {roof.device} (not measured)",
                                    ["case", "least ms", "GPts/s at that time"],
                                    [[f"fp32 order {order}, 512³ interior", fmt(least, ".3f"),
                                      fmt(t.points / (least * 1e-3) / 1e9, ".1f")]],
                                    "read p, p_prev, v²dt²; write p_next: 16 B per point"))
        return sec

    sec = Section("wave", title, source="measured")
    n = 512 if not (ctx.info.memory_bytes and ctx.info.memory_bytes < 16 * 2**30) else 256
    # the plain step as the library takes it on this box by default (None), or (--full) the sweep's tiles too
    cfgs = (None,) if ctx.quick else (None,) + wb.GPU_CONFIGS
    records = wb.step_suite(n=n, order=order, configs=cfgs, copy_tbps=ctx.copy_TBps, budget_s=0.5 if ctx.quick else 1.0,
                            say=lambda m: ctx.progress(f"wave {m}"))
    # the step with the CPML, what issue 7's target is about: psi and zeta's traffic in the layers counted
    records += wb.cpml_step_suite(n=n, order=order, configs=[wops.default_cpml_config(torch.device("cuda"))],
                                  copy_tbps=ctx.copy_TBps, budget_s=0.5 if ctx.quick else 1.0, unfused=False,
                                  parts=False, say=lambda m: ctx.progress(f"wave {m}"))
    # simulate with its defaults (CUDA graphs on small grids from GRAPH_AUTO_STEPS steps: 40 > 32)
    records += wb.simulate_suite(n=256 if ctx.quick else n, order=order, nt=40 if ctx.quick else 100,
                                 copy_tbps=ctx.copy_TBps, say=lambda m: ctx.progress(f"wave {m}"), graph_modes=(None,))
    rows = []
    for r in records:
        x = r.extra
        failed = x.get("ok") is False
        if failed:
            sec.status, sec.message = "failed", f"{r.case.get('variant')}: {x.get('message') or x.get('error')}"
        cfg = x.get("config") or {}
        label = r.case.get("variant", "")
        if cfg.get("kernel"):  # a plain step's WaveConfig (a CPML record's config is a CpmlConfig)
            label += f" {cfg['kernel']} {cfg.get('block_y')}x{cfg.get('block_x')} z{cfg.get('block_z')} w{cfg.get('num_warps')}"
        elif r.case.get("variant") == "simulate-triton":
            label += f" (CUDA graphs {x.get('cuda_graphs')})"
        rows.append([label, "×".join(map(str, r.case.get("model", []))), "FAILED" if failed else fmt(x.get("time_ms"), ".4g"),
                     fmt(r.ours, ".3f"), _pct(r.extra.get("ratio_to_ceiling")), fmt(x.get("gpts"), ".1f"),
                     fmt(r.extra.get("ratio_to_peer"), ".2f"), fmt(x.get("registers")), fmt(x.get("spills"))])
        p = point_from_record({**r.as_dict(), "extra": {**x, "ok": not failed}}, label, "fp32")
        if p and not failed and r.case.get("variant") in ("fused", "torch", "cpml-fused", "simulate-triton"):
            sec.points.append(p)
    sec.records = [r.as_dict() for r in records]
    sec.tables.append(Table(f"fp32, order {order}: one time step on the grid of a 12-point CPML",
                            ["variant", "model", "ms / step", "FOM TB/s", "% copy", "GPts/s", "× torch", "regs", "spills"],
                            rows, "fused: the plain step (no CPML terms) over the whole grid, FOM = 16 B per updated point "
                            "(read p, p_prev, v²dt²; write p_next) / median time; cpml-fused / cpml-torch: the step with "
                            "the CPML (ops.cpml_step), FOM counting psi and zeta read and written in the layers too (the "
                            "issue's target: 85% of copy); simulate rows: simulate's time loop (step, source, receivers) "
                            "with its defaults, FOM at 16 B per point"))
    return sec


# ------------------------------------------------------------------------------------------------
# registration: only the families whose bench module is in the tree
# ------------------------------------------------------------------------------------------------
if importlib.util.find_spec("tilecraft.bench.gemm") is not None:
    register(Suite("gemm", "GEMM: tilecraft.matmul against torch", gemm_suite), before="inspect")
if importlib.util.find_spec("tilecraft.bench.attention") is not None:
    register(Suite("attention", "Attention: tilecraft.attention against SDPA", attention_suite), before="inspect")
if importlib.util.find_spec("tilecraft.bench.wave") is not None:
    register(Suite("wave", "Wave: the fused acoustic time step", wave_suite), before="inspect")
