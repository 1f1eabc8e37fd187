"""The wave step's interior as the cp.async ring with p_prev and m in the ring's slots (2026-11-28) against the
register-window interior (zwin): each configuration's whole CPML step is first checked bit for bit against
zwin's (512**3 model + 20-point CPML, fp32 order 8), then the GPU time of its interior launch and of the whole
step on one stream are taken from the profiler (``cpml_parts``, median of 20 steps), two rounds in turn.

    PYTHONPATH=src python benchmarks/wave_ring_ab.py --out DIR [--configs 32x64w16d3s0,16x64w8d3s2,...]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

from tilecraft.bench.harness import write_results
from tilecraft.bench.wave import CPML_CONFIGS, _copy_axes, cpml_parts, parts_state
from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig


def ring(name: str) -> WaveConfig:
    """``32x64w16d3s2`` (tile, warps, planes ahead, slack slots; ``z32``: planes per program)."""
    m = re.fullmatch(r"(\d+)x(\d+)w(\d+)d(\d+)s(\d+)(?:z(\d+))?", name)
    by, bx, w, d, s, z = m.groups()
    return WaveConfig(block_y=int(by), block_x=int(bx), block_z=int(z or 64), num_warps=int(w), kernel="smem",
                      ahead=int(d), slack=int(s))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--configs", default="32x64w16d3s0,32x64w16d2s1,16x64w8d3s2,32x32w8d3s2,16x64w8d4s2")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    st = parts_state()
    info, copy, lo, hi, spacing, p, pp, m, axes0 = st.info, st.copy, st.lo, st.hi, st.spacing, st.p, st.pp, st.m, st.axes0
    march = CPML_CONFIGS[0]
    cfgs = {"zwin": ops.default_config(torch.float32, 8, p.device)}
    for name in args.configs.split(","):
        cfg = ring(name)
        why = ops.smem_step_ok(p, 8, lo, hi, None, cfg)
        if why:
            print(f"  {name}: {why}", flush=True)
            continue
        cfgs[name] = cfg
    # bits: the whole CPML step with each interior against zwin's
    ref = None
    for name, cfg in cfgs.items():
        axes = _copy_axes(axes0)
        out = torch.full_like(p, float("nan"))
        ops.cpml_step(p, pp, m, out, 8, spacing, lo, hi, axes, "triton", cfg, march)
        torch.cuda.synchronize()
        if ref is None:
            ref = (out, axes)
        else:
            same = torch.equal(out.nan_to_num(7.0), ref[0].nan_to_num(7.0))
            print(f"  {name}: step bits equal to zwin: {same}", flush=True)
            if not same:
                del cfgs[name]
    records = []
    for rnd in range(args.rounds):
        for name, cfg in cfgs.items():
            recs = cpml_parts(p, pp, m, torch.empty_like(p), 8, spacing, lo, hi, axes0, march, cfg,
                              {"interior": name, "round": rnd + 1}, copy, say=lambda s: None)
            total = sum(r.extra["time_ms"] for r in recs)
            inner = [r for r in recs if r.case["variant"] == "part-interior"]
            print(f"  round {rnd + 1} {name:14s} interior {inner[0].extra['time_ms']:.4f} ms "
                  f"({inner[0].ours / copy:6.1%} of copy)  all launches {total:.4f} ms", flush=True)
            records += recs
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(records, "wave.ring_ab", args.out / "wave-ring-ab.json", info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
