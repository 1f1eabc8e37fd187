"""GEMM suites: tilecraft.matmul against the torch call for the same dtype, shape and transpose.

Peers (measured in the same run): ``torch.matmul`` (fp16, bf16, fp64; fp32 with TF32 off, and
with TF32 on for ``precision="tf32"``), ``torch._int_mm`` (int8), ``torch._scaled_mm`` (fp8).
Every case is checked against the float64 reference (output poisoned first) before it is timed.

Timing: each timed call is one replay of a CUDA graph holding ``reps`` calls that cycle through
several input sets (their total larger than twice the L2, so caches do not flatter), bracketed
by events; time per call = replay time / reps, median over replays (``time_rotating``). The graph
takes Python's launch cost out of both sides, which matters for the microsecond small-M cases.

Layouts: ``"NN"``, ``"NT"``, ``"TN"``, ``"TT"`` as in BLAS: the first letter says whether A is
given transposed (a (K, M) row-major buffer viewed as (M, K)), the second the same for B (an
(N, K) buffer viewed as (K, N)).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tilecraft.bench import INTERPRETER_LABEL
from tilecraft.bench.harness import Record, Timing, rotation_sets, time_rotating
from tilecraft.hardware.device import DeviceInfo
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig
from tilecraft.tuning.measure import calls_graph

DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32,
    "fp32-accurate": torch.float32, "fp64": torch.float64, "int8": torch.int8,
    "fp8": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
}
PRECISION = {"fp32": "ieee", "tf32": "tf32", "fp32-accurate": "fp32-accurate"}
DATASHEET_KEY = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "tf32": "tf32", "fp32-accurate": "tf32",
                 "fp64": "fp64", "int8": "int8", "fp8": "fp8", "fp8_e5m2": "fp8"}
LAYOUTS = ("NN", "NT", "TN", "TT")
# Layout each peer takes without a copy: cuBLASLt's int8 and fp8 kernels want A row-major and B
# column-major ("NT"); the suites give those dtypes that layout (ours runs the same inputs).
PEER_LAYOUT = {"int8": "NT", "fp8": "NT", "fp8_e5m2": "NT"}

SUITES: dict[str, list[tuple[int, int, int]]] = {
    "square": [(8192, 8192, 8192), (4096, 4096, 4096)],
    "llm": [(m, n, k) for m in (1, 16, 128, 4096) for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008),
                                                                  (14336, 4096), (4096, 14336))],
    "odd": [(1000, 1000, 1000), (3000, 7000, 5000), (997, 1009, 1013), (4099, 4111, 4127), (8191, 8191, 8191)],
    "smallm": [(m, nk, nk) for m in (1, 16, 32, 64) for nk in (4096, 8192)],
    # a matrix times a few vectors (W x): the small-M stream run transposed (docs/gemm.md follow-up 35)
    "smalln": [(mk, n, mk) for n in (1, 16, 32, 64) for mk in (4096, 8192)],
    # prefill / micro-batch rows through an LLM's linear layers (use --layouts NT for x Wᵀ)
    "prefill": [(m, n, k) for m in (256, 512, 1024, 2048) for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008),
                                                                           (14336, 4096))],
    # a training step's weight gradients: dW = xᵀ dY, an inner dimension of tokens (TN with --layouts TN)
    "train": [(4096, 4096, 512), (4096, 4096, 2048), (4096, 11008, 512), (11008, 4096, 512), (8192, 8192, 2048)],
}
SUITES["all"] = SUITES["square"] + SUITES["llm"] + SUITES["odd"] + SUITES["smallm"]


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * m * n * k * batch


def gemm_bytes(m: int, n: int, k: int, in_size: int, out_size: int, batch: int = 1) -> int:
    """Least bytes a GEMM moves: A and B read once, the output written once."""
    return batch * ((m * k + k * n) * in_size + m * n * out_size)


def make_operands(m: int, n: int, k: int, dtype: str, layout: str, device: str | torch.device,
                  gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random operands (uniform [-1, 1); int8 uniform in [-64, 64)) in the given layout."""
    dt = DTYPES[dtype]
    shape_a = (k, m) if layout[0] == "T" else (m, k)
    shape_b = (n, k) if layout[1] == "T" else (k, n)

    def rnd(shape):
        if dt == torch.int8:
            return torch.randint(-64, 64, shape, device=device, dtype=torch.int8, generator=gen)
        x = torch.rand(shape, device=device, dtype=torch.float32, generator=gen).mul_(2).sub_(1)
        return x.to(dt)
    a, b = rnd(shape_a), rnd(shape_b)
    return (a.t() if layout[0] == "T" else a), (b.t() if layout[1] == "T" else b)


def call_kwargs(dtype: str, m: int, n: int, device) -> dict:
    """The matmul keyword arguments of a suite case (fp8: per-tensor scales, bf16 out)."""
    kw: dict = {}
    if dtype in PRECISION:
        kw["precision"] = PRECISION[dtype]
    if dtype.startswith("fp8"):
        kw.update(scale_a=torch.tensor(0.5, device=device), scale_b=torch.tensor(2.0, device=device),
                  out_dtype=torch.bfloat16)
    return kw


def peer(dtype: str, a: torch.Tensor, b: torch.Tensor, kw: dict) -> tuple[str, Callable[[], torch.Tensor]]:
    """The torch call ours is compared with, for these operands."""
    if dtype == "int8":
        return "torch._int_mm", lambda: torch._int_mm(a, b)
    if dtype.startswith("fp8"):
        sa, sb = kw["scale_a"], kw["scale_b"]
        return "torch._scaled_mm", lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    if dtype in ("fp32", "fp32-accurate"):
        return "torch.matmul (TF32 off)", lambda: _with_tf32(False, a, b)
    if dtype == "tf32":
        return "torch.matmul (TF32 on)", lambda: _with_tf32(True, a, b)
    return "torch.matmul", lambda: torch.matmul(a, b)


def _with_tf32(on: bool, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def time_graph(calls: Sequence[Callable[[], object]], device, *, reps: int | None = None,
               budget_s: float = 0.5, est_ms: float | None = None, settle_s: float = 0.0) -> Timing:
    """Per-call time of ``calls`` (one per input set) replayed from a CUDA graph, ``reps`` calls per
    replay cycling through the sets; median over replays. The calls must not tune or compile
    (run each once before)."""
    n = len(calls)
    if reps is None:
        reps = n * max(1, math.ceil(0.2 / max(est_ms or 0.2, 1e-3) / n)) if est_ms is not None else n * 4
        reps = min(reps, 512)
    graph = calls_graph(list(calls), device, reps)
    t = time_rotating(lambda _i: graph.replay(), 1, device=device, warmup=2, min_runs=5, budget_s=budget_s,
                      settle_s=settle_s)
    return Timing(median_ms=t.median_ms / reps, min_ms=t.min_ms / reps, max_ms=t.max_ms / reps, runs=t.runs * reps,
                  spread=t.spread, host_ms=t.host_ms / reps if t.host_ms is not None else None)


@dataclass
class Case:
    dtype: str
    m: int
    n: int
    k: int
    layout: str = "NN"
    batch: int = 1

    @property
    def name(self) -> str:
        return f"{self.dtype} {self.layout} {self.m}x{self.n}x{self.k}"


def check(case: Case, a: torch.Tensor, b: torch.Tensor, kw: dict, cfg: GemmConfig | None = None
          ) -> tuple[bool, float, torch.Tensor]:
    """One call of ours into a poisoned output (NaN, or -1 for integer results), against the float64
    reference: an element the kernels leave unwritten fails the check."""
    spec = ops.validate(a, b, **kw)
    sa, sb = kw.get("scale_a"), kw.get("scale_b")
    chosen = cfg or ops.choose_config(a, b, spec, scale_a=sa, scale_b=sb)
    out = torch.full(spec.out_shape, float("nan") if spec.out_dtype.is_floating_point else -1, dtype=spec.out_dtype,
                     device=a.device)
    ops.launch(a, b, out, spec, chosen, scale_a=sa, scale_b=sb)
    ref = matmul_reference(a, b, out_dtype=torch.float64 if spec.out_dtype.is_floating_point else torch.int64,
                           scale_a=kw.get("scale_a"), scale_b=kw.get("scale_b"))
    err = relative_error(out, ref)
    key = {"fp32": "fp32-ieee", "fp8": "fp8_e4m3"}.get(case.dtype, case.dtype)
    tol = TOLERANCES[key]
    if out.dtype in (torch.bfloat16, torch.float16):
        tol = max(tol, 1e-2 if out.dtype == torch.bfloat16 else 2e-3)
    return err <= tol, err, out


def timed_rounds(time_ours: Callable[[], Timing], time_peer: Callable[[], Timing] | None, rounds: int
                 ) -> tuple[list[Timing], list[Timing]]:
    """``rounds`` rounds of timing, each round both sides: ours first in even rounds, the peer first in odd
    ones. At the power cap whoever is timed right after the other can start on a clock the other left behind
    (docs/attention.md, Round 21), so the order alternates. ``time_peer`` None: ours alone."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    ours: list[Timing] = []
    peer: list[Timing] = []
    for r in range(rounds):
        if time_peer is not None and r % 2 == 1:
            peer.append(time_peer())
        ours.append(time_ours())
        if time_peer is not None and r % 2 == 0:
            peer.append(time_peer())
    return ours, peer


def run_case(case: Case, info: DeviceInfo, *, copy_TBps: float | None = None, cfg: GemmConfig | None = None,
             budget_s: float = 0.5, say: Callable[[str], None] = lambda _m: None,
             peer_ms: float | None = None, rounds: int = 1, settle_s: float = 0.0) -> Record:
    """Check, then time ours and the peer on one case; a Record with both, the ratio and the
    datasheet peak. ``cfg`` pins our configuration (else tuned/heuristic as matmul would);
    ``peer_ms`` reuses a peer time measured earlier in the same run (config sweeps). ``rounds`` > 1:
    both timed that many times in alternating order (:func:`timed_rounds`), the medians of the rounds
    reported and each round's times and ratio kept in ``extra``. ``settle_s``: each side replays its graph
    untimed that long before each timing (``harness.SETTLE_S`` in the bench command and the report), so at
    the power cap it is timed in its own clock state, not in the transient the other side left."""
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1234)
    layout = PEER_LAYOUT.get(case.dtype, case.layout)
    kw = call_kwargs(case.dtype, case.m, case.n, dev)
    in_size = torch.empty((), dtype=DTYPES[case.dtype]).element_size()
    out_dtype = kw.get("out_dtype") or ops.OUT_DTYPES[ops.DTYPE_NAMES[DTYPES[case.dtype]]][0]
    out_size = torch.empty((), dtype=out_dtype).element_size()
    nbytes = gemm_bytes(case.m, case.n, case.k, in_size, out_size)
    flops = gemm_flops(case.m, case.n, case.k)
    n_sets = rotation_sets(nbytes, info.l2_bytes, maximum=8)
    sets = [make_operands(case.m, case.n, case.k, case.dtype, layout, dev, gen) for _ in range(n_sets)]
    ok, err, _ = check(case, *sets[0], kw, cfg)
    spec = ops.validate(*sets[0], **kw)
    chosen = cfg or ops.choose_config(*sets[0], spec, scale_a=kw.get("scale_a"), scale_b=kw.get("scale_b"))
    peer_name, _ = peer(case.dtype, *sets[0], kw)
    base = {"dtype": case.dtype, "layout": layout, "m": case.m, "n": case.n, "k": case.k, "batch": case.batch}
    extra = {"flops": flops, "bytes": nbytes, "rel_err": err, "config": chosen.as_dict(), "kernel": chosen.kernel,
             "settle_s": settle_s,
             "pdl": ops.pdl_in_use(*sets[0], spec, chosen)}
    sheet = info.datasheet or {}
    peak = sheet.get(DATASHEET_KEY[case.dtype])
    if not ok:
        say(f"{case.name}: FAILED the correctness check (relative error {err:.2e})")
        return Record(suite="gemm", case=base, metric="TFLOP/s", unit="TFLOP/s", ours=float("nan"), peer=peer_name,
                      extra={**extra, "failed": True})
    ours_calls = [(lambda s=s: ops.compute(s[0], s[1], spec, scale_a=kw.get("scale_a"),
                                           scale_b=kw.get("scale_b"), cfg=chosen)) for s in sets]
    peer_calls = [peer(case.dtype, s[0], s[1], kw)[1] for s in sets]
    est = flops / (500e12 if in_size <= 2 else 40e12) * 1e3
    ours_t, peer_t = timed_rounds(lambda: time_graph(ours_calls, dev, budget_s=budget_s, est_ms=est, settle_s=settle_s),
                                  None if peer_ms is not None else
                                  (lambda: time_graph(peer_calls, dev, budget_s=budget_s, est_ms=est,
                                                      settle_s=settle_s)), rounds)
    t_ours = sorted(ours_t, key=lambda t: t.median_ms)[len(ours_t) // 2]  # the median round (odd counts)
    if peer_ms is None:
        peer_ms = statistics.median(t.median_ms for t in peer_t)
    if rounds > 1:
        extra.update(round_ms=[t.median_ms for t in ours_t], peer_round_ms=[t.median_ms for t in peer_t] or None,
                     round_ratios=[(p.median_ms / o.median_ms) for o, p in zip(ours_t, peer_t)] or None)
    tf_ours = flops / (statistics.median(t.median_ms for t in ours_t) * 1e-3) / 1e12
    tf_peer = flops / (peer_ms * 1e-3) / 1e12
    ours_ms = statistics.median(t.median_ms for t in ours_t)
    extra.update(time_ms=ours_ms, peer_time_ms=peer_ms, spread=t_ours.spread,
                 TBps=nbytes / (ours_ms * 1e-3) / 1e12, peer_TBps=nbytes / (peer_ms * 1e-3) / 1e12,
                 datasheet_peak=peak, fraction_of_peak=(tf_ours / peak) if peak else None)
    if copy_TBps:
        extra.update(copy_TBps=copy_TBps, fraction_of_copy=extra["TBps"] / copy_TBps)
    rec = Record(suite="gemm", case=base, metric="TFLOP/s", unit="TFLOP/s", ours=tf_ours, peer=peer_name,
                 peer_value=tf_peer, ceiling=f"datasheet {DATASHEET_KEY[case.dtype]}" if peak else None,
                 ceiling_value=peak, extra=extra)
    rec.ratio = tf_ours / tf_peer
    say(f"{case.name}: ours {tf_ours:.1f} vs {peer_name} {tf_peer:.1f} TFLOP/s ({rec.ratio:.2f}x), err {err:.1e}")
    return rec


def peer_refuses(dtype: str, m: int, n: int, k: int) -> str | None:
    """Why the torch peer of ``dtype`` cannot run an (m, n, k) product, or None when it can."""
    if dtype == "int8" and (m <= 16 or n % 8 or k % 8):
        return "torch._int_mm needs M > 16 and N, K multiples of 8"
    if dtype in PEER_LAYOUT and dtype != "int8" and (n % 16 or k % 16):
        return "torch._scaled_mm needs N and K multiples of 16"
    return None


def cases_for(suite: str, dtypes: Sequence[str], layouts: Sequence[str] = ("NN",),
              skipped: list[tuple[Case, str]] | None = None) -> list[Case]:
    """The suite's cases for these dtypes and layouts. Cases the dtype's torch peer cannot run are
    left out; with ``skipped`` given, each goes there with the reason."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; choose one of {tuple(SUITES)}")
    out = []
    for dt in dtypes:
        for (m, n, k) in SUITES[suite]:
            for lay in (layouts if dt not in PEER_LAYOUT else ("NT",)):
                case = Case(dt, m, n, k, lay)
                why = peer_refuses(dt, m, n, k)
                if why is None:
                    out.append(case)
                elif skipped is not None:
                    skipped.append((case, why))
    return out


def interpreter_check(dtypes: Sequence[str], say: Callable[[str], None] = print,
                      layouts: Sequence[str] = LAYOUTS) -> list[Record]:
    """Without a GPU: each dtype and layout once through Triton's interpreter on a tiny odd shape,
    against the float64 reference. Records are ``measured: False`` and carry no speed."""
    records = []
    gen = torch.Generator().manual_seed(7)
    for dt in dtypes:
        for lay in layouts:
            case = Case(dt, 19, 23, 37, lay)
            a, b = make_operands(case.m, case.n, case.k, dt, lay, "cpu", gen)
            kw = call_kwargs(dt, case.m, case.n, "cpu")
            ok, err, _ = check(case, a, b, kw)
            records.append(Record(suite="gemm-interpreter", case={"dtype": dt, "layout": lay, "m": 19, "n": 23, "k": 37},
                                  metric="relative error", unit="", ours=err, measured=False,
                                  extra={"ok": ok, "label": INTERPRETER_LABEL}))
            say(f"{case.name}: {'ok' if ok else 'FAILED'} (relative error {err:.1e})")
    return records


__all__ = [
    "DTYPES",
    "LAYOUTS",
    "SUITES",
    "Case",
    "call_kwargs",
    "cases_for",
    "peer_refuses",
    "check",
    "gemm_bytes",
    "gemm_flops",
    "interpreter_check",
    "make_operands",
    "peer",
    "run_case",
    "time_graph",
    "timed_rounds",
]
