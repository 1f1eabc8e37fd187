"""The roofline: ceilings of a device and kernels placed against them.

A kernel is a point (arithmetic intensity = useful FLOPs / least bytes, achieved FLOP/s). Its least
time on a device is ``max(bytes / bandwidth, flops / peak)``: the model a CPU-only report gives for
a chosen target GPU. Ceilings come from two sources, always named: ``measured`` (this run's probes:
copy bandwidth, torch.matmul per dtype) and ``datasheet`` (``tilecraft.hardware.device.DATASHEET``).
"""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field

from tilecraft.hardware.device import DATASHEET

# Names users type for --target, mapped to DATASHEET keys.
TARGET_ALIASES = {
    "h100": "H100", "sm90": "H100", "sm_90": "H100", "hopper": "H100",
    "h200": "H200",
    "a100": "A100", "sm80": "A100", "sm_80": "A100", "ampere": "A100",
    "mi250x": "MI250X", "mi250": "MI250X", "gfx90a": "MI250X", "cdna2": "MI250X",
    "mi300x": "MI300X", "mi300": "MI300X", "gfx942": "MI300X", "cdna3": "MI300X",
}


def resolve_target(name: str) -> str:
    """A DATASHEET key for a user's target name ('h100', 'MI300X', 'gfx942' ...), or ValueError
    naming the close matches."""
    key = name.strip().lower()
    if key in TARGET_ALIASES:
        return TARGET_ALIASES[key]
    for k in DATASHEET:
        if k.lower() == key:
            return k
    names = sorted(set(TARGET_ALIASES) | {k.lower() for k in DATASHEET})
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown target GPU {name!r}{hint} (known: {', '.join(sorted(DATASHEET))})")


@dataclass
class Ceiling:
    name: str  # "copy", "bf16", "fp64_vector", ...
    value: float  # TB/s for bandwidth, TFLOP/s (TOPS) for compute
    source: str  # "measured" or "datasheet"
    formula: str = ""  # how a paper peak is made up (units x rate x clock), or how it was measured


@dataclass
class Roofline:
    device: str
    bandwidth: list[Ceiling] = field(default_factory=list)
    compute: list[Ceiling] = field(default_factory=list)

    def best_bandwidth(self) -> Ceiling | None:
        """The measured copy bandwidth when there is one (what FOMs are held to), else the datasheet."""
        measured = [c for c in self.bandwidth if c.source == "measured"]
        pool = measured or self.bandwidth
        return max(pool, key=lambda c: c.value) if pool else None

    def peak(self, key: str) -> Ceiling | None:
        """The compute ceiling for ``key`` (a dtype or 'fp64_vector'): measured if any, else datasheet."""
        matches = [c for c in self.compute if c.name == key]
        measured = [c for c in matches if c.source == "measured"]
        if measured:
            return measured[0]
        return matches[0] if matches else None

    def least_time_ms(self, flops: float, nbytes: float, peak_key: str | None) -> float | None:
        """The model: the least time a kernel moving ``nbytes`` and doing ``flops`` can take."""
        bw = self.best_bandwidth()
        if bw is None:
            return None
        t = nbytes / (bw.value * 1e12)
        pk = self.peak(peak_key) if peak_key else None
        if pk and flops:
            t = max(t, flops / (pk.value * 1e12))
        return t * 1e3

    def as_dict(self) -> dict:
        return asdict(self)


def datasheet_roofline(key: str) -> Roofline:
    """The peak ceilings of a device: ``tilecraft.hardware.peaks`` (rate x units x clock from the
    instruction tables; bus width x data rate) where it knows the device, else the DATASHEET
    figures. Both are labelled "datasheet": paper numbers, not measurements."""
    try:
        from tilecraft.hardware import peaks

        rows = peaks.peak_table(key)
    except (ImportError, ValueError):
        rows = []
    if rows:
        roof = Roofline(device=key)
        for r in rows:
            c = Ceiling("copy" if r["dtype"] == "bandwidth" else r["dtype"], float(r["value"]), "datasheet",
                        r["formula"])
            (roof.bandwidth if r["dtype"] == "bandwidth" else roof.compute).append(c)
        return roof
    sheet = DATASHEET[key]
    roof = Roofline(device=key, bandwidth=[Ceiling("copy", sheet["bandwidth_TBps"], "datasheet")])
    for name, value in sheet.items():
        if name in ("bandwidth_TBps", "sms", "cus"):
            continue
        roof.compute.append(Ceiling(name, float(value), "datasheet"))
    return roof


def measured_roofline(device: str, ceilings: dict | None, datasheet_key: str | None) -> Roofline:
    """The measured ceilings of this run (copy, matmul per dtype) plus the device's datasheet ones."""
    roof = datasheet_roofline(datasheet_key) if datasheet_key else Roofline(device=device)
    roof.device = device
    if ceilings:
        if ceilings.get("copy_TBps"):
            roof.bandwidth.insert(0, Ceiling("copy", float(ceilings["copy_TBps"]), "measured"))
        for dt, v in (ceilings.get("matmul_TFLOPs") or {}).items():
            roof.compute.insert(0, Ceiling(dt, float(v), "measured"))
    return roof


@dataclass
class Point:
    """A kernel on the roofline. ``time_ms`` is measured when ``measured`` is True, else the model's
    least time on the roofline's device."""

    label: str
    suite: str
    flops: float
    nbytes: float
    time_ms: float
    peak_key: str | None = None
    measured: bool = True

    @property
    def intensity(self) -> float:
        return self.flops / self.nbytes if self.nbytes else float("inf")

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_ms * 1e-3) / 1e12 if self.time_ms else 0.0

    @property
    def tbps(self) -> float:
        return self.nbytes / (self.time_ms * 1e-3) / 1e12 if self.time_ms else 0.0

    def fraction_of_roof(self, roof: Roofline) -> float | None:
        """Least time on ``roof`` / this time: 1.0 is at the roofline."""
        least = roof.least_time_ms(self.flops, self.nbytes, self.peak_key)
        return least / self.time_ms if least and self.time_ms else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(intensity=self.intensity, tflops=self.tflops, tbps=self.tbps)
        return d


def point_from_record(rec: dict, label: str, peak_key: str | None) -> Point | None:
    """A roofline point from a benchmark record carrying extra.flops, extra.bytes and extra.time_ms."""
    x = rec.get("extra") or {}
    if not (x.get("flops") and x.get("bytes") and x.get("time_ms")) or not x.get("ok", True):
        return None
    return Point(label, rec.get("suite", ""), float(x["flops"]), float(x["bytes"]), float(x["time_ms"]),
                 peak_key, bool(rec.get("measured", True)))
