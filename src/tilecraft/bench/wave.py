"""Wave-step suites: the fused kernel (launch configurations), the whole step with its absorbing
boundary, and the plain torch implementation of the same step (the peer).

Least traffic of a step (``step_traffic``): read p, p_prev and m = v**2 dt**2 once, write p_next
once, i.e. 4 words per updated point (16 B in fp32); the R-wide halo faces of p are ignored (0.3% at
552**3). FOM = that traffic / median time, compared with the device-to-device copy bandwidth
measured in the same run. The step with the CPML (``cpml_step_suite``) counts, besides, psi and
zeta read and written once at every point of each axis's layers (``cpml_traffic``); the whole
``simulate`` records count only the 16 B/pt. Every case is checked against the float64 torch step
before it is timed.
"""
from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from tilecraft.bench.harness import Record, time_rotating
from tilecraft.ops import wave as ops
from tilecraft.ops.wave import MARCH_REGS, MARCH_TILES, MARCH_TILES_PREVIOUS, PSI_TILES, CpmlConfig, WaveConfig
from tilecraft.reference.wave import wave_step_torch
from tilecraft.wave.boundaries import DEFAULT_WIDTH, Layout, row_align

# Configurations swept on a GPU: (block_y, block_x, block_z, num_warps[, maxnreg]).
GPU_CONFIGS = (
    WaveConfig(16, 128, 32, 16, maxnreg=56), WaveConfig(16, 128, 16, 16, maxnreg=56),
    WaveConfig(16, 128, 8, 16, maxnreg=56), WaveConfig(8, 128, 16, 8, maxnreg=56), WaveConfig(8, 128, 16, 8),
    WaveConfig(8, 128, 8, 8), WaveConfig(16, 128, 16, 16), WaveConfig(4, 128, 16, 4), WaveConfig(8, 256, 16, 16, maxnreg=56),
    WaveConfig(16, 128, 16, 16, maxnreg=48), WaveConfig(16, 128, 16, 16, nontemporal=True, maxnreg=56),
    WaveConfig(32, 128, 16, 32, maxnreg=56),
)


@dataclass(frozen=True)
class StepTraffic:
    points: int
    bytes: int
    flops: int


def step_traffic(points: int, order: int, itemsize: int) -> StepTraffic:
    """4 words per point; 9R+1 flops of the Laplacian plus 4 of the update (2p - pp + m lap)."""
    r = order // 2
    return StepTraffic(points=points, bytes=4 * points * itemsize, flops=points * (9 * r + 1 + 4))


def _record(case: dict, traffic: StepTraffic, time_ms: float, spread: float, copy_tbps: float | None,
            peer_tbps: float | None, measured: bool, extra: dict | None = None) -> Record:
    ok = math.isfinite(time_ms) and time_ms > 0  # a failed configuration (inf) has no FOM, not a FOM of 0
    fom = traffic.bytes / (time_ms * 1e-3) / 1e12 if ok else float("nan")
    x = {"flops": traffic.flops, "bytes": traffic.bytes, "time_ms": time_ms if ok else None,
         "gpts": traffic.points / time_ms / 1e6 if ok else None,
         "points": traffic.points, "spread": spread}
    x.update(extra or {})
    return Record(suite="wave", case=case, metric="FOM (least bytes / time)", unit="TB/s", ours=fom,
                  peer="torch step (same arithmetic, elementwise ops)" if peer_tbps else None, peer_value=peer_tbps,
                  ceiling="copy bandwidth (measured, same run)" if copy_tbps else None, ceiling_value=copy_tbps,
                  measured=measured, extra=x)


def _num(x: float | None) -> float:
    """A record's number for a text table: NaN where the case failed (None)."""
    return float("nan") if x is None else x


def _fields(shape, dtype, device, gen):
    p = (torch.rand(shape, generator=gen, dtype=torch.float32) - 0.5).to(device=device, dtype=dtype)
    pp = (torch.rand(shape, generator=gen, dtype=torch.float32) - 0.5).to(device=device, dtype=dtype)
    # m = v**2 dt**2 / h**2-scaled: velocities 1500..4500 m/s at h = 10 m and a stable dt
    v = torch.rand(shape, generator=gen, dtype=torch.float32).mul_(3000).add_(1500).to(device=device)
    m = (v * 1e-3) ** 2
    return p, pp, m.to(dtype)


def _setup(n: int, order: int, pml_width: int, dtype: torch.dtype, device: str, seed: int, cpml: bool = False):
    """The padded grid of an n**3 model (+ pml_width + R per side) and its random fields: device,
    measured (a GPU), layout, shape, updated box lo/hi, spacing, the generator (for more draws),
    (p, p_prev, m) and the number of updated points. ``cpml``: rows padded as ``simulate`` pads them with a
    CPML (``boundaries.row_align``)."""
    dev = torch.device(device)
    layout = Layout((n, n, n), order, pml_width, False, row_align("pml" if cpml else "none", pml_width))
    shape, (lo, hi) = layout.shape, layout.updated
    gen = torch.Generator().manual_seed(seed)
    fields = _fields(shape, dtype, dev, gen)
    points = math.prod(b - a for a, b in zip(lo, hi))
    return dev, dev.type == "cuda", layout, shape, lo, hi, (10.0, 10.0, 10.0), gen, fields, points


def step_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = DEFAULT_WIDTH["pml"],
               configs: Sequence[WaveConfig] | None = None, device: str = "cuda", copy_tbps: float | None = None,
               budget_s: float = 1.0, say: Callable[[str], None] = print) -> list[Record]:
    """The fused kernel on the padded grid of an n**3 model (+ pml_width + R per side), every point
    R or more from the faces updated: each configuration (None: the default for that box, as ``step_into`` takes
    it), the sponge variant, and the torch peer."""
    dev, measured, _layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(
        n, order, pml_width, dtype, device, 20261121)
    traffic = step_traffic(points, order, p.element_size())
    case = {"model": [n] * 3, "grid": list(shape), "order": order, "dtype": str(dtype).replace("torch.", ""),
            "pml_width": pml_width}

    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    out = torch.empty_like(pp)

    def reference(sponge):
        ref = pp.clone()
        wave_step_torch(p, pp, m, ref, order, spacing, lo, hi, sponge)
        return ref

    ref = reference(None)
    say("torch step (peer)")
    t_peer = time_rotating(lambda _i: wave_step_torch(p, pp, m, ref, order, spacing, lo, hi), 1, device=dev,
                           budget_s=budget_s, min_runs=3, warmup=1)
    peer_tbps = traffic.bytes / (t_peer.median_ms * 1e-3) / 1e12
    records = [_record({**case, "variant": "torch"}, traffic, t_peer.median_ms, t_peer.spread, copy_tbps, None,
                       measured)]

    def check_and_time(variant, cfg, sponge, ref):
        """Run once into a NaN-filled output, compare the updated box with the torch step (relative
        to its largest value), and time only a case that passed."""
        say(f"{variant} {cfg.block_y}x{cfg.block_x}x{cfg.block_z} w{cfg.num_warps}")
        rcase = {**case, "variant": variant, "config": cfg.as_dict()}
        out.fill_(float("nan"))
        try:
            handle = ops.step_into(p, pp, m, out, order, spacing, lo, hi, sponge, "triton", cfg)
        except Exception as exc:  # noqa: BLE001 - a configuration the compiler rejects is reported, not fatal
            return _record(rcase, traffic, math.inf, 0, copy_tbps, peer_tbps, measured,
                           {"ok": False, "message": str(exc)[:300], "config": cfg.as_dict()})
        scale = float(ref[box].abs().max())  # over the updated box: the rest is p_prev, not the step
        err = float((out[box].double() - ref[box].double()).abs().max()) / scale
        extra = {"ok": err < tol, "error": err, "config": cfg.as_dict(), "sponge": sponge is not None,
                 "registers": getattr(handle, "n_regs", None), "spills": getattr(handle, "n_spills", None)}
        if not extra["ok"]:
            return _record(rcase, traffic, math.inf, 0, copy_tbps, peer_tbps, measured, extra)
        t = time_rotating(lambda _i: ops.step_into(p, pp, m, out, order, spacing, lo, hi, sponge, "triton", cfg),
                          1, device=dev, budget_s=budget_s)
        return _record(rcase, traffic, t.median_ms, t.spread, copy_tbps, peer_tbps, measured, extra)

    for cfg in configs or (GPU_CONFIGS if measured else (ops.default_config(dtype, order, dev),)):
        # None: what the step takes on this box by default (``default_config`` with the box: the ring on large ones)
        cfg = cfg or ops.default_config(dtype, order, dev, lo, hi)
        records.append(check_and_time("fused", cfg, None, ref))
    # the sponge variant of the best configuration (its profiles add no per-point traffic)
    ok_recs = [r for r in records if r.case.get("variant") == "fused" and r.extra.get("ok")]
    if ok_recs:
        best = max(ok_recs, key=lambda r: r.ours)
        g = [torch.rand(nn, generator=gen, dtype=torch.float32).mul_(0.01).to(device=dev, dtype=dtype) for nn in shape]
        records.append(check_and_time("fused+sponge", WaveConfig(**best.extra["config"]), g, reference(g)))
    return records


def cube_shot(n: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cuda"):
    """The benchmarks' shot: an n**3 model (10 m spacing, random velocities 1500-2500 m/s, seed 7), a 15 Hz source
    at its centre and a line of 101 receivers through it along z: (model, source, receivers)."""
    from tilecraft import wave

    gen = torch.Generator().manual_seed(7)
    v = torch.rand((n, n, n), generator=gen, dtype=torch.float32).mul_(1000).add_(1500).to(device=device, dtype=dtype)
    c = (n - 1) * 10.0 / 2
    return (wave.Model(v, 10.0), wave.Source([[c, c, c]], f0=15.0),
            wave.Receivers.line((c, c, 0.0), (c, c, 2 * c), 101))


def simulate_step_ms(n: int, nt: int, **kw):
    """``simulate`` of ``cube_shot(n)`` on the GPU for ``nt`` steps with ``kw`` (after a 2-step warm-up):
    (ms a step of the time loop, the shot record on the CPU, ``info``)."""
    from tilecraft import wave

    model, src, rec = cube_shot(n)
    wave.simulate(model, src, rec, 2, **kw)
    res = wave.simulate(model, src, rec, nt, **kw)
    return res.info["loop_seconds"] / nt * 1e3, res.record.cpu(), res.info


def simulate_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = DEFAULT_WIDTH["pml"],
                   nt: int = 50, device: str = "cuda", copy_tbps: float | None = None, backends=("triton", "torch"),
                   boundary: str = "pml", say: Callable[[str], None] = print, graph_modes: Sequence[bool] = (False,),
                   rounds: int = 1, pml_configs: Sequence[CpmlConfig | None] = (None,),
                   in_place_modes: Sequence[bool | None] = (None,)) -> list[Record]:
    """Whole steps through ``simulate`` (fused step + CPML slabs + source and receivers), per step
    time = the time loop's wall time / nt after a warm-up run; FOM with the same 16 B/pt.
    ``graph_modes``: ``simulate``'s ``cuda_graphs`` values timed (Triton; each record's extra says
    what ran, ``info["cuda_graphs"]``, and whether its shot record has the bits of the first
    mode's), ``rounds`` times in turn; ``pml_configs``: ``simulate``'s ``pml_config`` values (None:
    the default), each timed in every mode (extra "pml_config": its index); ``in_place_modes``:
    ``simulate``'s ``in_place`` values, each timed with every configuration and mode (extra
    "in_place": what ran, ``info["in_place"]``)."""
    from tilecraft import wave

    dev = torch.device(device)
    model, src, rec = cube_shot(n, dtype, dev)
    pml_width = pml_width if boundary != "none" else 0
    layout = Layout((n, n, n), order, pml_width, False, row_align(boundary, pml_width))  # simulate's grid
    lo, hi = layout.updated
    traffic = step_traffic(math.prod(b - a for a, b in zip(lo, hi)), order, torch.finfo(dtype).bits // 8)
    runs, first = [], {}
    for rnd in range(rounds):
        for backend in backends:
            if backend != "triton" and rnd:
                continue
            steps = nt if backend == "triton" else max(3, nt // 10)
            for ci, mode, inp in itertools.product(range(len(pml_configs)) if backend == "triton" else (0,),
                                                   graph_modes if backend == "triton" else (False,),
                                                   in_place_modes if backend == "triton" else (None,)):
                say(f"simulate {backend} ({steps} steps, cuda_graphs={mode}, in_place={inp}, pml config {ci}, "
                    f"round {rnd})")
                kw = {"order": order, "boundary": boundary, "pml_width": pml_width, "backend": backend,
                      "cuda_graphs": mode, "in_place": inp}
                if pml_configs[ci] is not None and backend == "triton":
                    kw["pml_config"] = pml_configs[ci]
                wave.simulate(model, src, rec, 2, **kw)
                res = wave.simulate(model, src, rec, steps, **kw)
                same = None
                if backend == "triton":
                    ref = first.setdefault(steps, res.record)
                    same = bool(torch.equal(ref, res.record))
                runs.append((backend, res.info["loop_seconds"] / steps * 1e3,
                             {"steps_timed": steps, "cuda_graphs": res.info.get("cuda_graphs"), "round": rnd,
                              "same_record_bits": same, "pml_config": ci, "in_place": res.info.get("in_place")}))
    peer = next((ms for b, ms, _ in runs if b == "torch"), None)
    peer_tbps = traffic.bytes / (peer * 1e-3) / 1e12 if peer else None
    records = []
    for backend, ms, extra in runs:
        case = {"model": [n] * 3, "grid": list(layout.shape), "order": order, "dtype": str(dtype).replace("torch.", ""),
                "pml_width": pml_width, "variant": f"simulate-{backend}", "boundary": boundary}
        records.append(_record(case, traffic, ms, 0.0, copy_tbps, peer_tbps if backend != "torch" else None,
                               dev.type == "cuda", extra))
    return records


# Launch configurations of the CPML kernel swept on a GPU (the interior runs the default WaveConfig).
# (The folded variants, 2.7-3.3 ms, were dropped from the default list after 75154d9.)
CPML_CONFIGS = (
    ops.default_cpml_config(torch.device("cuda")),  # the default on GPUs
    CpmlConfig(4, 128, 8, 4, march=True, narrow=(8, 32, 2), march_regs=MARCH_REGS, march_tiles=MARCH_TILES,
               psi_tiles=PSI_TILES),  # the same, psi launches before the interior
    CpmlConfig(4, 128, 8, 4, march=True, narrow=(8, 32, 2), march_regs=MARCH_REGS,
               march_tiles=MARCH_TILES_PREVIOUS),  # the previous default (75154d9)
    CpmlConfig(4, 64, 8, 4, maxnreg=96, by_axes=True, two_phase=True, fused=False),  # unfused launches
    CpmlConfig(4, 128, 8, 4, march=True, narrow=(8, 32, 2), march_regs=MARCH_REGS, march_tiles=MARCH_TILES,
               psi_tiles=PSI_TILES, interior_first=True),  # the previous default (one stream; a66960a)
)


def medians_by(rows: Sequence[dict], group: Callable[[dict], str], fields: Sequence[str]) -> dict[str, dict]:
    """The median of each of ``fields`` over the rows of each group (``group(row)`` names it; groups in the
    order first seen; a field the group's rows lack is left out): the benchmark scripts' summaries of rounds."""
    out: dict[str, dict] = {}
    for name in dict.fromkeys(group(r) for r in rows):
        mine = [r for r in rows if group(r) == name]
        out[name] = {k: statistics.median(r[k] for r in mine) for k in fields if all(k in r for r in mine)}
    return out


def write_rounds(doc: dict, rows: Sequence[dict], group: Callable[[dict], str], fields: Sequence[str], path) -> None:
    """Add the rows' medians per group (``medians_by``) to ``doc``, print them and write ``doc`` as JSON to
    ``path`` (its folder made): the end of the round-based benchmark scripts."""
    import json
    from pathlib import Path

    for name, med in medians_by(rows, group, fields).items():
        doc[name] = med
        print(f"{name}: {med}", flush=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))


def cpml_traffic(points: int, layer_points: int, order: int, itemsize: int) -> StepTraffic:
    """Least traffic of the step with the CPML: 4 words per updated point (``step_traffic``) plus,
    per axis, psi and zeta read and written (4 words) at each point of that axis's layers (a != 0);
    neighbours along the axes are cache hits. Flops: the step's, plus per layer point about
    (4R+1) * 3 + 2R * 3 + 10 for the axis's terms."""
    r = order // 2
    base = step_traffic(points, order, itemsize)
    return StepTraffic(points=points, bytes=base.bytes + 4 * layer_points * itemsize,
                       flops=base.flops + layer_points * ((4 * r + 1) * 3 + 6 * r + 10))


def _cpml_state(layout: Layout, shape, dtype, device, gen, vmax: float, h: float, dt: float, f0: float):
    """The CPML axes ``simulate`` would build (one rank), with random memory variables in the layers
    (zero elsewhere, as a run keeps them). Returns (axes, layer points inside the updated box)."""
    from tilecraft.wave.boundaries import cpml_profiles
    from tilecraft.wave.solver import cpml_axis

    lo, hi = layout.updated
    axes, layer_points = [], 0
    for axis in range(len(shape)):
        a, b = cpml_profiles(layout, axis, vmax, h, dt, f0)
        ax = cpml_axis(layout, axis, h, a.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device),
                       lo[0], hi[0], 0, tuple(shape))
        if ax is None:
            continue
        inside = (a != 0)[lo[axis]:hi[axis]]
        layer_points += int(inside.sum()) * math.prod(h_ - l_ for d, (l_, h_) in enumerate(zip(lo, hi)) if d != axis)
        for k, (_w0, _w1, origin) in enumerate(ax.regions):
            mask = torch.ones(ax.zeta.shape[1:], dtype=dtype)  # the layer's points of the updated box
            for d in range(len(shape)):
                pos = torch.arange(mask.shape[d]) + (origin if d == axis else 0)
                keep = (pos >= lo[d]) & (pos < hi[d])
                if d == axis:
                    keep &= a[pos.clamp(max=shape[axis] - 1)] != 0
                view = [1] * len(shape)
                view[d] = -1
                mask = mask * keep.to(dtype).reshape(view)
            for t in (ax.psi[0], ax.zeta):
                rnd = (torch.rand(t[k].shape, generator=gen, dtype=torch.float32) - 0.5).to(dtype=dtype)
                t[k].copy_((rnd * mask).to(device))
        axes.append(ax)
    return axes, layer_points


def axis_layer_points(ax, lo, hi) -> int:
    """Points of the box [lo, hi) in ``ax``'s layers (a != 0)."""
    inside = (ax.a != 0)[lo[ax.axis]:hi[ax.axis]]
    return int(inside.sum()) * math.prod(b - a for d, (a, b) in enumerate(zip(lo, hi)) if d != ax.axis)


def _copy_axes(axes, dtype=None):
    from dataclasses import replace

    return [replace(ax, a=ax.a.to(dtype or ax.a.dtype), b=ax.b.to(dtype or ax.b.dtype),
                    psi=[t.to(dtype or t.dtype, copy=True) for t in ax.psi], zeta=ax.zeta.to(dtype or ax.zeta.dtype,
                                                                                              copy=True),
                    _tables={}) for ax in axes]


def cpml_step_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = DEFAULT_WIDTH["pml"],
                    configs: Sequence[CpmlConfig] | None = None, device: str = "cuda",
                    copy_tbps: float | None = None, budget_s: float = 0.7, unfused: bool = True,
                    say: Callable[[str], None] = print, graphs: bool | Sequence[CpmlConfig] = False,
                    parts: bool | CpmlConfig | Sequence[CpmlConfig] = True, rounds: int = 1,
                    step_config: WaveConfig | None = None) -> list[Record]:
    """The whole step with the CPML on the padded grid of an n**3 model (n**2 in 2D is not timed):
    ``ops.cpml_step`` (interior launch + the layers' launch) per CPML configuration, the previous
    unfused path (fused step, then the psi and correction slab kernels per axis) and the torch step
    (``cpml_step`` with backend "torch", the peer). Every case is first run from the same state into
    a NaN-filled output and compared with the float64 torch step (p_next over the updated box, psi
    and zeta relative to their largest values); only a case that passed is timed. ``graphs``: also
    the default configuration's step (or each configuration given) replayed from CUDA graphs
    (``graphed_cpml_step``: variant "cpml-graph"). ``rounds``: the configurations (and the graph) timed that many times in turn
    (each record's extra has its round). ``parts``: the GPU time of each launch (profiler) of the
    first default configuration (``CPML_CONFIGS[0]``) or of each configuration given (one stream).
    ``step_config``: the plain step's configuration for the interior launches (default: ``default_config``)."""
    dev, measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), points = _setup(
        n, order, pml_width, dtype, device, 20261122, cpml=True)
    axes0, layer_points = _cpml_state(layout, shape, dtype, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    traffic = cpml_traffic(points, layer_points, order, p.element_size())
    case = {"model": [n] * 3, "grid": list(shape), "order": order, "dtype": str(dtype).replace("torch.", ""),
            "pml_width": pml_width, "layer_points": layer_points}
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    tol = 1e-5 if dtype == torch.float32 else 1e-12

    say("cpml reference (float64)")
    ref_axes = _copy_axes(axes0, torch.float64)
    ref = pp.to(torch.float64, copy=True)
    ops.cpml_step(p.double(), pp.double(), m.double(), ref, order, spacing, lo, hi, ref_axes, "torch")
    ref_scale = float(ref[box].abs().max())

    def errors(out, axes, slot) -> float:
        err = float((out[box].double() - ref[box]).abs().max()) / ref_scale
        for a, r_ in zip(axes, ref_axes):
            for got, want in ((a.psi[slot], r_.psi[1]), (a.zeta, r_.zeta)):
                err = max(err, float((got.double() - want).abs().max()) / max(float(want.abs().max()), 1e-300))
        return err

    out = torch.empty_like(pp)
    records = []
    say("cpml torch step (peer)")
    t_axes = _copy_axes(axes0)
    t_peer = time_rotating(lambda _i: ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, t_axes, "torch"), 1,
                           device=dev, budget_s=budget_s, min_runs=3, warmup=1)
    peer_tbps = traffic.bytes / (t_peer.median_ms * 1e-3) / 1e12
    records.append(_record({**case, "variant": "cpml-torch"}, traffic, t_peer.median_ms, t_peer.spread, copy_tbps,
                           None, measured))

    def check_and_time(variant, run, axes, extra, slot=1):
        """slot: where the run leaves the new psi (1: ``cpml_step``'s double buffer, swapped after
        each timed run; 0: in place)."""
        rcase = {**case, "variant": variant, **({"config": extra["config"]} if "config" in extra else {})}
        try:
            run(_copy_axes(axes))  # a first call on a copy: the checked call below uses the cached launchers
            out.fill_(float("nan"))
            handles = run(axes)
        except Exception as exc:  # noqa: BLE001 - a configuration the compiler rejects is reported, not fatal
            return _record(rcase, traffic, math.inf, 0, copy_tbps, peer_tbps, measured,
                           {**extra, "ok": False, "message": str(exc)[:300]})
        err = errors(out, axes, slot)
        extra = {**extra, "ok": err < tol, "error": err, **(handles or {})}
        if not extra["ok"]:
            return _record(rcase, traffic, math.inf, 0, copy_tbps, peer_tbps, measured, extra)

        def timed(_i):
            run(axes)
            for ax in axes:
                if slot:
                    ax.swap()
        t = time_rotating(timed, 1, device=dev, budget_s=budget_s)
        return _record(rcase, traffic, t.median_ms, t.spread, copy_tbps, peer_tbps, measured, extra)

    for rnd in range(rounds):
        for cfg in configs or (CPML_CONFIGS if measured else (ops.default_cpml_config(dev),)):
            say(f"cpml fused {cfg} (round {rnd})")
            axes = _copy_axes(axes0)
            records.append(check_and_time(
                "cpml-fused", lambda ax, cfg=cfg: ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, ax, "triton",
                                                                step_config, cfg), axes,
                {"config": cfg.as_dict(), "round": rnd, "step_config": step_config and step_config.as_dict()}))
            del axes
        for cfg in ((ops.default_cpml_config(dev),) if graphs is True else (graphs or ())):
            say(f"cpml step from CUDA graphs {cfg} (round {rnd})")
            axes = _copy_axes(axes0)
            records.append(check_and_time("cpml-graph", graphed_cpml_step(p, pp, m, out, order, spacing, lo, hi, cfg),
                                          axes, {"config": cfg.as_dict(), "round": rnd, "cuda_graphs": True}))
            del axes
    if measured and parts:  # where the time goes: the GPU time of each launch of one default step (profiler)
        marches = (parts,) if isinstance(parts, CpmlConfig) else tuple(parts) if parts is not True else CPML_CONFIGS[:1]
        for march in marches:
            records += cpml_parts(p, pp, m, out, order, spacing, lo, hi, axes0, march, step_config, case, copy_tbps,
                                  say)
    if unfused:
        say("cpml unfused (previous path)")
        axes = _copy_axes(axes0)
        records.append(check_and_time("cpml-unfused", lambda ax: _unfused(p, pp, m, out, order, spacing, lo, hi, ax,
                                                                           layout), axes, {}, slot=0))
    return records


def table(records: Sequence[Record], copy_tbps: float, columns: Sequence[tuple[str, int, Callable[[Record], object]]]
          ) -> list[str]:
    """A benchmark script's summary of wave records: the variant, the given columns (header, width,
    value of a record), ms, % of ``copy_tbps`` (nan where the record failed its check), GPts/s, and the
    failure's message."""
    head = f"{'variant':<22}" + "".join(f"{h:<{w}}" for h, w, _ in columns) + f"{'ms':>8}{'%copy':>7}{'GPts/s':>8}"
    lines = [head]
    for r in records:
        ok = r.extra.get("ok", True)
        lines.append(f"{r.case.get('variant', ''):<22}" + "".join(f"{str(f(r)):<{w}}" for _, w, f in columns)
                     + f"{_num(r.extra.get('time_ms')):>8.3f}{(r.ours / copy_tbps * 100 if ok else float('nan')):>7.1f}"
                     f"{_num(r.extra.get('gpts')):>8.1f}"
                     + ("" if ok else f"  FAILED {r.extra.get('message', r.extra.get('error'))}"))
    return lines


@dataclass
class PartsState:
    """The state the per-launch benchmarks (``benchmarks/wave_*parts*.py``, ``wave_ring_ab.py``,
    ``wave_layer_floor.py``) time: the padded grid of a 512**3 model + 20-point CPML, fp32 order 8, random
    fields and memory variables (``_setup``, ``_cpml_state``), and the copy bandwidth measured first."""
    info: object
    copy: float
    layout: Layout
    shape: tuple
    lo: tuple
    hi: tuple
    spacing: tuple
    p: torch.Tensor
    pp: torch.Tensor
    m: torch.Tensor
    axes0: list


def parts_state(seed: int = 20261122, width: int = 20) -> PartsState:
    """``PartsState`` on the GPU (a CPML ``width`` points wide); prints the device and its copy bandwidth."""
    from tilecraft.hardware.ceilings import measure_copy_bandwidth
    from tilecraft.hardware.device import detect

    info = detect()
    copy = measure_copy_bandwidth()
    print(f"device {info.name} copy {copy:.3f} TB/s", flush=True)
    dev, _measured, layout, shape, lo, hi, spacing, gen, (p, pp, m), _points = _setup(512, 8, width, torch.float32,
                                                                                      "cuda", seed, cpml=True)
    axes0, _lp = _cpml_state(layout, shape, torch.float32, dev, gen, 4500.0, 10.0, 1e-3, 15.0)
    return PartsState(info, copy, layout, shape, lo, hi, spacing, p, pp, m, axes0)


def cpml_rounds(cases: dict, rounds: int, copy_tbps: float, n: int = 512, pml_width: int = 20,
                say: Callable[[str], None] = print, device: str = "cuda") -> list[Record]:
    """The whole CPML step of each case, ``name: (CpmlConfig, interior WaveConfig or None)``, ``rounds`` times
    in turn (``cpml_step_suite``: checked against the float64 torch step first, no parts, no unfused peer); each
    record's case gets its name and round, and each round's figure is said as it comes."""
    records = []
    for rnd in range(rounds):
        for name, (pcfg, icfg) in cases.items():
            recs = cpml_step_suite(n, 8, torch.float32, pml_width, configs=[pcfg], device=device, copy_tbps=copy_tbps,
                                   budget_s=0.5, unfused=False, parts=False, say=lambda m: None, step_config=icfg)
            for r in recs:
                r.case.update(case=name, round=rnd + 1)
                if r.case.get("variant") == "cpml-fused":
                    say(f"  {n}^3 round {rnd + 1} {name:18s} {r.ours / copy_tbps:6.1%} of copy, "
                        f"{_num(r.extra.get('time_ms')):.3f} ms")
            records += recs
    return records


def cpml_parts(p, pp, m, out, order, spacing, lo, hi, axes0, march: CpmlConfig, step_config: WaveConfig | None,
               case: dict, copy_tbps: float | None, say: Callable[[str], None] = print) -> list[Record]:
    """The GPU time of each launch of one ``ops.cpml_step`` with ``march`` on one stream (profiler
    kernel records, median of 20 steps; ``launch_times``), one record per launch ("part-interior",
    "part-psi-z", "part-layers:0,2", ...) counting 16 B per point of its boxes; none where the
    launches are not as planned."""
    part_axes = _copy_axes(axes0)  # the parts write psi and zeta
    kaxes = {ax.axis: ax for ax in part_axes}
    march = replace(march, streams=False)
    shape = p.shape
    dtype = p.dtype
    icfg = step_config or ops.cpml_interior_config(dtype, order, p.device, tuple(lo), tuple(hi))
    _, _, launches = ops.layer_plan(tuple(lo), tuple(hi), kaxes, 3, shape[2], march, 4, p.stride()[:2])
    interiors, *_, fused_psi = ops._march_plan(p, order, tuple(lo), tuple(hi), kaxes, 3, march, icfg)
    inner = [(f"part-interior{i or ''}", math.prod(b - a for a, b in zip(blo, bhi)))
             for i, (blo, bhi, _x_org) in enumerate(interiors)]
    psi = [(f"part-psi-{'zyx'[ax.axis]}", axis_layer_points(ax, lo, hi)) for ax in part_axes
           if ax.axis not in fused_psi]
    layers = [("part-layers:" + ",".join(map(str, axes)), sum((r[1] - r[0]) * (r[3] - r[2]) * (r[5] - r[4])
                                                              for r in table))
              for axes, _tile, table, _n in launches]
    labels = (inner + psi if march.interior_first else psi + inner) + layers
    say("cpml step: GPU time per launch")
    seq = launch_times(lambda: ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, part_axes, "triton",
                                             step_config, march), 20)
    if seq is None or len(seq) != len(labels):
        say(f"  launches not as planned: {seq}")
        return []
    return [_record({**case, "variant": variant}, step_traffic(pts, order, p.element_size()), ms, 0.0, copy_tbps,
                    None, True, {"part": True, "gpu_time": True, "kernel": kernel, "config": march.as_dict()})
            for (variant, pts), (kernel, ms) in zip(labels, seq)]


def graphed_cpml_step(p, pp, m, out, order, spacing, lo, hi, cfg: CpmlConfig):
    """``run(axes)``: ``ops.cpml_step`` with ``cfg`` replayed from two CUDA graphs (``ops.capture_steps``;
    parity = the number of earlier calls on the same axes, which the caller swaps after each call).
    A new axes list is first warmed on a copy in both parities (compiled kernels, cached plans, its
    tables, so capture neither compiles nor synchronises), then captured; its own state is untouched
    until the first replay. RuntimeError (with the reason) where capture is not possible."""
    state: dict = {}

    def parity_step(axes, k):
        for ax in axes * k:
            ax.swap()
        try:
            ops.cpml_step(p, pp, m, out, order, spacing, lo, hi, axes, "triton", None, cfg)
        finally:
            for ax in axes * k:
                ax.swap()

    def run(axes):
        if state.get("axes") is not axes:
            state.clear()
            warm = _copy_axes(axes)
            for k in range(2):
                parity_step(warm, k)
            for ax, w in zip(axes, warm):
                ax._tables.update(w._tables)  # built from a and the regions, equal on the copy
            del warm
            g = ops.capture_steps(lambda k: parity_step(axes, k), 2, p.device, keep=(p, pp, m, out, axes))
            if isinstance(g, str):
                raise RuntimeError(g)
            state.update(axes=axes, graphs=g, calls=0)
        state["graphs"].replay(state["calls"])
        state["calls"] += 1

    return run


def _unfused(p, pp, m, out, order, spacing, lo, hi, axes, layout: Layout) -> None:
    """The previous path: the fused step, then per axis the psi slab kernel (in place in psi[0], on
    the layers) and the correction kernel (zeta, p_next) on the layers widened by R."""
    ops.step_into(p, pp, m, out, order, spacing, lo, hi, None, "triton")
    for ax in axes:
        layers = layout.slabs(ax.axis, 0)
        for k, (w0, w1, origin) in enumerate(ax.regions):
            blo, bhi = list(lo), list(hi)
            blo[ax.axis], bhi[ax.axis] = layers[k]
            ops.cpml_psi(p, ax.psi[0][k], ax.a, ax.b, ax.axis, order, ax.h, tuple(blo), tuple(bhi), "triton", origin)
        for k, (w0, w1, origin) in enumerate(ax.regions):
            blo, bhi = list(lo), list(hi)
            blo[ax.axis], bhi[ax.axis] = w0, w1
            ops.cpml_correct(p, ax.psi[0][k], ax.zeta[k], ax.a, ax.b, m, out, ax.axis, order, ax.h, tuple(blo),
                             tuple(bhi), "triton", origin)


def per_launch(kernels: Sequence[tuple[str, float]], reps: int) -> list[tuple[str, float]]:
    """``reps`` repetitions of the same launch sequence ((name, GPU us) in start order) as one
    sequence of (name, median ms); ``ValueError`` when the list is not ``reps`` equal sequences."""
    if reps < 1 or len(kernels) % reps:
        raise ValueError(f"{len(kernels)} kernels are not {reps} repetitions of one sequence")
    n = len(kernels) // reps
    out = []
    for i in range(n):
        names = {kernels[j * n + i][0] for j in range(reps)}
        if len(names) != 1:
            raise ValueError(f"launch {i} differs between repetitions: {sorted(names)}")
        times = sorted(kernels[j * n + i][1] for j in range(reps))
        out.append((names.pop(), times[len(times) // 2] / 1e3))
    return out


def launch_times(fn: Callable[[], object], reps: int = 10) -> list[tuple[str, float]] | None:
    """The GPU time of each kernel ``fn`` launches (median over ``reps`` calls, ms, in launch
    order), from the profiler's kernel records: unlike events around a call it excludes the CPU's
    launch latency, which dominates a short launch timed alone. None where the profiler records no
    kernels (no CUPTI)."""
    kernels = _kernel_records(fn, reps, sync_each=False)
    if not kernels:
        return None
    return per_launch([(name, end - start) for start, end, name in kernels], reps)


def _kernel_records(fn: Callable[[], object], reps: int, *, sync_each: bool) -> list[tuple[float, float, str]]:
    """(start, end, name) in us of every CUDA kernel of ``reps`` calls of ``fn`` (after one call
    outside the profiler), in start order; empty where the profiler records no kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
            if sync_each:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    return sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == DeviceType.CUDA), key=lambda k: k[0])


def launch_timeline(fn: Callable[[], object], reps: int = 5) -> list[tuple[str, float, float]] | None:
    """When each kernel of the last of ``reps`` calls of ``fn`` ran: (name, start, end) in us from
    the first kernel's start of that call (profiler kernel records; launches on several streams
    overlap). None where the profiler records no kernels."""
    kernels = _kernel_records(fn, reps, sync_each=True)
    if not kernels or len(kernels) % reps:
        return None
    last = kernels[-(len(kernels) // reps):]
    t0 = last[0][0]
    return [(name, float(s - t0), float(e - t0)) for s, e, name in last]
