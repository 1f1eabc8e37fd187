"""The benchmark harness every suite uses.

* ``time_rotating``: warm-up, then the median of many timed runs with device events, each run on the
  next of several input sets whose total is larger than L2, so caches do not flatter a kernel. On a GPU
  each timed run starts with the device busy (``hide_launch``), so the events bracket the device's work
  and not the host's launch path; the host's time per call is kept beside it (``Timing.host_ms``).
* ``Record``: one measured case, with the fields any later reader needs to check a target.
* ``write_results``: JSON under ``benchmarks/results/`` (or a path given), one file per run.

A suite checks correctness before it times anything; ``time_rotating`` only times.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from tilecraft.hardware.device import DeviceInfo, detect


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    spread: float  # (p90 - p10) / median
    host_ms: float | None = None  # median host time per call (Python dispatch and launch), not in the times above

    def as_dict(self) -> dict:
        return asdict(self)


def _sync(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


#: Cycles of device spin per second of host time to cover (``hide_launch``): 3x a 2 GHz clock, so a
#: clock as low as 0.7 GHz still spins longer than the host takes to enqueue the call.
_SPIN_CYCLES_PER_S = 6e9


#: Seconds each side runs untimed before its timing in the benchmark commands (``tilecraft attention bench``,
#: ``tilecraft gemm bench``) and the report (``time_rotating(settle_s=...)``): at the power cap an H200's clock
#: takes a few hundred ms to settle after the work changes (docs/attention.md Round 21; GEMM: docs/gemm.md
#: follow-up 33, torch's tf32 NN at 3035 us in 0.4 s timings right after ours, 3181 us at the settled clock).
SETTLE_S = 0.3


def time_rotating(fn: Callable[[int], object], n_sets: int, *, device: torch.device | str = "cuda",
                  warmup: int = 3, min_runs: int = 10, max_runs: int = 200, budget_s: float = 2.0,
                  hide_launch: bool = True, trace: list | None = None, settle_s: float = 0.0) -> Timing:
    """Median time of ``fn(i)``, where i cycles over ``n_sets`` input sets.

    Runs ``warmup`` untimed calls (compilation, caches, clocks), then timed calls until
    ``budget_s`` seconds or ``max_runs`` are spent (at least ``min_runs``). On a GPU each call is
    bracketed by CUDA events; on the CPU by ``time.perf_counter`` (the interpreter: not a
    performance figure).

    ``hide_launch`` (GPU): each timed call is preceded by a spin kernel (``torch.cuda._sleep``) long
    enough to cover the host's part of the call, measured in the warm-up, so the call's kernels are
    enqueued before the first event fires and the events bracket device work only, as
    ``triton.testing.do_bench``'s cache flush does. Without it an idle device waits for the host
    between the first event and the first kernel, and a Python launch path of 60-100 us (the stencil's
    ``auto``: configuration choice, launch plan, Triton's launcher) counted as 5-15% of a 0.3-0.7 ms
    kernel (H200, 2026-11-27, ``benchmarks/stencil_timing.py``). The host time per call is kept in
    ``Timing.host_ms``: a loop of calls is bound by the host when it exceeds the device time.

    ``settle_s``: after the warm-up, calls (the timed loop's pattern, untimed) for this many seconds,
    so a card at its power cap is timed in the clock state this call settles to, not in the transient
    its predecessor left. At the cap an H200's controller overshoots for a few hundred ms after the
    work changes: along the attention bench's order (ours, cuDNN, flash, efficient) our D256 forward
    started each timing at 0.75 ms a call and ended it at 0.87, while cuDNN, timed next, started at
    0.90 and ended at 0.82; after 0.3 s of settling both ran flat at 0.81-0.82 ms (2026-11-30,
    ``benchmarks/attention_bench_sequence.py``).

    ``trace``: a list that receives ``(wall-clock start in s, ms)`` for each timed call in order, for
    diagnostics that line the calls up against clock and power samples.
    """
    if isinstance(n_sets, bool) or not isinstance(n_sets, int) or n_sets < 1:
        raise ValueError(f"n_sets must be a positive number of input sets, got {n_sets!r}")
    device = torch.device(device)
    host: list[float] = []
    for i in range(warmup):
        t0 = time.perf_counter()
        fn(i % n_sets)
        host.append(time.perf_counter() - t0)
        _sync(device)
    spin = 0
    if hide_launch and device.type == "cuda":
        spin = int(min(max(host[-1] if host else 0.0, 20e-6), 5e-3) * _SPIN_CYCLES_PER_S)
    settle_end = time.perf_counter() + settle_s
    i = 0
    while time.perf_counter() < settle_end:
        if spin:
            torch.cuda._sleep(spin)
        fn(i % n_sets)
        _sync(device)
        i += 1
    times: list[float] = []
    host = []
    start_wall = time.perf_counter()
    i = 0
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start_wall < budget_s):
        k = i % n_sets
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if spin:
                torch.cuda._sleep(spin)
            t0 = time.perf_counter()
            begin.record()
            fn(k)
            end.record()
            host.append(time.perf_counter() - t0)
            end.synchronize()
            times.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn(k)
            times.append((time.perf_counter() - t0) * 1e3)
        if trace is not None:
            trace.append((time.time() - (time.perf_counter() - t0), times[-1]))
        i += 1
    times.sort()
    med = statistics.median(times)
    p10 = times[int(0.1 * (len(times) - 1))]
    p90 = times[int(math.ceil(0.9 * (len(times) - 1)))]
    return Timing(median_ms=med, min_ms=times[0], max_ms=times[-1], runs=len(times),
                  spread=(p90 - p10) / med if med > 0 else 0.0,
                  host_ms=statistics.median(host) * 1e3 if host else None)


def rotation_sets(bytes_per_set: int, l2_bytes: int | None, *, minimum: int = 2, maximum: int = 16) -> int:
    """How many input sets make the rotation larger than twice the L2 (at least ``minimum``)."""
    l2 = l2_bytes or 64 * 2**20
    need = math.ceil(2 * l2 / max(bytes_per_set, 1)) + 1
    return max(minimum, min(maximum, need))


def git_commit(cwd: str | Path | None = None) -> str:
    """The checkout's commit (+dirty), or ``$TILECRAFT_COMMIT`` when set (a copy without .git, such
    as the tree a remote GPU machine receives)."""
    if os.environ.get("TILECRAFT_COMMIT"):
        return os.environ["TILECRAFT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             cwd=cwd or Path(__file__).resolve().parent, timeout=5)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=cwd or Path(__file__).resolve().parent, timeout=5).stdout.strip()
        return commit + ("+dirty" if dirty and commit != "unknown" else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass
class Record:
    """One measured case. ``ratio`` is ``ours / ceiling_value`` when a ceiling is given (the figure
    targets are stated against), else ``ours / peer_value``; both ratios are kept in ``extra``."""

    suite: str
    case: dict
    metric: str
    unit: str
    ours: float
    peer: str | None = None
    peer_value: float | None = None
    ceiling: str | None = None
    ceiling_value: float | None = None
    ratio: float | None = None
    device: str = ""
    torch: str = ""
    triton: str = ""
    commit: str = ""
    date: str = ""
    measured: bool = True  # False: a model or an interpreter run, not a GPU measurement
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.peer_value:
            self.extra.setdefault("ratio_to_peer", self.ours / self.peer_value)
        if self.ceiling_value:
            self.extra.setdefault("ratio_to_ceiling", self.ours / self.ceiling_value)
        if self.ratio is None:
            if self.ceiling_value:
                self.ratio = self.ours / self.ceiling_value
            elif self.peer_value:
                self.ratio = self.ours / self.peer_value

    def as_dict(self) -> dict:
        return asdict(self)


STAMP_FIELDS = ("device", "torch", "triton", "commit", "date")


def _stamp_values(info: DeviceInfo) -> dict[str, str]:
    return {"device": info.name, "torch": info.versions.get("torch", ""), "triton": info.versions.get("triton", ""),
            "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def stamp(records: Sequence[Record], info: DeviceInfo | None = None) -> list[Record]:
    """Fill device, versions, commit and date into records that lack them."""
    values = _stamp_values(info or detect())
    for r in records:
        for f in STAMP_FIELDS:
            setattr(r, f, getattr(r, f) or values[f])
    return list(records)


def stamp_dicts(records: Sequence[dict], info: DeviceInfo | None = None) -> list[dict]:
    """:func:`stamp` for records already turned into dicts (a report's sections): those with a ``suite``."""
    values = _stamp_values(info or detect())
    for r in records:
        if isinstance(r, dict) and "suite" in r:
            for f in STAMP_FIELDS:
                r[f] = r.get(f) or values[f]
    return list(records)


def json_safe(obj: object) -> object:
    """``obj`` with every non-finite float (a failed case's NaN time, an inf) as None: JSON has no NaN, and
    ``json.dumps`` would write the invalid token ``NaN`` that strict readers refuse."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def results_dir() -> Path:
    """``benchmarks/results`` of the checkout when run from one, else ./benchmarks/results."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "benchmarks").is_dir():
            return parent / "benchmarks" / "results"
    return Path.cwd() / "benchmarks" / "results"


def write_results(records: Sequence[Record], suite: str, path: str | Path | None = None,
                  info: DeviceInfo | None = None, meta: dict | None = None) -> Path:
    """Write records (stamped) as one JSON file; returns its path.

    Default path: ``benchmarks/results/<suite>-<device>-<UTC date-time>.json``. A ``path`` that is an
    existing directory (or ends in a separator) gets that default file name inside it, so a run's
    measurements are not lost at the end to a directory given as ``--out``.
    """
    info = info or detect()
    records = stamp(records, info)
    folder = None if path is None else Path(path)
    if folder is not None and not (folder.is_dir() or str(path).endswith(("/", "\\"))):
        folder = None
    if path is None or folder is not None:
        device = info.name.replace(" ", "_").replace("/", "_")
        when = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = (folder or results_dir()) / f"{suite}-{device}-{when}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"suite": suite, "device": info.as_dict(), "meta": meta or {}, "records": [r.as_dict() for r in records]}
    path.write_text(json.dumps(json_safe(doc), indent=1, default=str, allow_nan=False))
    return path
