"""Figure of merit and least-traffic models (the project specification's "stencil figure of merit").

For a star stencil of radius R on a grid (nz, ny, nx) with interior extents a = nx-2R, b = ny-2R,
c = nz-2R, the least data a kernel must move is

* fetch = (a*b*c + 2R*(b*c + a*c + a*b)) * sizeof(T)  -- every needed point once, no corners/edges;
* write = a*b*c * sizeof(T),

and FOM = (fetch + write) / time, reported as a fraction of the measured copy bandwidth. For R = 1
this is the seeds' n**3 - 8 - 4(nx-2) - 4(ny-2) - 4(nz-2) fetched points.
"""
from __future__ import annotations

import math

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class StencilTraffic:
    points: int  # interior points written
    fetch_bytes: int
    write_bytes: int
    flops: int  # 9R+1 per point: 3R pair adds, 3R+1 multiplies, 3R adds into the sum

    @property
    def bytes(self) -> int:
        return self.fetch_bytes + self.write_bytes

    def as_dict(self) -> dict:
        d = asdict(self)
        d["bytes"] = self.bytes
        return d


def stencil_traffic(shape: tuple[int, int, int], order: int, itemsize: int) -> StencilTraffic:
    if isinstance(order, bool) or not isinstance(order, int) or order % 2 or not 2 <= order <= 16:
        raise ValueError(f"order must be an even integer in 2..16, got {order!r}")
    if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
        raise ValueError(f"itemsize must be a positive number of bytes, got {itemsize!r}")
    if len(shape) != 3:
        raise ValueError(f"shape must be (nz, ny, nx), got {shape!r}")
    nz, ny, nx = shape
    r = order // 2
    a, b, c = nx - 2 * r, ny - 2 * r, nz - 2 * r
    if min(a, b, c) < 1:
        raise ValueError(f"shape {shape} has no interior for order {order}")
    points = a * b * c
    fetched = points + 2 * r * (b * c + a * c + a * b)
    flops_per_point = 3 * r + (3 * r + 1) + 3 * r
    return StencilTraffic(points=points, fetch_bytes=fetched * itemsize, write_bytes=points * itemsize,
                          flops=points * flops_per_point)


def stencil_fom(traffic: StencilTraffic, time_ms: float) -> dict[str, float]:
    """Effective bandwidth (TB/s) and throughput (GPts/s) of a kernel that took ``time_ms``."""
    if not (isinstance(time_ms, (int, float)) and math.isfinite(time_ms) and time_ms > 0):
        raise ValueError(f"time_ms must be a positive, finite time, got {time_ms!r}")
    seconds = time_ms * 1e-3
    return {"fom_TBps": traffic.bytes / seconds / 1e12, "gpts": traffic.points / seconds / 1e9}


def least_time_ms(traffic: StencilTraffic, bandwidth_TBps: float) -> float:
    """The roofline model: the least time the minimum traffic can take at ``bandwidth_TBps``."""
    return traffic.bytes / (bandwidth_TBps * 1e12) * 1e3
