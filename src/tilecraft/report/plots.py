"""The report's plots, drawn with matplotlib and returned as inline SVG text (the page needs no files
beside it)."""
from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tilecraft.report.model import Point, Roofline

_STYLE = {"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "svg.fonttype": "none"}


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inside HTML


def roofline(roof: Roofline, points: Sequence[Point], title: str) -> str:
    """Log-log roofline: bandwidth slopes and compute roofs (solid measured, dashed datasheet) with
    every kernel as a point (filled measured, hollow model)."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        xs = [p.intensity for p in points if p.intensity > 0 and math.isfinite(p.intensity)]
        lo = min([0.05, *[x / 3 for x in xs]])
        hi = max([2000.0, *[x * 3 for x in xs]])
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        peaks = sorted(roof.compute, key=lambda c: -c.value)
        top = peaks[0].value if peaks else None
        for bw in roof.bandwidth:
            ys = [min(bw.value * x, top) if top else bw.value * x for x in grid]
            ax.plot(grid, ys, color="tab:blue", ls="-" if bw.source == "measured" else "--", lw=1.4,
                    label=f"{bw.name} {bw.value:.2f} TB/s ({bw.source})")
        levels: dict[tuple[float, str], list[str]] = {}  # one line per (value, source), names joined
        for c in peaks:
            names = levels.setdefault((round(c.value, 1), c.source), [])
            if c.name not in names:
                names.append(c.name)
        last_y = None
        for (value, source), names in sorted(levels.items(), key=lambda kv: -kv[0][0]):
            ax.axhline(value, color="0.35" if source == "measured" else "0.7",
                       ls="-" if source == "measured" else ":", lw=0.9)
            # labels closer than ~15% in log scale would overprint: nudge them apart
            y = value if last_y is None or value < last_y / 1.18 else last_y / 1.18
            last_y = y
            ax.text(hi, y, f" {', '.join(names)} {value:.0f} ({source})", va="center", fontsize=6.5,
                    color="0.25" if source == "measured" else "0.5")
        suites = sorted({p.suite for p in points})
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        number = {id(p): i + 1 for i, p in enumerate(points)}  # the "#" column of the report's table
        for i, suite in enumerate(suites):
            col = colors[(i + 1) % len(colors)]
            for measured in (True, False):
                sel = [p for p in points if p.suite == suite and p.measured == measured]
                if not sel:
                    continue
                ax.scatter([p.intensity for p in sel], [p.tflops for p in sel], s=28, zorder=3,
                           facecolors=col if measured else "none", edgecolors=col,
                           label=f"{suite} ({'measured' if measured else 'model'})")
                for p in sel:
                    text = p.label if len(points) <= 8 else str(number[id(p)])
                    ax.annotate(text, (p.intensity, p.tflops), fontsize=6, xytext=(3, 2),
                                textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arithmetic intensity (FLOP / least byte)")
        ax.set_ylabel("TFLOP/s (TOPS for int8)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=6.5, loc="lower right")
        return _svg(fig)


def bars(labels: Sequence[str], values: Sequence[float | None], *, ylabel: str, title: str,
         line: float | None = None, line_label: str = "") -> str:
    """A bar chart (the ladder); ``line`` draws a reference such as the copy bandwidth."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        vals = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
        bars_ = ax.bar(range(len(labels)), vals, color="tab:blue")
        for b, v in zip(bars_, values):
            txt = "failed" if v is None or not math.isfinite(v) else f"{v:.2f}"
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), txt, ha="center", va="bottom", fontsize=7)
        if line:
            ax.axhline(line, color="tab:red", ls="--", lw=1, label=line_label)
            ax.legend(fontsize=7)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        return _svg(fig)


def lines(series: dict[str, tuple[Sequence[float], Sequence[float]]], *, xlabel: str, ylabel: str, title: str,
          logx: bool = True, line: float | None = None, line_label: str = "") -> str:
    """Line plot of several series (the cache-cliff sweep)."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        for name, (x, y) in series.items():
            ax.plot(x, y, marker="o", ms=3, label=name)
        if line:
            ax.axhline(line, color="tab:red", ls="--", lw=1, label=line_label)
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
        return _svg(fig)


def heatmap(rows: Sequence[str], cols: Sequence[str], values: Sequence[Sequence[float | None]], *,
            title: str, label: str = "ours / peer") -> str:
    """Ratios as a heat map centred on 1.0 (red below the peer, blue above); empty cells grey."""
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    with plt.rc_context({**_STYLE, "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(cols) + 2), max(2.0, 0.32 * len(rows) + 1.2)))
        data = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
        finite = data[np.isfinite(data)]
        vmin = min(0.5, float(finite.min())) if finite.size else 0.5
        vmax = max(1.5, float(finite.max())) if finite.size else 1.5
        cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.85")
        im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, norm=TwoSlopeNorm(1.0, vmin, vmax), aspect="auto")
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if np.isfinite(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(cols)), cols, fontsize=7, rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        fig.colorbar(im, ax=ax, label=label, shrink=0.8)
        ax.set_title(title, fontsize=10)
        return _svg(fig)
