"""``tilecraft attention``: flash attention against SDPA's backends.

    tilecraft attention bench [--shape B=4,H=16,S=4096,D=128,causal ...] [--dtype bf16|fp16]
                              [--direction fwd,bwd] [--backends cudnn,flash,efficient] [--atomic-dq|--deterministic]
                              [--budget 0.4] [--settle 0.3] [--rounds 3] [--out PATH] [--json]

Argument handling and formatting only; the suite is ``tilecraft.bench.attention``. Bad input is one
line on stderr with exit code 2; with no GPU the bench refuses (exit code 2): the interpreter checks
kernels but cannot time them.
"""
from __future__ import annotations

import math
import os
import sys
from enum import Enum
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

attention_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                            help="Flash attention (forward, backward, decode) against SDPA's cuDNN, flash and "
                                 "efficient backends.")

SHAPE_HELP = ("A problem as KEY=VALUE list: B (batch), H (query heads), HKV (K/V heads, default H), S (both lengths) "
              "or SQ and SK, D (head dim), and the flag causal; e.g. B=4,H=16,S=4096,D=128,causal. Repeat for "
              "several; default: the issue's shapes.")
_KEYS = {"B", "H", "HKV", "S", "SQ", "SK", "D"}


class DType(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"


def register(app: typer.Typer) -> None:
    app.add_typer(attention_app, name="attention")




def parse_shape(text: str):
    """``B=4,H=16,S=4096,D=128,causal`` -> ``Shape``; ValueError naming the fault."""
    from tilecraft.bench.attention import Shape
    from tilecraft.ops.attention import MAX_HEAD_DIM

    vals: dict[str, int] = {}
    causal = False
    for tok in (t.strip() for t in text.split(",") if t.strip()):
        if tok.lower() == "causal":
            causal = True
            continue
        key, sep, value = tok.partition("=")
        key = key.strip().upper()
        if not sep or key not in _KEYS:
            raise ValueError(f"bad item {tok!r} in shape {text!r}; use KEY=VALUE with KEY in B,H,HKV,S,SQ,SK,D or 'causal'")
        try:
            vals[key] = int(value)
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {value!r}") from None
        if vals[key] < 1:
            raise ValueError(f"{key} must be >= 1, got {vals[key]}")
    sq = vals.get("SQ", vals.get("S"))
    sk = vals.get("SK", vals.get("S"))
    missing = [k for k, v in (("B", vals.get("B")), ("H", vals.get("H")), ("D", vals.get("D")), ("S or SQ", sq),
                              ("S or SK", sk)) if v is None]
    if missing:
        raise ValueError(f"shape {text!r} lacks {', '.join(missing)}")
    h, hkv = vals["H"], vals.get("HKV", vals["H"])
    if h % hkv:
        raise ValueError(f"HKV={hkv} must divide H={h}")
    if vals["D"] > MAX_HEAD_DIM:
        raise ValueError(f"D must be at most {MAX_HEAD_DIM}, got {vals['D']}")
    return Shape(vals["B"], h, hkv, sq, sk, vals["D"], causal)


def _csv(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        _err(f"unknown {what} {', '.join(bad) or repr(text)}; choose from {','.join(allowed)}")
    return names


def _fmt(x, spec: str) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


@attention_app.command("bench")
def bench_cmd(
    shape: Annotated[list[str] | None, typer.Option("--shape", help=SHAPE_HELP)] = None,
    dtype: Annotated[DType, typer.Option(case_sensitive=False, help="Input dtype.")] = DType.bf16,
    direction: Annotated[str, typer.Option(help="fwd, bwd or fwd,bwd (decode shapes: forward only).")] = "fwd,bwd",
    backends: Annotated[str, typer.Option(help="SDPA backends to compare with.")] = "cudnn,flash,efficient",
    atomic_dq: Annotated[bool | None, typer.Option("--atomic-dq/--deterministic", help="Backward dQ: fp32 atomics "
                                                   "inside the dK/dV kernel (deterministic=False) or its own kernel "
                                                   "(deterministic=True); default: the library's choice "
                                                   "(deterministic=None).", show_default=False)] = None,
    budget: Annotated[float, typer.Option(help="Seconds of timed runs per implementation, case and round.")] = 0.4,
    settle: Annotated[float, typer.Option(help="Seconds each implementation runs untimed before its timing, so "
                                          "it is timed in its own clock state at the card's power cap, not in "
                                          "the transient its predecessor left (0: off).")] = 0.3,  # bench.attention.SETTLE_S
    rounds: Annotated[int, typer.Option(help="Rounds per case (ours and every backend each round); the median "
                                        "round of each is reported.")] = 3,
    out: Annotated[Path | None, typer.Option(help="JSON file; default under benchmarks/results/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON document instead of the table.")] = False,
) -> None:
    """Ours against SDPA's cuDNN, flash and efficient backends: TFLOP/s forward and backward, decode
    shapes as % of the copy bandwidth; every case checked against float64 first (GPU only)."""
    from tilecraft.bench.attention import ISSUE_SHAPES, SDPA_BACKENDS

    try:
        shapes = [parse_shape(s) for s in shape] if shape else list(ISSUE_SHAPES)
    except ValueError as exc:
        _err(str(exc))
    directions = _csv(direction, ("fwd", "bwd"), "direction")
    check_out(out)
    peers = _csv(backends, SDPA_BACKENDS, "backend") if backends.strip() else []
    if not (budget > 0 and math.isfinite(budget)):
        _err(f"--budget must be > 0 seconds, got {budget}")
    if not (settle >= 0 and math.isfinite(settle)):
        _err(f"--settle must be >= 0 seconds, got {settle}")
    if rounds < 1:
        _err(f"--rounds must be at least 1, got {rounds}")

    import torch

    err = Console(stderr=True, highlight=False)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        why = "TRITON_INTERPRET=1 is set" if torch.cuda.is_available() else "no GPU is visible to torch"
        err.print(f"[bold red]attention bench needs a GPU[/] ({why}): it measures TFLOP/s and bandwidth, which the "
                  "Triton interpreter cannot. The kernels' correctness on this machine: "
                  "TRITON_INTERPRET=1 python -m pytest tests/ops/test_attention.py")
        raise typer.Exit(2)

    from tilecraft.bench.attention import bench
    from tilecraft.bench.harness import write_results
    from tilecraft.hardware.device import detect

    dev = detect()
    n_steps = 1 + sum(1 for s in shapes for d in directions if not (d == "bwd" and s.seqlen_q <= 16
                                                                   and s.seqlen_k >= 1024))
    with Progress(SpinnerColumn(), TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("starting", total=n_steps)

        def step(msg: str) -> None:
            progress.update(task, description=msg)
            progress.advance(task)
        det = None if atomic_dq is None else not atomic_dq
        records = bench(shapes, dtype.value, directions, backends=peers, deterministic=det,
                        budget_s=budget, info=dev, progress=step, rounds=rounds, settle_s=settle)
    meta = {"mode": "gpu", "dtype": dtype.value, "directions": directions, "backends": peers, "rounds": rounds,
            "deterministic": "auto (deterministic=None)" if det is None else det, "shapes": [s.as_dict() for s in shapes],
            "flops": "forward 4*B*H*D per visible (query, key) pair; backward 2.5x forward",
            "timing": "forward: CUDA-graph replays (ours and SDPA); backward: eager, SDPA through autograd; "
                      f"each implementation's median round; {settle} s untimed before each timing"}
    path = write_results(records, "attention-bench", out, info=dev, meta=meta)
    if as_json:
        print(path.read_text())
        err.print(f"wrote {path}")
    else:
        _print_table(records, dev, dtype.value, peers)
        Console(highlight=False).print(f"wrote {path}")
    if not all(r.extra.get("ok") for r in records if r.case["impl"] == "tilecraft"):
        raise typer.Exit(1)


def _print_table(records, dev, dtype: str, peers: list[str]) -> None:
    table = Table(title=f"Attention, {dtype}, {dev.name}: TFLOP/s (decode rows: TB/s and % of copy)",
                  title_justify="left",
                  caption="FLOPs: 4·B·H·D per visible (query, key) pair forward, 2.5× that backward; decode rows: "
                          "least bytes (q, k, v, out) over time, against the copy bandwidth measured in this run. "
                          "Every case checked against float64 before timing.")
    for col in ("shape", "dir", "tilecraft", *peers, *(f"× {p}" for p in peers), "% copy", "rel. err", "note"):
        table.add_column(col, justify="left" if col in ("shape", "dir", "note") else "right")
    groups: dict[tuple, dict] = {}
    for r in records:
        groups.setdefault((r.case["label"], r.case["direction"]), {})[r.case["impl"]] = r
    for (label, direction), impls in groups.items():
        ours = impls.get("tilecraft")
        cells = []
        for impl in ("tilecraft", *(f"sdpa-{p}" for p in peers)):
            r = impls.get(impl)
            ok = r is not None and r.extra.get("ok") and r.extra.get("time_ms")
            cells.append(_fmt(r.ours, ".3g") if ok else ("[red]FAILED[/]" if impl == "tilecraft" else "–"))
        ratios = (ours.extra.get("ratio_to") or {}) if ours else {}
        cells += [_fmt(ratios.get(f"sdpa-{p}"), ".2f") for p in peers]
        pct = ours.ratio * 100 if ours and ours.ceiling and ours.ratio else None
        note = ours.extra.get("message", "") if ours and not ours.extra.get("ok") else ""
        dq = ((ours.extra.get("timing") or {}).get("dq_path") if ours else None) if direction == "bwd" else None
        note = note or (f"dQ: {dq}" if dq else "")
        table.add_row(label, direction, *cells, _fmt(pct, ".1f"), _fmt(ours.extra.get("rel_error") if ours else None,
                                                                           ".1e"), note[:60])
    # A pipe or a log file gets the whole table, not one squeezed to 80 columns.
    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)
