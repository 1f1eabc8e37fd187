"""``tilecraft gemm``: the GEMM benchmark against torch, and the configuration matmul would run.

    tilecraft gemm bench [--suite square|llm|odd|smallm|smalln|prefill|train|all] [--dtype bf16,fp16,...] [--layouts NN,NT,TN,TT]
                         [--out PATH] [--json]
    tilecraft gemm config M N K [--dtype bf16] [--layout NN] [--arch sm90] [--sms 132]

On a GPU, ``bench`` checks every case against the float64 reference, then times ours and the torch
peer (``torch.matmul``, ``torch._int_mm``, ``torch._scaled_mm``) in the same run: TFLOP/s, ratio,
% of the datasheet peak, and for M <= 64 the bandwidth as a fraction of the copy bandwidth measured
in the same run. With no GPU it says so, runs each dtype and layout once through Triton's
interpreter on a tiny shape (a labelled correctness check, no speeds) and exits 0 if all pass.
Errors are one line on stderr with exit code 2.
"""
from __future__ import annotations

import json
import math
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
from tilecraft._cli import fail as _err

gemm_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                       help="Matrix-core GEMM: benchmark against torch, show the chosen configuration.")

HELP = "Matrix-core GEMM: tilecraft.matmul against torch (cuBLAS), per dtype, shape and transpose."
BENCH_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp32-accurate", "fp64", "int8", "fp8")
DEFAULT_DTYPES = "bf16,fp16"




def _list(value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        _err(f"--{what} is empty")
    bad = [v for v in items if v not in allowed]
    if bad:
        _err(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed)}")
    return items


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@gemm_app.command("bench")
def bench_cmd(
    suite: Annotated[str, typer.Option(help="square, llm, odd, smallm, smalln (N = 1..64: W x), prefill (M = 256..2048 rows), train (weight-gradient shapes, short K) or all.")] = "square",
    dtype: Annotated[str, typer.Option(help=f"Comma list of {', '.join(BENCH_DTYPES)}.")] = DEFAULT_DTYPES,
    layouts: Annotated[str, typer.Option(help="Comma list of NN, NT, TN, TT (int8/fp8 always NT).")] = "NN,NT,TN,TT",
    out: Annotated[Path | None, typer.Option(help="JSON file; default under benchmarks/results/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document instead of the table.")] = False,
    budget: Annotated[float, typer.Option(help="Seconds of timing per case and side.")] = 0.5,
    tune: Annotated[bool, typer.Option("--tune/--no-tune", help="Tune each new shape bucket first (slow: "
                                       "a dozen compiles per bucket); default: the measured heuristics.")] = False,
    rounds: Annotated[int, typer.Option(help="Time ours and the peer this many times per case, in alternating "
                                        "order; the medians are reported, each round's ratio kept in the JSON.")] = 1,
    settle: Annotated[float, typer.Option(help="Seconds each side runs untimed before its timing, so it is timed "
                                          "in its own clock state at the card's power cap, not in the transient "
                                          "the other left (0: off).")] = 0.3,  # bench.harness.SETTLE_S
) -> None:
    """Ours against torch, per dtype, shape and transpose (checked against float64 first)."""
    os.environ["TILECRAFT_TUNE"] = "1" if tune else "0"  # --tune wins over an exported TILECRAFT_TUNE=0
    from tilecraft.bench import INTERPRETER_LABEL
    from tilecraft.bench import gemm as bench

    if suite not in bench.SUITES:
        _err(f"unknown suite {suite!r}; choose from {', '.join(bench.SUITES)}")
    check_out(out)
    dtypes = _list(dtype, BENCH_DTYPES, "dtype")
    lays = _list(layouts, bench.LAYOUTS, "layouts")
    if budget <= 0:
        _err(f"--budget must be > 0, got {budget}")
    if rounds < 1:
        _err(f"--rounds must be >= 1, got {rounds}")
    if not (settle >= 0 and math.isfinite(settle)):
        _err(f"--settle must be >= 0 seconds, got {settle}")
    console, err = Console(highlight=False), Console(stderr=True, highlight=False)
    if not _gpu():
        if os.environ.get("TRITON_INTERPRET") != "1":
            err.print("gemm bench needs a GPU to measure speed; none is visible to torch. Running a "
                      "correctness check of every dtype and layout in Triton's interpreter instead.")
            args = ["gemm", "bench", "--suite", suite, "--dtype", dtype, "--layouts", layouts]
            if out:
                args += ["--out", str(out)]
            if as_json:
                args.append("--json")
            from tilecraft.cli import _rerun_with_interpreter
            _rerun_with_interpreter(args)
        records = bench.interpreter_check(dtypes, say=lambda m: err.print(m), layouts=lays)
        table = Table(title=INTERPRETER_LABEL)
        for col in ("dtype", "layout", "shape", "relative error", "ok"):
            table.add_column(col)
        for r in records:
            c = r.case
            table.add_row(c["dtype"], c["layout"], f"{c['m']}x{c['n']}x{c['k']}", f"{r.ours:.1e}", str(r.extra["ok"]))
        if out:
            from tilecraft.bench.harness import write_results
            write_results(records, "gemm-interpreter", out)
        if as_json:
            typer.echo(json.dumps([r.as_dict() for r in records], default=str))
        else:
            console.print(table)
        raise typer.Exit(0 if all(r.extra["ok"] for r in records) else 1)
    _bench_gpu(suite, dtypes, lays, out, as_json, budget, console, rounds, settle)


def _bench_gpu(suite, dtypes, lays, out, as_json, budget, console, rounds: int = 1, settle: float = 0.0) -> None:
    from tilecraft.bench import gemm as bench
    from tilecraft.bench.harness import write_results
    from tilecraft.hardware.ceilings import measure_copy_bandwidth
    from tilecraft.hardware.device import detect

    info = detect()
    skipped: list = []
    cases = bench.cases_for(suite, dtypes, lays, skipped)
    for case, why in skipped:
        console.print(f"[yellow]skipped {case.name}: {why}[/]")
    records = []
    with Progress(SpinnerColumn(), TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("copy bandwidth", total=len(cases) + 1)
        copy = measure_copy_bandwidth()
        progress.advance(task)
        for case in cases:
            progress.update(task, description=case.name)
            records.append(bench.run_case(case, info, copy_TBps=copy, budget_s=budget, rounds=rounds, settle_s=settle))
            progress.advance(task)
    path = write_results(records, f"gemm-{suite}", out, info, meta={"copy_TBps": copy, "rounds": rounds,
                                                                     "settle_s": settle})
    if as_json:
        typer.echo(path.read_text())
    else:
        console.print(results_table(records, f"{info.name}: tilecraft.matmul vs torch (copy {copy:.2f} TB/s)"))
        console.print(f"wrote {path}")
    if any(r.extra.get("failed") for r in records):
        raise typer.Exit(1)


def results_table(records, title: str) -> Table:
    table = Table(title=title)
    for col in ("dtype", "layout", "M x N x K", "kernel", "ours TFLOP/s", "peer", "peer TFLOP/s", "x peer",
                "% peak", "% copy", "rel err"):
        table.add_column(col, justify="right" if col not in ("dtype", "layout", "kernel", "peer") else "left")
    for r in records:
        c, e = r.case, r.extra
        if e.get("failed"):
            table.add_row(c["dtype"], c["layout"], f"{c['m']}x{c['n']}x{c['k']}", e.get("kernel", ""), "FAILED",
                          r.peer or "", "", "", "", "", f"{e['rel_err']:.1e}")
            continue
        frac_peak = e.get("fraction_of_peak")
        frac_copy = e.get("fraction_of_copy") if min(c["m"], c["n"]) <= 64 else None  # memory-bound: small M or N
        table.add_row(c["dtype"], c["layout"], f"{c['m']}x{c['n']}x{c['k']}", e.get("kernel", ""), f"{r.ours:.1f}",
                      r.peer or "", f"{r.peer_value:.1f}" if r.peer_value else "", f"{r.ratio:.2f}" if r.ratio else "",
                      f"{frac_peak:.0%}" if frac_peak else "", f"{frac_copy:.0%}" if frac_copy else "",
                      f"{e['rel_err']:.1e}")
    return table


@gemm_app.command("config")
def config_cmd(
    m: Annotated[int, typer.Argument(help="Rows of A and of the result.")],
    n: Annotated[int, typer.Argument(help="Columns of B and of the result.")],
    k: Annotated[int, typer.Argument(help="The inner dimension.")],
    dtype: Annotated[str, typer.Option(help=f"One of {', '.join(BENCH_DTYPES)}.")] = "bf16",
    layout: Annotated[str, typer.Option(help="NN, NT, TN or TT.")] = "NN",
    arch: Annotated[str, typer.Option(help="sm90, sm80, cdna or interpreter (default: this machine's).")] = "",
    sms: Annotated[int, typer.Option(help="SMs/CUs the persistent grids and wave rules plan for (default: this "
                                          "machine's GPU when --arch is not given, else 132).")] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The heuristic configuration for a problem (what matmul runs untuned), and its config space."""
    from tilecraft.tuning.gemm import config_space, heuristic, shared_bytes

    _list(dtype, BENCH_DTYPES, "dtype")
    _list(layout, ("NN", "NT", "TN", "TT"), "layout")
    if min(m, n, k) < 1:
        _err(f"M, N and K must be >= 1, got {m} {n} {k}")
    if arch and arch not in ("sm90", "sm80", "cdna", "interpreter"):
        _err(f"unknown arch {arch!r}; choose from sm90, sm80, cdna, interpreter")
    if sms < 0:
        _err(f"--sms must be >= 1 (or 0 for the default), got {sms}")
    if not arch:
        import torch
        arch = "interpreter"
        if torch.cuda.is_available():
            arch = "cdna" if torch.version.hip else ("sm90" if torch.cuda.get_device_capability()[0] == 9 else "sm80")
            sms = sms or torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    sms = sms or 132
    a, b, kw, p = _problem(m, n, k, dtype, layout, arch, sms)
    cfg = heuristic(p)
    space = config_space(p)
    pdl, grid = _pdl_line(a, b, kw, cfg, sms) if arch == "sm90" else (None, None)
    if as_json:
        typer.echo(json.dumps({"heuristic": cfg.as_dict(), "space": [c.as_dict() for c in space], "pdl": pdl,
                               "grid": grid, "arch": arch, "sms": sms}))
        return
    Console(highlight=False).print(
        f"{dtype} {layout} {m}x{n}x{k} on {arch} ({sms} SMs): {cfg.short()} "
        f"({shared_bytes(cfg, p.itemsize) // 1024} KB shared); {len(space)} configs to tune over")
    if cfg.cluster_m > 1:
        Console(highlight=False).print(f"clusters of {cfg.cluster_m} CTAs on adjacent tile rows, sharing each B tile by "
                                       "TMA multicast (TILECRAFT_GEMM_CLUSTER=0 turns them off)")
    if grid is not None:
        prog, units = grid["programs"], grid["units"]
        even = " (even rounds: one program per SM would leave the last round part empty)" if prog < min(sms, units) else ""
        Console(highlight=False).print(f"persistent grid: {prog} programs over {units} work units, "
                                       f"{math.ceil(units / prog)} rounds{even}")
    if pdl is not None:
        extra = (f": the next call may launch {pdl['trigger_blocks_before_end']} K blocks before this one's end "
                 f"and prefetches its first {pdl['prefetch_blocks']} into L2" if pdl.get("mode") == "mid" else "")
        Console(highlight=False).print(f"programmatic dependent launch on sm90: {pdl.get('mode', pdl.get('error'))}"
                                       + extra + " (TILECRAFT_PDL overrides)")


def _problem(m: int, n: int, k: int, dtype: str, layout: str, arch: str, sms: int):
    """(a, b, matmul keyword arguments, problem): meta operands of this shape, dtype and layout (16-byte
    aligned, rows packed: nothing is allocated) and what ``matmul`` decides the configuration from on a
    GPU of family ``arch`` with ``sms`` SMs (``ops.gemm.problem_of``), so the command shows the kernel
    the call would take (the Gluon kernel on sm90 included)."""
    from tilecraft.bench import gemm as bench
    from tilecraft.ops import gemm as ops

    a, b = bench.make_operands(m, n, k, dtype, layout, "meta")
    kw = bench.call_kwargs(dtype, m, n, "meta")
    return a, b, kw, ops.problem_of(a, b, ops.validate(a, b, **kw), arch=arch, sms=sms)


def _pdl_line(a, b, kw: dict, cfg, sms: int) -> tuple[dict, dict | None]:
    """``ops.gemm.pdl_summary`` of the heuristic's plan on ``sms`` SMs for :func:`_problem`'s meta operands
    (as ``inspect.gemm_jobs``), and the persistent grid ({"programs", "units"}) where the kernel has one."""
    from tilecraft.ops import gemm as ops

    try:
        spec, chosen, plan = ops.target_plan(a, b, "sm90", sms=sms, cfg=cfg, **kw)
    except (ValueError, TypeError, KeyError, RuntimeError) as exc:  # reported, not hidden
        return {"error": f"not determined: {type(exc).__name__}: {exc}"[:200]}, None
    grid = None
    if chosen.kernel in ("tma", "gluon") and chosen.cluster_m == 1:
        swap = plan[-1].constexprs.get("TRANS_OUT", False)  # C^T's tiles: the kernel's M is C's N
        rows, cols = (spec.n, spec.m) if swap else (spec.m, spec.n)
        units = (math.ceil(rows / chosen.block_m) * math.ceil(cols / chosen.tile_n) * max(1, chosen.split_k)
                 * (spec.batch if chosen.kernel == "tma" else 1))
        grid = {"programs": plan[-1].grid[0], "units": units}
    return ops.pdl_summary(spec, chosen, plan, sms), grid


def register(app: typer.Typer) -> None:
    """Attach ``gemm`` to the main ``tilecraft`` app."""
    app.add_typer(gemm_app, name="gemm", help=HELP)
