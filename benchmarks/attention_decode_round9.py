"""Round 9 (decode): the Triton split-KV kernel merging its own chunks (``DecodeConfig(fuse=True)``:
the last program of each row tile to finish, no combine kernel) against the dispatch and cuDNN, one GPU call.

    python benchmarks/attention_decode_round9.py OUT [--budget 0.1] [--rounds 3] [--deadline 170]

1. In parallel: the GPU tests (tests/gpu/test_attention_decode_gluon.py: each fused candidate against
   float64 at odd shapes with poisoned outputs, the public-API dispatch tests, the CUDA-graph replay
   of the fused launch) and one warm-up process per candidate (compiles it at the timed shapes).
2. The copy bandwidth, then per decode shape of the issue (``ba.ISSUE_SHAPES``) every candidate, the
   dispatch (what ``tilecraft.attention`` runs) and SDPA's cuDNN, ``--rounds`` rounds in alternating
   order (each case checked against float64 first by ``ba.measure``; medians of CUDA-graph replays).
JSON under OUT as it goes; a short table last.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

import decode_rounds as dr
from tilecraft.bench import attention as ba
from tilecraft.ops import attention as ops

D = ops.DecodeConfig
#: name -> config; "dispatch" (None) is what ``tilecraft.attention`` runs at this commit
CANDIDATES = {
    "dispatch": None,
    "f64s4p1": D(64, 4, 4, programs_per_sm=1, fuse=True),
    "f64s5p1": D(64, 4, 5, programs_per_sm=1, fuse=True),
    "f64s3": D(64, 4, 3, fuse=True),
    "f64s4p1w8": D(64, 8, 4, programs_per_sm=1, fuse=True),
}
#: the target (S_q = 16) first: it is timed whatever the deadline leaves
DECODE_SHAPES = sorted((s for s in ba.ISSUE_SHAPES if ba.is_decode(s)), key=lambda s: -s.seqlen_q)


def warm(name: str) -> None:
    """Compile (and run once) candidate ``name`` at every timed shape and its check shape."""
    cfg = CANDIDATES[name]
    for s in DECODE_SHAPES:
        for shape in (s, ba._check_shape(s)):
            q, k, v = ba.make_inputs(shape, torch.bfloat16, "cuda")
            ba._ours_fwd(shape, cfg)(q, k, v)
    torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=170.0, help="seconds; stop timing new cases after this")
    ap.add_argument("--phase1", type=float, default=80.0, help="seconds for the tests and warm-ups")
    ap.add_argument("--warm", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.warm:
        warm(a.warm)
        return
    t0 = time.time()
    out = Path(a.out)
    commit = os.environ.get("TILECRAFT_COMMIT", "unknown")
    from tilecraft.hardware.ceilings import measure_copy_bandwidth
    from tilecraft.hardware.device import detect

    env = dict(os.environ, TILECRAFT_GPU_TESTS="1")
    logs = Path(tempfile.mkdtemp(prefix="round9-"))
    tests = "tests/gpu/test_attention_decode_gluon.py"
    procs = []
    for name, cfg in CANDIDATES.items():
        if cfg is not None:
            procs.append(dr.pytest_proc(name, dr.only(name, CANDIDATES), tests, logs, env))
        procs.append(dr.warm_proc(__file__, a.out, name, logs))
    procs.append(dr.pytest_proc("api", "public_api or cuda_graph", tests, logs, env))
    rc = dr.finish_phase1(procs, t0, a.phase1, logs, out / f"attention-decode-round9-tests-{commit}.log")
    # a candidate whose warm-up crashed (an illegal address would poison this process's context) is not timed
    timed = {n: c for n, c in CANDIDATES.items() if n == "dispatch" or rc[f"warm {n}"] == 0}

    info = detect()
    copy = measure_copy_bandwidth()
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "copy_TBps": copy,
           "device": info.as_dict(), "records": [], "summary": {}}
    print(f"copy {copy:.3f} TB/s", flush=True)
    save = dr.saver(out / f"attention-decode-round9-{commit}.json", doc)
    table = dr.time_rounds(DECODE_SHAPES, timed, ("cudnn",), a.rounds, a.budget, a.deadline, t0, copy, info, doc, save)
    dr.summarize(table, doc, save, t0)


if __name__ == "__main__":
    main()
