"""The acoustic wave time step: validation, choice of backend, and launch of ``tilecraft.kernels.wave``.

``wave_step`` is the public op (registered as ``torch.ops.tilecraft.wave_step``); ``cpml_psi`` and
``cpml_correct`` are the PML's slab updates that ``tilecraft.wave.simulate`` launches.

Backends: ``"triton"`` runs the kernels (CUDA/ROCm tensors, or CPU tensors under
``TRITON_INTERPRET=1``); ``"torch"`` runs ``tilecraft.reference.wave`` (elementwise torch, in the
fields' dtype). ``"auto"`` is Triton where it can run, else torch -- never silently: the solver
reports which one ran.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import triton

from tilecraft.kernels import wave as _k
from tilecraft.ops.stencil import _check_order, triton_cdiv, triton_on_cpu
from tilecraft.reference.stencil import second_derivative_coefficients, stencil_weights
from tilecraft.reference.wave import (
    cpml_correct_torch,
    cpml_psi_torch,
    first_derivative_coefficients,
    wave_step_torch,
)

SUPPORTED_DTYPES = (torch.float32, torch.float64)
BACKENDS = ("auto", "triton", "torch")


@dataclass(frozen=True)
class WaveConfig:
    """Launch configuration of ``wave_step_kernel``."""

    block_y: int
    block_x: int
    block_z: int
    num_warps: int
    nontemporal: bool = False
    maxnreg: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def default_config(dtype: torch.dtype, order: int, device: torch.device) -> WaveConfig:
    """GPU: tiles of 128 points x 8 rows at 8 warps (4 points per thread), 16 planes per program,
    a 56-register budget (fp32, orders <= 8): the fastest of the sweep in ``benchmarks/wave_bench.py``
    (H200, fp32 order 8, 512**3 + PML: 67.3% of copy bandwidth; 16x128 at 16 warps 66.6%, without the
    register budget 62.7%; benchmarks/results/2026-11-21-h200/wave-step-3897131.json).
    Interpreter: a few large programs (it pays per program, not per point)."""
    if device.type != "cuda":
        return WaveConfig(block_y=8, block_x=32, block_z=16, num_warps=1)
    itemsize = torch.finfo(dtype).bits // 8
    budget = 56 if itemsize == 4 and order <= 8 else None  # higher orders spill under 56
    return WaveConfig(block_y=8, block_x=512 // itemsize, block_z=16, num_warps=8, maxnreg=budget)


def resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    triton_ok = device.type == "cuda" or triton_on_cpu()
    if backend == "auto":
        return "triton" if triton_ok else "torch"
    if backend == "triton" and not triton_ok:
        raise ValueError("backend 'triton' needs GPU tensors or the Triton interpreter (TRITON_INTERPRET=1 set "
                         "before importing tilecraft); use backend='torch' on the CPU")
    return backend


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def check_field(name: str, t: object) -> torch.Tensor:
    """A 2D (nz, nx) or 3D (nz, ny, nx) float32/float64 tensor, or a TypeError/ValueError naming ``name``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() not in (2, 3):
        raise ValueError(f"{name} must be 2D (nz, nx) or 3D (nz, ny, nx), got shape {tuple(t.shape)}")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {t.dtype}; float32 and float64 are supported")
    return t


def check_fields(p: torch.Tensor, **others: torch.Tensor | None) -> None:
    """p and every other field: tensors of one dtype (fp32/fp64), device, shape, contiguous."""
    check_field("p", p)
    for name, t in {"p": p, **others}.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.shape != p.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(p.shape)} (the shape of p)")
        if t.dtype != p.dtype:
            raise TypeError(f"{name} has dtype {t.dtype}, expected {p.dtype}")
        if t.device != p.device:
            raise ValueError(f"{name} is on {t.device}, p on {p.device}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {t.stride()}")


def check_box(shape: tuple[int, ...], order: int, lo: tuple[int, ...], hi: tuple[int, ...]) -> None:
    r = order // 2
    if len(lo) != len(shape) or len(hi) != len(shape):
        raise ValueError(f"box lo={lo} hi={hi} must have one entry per axis of shape {shape}")
    for d, (a, b, n) in enumerate(zip(lo, hi, shape)):
        if not r <= a < b <= n - r:
            raise ValueError(f"box [{a}, {b}) on axis {d} must lie in [R, n - R) = [{r}, {n - r}) for order {order}")


def check_spacing(spacing: object, ndim: int) -> tuple[float, ...]:
    """A positive number (every axis) or ``ndim`` positive numbers, as a tuple of floats."""
    if isinstance(spacing, (int, float)) and not isinstance(spacing, bool):
        spacing = (spacing,) * ndim
    if not isinstance(spacing, (tuple, list)) or len(spacing) != ndim:
        raise TypeError(f"spacing must be a positive number or {ndim} numbers (one per axis), got {spacing!r}")
    out = []
    for h in spacing:
        if isinstance(h, bool) or not isinstance(h, (int, float)):
            raise TypeError(f"spacing entries must be numbers, got {h!r}")
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"spacing entries must be finite and > 0, got {tuple(spacing)!r}")
        out.append(float(h))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# Triton launches (on validated arguments)
# ----------------------------------------------------------------------------------------------
_CACHE: dict[tuple, torch.Tensor] = {}


def _const(key: tuple, values: list[float], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    k = key + (dtype, str(device))
    t = _CACHE.get(k)
    if t is None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        t = _CACHE[k] = torch.tensor(values, dtype=dtype, device=device)
    return t


def _as3d(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 3 else t.unsqueeze(0)


def _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg: WaveConfig):
    r = order // 2
    has_z = p.dim() == 3
    p3, pp3, m3, o3 = (_as3d(t) for t in (p, p_prev, m, out))
    sp3 = spacing if has_z else (math.inf,) + tuple(spacing)
    lo3 = tuple(lo) if has_z else (0,) + tuple(lo)
    hi3 = tuple(hi) if has_z else (1,) + tuple(hi)
    w = _const(("w", order, sp3), stencil_weights(order, sp3), p.dtype, p.device)
    if sponge is not None:
        g3 = tuple(sponge) if has_z else (_const(("zero",), [0.0], p.dtype, p.device),) + tuple(sponge)
    else:
        g3 = (w, w, w)  # never read
    nz, ny, nx = p3.shape
    s_z, s_y, _ = p3.stride()
    vec = min(16 // p.element_size(), cfg.block_x)
    scale = vec if all(v % vec == 0 for v in (nx, s_z, s_y)) else 1
    n_prog = (triton_cdiv(nx, cfg.block_x) * triton_cdiv(hi3[1] - lo3[1], cfg.block_y)
              * triton_cdiv(hi3[0] - lo3[0], cfg.block_z))
    opts = {"num_warps": cfg.num_warps}
    # The register budget is sized for the plain step with 128-bit loads (56 at order 8, sm90). Unaligned
    # rows (scale 1) need about 150 and the sponge variant 91 (cross-compiled): under 56 they spill
    # (the sponge measured 48% of copy with 120 spilled bytes), so they run without it.
    if (cfg.maxnreg and scale > 1 and sponge is None and p.device.type == "cuda"
            and torch.version.hip is None):
        opts["maxnreg"] = cfg.maxnreg
    return _k.wave_step_kernel[(n_prog,)](
        p3, pp3, m3, o3, w, *g3, nz, ny, nx // scale, s_z // scale, s_y // scale,
        lo3[0], hi3[0], lo3[1], hi3[1], lo3[2], hi3[2],
        R=r, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z, VEC=vec, SCALE=scale,
        HAS_Z=has_z, SPONGE=sponge is not None, NONTEMPORAL=cfg.nontemporal, **opts)


# Points per program of the CPML slab kernels (GPU; the interpreter takes fewer, larger programs).
_AXIS_POINTS = {"cuda": 512, "cpu": 4096}


def _axis_launch(kernel, tensors, p, aux, axis, order, lo, hi, extra_ptrs, origin, z_rows=False) -> None:
    has_z = p.dim() == 3
    lo3 = tuple(lo) if has_z else (0,) + tuple(lo)
    hi3 = tuple(hi) if has_z else (1,) + tuple(hi)
    ax3 = axis if has_z else axis + 1
    n = [b - a for a, b in zip(lo3, hi3)]
    s0, s1, _ = _as3d(p).stride()
    t0, t1, _ = _as3d(aux).stride()
    points = _AXIS_POINTS["cuda" if p.device.type == "cuda" else "cpu"]
    # Tiles of (rows, contiguous columns): as wide as the box's x extent allows (x slabs are narrow);
    # with z_rows (axis 0's slabs) as tall as the slab, so the z neighbours are rows of the tile.
    z_rows = bool(z_rows) and ax3 == 0
    if z_rows:
        block_r = min(64, triton.next_power_of_2(n[0]))
        block_c = max(16, min(128, triton.next_power_of_2(n[2]), points // block_r))
    else:
        block_c = min(128, triton.next_power_of_2(n[2]))
        block_r = max(1, points // block_c)
    while triton_cdiv(n[0] * n[1], block_r) > 65535:  # CUDA's limit on grid dimension 1
        block_r *= 2
    grid = (triton_cdiv(n[2], block_c), triton_cdiv(n[0] * n[1], block_r))
    kernel[grid](*[_as3d(t) if t.dim() > 1 else t for t in tensors], *extra_ptrs, *lo3, *n, s0, s1, t0, t1, origin,
                 AXIS=ax3, R=order // 2, BLOCK_R=block_r, BLOCK_C=block_c, Z_ROWS=z_rows, num_warps=4)


def cpml_psi(p, psi, a, b, axis: int, order: int, h: float, lo, hi, backend: str, origin: int = 0,
             z_rows: bool = False) -> None:
    """psi = b psi + a dp/dx_axis on the box [lo, hi) (a, b: 1D profiles along ``axis``). psi holds
    indices [origin, origin + psi.shape[axis]) of ``axis`` (the other axes as p). ``z_rows`` (Triton,
    axis 0 of a 3D grid only): tiles hold columns of planes, so the z neighbours are rows of the tile
    (an alternative tile order, timed by ``bench.wave.cpml_suite``)."""
    if backend == "torch":
        cpml_psi_torch(p, psi, a, b, axis, order, h, lo, hi, origin)
        return
    d1 = _const(("d1", order, h), [float(c) / h for c in first_derivative_coefficients(order)], p.dtype, p.device)
    _axis_launch(_k.cpml_psi_kernel, (p, psi, a, b), p, psi, axis, order, lo, hi, (d1,), origin, z_rows)


def cpml_correct(p, psi, zeta, a, b, m, out, axis: int, order: int, h: float, lo, hi, backend: str,
                 origin: int = 0, z_rows: bool = False) -> None:
    """zeta = b zeta + a (d2p/dx2 + dpsi/dx), out += m (dpsi/dx + zeta) on the box, along ``axis``;
    psi and zeta hold indices [origin, ...) of ``axis``. ``z_rows``: the tile order of
    ``cpml_psi`` (Triton only)."""
    if backend == "torch":
        cpml_correct_torch(p, psi, zeta, a, b, m, out, axis, order, h, lo, hi, origin)
        return
    d1 = _const(("d1", order, h), [float(c) / h for c in first_derivative_coefficients(order)], p.dtype, p.device)
    d2 = _const(("d2", order, h), [float(c) / h**2 for c in second_derivative_coefficients(order)], p.dtype,
                p.device)
    _axis_launch(_k.cpml_correct_kernel, (p, psi, zeta, a, b, m, out), p, psi, axis, order, lo, hi, (d1, d2), origin,
                 z_rows)


def step_into(p, p_prev, m, out, order: int, spacing: tuple[float, ...], lo, hi, sponge, backend: str,
              config: WaveConfig | None = None):
    """The fused step on validated arguments and a resolved backend (the solver's inner call).
    Returns Triton's compiled kernel on a GPU (registers and spills can be read from it), else None."""
    if backend == "torch":
        wave_step_torch(p, p_prev, m, out, order, spacing, tuple(lo), tuple(hi), sponge)
        return None
    cfg = config or default_config(p.dtype, order, p.device)
    if p.device.type == "cuda":
        with torch.cuda.device(p.device):
            return _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg)
    return _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg)


# ----------------------------------------------------------------------------------------------
# the public op
# ----------------------------------------------------------------------------------------------
def validate(p, p_prev, m, out, order, spacing, lo, hi, sponge) -> tuple[int, tuple[float, ...], tuple, tuple]:
    check_fields(p, p_prev=p_prev, m=m, out=out)
    order = _check_order(order)
    spacing = check_spacing(spacing, p.dim())
    r = order // 2
    if min(p.shape) < 2 * r + 1:
        raise ValueError(f"order {order} needs every extent >= {2 * r + 1} (2R+1), got shape {tuple(p.shape)}")
    lo = tuple(int(v) for v in lo) if lo is not None else (r,) * p.dim()
    hi = tuple(int(v) for v in hi) if hi is not None else tuple(n - r for n in p.shape)
    check_box(tuple(p.shape), order, lo, hi)
    if out is not None and out is not p_prev and out.data_ptr() == p.data_ptr():
        raise ValueError("out must not be p: the stencil reads p's neighbours (out may be p_prev)")
    if sponge is not None:
        if len(sponge) != p.dim():
            raise ValueError(f"sponge needs one 1D profile per axis ({p.dim()}), got {len(sponge)}")
        for d, g in enumerate(sponge):
            if g.dim() != 1 or g.shape[0] != p.shape[d] or g.dtype != p.dtype or g.device != p.device:
                raise ValueError(f"sponge profile {d} must be a 1D {p.dtype} tensor of {p.shape[d]} values on "
                                 f"{p.device}, got {tuple(g.shape)} {g.dtype} on {g.device}")
    return order, spacing, lo, hi


def wave_step(p: torch.Tensor, p_prev: torch.Tensor, m: torch.Tensor, out: torch.Tensor | None = None, *,
              order: int = 8, spacing: float | tuple[float, ...] = 1.0, lo: tuple[int, ...] | None = None,
              hi: tuple[int, ...] | None = None, sponge: list[torch.Tensor] | None = None,
              backend: str = "auto") -> torch.Tensor:
    """One leapfrog step: out = 2 p - p_prev + m lap(p) on the box [lo, hi) (default: every point R
    or more from the faces), m = v**2 dt**2. Fields (nz, nx) or (nz, ny, nx), one dtype, contiguous.

    ``out`` may be ``p_prev`` (in place; default: a copy of p_prev, so points outside the box keep
    p_prev's values). ``sponge``: one 1D profile g_a = eta_a dt / 2 per axis for the damped update
    (2 p - (1 - g) p_prev + m lap p) / (1 + g), g = sum of the profiles. ``backend`` as in the
    module docstring.

        >>> out = wave_step(p, p_prev, v**2 * dt**2, order=8, spacing=10.0)
    """
    order, spacing, lo, hi = validate(p, p_prev, m, out, order, spacing, lo, hi, sponge)
    backend = resolve_backend(backend, p.device)
    if out is None:
        out = p_prev.clone()
    torch.ops.tilecraft.wave_step(p, p_prev, m, out, order, list(spacing), list(lo), list(hi), list(sponge or []),
                                  backend)
    return out


@torch.library.custom_op("tilecraft::wave_step", mutates_args=("out",))
def _wave_step_op(p: torch.Tensor, p_prev: torch.Tensor, m: torch.Tensor, out: torch.Tensor, order: int,
                  spacing: list[float], lo: list[int], hi: list[int], sponge: list[torch.Tensor],
                  backend: str) -> None:
    sponge = list(sponge) or None  # an empty list: no sponge
    order, spacing_t, lo_t, hi_t = validate(p, p_prev, m, out, order, tuple(spacing), lo, hi, sponge)
    step_into(p, p_prev, m, out, order, spacing_t, lo_t, hi_t, sponge, resolve_backend(backend, p.device))


@_wave_step_op.register_fake
def _wave_step_fake(p, p_prev, m, out, order, spacing, lo, hi, sponge, backend) -> None:
    return None


__all__ = ["BACKENDS", "WaveConfig", "cpml_correct", "cpml_psi", "default_config", "step_into", "wave_step"]
