"""Wave-step suites: the fused kernel (launch configurations), the whole step with its absorbing
boundary, and the plain torch implementation of the same step (the peer).

Least traffic of a step (``step_traffic``): read p, p_prev and m = v**2 dt**2 once, write p_next
once, i.e. 4 words per updated point (16 B in fp32); the R-wide halo faces of p are ignored (0.3% at
552**3). FOM = that traffic / median time, compared with the device-to-device copy bandwidth
measured in the same run. The CPML's memory variables are extra traffic the FOM does not count as
useful (the whole-step records carry it against us). Every case is checked against the torch step
before it is timed.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tilecraft.bench.harness import Record, time_rotating
from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig
from tilecraft.reference.wave import wave_step_torch
from tilecraft.wave.boundaries import Layout

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
    fom = traffic.bytes / (time_ms * 1e-3) / 1e12
    x = {"flops": traffic.flops, "bytes": traffic.bytes, "time_ms": time_ms, "gpts": traffic.points / time_ms / 1e6,
         "points": traffic.points, "spread": spread}
    x.update(extra or {})
    return Record(suite="wave", case=case, metric="FOM (least bytes / time)", unit="TB/s", ours=fom,
                  peer="torch step (same arithmetic, elementwise ops)" if peer_tbps else None, peer_value=peer_tbps,
                  ceiling="copy bandwidth (measured, same run)" if copy_tbps else None, ceiling_value=copy_tbps,
                  measured=measured, extra=x)


def _fields(shape, dtype, device, gen):
    p = (torch.rand(shape, generator=gen, dtype=torch.float32) - 0.5).to(device=device, dtype=dtype)
    pp = (torch.rand(shape, generator=gen, dtype=torch.float32) - 0.5).to(device=device, dtype=dtype)
    # m = v**2 dt**2 / h**2-scaled: velocities 1500..4500 m/s at h = 10 m and a stable dt
    v = torch.rand(shape, generator=gen, dtype=torch.float32).mul_(3000).add_(1500).to(device=device)
    m = (v * 1e-3) ** 2
    return p, pp, m.to(dtype)


def step_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = 20,
               configs: Sequence[WaveConfig] | None = None, device: str = "cuda", copy_tbps: float | None = None,
               budget_s: float = 1.0, say: Callable[[str], None] = print) -> list[Record]:
    """The fused kernel on the padded grid of an n**3 model (+ pml_width + R per side), every point
    R or more from the faces updated: each configuration, the sponge variant, and the torch peer."""
    dev = torch.device(device)
    measured = dev.type == "cuda"
    layout = Layout((n, n, n), order, pml_width, False)
    shape, (lo, hi) = layout.shape, layout.updated
    spacing = (10.0, 10.0, 10.0)
    gen = torch.Generator().manual_seed(20261121)
    p, pp, m = _fields(shape, dtype, dev, gen)
    points = math.prod(b - a for a, b in zip(lo, hi))
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
        records.append(check_and_time("fused", cfg, None, ref))
    # the sponge variant of the best configuration (its profiles add no per-point traffic)
    ok_recs = [r for r in records if r.case.get("variant") == "fused" and r.extra.get("ok")]
    if ok_recs:
        best = max(ok_recs, key=lambda r: r.ours)
        g = [torch.rand(nn, generator=gen, dtype=torch.float32).mul_(0.01).to(device=dev, dtype=dtype) for nn in shape]
        records.append(check_and_time("fused+sponge", WaveConfig(**best.extra["config"]), g, reference(g)))
    return records


def simulate_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = 20,
                   nt: int = 50, device: str = "cuda", copy_tbps: float | None = None, backends=("triton", "torch"),
                   boundary: str = "pml", say: Callable[[str], None] = print) -> list[Record]:
    """Whole steps through ``simulate`` (fused step + CPML slabs + source and receivers), per step
    time = the time loop's wall time / nt after a warm-up run; FOM with the same 16 B/pt."""
    from tilecraft import wave

    dev = torch.device(device)
    gen = torch.Generator().manual_seed(7)
    v = torch.rand((n, n, n), generator=gen, dtype=torch.float32).mul_(1000).add_(1500).to(device=dev, dtype=dtype)
    model = wave.Model(v, 10.0)
    c = (n - 1) * 10.0 / 2
    src = wave.Source([[c, c, c]], f0=15.0)
    rec = wave.Receivers.line((c, c, 0.0), (c, c, 2 * c), 101)
    pml_width = pml_width if boundary != "none" else 0
    layout = Layout((n, n, n), order, pml_width, False)
    lo, hi = layout.updated
    traffic = step_traffic(math.prod(b - a for a, b in zip(lo, hi)), order, torch.finfo(dtype).bits // 8)
    records, per_step = [], {}
    for backend in backends:
        steps = nt if backend == "triton" else max(3, nt // 10)
        say(f"simulate {backend} ({steps} steps)")
        kw = {"order": order, "boundary": boundary, "pml_width": pml_width, "backend": backend}
        wave.simulate(model, src, rec, 2, **kw)
        res = wave.simulate(model, src, rec, steps, **kw)
        per_step[backend] = res.info["loop_seconds"] / steps * 1e3
    peer = per_step.get("torch")
    peer_tbps = traffic.bytes / (peer * 1e-3) / 1e12 if peer else None
    for backend, ms in per_step.items():
        case = {"model": [n] * 3, "grid": list(layout.shape), "order": order, "dtype": str(dtype).replace("torch.", ""),
                "pml_width": pml_width, "variant": f"simulate-{backend}", "boundary": boundary}
        records.append(_record(case, traffic, ms, 0.0, copy_tbps, peer_tbps if backend != "torch" else None,
                               dev.type == "cuda", {"steps_timed": nt if backend == "triton" else max(3, nt // 10)}))
    return records


def cpml_suite(n: int = 512, order: int = 8, dtype: torch.dtype = torch.float32, pml_width: int = 20,
               device: str = "cuda", copy_tbps: float | None = None, budget_s: float = 0.5,
               say: Callable[[str], None] = print) -> list[Record]:
    """The CPML's slab kernels of one step, per axis (psi update, then zeta and the correction of
    p_next), as ``simulate`` launches them. Least traffic counted per point of each box: psi kernel
    read p and psi, write psi (3 words); correction kernel read p, psi, zeta, m, out, write zeta and
    out (7 words); neighbours along the axis are assumed cached."""
    from tilecraft.ops.wave import cpml_correct, cpml_psi
    from tilecraft.wave.boundaries import cpml_profiles
    from tilecraft.wave.solver import _memory_variables

    dev = torch.device(device)
    layout = Layout((n, n, n), order, pml_width, False)
    shape = layout.shape
    gen = torch.Generator().manual_seed(3)
    p, _, m = _fields(shape, dtype, dev, gen)
    out = torch.zeros_like(p)
    lo0, hi0 = layout.updated
    records = []
    for axis in range(3):
        a, b = (t.to(dtype=dtype, device=dev) for t in cpml_profiles(layout, axis, 3000.0, 10.0, 1e-3, 15.0))
        mv = _memory_variables(layout, axis, lo0[0], hi0[0], 0, shape, dtype, dev)
        for st in mv["stores"]:
            st["psi"].uniform_(-1, 1)
            st["zeta"].uniform_(-1, 1)
        psi_pts = sum(math.prod(h - l_ for l_, h in zip(lo, hi)) for lo, hi, _ in mv["psi_boxes"])
        cor_pts = sum(math.prod(h - l_ for l_, h in zip(lo, hi)) for lo, hi, _ in mv["corr_boxes"])
        item = p.element_size()
        traffic = StepTraffic(points=psi_pts + cor_pts, bytes=(3 * psi_pts + 7 * cor_pts) * item,
                              flops=psi_pts * (3 * (order // 2) + 3) + cor_pts * (6 * (order // 2) + 10))

        for z_rows in (False, True) if axis == 0 else (False,):
            def run(_i, axis=axis, mv=mv, a=a, b=b, z_rows=z_rows):
                for lo, hi, st in mv["psi_boxes"]:
                    cpml_psi(p, st["psi"], a, b, axis, order, 10.0, lo, hi, "triton", st["origin"], z_rows)
                for lo, hi, st in mv["corr_boxes"]:
                    cpml_correct(p, st["psi"], st["zeta"], a, b, m, out, axis, order, 10.0, lo, hi, "triton",
                                 st["origin"], z_rows)
            say(f"cpml axis {axis}{' z_rows' if z_rows else ''}")
            t = time_rotating(run, 1, device=dev, budget_s=budget_s)
            case = {"model": [n] * 3, "grid": list(shape), "order": order, "dtype": str(dtype).replace("torch.", ""),
                    "pml_width": pml_width, "variant": f"cpml-axis{axis}" + ("-zrows" if z_rows else "")}
            records.append(_record(case, traffic, t.median_ms, t.spread, copy_tbps, None, dev.type == "cuda",
                                   {"psi_points": psi_pts, "correction_points": cor_pts, "z_rows": z_rows}))
    return records
