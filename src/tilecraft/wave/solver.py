"""``simulate``: time-stepping of the acoustic wave equation on one device or several.

One step (leapfrog, m = v**2 dt**2)::

    p[n+1] = 2 p[n] - p[n-1] + m lap(p[n])             fused kernel (+ sponge damping)
             + m sum_a (dpsi_a/dx_a + zeta_a)          CPML (``ops.wave.cpml_step``; docs/wave.md)
             + dt**2 s[n] / cell volume               sources (a tiny index_add)

then the free surface (if any), then the receivers read p[n+1] at the next step. Several processes
(``torch.distributed`` initialised with world size > 1) split axis 0 (depth) into slabs: each rank
holds its slab and H halo planes on each side (H = R; 2R with the CPML, whose dpsi_z/dz recomputes
psi_z at R neighbours from p at +-R), exchanges the halos of p (and of the CPML's psi_z) with its
neighbours every step, and computes the planes that need no halo while the exchange is in
flight. Every point is computed by the same arithmetic as in one process, so the shot record is
bit-identical to the one-process run (tested on CPU with gloo).
"""
from __future__ import annotations

import math
import numbers
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from tilecraft.ops.stencil import _check_order, check_spacing
from tilecraft.ops.wave import (
    CpmlAxis,
    CpmlConfig,
    WaveConfig,
    capture_steps,
    cpml_step,
    resolve_backend,
    step_into,
)
from tilecraft.reference.stencil import second_derivative_coefficients
from tilecraft.wave.boundaries import (
    BOUNDARIES,
    Layout,
    apply_free_surface,
    cpml_profiles,
    layer_width,
    row_align,
    sponge_profile,
)
from tilecraft.wave.model import Model
from tilecraft.wave.source import Receivers, Source, point_weights

DEFAULT_COURANT = 0.6  # default dt as a fraction of the stable limit


def stencil_symbol_max(order: int) -> float:
    """max over wavenumbers of |c_0 + 2 sum_k c_k cos(k theta)|: the largest eigenvalue (per 1/h**2)
    of the second-difference operator of ``order``."""
    c = [float(x) for x in second_derivative_coefficients(order)]
    theta = np.linspace(0, np.pi, 4097)
    sym = c[0] + 2 * sum(ck * np.cos(k * theta) for k, ck in enumerate(c[1:], start=1))
    return float(np.abs(sym).max())


def stable_dt(vmax: float, spacing: Sequence[float], order: int) -> float:
    """The largest stable leapfrog time step: v**2 dt**2 S sum_a 1/h_a**2 <= 4 (S =
    ``stencil_symbol_max``), i.e. dt_max = 2 / (vmax sqrt(S sum_a 1/h_a**2))."""
    s = stencil_symbol_max(_check_order(order))
    if not (_real(vmax) and math.isfinite(vmax) and vmax > 0):
        raise ValueError(f"vmax must be a positive, finite velocity in m/s, got {vmax!r}")
    if not isinstance(spacing, (list, tuple)):
        raise TypeError(f"spacing must be one spacing per axis (hz, [hy,] hx), got {spacing!r}")
    spacing = check_spacing(tuple(spacing), len(spacing))
    return 2.0 / (vmax * math.sqrt(s * sum(1.0 / h**2 for h in spacing)))


def _real(x: object) -> bool:
    """A Python or numpy real number (not a bool)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_device(device: object) -> torch.device:
    """``simulate``'s ``device``: a CPU or an available CUDA/ROCm GPU, else ``ValueError`` / ``TypeError``."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string or a torch.device, got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device {device!r} is not a device torch knows: {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: no CUDA/ROCm GPU is available to this torch")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} GPU(s) are visible")
    elif dev.type != "cpu":
        raise ValueError(f"device {device!r}: CUDA/ROCm GPUs and the CPU are supported")
    return dev


@dataclass
class Result:
    """What ``simulate`` returns.

    ``record``: (nt, n_receivers) float64 (CPU), pressure at each receiver at t = n dt.
    ``snapshots``: [(n, field)] with the model-region wavefield p(t = n dt) (CPU, the fields' dtype).
    ``backend``: which step ran ("triton" or "torch"); ``info``: grid, dt limit, ranks, the wall time
    of the time loop (``loop_seconds``, device synchronised before and after), ...
    """

    record: torch.Tensor
    dt: float
    nt: int
    snapshots: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    backend: str = ""
    info: dict = field(default_factory=dict)

    @property
    def times(self) -> torch.Tensor:
        return torch.arange(self.nt, dtype=torch.float64) * self.dt


# ------------------------------------------------------------------------------------------------
# slabs along axis 0
# ------------------------------------------------------------------------------------------------
def halo_width(order: int, boundary: str, ranks: int) -> int:
    """Halo planes per side of a rank's slab: R, or 2R for the CPML on several ranks (dpsi_z/dz at a
    slab's face recomputes psi_z at R planes of the halo, from p at R more)."""
    r = order // 2
    return 2 * r if (boundary == "pml" and ranks > 1) else r


def partition(n_updated: int, ranks: int, radius: int, free_surface: bool = False,
              halo: int | None = None) -> list[tuple[int, int]]:
    """Split ``n_updated`` planes into ``ranks`` contiguous slabs (offsets from the first updated
    plane), the first ones one plane larger when it does not divide. Every slab must hold at least
    ``halo`` planes (default R; its neighbours' halo comes from it alone) and R + 1 for the top slab
    under a free surface."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    halo = radius if halo is None else halo
    base, extra = divmod(n_updated, ranks)
    sizes = [base + (1 if i < extra else 0) for i in range(ranks)]
    need = max(radius + 1, halo) if free_surface else halo
    if min(sizes) < halo or (ranks > 1 and sizes[0] < need):
        most = n_updated // max(need if ranks > 1 else halo, 1)
        what = f"the stencil radius R={radius}" + (f" (halo {halo} planes with the CPML)" if halo != radius else "")
        raise ValueError(f"{ranks} ranks split the {n_updated} updated planes of axis 0 into slabs of "
                         f"{min(sizes)} planes, narrower than {what}; use at most "
                         f"{most} ranks for this grid and order")
    out, start = [], 0
    for s in sizes:
        out.append((start, start + s))
        start += s
    return out


def split_planes(own: int, hw: int, rank: int, world: int) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """A rank's owned planes [hw, own + hw) (local indices) as (interior, edges): the interior needs
    no halo and runs while the halos travel; each edge needs one neighbour's halo and runs after
    the wait. Only a side with a neighbour has an edge: rank 0's first planes and the last rank's
    last planes belong to the interior (they read the grid's own boundary planes), so an end rank
    makes one step call fewer per step."""
    a = 2 * hw if rank > 0 else hw  # the first plane that needs nothing from the rank above
    b = own if rank < world - 1 else own + hw  # the end of the planes that need nothing from below
    edges = []
    if rank > 0:
        edges.append((hw, min(2 * hw, own + hw)))
    if rank < world - 1:
        edges.append((max(own, a), own + hw))
    return ((a, b) if b > a else None), [(e0, e1) for e0, e1 in edges if e1 > e0]


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------
def _check_inputs(model, sources, receivers, nt, order, boundary, pml_width):
    if not isinstance(model, Model):
        raise TypeError(f"model must be a tilecraft.wave.Model, got {type(model).__name__}")
    if isinstance(sources, Source):
        sources = [sources]
    if not sources or not all(isinstance(s, Source) for s in sources):
        raise TypeError("sources must be a Source or a non-empty list of Source")
    if not isinstance(receivers, Receivers):
        raise TypeError(f"receivers must be a tilecraft.wave.Receivers, got {type(receivers).__name__}")
    if isinstance(nt, bool) or not isinstance(nt, int) or nt < 1:
        raise ValueError(f"nt must be a positive integer, got {nt!r}")
    order = _check_order(order)
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    if pml_width is not None and (isinstance(pml_width, bool) or not isinstance(pml_width, int) or pml_width < 0):
        raise ValueError(f"pml_width must be an integer >= 0 or None (the boundary's default), got {pml_width!r}")
    pml_width = layer_width(boundary, pml_width)
    if boundary != "none" and pml_width < 1:
        raise ValueError(f"boundary {boundary!r} needs pml_width >= 1")
    if min(model.shape) < order + 1:
        raise ValueError(f"order {order} needs every model extent >= {order + 1}, got {model.shape}")
    return sources, order


def _points(layout: Layout, positions: torch.Tensor, spacing, method: str, what: str
            ) -> tuple[list[tuple[int, ...]], list[list[tuple[int, float]]]]:
    """Unique array points and, per position, [(point index, weight)]; checks each point is updated."""
    lo, hi = layout.updated
    table = point_weights(positions, layout.model_shape, spacing, method, what)
    points: dict[tuple[int, ...], int] = {}
    per = []
    for row, (pts, ws) in zip(positions.tolist(), table):
        entries = []
        for pt, w in zip(pts, ws):
            a = tuple(i + p for i, p in zip(pt, layout.pad_lo))
            if not all(l_ <= i < h_ for i, l_, h_ in zip(a, lo, hi)):
                raise ValueError(f"{what} at {tuple(row)} m: its {method} interpolation reaches past the grid's "
                                 "updated points (too close to the free surface or the edge); move it inward "
                                 "or use interpolation='trilinear'")
            entries.append((points.setdefault(a, len(points)), w))
        per.append(entries)
    return list(points), per


def _weights_matrix(n_points: int, per: list[list[tuple[int, float]]]) -> torch.Tensor:
    w = torch.zeros(n_points, len(per), dtype=torch.float64)
    for j, entries in enumerate(per):
        for i, wt in entries:
            w[i, j] += wt
    return w


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------
def simulate(model: Model, sources: Source | Sequence[Source], receivers: Receivers, nt: int,
             dt: float | None = None, *, order: int = 8, boundary: str = "pml", pml_width: int | None = None,
             free_surface: bool = False, snapshots: int | Sequence[int] | None = None, backend: str = "auto",
             courant: float = DEFAULT_COURANT, progress: Callable[[int, int], None] | None = None,
             device: str | torch.device | None = None, pml_config: CpmlConfig | None = None,
             step_config: WaveConfig | None = None, cuda_graphs: bool | None = None,
             in_place: bool | None = None) -> Result:
    """Model ``nt`` steps of p_tt = v**2 lap p + s and return the shot record (and snapshots).

    ``model``: a ``Model`` (2D or 3D). ``device``: where to run (default: the model's device); a
    model kept on the CPU with ``device="cuda"`` moves only this rank's slab to the GPU, so a model
    larger than one GPU can run on several. ``sources``: one ``Source`` or a list.
    ``receivers``: ``Receivers``. ``dt``: seconds; default ``courant`` x the stable limit
    (``stable_dt``); a dt above the limit is a ValueError. ``order``: space order 2..16 (even).
    ``boundary``: "pml" (convolutional PML), "sponge" (damping layer) or "none" (rigid walls);
    ``pml_width`` points of it outside the model on every side (not above a ``free_surface``); default
    (None) ``boundaries.DEFAULT_WIDTH``: 12 for the CPML (measured to reflect under 0.2%), 20 for the sponge.
    ``snapshots``: every k-th step (int) or the listed steps. ``backend``: "auto", "triton", "torch"
    (``tilecraft.ops.wave``). ``progress(step, nt)`` is called every step. ``pml_config``: how the
    Triton backend runs the CPML (``tilecraft.ops.wave.CpmlConfig``; default
    ``default_cpml_config``: the layers' z-march on GPUs). ``step_config``: the plain step's launch
    configuration (``tilecraft.ops.wave.WaveConfig``: the interior's kernel and tiles; default
    ``default_config``, with a CPML ``cpml_interior_config``). ``cuda_graphs=True``: on CUDA GPUs (Triton backend;
    several ranks: with the CPML), steps from the third on replay CUDA graphs of the step
    (``ops.wave.capture_steps``: one per state of the arrays of p and psi's buffers, 2 in place and 6
    out of place; on one rank each graph holds the whole step, the receivers' samples and the sources' injection
    included, step n's rows picked by a counter on the GPU; on several ranks one set for the interior and one for the
    edge planes, the halo exchange between them staying outside the graphs) instead of launching its kernels (~12
    with the CPML) and the receivers' and sources' torch calls from Python: the same bits without the CPU's launch
    latency. Default (None): on with several ranks, where it was measured
    to matter (2 H200s, weak scaling 74.8% launched, 101.8% replayed: a rank's Python could not
    keep up with the step's launches); on one rank with the CPML for grids of at most ``GRAPH_AUTO_POINTS`` points
    (about a 384**3 model) and runs of at least ``GRAPH_AUTO_STEPS`` steps, where the
    launches' host path sets the pace (H200: 1.3-5x faster steps from 128**3 to 384**3), off above, where
    the GPU does and graphs gained nothing; without the CPML on grids of at most ``GRAPH_AUTO_POINTS_PLAIN`` points
    (a 128**3 model fits with the sponge, 2.5 / 5.4 M points; a 256**3 one does not) over at least
    ``GRAPH_AUTO_STEPS_PLAIN`` steps (H200, 128**3: 1.2-2.7x faster steps at 300 and 1000 steps) (docs/wave.md).
    ``info["cuda_graphs"]`` says whether they ran, or why not (a failed capture also warns and
    runs uncaptured). ``in_place``: each step writes p_next over p_prev (True: two arrays of p) or
    into a third array, the three then rotated (False: one grid more memory). The CPML step runs
    8% faster out of place (H200, 512**3 + 20-point CPML: 1.370 against 1.486 ms per step back to
    back, ``benchmarks/wave_steady.py``, 2026-11-28), with the same values. Default (None): out of
    place unless the GPU lacks room for the third array (a warning says so); ``info["in_place"]`` says
    which ran.

    When ``torch.distributed`` is initialised with several ranks, axis 0 is split into slabs (one per
    rank; every rank passes the same arguments) and every rank gets the same record.
    """
    sources, order = _check_inputs(model, sources, receivers, nt, order, boundary, pml_width)
    for name, cfg, kind in (("pml_config", pml_config, CpmlConfig), ("step_config", step_config, WaveConfig)):
        if cfg is not None and not isinstance(cfg, kind):
            raise TypeError(f"{name} must be a tilecraft.ops.wave.{kind.__name__} or None, got {type(cfg).__name__}")
    if cuda_graphs is not None and not isinstance(cuda_graphs, bool):
        raise TypeError(f"cuda_graphs must be True, False or None (on with several ranks), got {cuda_graphs!r}")
    if in_place is not None and not isinstance(in_place, bool):
        raise TypeError(f"in_place must be True, False or None (out of place where possible), got {in_place!r}")
    spacing, dtype = model.spacing, model.velocity.dtype
    device = _check_device(device) if device is not None else model.velocity.device
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    dt_max = stable_dt(model.vmax, spacing, order)
    if dt is None:
        if not _real(courant):
            raise TypeError(f"courant must be a number in (0, 1], got {courant!r}")
        if not 0 < courant <= 1:
            raise ValueError(f"courant must be in (0, 1], got {courant}")
        dt = courant * dt_max
    if not (_real(dt) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
    dt = float(dt)
    if dt > dt_max:
        raise ValueError(f"dt={dt:.6g} s is unstable: the CFL limit for vmax={model.vmax:g} m/s, order {order} "
                         f"and spacing {spacing} is dt <= {dt_max:.6g} s")
    backend = resolve_backend(backend, device)
    width = layer_width(boundary, pml_width)
    layout = Layout(model.shape, order, width, free_surface, row_align(boundary, width))
    r, ndim, shape = layout.radius, model.ndim, layout.shape
    glo, ghi = layout.updated
    rank, world = _world()
    hw = halo_width(order, boundary, world)
    slabs = partition(ghi[0] - glo[0], world, r, free_surface, hw)
    z0, z1 = glo[0] + slabs[rank][0], glo[0] + slabs[rank][1]  # owned planes, global indices
    off = z0 - hw  # global index of local plane 0 (negative on rank 0 when hw > R: planes of zeros)
    lshape = (z1 - z0 + 2 * hw,) + shape[1:]

    src_pts, src_per = _points(layout, torch.cat([s.positions for s in sources]), spacing,
                               sources[0].interpolation, "source")
    if len({s.interpolation for s in sources}) > 1:
        raise ValueError("all sources must use the same interpolation")
    rec_pts, rec_per = _points(layout, receivers.positions, spacing, receivers.interpolation, "receiver")
    snap_steps = _snapshot_steps(snapshots, nt)

    # --- fields (local slab + halos) -------------------------------------------------------------
    v_local = layout.pad_model(model.velocity, off, off + lshape[0]).to(device)
    m = (v_local.to(torch.float64) ** 2 * dt**2).to(dtype).contiguous()
    p = torch.zeros(lshape, dtype=dtype, device=device)
    pp = torch.zeros_like(p)
    sponge = None
    pml = []
    f0 = min(float(s.f0) for s in sources)
    for axis in range(ndim):
        h = spacing[axis]
        if boundary == "sponge":
            g = _cut(sponge_profile(layout, axis, model.vmax, h, dt), axis, off, lshape[0], 0.0)
            sponge = (sponge or []) + [g.to(dtype=dtype, device=device)]
        elif boundary == "pml":
            a, b = cpml_profiles(layout, axis, model.vmax, h, dt, f0)
            ax = cpml_axis(layout, axis, h, _cut(a, axis, off, lshape[0], 0.0).to(dtype=dtype, device=device),
                           _cut(b, axis, off, lshape[0], 1.0).to(dtype=dtype, device=device), z0, z1, off, lshape,
                           world > 1)
            if ax is not None:
                pml.append(ax)

    # --- sources and receivers, as flat indices into the local arrays ---------------------------
    cell = math.prod(spacing)
    wsrc = _weights_matrix(len(src_pts), src_per)
    ft = torch.cat([s.samples(nt, dt) for s in sources], dim=1)  # (nt, n_sources)
    inj_all = (ft @ wsrc.T) * (dt**2 / cell)  # (nt, n_points), float64
    src_own = [i for i, pt in enumerate(src_pts) if z0 <= pt[0] < z1]
    src_idx = torch.tensor([_flat(src_pts[i], off, lshape) for i in src_own], dtype=torch.long, device=device)
    inj = inj_all[:, src_own].to(dtype=dtype, device=device)
    rec_own = torch.tensor([z0 <= pt[0] < z1 for pt in rec_pts], dtype=torch.bool, device=device)
    rec_idx = torch.tensor([_flat(pt, off, lshape) if z0 <= pt[0] < z1 else 0 for pt in rec_pts],
                           dtype=torch.long, device=device)
    samples = torch.zeros(nt, len(rec_pts), dtype=dtype, device=device)
    snaps: list[tuple[int, torch.Tensor]] = []

    lo_other, hi_other = glo[1:], ghi[1:]
    own = z1 - z0
    interior, edges = split_planes(own, hw, rank, world)
    exchanger = _Halo(rank, world, hw) if world > 1 else None
    psi_z = [ax for ax in pml if ax.axis == 0 and world > 1]  # split axis: its psi's halos travel too

    def step(e0: int, e1: int, p, pp, out) -> None:
        if pml:
            cpml_step(p, pp, m, out, order, spacing, (e0,) + lo_other, (e1,) + hi_other, pml, backend, step_config,
                      pml_config)
        else:
            step_into(p, pp, m, out, order, spacing, (e0,) + lo_other, (e1,) + hi_other, sponge, backend, step_config)

    def parity_step(k: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None,
                    boxes: list[tuple[int, int]]) -> None:
        """The step calls on ``boxes`` (plane ranges) in the state of k steps after the one with
        p = a, p_prev = b and p_next into c (None: over p_prev)."""
        for ax in pml * k:
            ax.swap()
        try:
            x, y, z = step_arrays(k, a, b, c)
            for e0, e1 in boxes:
                step(e0, e1, x, y, z)
        finally:
            for ax in pml * k:
                ax.swap()

    # a step's two parts: the interior (runs while the halos travel), then the edge planes
    parts = ([interior] if interior is not None else [], edges)
    graphs, graph_state = None, _graph_plan(cuda_graphs, pml, backend, device, nt, world, p.numel())
    if in_place is None:
        in_place = not _room_for(p, device)
    spare = None if in_place else torch.zeros_like(p)  # its frozen halo (never written) must read 0
    zero = torch.zeros((), dtype=dtype, device=device)
    # one rank: a step is ``whole_step`` (receivers, both parts, source, free surface), launched or replayed from its
    # graph; in the graphs step n's row of the record and of the source samples is picked by a counter on the
    # device that each replay moves on
    step_t = torch.full((1,), 2, dtype=torch.long, device=device) if world == 1 else None

    def record(x: torch.Tensor, n: int | None) -> None:
        """The receivers' samples of p = x into step n's row of the record (None: row ``step_t``)."""
        got = torch.where(rec_own, x.reshape(-1)[rec_idx], zero)
        if n is None:
            samples.index_copy_(0, step_t, got.unsqueeze(0))
        else:
            samples[n] = got

    def inject(z: torch.Tensor, n: int | None) -> None:
        """Step n's source samples (None: row ``step_t``) added into p_next = z, then the free surface on it."""
        if src_idx.numel():
            z.view(-1).index_add_(0, src_idx, inj[n] if n is not None else inj.index_select(0, step_t).squeeze(0))
        if free_surface and rank == 0:
            apply_free_surface(z, r, surface=r - off)

    def whole_step(k: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, n: int | None = None) -> None:
        """Step n on one rank (None: step ``step_t``, then ``step_t`` + 1: the graphs' form), in the state of k steps
        after the one with p = a, p_prev = b and p_next into c (0: the loop's current arrays): the receivers' samples
        of p, the step's calls, the sources' injection, the free surface."""
        for ax in pml * k:
            ax.swap()
        try:
            x, y, z = step_arrays(k, a, b, c)
            record(x, n)
            for e0, e1 in parts[0] + parts[1]:
                step(e0, e1, x, y, z)
            inject(z, n)
            if n is None:
                step_t.add_(1)
        finally:
            for ax in pml * k:
                ax.swap()

    def run_part(i: int, n: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        """Part i of step n (p = a, p_prev = b, p_next into c): replayed where captured (the captures hold
        the same rotation of the arrays), else launched."""
        if graphs is None:
            for e0, e1 in parts[i]:
                step(e0, e1, a, b, c)
        elif graphs[i] is not None:
            graphs[i].replay(n - 2)  # captured at step 2: graph 0 of a pair is the even steps' state

    _sync(device)
    if world > 1:
        # the ranks' set-up (each pads the whole model on the CPU) ends at different times: start the
        # clock together, or a rank's loop time holds its wait for a late neighbour's first halo
        dist.barrier()
        _sync(device)
    loop_start = time.perf_counter()
    for n in range(nt):
        if n in snap_steps:
            snaps.append((n, _gather_model(p, layout, z0, z1, off, rank, world)))
        out = pp if spare is None else spare  # in place: each point reads its own p_prev before writing p_next
        if n == 2 and graph_state == "on":  # both parities ran uncaptured: compiled, plans cached
            # psi alternates (period 2); three arrays of p rotate (period 3): 6 captures, else 2
            period = 2 if spare is None else 6
            keep = (p, pp, spare, m, pml, sponge, samples, inj, src_idx, rec_idx, rec_own, zero, step_t)
            if world == 1:
                # the counter's indexed copies have not run yet: once on scratch copies, so that the capture finds
                # their kernels loaded
                first = torch.zeros(1, dtype=torch.long, device=device)
                samples[:1].clone().index_copy_(0, first, samples[:1])
                inj.index_select(0, first)
                graphs = [capture_steps(lambda k, a=p, b=pp, c=spare: whole_step(k, a, b, c), period, device, keep)]
            else:
                graphs = [capture_steps(lambda k, a=p, b=pp, c=spare, bx=calls: parity_step(k, a, b, c, bx), period,
                                        device, keep=keep) if calls else None for calls in parts]
            why = next((g for g in graphs if isinstance(g, str)), None)
            if why is not None:
                warnings.warn(f"simulate: CUDA graphs off, {why}; steps launched one by one", RuntimeWarning,
                              stacklevel=2)
                graphs, graph_state = None, f"off: {why}"
        if world == 1:  # the whole step, from its graph once captured
            if graphs is not None:
                graphs[0].replay(n - 2)
            else:
                whole_step(0, p, pp, spare, n)
            for ax in pml:
                ax.swap()  # psi written this step becomes the one read next step
        else:  # the interior, the halo exchange, the edge planes
            record(p, n)
            run_part(0, n, p, pp, out)
            exchanger.wait()
            run_part(1, n, p, pp, out)
            for ax in pml:
                ax.swap()
            inject(out, n)
            exchanger.start([out] + [ax.psi[0][0] for ax in psi_z])
        p, pp, spare = next_arrays(p, pp, spare)
        if progress is not None:
            progress(n + 1, nt)
    if exchanger is not None:
        exchanger.wait()
    _sync(device)
    loop_s = time.perf_counter() - loop_start

    if world > 1:
        dist.all_reduce(samples)  # one rank holds each point, the others add exact zeros
    wrec = _weights_matrix(len(rec_pts), rec_per)
    record = samples.cpu().to(torch.float64) @ wrec
    info = {"grid": list(shape), "model_shape": list(model.shape), "order": order, "boundary": boundary,
                "pml_width": width, "free_surface": free_surface, "dt_max": dt_max, "courant": dt / dt_max, "ranks": world,
                "slab": [z0, z1], "device": str(device), "dtype": str(dtype).replace("torch.", ""),
                "loop_seconds": loop_s, "cuda_graphs": graph_state, "in_place": spare is None}
    return Result(record=record, dt=float(dt), nt=nt, snapshots=snaps, backend=backend, info=info)


def next_arrays(p, p_prev, spare=None) -> tuple:
    """(p, p_prev, spare) of the next step after p_next was written into ``spare`` (or over p_prev where
    ``spare`` is None): ``simulate``'s rotation."""
    if spare is None:
        return p_prev, p, None
    return spare, p, p_prev


def step_arrays(k: int, p, p_prev, spare=None) -> tuple:
    """(p, p_prev, p_next) of the step k steps after one with p, p_prev and p_next into ``spare``, as
    ``simulate``'s loop rotates them: in place (``spare`` None) p and p_prev swap and p_next is p_prev;
    with three arrays (p, p_prev, p_next) becomes (p_next, p, p_prev). The CUDA graphs capture these
    states (period 2, or 6 with psi's two buffers)."""
    if spare is None:
        return (p, p_prev, p_prev) if k % 2 == 0 else (p_prev, p, p)
    return ((p, p_prev, spare), (spare, p, p_prev), (p_prev, spare, p))[k % 3]


#: ``cuda_graphs=None`` on one rank: graphs where the rank's grid holds at most this many points and the run has at
#: least ``GRAPH_AUTO_STEPS`` steps. H200, fp32 order 8, 12-point CPML, ``simulate`` of ``bench.wave.cube_shot``, 100
#: steps, ms a step launched / from graphs, two runs (2026-11-29, ``benchmarks/wave_host_small.py``): 128**3 1.046-1.275
#: / 0.211-0.242, 256**3 1.136-1.250 / 0.380-0.397, 320**3 1.024 / 0.524, 384**3 (a 72 M-point grid) 0.817-1.491 /
#: 0.616-0.669: the launches' host path sets the pace; 512**3 (161 M points) 1.034-1.133 / 1.111-1.144, the GPU does.
#: 20 steps: the captures (7-9 ms) make graphs slower at 512**3 (1.412-1.602 against 1.059-1.497).
GRAPH_AUTO_POINTS = 100_000_000
GRAPH_AUTO_STEPS = 32
#: Without the CPML (no boundary, or the sponge) a step is one launch and the receivers' and sources' calls, and graphs
#: pay only on small grids over long runs: ``cuda_graphs=None`` on one rank turns them on for grids of at most
#: ``GRAPH_AUTO_POINTS_PLAIN`` points and runs of at least ``GRAPH_AUTO_STEPS_PLAIN`` steps. H200, fp32 order 8,
#: ``simulate`` of ``bench.wave.cube_shot``, ms a step launched / from graphs (the captures counted), two rounds
#: (2026-11-29, ``benchmarks/results/2026-11-29-h200-twentieth/wave-host-small-356f88d.json``): 128**3 without a
#: boundary (2.5 M points) 1000 steps 0.126-0.178 / 0.073-0.075, 300 steps 0.127-0.227 / 0.083-0.090, 100 steps
#: 0.131-0.137 / 0.116-0.136; with the sponge (5.4 M points) 1000 steps 0.125-0.169 / 0.107, 300 steps 0.174-0.189 /
#: 0.119-0.124; 256**3 (18 M points and more) 1000 steps 0.123-0.142 / 0.114 without a boundary but 0.314 / 0.323-0.325
#: with the sponge, and slower with graphs at 100 steps (0.127-0.149 / 0.158-0.180); 384**3 slower at every length.
GRAPH_AUTO_POINTS_PLAIN = 8_000_000
GRAPH_AUTO_STEPS_PLAIN = 300


def _graph_plan(cuda_graphs: bool | None, pml: list, backend: str, device: torch.device, nt: int,
                world: int, points: int = 0) -> str:
    """"on" where ``simulate`` captures its steps in CUDA graphs (from step 2), else why not. ``points``: the
    rank's grid (``cuda_graphs=None`` on one rank: on with the CPML up to ``GRAPH_AUTO_POINTS`` points and from
    ``GRAPH_AUTO_STEPS`` steps, where the launches' host path, not the GPU, sets the pace; without the CPML, where a
    step is one launch and the receivers' and sources' calls, up to ``GRAPH_AUTO_POINTS_PLAIN`` points from
    ``GRAPH_AUTO_STEPS_PLAIN`` steps: shorter runs and larger grids measured no faster with the captures counted)."""
    if cuda_graphs is False:
        return "off: cuda_graphs=False"
    # where graphs cannot run, that is the reason, whatever the switch
    for why, cond in (("no CPML", not pml and world > 1), (f"backend {backend}", backend != "triton"),
                      (f"device {device.type}", device.type != "cuda"), ("fewer than 3 steps", nt < 3)):
        if cond:
            return f"not used: {why}"
    if cuda_graphs is None and world == 1:
        if not pml:
            if points > GRAPH_AUTO_POINTS_PLAIN:
                return (f"off: one rank without the CPML, {points / 1e6:.0f} M points (no gain measured above "
                        f"{GRAPH_AUTO_POINTS_PLAIN / 1e6:.0f} M; cuda_graphs=True turns them on)")
            if nt < GRAPH_AUTO_STEPS_PLAIN:
                return (f"off: one rank without the CPML, {nt} steps (the captures cost more than they save under "
                        f"{GRAPH_AUTO_STEPS_PLAIN}; cuda_graphs=True turns them on)")
            return "on"
        if points > GRAPH_AUTO_POINTS:
            return (f"off: one rank, {points / 1e6:.0f} M points (the GPU sets the pace above "
                    f"{GRAPH_AUTO_POINTS / 1e6:.0f} M; cuda_graphs=True turns them on)")
        if nt < GRAPH_AUTO_STEPS:
            return (f"off: one rank, {nt} steps (the captures cost more than they save under {GRAPH_AUTO_STEPS}; "
                    "cuda_graphs=True turns them on)")
    return "on"


def _room_for(p: torch.Tensor, device: torch.device) -> bool:
    """Whether ``simulate`` can hold a third array like p: on a GPU, twice its size free (else a warning);
    elsewhere always."""
    if device.type != "cuda":
        return True
    free, _total = torch.cuda.mem_get_info(device)
    if free >= 2 * p.numel() * p.element_size():
        return True
    warnings.warn(f"simulate: p_next written over p_prev (about 8% slower per step): {free / 2**30:.1f} GiB free "
                  f"on {device}, a third {p.numel() * p.element_size() / 2**30:.1f} GiB array does not fit twice",
                  RuntimeWarning, stacklevel=3)
    return False


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _flat(pt: tuple[int, ...], off: int, lshape: tuple[int, ...]) -> int:
    idx = (pt[0] - off,) + tuple(pt[1:])
    return int(np.ravel_multi_index(idx, lshape))


def _snapshot_steps(snapshots, nt: int) -> set[int]:
    if snapshots is None:
        return set()
    if isinstance(snapshots, bool) or isinstance(snapshots, (str, bytes)) or not (
            isinstance(snapshots, numbers.Integral) or isinstance(snapshots, (Sequence, set, frozenset, range))):
        raise TypeError(f"snapshots must be a step interval (int) or a list of step numbers, got {snapshots!r}")
    if isinstance(snapshots, numbers.Integral):
        if snapshots < 1:
            raise ValueError(f"snapshots must be a positive step interval or a list of steps, got {snapshots}")
        return set(range(0, nt, int(snapshots)))
    wrong = [s for s in snapshots if isinstance(s, bool) or not isinstance(s, numbers.Integral)]
    if wrong:
        raise TypeError(f"snapshot steps must be integers, got {wrong!r}")
    steps = {int(s) for s in snapshots}
    bad = [s for s in steps if not 0 <= s < nt]
    if bad:
        raise ValueError(f"snapshot steps must lie in [0, nt={nt}), got {sorted(bad)}")
    return steps


def _cut(profile: torch.Tensor, axis: int, off: int, length: int, fill: float) -> torch.Tensor:
    """A 1D profile along ``axis`` on the local planes [off, off + length) of axis 0 (``fill``
    beyond the grid: a rank's halo may reach past it); other axes whole."""
    if axis != 0:
        return profile
    out = torch.full((length,), fill, dtype=profile.dtype)
    a, b = max(off, 0), min(off + length, profile.shape[0])
    if a < b:
        out[a - off:b - off] = profile[a:b]
    return out


def cpml_axis(layout: Layout, axis: int, h: float, a: torch.Tensor, b: torch.Tensor, z0: int, z1: int, off: int,
              lshape: tuple[int, ...], split: bool = False) -> CpmlAxis | None:
    """The CPML of one axis on the local grid (``tilecraft.ops.wave.CpmlAxis``), None where the axis
    has no layer on this rank.

    The layers widened by R (where the terms are not zero), in local indices and, along axis 0, cut
    to the owned planes [z0, z1). Memory variables: one store per layer holding only the indices its
    points and their R neighbours touch (W + 3R per layer: a few percent of the grid), or, for axis 0
    when it is ``split`` between ranks, one store of the whole slab (its halos are exchanged; every
    rank keeps one, with or without a layer, so the exchange pairs up).
    """
    r = layout.radius
    layers = []
    for w0, w1 in layout.slabs(axis, r):
        if axis == 0:
            w0, w1 = max(w0, z0) - off, min(w1, z1) - off
        if w0 < w1:
            layers.append((w0, w1))
    if not layers and not (axis == 0 and split):
        return None
    return CpmlAxis.create(lshape, axis, h, a, b, layers, layout.order, full=axis == 0 and split)


class _Halo:
    """Asynchronous exchange of the halo planes of axis 0 (``radius`` of them per side) of one or
    more tensors with the neighbouring ranks."""

    def __init__(self, rank: int, world: int, radius: int):
        self.rank, self.world, self.r = rank, world, radius
        self.works: list = []

    def start(self, tensors: list[torch.Tensor]) -> None:
        r = self.r
        ops = []
        for t in tensors:
            n = t.shape[0]
            if self.rank > 0:
                ops += [dist.P2POp(dist.isend, t[r:2 * r], self.rank - 1),
                        dist.P2POp(dist.irecv, t[0:r], self.rank - 1)]
            if self.rank < self.world - 1:
                ops += [dist.P2POp(dist.isend, t[n - 2 * r:n - r], self.rank + 1),
                        dist.P2POp(dist.irecv, t[n - r:n], self.rank + 1)]
        self.works = dist.batch_isend_irecv(ops) if ops else []

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works = []


def _gather_model(p: torch.Tensor, layout: Layout, z0: int, z1: int, off: int, rank: int, world: int) -> torch.Tensor:
    """The model region of p (all ranks' slabs joined), on the CPU."""
    crop = tuple(slice(a, a + n) for a, n in zip(layout.pad_lo[1:], layout.model_shape[1:]))
    m0, m1 = layout.pad_lo[0], layout.pad_lo[0] + layout.model_shape[0]
    a, b = max(z0, m0), min(z1, m1)
    part = p[(slice(a - off, b - off),) + crop] if a < b else p[(slice(0, 0),) + crop]
    if world == 1:
        return part.cpu().clone()
    sizes = [None] * world
    dist.all_gather_object(sizes, int(part.shape[0]))
    big = max(sizes)
    buf = torch.zeros((big,) + tuple(part.shape[1:]), dtype=p.dtype, device=p.device)
    buf[:part.shape[0]] = part
    bufs = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(bufs, buf)
    return torch.cat([b_[:s] for b_, s in zip(bufs, sizes)]).cpu()
