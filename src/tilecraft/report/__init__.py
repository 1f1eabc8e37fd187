"""``tilecraft report``: measure the machine, run every suite, and explain each kernel against its
roofline, in one self-contained HTML page plus JSON and a markdown summary.

``run_report`` runs the suites of :mod:`tilecraft.report.suites` in order (each failure becomes a
failed section, the rest still runs), then places every kernel with FLOPs, bytes and a time on the
roofline: the measured ceilings on a GPU, the ``--target`` datasheet as a model on a CPU.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tilecraft.report.model import Roofline, datasheet_roofline, resolve_target
from tilecraft.report.sections import Context, Figure, Section, Table, fmt

__all__ = ["ReportResult", "run_report", "suite_keys"]


@dataclass
class ReportResult:
    sections: list[Section]
    html: Path
    markdown: Path
    json: Path
    meta: dict

    @property
    def failed(self) -> list[Section]:
        return [s for s in self.sections if s.status == "failed"]


def suite_keys() -> list[str]:
    from tilecraft.report import suites

    _load_plugins()
    return [s.key for s in suites.SUITES]


def _load_plugins() -> None:
    """The GEMM, attention and wave suites register themselves (after the stencil ones) on import."""
    import tilecraft.report.extra_suites  # noqa: F401


def _roofline_section(ctx: Context, sections: Sequence[Section]) -> Section:
    from tilecraft.report import plots

    roof: Roofline = ctx.roofline or datasheet_roofline(ctx.target)
    points = [p for s in sections for p in s.points]
    measured = any(p.measured for p in points)
    source = "measured" if measured else "model"
    title = f"Roofline: {roof.device}"
    sec = Section("roofline", title, source=source)
    if not ctx.gpu:
        sec.notes.append(f"No GPU: every point is the model's least time on a {ctx.target} (hollow markers), "
                         "ceilings from its datasheet (dashed).")
    if not points:
        sec.status, sec.message = "skipped", "no suite produced a kernel with FLOPs, bytes and a time"
        return sec
    sec.figures.append(Figure(title, "roofline", plots.roofline(roof, points, f"{roof.device}: every kernel against its roofline"),
                              "solid: measured ceilings; dashed/dotted: datasheet; filled: measured; hollow: model"))
    rows = []
    for i, p in enumerate(points):
        frac = p.fraction_of_roof(roof)
        pk = roof.peak(p.peak_key) if p.peak_key else None
        rows.append([str(i + 1), p.label, p.suite, fmt(p.flops / 1e9, ".3g"), fmt(p.nbytes / 2**20, ".4g"), fmt(p.intensity, ".3g"),
                     fmt(p.time_ms, ".4g"), fmt(p.tflops, ".4g"), fmt(p.tbps, ".3f"),
                     fmt(None if frac is None else 100 * frac, ".1f"),
                     f"{pk.name} {pk.source}" if pk else "–", "measured" if p.measured else "model"])
    bw = roof.best_bandwidth()
    sec.tables.append(Table("Kernels on the roofline", ["#", "kernel", "suite", "GFLOP", "least MiB", "FLOP/B", "ms",
                                                        "TFLOP/s", "TB/s", "% of roof", "compute roof", "time is"], rows,
                            f"#: the point's number in the plot. % of roof = least time on the roofline (bandwidth "
                            f"{bw.value:.2f} TB/s {bw.source}, compute roof named) / time; a measured compute roof is "
                            "torch.matmul's rate in this run, so a kernel can pass it"))
    sec.records = [p.as_dict() for p in points]
    return sec


def run_report(mode: str = "quick", *, target: str | None = None, out_dir: str | Path = "out/report",
               only: Sequence[str] | None = None, skip: Sequence[str] = (), profile: bool = True,
               progress: Callable[[str], None] | None = None,
               on_section: Callable[[Section], None] | None = None) -> ReportResult:
    """Run the report's suites and write ``report.html``, ``report.md`` and ``report.json`` into
    ``out_dir``. ``mode``: "quick" or "full". ``target``: the GPU the CPU model is for (default: this
    GPU, or H100 on a CPU). ``only`` / ``skip``: suite keys."""
    from tilecraft.bench.harness import git_commit, stamp_dicts
    from tilecraft.hardware.device import datasheet_key, detect
    from tilecraft.report import render, suites

    if mode not in ("quick", "full"):
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    _load_plugins()
    keys = [s.key for s in suites.SUITES]
    for k in [*(only or ()), *skip]:
        if k not in keys:
            raise ValueError(f"unknown suite {k!r}; choose from {', '.join(keys)}")
    info = detect()
    target_key = resolve_target(target) if target else (datasheet_key(info.name) or "H100")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(mode=mode, info=info, target=target_key, out_dir=out, progress=progress or (lambda _m: None),
                  profile=profile)
    sections: list[Section] = []
    for s in suites.SUITES:
        if (only and s.key not in only) or s.key in skip:
            continue
        if s.full_only and mode == "quick":
            sec = Section(s.key, s.title, status="skipped", message="runs with --full")
        else:
            ctx.progress(s.title)
            t0 = time.perf_counter()
            try:
                sec = s.run(ctx)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing suite is a failed section; the rest goes on
                tb = traceback.format_exc(limit=3).strip().splitlines()
                sec = Section(s.key, s.title, status="failed", message=f"{type(exc).__name__}: {exc}"[:500],
                              notes=[tb[-1]] if tb else [])
            sec.seconds = time.perf_counter() - t0
        sections.append(sec)
        if on_section:
            on_section(sec)
    roof = _roofline_section(ctx, sections)
    sections.insert(1 if sections and sections[0].key == "device" else 0, roof)
    for sec in sections:  # every benchmark record carries its device, versions, commit and date
        stamp_dicts(sec.records, info)
    if on_section:
        on_section(roof)
    n_failed = sum(s.status == "failed" for s in sections)
    n_skipped = sum(s.status == "skipped" for s in sections)
    headline = (("Measured on this GPU" if info.is_gpu else
                 f"No GPU: interpreter correctness, compiler reports, and a {target_key} roofline model (not measured)")
                + f"; {len(sections) - n_failed - n_skipped} sections ok, {n_failed} failed, {n_skipped} skipped.")
    meta = {"device": info.name, "backend": info.backend, "mode": mode, "target": target_key,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
            "torch": info.versions.get("torch", ""), "triton": info.versions.get("triton", ""),
            "measured": info.is_gpu, "headline": headline,
            "roofline": (ctx.roofline or datasheet_roofline(target_key)).as_dict()}
    paths = {"html": out / "report.html", "markdown": out / "report.md", "json": out / "report.json"}
    paths["html"].write_text(render.render_html(sections, meta), encoding="utf-8")
    paths["markdown"].write_text(render.render_markdown(sections, meta), encoding="utf-8")
    paths["json"].write_text(render.render_json(sections, meta), encoding="utf-8")
    return ReportResult(sections, paths["html"], paths["markdown"], paths["json"], meta)
