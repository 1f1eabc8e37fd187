"""``tilecraft inspect``: cross-target register / occupancy / instruction reports, no GPU needed.

    tilecraft inspect stencil [--dtype fp64] [--order 2] [--shape NZ NY NX] [--variants a,b]
                              [--targets sm90,sm80,gfx942,gfx90a] [--format text|markdown|json]
    tilecraft inspect gemm [--dtype bf16] [--shape M N K] [--layout NN|NT|TN|TT]
                              [--targets ...] [--format ...]
    tilecraft inspect attention [--head-dim 128] [--causal] [--seqlen 4096] [--batch 4]
                              [--heads 16] [--kv-heads 16] [--dtype bf16] [--targets ...] [--format ...]
    tilecraft inspect kernel FILE_OR_MODULE FUNCTION --signature 'x_ptr=*fp32:16,n=i32'
                              [--constexpr BLOCK=128 ...] [--num-warps 4] [--num-stages 3]
                              [--maxnreg N] [--targets ...] [--format ...]

:func:`register` adds the command group to a typer app. Exit codes: 0 all compiled, 1 some
(kernel, target) compile failed (its row shows the error, the other rows are printed), 2 bad input
(a one-line ``error:`` on stderr, nothing compiled).
"""
from __future__ import annotations

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

from tilecraft._cli import fail as _fail

__all__ = ["inspect_app", "register"]

FORMATS = ("text", "markdown", "json")

inspect_app = typer.Typer(
    no_args_is_help=True, add_completion=False,
    help="Compile kernels for sm90/sm80/gfx942/gfx90a without the GPU: registers, spills, shared "
         "memory, occupancy and an instruction census per target.")


def register(app: typer.Typer) -> None:
    """Add the ``inspect`` command group (``stencil``, ``gemm``, ``attention``, ``kernel``) to ``app``."""
    app.add_typer(inspect_app, name="inspect")




def _check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        _fail(f"unknown format {fmt!r}; choose from {','.join(FORMATS)}")
    return fmt


def _run_with_progress(jobs, description: str):
    from tilecraft.analysis.inspect import run_compiles

    err = Console(stderr=True, highlight=False)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task(description, total=len(jobs))

        def done(row) -> None:
            progress.update(task, advance=1, description=f"{row.target} {row.label}"[:60])

        return run_compiles(jobs, progress=done)


def _emit(rows, fmt: str, title: str, **meta) -> None:
    from rich.markup import escape

    from tilecraft.analysis.inspect import (
        error_summary,
        render_json,
        render_markdown,
        render_text,
    )

    out = Console(highlight=False, soft_wrap=fmt != "text")
    if fmt == "text" and not out.is_terminal:  # piped: do not squeeze the table into 80 columns
        out = Console(highlight=False, width=240)
    if fmt == "json":
        out.print(render_json(rows, title=title, **meta), markup=False)
    elif fmt == "markdown":
        out.print(render_markdown(rows, title), markup=False)
    else:
        out.print(render_text(rows, title))
        failed = [r for r in rows if r.error is not None]
        for r in failed:
            out.print(f"[red]{r.target} {r.label}:[/] {escape(error_summary(r.error, 400))}", highlight=False)
    if any(r.error is not None for r in rows):
        raise typer.Exit(1)


@inspect_app.command("stencil")
def inspect_stencil_cmd(
    dtype: Annotated[str, typer.Option(help="fp64 or fp32")] = "fp64",
    order: Annotated[int, typer.Option(help="finite-difference order: even, 2 to 16")] = 2,
    shape: Annotated[tuple[int, int, int] | None, typer.Option(
        metavar="NZ NY NX", help="grid the kernels are compiled for [default: 512 512 512]")] = None,
    variants: Annotated[str | None, typer.Option(
        help="comma-separated variants [default: the ladder and auto]")] = None,
    targets: Annotated[str, typer.Option(help="comma-separated targets")] = "sm90,sm80,gfx942,gfx90a",
    fmt: Annotated[str, typer.Option("--format", help="text, markdown or json")] = "text",
) -> None:
    """The Laplacian variants compiled for each target, side by side."""
    from tilecraft.analysis.inspect import parse_targets, stencil_jobs
    from tilecraft.ops.stencil import LADDER, VARIANTS

    fmt = _check_format(fmt)
    try:
        names = parse_targets(targets)
    except ValueError as exc:
        _fail(str(exc))
    if dtype not in ("fp64", "fp32"):
        _fail(f"unknown dtype {dtype!r}; choose fp64 or fp32")
    if order % 2 or not 2 <= order <= 16:  # the stencil's orders (ops.stencil.MAX_ORDER)
        _fail(f"order must be even, 2 to 16, got {order}")
    grid = tuple(shape) if shape is not None else (512, 512, 512)
    if any(n <= order for n in grid):
        _fail(f"every extent of --shape must exceed the order ({order}), got {' '.join(map(str, grid))}")
    if variants is None:
        chosen = [*LADDER, "auto"]
    else:
        chosen = list(dict.fromkeys(v.strip() for v in variants.split(",") if v.strip()))
        unknown = [v for v in chosen if v not in VARIANTS]
        if unknown or not chosen:
            _fail(f"unknown variant(s) {', '.join(unknown) or repr(variants)}; choose from {','.join(VARIANTS)}")
    try:
        jobs = stencil_jobs(chosen, dtype, order, grid, names)
    except ValueError as exc:
        _fail(str(exc))
    title = f"Laplacian order {order}, {dtype}, grid {grid[0]}x{grid[1]}x{grid[2]}"
    rows = _run_with_progress(jobs, "compiling")
    _emit(rows, fmt, title, dtype=dtype, order=order, shape=list(grid))


def _positive_ints(values: tuple[str, ...], option: str) -> tuple[int, ...]:
    try:
        ints = tuple(int(v) for v in values)
    except ValueError:
        _fail(f"{option} takes integers, got {' '.join(values)}")
    if any(v <= 0 for v in ints):
        _fail(f"{option} takes positive integers, got {' '.join(values)}")
    return ints


@inspect_app.command("gemm")
def inspect_gemm_cmd(
    dtype: Annotated[str, typer.Option(
        help="bf16, fp16, tf32, fp32 (FMA), fp32-accurate (3xTF32; bf16x6 on AMD), fp64, int8, fp8, fp8_e5m2")] = "bf16",
    shape: Annotated[tuple[str, str, str] | None, typer.Option(
        metavar="M N K", help="problem size [default: 8192 8192 8192]")] = None,
    layout: Annotated[str, typer.Option(
        help="BLAS transposes: NN, NT (B given as an (N, K) row-major buffer), TN, TT")] = "NN",
    targets: Annotated[str, typer.Option(help="comma-separated targets")] = "sm90,sm80,gfx942,gfx90a",
    fmt: Annotated[str, typer.Option("--format", help="text, markdown or json")] = "text",
) -> None:
    """The GEMM tilecraft.matmul would run on each target: the configuration it chooses there
    (no tuning cache) and the kernel(s) its launch compiles."""
    from tilecraft.analysis.inspect import gemm_jobs, parse_targets

    fmt = _check_format(fmt)
    m, n, k = _positive_ints(shape, "--shape") if shape is not None else (8192, 8192, 8192)
    try:
        names = parse_targets(targets)
        jobs = gemm_jobs(dtype, (m, n, k), layout, names)
    except (ValueError, TypeError) as exc:
        _fail(str(exc).strip().splitlines()[0])
    rows = _run_with_progress(jobs, "compiling")
    _emit(rows, fmt, f"GEMM {dtype} {m}x{n}x{k} {layout}", dtype=dtype, shape=[m, n, k], layout=layout)


@inspect_app.command("attention")
def inspect_attention_cmd(
    head_dim: Annotated[int, typer.Option(help="head dimension (1..256)")] = 128,
    causal: Annotated[bool, typer.Option(help="causal mask")] = False,
    seqlen: Annotated[int, typer.Option(help="query and key length")] = 4096,
    batch: Annotated[int, typer.Option(help="batch")] = 4,
    heads: Annotated[int, typer.Option(help="query heads")] = 16,
    kv_heads: Annotated[int | None, typer.Option(help="key/value heads (divides --heads) [default: --heads]")] = None,
    dtype: Annotated[str, typer.Option(help="bf16 or fp16")] = "bf16",
    targets: Annotated[str, typer.Option(help="comma-separated targets")] = "sm90,sm80,gfx942,gfx90a",
    fmt: Annotated[str, typer.Option("--format", help="text, markdown or json")] = "text",
) -> None:
    """The attention forward and backward kernels tilecraft.attention would run on each target
    (contiguous "bhsd" tensors, deterministic backward), with the tiles it chooses there."""
    from tilecraft.analysis.inspect import attention_jobs, parse_targets

    fmt = _check_format(fmt)
    kv = heads if kv_heads is None else kv_heads
    try:
        names = parse_targets(targets)
        jobs = attention_jobs(batch, heads, kv, seqlen, head_dim, causal, dtype, names)
    except (ValueError, TypeError) as exc:
        _fail(str(exc).strip().splitlines()[0])
    gqa = f"/{kv}" if kv != heads else ""
    title = f"attention {dtype} B{batch} H{heads}{gqa} S{seqlen} D{head_dim}" + (" causal" if causal else "")
    rows = _run_with_progress(jobs, "compiling")
    _emit(rows, fmt, title, dtype=dtype, batch=batch, heads=heads, kv_heads=kv, seqlen=seqlen, head_dim=head_dim,
          causal=causal)


@inspect_app.command("kernel")
def inspect_kernel_cmd(
    module: Annotated[str, typer.Argument(metavar="FILE_OR_MODULE",
                                          help="a .py file or a dotted module name")],
    function: Annotated[str, typer.Argument(metavar="FUNCTION", help="the @triton.jit function")],
    signature: Annotated[str, typer.Option(
        help="argument types, e.g. 'x_ptr=*fp32:16,y_ptr=*fp32:16,n=i32' (':16' = 16-byte aligned / "
             "multiple of 16, as a launch on torch tensors specialises)")],
    constexpr: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE for a tl.constexpr argument (repeatable)")] = None,
    num_warps: Annotated[int, typer.Option(help="warps (waves) per program")] = 4,
    num_stages: Annotated[int, typer.Option(help="software-pipelining stages")] = 3,
    maxnreg: Annotated[int | None, typer.Option(help="register budget per thread (CUDA only)")] = None,
    targets: Annotated[str, typer.Option(help="comma-separated targets")] = "sm90,sm80,gfx942,gfx90a",
    fmt: Annotated[str, typer.Option("--format", help="text, markdown or json")] = "text",
) -> None:
    """A user's own @triton.jit function compiled for each target."""
    from tilecraft.analysis.inspect import (
        function_jobs,
        parse_constexprs,
        parse_signature,
        parse_targets,
    )

    fmt = _check_format(fmt)
    try:
        names = parse_targets(targets)
        sig = parse_signature(signature)
        consts = parse_constexprs(constexpr or [])
    except ValueError as exc:
        _fail(str(exc))
    if num_warps <= 0 or num_warps & (num_warps - 1):
        _fail(f"--num-warps must be a power of two, got {num_warps}")
    if num_stages <= 0:
        _fail(f"--num-stages must be positive, got {num_stages}")
    try:
        jobs = function_jobs(module, function, sig, consts, names, num_warps=num_warps,
                             num_stages=num_stages, maxnreg=maxnreg)
    except (ValueError, TypeError) as exc:
        _fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    rows = _run_with_progress(jobs, "compiling")
    _emit(rows, fmt, f"{module}:{function}", module=module, function=function, signature=sig,
          constexprs={k: str(v) for k, v in consts.items()}, num_warps=num_warps)
