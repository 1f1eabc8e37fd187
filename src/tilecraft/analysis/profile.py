"""Hardware counters of one kernel through Nsight Compute (``ncu``): DRAM bytes read and written
against the least a kernel must move (the seeds' FETCH_SIZE / WRITE_SIZE and fetch efficiency), L2
hit rate and shared-memory bank conflicts.

``profile_op`` runs ``ncu --clock-control none`` (the clocks the GPU chooses, as in every timing
tilecraft reports) on a child Python that runs the op (``python -m tilecraft.analysis.profile_target``):
warm-up launches first (compilation), then the one profiled launch. Ops that can be profiled are
listed in ``PROFILE_OPS``; each names the kernels to profile and knows its least traffic.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# What the report shows, and the ncu metric behind each.
METRICS = {
    "time_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "smem_bank_conflicts_ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_bank_conflicts_st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}

# Multipliers into base units (bytes, nanoseconds), for ncu output that was not printed in base units.
_UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}

# Op name -> (kernel-name regex for ``ncu -k regex:...``, description). The profiled launch is the
# first kernel matching the regex after the warm-up call (for matmul: the GEMM kernel itself, not a
# split-K reduce or an operand copy; for attention: the forward kernel).
PROFILE_OPS = {
    "laplacian": ("laplacian", "tilecraft.laplacian: --variant, --shape NZ,NY,NX, --dtype fp64|fp32, --order"),
    "matmul": ("matmul(_tma)?_kernel", "tilecraft.matmul: --shape M,N,K, --dtype, --layout NN|NT|TN|TT"),
    "attention": ("attention_(fwd|decode)", "tilecraft.attention forward: --shape B,H,S,D, --dtype fp16|bf16, --causal"),
}


class ProfileError(RuntimeError):
    """ncu is missing, the GPU is missing, or the profiled run failed (message says which)."""


@dataclass
class ProfileResult:
    op: str
    case: dict
    kernel: str
    metrics: dict[str, float | None]
    least_fetch_bytes: int
    least_write_bytes: int
    command: list[str] = field(default_factory=list)

    @property
    def fetch_efficiency(self) -> float | None:
        """Least bytes to fetch / DRAM bytes read (1.0: every byte read once)."""
        read = self.metrics.get("dram_read_bytes")
        return self.least_fetch_bytes / read if read else None

    @property
    def write_efficiency(self) -> float | None:
        written = self.metrics.get("dram_write_bytes")
        return self.least_write_bytes / written if written else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(fetch_efficiency=self.fetch_efficiency, write_efficiency=self.write_efficiency)
        return d


def find_ncu() -> str | None:
    """The ncu executable: ``$TILECRAFT_NCU``, then PATH, then the usual CUDA install places."""
    env = os.environ.get("TILECRAFT_NCU")
    if env:
        return env if Path(env).exists() else None
    found = shutil.which("ncu")
    if found:
        return found
    for root in ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute"):
        p = Path(root) / "ncu"
        if p.exists():
            return str(p)
    return None


def _number(value: str, unit: str) -> float | None:
    text = value.replace(",", "").strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x * _UNITS.get(unit.strip().lower(), 1)


def parse_ncu_csv(text: str) -> dict[str, dict[str, float | None]]:
    """``ncu --csv`` output (mixed with the program's own lines) -> {kernel name: {metric: value}}
    in base units (bytes, ns, %). Later launches of the same kernel overwrite earlier ones."""
    rows = [line for line in text.splitlines() if line.startswith('"')]
    out: dict[str, dict[str, float | None]] = {}
    if not rows:
        return out
    for r in csv.DictReader(io.StringIO("\n".join(rows))):
        name = r.get("Metric Name")
        if not name:
            continue
        kernel = r.get("Kernel Name", "?")
        out.setdefault(kernel, {})[name] = _number(r.get("Metric Value", ""), r.get("Metric Unit", ""))
    return out


def _named(raw: dict[str, float | None]) -> dict[str, float | None]:
    return {key: raw.get(metric) for key, metric in METRICS.items()}


def target_args(op: str, case: dict) -> list[str]:
    """The ``tilecraft.analysis.profile_target`` arguments for ``op`` and its case."""
    if op not in PROFILE_OPS:
        raise ValueError(f"cannot profile {op!r}; choose from {', '.join(PROFILE_OPS)}")
    if op == "laplacian":
        return ["laplacian", "--variant", str(case["variant"]), "--dtype", str(case["dtype"]),
                "--order", str(case["order"]), "--shape", *map(str, case["shape"])]
    if op == "matmul":
        return ["matmul", "--dtype", str(case["dtype"]), "--layout", str(case.get("layout", "NN")),
                "--shape", *map(str, case["shape"])]
    if op == "attention":
        return ["attention", "--dtype", str(case["dtype"]), "--shape", *map(str, case["shape"])] + (
            ["--causal"] if case.get("causal") else [])
    raise AssertionError(op)  # pragma: no cover - PROFILE_OPS and this function list the same ops


def profile_op(op: str, case: dict, *, ncu: str | None = None, timeout_s: float = 600) -> ProfileResult:
    """Profile one launch of ``op`` with ``case`` (for laplacian: variant, dtype, order, shape)."""
    exe = ncu or find_ncu()
    if exe is None:
        raise ProfileError("Nsight Compute (ncu) was not found: install it or set TILECRAFT_NCU to its path")
    regex = PROFILE_OPS[op][0] if op in PROFILE_OPS else None
    args = target_args(op, case)
    import tilecraft

    src = str(Path(tilecraft.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("TRITON_INTERPRET", None)
    if op == "matmul":
        # tilecraft.matmul tunes on its first call for a new shape (many candidate launches, which ncu
        # would count): one run without the profiler fills the on-disk tuning cache first
        warm = subprocess.run([sys.executable, "-m", "tilecraft.analysis.profile_target", *args], check=False,
                              capture_output=True, text=True, timeout=timeout_s, env=env)
        if warm.returncode != 0:
            raise ProfileError(f"the warm-up run failed (exit {warm.returncode}): {warm.stderr.strip()[-300:]}")
    # the target launches its kernels twice (compile + warm-up, then the profiled one): skip 1, take 1
    cmd = [exe, "--clock-control", "none", "--print-units", "base", "--csv", "--metrics", ",".join(METRICS.values()),
           "-k", f"regex:{regex}", "-s", "1", "-c", "1", sys.executable, "-m", "tilecraft.analysis.profile_target", *args]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as exc:
        raise ProfileError(f"ncu did not finish in {timeout_s:.0f} s") from exc
    text = proc.stdout + "\n" + proc.stderr
    info = next((json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")), None)
    parsed = parse_ncu_csv(proc.stdout)
    if proc.returncode != 0 or not parsed or info is None:
        tail = " | ".join(line for line in text.strip().splitlines()[-4:])
        raise ProfileError(f"ncu run failed (exit {proc.returncode}): {tail[:400]}")
    kernel, raw = next(iter(parsed.items()))
    return ProfileResult(op, case, kernel, _named(raw), int(info["least_fetch_bytes"]), int(info["least_write_bytes"]),
                         command=cmd)
