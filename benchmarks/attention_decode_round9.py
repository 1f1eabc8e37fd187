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
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

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
ROOT = Path(__file__).resolve().parent.parent


def warm(name: str) -> None:
    """Compile (and run once) candidate ``name`` at every timed shape and its check shape."""
    cfg = CANDIDATES[name]
    for s in DECODE_SHAPES:
        for shape in (s, ba._check_shape(s)):
            q, k, v = ba.make_inputs(shape, torch.bfloat16, "cuda")
            ba._ours_fwd(shape, cfg)(q, k, v)
    torch.cuda.synchronize()


def _only(name: str) -> str:
    """A pytest -k expression selecting candidate ``name``'s tests (not those of names containing it)."""
    return " and ".join([name] + [f"not {o}" for o in CANDIDATES if o != name and name in o])


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
    from tilecraft.bench.harness import stamp
    from tilecraft.hardware.ceilings import measure_copy_bandwidth
    from tilecraft.hardware.device import detect

    env = dict(os.environ, TILECRAFT_GPU_TESTS="1")
    logs = Path(tempfile.mkdtemp(prefix="round9-"))  # gathered into one file under OUT (few files come back)
    procs = []
    for name, cfg in CANDIDATES.items():
        if cfg is not None:
            log = open(logs / f"gpu-tests-{name}.log", "w")
            procs.append((f"tests {name}", subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", _only(name),
                 str(ROOT / "tests/gpu/test_attention_decode_gluon.py")], stdout=log, stderr=subprocess.STDOUT, env=env)))
        procs.append((f"warm {name}", subprocess.Popen([sys.executable, __file__, a.out, "--warm", name],
                                                       stdout=subprocess.DEVNULL, stderr=open(logs / f"warm-{name}.log", "w"))))
    api = open(logs / "gpu-tests-api.log", "w")
    procs.append(("tests api", subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "public_api or cuda_graph",
         str(ROOT / "tests/gpu/test_attention_decode_gluon.py")], stdout=api, stderr=subprocess.STDOUT, env=env)))
    for label, pr in procs:
        try:
            pr.wait(timeout=max(1.0, a.phase1 - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            pr.kill()
            print(f"{label}: killed at the phase-1 limit", flush=True)
        print(f"{label}: rc={pr.returncode}", flush=True)
    # a candidate whose warm-up crashed (an illegal address would poison this process's context) is not timed
    timed = {n: c for n, c in CANDIDATES.items() if n == "dispatch" or dict(procs)[f"warm {n}"].returncode == 0}
    with open(out / f"attention-decode-round9-tests-{commit}.log", "w") as gathered:
        for f in sorted(logs.iterdir()):
            text = f.read_text().strip()
            gathered.write(f"===== {f.name}\n{text}\n")
            if f.name.startswith("gpu-tests"):
                print(f"{f.stem}: {text.splitlines()[-1] if text else '(empty)'}", flush=True)
            elif text:
                print(f"{f.stem}: {text.splitlines()[-1][:200]}", flush=True)
    print(f"phase 1 done at {time.time() - t0:.0f}s", flush=True)

    info = detect()
    copy = measure_copy_bandwidth()
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "copy_TBps": copy,
           "device": info.as_dict(), "records": [], "summary": {}}
    print(f"copy {copy:.3f} TB/s", flush=True)

    def save():
        (out / f"attention-decode-round9-{commit}.json").write_text(json.dumps(doc, indent=1, default=str))

    table: dict[str, dict[str, list[float]]] = {}
    names = list(timed) + ["sdpa-cudnn"]
    for s in DECODE_SHAPES:
        nbytes = ba.attention_bytes(s, 2)
        table[s.label] = {n: [] for n in names}
        for rnd in range(a.rounds):
            order = list(timed.items()) if rnd % 2 == 0 else list(timed.items())[::-1]
            for i, (name, cfg) in enumerate(order):
                if time.time() - t0 > a.deadline:
                    break
                backends = ("cudnn",) if i == 0 else ()
                res = ba.measure(s, torch.bfloat16, "fwd", backends=backends, fwd=cfg, budget_s=a.budget,
                                 l2_bytes=info.l2_bytes)
                recs = stamp(ba.records_for(s, "bf16", "fwd", res, copy, cfg.as_dict() if cfg else {"dispatch": True}), info)
                for r, t in zip(recs, res):
                    r.case["candidate"] = name if t.impl == "tilecraft" else t.impl
                    r.case["round"] = rnd
                    doc["records"].append(r.as_dict())
                for t in res:
                    key = name if t.impl == "tilecraft" else t.impl
                    if t.ok and t.time_ms:
                        table[s.label][key].append(nbytes / (t.time_ms * 1e-3) / 1e12 / copy)
                    elif t.impl == "tilecraft" or not t.ok:
                        print(f"{s.label} {key}: ok={t.ok} err={t.rel_error} {t.message[:160]}", flush=True)
                save()
                torch.cuda.empty_cache()
        print(f"{s.label}: " + " ".join(f"{n} {100 * statistics.median(v):.1f}%" for n, v in table[s.label].items() if v)
              + f" ({time.time() - t0:.0f}s)", flush=True)
    doc["summary"] = {lab: {n: (statistics.median(v) if v else None) for n, v in row.items()} for lab, row in table.items()}
    save()
    print("\n% of copy (median over rounds)")
    print(f"{'shape':26s}" + "".join(f"{n[:10]:>11s}" for n in names))
    for lab, row in table.items():
        print(f"{lab:26s}" + "".join(f"{100 * statistics.median(v):10.1f}%" if v else f"{'-':>11s}" for v in row.values()))
    print(f"total {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
