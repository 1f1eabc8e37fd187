"""Rounds 7, 10 and 11 of the sm90 forward (docs/attention.md), against cuDNN, timed alternately in one run:
round 7 the persistent warp-specialised kernel and the FMA-unit exp2 split (``--set round7``), round 10
the ws softmax's early rescale / tree reductions and three consumer warpgroups (``--set round10``), round 11
paired causal tiles and a register cap for D64 causal (``--set round11``).

    PYTHONPATH=src TILECRAFT_COMMIT=<hash> python benchmarks/attention_round7.py OUT_DIR [--deadline S] [--rounds R]
        [--shapes d128,d128c,d64,d64c,d256,d256c] [--set round7|...|round17|round17b]

Per shape: every candidate is first checked against the float64 reference on odd-length shapes
(``ba.check_forward``: B1, lengths 1000/17 and the timed one with two K/V head groups), then at the
timed shape itself on its first and last (batch, head) slices (which different programs of a
persistent grid compute), and each persistent config must equal its one-tile-per-program twin bit for
bit. Then ``--rounds`` rounds, each timing cuDNN and every candidate once (CUDA-graph replays over
rotated inputs larger than twice the L2, ``budget`` seconds each); the medians of the per-round
medians are compared. cuDNN's figure drifts by up to 8% between runs, so only the ratio within this
run counts. JSON after every shape; a deadline leaves what was done.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from tilecraft.bench import attention as ba
from tilecraft.bench.harness import git_commit, rotation_sets
from tilecraft.hardware.device import detect
from tilecraft.ops import attention as ops
from tilecraft.reference.attention import attention_reference

F = ops.FwdConfig


def W(n: int, stages: int = 2, overlap: bool = False, persistent: bool = False, poly: int = 0, consumers: int = 2,
      early: bool = False, tree: bool = False, paired: bool = False, pingpong: bool | int = True) -> ops.FwdConfig:
    """The warp-specialised ping-pong kernel (64 rows per consumer warpgroup)."""
    return F(64 * consumers, n, 4 * consumers, stages, True, gluon=True, overlap=overlap, ws=True, persistent=persistent,
             poly=poly, consumers=consumers, early=early, tree=tree, paired=paired, pingpong=pingpong)


def G(n: int, stages: int = 2, poly: int = 0) -> ops.FwdConfig:
    """The one-partition Gluon kernel (round 5), plain order."""
    return F(128, n, 8, stages, True, gluon=True, overlap=False, poly=poly)


# (label, B, H, S, D, causal): the shapes; candidates after the current default (index 0)
SHAPES = {"d128": (4, 16, 4096, 128, False), "d128c": (4, 16, 4096, 128, True), "d64": (8, 16, 2048, 64, False),
          "d64c": (8, 16, 2048, 64, True), "d256": (2, 16, 4096, 256, False), "d256c": (2, 16, 4096, 256, True),
          # round 17b: other lengths at D64 causal, for the group size rule (not the shapes)
          "d64c1k": (16, 16, 1024, 64, True), "d64c4k": (4, 16, 4096, 64, True), "d64c8k": (2, 16, 8192, 64, True)}
CANDIDATES = {
    "d128": [W(128, persistent=True), W(128, persistent=True, poly=1), W(128, poly=1)],
    "d128c": [W(128, persistent=True), W(128, persistent=True, poly=1), W(128, poly=1)],
    "d64": [G(128, poly=1), G(128, poly=2), W(128, persistent=True), W(128, persistent=True, poly=1)],
    "d64c": [G(64, 4), G(64, 4, poly=1), W(128, persistent=True), W(128, persistent=True, poly=1)],
    "d256": [W(64, persistent=True), W(64, overlap=True, poly=1)],
    "d256c": [W(64, persistent=True), W(64, overlap=True, poly=1)],
}
ET = {"early": True, "tree": True}
CANDIDATES10 = {
    "d128": [W(128, early=True), W(128, tree=True), W(128, **ET)],
    "d128c": [W(128, early=True), W(128, tree=True), W(128, **ET)],
    "d64": [W(128, **ET), W(128, consumers=3), W(128, consumers=3, **ET), W(128, 3, consumers=3, **ET),
            W(64, 3, consumers=3, **ET)],
    "d64c": [G(64, 4), W(128, consumers=3), W(128, consumers=3, **ET), W(64, 3, consumers=3, **ET),
             W(64, 4, consumers=3, **ET)],
    "d256": [W(64, overlap=True, tree=True), W(64, **ET)],
    "d256c": [W(64, overlap=True, tree=True), W(64, **ET)],
}
# the second call of round 10: the new defaults (index 0) against the old ones, and the overlap with the
# early conversion and trees, persistent tiles with them; D64 three consumers with each change alone
CANDIDATES10B = {
    "d128": [W(128), W(128, persistent=True, **ET), W(128, overlap=True, tree=True), W(128, overlap=True, **ET)],
    "d128c": [W(128), W(128, persistent=True, **ET), W(128, overlap=True, tree=True), W(128, overlap=True, **ET)],
    "d64": [W(128, consumers=3), W(128, consumers=3, tree=True), W(128, consumers=3, early=True)],
    "d256": [W(64, overlap=True), W(64, overlap=True, **ET)],
    "d256c": [W(64, overlap=True), W(64, overlap=True, **ET)],
}
# round 11: paired causal tiles (a program takes query tiles n_m - 1 - i and i: every program about the same
# work, no tail of long tiles) for D64 causal, where the Triton kernel is the default; the one-partition
# Gluon kernel with a 128-register cap (two programs per SM: causal compiled to 132 registers, one per SM).
# d64 and d128c: the defaults alone (the Gluon kernels were restructured: no regression expected)
P = {"paired": True}
CANDIDATES11 = {
    "d64c": [F(128, 64, 8, 3, **P), F(128, 64, 8, 3, True, **P), F(128, 128, 8, 2, True, gluon=True, overlap=False, maxnreg=128),
             F(128, 128, 8, 2, True, gluon=True, overlap=False, maxnreg=128, **P),
             F(128, 64, 8, 3, True, gluon=True, overlap=False, **P), F(128, 64, 8, 4, True, gluon=True, overlap=False, **P),
             G(64, 4), F(128, 64, 8, 2, True, gluon=True, overlap=True, **P)],
    "d64": [], "d128c": [],
}
# the second call of round 11: the first call's best D64 causal configs again, and paired tiles in the
# warp-specialised kernel at D128 / D256 causal (one program per SM there, so the tail matters more)
GP = dict(gluon=True, overlap=False, maxnreg=128, **P)
CANDIDATES11B = {
    "d64c": [F(128, 128, 8, 2, True, **GP), F(128, 128, 8, 3, True, **GP), F(128, 64, 8, 3, **P)],
    "d128c": [W(128, overlap=True, **ET, **P)],
    "d256c": [W(64, overlap=True, tree=True, **P), W(64, tree=True, **P)],
}
# round 16b: cuDNN's forward is persistent with 3 K/V stages in 232 KB: the persistent ws kernel at 3 stages
# (O through Q's buffer) beside the persistent 2-stage one; D64 with three consumers, persistent
CANDIDATES16B = {
    "d128": [W(128, persistent=True, **ET), W(128, 3, persistent=True, **ET), W(128, 3, **ET)],
    "d64": [W(128, consumers=3), W(128, consumers=3, persistent=True), G(128, 3)],
}
# round 16c: the round-16b winners on another card, and D64 causal on the persistent three-consumer kernel
CANDIDATES16C = {
    "d128": [W(128, 3, persistent=True, **ET)],
    "d64": [W(128, consumers=3, persistent=True), W(128, consumers=3, persistent=True, **ET)],
    "d64c": [W(128, consumers=3, persistent=True), W(128, consumers=3, persistent=True, **ET)],
}
# round 17: the causal tiles launched heaviest first inside groups of heads (``order``), against pairing: the
# D64 one-partition kernel (capped, unpaired), the ws kernels at D128 / D256 one tile per program, and
# persistent ws with the grouped order (its round-robin then hands each program tiles of similar weight)
CAP = dict(gluon=True, overlap=False, maxnreg=128)
CANDIDATES17 = {
    "d64c": [F(128, 128, 8, 2, True, **CAP, order=g) for g in (8, 16, 32, 128)],
    "d128c": [F(**{**W(128, overlap=True, **ET).as_dict(), "order": g}) for g in (4, 8, 16, 64)]
             + [F(**{**W(128, overlap=True, persistent=True, **ET).as_dict(), "order": 8})],
    "d256c": [F(**{**W(64, overlap=True, tree=True).as_dict(), "order": g}) for g in (4, 8, 32)],
}
# round 17b: the new D64 causal default (the group from the L2: 64 / 32 / 16 / 8 heads at S 1k / 2k / 4k / 8k)
# against the paired tiles it replaced and fixed groups either side, on another card and other lengths
PAIRED_CAP = F(128, 128, 8, 2, True, **CAP, paired=True)
CANDIDATES17B = {
    "d64c": [PAIRED_CAP] + [F(128, 128, 8, 2, True, **CAP, order=g) for g in (16, 64)],
    "d64c1k": [PAIRED_CAP] + [F(128, 128, 8, 2, True, **CAP, order=g) for g in (32, 128)],
    "d64c4k": [PAIRED_CAP] + [F(128, 128, 8, 2, True, **CAP, order=g) for g in (8, 32)],
    "d64c8k": [PAIRED_CAP] + [F(128, 128, 8, 2, True, **CAP, order=g) for g in (4, 16)],
}
# round 17c: D64 causal on the warp-specialised kernels with the grouped order (the persistent three-consumer
# kernel's 0.557 in round 16c was its round-robin meeting the same query tile in every head: 132 = 12 x 11)
AUTO = ops.ORDER_AUTO
CANDIDATES17C = {
    "d64c": [F(**{**W(128, consumers=3, persistent=True).as_dict(), "order": g}) for g in (AUTO, 8)]
            + [F(**{**W(128, consumers=3).as_dict(), "order": AUTO}),
               F(**{**W(128).as_dict(), "order": AUTO}), F(**{**W(128, overlap=True, **ET).as_dict(), "order": AUTO})],
}
# round 17e: D128 with three consumer warpgroups (192 query rows share each K/V tile: a third less L2-to-SM
# traffic per flop; 160 registers a consumer, no spills in the sm90 compile)
C3 = {"consumers": 3}
CANDIDATES17E = {
    "d128": [W(128, **C3), W(128, **C3, **ET), W(64, 3, **C3), W(64, 4, **C3), W(64, 3, **C3, **ET),
             W(128, **C3, persistent=True), W(64, 3, **C3, persistent=True)],
}
# round 20: the consumers' turns by named barriers (``pingpong=2``: bar.sync / bar.arrive, FlashAttention-3's
# warp-scheduler barriers) instead of mbarriers (each arrive a warpgroup bar.sync, each wait a try_wait loop), on
# every ws default, and on the persistent 3-stage D128 kernel (0.980 in round 16b)
NB = {"pingpong": 2}
_DEF = {name: ops.GLUON_FWD[(d, c)] for name, (_, _, _, d, c) in
        {"d128": SHAPES["d128"], "d128c": SHAPES["d128c"], "d64": SHAPES["d64"], "d256": SHAPES["d256"],
         "d256c": SHAPES["d256c"]}.items()}
CANDIDATES20 = {
    **{name: [F(**{**cfg.as_dict(), **NB})] for name, cfg in _DEF.items()},
    "d128": [F(**{**_DEF["d128"].as_dict(), **NB}), W(128, 3, persistent=True, **ET), W(128, 3, persistent=True, **ET, **NB),
             F(**{**_DEF["d128"].as_dict(), **NB, "overlap": True})],
}
# round 20b: the ring's slots released by named barriers too (``named_slots``: no warpgroup bar.sync in front
# of each release, no mbarrier wait in the loader)
NS = {"pingpong": 2, "named_slots": True}
CANDIDATES20B = {
    **{name: [F(**{**cfg.as_dict(), **NB}), F(**{**cfg.as_dict(), **NS})] for name, cfg in _DEF.items()},
    "d128": [F(**{**_DEF["d128"].as_dict(), **NB}), F(**{**_DEF["d128"].as_dict(), **NS}),
             F(**{**_DEF["d128"].as_dict(), **NS, "overlap": True})],
}
# round 20c: D128 with the intra-warpgroup overlap under named turns and slots (1.027 in round 20b, one run),
# beside each change alone, more rounds
_D128 = _DEF["d128"].as_dict()
CANDIDATES20C = {
    "d128": [F(**{**_D128, **NS, "overlap": True}), F(**{**_D128, **NB, "overlap": True}), F(**{**_D128, "overlap": True}),
             F(**{**_D128, **NS})],
}
# round 20d: the new defaults (index 0) against the defaults before round 20 (mbarrier turns and slots; D128 without
# the overlap)
_OLD = {"pingpong": True, "named_slots": False}
CANDIDATES20D = {name: [F(**{**cfg.as_dict(), **_OLD, **({"overlap": False} if name == "d128" else {})})]
                 for name, cfg in _DEF.items()}
# round 21: timed at each implementation's own clock state (``--settle``): the D256 default with the early
# rescale/conversion, persistent; D128 persistent at 3 stages, all with named turns and slots
_D256 = _DEF["d256"].as_dict()
CANDIDATES21 = {
    "d256": [F(**{**_D256, "early": True}), F(**{**_D256, "persistent": True}), F(**{**_D256, "overlap": False})],
    "d128": [F(**{**_D128, "persistent": True, "num_stages": 3, "named_slots": False}), F(**{**_D128, "persistent": True})],
}
# round 21b: FlashAttention-4's conditional rescaling (``lazy``) on every ws default (the defaults since)
CANDIDATES21B = {name: [F(**{**cfg.as_dict(), "lazy": True})] for name, cfg in _DEF.items()}
# round 21c: the new defaults (lazy) against the same configs rescaling every key tile
CANDIDATES21C = {name: [F(**{**cfg.as_dict(), "lazy": False})] for name, cfg in _DEF.items()}
# round 21d: the lazy rescale on the one-partition kernel of D64 causal
CANDIDATES21D = {"d64c": [F(**{**ops.GLUON_FWD[(64, True)].as_dict(), "lazy": True})]}
CANDIDATE_SETS = {"round21d": CANDIDATES21D, "round21c": CANDIDATES21C, "round21b": CANDIDATES21B, "round21": CANDIDATES21, "round20d": CANDIDATES20D, "round20": CANDIDATES20, "round20b": CANDIDATES20B, "round20c": CANDIDATES20C, "round17e": CANDIDATES17E, "round17": CANDIDATES17, "round17b": CANDIDATES17B, "round17c": CANDIDATES17C, "round7": CANDIDATES, "round16b": CANDIDATES16B, "round16c": CANDIDATES16C, "round10": CANDIDATES10, "round10b": CANDIDATES10B, "round11": CANDIDATES11,
                  "round11b": CANDIDATES11B}


def label(cfg: ops.FwdConfig) -> str:
    extra = ((" paired" if cfg.paired else "") + (f" maxnreg{cfg.maxnreg}" if cfg.maxnreg else "")
             + (f" order{'auto' if cfg.order == ops.ORDER_AUTO else cfg.order}" if cfg.order else ""))
    if not cfg.gluon:
        return f"triton{' tma' if cfg.tma else ''} {cfg.block_m}x{cfg.block_n} s{cfg.num_stages}" + extra
    kind = "ws-pp" if cfg.ws else "gluon"
    return (f"{kind} {cfg.block_m}x{cfg.block_n} s{cfg.num_stages}" + (" overlap" if cfg.overlap else "")
            + (" persistent" if cfg.persistent else "") + (f" poly{cfg.poly}" if cfg.poly else "")
            + (" early" if cfg.early else "") + (" tree" if cfg.tree else "")
            + (" named-turns" if cfg.pingpong == 2 else "" if cfg.pingpong else " no-turns")
            + (" named-slots" if cfg.named_slots else "") + (" lazy" if cfg.lazy else "") + extra)


def run_ours(cfg, causal):
    def run(q, k, v, out=None, lse=None):
        p = ops.validate(q, k, v, causal=causal, scale=None, layout="bhsd")
        out = torch.full_like(q, float("nan")) if out is None else out
        lse = torch.full((p.batch, p.heads, p.seqlen_q), float("nan"), device=q.device) if lse is None else lse
        ops.launch_fwd(q, k, v, out, lse, None, None, p, cfg)
        return out, lse
    return run


def check(cfg, shape: ba.Shape, twin, inputs) -> tuple[bool, str]:
    """Float64 on odd shapes and on two slices of the timed shape; persistent: bit-equal to its twin."""
    msgs = []
    run = run_ours(cfg, shape.causal)
    for s in (ba.Shape(1, 4, 2, 1000, 1000, shape.head_dim, shape.causal),
              ba.Shape(1, 2, 1, 300 if shape.causal else 17, 17, shape.head_dim, shape.causal),
              ba._check_shape(shape)):
        ok, err, msg = ba.check_forward(s, torch.bfloat16, lambda q, k, v: run(q, k, v))
        msgs.append(f"{s.seqlen_q}x{s.seqlen_k}:{err:.1e}")
        if not ok:
            return False, f"{s.label}: {msg}"
    q, k, v = inputs
    out, lse = run(q, k, v)
    torch.cuda.synchronize()
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return False, "NaN left in the timed shape's output"
    for sl in ((slice(0, 1), slice(0, 2)), (slice(-1, None), slice(-2, None))):
        ref_o, _ = attention_reference(q[sl], k[sl], v[sl], causal=shape.causal)
        err = ba.rel_error(out[sl], ref_o)
        msgs.append(f"slice:{err:.1e}")
        if not err <= ba.TOLERANCE[torch.bfloat16]:
            return False, f"timed shape slice {sl}: relative error {err:.2e}"
    if twin is not None:
        t_out, t_lse = run_ours(twin, shape.causal)(q, k, v)
        torch.cuda.synchronize()
        if not (torch.equal(out, t_out) and torch.equal(lse, t_lse)):
            return False, f"differs from {label(twin)} (max |diff| {(out.float() - t_out.float()).abs().max().item():.2e})"
        msgs.append("bit-equal to one-tile twin")
    return True, " ".join(msgs)


def shape_of(name: str) -> ba.Shape:
    b, h, s, d, causal = SHAPES[name]
    return ba.Shape(b, h, h, s, s, d, causal)


def check_job(name: str, cfg_dict: dict) -> tuple[bool, str]:
    """``check`` in a worker process (compiles land in the on-disk cache the timing process reads):
    the timed shape's first input set is drawn as the timing process draws it (seed 7)."""
    cfg = F(**cfg_dict)
    shape = shape_of(name)
    gen = torch.Generator(device="cuda").manual_seed(7)
    inputs = ba.make_inputs(shape, torch.bfloat16, "cuda", gen)
    # persistent / paired tiles and named-barrier turns compute the same products in the same order
    twin = (F(**{**cfg_dict, "persistent": False, "paired": False, "pingpong": True, "named_slots": False})
            if cfg.persistent or cfg.paired or cfg.pingpong == 2 or cfg.named_slots else None)
    try:
        return check(cfg, shape, twin, inputs)
    except Exception as exc:  # noqa: BLE001 - a compile or launch failure is a result here
        return False, f"{type(exc).__name__}: {exc}"[:400]


def time_job(name: str, cfg_dicts: list[dict], rounds: int, budget: float, settle: float = 0.0) -> dict:
    """In a fresh process: each config and cuDNN run once (synchronised, so a fault names its config),
    captured as CUDA graphs over rotated inputs, then ``rounds`` rounds timing each in turn (the order
    reversed every other round). {"ms": per config, "cudnn_ms"} or {"failed": index, "error"}."""
    from tilecraft.bench.harness import time_rotating

    shape = shape_of(name)
    info = detect()
    n_sets = rotation_sets(ba.attention_bytes(shape, 2), info.l2_bytes)
    gen = torch.Generator(device="cuda").manual_seed(7)
    sets = [ba.make_inputs(shape, torch.bfloat16, "cuda", gen) for _ in range(n_sets)]
    impls, keep = [], []
    for i, cd in enumerate(cfg_dicts):
        try:
            run = run_ours(F(**cd), shape.causal)
            outs = [run(*x) for x in sets]
            torch.cuda.synchronize()
            fn = lambda j, run=run, outs=outs: run(*sets[j], *outs[j])  # noqa: E731
            g = ba.graphed(fn, n_sets)
            torch.cuda.synchronize()
            if g is not None:
                g(0)
                torch.cuda.synchronize()
            # the graphs write into outs: keep them alive. (Without this, the next config's capture,
            # which begins with gc.collect() and empty_cache(), unmapped this config's outputs and
            # every replay but the last config's faulted: run 3 at 24e4014.)
            keep.append(outs)
            impls.append((i, g or fn))
        except Exception as exc:  # noqa: BLE001 - a fault or launch failure: reported, the parent retries
            return {"failed": i, "error": f"{type(exc).__name__}: {exc}"[:300]}
    sdpa = ba._sdpa("cudnn")
    fn = lambda j: sdpa(*sets[j], shape.causal)  # noqa: E731
    impls.append(("cudnn", ba.graphed(fn, n_sets) or fn))
    out = {"ms": [[] for _ in cfg_dicts], "cudnn_ms": []}
    for r in range(rounds):
        for key, fn in (impls if r % 2 == 0 else impls[::-1]):
            try:
                t = time_rotating(fn, n_sets, budget_s=budget, settle_s=settle).median_ms
            except Exception as exc:  # noqa: BLE001
                if key == "cudnn":
                    raise
                return {"failed": key, "error": f"timing round {r}: {type(exc).__name__}: {exc}"[:300]}
            (out["cudnn_ms"] if key == "cudnn" else out["ms"][key]).append(t)
    return out


def configs_of(name: str, cands: str = "round7") -> list[ops.FwdConfig]:
    shape = shape_of(name)
    default = ops.default_fwd_config(shape.head_dim, torch.device("cuda"), causal=shape.causal)
    return [default] + [c for c in CANDIDATE_SETS[cands][name] if c != default]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=200.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.12)
    ap.add_argument("--settle", type=float, default=0.0, help="untimed seconds before each timing (time_rotating)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--jobs", type=int, default=8, help="worker processes for the checks (and compiles)")
    ap.add_argument("--wait-for", type=int, default=0, help="a process id (e.g. GPU tests run beside the checks) "
                    "to wait for before timing")
    ap.add_argument("--check-deadline", type=float, default=110.0, help="seconds from the start for all checks")
    ap.add_argument("--set", default="round7", choices=sorted(CANDIDATE_SETS), help="the candidates")
    args = ap.parse_args()
    names = args.shapes.split(",")
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    jobs = [(n, i, c) for n in names for i, c in enumerate(configs_of(n, args.set))]
    pool = ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn"))
    futs = {(n, i): pool.submit(check_job, n, c.as_dict()) for n, i, c in jobs}
    checks, hung = {}, False
    for key, f in futs.items():
        try:
            checks[key] = f.result(timeout=max(1.0, args.check_deadline - (time.time() - T0)))
        except Exception as exc:  # noqa: BLE001 - a timeout (a kernel that never finishes?) or a dead worker
            checks[key] = (False, f"check did not finish: {type(exc).__name__} {exc}"[:200])
            hung = True
    if hung:  # end the workers (a hung kernel would keep the GPU busy under the timing)
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
    pool.shutdown(wait=not hung, cancel_futures=True)
    print(f"checks done in {time.time() - T0:.0f}s" + (" (some did not finish: workers killed)" if hung else ""),
          flush=True)
    for n, i, c in jobs:
        print(f"check {n:6s} {label(c):40s} ok={checks[(n, i)][0]} {checks[(n, i)][1]}", flush=True)
    while args.wait_for and Path(f"/proc/{args.wait_for}").exists() and time.time() - T0 < args.check_deadline + 30:
        time.sleep(1)
    print(f"timing from {time.time() - T0:.0f}s", flush=True)
    t0 = T0
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = detect()
    doc = {"device": info.as_dict(), "commit": git_commit(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "method": f"{args.rounds} rounds alternating cuDNN and each config, CUDA-graph replays, "
                     f"{args.budget}s per timing after {args.settle}s untimed; ratio = median over rounds", "shapes": []}
    import triton
    doc["triton"] = triton.__version__
    table = []
    for name in names:
        if time.time() - t0 > args.deadline:
            print(f"deadline: {name} skipped", flush=True)
            break
        b, h, s, d, causal = SHAPES[name]
        shape = shape_of(name)
        cfgs = configs_of(name, args.set)
        entry = {"shape": name, "B": b, "H": h, "S": s, "D": d, "causal": causal, "configs": [], "cudnn_ms": []}
        for i, cfg in enumerate(cfgs):
            ok, msg = checks[(name, i)]
            entry["configs"].append({"label": label(cfg), "config": cfg.as_dict(), "default": i == 0, "ok": ok,
                                     "check": msg, "ms": []})
        # each attempt in a fresh process: a config that faults (its error is sticky) is dropped and the
        # shape timed again without it
        todo = [i for i, c in enumerate(entry["configs"]) if c["ok"]]
        for _attempt in range(3):
            try:
                with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as one:
                    res = one.submit(time_job, name, [cfgs[i].as_dict() for i in todo], args.rounds,
                                     args.budget, args.settle).result()
            except Exception as exc:  # noqa: BLE001 - the process died (or cuDNN failed): no timing for the shape
                print(f"{name}: the timing process failed: {type(exc).__name__}: {exc}"[:300], flush=True)
                res = {"ms": [[] for _ in todo], "cudnn_ms": [float("nan")]}
                break
            if "failed" not in res:
                break
            bad = todo[res["failed"]]
            entry["configs"][bad].update(ok=False, check=entry["configs"][bad]["check"] + " | timing: " + res["error"])
            print(f"{name}: {entry['configs'][bad]['label']} failed in the timing process: {res['error']}", flush=True)
            todo.remove(bad)
        else:
            res = {"ms": [[] for _ in todo], "cudnn_ms": [float("nan")]}
        for i, ms in zip(todo, res["ms"]):
            entry["configs"][i]["ms"] = ms
        entry["cudnn_ms"] = res["cudnn_ms"]
        flops = ba.attention_flops(shape)
        cud = statistics.median(entry["cudnn_ms"])
        entry["cudnn_tflops"] = flops / cud / 1e9
        print(f"{name}: cuDNN {entry['cudnn_tflops']:.0f} TFLOP/s (rounds: "
              + " ".join(f"{flops / x / 1e9:.0f}" for x in entry["cudnn_ms"]) + ")", flush=True)
        for c in entry["configs"]:
            if c["ms"]:
                med = statistics.median(c["ms"])
                c["tflops"] = flops / med / 1e9
                c["ratio_cudnn"] = cud / med
                c["per_round_ratio"] = [a / x for a, x in zip(entry["cudnn_ms"], c["ms"])]
                line = (f"{name:6s} {c['label']:40s} {c['tflops']:6.0f} TFLOP/s  {c['ratio_cudnn']:.3f}x cuDNN  rounds "
                        + " ".join(f"{x:.3f}" for x in c["per_round_ratio"]) + (" (default)" if c["default"] else ""))
                print(line, flush=True)
                table.append(line)
        doc["shapes"].append(entry)
        (out_dir / f"attention-{args.set}.json").write_text(json.dumps(doc, indent=1, default=str))
    doc["wall_s"] = time.time() - t0
    (out_dir / f"attention-{args.set}.json").write_text(json.dumps(doc, indent=1, default=str))
    print("\n".join(table))
    print(f"done in {doc['wall_s']:.0f}s", flush=True)


T0 = time.time()
if __name__ == "__main__":
    main()
