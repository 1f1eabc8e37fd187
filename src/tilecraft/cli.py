"""The ``tilecraft`` command line.

    tilecraft info [--refresh] [--json]
    tilecraft stencil ladder [--shape NZ NY NX] [--dtype fp64|fp32] [--order 2] [--variants a,b] [--out PATH] [--json]
    tilecraft stencil sweep [--sizes 256,512,...] [--dtype fp64] [--order 2] [--variants baseline,auto] [--png PATH]

Argument handling and formatting only: what is measured, and how, lives in ``tilecraft.bench`` and
``tilecraft.hardware``. On a machine with no GPU the kernels run in Triton's interpreter, which
checks them but says nothing of their speed; every table and JSON record from such a run says so.
"""
import json
import math
import os
import subprocess
import sys
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

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
from tilecraft.bench import DEFAULT_ROUNDS, INTERPRETER_LABEL

app = typer.Typer(
    name="tilecraft", no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
    help="Triton kernels at the hardware limit, and the tools that show how close they are.")
stencil_app = typer.Typer(
    no_args_is_help=True, add_completion=False,
    help="3D finite-difference Laplacian: the seeds' optimisation ladder and the cache-cliff sweep.")
app.add_typer(stencil_app, name="stencil")


# Command groups that live in their own modules; each module has ``register(app)``. A module named
# here that is not in the tree yet is skipped (it is being written); one that fails to import fails loudly.
SUBCOMMAND_MODULES = ("cli_mi", "cli_inspect", "cli_gemm", "cli_attention", "cli_wave", "cli_report")


def _register_subcommands() -> None:
    """Command groups that live in their own modules (tilecraft mi, inspect, gemm, ...)."""
    import importlib
    import importlib.util

    for name in SUBCOMMAND_MODULES:
        if importlib.util.find_spec(f"tilecraft.{name}") is None:
            continue
        importlib.import_module(f"tilecraft.{name}").register(app)


_register_subcommands()

# Interpreter runs cost about a millisecond per point for the one-point-per-thread baseline.
INTERPRETER_DEFAULT_SHAPE = (18, 22, 40)
INTERPRETER_LARGE_POINTS = 64**3
GPU_DEFAULT_SHAPE = (512, 512, 512)
SWEEP_DEFAULT_SIZES = "128,256,512,768,1024,1536,2048,3072,4096"


class DType(str, Enum):
    fp64 = "fp64"
    fp32 = "fp32"


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _progress(console: Console) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal)


class _Steps:
    """A ``progress(message)`` callback for the bench/hardware layers: each call starts a step."""

    def __init__(self, progress: Progress, total: int):
        self.progress, self.started = progress, False
        self.task = progress.add_task("starting", total=total)

    def __call__(self, message: str) -> None:
        if self.started:
            self.progress.advance(self.task)
        self.started = True
        self.progress.update(self.task, description=message)

    def finish(self) -> None:
        task = self.progress.tasks[self.task]
        self.progress.update(self.task, completed=task.total)


# ------------------------------------------------------------------------------------------------
# argument checks: one-line errors, exit code 2, before anything is launched
# ------------------------------------------------------------------------------------------------
def _check_order(order: int) -> int:
    from tilecraft.reference.stencil import MAX_ORDER, MIN_ORDER

    if order % 2 or not MIN_ORDER <= order <= MAX_ORDER:
        raise typer.BadParameter(f"order must be an even integer in [{MIN_ORDER}, {MAX_ORDER}], got {order}",
                                 param_hint="'--order'")
    return order


def _parse_variants(text: str | None, default: tuple[str, ...]) -> list[str]:
    from tilecraft.ops.stencil import VARIANTS

    if text is None:
        return list(default)
    names = list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        raise typer.BadParameter(f"unknown variant(s) {', '.join(unknown) or repr(text)}; choose from "
                                 f"{','.join(VARIANTS)}", param_hint="'--variants'")
    return names


def _check_shape(shape: tuple[int, int, int], order: int) -> tuple[int, int, int]:
    need = order + 1  # 2R + 1: the stencil needs one interior point
    if any(n < need for n in shape):
        raise typer.BadParameter(f"order {order} needs every extent >= {need} (2R+1), got {' '.join(map(str, shape))}",
                                 param_hint="'--shape'")
    return shape


def _given_shape(shape: tuple | None) -> tuple[int, int, int] | None:
    # typer hands an unset tuple option over as None or as (None, None, None), depending on version.
    if shape is None or all(n is None for n in shape):
        return None
    return tuple(int(n) for n in shape)  # type: ignore[return-value]


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"sizes must be comma-separated integers, got {text!r}", param_hint="'--sizes'")
    if not sizes or min(sizes) < 32:
        raise typer.BadParameter(f"sizes must be integers >= 32, got {text!r}", param_hint="'--sizes'")
    return sizes


# ------------------------------------------------------------------------------------------------
# formatting helpers
# ------------------------------------------------------------------------------------------------
def _fmt(x: float | None, spec: str = ".3f", missing: str = "–") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    return format(x, spec)


def _bytes(n: int | None) -> str:
    if not n:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _interpreter_active() -> bool:
    from tilecraft.ops.stencil import triton_on_cpu

    return triton_on_cpu()


def _rerun_with_interpreter(args: list[str]) -> None:
    """Run this command again in a child with TRITON_INTERPRET=1, which Triton reads when a kernel is
    decorated (at import), so it cannot be switched on inside this process. Exits with its code."""
    import tilecraft

    env = dict(os.environ, TRITON_INTERPRET="1")
    src = str(Path(tilecraft.__file__).resolve().parents[1])  # the child runs this same tilecraft
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        rc = subprocess.call([sys.executable, "-m", "tilecraft", *args], env=env)
    except KeyboardInterrupt:
        rc = 130
    raise typer.Exit(rc)


# ------------------------------------------------------------------------------------------------
# tilecraft info
# ------------------------------------------------------------------------------------------------
@app.command()
def info(
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure the ceilings again instead of using the cache.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """The device, the software versions, and the measured ceilings (GPU only) with datasheet peaks."""
    from tilecraft.hardware.ceilings import MATMUL_DTYPES, cache_path, ceilings
    from tilecraft.hardware.device import detect

    dev = detect()
    interpreter = _interpreter_active()
    ceil = None
    if dev.is_gpu:
        with _progress(_stderr()) as progress:
            steps = _Steps(progress, 1 + len(MATMUL_DTYPES))
            ceil = ceilings(dev, refresh=refresh, progress=steps)
            steps.finish()
    note = None if dev.is_gpu else "no GPU is visible to torch; no ceilings were measured"
    if as_json:
        doc = {"device": dev.as_dict(), "gpu": dev.is_gpu, "interpreter": interpreter, "ceilings": ceil,
               "ceilings_cache": str(cache_path(dev)) if dev.is_gpu else None, "datasheet": dev.datasheet,
               "note": note}
        print(json.dumps(doc, indent=1, default=str))
        return

    out = _stdout()
    units = {"hip": "CUs", "cuda": "SMs"}.get(dev.backend, "SMs/CUs")
    table = Table(title="Device", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    rows = [("name", dev.name), ("backend", dev.backend),
            (units, str(dev.multiprocessors) if dev.multiprocessors else "–"), ("L2", _bytes(dev.l2_bytes)),
            ("memory", _bytes(dev.memory_bytes)), ("capability", dev.capability or "–")]
    rows += [(k, v) for k, v in dev.versions.items()]
    rows.append(("Triton interpreter", "on (TRITON_INTERPRET=1)" if interpreter else "off"))
    for k, v in rows:
        table.add_row(k, v)
    out.print(table)
    if not dev.is_gpu:
        out.print("[bold yellow]No GPU is visible to torch: no ceilings were measured.[/] "
                  "Kernels run here only through the Triton interpreter (TRITON_INTERPRET=1), "
                  "which checks them for correctness and says nothing of their speed.")
        return
    sheet = dev.datasheet or {}
    ct = Table(title="Ceilings (measured on this device)", title_justify="left")
    for col in ("", "measured", "datasheet", "measured / datasheet"):
        ct.add_column(col, justify="right" if col else "left")
    copy, peak = ceil.get("copy_TBps"), sheet.get("bandwidth_TBps")
    ct.add_row("copy bandwidth (TB/s, read + write)", _fmt(copy, ".2f"), _fmt(peak, ".2f"),
               _fmt(copy / peak * 100, ".0f") + " %" if copy and peak else "–")
    for dt, rate in (ceil.get("matmul_TFLOPs") or {}).items():
        p = sheet.get(dt)
        ct.add_row(f"torch.matmul {dt} (TFLOP/s)", _fmt(rate, ".1f"), _fmt(p, ".1f"),
                   _fmt(rate / p * 100, ".0f") + " %" if rate and p else "–")
    out.print(ct)
    if not sheet:
        out.print(f"No datasheet peaks are known for {dev.name!r}.")
    out.print(f"Measured {ceil.get('date', '?')}; cached in {cache_path(dev)} (--refresh measures again).")


# ------------------------------------------------------------------------------------------------
# tilecraft stencil ladder
# ------------------------------------------------------------------------------------------------
_DTYPE_OPT = typer.Option(case_sensitive=False, help="Grid dtype.")
_ORDER_OPT = typer.Option(help="Accuracy order: even, 2..16 (stencil radius R = order/2).")


@stencil_app.command("ladder")
def stencil_ladder(
    shape: Annotated[Optional[tuple[int, int, int]], typer.Option(
        metavar="NZ NY NX", help="Grid shape; default 512 512 512 on a GPU, 18 22 40 in the interpreter.")] = None,
    dtype: Annotated[DType, _DTYPE_OPT] = DType.fp64,
    order: Annotated[int, _ORDER_OPT] = 2,
    variants: Annotated[Optional[str], typer.Option(
        help="Comma-separated variants (default: the whole ladder, auto and reference).")] = None,
    out: Annotated[Optional[Path], typer.Option(
        help="JSON file to write; default benchmarks/results/ on a GPU, out/ in the interpreter.")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="GPU: time the variants this many times in turn; each "
                                        "figure is the median of its rounds.")] = DEFAULT_ROUNDS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document instead of the table.")] = False,
) -> None:
    """The seeds' optimisation ladder side by side: every variant checked, then timed (GPU)."""
    from tilecraft.ops.stencil import LADDER

    order = _check_order(order)
    names = _parse_variants(variants, (*LADDER, "auto", "reference"))
    check_out(out)
    given = _given_shape(shape)
    if given is not None:
        _check_shape(given, order)
    dtype_name = dtype.value

    if _interpreter_active():
        shape3 = given or INTERPRETER_DEFAULT_SHAPE
        _check_shape(shape3, order)
        _ladder_interpreter(shape3, dtype_name, order, names, out, as_json)
        return

    from tilecraft.hardware.device import detect

    dev = detect()
    if not dev.is_gpu:
        args = ["stencil", "ladder", "--dtype", dtype_name, "--order", str(order)]
        args += ["--shape", *map(str, given)] if given else []
        args += ["--variants", ",".join(names)] if variants is not None else []
        args += ["--out", str(out)] if out is not None else []
        args += ["--json"] if as_json else []
        if not as_json:
            _stderr().print("No GPU is visible to torch: running the kernels in the Triton interpreter "
                            "(TRITON_INTERPRET=1) for correctness only.")
        _rerun_with_interpreter(args)
    shape3 = given or _gpu_default_shape(dev)
    _ladder_gpu(dev, shape3, dtype_name, order, names, out, as_json, rounds)


def _gpu_default_shape(dev) -> tuple[int, int, int]:
    # 512**3 fp64 is 1 GiB a grid; the rotating input sets and the float64 check take about 10 of them.
    if dev.memory_bytes and dev.memory_bytes < 16 * 2**30:
        return (256, 256, 256)
    return GPU_DEFAULT_SHAPE


def _ladder_gpu(dev, shape, dtype, order, names, out, as_json, rounds: int) -> None:
    from tilecraft.bench.harness import write_results
    from tilecraft.bench.stencil import ladder

    err = _stderr()
    with _progress(err) as progress:
        steps = _Steps(progress, rounds * len(names) + 1)
        records = ladder(shape, dtype, order, variants=names, info=dev, progress=steps, rounds=rounds)
        steps.finish()
    meta = {"mode": "gpu", "shape": list(shape), "dtype": dtype, "order": order, "variants": names, "rounds": rounds}
    path = write_results(records, "stencil-ladder", out, info=dev, meta=meta)
    if as_json:
        print(path.read_text())
        err.print(f"wrote {path}")
    else:
        _print_gpu_ladder(records, dev, shape, dtype, order)
        _stdout().print(f"wrote {path}")
    if not all(r.extra.get("ok") for r in records):
        raise typer.Exit(1)


def _print_gpu_ladder(records, dev, shape, dtype, order) -> None:
    copy = records[0].ceiling_value if records else None
    nz, ny, nx = shape
    table = Table(title=f"Laplacian ladder: {dtype}, order {order}, {nz}×{ny}×{nx}, {dev.name}",
                  caption=f"FOM = least traffic / median time (tilecraft.analysis.fom); copy bandwidth measured in this run: "
                          f"{_fmt(copy, '.2f')} TB/s", title_justify="left")
    for col, just in (("variant", "left"), ("median ms", "right"), ("FOM TB/s", "right"), ("% copy", "right"),
                      ("GPts/s", "right"), ("× baseline", "right"), ("× torch", "right"), ("regs", "right"),
                      ("spills", "right"), ("rel. error", "right")):
        table.add_column(col, justify=just)
    failures = []
    for r in records:
        x = r.extra
        res = x.get("resources") or []
        regs = max((d.get("registers") or 0 for d in res), default=None)
        spills = max((d.get("spills") or 0 for d in res), default=None)
        if not x.get("ok"):
            failures.append((r.case["variant"], x.get("message", "")))
            table.add_row(r.case["variant"], "[red]FAILED[/]", "", "", "", "", "", "", "", _fmt(x.get("rel_error"), ".1e"))
            continue
        table.add_row(r.case["variant"], _fmt(x.get("time_ms"), ".3f"), _fmt(r.ours, ".3f"),
                      _fmt(r.ratio * 100 if r.ratio else None, ".1f"), _fmt(x.get("gpts"), ".1f"),
                      _fmt(x.get("speedup_vs_baseline"), ".2f"), _fmt(x.get("ratio_to_peer"), ".2f"),
                      _fmt(regs, "d"), _fmt(spills, "d"), _fmt(x.get("rel_error"), ".1e"))
    out = _stdout()
    out.print(table)
    for name, msg in failures:
        out.print(f"[red]{name}[/]: {msg}")
    for r in records:
        if r.case["variant"] == "auto" and r.extra.get("config_source"):
            out.print(_auto_line(r))


_AUTO_SOURCES = {"tuned": "tuned on this GPU in this run", "cache": "tuned earlier, from the tuning cache",
                 "heuristic": "the heuristic auto_config"}


def _auto_line(record) -> str:
    """Which configuration ``auto`` ran and where it came from (tuned now, the cache, the heuristic)."""
    from tilecraft.ops.stencil import StencilConfig

    x = record.extra
    line = (f"auto ran {StencilConfig.from_dict(record.case['config']).short()} "
            f"({_AUTO_SOURCES.get(x['config_source'], x['config_source'])})")
    heuristic = x.get("heuristic_config")
    if heuristic and heuristic != record.case["config"]:
        line += f"; the heuristic: {StencilConfig.from_dict(heuristic).short()}"
    return line


def _ladder_interpreter(shape, dtype, order, names, out, as_json) -> None:
    """Each variant once through the Triton interpreter on CPU tensors, checked against the float64
    reference (the same check the GPU suite makes before timing); no timing loop."""
    from tilecraft.bench.harness import results_dir, write_results
    from tilecraft.bench.stencil import ladder_interpreter
    from tilecraft.hardware.device import detect

    err = _stderr()
    if math.prod(shape) > INTERPRETER_LARGE_POINTS:
        err.print(f"[yellow]warning:[/] {math.prod(shape):,} points in the Triton interpreter will take a long "
                  f"time (about a millisecond per point for the baseline); try --shape "
                  f"{' '.join(map(str, INTERPRETER_DEFAULT_SHAPE))}")
    dev = detect()
    with _progress(err) as progress:
        steps = _Steps(progress, len(names))
        records = ladder_interpreter(shape, dtype, order, variants=names, progress=steps)
        steps.finish()
    if out is None:
        when = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        # Not benchmarks/results/: that folder holds GPU measurements only.
        out = results_dir().parents[1] / "out" / f"stencil-ladder-interpreter-{when}.json"
    meta = {"mode": "triton-interpreter", "note": INTERPRETER_LABEL, "shape": list(shape), "dtype": dtype,
            "order": order, "variants": names}
    path = write_results(records, "stencil-ladder-interpreter", out, info=dev, meta=meta)
    if as_json:
        print(path.read_text())
        err.print(f"wrote {path}")
    else:
        nz, ny, nx = shape
        table = Table(title=f"Laplacian ladder: {dtype}, order {order}, {nz}×{ny}×{nx}\n[bold yellow]{INTERPRETER_LABEL}[/]",
                      title_justify="left", caption="rel. error = ||ours - ref|| / ||ref|| against the float64 "
                      "reference; boundary checked unwritten. interp. s: wall time in the interpreter, not a "
                      "performance figure. sm90 columns: the kernel cross-compiled for a "
                      "Hopper GPU (registers/thread, ptxas spill bytes, resident warps per SM), not measured")
        for col, just in (("variant", "left"), ("check", "left"), ("rel. error", "right"),
                          ("tolerance", "right"), ("interp. s", "right"),
                          ("sm90 regs", "right"), ("sm90 spills", "right"), ("sm90 warps/SM", "right")):
            table.add_column(col, justify=just)
        for r in records:
            x = r.extra
            check = "[green]ok[/]" if x["ok"] else f"[red]FAILED[/] {x['message']}"
            sm90 = x["sm90"][0] if x["sm90"] else {}
            table.add_row(r.case["variant"], check, _fmt(r.ours, ".1e"), f"{x['tolerance']:.0e}",
                          _fmt(x["interpreter_wall_s"], ".2f"), str(sm90.get("registers", "–")),
                          str(sm90.get("spills", "–")), _fmt(sm90.get("occupancy"), ".0f"))
        console = _stdout()
        console.print(table)
        console.print(f"wrote {path} (records marked measured=false)")
    if not all(r.extra["ok"] for r in records):
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# tilecraft stencil sweep
# ------------------------------------------------------------------------------------------------
@stencil_app.command("sweep")
def stencil_sweep(
    sizes: Annotated[str, typer.Option(help="Comma-separated plane sizes n (grids of nz × n × n).")] = SWEEP_DEFAULT_SIZES,
    dtype: Annotated[DType, _DTYPE_OPT] = DType.fp64,
    order: Annotated[int, _ORDER_OPT] = 2,
    variants: Annotated[str, typer.Option(help="Comma-separated variants.")] = "baseline,auto",
    png: Annotated[Optional[Path], typer.Option(help="Plot to write; default: the JSON path with .png.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="JSON file to write; default under benchmarks/results/.")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="GPU: time the variants this many times in turn; each "
                                        "figure is the median of its rounds.")] = DEFAULT_ROUNDS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document instead of the table.")] = False,
) -> None:
    """The cache-cliff study: FOM against plane size nx·ny for each variant (GPU only)."""
    order = _check_order(order)
    size_list = _parse_sizes(sizes)
    check_out(out)
    check_out(png, "--png")
    names = _parse_variants(variants, ())
    if min(size_list) < order + 1:
        raise typer.BadParameter(f"order {order} needs sizes >= {order + 1}", param_hint="'--sizes'")
    from tilecraft.hardware.device import detect

    dev = detect()
    if not dev.is_gpu or _interpreter_active():
        why = "TRITON_INTERPRET=1 is set" if dev.is_gpu else "no GPU is visible to torch"
        _stderr().print(f"[bold red]The sweep needs a GPU[/] ({why}): it measures bandwidth, which the Triton "
                        "interpreter cannot. For a correctness run on this machine: tilecraft stencil ladder")
        raise typer.Exit(2)

    from tilecraft.bench.harness import write_results
    from tilecraft.bench.stencil import sweep

    err = _stderr()
    with _progress(err) as progress:
        steps = _Steps(progress, 1 + len(size_list) * len(names) * rounds)
        records = sweep(size_list, dtype.value, order, variants=names, info=dev, progress=steps, rounds=rounds)
        steps.finish()
    meta = {"mode": "gpu", "sizes": size_list, "dtype": dtype.value, "order": order, "variants": names,
            "rounds": rounds}
    path = write_results(records, "stencil-sweep", out, info=dev, meta=meta)
    png_path = png or path.with_suffix(".png")
    _plot_sweep(records, png_path, f"{dev.name}: Laplacian {dtype.value}, order {order}")
    if as_json:
        print(path.read_text())
        err.print(f"wrote {path} and {png_path}")
        return
    copy = records[0].ceiling_value if records else None
    table = Table(title=f"FOM against plane size: {dtype.value}, order {order}, {dev.name}", title_justify="left",
                  caption=f"% of the copy bandwidth measured in this run ({_fmt(copy, '.2f')} TB/s)")
    table.add_column("shape (nz×ny×nx)")
    table.add_column("plane nx·ny", justify="right")
    for v in names:
        table.add_column(f"{v} TB/s", justify="right")
        table.add_column(f"{v} % copy", justify="right")
    by_shape: dict[tuple, dict] = {}
    for r in records:
        by_shape.setdefault(tuple(r.case["shape"]), {})[r.case["variant"]] = r
    for shape, row in by_shape.items():
        cells = []
        for v in names:
            r = row.get(v)
            ok = r is not None and r.extra.get("ok")
            cells += [_fmt(r.ours, ".3f") if ok else "[red]FAILED[/]", _fmt(r.ratio * 100, ".1f") if ok and r.ratio else "–"]
        table.add_row("×".join(map(str, shape)), f"{shape[1] * shape[2]:,}", *cells)
    console = _stdout()
    console.print(table)
    console.print(f"wrote {path} and {png_path}")


def _plot_sweep(records, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    copy = records[0].ceiling_value if records else None
    lines: dict[str, list[tuple[int, float]]] = {}
    for r in records:
        if r.extra.get("ok") and r.ratio:
            lines.setdefault(r.case["variant"], []).append((r.case["plane"], r.ratio * 100))
    for v, pts in lines.items():
        pts.sort()
        ax.plot([p for p, _ in pts], [y for _, y in pts], marker="o", label=v)
    ax.axhline(100, color="k", linestyle="--", linewidth=1,
               label=f"copy ceiling ({copy:.2f} TB/s, measured)" if copy else "copy ceiling")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("plane size nx·ny (points)")
    ax.set_ylabel("FOM, % of copy bandwidth")
    top = max((y for pts in lines.values() for _, y in pts), default=100)
    ax.set_ylim(0, max(110, top * 1.08))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:  # pragma: no cover - the console script calls ``app`` directly
    app(prog_name="tilecraft")
