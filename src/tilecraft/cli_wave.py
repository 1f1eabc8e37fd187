"""``tilecraft wave``: acoustic wave modelling from the command line.

    tilecraft wave run [--shape 201,401] [--spacing 10] [--velocity 1500 | --velocities 1500,2500 --interfaces 500]
                       [--model-file v.npy] [--source Z,[Y,]X] [--f0 15] [--receivers N] [--nt 1000] [--dt S]
                       [--order 8] [--boundary pml|sponge|none] [--pml-width 12 (CPML) | 20 (sponge)] [--free-surface]
                       [--dtype fp32|fp64] [--device auto|cpu|cuda] [--backend auto|triton|torch] [--gpus N]
                       [--out DIR]

Writes DIR/record.npz (the shot record and everything needed to read it), DIR/shot_gather.png and
DIR/wavefield.png. ``--gpus N`` starts N processes (one GPU each, NCCL); under ``torchrun`` every rank
runs the command and rank 0 writes the files. Bad input: one line on stderr, exit code 2.
"""
from __future__ import annotations

import json
import os
import time
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from tilecraft._cli import check_out
from tilecraft._cli import fail as _err

wave_app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                       help="Acoustic wave modelling: shot records and wavefield pictures.")


class Boundary(str, Enum):
    pml = "pml"
    sponge = "sponge"
    none = "none"


class DType(str, Enum):
    fp32 = "fp32"
    fp64 = "fp64"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Backend(str, Enum):
    auto = "auto"
    triton = "triton"
    torch = "torch"




def _floats(text: str, what: str, count: tuple[int, ...] | None = None) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        _err(f"{what} must be comma-separated numbers, got {text!r}")
    if count and len(vals) not in count:
        _err(f"{what} needs {' or '.join(map(str, count))} numbers, got {text!r}")
    return vals


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        _err(f"--shape must be comma-separated integers (nz,nx or nz,ny,nx), got {text!r}")
    if len(shape) not in (2, 3) or min(shape) < 1:
        _err(f"--shape must be 2 or 3 positive integers (nz,nx or nz,ny,nx), got {text!r}")
    return shape


def _build_model(shape, spacing, velocity, velocities, interfaces, model_file, dtype, device):
    import numpy as np
    import torch

    from tilecraft import wave

    if model_file is not None:
        try:
            a = np.load(model_file)
        except (OSError, ValueError) as exc:
            _err(f"cannot read --model-file {model_file}: {exc}")
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            _err(f"--model-file {model_file}: velocities must be real numbers, got dtype {a.dtype}")
        return wave.Model(torch.from_numpy(a).to(dtype).to(device), spacing)
    if interfaces is not None and velocities is None:
        _err("--interfaces needs --velocities (one more velocity than interfaces)")
    if velocities is not None:
        vs = _floats(velocities, "--velocities")
        ds = _floats(interfaces or "", "--interfaces")
        return wave.Model.layered(shape, vs, ds, spacing, dtype=dtype, device=device)
    return wave.Model.constant(shape, velocity, spacing, dtype=dtype, device=device)


@wave_app.command("run")
def run(
    shape: Annotated[str, typer.Option(help="Model grid: nz,nx (2D) or nz,ny,nx (3D).")] = "201,401",
    spacing: Annotated[float, typer.Option(help="Grid spacing in metres (all axes).")] = 10.0,
    velocity: Annotated[float, typer.Option(help="Constant velocity (m/s).")] = 2000.0,
    velocities: Annotated[str | None, typer.Option(help="Layered model: velocities top to bottom, e.g. 1500,2500.")] = None,
    interfaces: Annotated[str | None, typer.Option(help="Layered model: interface depths (m), e.g. 800.")] = None,
    model_file: Annotated[Path | None, typer.Option(help="Velocity array (.npy), shape (nz,[ny,]nx); overrides --shape.")] = None,
    source: Annotated[str | None, typer.Option(help="Source position z,[y,]x in metres (default: centre, 1/10 down).")] = None,
    f0: Annotated[float, typer.Option(help="Ricker peak frequency (Hz).")] = 15.0,
    interpolation: Annotated[str, typer.Option(help="Off-grid interpolation: trilinear or sinc.")] = "trilinear",
    receivers: Annotated[int, typer.Option(help="Receivers on a line across x at the source depth.")] = 101,
    nt: Annotated[int, typer.Option(help="Time steps.")] = 1000,
    dt: Annotated[float | None, typer.Option(help="Time step (s); default 0.6 x the CFL limit.")] = None,
    order: Annotated[int, typer.Option(help="Space order (even, 2..16).")] = 8,
    boundary: Annotated[Boundary, typer.Option(case_sensitive=False, help="Absorbing boundary.")] = Boundary.pml,
    pml_width: Annotated[int | None, typer.Option(
        help="Absorbing layer width (points); default 12 for the CPML, 20 for the sponge.")] = None,
    free_surface: Annotated[bool, typer.Option("--free-surface", help="p = 0 at the top of the model.")] = False,
    dtype: Annotated[DType, typer.Option(case_sensitive=False, help="Field dtype.")] = DType.fp32,
    device: Annotated[Device, typer.Option(case_sensitive=False, help="Where to run.")] = Device.auto,
    backend: Annotated[Backend, typer.Option(case_sensitive=False, help="Step implementation.")] = Backend.auto,
    gpus: Annotated[int, typer.Option(help="GPUs (processes) to split the model over along z.")] = 1,
    out: Annotated[Path | None, typer.Option(help="Output folder (default out/wave-<time>).")] = None,
) -> None:
    """Model one shot: writes the record (npz), the shot gather and a wavefield slice (PNG)."""
    import torch

    from tilecraft import wave

    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank = 0
    if torchrun:
        from tilecraft.wave.distributed import init_from_env

        rank, _, dev = init_from_env()
    elif device == Device.auto:
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(device.value)
    if dev.type == "cuda" and not torch.cuda.is_available():
        _err("--device cuda: no GPU is visible to torch")
    if gpus < 1:
        _err(f"--gpus must be >= 1, got {gpus}")
    if gpus > 1 and (dev.type != "cuda" or torch.cuda.device_count() < gpus):
        _err(f"--gpus {gpus}: {torch.cuda.device_count()} GPU(s) visible to torch")
    torch_dtype = torch.float32 if dtype == DType.fp32 else torch.float64
    shape_t = _shape(shape)
    console = Console(stderr=True, highlight=False)
    out = out or Path("out") / time.strftime("wave-%Y%m%dT%H%M%S")
    try:
        model = _build_model(shape_t, spacing, velocity, velocities, interfaces, model_file, torch_dtype, dev)
        extent = model.extent
        src_pos = _floats(source, "--source", (model.ndim,)) if source else (
            [extent[0] / 10] + [e / 2 for e in extent[1:]])
        src = wave.Source([src_pos], f0=f0, interpolation=interpolation)
        if receivers < 1:
            raise ValueError(f"--receivers must be >= 1, got {receivers}")
        start = [src_pos[0]] + list(src_pos[1:-1]) + [0.0]
        stop = [src_pos[0]] + list(src_pos[1:-1]) + [extent[-1]]
        rec = wave.Receivers.line(start, stop, receivers, interpolation)
        snap = max(0, min(nt - 1, int(nt * 0.6)))
        kwargs = {"dt": dt, "order": order, "boundary": boundary.value, "pml_width": pml_width,
                  "free_surface": free_surface, "snapshots": [snap], "backend": backend.value}
        if rank == 0:  # before the run, so a folder that cannot be made does not cost the whole simulation
            check_out(out, folder=True)
        t0 = time.perf_counter()
        if gpus > 1:
            from tilecraft.wave.distributed import simulate_spawned

            console.print(f"running on {gpus} GPUs (slabs along z) ...")
            result = simulate_spawned(model, src, rec, nt, ranks=gpus, device="cuda", **kwargs)
        else:
            with Progress(TextColumn("time steps"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console, transient=True, disable=not console.is_terminal or rank != 0) as bar:
                task = bar.add_task("steps", total=nt)
                result = wave.simulate(model, src, rec, nt, progress=lambda n, _t: bar.update(task, completed=n),
                                       **kwargs)
        wall = time.perf_counter() - t0
    except (ValueError, TypeError) as exc:
        _err(str(exc).splitlines()[0])
    if rank != 0:
        return
    _write(out, result, model, src, rec, wall)


def _write(out: Path, result, model, src, rec, wall: float) -> None:
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    info = dict(result.info, backend=result.backend, dt=result.dt, nt=result.nt, wall_seconds=wall)
    np.savez(out / "record.npz", record=result.record.numpy(), dt=result.dt, times=result.times.numpy(),
             receivers=rec.positions.numpy(), source=src.positions.numpy(), f0=src.f0,
             spacing=np.array(model.spacing), model_shape=np.array(model.shape), info=json.dumps(info))
    _plot(out, result, model, rec)
    table = Table(title="tilecraft wave run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    pts = 1
    for n in result.info["grid"]:
        pts *= n
    rows = [("model", "x".join(map(str, model.shape)) + f" ({'x'.join(f'{h:g}' for h in model.spacing)} m)"),
            ("grid (with layers)", "x".join(map(str, result.info["grid"]))),
            ("order / boundary", f"{result.info['order']} / {result.info['boundary']}"
             + (f" ({result.info['pml_width']} points)" if result.info["pml_width"] else "")
             + (" + free surface" if result.info["free_surface"] else "")),
            ("dt", f"{result.dt:.4g} s ({result.info['courant']:.2f} of the CFL limit {result.info['dt_max']:.4g} s)"),
            ("steps", f"{result.nt} ({result.nt * result.dt:.3f} s)"),
            ("backend / device", f"{result.backend} / {result.info['device']}, {result.info['ranks']} rank(s)"),
            ("CUDA graphs", str(result.info.get("cuda_graphs", "off"))),
            ("p_next", "over p_prev (in place)" if result.info.get("in_place") else "into a third array"),
            ("time loop", f"{result.info['loop_seconds']:.2f} s, {pts * result.nt / result.info['loop_seconds'] / 1e9:.3f} "
                          "GPts/s" + ("" if result.info["device"].startswith("cuda") else " (CPU: not a GPU figure)")),
            ("wrote", f"{out}/record.npz, shot_gather.png, wavefield.png")]
    for k, v in rows:
        table.add_row(k, v)
    Console(highlight=False).print(table)


def _plot(out: Path, result, model, rec) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    r = result.record.numpy()
    clip = np.percentile(np.abs(r), 99) or 1.0
    fig, ax = plt.subplots(figsize=(6, 6))
    xs = rec.positions[:, -1].numpy()
    ax.imshow(r, aspect="auto", cmap="gray", vmin=-clip, vmax=clip,
              extent=(xs[0], xs[-1], result.nt * result.dt, 0))
    ax.set_xlabel("receiver x (m)")
    ax.set_ylabel("time (s)")
    ax.set_title("shot gather")
    fig.tight_layout()
    fig.savefig(out / "shot_gather.png", dpi=110)
    plt.close(fig)

    if not result.snapshots:
        return
    step, field = result.snapshots[-1]
    f = field.double().numpy()
    if f.ndim == 3:
        f = f[:, f.shape[1] // 2, :]  # the xz plane through the middle of y
    v = model.velocity.double().cpu().numpy()
    if v.ndim == 3:
        v = v[:, v.shape[1] // 2, :]
    ext = (0, (f.shape[1] - 1) * model.spacing[-1], (f.shape[0] - 1) * model.spacing[0], 0)
    fig, ax = plt.subplots(figsize=(7, 7 * f.shape[0] / max(f.shape[1], 1) + 0.8))
    ax.imshow(v, cmap="viridis", extent=ext, alpha=0.35, aspect="auto")
    c = np.percentile(np.abs(f), 99.5) or 1.0
    ax.imshow(f, cmap="seismic", vmin=-c, vmax=c, extent=ext, alpha=0.75, aspect="auto")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")
    ax.set_title(f"wavefield at t = {step * result.dt:.3f} s (velocity underneath)")
    fig.tight_layout()
    fig.savefig(out / "wavefield.png", dpi=110)
    plt.close(fig)


def register(app: typer.Typer) -> None:
    app.add_typer(wave_app, name="wave")
