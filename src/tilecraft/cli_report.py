"""``tilecraft report`` and ``tilecraft profile``.

    tilecraft report [--quick|--full] [--target h100] [--out out/report] [--only a,b] [--skip a,b]
                     [--no-profile]
    tilecraft profile laplacian [--variant auto] [--dtype fp64] [--order 2] [--shape NZ NY NX] [--json]

``report`` exit codes: 0 every section ok or skipped (skips say why), 1 a section failed (the page
and the terminal say which; the rest of the report was still written), 2 bad input. On a machine
without a GPU it re-runs itself with ``TRITON_INTERPRET=1`` so the kernels run in the interpreter.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from tilecraft._cli import check_out
from tilecraft._cli import fail as _fail

__all__ = ["register"]

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "skipped": "yellow"}


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("profile")(profile)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)




def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _needs_interpreter() -> bool:
    """No GPU, and this process's Triton is not the interpreter: the kernels cannot run here."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    import torch

    return not torch.cuda.is_available()


def report(
    full: Annotated[bool, typer.Option("--full/--quick", help="--quick (default): one case per suite, under 10 min "
                                       "on a GPU; --full: every dtype/order and the whole sweep.")] = False,
    target: Annotated[str | None, typer.Option(help="GPU the roofline model is for when there is no GPU here "
                                                "(h100, h200, a100, mi250x, mi300x). Default: this GPU, or h100.")] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.html, report.md and report.json.")] = Path("out/report"),
    only: Annotated[str | None, typer.Option(help="Comma-separated suites to run (the rest are left out).")] = None,
    skip: Annotated[str | None, typer.Option(help="Comma-separated suites to leave out.")] = None,
    no_profile: Annotated[bool, typer.Option("--no-profile", help="Do not run Nsight Compute.")] = False,
) -> None:
    """Measure this machine and explain every kernel against its roofline: one HTML page, JSON and markdown.

    Suites: device, ceilings, stencil ladder, cache-cliff sweep, GEMM / attention / wave where present,
    cross-target inspection, hardware counters (ncu). Without a GPU: interpreter correctness, compiler
    reports and the roofline model of --target, each labelled as not measured.
    """
    from tilecraft.report import run_report, suite_keys
    from tilecraft.report.model import resolve_target

    keys = suite_keys()
    check_out(out, folder=True)
    for name in [*_split(only), *_split(skip)]:
        if name not in keys:
            _fail(f"unknown suite {name!r}; choose from {', '.join(keys)}")
    if target is not None:
        try:
            resolve_target(target)
        except ValueError as exc:
            _fail(str(exc))
    if _needs_interpreter():
        _err().print("No GPU is visible to torch: the report runs the kernels in Triton's interpreter "
                     "(TRITON_INTERPRET=1), for correctness only, and models the speeds.")
        from tilecraft.cli import _rerun_with_interpreter

        _rerun_with_interpreter(["report", *_argv(full, target, out, only, skip, no_profile)])
    err = _err()
    console = Console(highlight=False)

    def show(sec) -> None:
        style = _STATUS_STYLE[sec.status]
        msg = f" — {sec.message}" if sec.message else ""
        console.print(f"[{style}]{sec.status:>7}[/] {sec.title} [dim]({sec.seconds:.1f} s)[/]{msg}", markup=True)

    n_suites = len([k for k in keys if (not _split(only) or k in _split(only)) and k not in _split(skip)])
    with Progress(SpinnerColumn(), TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("report", total=n_suites + 1)  # + the roofline

        def section_done(sec) -> None:
            progress.advance(task)
            show(sec)
        result = run_report("full" if full else "quick", target=target, out_dir=out, only=_split(only) or None,
                            skip=_split(skip), profile=not no_profile,
                            progress=lambda m: progress.update(task, description=m[:44]), on_section=section_done)
    _print_roofline(console, result)
    console.print(result.meta["headline"])
    console.print(f"wrote {result.html}, {result.markdown}, {result.json}")
    if result.failed:
        raise typer.Exit(1)


def _argv(full, target, out, only, skip, no_profile) -> list[str]:
    args = ["--full" if full else "--quick", "--out", str(out)]
    args += ["--target", target] if target else []
    args += ["--only", only] if only else []
    args += ["--skip", skip] if skip else []
    args += ["--no-profile"] if no_profile else []
    return args


def _print_roofline(console: Console, result) -> None:
    sec = next((s for s in result.sections if s.key == "roofline"), None)
    if not sec or not sec.tables:
        return
    t = sec.tables[0]
    table = Table(title=f"{sec.title} ({'measured' if sec.source == 'measured' else 'model, not measured'})",
                  title_justify="left")
    keep = [i for i, c in enumerate(t.columns) if c in ("#", "kernel", "ms", "TFLOP/s", "TB/s", "% of roof", "time is")]
    for i in keep:
        table.add_column(t.columns[i], justify="left" if t.columns[i] == "kernel" else "right")
    for row in t.rows:
        table.add_row(*[str(row[i]) for i in keep])
    console.print(table)


PROFILE_DEFAULTS = {"laplacian": ("fp64", "512,512,512"), "matmul": ("bf16", "8192,8192,8192"),
                    "attention": ("bf16", "4,16,4096,128")}


def _profile_case(op: str, variant: str, dtype: str | None, order: int, shape: str | None, layout: str,
                  causal: bool) -> dict:
    """The case dict of ``op`` from the CLI's options, or a one-line error (exit 2)."""
    from tilecraft.analysis.profile import PROFILE_OPS

    if op not in PROFILE_OPS:
        _fail(f"cannot profile {op!r}; choose from {', '.join(PROFILE_OPS)}")
    default_dtype, default_shape = PROFILE_DEFAULTS[op]
    dtype = dtype or default_dtype
    try:
        dims = [int(t) for t in (shape or default_shape).replace("x", ",").split(",") if t.strip()]
    except ValueError:
        _fail(f"--shape takes comma-separated integers, got {shape!r}")
    need = 4 if op == "attention" else 3
    if len(dims) != need or min(dims) < 1:
        what = {"laplacian": "NZ,NY,NX", "matmul": "M,N,K", "attention": "B,H,S,D"}[op]
        _fail(f"--shape for {op} is {what} (positive integers), got {shape!r}")
    if op == "laplacian":
        from tilecraft.ops.stencil import VARIANTS

        if dtype not in ("fp64", "fp32"):
            _fail(f"unknown dtype {dtype!r}; choose fp64 or fp32")
        if variant not in VARIANTS:
            _fail(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
        if order % 2 or not 2 <= order <= 16:
            _fail(f"order must be even, 2..16, got {order}")
        if min(dims) < order + 1:
            _fail(f"every extent must be at least {order + 1} for order {order}, got {shape}")
        return {"variant": variant, "dtype": dtype, "order": order, "shape": dims}
    if op == "matmul":
        from tilecraft.bench.gemm import DTYPES, LAYOUTS

        if dtype not in DTYPES:
            _fail(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
        if layout not in LAYOUTS:
            _fail(f"unknown layout {layout!r}; choose from {', '.join(LAYOUTS)}")
        return {"dtype": dtype, "layout": layout, "shape": dims}
    from tilecraft.bench.attention import DTYPES as ATT_DTYPES

    if dtype not in ATT_DTYPES:
        _fail(f"unknown dtype {dtype!r}; choose from {', '.join(ATT_DTYPES)}")
    if dims[3] > 256:
        _fail(f"head dim D must be at most 256, got {dims[3]}")
    return {"dtype": dtype, "shape": dims, "causal": causal}


def profile(
    op: Annotated[str, typer.Argument(help="The op to profile: laplacian, matmul or attention (forward).")],
    variant: Annotated[str, typer.Option(help="laplacian: a ladder step, or auto.")] = "auto",
    dtype: Annotated[str | None, typer.Option(help="laplacian fp64|fp32 (fp64); matmul bf16, fp16, tf32, fp32, "
                                                    "fp32-accurate, fp64, int8, fp8 (bf16); attention fp16|bf16 (bf16).")] = None,
    order: Annotated[int, typer.Option(help="laplacian: stencil order (even, 2..16).")] = 2,
    shape: Annotated[str | None, typer.Option(help="laplacian NZ,NY,NX (512,512,512); matmul M,N,K (8192,8192,8192); "
                                                    "attention B,H,S,D (4,16,4096,128).")] = None,
    layout: Annotated[str, typer.Option(help="matmul: NN, NT, TN or TT.")] = "NN",
    causal: Annotated[bool, typer.Option("--causal", help="attention: causal mask.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Hardware counters of one kernel with Nsight Compute: DRAM bytes read and written against the least
    (FETCH_SIZE, WRITE_SIZE, fetch efficiency), L2 hit rate, shared-memory bank conflicts. NVIDIA GPUs."""
    from tilecraft.analysis.profile import ProfileError, find_ncu, profile_op

    case = _profile_case(op, variant, dtype, order, shape, layout, causal)
    import torch

    if not torch.cuda.is_available() or torch.version.hip:
        _fail("profiling needs an NVIDIA GPU (Nsight Compute); none is visible to torch", 1)
    if find_ncu() is None:
        _fail("Nsight Compute (ncu) was not found: install it or set TILECRAFT_NCU", 1)
    label = f"{op} " + " ".join(f"{k}={'×'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in case.items())
    try:
        with _err().status(f"ncu: {label}"):
            res = profile_op(op, case)
    except ProfileError as exc:
        _fail(str(exc), 1)
    if as_json:
        print(json.dumps(res.as_dict(), indent=1, default=str))
        return
    m = res.metrics

    def mb(x):
        return "–" if x is None else f"{x / 1e6:,.1f} MB"

    def pct(x):
        return "–" if x is None else f"{100 * x:.1f} %"
    table = Table(title=f"{label}: {res.kernel}",
                  title_justify="left", caption="ncu --clock-control none; efficiency = least / measured. Write efficiency above 100 %: part of "
                          "the output was still in L2 when the kernel ended (written back later)")
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name, value in (("FETCH_SIZE (DRAM read)", mb(m["dram_read_bytes"])), ("least fetch", mb(res.least_fetch_bytes)),
                        ("fetch efficiency", pct(res.fetch_efficiency)), ("WRITE_SIZE (DRAM write)", mb(m["dram_write_bytes"])),
                        ("least write", mb(res.least_write_bytes)), ("write efficiency", pct(res.write_efficiency)),
                        ("L2 hit rate", "–" if m["l2_hit_rate_pct"] is None else f"{m['l2_hit_rate_pct']:.1f} %"),
                        ("shared-memory bank conflicts (ld/st)",
                         f"{m['smem_bank_conflicts_ld'] or 0:.0f} / {m['smem_bank_conflicts_st'] or 0:.0f}"),
                        ("kernel time under the profiler", "–" if m["time_ns"] is None else f"{m['time_ns'] / 1e3:.1f} µs")):
        table.add_row(name, value)
    Console(highlight=False).print(table)
