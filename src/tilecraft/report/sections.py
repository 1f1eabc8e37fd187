"""What a report is made of: sections of tables, figures, records and roofline points, and the run
context the suites share.

A section says where its numbers come from: ``measured`` (timed on this run's GPU), ``interpreter``
(Triton's interpreter on the CPU: correctness only), ``compiled`` (the compiler's own report, no GPU)
or ``model`` (the roofline model of a target GPU). Nothing else goes on the page.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilecraft.hardware.device import DeviceInfo
from tilecraft.report.model import Point, Roofline

SOURCES = ("measured", "interpreter", "compiled", "model", "none")


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Figure:
    title: str
    kind: str  # "roofline", "bars", "lines", "heatmap"
    svg: str
    caption: str = ""

    def as_dict(self) -> dict:  # the JSON keeps what the figure shows, not its drawing
        return {"title": self.title, "kind": self.kind, "caption": self.caption}


@dataclass
class Section:
    key: str
    title: str
    source: str = "none"  # one of SOURCES
    status: str = "ok"  # "ok", "failed" (something went wrong: the exit code says so), "skipped" (cannot run here)
    message: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"section source must be one of {SOURCES}, got {self.source!r}")

    def as_dict(self) -> dict:
        return {"key": self.key, "title": self.title, "source": self.source, "status": self.status,
                "message": self.message, "notes": self.notes, "seconds": self.seconds,
                "tables": [t.as_dict() for t in self.tables], "figures": [f.as_dict() for f in self.figures],
                "records": self.records, "points": [p.as_dict() for p in self.points]}


@dataclass
class Context:
    """What every suite of one report run shares."""

    mode: str  # "quick" or "full"
    info: DeviceInfo
    target: str  # DATASHEET key of the GPU the model is for (CPU runs) or of this GPU
    out_dir: Path
    progress: Callable[[str], None] = lambda _m: None
    profile: bool = True
    ceilings: dict | None = None  # filled by the ceilings suite (GPU)
    roofline: Roofline | None = None  # measured (GPU) or the target's datasheet (CPU)

    @property
    def gpu(self) -> bool:
        return self.info.is_gpu

    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def copy_TBps(self) -> float | None:
        return (self.ceilings or {}).get("copy_TBps")


def fmt(x: Any, spec: str = ".3g", missing: str = "–") -> str:
    """A table cell: numbers formatted, None/NaN as a dash."""
    if x is None:
        return missing
    if isinstance(x, float):
        if math.isnan(x):
            return missing
        return format(x, spec)
    return str(x)
