"""Which launch of the CPML step pays for writing p_next over p_prev (2026-11-28: the whole step in place
ran 8% slower than into a third array on an H200, ``benchmarks/wave_steady.py``)? Runs the default step
(512**3 + 20-point CPML, fp32 order 8) ``--warm`` times in the chosen mode, then one step inside the NVTX
range "step" for Nsight Compute to profile launch by launch:

    ncu --nvtx --nvtx-include "step/" --metrics gpu__time_duration.sum,dram__bytes_read.sum,... \\
        python benchmarks/wave_inplace_ncu.py --mode in_place|third

``in_place``: out is p_prev (``simulate(in_place=True)``); ``third``: out is a third array
(``simulate``'s default since 2026-11-28). The float64 check of the same step is ``wave_steady.py``'s.
"""
from __future__ import annotations

import argparse
import sys

import torch

from tilecraft.bench.wave import _copy_axes, parts_state
from tilecraft.ops import wave as ops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("in_place", "third"), required=True)
    ap.add_argument("--warm", type=int, default=4)
    ap.add_argument("--width", type=int, default=20, help="CPML width in points (the library's default is 12)")
    args = ap.parse_args()
    st = parts_state(width=args.width)
    axes = _copy_axes(st.axes0)
    bufs = [st.p.clone(), st.pp.clone(), torch.zeros_like(st.pp)]

    def step():
        out = bufs[1] if args.mode == "in_place" else bufs[2]
        ops.cpml_step(bufs[0], bufs[1], st.m, out, 8, st.spacing, st.lo, st.hi, axes, "triton")
        for ax in axes:
            ax.swap()
        bufs[:] = [bufs[1], bufs[0], bufs[2]] if args.mode == "in_place" else [bufs[2], bufs[0], bufs[1]]

    for _ in range(args.warm):
        step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("step")
    step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"mode {args.mode}: finite {bool(torch.isfinite(bufs[0]).all())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
