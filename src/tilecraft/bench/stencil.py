"""Stencil suites: the seeds' ladder, the cache-cliff sweep and a configuration sweep.

Every case is checked against the float64 reference (output poisoned with NaN first, boundary
checked untouched) before it is timed; a case that fails the check is reported and not timed.
FOM is the least-traffic bandwidth (tilecraft.analysis.fom), compared with the device-to-device copy bandwidth
measured in the same run.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from tilecraft.analysis.fom import stencil_fom, stencil_traffic
from tilecraft.bench import DEFAULT_ROUNDS, INTERPRETER_LABEL
from tilecraft.bench.harness import Record, Timing, rotation_sets, time_rotating
from tilecraft.hardware.device import DeviceInfo, detect
from tilecraft.ops import stencil as ops
from tilecraft.reference.stencil import laplacian_reference

DTYPES = {"fp32": torch.float32, "fp64": torch.float64}
# Relative error ||ours - ref|| / ||ref|| allowed against the float64 reference, random data.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}


@dataclass
class CaseResult:
    name: str
    config: dict
    ok: bool
    error: float | None
    timing: Timing | None = None
    fom_TBps: float | None = None
    gpts: float | None = None
    resources: list[dict] = field(default_factory=list)
    message: str = ""
    round_medians_ms: list[float] = field(default_factory=list)  # measure_rounds: each round's median


def _resources(handles: Sequence[object], num_warps: int) -> list[dict]:
    out = []
    for h in handles:
        regs = getattr(h, "n_regs", None)
        if regs is None:
            continue
        out.append({"kernel": getattr(getattr(h, "metadata", None), "name", "?"), "registers": regs,
                    "spills": getattr(h, "n_spills", None), "num_warps": num_warps,
                    "shared_bytes": getattr(getattr(h, "metadata", None), "shared", None)})
    return out


def _roofline_fields(shape: tuple[int, int, int], dtype: torch.dtype, order: int) -> dict:
    """The least bytes and the FLOPs of one application: what a roofline places a record by."""
    t = stencil_traffic(shape, order, torch.finfo(dtype).bits // 8)
    return {"bytes": t.bytes, "flops": t.flops, "points": t.points}


def check_case(u: torch.Tensor, order: int, spacing: tuple[float, float, float],
               run: Callable[[torch.Tensor, torch.Tensor], object]) -> tuple[bool, float, str]:
    """Run once into a NaN-poisoned output; compare the interior with the float64 reference and
    check the boundary was not written. Returns (ok, relative error, message)."""
    r = order // 2
    out = torch.full_like(u, float("nan"))
    run(u, out)
    if u.device.type == "cuda":
        torch.cuda.synchronize(u.device)
    interior = out[r:-r, r:-r, r:-r]
    ref = laplacian_reference(u, order, spacing)
    if torch.isnan(interior).any():
        return False, float("nan"), "unwritten (NaN) interior points"
    err = ((interior.double() - ref).norm() / ref.norm()).item()
    boundary = out.clone()
    boundary[r:-r, r:-r, r:-r] = float("nan")
    if not torch.isnan(boundary).all():
        return False, err, "boundary points were written"
    tol = TOLERANCE[u.dtype]
    return err <= tol, err, "" if err <= tol else f"relative error {err:.2e} > {tol:.0e}"


def measure_config(shape: tuple[int, int, int], dtype: torch.dtype, order: int, variant: str,
                   cfg: ops.StencilConfig | None = None, *, device: str = "cuda",
                   spacing: tuple[float, float, float] = (1.0, 1.0, 1.0), l2_bytes: int | None = None,
                   budget_s: float = 1.0, check: str = "full") -> CaseResult:
    """Check, then time one variant (or an explicit config) on random data.

    ``check``: "full" checks a small grid and then the timed grid itself against the float64
    reference; "small" only the small grid (for wide configuration sweeps). The small grid keeps
    every extent's residue mod 16, so it runs the same Triton specialisation as the timed one.
    """
    if check not in ("full", "small"):
        raise ValueError(f"check must be 'full' or 'small', got {check!r}")
    traffic = stencil_traffic(shape, order, torch.finfo(dtype).bits // 8)
    if variant == "reference":
        def run(u, out):
            ops.laplacian(u, order=order, spacing=spacing, out=out, variant="reference")
            return []
        cfg_dict: dict = {"kernel": "torch slicing"}
        num_warps = 0
    else:
        fixed = cfg

        def config(u, out):  # "auto" chooses per grid (alignment, plane size) as laplacian() does
            return fixed or ops.config_for_tensors(variant, u, out, order, l2_bytes)

        def run(u, out):
            return ops.launch(u, out, order, spacing, config(u, out))
        # the timed grid is contiguous and freshly allocated: aligned exactly when nx is a multiple
        aligned = shape[2] % (16 // (torch.finfo(dtype).bits // 8)) == 0
        half = not aligned and shape[2] % (8 // (torch.finfo(dtype).bits // 8)) == 0  # rows of 8-byte vectors
        smem = device != "cpu" and ops.smem_device(torch.empty(0, device=device))
        cfg = fixed or ops.config_for(variant, dtype, order, shape, l2_bytes, aligned, flat_ok=True, smem=smem,
                                      half_aligned=half)
        cfg_dict, num_warps = cfg.as_dict(), cfg.num_warps
    gen = torch.Generator(device=device).manual_seed(hash((shape, order)) & 0xFFFF)
    small = tuple(min(n, 32 + n % 16) for n in shape[:2]) + (shape[2],)
    try:
        u_small = torch.rand(small, dtype=dtype, device=device, generator=gen) * 2 - 1
        ok, err, msg = check_case(u_small, order, spacing, run)
        if not ok:
            return CaseResult(variant, cfg_dict, False, err, message=msg)
        n_sets = rotation_sets(2 * traffic.fetch_bytes, l2_bytes)
        us = [torch.rand(shape, dtype=dtype, device=device, generator=gen) * 2 - 1 for _ in range(n_sets)]
        outs = [torch.zeros_like(us[0]) for _ in range(n_sets)]
        if check == "full":  # the timed grid too: the reference in float64 on the device
            ok, err, msg = check_case(us[0], order, spacing, run)
            if not ok:
                return CaseResult(variant, cfg_dict, False, err, message=msg)
        handles = run(us[0], outs[0])
        timing = time_rotating(lambda i: run(us[i], outs[i]), n_sets, device=device, budget_s=budget_s)
    except (RuntimeError, ValueError) as exc:  # compile failure, out of resources, bad config
        return CaseResult(variant, cfg_dict, False, None, message=f"{type(exc).__name__}: {exc}"[:300])
    fom = stencil_fom(traffic, timing.median_ms)
    res = CaseResult(variant, cfg_dict, True, err, timing, fom["fom_TBps"], fom["gpts"],
                     _resources(handles, num_warps))
    return res


def _median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def measure_rounds(shape: tuple[int, int, int], dtype: torch.dtype, order: int, variants: Sequence[str], *,
                   rounds: int = DEFAULT_ROUNDS, l2_bytes: int | None = None, budget_s: float = 1.0,
                   device: str = "cuda", progress: Callable[[str], None] | None = None,
                   configs: dict[str, ops.StencilConfig] | None = None) -> dict[str, CaseResult]:
    """``measure_config`` for each variant, ``rounds`` times in turn (variant 1, 2, ..., 1, 2, ...),
    so a drift of the GPU's state (clocks, power, what ran before) reaches every variant alike. The
    first round checks the timed grid against float64, later rounds the small grid. A variant's
    median is the median of its rounds' medians (``timing.spread``: the rounds' (max - min) / median
    where that is larger than a round's own spread); ``round_medians_ms`` keeps each round's; a
    variant that fails any round is reported failed. ``configs`` pins a variant's configuration
    (``auto``'s tuned one, :func:`auto_choice`)."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    say = progress or (lambda _m: None)
    per: dict[str, list[CaseResult]] = {v: [] for v in variants}
    for rnd in range(rounds):
        for v in variants:
            if per[v] and not per[v][-1].ok:
                continue  # failed: not timed again
            say(v if rounds == 1 else f"{v} (round {rnd + 1}/{rounds})")
            per[v].append(measure_config(shape, dtype, order, v, cfg=(configs or {}).get(v), l2_bytes=l2_bytes,
                                         budget_s=budget_s, device=device, check="full" if rnd == 0 else "small"))
    return {v: _combine(res) for v, res in per.items()}


def auto_choice(shape: tuple[int, int, int], dtype: torch.dtype, order: int, *,
                device: str = "cuda") -> ops.Choice:
    """What ``auto`` runs on a freshly allocated grid of ``shape`` (the timed grids are such grids):
    on a GPU the tuned configuration (timed now if no cached entry has it: call this before any timed
    region), a cached one or the heuristic; on the CPU the heuristic (``ops.choose_config``)."""
    u = torch.empty(shape, dtype=dtype, device=device)
    out = torch.zeros_like(u)
    if u.device.type == "cuda":
        with torch.cuda.device(u.device):
            return ops.choose_config(u, out, order)
    return ops.choose_config(u, out, order)


def _pinned(variants: Sequence[str], shape: tuple[int, int, int], dtype: torch.dtype, order: int,
            device: str) -> tuple[dict[str, ops.StencilConfig], dict]:
    """(configs for ``measure_rounds``, the fields of ``auto``'s record saying where its config came
    from): ``auto`` chosen once (tuned if need be) before anything is timed."""
    if "auto" not in variants:
        return {}, {}
    choice = auto_choice(shape, dtype, order, device=device)
    entry = choice.entry or {}
    return {"auto": choice.config}, {"config_source": choice.source, "tuning_key": choice.key,
                                     "heuristic_config": entry.get("heuristic", choice.config.as_dict()),
                                     "tuning": entry.get("candidates")}


def _combine(results: list[CaseResult]) -> CaseResult:
    """One variant's rounds as one result (see ``measure_rounds``)."""
    bad = next((r for r in results if not r.ok), None)
    if bad is not None:
        return bad
    meds = [r.timing.median_ms for r in results]
    first = results[0]
    med = statistics.median(meds)
    timing = Timing(median_ms=med, min_ms=min(r.timing.min_ms for r in results),
                    max_ms=max(r.timing.max_ms for r in results), runs=sum(r.timing.runs for r in results),
                    spread=max(max(r.timing.spread for r in results), (max(meds) - min(meds)) / med),
                    host_ms=_median_or_none([r.timing.host_ms for r in results]))
    scale = first.timing.median_ms / med  # FOM and GPts/s go as 1 / time
    return CaseResult(first.name, first.config, True, max(r.error for r in results), timing,
                      first.fom_TBps * scale, first.gpts * scale, first.resources, first.message, meds)


def ladder(shape: tuple[int, int, int], dtype: str, order: int, *, variants: Sequence[str] | None = None,
           copy_TBps: float | None = None, info: DeviceInfo | None = None,
           progress: Callable[[str], None] | None = None, budget_s: float = 1.0,
           rounds: int = DEFAULT_ROUNDS) -> list[Record]:
    """The seeds' table on this GPU: every ladder variant, ``auto`` and the torch peer, timed in
    ``rounds`` rounds in turn (``measure_rounds``)."""
    from tilecraft.hardware.ceilings import measure_copy_bandwidth

    info = info or detect()
    torch_dtype = DTYPES[dtype]
    variants = list(variants or (*ops.LADDER, "auto", "reference"))
    say = progress or (lambda _m: None)
    if copy_TBps is None:
        say("copy bandwidth")
        copy_TBps = measure_copy_bandwidth()
    configs, auto_fields = _pinned(variants, shape, torch_dtype, order, "cuda")
    results = measure_rounds(shape, torch_dtype, order, variants, rounds=rounds, l2_bytes=info.l2_bytes,
                             budget_s=budget_s, progress=say, configs=configs)
    base = results.get("baseline")
    peer = results.get("reference")
    records = []
    for v, res in results.items():
        case = {"shape": list(shape), "dtype": dtype, "order": order, "variant": v, "config": res.config}
        extra = {"ok": res.ok, "rel_error": res.error, "message": res.message, "resources": res.resources,
                 **(auto_fields if v == "auto" else {})}
        if not res.ok:
            records.append(Record("stencil.ladder", case, "fom", "TB/s", float("nan"), extra=extra,
                                  ceiling="copy", ceiling_value=copy_TBps))
            continue
        extra.update(time_ms=res.timing.median_ms, timing=res.timing.as_dict(), gpts=res.gpts,
                     round_medians_ms=res.round_medians_ms, **_roofline_fields(shape, torch_dtype, order))
        if base and base.ok and base.fom_TBps:
            extra["speedup_vs_baseline"] = res.fom_TBps / base.fom_TBps
        records.append(Record(
            "stencil.ladder", case, "fom", "TB/s", res.fom_TBps,
            peer="torch slicing" if peer and peer.ok and v != "reference" else None,
            peer_value=peer.fom_TBps if peer and peer.ok and v != "reference" else None,
            ceiling="copy", ceiling_value=copy_TBps, extra=extra))
    return records



def ladder_interpreter(shape: tuple[int, int, int], dtype: str, order: int, *, variants: Sequence[str] | None = None,
                       progress: Callable[[str], None] | None = None, target: str = "sm90") -> list[Record]:
    """Each variant once through the Triton interpreter on CPU tensors, checked against the float64
    reference (the same check the GPU suite makes before timing); no timing loop. Each record also
    carries the kernel cross-compiled for ``target`` (registers, spills, occupancy): not measured."""
    import time

    torch_dtype = DTYPES[dtype]
    variants = list(variants or (*ops.LADDER, "auto", "reference"))
    say = progress or (lambda _m: None)
    spacing = (1.0, 1.0, 1.0)
    gen = torch.Generator().manual_seed(0)
    u = torch.rand(shape, dtype=torch_dtype, generator=gen) * 2 - 1
    records = []
    for v in variants:
        say(v)
        if v == "reference":
            cfg: dict = {"kernel": "torch slicing"}

            def run(a, b):
                return ops.laplacian(a, order=order, spacing=spacing, out=b, variant="reference")
        else:
            c = ops.config_for_tensors(v, u, u, order)
            cfg = c.as_dict()

            def run(a, b, c=c):
                return ops.launch(a, b, order, spacing, c)
        t0 = time.perf_counter()
        try:
            ok, rel, msg = check_case(u, order, spacing, run)
        except (RuntimeError, ValueError, TypeError) as exc:
            ok, rel, msg = False, None, f"{type(exc).__name__}: {exc}"[:300]
        wall = time.perf_counter() - t0
        case = {"shape": list(shape), "dtype": dtype, "order": order, "variant": v, "config": cfg}
        extra = {"ok": ok, "message": msg, "tolerance": TOLERANCE[torch_dtype], "mode": "triton-interpreter",
                 "interpreter_wall_s": wall, "note": INTERPRETER_LABEL,
                 # what the kernel needs on the target GPU, from the compiler itself
                 target: cross_compiled(shape, torch_dtype, order, v, target),
                 **_roofline_fields(shape, torch_dtype, order)}
        records.append(Record("stencil.ladder", case, "rel_error", "1",
                              float("nan") if rel is None else rel, measured=False, extra=extra))
    return records


def sweep_shapes(sizes: Sequence[int], order: int, itemsize: int, target_bytes: int = 2**30) -> list[tuple[int, int, int]]:
    """(nz, n, n) for each plane size n, nz chosen so one grid is about ``target_bytes``."""
    r = order // 2
    shapes = []
    for n in sizes:
        nz = max(2 * r + 16, target_bytes // (n * n * itemsize))
        shapes.append((int(nz), n, n))
    return shapes


def sweep(sizes: Sequence[int], dtype: str, order: int, *, variants: Sequence[str] = ("baseline", "auto"),
          copy_TBps: float | None = None, info: DeviceInfo | None = None,
          progress: Callable[[str], None] | None = None, budget_s: float = 0.5,
          target_bytes: int = 2**30, rounds: int = DEFAULT_ROUNDS) -> list[Record]:
    """The cache-cliff study: FOM against plane size nx*ny for each variant (at each size the
    variants are timed in ``rounds`` rounds in turn, ``measure_rounds``)."""
    from tilecraft.hardware.ceilings import measure_copy_bandwidth

    info = info or detect()
    torch_dtype = DTYPES[dtype]
    say = progress or (lambda _m: None)
    if copy_TBps is None:
        say("copy bandwidth")
        copy_TBps = measure_copy_bandwidth()
    records = []
    for shape in sweep_shapes(sizes, order, torch.finfo(torch_dtype).bits // 8, target_bytes):
        configs, auto_fields = _pinned(variants, shape, torch_dtype, order, "cuda")
        results = measure_rounds(shape, torch_dtype, order, variants, rounds=rounds, l2_bytes=info.l2_bytes,
                                 budget_s=budget_s, progress=lambda m, sh=shape: say(f"{m} {sh}"), configs=configs)
        for v, res in results.items():
            case = {"shape": list(shape), "plane": shape[1] * shape[2], "dtype": dtype, "order": order, "variant": v,
                    "config": res.config}
            extra = {"ok": res.ok, "rel_error": res.error, "message": res.message,
                     **(auto_fields if v == "auto" else {})}
            if res.ok:
                extra.update(time_ms=res.timing.median_ms, host_ms=res.timing.host_ms, gpts=res.gpts,
                             round_medians_ms=res.round_medians_ms, **_roofline_fields(shape, torch_dtype, order))
            records.append(Record("stencil.sweep", case, "fom", "TB/s", res.fom_TBps if res.ok else float("nan"),
                                  ceiling="copy", ceiling_value=copy_TBps, extra=extra))
    return records


def cross_compiled(shape: tuple[int, int, int], dtype: torch.dtype, order: int, variant: str,
                   target: str = "sm90", cfg: ops.StencilConfig | None = None) -> list[dict]:
    """Registers, spills and occupancy of a variant's kernel compiled for ``target`` (no GPU needed:
    ``tilecraft.analysis.compiled.cross_compile`` runs Triton's compiler in a subprocess).

    The grid is described by meta tensors (contiguous, 16-byte aligned), so the kernel compiled is
    the one a launch on a freshly allocated grid of that shape would run.
    """
    from tilecraft.analysis.compiled import cross_compile

    if variant == "reference":
        return []
    u = torch.empty(shape, dtype=dtype, device="meta")
    out = torch.empty(shape, dtype=dtype, device="meta")
    cfg = cfg or ops.config_for_tensors(variant, u, out, order)  # meta tensors: contiguous, aligned pointers
    launch = ops.launch_plan(u, out, order, (1.0, 1.0, 1.0), cfg)[0]
    fn = getattr(launch.kernel, "fn", launch.kernel)
    res = cross_compile(fn.__module__, fn.__name__, ops.compile_signature(launch), launch.constexprs, target,
                        num_warps=launch.options["num_warps"], num_stages=launch.options.get("num_stages", 3),
                        maxnreg=launch.options.get("maxnreg"))
    return [res.as_dict()]
