"""Round 8 (decode): the Gluon split-KV kernel against the Triton one, cuDNN and FA2, on one GPU call.

    python benchmarks/attention_decode_round8.py OUT [--budget 0.1] [--rounds 2] [--deadline 200]

1. In parallel: the GPU tests of the Gluon decode kernel (tests/gpu/test_attention_decode_gluon.py,
   one pytest process per candidate: every candidate against float64 at odd shapes, outputs poisoned),
   the Gluon forward's float64 tests (its loops now share two helpers with the decode kernel), and one
   warm-up process per candidate (compiles it at the timed shapes, so the timing phase
   does not wait for compilers).
2. The copy bandwidth, then per decode shape of the issue (``ba.ISSUE_SHAPES``) every candidate and
   the default (each checked against float64 first by ``ba.measure``) and SDPA's cuDNN and flash
   backends, ``--rounds`` rounds in alternating order (medians of CUDA-graph replays per round).
3. The combine kernel alone at the default's split count (what the second kernel costs).
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
#: name -> config; "triton" is the default before this round
CANDIDATES = {
    "triton": D(64, 4, 3),
    "t64s4x2": D(64, 4, 4, splits=2),
    "g64s3": D(64, 4, 3, gluon=True),
    "g64s3o": D(64, 4, 3, gluon=True, overlap=True),
    "g32s4": D(32, 4, 4, gluon=True),
    "g32s4o": D(32, 4, 4, gluon=True, overlap=True),
    "g64s6x2": D(64, 4, 6, splits=2, gluon=True),
    "g32s6": D(32, 4, 6, gluon=True),
}
DECODE_SHAPES = [s for s in ba.ISSUE_SHAPES if ba.is_decode(s)]


def warm(name: str) -> None:
    """Compile (and run once) candidate ``name`` at every timed shape and its check shape."""
    cfg = CANDIDATES[name]
    for s in DECODE_SHAPES:
        for shape in (s, ba._check_shape(s)):
            q, k, v = ba.make_inputs(shape, torch.bfloat16, "cuda")
            ba._ours_fwd(shape, cfg)(q, k, v)
    torch.cuda.synchronize()


def combine_only(s: ba.Shape, splits: int, budget: float) -> float:
    """Median ms of the combine kernel alone on random partials of ``splits`` chunks (graph replays)."""
    q, k, v = ba.make_inputs(s, torch.bfloat16, "cuda")
    p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
    bd = ops.block_d(s.head_dim)
    o_part = torch.randn((splits, s.batch, s.heads, s.seqlen_q, bd), device="cuda")
    l_part = torch.randn((splits, s.batch, s.heads, s.seqlen_q), device="cuda")
    out = torch.empty_like(q)
    lse = torch.empty(s.batch, s.heads, s.seqlen_q, device="cuda")

    def run(_i):
        ops._k.attention_combine_kernel[(s.batch * s.heads * s.seqlen_q,)](
            o_part, l_part, out, lse, *ops._bhsd_strides(out, p.layout), *ops._lse_strides(lse, False),
            l_part.stride(0), s.heads, s.seqlen_q, splits, HEAD_DIM=s.head_dim, BLOCK_D=bd,
            BLOCK_S=max(2, 1 << (splits - 1).bit_length()), num_warps=4 if bd >= 128 else 2)
    ms, _ = ba._time(run, 1, "cuda", budget, True)
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=200.0, help="seconds; stop timing new cases after this")
    ap.add_argument("--phase1", type=float, default=100.0, help="seconds for the tests and warm-ups")
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
    logs = Path(tempfile.mkdtemp(prefix="round8-"))  # gathered into one file under OUT (few files come back)
    tests = "tests/gpu/test_attention_decode_gluon.py"
    procs = []
    for name, cfg in CANDIDATES.items():
        if cfg.gluon:
            procs.append(dr.pytest_proc(name, dr.only(name, CANDIDATES), tests, logs, env))
        procs.append(dr.warm_proc(__file__, a.out, name, logs))
    procs.append(dr.pytest_proc("api", "public_api", tests, logs, env))
    # the Gluon forward's loops now share _qk_issue/_pv_issue with the decode kernel: its float64 tests too
    procs.append(dr.pytest_proc("fwd", "test_gluon_forward_matches_float64", "tests/gpu/test_attention_gluon.py",
                                logs, env))
    rc = dr.finish_phase1(procs, t0, a.phase1, logs, out / f"attention-decode-round8-tests-{commit}.log")
    # a candidate whose warm-up crashed (an illegal address would poison this process's context) is not timed
    timed = {n: c for n, c in CANDIDATES.items() if n == "triton" or rc[f"warm {n}"] == 0}

    info = detect()
    copy = measure_copy_bandwidth()
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "copy_TBps": copy,
           "device": info.as_dict(), "records": [], "combine_only_ms": {}, "summary": {}}
    print(f"copy {copy:.3f} TB/s", flush=True)
    save = dr.saver(out / f"attention-decode-round8-{commit}.json", doc)
    table = dr.time_rounds(DECODE_SHAPES, timed, ("cudnn", "flash"), a.rounds, a.budget, a.deadline, t0, copy, info,
                           doc, save)
    for s in DECODE_SHAPES:
        if time.time() - t0 > a.deadline + 15:
            break
        q, k, v = ba.make_inputs(s, torch.bfloat16, "cuda")
        p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
        splits = ops.decode_splits(p, CANDIDATES["triton"], q.device)[0]
        ms = combine_only(s, splits, a.budget)
        doc["combine_only_ms"][s.label] = {"splits": splits, "ms": ms}
        print(f"combine alone {s.label} ({splits} splits): {1000 * ms:.1f} us", flush=True)
    dr.summarize(table, doc, save, t0)


if __name__ == "__main__":
    main()
