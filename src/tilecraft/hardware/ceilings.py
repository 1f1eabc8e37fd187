"""Measured ceilings: device-to-device copy bandwidth and matmul rates through torch.

Measured on the device, cached on disk per device and software versions
(``~/.cache/tilecraft/ceilings/<device>-<torch>-<triton>-m<METHOD>.json``; ``TILECRAFT_CACHE`` moves it).
Suites that state a target against a ceiling re-measure the copy in the same run
(``measure_copy_bandwidth``) rather than trust the cache.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft.bench.harness import time_rotating
from tilecraft.hardware.device import DeviceInfo, detect

MATMUL_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp64")


def cache_dir() -> Path:
    root = os.environ.get("TILECRAFT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tilecraft")
    return Path(root) / "ceilings"


#: The timing method behind a cached file, part of its name: 2 (2026-11-27) times each call with the
#: device kept busy while the host enqueues it (``time_rotating``'s ``hide_launch``); files timed the
#: earlier way (copy 1-2.5% lower) are not reused.
METHOD = 2


def cache_path(info: DeviceInfo) -> Path:
    v = info.versions
    gpu_sw = "".join(f"-{k}{v[k]}" for k in ("cuda", "hip") if v.get(k))  # a CUDA/HIP update can move the rates
    key = f"{info.name}-torch{v.get('torch', '')}-triton{v.get('triton', '')}{gpu_sw}-m{METHOD}"
    return cache_dir() / (key.replace(" ", "_").replace("/", "_").replace("+", "_") + ".json")


def measure_copy_bandwidth(device: str | torch.device = "cuda", nbytes: int = 2 * 2**30,
                           budget_s: float = 1.0) -> float:
    """Device-to-device copy bandwidth in TB/s, counting bytes read plus bytes written.

    Buffers of ``nbytes`` (default 2 GiB, far beyond any L2), two sources rotated, random data.
    """
    n = nbytes // 4
    srcs = [torch.rand(n, device=device) for _ in range(2)]
    dst = torch.empty(n, device=device)
    t = time_rotating(lambda i: dst.copy_(srcs[i]), 2, device=device, budget_s=budget_s)
    return 2 * n * 4 / (t.median_ms * 1e-3) / 1e12


def measure_matmul(dtype: str, device: str | torch.device = "cuda", n: int = 8192, budget_s: float = 1.0) -> float:
    """torch.matmul rate in TFLOP/s for an n x n x n product on random data."""
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                   "fp32": torch.float32, "fp64": torch.float64}[dtype]
    a = [torch.rand(n, n, device=device, dtype=torch_dtype) - 0.5 for _ in range(2)]
    b = [torch.rand(n, n, device=device, dtype=torch_dtype) - 0.5 for _ in range(2)]
    c = torch.empty(n, n, device=device, dtype=torch_dtype)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        t = time_rotating(lambda i: torch.matmul(a[i], b[i], out=c), 2, device=device, budget_s=budget_s,
                          min_runs=5)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2 * n**3 / (t.median_ms * 1e-3) / 1e12


def probe(info: DeviceInfo | None = None, *, matmul: bool = True, progress: Callable[[str], None] | None = None) -> dict:
    """Measure the ceilings now (a GPU is required)."""
    info = info or detect()
    if not info.is_gpu:
        raise RuntimeError("measuring ceilings needs a GPU; none is visible to torch")
    say = progress or (lambda _msg: None)
    say("copy bandwidth")
    result = {"copy_TBps": measure_copy_bandwidth(), "matmul_TFLOPs": {}}
    if matmul:
        for dt in MATMUL_DTYPES:
            say(f"matmul {dt}")
            result["matmul_TFLOPs"][dt] = measure_matmul(dt)
    result["device"] = info.as_dict()
    result["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return result


def load_cached(info: DeviceInfo | None = None) -> dict | None:
    info = info or detect()
    path = cache_path(info)
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, not JSON: measured again
            return None
        return doc if isinstance(doc, dict) else None
    return None


def ceilings(info: DeviceInfo | None = None, *, refresh: bool = False, matmul: bool = True,
             progress: Callable[[str], None] | None = None) -> dict | None:
    """Cached ceilings for this device and versions, measured (and cached) when missing.

    Returns None on a machine without a GPU.
    """
    info = info or detect()
    if not info.is_gpu:
        return None
    cached = None if refresh else load_cached(info)
    if cached and (cached.get("matmul_TFLOPs") or not matmul):
        return cached
    result = probe(info, matmul=matmul, progress=progress)
    path = cache_path(info)
    try:  # atomically (a rename); a cache that cannot be written costs the cache, not the measurements
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(path)
    except OSError as exc:
        warnings.warn(f"tilecraft: the ceilings were measured but not cached ({path}: {exc})", stacklevel=2)
    return result
