"""What the stencil round scripts (``stencil_explore.py``, ``stencil_tma.py``, ``stencil_round3.py``)
share: the run's start (device, output folder, the copy bandwidth of the same run) and one measured
configuration as a JSON record (checked against the float64 reference before it is timed)."""
from __future__ import annotations

import time
from pathlib import Path

from tilecraft.bench import stencil as sb
from tilecraft.bench.harness import Record
from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect


def start(out_dir: str):
    """(device info, output folder (made), start time, copy bandwidth in TB/s measured now)."""
    info = detect()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s {info.versions}", flush=True)
    return info, out, t0, copy


def measure(shape, dtype, order, cfg, info, budget, copy, suite, case, label, *, check="small", width=42):
    """One configuration (None: ``auto``'s choice) at one grid: checked, timed, printed, as a Record
    whose ``extra`` carries the check, resources, timing and the fraction of copy."""
    res = sb.measure_config(shape, sb.DTYPES[dtype], order, "auto", cfg, l2_bytes=info.l2_bytes, budget_s=budget,
                            check=check)
    frac = res.fom_TBps / copy if res.ok else float("nan")
    r0 = res.resources[0] if res.resources else {}
    print(f"   {label(cfg):{width}s} {frac:6.1%} regs={r0.get('registers')} spills={r0.get('spills')} "
          f"err={res.error if res.error is not None else float('nan'):.1e} "
          f"spread={res.timing.spread if res.timing else float('nan'):.3f} {res.message}", flush=True)
    return Record(suite, {**case, "label": label(cfg), "config": res.config}, "fom", "TB/s",
                  res.fom_TBps if res.ok else float("nan"), ceiling="copy", ceiling_value=copy,
                  extra={"ok": res.ok, "message": res.message, "resources": res.resources, "rel_error": res.error,
                         "fraction_of_copy": frac, "timing": res.timing.as_dict() if res.timing else None})
