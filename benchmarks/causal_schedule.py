"""The list-scheduling model behind paired causal tiles (docs/attention.md, round 11). No GPU needed.

Programs start in launch order on the first free slot (an SM's room for one program); program work is
its key tiles (query tile i of n_m sees i + 1) plus a fixed cost ``o`` in key tiles. Prints the
fraction of the ideal time (total work / slots) for the orders: heaviest query tile first within each
(batch, head), as the kernels launched before; a global longest-first order; paired tiles
(n_m - 1 - i with i: n_m + 1 key tiles per program, round 11); and longest first inside groups of G
(batch, head)s (``FwdConfig.order``, round 17: the programs in flight then read the K/V of G heads only).

    python benchmarks/causal_schedule.py
"""
from __future__ import annotations

import heapq


def makespan(jobs: list[float], slots: int, fixed: float = 0.0) -> float:
    free = [0.0] * slots
    for w in jobs:
        heapq.heappush(free, heapq.heappop(free) + w + fixed)
    return max(free)


def grouped(n_m: int, heads: int, group: int) -> list[int]:
    """Key tiles per program in the grouped heavy-first launch order (``kernels.attention_gluon._grouped``)."""
    jobs = []
    for g0 in range(0, heads, group):
        jobs += sorted((n_m - i for _ in range(min(group, heads - g0)) for i in range(n_m)), reverse=True)
    return jobs


def efficiencies(n_m: int, heads: int, slots: int, fixed: float = 0.0, groups=(16, 32)) -> dict[str, float]:
    heavy_first = [n_m - i for _ in range(heads) for i in range(n_m)]
    ideal = (sum(heavy_first) + fixed * len(heavy_first)) / slots
    # a pair is two tiles, each with its fixed cost
    paired = [n_m + 1 + 2 * fixed] * (n_m * heads // 2) + ([(n_m + 1) // 2 + fixed] * heads if n_m % 2 else [])
    out = {"heavy first": ideal / makespan(heavy_first, slots, fixed),
           "longest first": ideal / makespan(sorted(heavy_first, reverse=True), slots, fixed),
           "paired": ideal / makespan(paired, slots)}
    for g in groups:
        out[f"groups of {g}"] = ideal / makespan(grouped(n_m, heads, g), slots, fixed)
    return out


if __name__ == "__main__":
    # the causal shapes: (name, query tiles of 128, B * H, programs per SM on 132 SMs)
    for name, n_m, heads, per_sm in (("D64 causal", 16, 128, 2), ("D128 causal", 32, 64, 1), ("D256 causal", 32, 32, 1)):
        for fixed in (0.0, 1.0):
            eff = efficiencies(n_m, heads, 132 * per_sm, fixed)
            print(f"{name:12s} fixed cost {fixed:.0f} tile: " + ", ".join(f"{k} {v:.3f}" for k, v in eff.items()))
