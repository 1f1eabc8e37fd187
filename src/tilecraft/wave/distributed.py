"""Running ``simulate`` on several processes: one per GPU (NCCL) or CPU processes (gloo).

Two ways in:

* ``torchrun --nproc-per-node N your_script.py``: initialise ``torch.distributed`` in the script
  (``init_from_env``) and call ``simulate`` on every rank with the same arguments;
* ``simulate_spawned(..., ranks=N)`` (what ``tilecraft wave run --gpus N`` uses): starts N processes
  itself on this host, returns rank 0's ``Result``.

Each rank owns a slab of axis 0 (``tilecraft.wave.solver.partition``); halos travel through
``torch.distributed`` point-to-point operations.
"""
from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tilecraft.wave.model import Model


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_from_env() -> tuple[int, int, torch.device]:
    """Initialise the process group from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR/PORT): NCCL with one GPU per local rank where GPUs are visible, else gloo on CPU.
    Returns (rank, world size, device)."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
    return dist.get_rank(), dist.get_world_size(), device


def _worker(rank: int, world: int, port: int, device_kind: str, out_path: str, model: Model, sources, receivers,
            nt: int, kwargs: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device_kind == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from tilecraft.wave.solver import simulate

        # The model stays on the CPU: each rank moves only its slab to its device.
        result = simulate(model, sources, receivers, nt, device=device, **kwargs)
        if rank == 0:
            torch.save(result, out_path)
    finally:
        dist.destroy_process_group()


def simulate_spawned(model: Model, sources, receivers, nt: int, *, ranks: int, device: str = "cpu", **kwargs):
    """``simulate`` on ``ranks`` processes of this host (device "cuda": one GPU each, NCCL; "cpu":
    gloo). Returns rank 0's ``Result``. Arguments as ``simulate`` (``progress`` is not passed on)."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
    if device == "cuda" and ranks > torch.cuda.device_count():
        raise ValueError(f"{ranks} ranks need {ranks} GPUs; {torch.cuda.device_count()} are visible")
    # Fail here, with the solver's message, rather than in the children.
    from tilecraft.wave.boundaries import Layout, layer_width, row_align
    from tilecraft.wave.solver import halo_width, partition

    kwargs.pop("progress", None)
    order = kwargs.get("order", 8)
    width = layer_width(kwargs.get("boundary", "pml"), kwargs.get("pml_width"))
    layout = Layout(model.shape, order, width, kwargs.get("free_surface", False),
                    row_align(kwargs.get("boundary", "pml"), width))
    lo, hi = layout.updated
    partition(hi[0] - lo[0], ranks, order // 2, kwargs.get("free_surface", False),
              halo_width(order, kwargs.get("boundary", "pml"), ranks))
    cpu_model = Model(model.velocity.cpu(), model.spacing)
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.pt")
        mp.spawn(_worker, args=(ranks, _free_port(), device, out, cpu_model, sources, receivers, nt, kwargs),
                 nprocs=ranks, join=True)
        return torch.load(out, weights_only=False)
