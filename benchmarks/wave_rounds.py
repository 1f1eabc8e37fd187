"""What the wave round scripts (``wave_graph_bench.py``, ``wave_streams_bench.py``) share: the run's
start (a GPU, the device, the copy bandwidth of the same run) and the table they print at the end:
per label the rounds' times, their median, the fraction of the copy bandwidth measured in the same
run (and GPts/s), and the correctness check each record carries."""
from __future__ import annotations

import statistics
import sys

import torch

from tilecraft.hardware.ceilings import measure_copy_bandwidth
from tilecraft.hardware.device import detect


def say(message: str) -> None:
    print(message, flush=True)


def start():
    """(device info, copy bandwidth in TB/s measured now), or None without a GPU (said on stderr)."""
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return None
    info = detect()
    copy = measure_copy_bandwidth()
    say(f"copy {copy:.3f} TB/s")
    return info, copy


def print_groups(groups: dict[str, list], copy: float, copy2: float, *, key_width: int = 44,
                 rounds_width: int = 30, gpts: bool = False) -> None:
    print(f"\ncopy {copy:.3f} / {copy2:.3f} TB/s (start/end)")
    print(f"{'what':<{key_width}}{'rounds ms':>{rounds_width}}{'median':>9}{'%copy':>7}"
          + (f"{'GPts/s':>8}" if gpts else "") + "  check")
    for key, rs in groups.items():
        ok = all(r.extra.get("ok", True) for r in rs)
        ms = [r.extra["time_ms"] for r in rs]
        med = statistics.median(ms)
        fom = rs[0].extra["bytes"] / (med * 1e-3) / 1e12
        check = (f"err {max(r.extra.get('error', 0) for r in rs):.1e}" if "error" in rs[0].extra else
                 f"same bits {[r.extra.get('same_record_bits') for r in rs]}" if "same_record_bits" in rs[0].extra
                 else "")
        rate = f"{rs[0].extra['points'] / (med * 1e-3) / 1e9:>8.1f}" if gpts else ""
        print(f"{key:<{key_width}}{' '.join(f'{t:.3f}' for t in ms):>{rounds_width}}{med:>9.3f}"
              f"{fom / copy * 100:>7.1f}{rate}  "
              + (check if ok else f"FAILED {rs[0].extra.get('message', rs[0].extra.get('error'))}"))
