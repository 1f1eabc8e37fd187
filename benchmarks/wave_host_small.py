"""Where ``simulate``'s time goes on small models (issue 7): ``tilecraft report`` timed ``simulate`` with the default
12-point CPML at 256**3 (20 steps, launched) at 1.6 ms a step, while the whole CPML step of a 512**3 model takes
1.0 ms of GPU time. This times ``simulate`` (``cube_shot``: a source, 101 receivers) at 128**3 and 256**3, 20 and
100 steps, launched, from CUDA graphs and as ``simulate`` chooses by default (None), with and without the CPML, and profiles one launched run's host path
(cProfile, the top functions by own time), in one run on one GPU.

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/wave_host_small.py --out DIR
        [--sizes 128,256] [--boundaries pml,none] [--steps 20,100] [--graphs off,on,auto] [--rounds 1]

``loop_seconds`` includes the captures of a graphed run (what a user of ``simulate`` waits for).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path

import torch

from tilecraft import wave
from tilecraft.bench.harness import git_commit
from tilecraft.bench.wave import cube_shot


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ap.add_argument("--sizes", default="128,256")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--boundaries", default="pml,none")
    ap.add_argument("--steps", default="20,100")
    ap.add_argument("--graphs", default="off,on,auto", help="off: launched, on: CUDA graphs, auto: simulate's choice")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for n in map(int, args.sizes.split(",")):
        model, src, rec = cube_shot(n)
        modes = {"off": False, "on": True, "auto": None}
        combos = [(b, modes[g], nt) for b in args.boundaries.split(",") for g in args.graphs.split(",")
                  for nt in map(int, args.steps.split(","))]
        for boundary, graphs, nt in [c for _ in range(args.rounds) for c in combos]:
            kw = dict(order=8, boundary=boundary, backend="triton", cuda_graphs=graphs)
            wave.simulate(model, src, rec, 2, **kw)
            res = wave.simulate(model, src, rec, nt, **kw)
            ms = res.info["loop_seconds"] / nt * 1e3
            rows.append({"n": n, "boundary": boundary, "cuda_graphs": graphs, "nt": nt, "ms_per_step": ms,
                         "graph_state": res.info.get("cuda_graphs")})
            print(f"{n}^3 {boundary:4s} graphs={graphs!s:5s} nt={nt:4d}: {ms:.3f} ms a step "
                  f"({res.info.get('cuda_graphs')})", flush=True)
        if n == 256 and not args.no_profile:
            kw = dict(order=8, boundary="pml", backend="triton", cuda_graphs=False)
            wave.simulate(model, src, rec, 2, **kw)
            prof = cProfile.Profile()
            torch.cuda.synchronize()
            prof.enable()
            res = wave.simulate(model, src, rec, 20, **kw)
            torch.cuda.synchronize()
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
            text = s.getvalue()
            print(text, flush=True)
            (args.out / "wave-host-small-profile.txt").parent.mkdir(parents=True, exist_ok=True)
            (args.out / "wave-host-small-profile.txt").write_text(text)
    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"-{git_commit()[:7]}"
    (args.out / f"wave-host-small{tag}.json").write_text(json.dumps(
        {"commit": git_commit(), "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows},
        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
