"""What an op's tuner needs beyond its config space: the progress report on stderr, the device facts
its cache is keyed by, and the CUDA-graph timing of one candidate.

The stencil tuner (``tilecraft.ops.stencil``) and the GEMM tuner (``tilecraft.ops.gemm``, which keys
its cache by its own ``_device_facts``: it also needs the SM count) use these.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


def say(msg: str) -> None:
    """``tilecraft: msg`` on stderr, unless ``TILECRAFT_QUIET`` is 1/true/on/yes."""
    if os.environ.get("TILECRAFT_QUIET", "").strip().lower() not in ("1", "true", "on", "yes"):
        print(f"tilecraft: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class DeviceFacts:
    arch: str  # "sm90", "sm80", ... on NVIDIA; the gfx name ("gfx942") on AMD; "cpu"
    name: str  # the device name (part of a cache file's name)
    versions: dict  # torch, triton, CUDA/HIP (part of a cache file's name)


def device_facts(device: torch.device) -> DeviceFacts:
    """The facts of ``device`` a tuning cache is keyed by."""
    from tilecraft.hardware.device import software_versions

    if device.type != "cuda":
        return DeviceFacts("cpu", platform.machine() or "cpu", software_versions())
    return _cuda_facts(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_facts(index: int) -> DeviceFacts:
    from tilecraft.hardware.device import software_versions

    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        arch = (getattr(props, "gcnArchName", "") or "gfx").split(":")[0]
    else:
        arch = f"sm{props.major}{props.minor}"
    return DeviceFacts(arch, props.name, software_versions())


def calls_graph(fns: Sequence[Callable[[], object]], device: torch.device, calls: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` calls cycling through ``fns`` (one per input set). Each function runs once on a
    side stream first (compilation, allocator pools, cuBLAS workspaces), then the graph is captured."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for fn in fns:
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fns[i % len(fns)]()
    return graph


def graph_time_ms(fns: Callable[[], object] | Sequence[Callable[[], object]], device: torch.device,
                  calls: int = 8, replays: int = 5) -> float:
    """Median time of one call from a CUDA graph of ``calls`` calls cycling through ``fns`` (one per
    input set; no launch overhead, which would swamp microsecond kernels and let a tuner pick noise),
    :func:`calls_graph`."""
    fns = list(fns) if isinstance(fns, (list, tuple)) else [fns]
    calls = max(calls, len(fns))
    graph = calls_graph(fns, device, calls)
    graph.replay()
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / calls)
    return sorted(times)[len(times) // 2]
