"""The acoustic wave time step: validation, choice of backend, and launch of ``tilecraft.kernels.wave``.

``wave_step`` is the public op (registered as ``torch.ops.tilecraft.wave_step``); ``cpml_step`` is
the step with the convolutional PML (``CpmlAxis``: one axis's memory variables; ``CpmlConfig``: how,
by default on GPUs the layers' z-march, ``layer_plan``), what ``tilecraft.wave.simulate`` launches
with ``boundary="pml"``; ``cpml_psi`` and ``cpml_correct`` are
the previous, unfused slab updates (kept as the benchmark's comparison and the tests' oracle).

Backends: ``"triton"`` runs the kernels (CUDA/ROCm tensors, or CPU tensors under
``TRITON_INTERPRET=1``); ``"torch"`` runs ``tilecraft.reference.wave`` (elementwise torch, in the
fields' dtype). ``"auto"`` is Triton where it can run, else torch -- never silently: the solver
reports which one ran.
"""
from __future__ import annotations

import itertools
import math
import os
import weakref
from dataclasses import asdict, dataclass, field, replace

import torch
import triton

from tilecraft.kernels import wave as _k
from tilecraft.ops.launch import eager_direct, launch_values, refuse_forward_ad
from tilecraft.ops.stencil import (
    StencilConfig,
    _check_order,
    _nvidia,
    _overlaps,
    check_spacing,
    _plane_offsets_need_64bit,
    halo_ahead_error,
    nvidia_arch_error,
    smem_ok,
    smem_ring_elements,
    smem_slots,
    triton_cdiv,
    triton_on_cpu,
)
from tilecraft.reference.stencil import second_derivative_coefficients, stencil_weights
from tilecraft.reference.wave import (
    cpml_correct_torch,
    cpml_psi_torch,
    cpml_terms_torch,
    first_derivative_coefficients,
    wave_step_torch,
)

SUPPORTED_DTYPES = (torch.float32, torch.float64)
BACKENDS = ("auto", "triton", "torch")


@dataclass(frozen=True)
class WaveConfig:
    """Launch configuration of the plain step: ``wave_step_kernel`` (``kernel="march"``: z terms
    through L1), or ``wave_zwin_kernel`` (``kernel="zwin"``: the stencil's register-window march,
    each thread's z window in registers, y rows and x chunks from L1 filled ``l1_prefetch`` planes
    ahead, the plane loop unrolled ``loop_unroll`` times) on boxes it can take (``zwin_step_ok``:
    3D, no sponge, 16-byte aligned rows and box x bounds); other boxes of a zwin configuration run
    the march kernel with ``march_config``'s tiles. ``kernel="smem"``: ``kernels.stencil_smem.wave_smem_kernel``
    (the stencil's cp.async-ring march, y rows and x chunks from a ring of planes in shared memory, ``ahead``
    planes copied ahead, ``slack`` spare slots; zwin's arithmetic, so the same bits) on boxes
    ``smem_step_ok`` accepts (an sm80+ NVIDIA GPU, fp32 order 8, and zwin's conditions); other boxes run
    the march kernel."""

    block_y: int
    block_x: int
    block_z: int
    num_warps: int
    nontemporal: bool = False
    maxnreg: int | None = None
    kernel: str = "march"
    loop_unroll: int = 1
    l1_prefetch: int = 0
    halo_ahead: int = 0  # zwin: the x chunks (1) and the outer y rows (2) loaded a plane ahead, in registers
    ahead: int = 3  # smem: planes of p copied ahead into the shared-memory ring
    slack: int = 2  # smem: the ring's slack slots (mbarriers; 0: a CTA barrier per plane)

    def __post_init__(self):
        if self.kernel not in ("march", "zwin", "smem"):
            raise ValueError(f"kernel must be 'march', 'zwin' or 'smem', got {self.kernel!r}")
        for name, least in (("ahead", 1), ("slack", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                raise ValueError(f"{name} must be an int >= {least}, got {v!r}")
        for name, least in (("loop_unroll", 1), ("l1_prefetch", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                raise ValueError(f"{name} must be an int >= {least}, got {v!r}")
        if self.kernel == "march" and (self.loop_unroll != 1 or self.l1_prefetch):
            raise ValueError(f"loop_unroll and l1_prefetch are options of the zwin kernel, got {self}")
        why = halo_ahead_error(self.halo_ahead, self.kernel)
        if why:
            raise ValueError(why)

    def as_dict(self) -> dict:
        return asdict(self)


def default_config(dtype: torch.dtype, order: int, device: torch.device, lo=None, hi=None) -> WaveConfig:
    """The plain step's configuration; ``lo``, ``hi``: the box it runs on, where known (the plain step's own
    calls, ``step_into``), else None (the CPML step's interior).

    sm90 NVIDIA GPU (H100, H200), fp32 order 8, a 3D box of at least ``RING_MIN_TILES`` tiles of 32 x 64 points
    in y and x: the cp.async-ring march (``smem_config``: 32 x 64 tiles, 16 warps, 64 planes per program, 2 planes
    ahead; zwin's bits). H200, ``simulate`` without a boundary, 100 steps (2026-11-28, ``benchmarks/wave_ring_bz.py``,
    ``benchmarks/results/2026-11-28-h200-twelfth/wave-ring-bz.json`` and ``wave-ring-vs-zwin-sizes.json``; the
    same records): 512**3 (128 tiles) 0.645 ms a step (78.4% of copy) against 0.691 ms for zwin, three rounds;
    640**3 (200 tiles) 1.233 against 1.384-1.385 ms, two rounds. Smaller boxes keep zwin: 384**3 (72 tiles)
    0.308 / 0.378 ms against 0.334 / 0.335, 256**3 (32 tiles) 0.202 / 0.404 against 0.243 / 0.225 (the ring's
    rounds varied, zwin's did not). The CPML step's interior kept zwin: the ring with 256 planes per program was
    6% faster there at 512**3 (1.112 against 1.188 ms a step) but 1.6% slower at 640**3 and 17-50% slower at
    384**3 and 256**3 (docs/wave.md); since 2026-11-29, with the new layer launches, it takes the ring on large
    boxes (``cpml_interior_config``). Boxes the ring cannot take run zwin, then the march.

    Other NVIDIA GPUs, and sm90 where the ring is not taken, fp32 order 8: the register-window march (``kernel="zwin"``, ``zwin_config``: 32 x 64 tiles of one
    128-bit vector per thread, 16 warps, 64 planes, the loop unrolled by 8, L1 prefetch 2 planes
    ahead): H100, 512**3 + 20-point CPML, the interior launch 0.874 ms against 0.961 for the march
    below and the whole CPML step 2.035 / 2.030 ms against 2.185 / 2.169 (two rounds, same run;
    benchmarks/results/2026-11-25-h100/wave-zwin-1852e69.json). Boxes it cannot take (2D, the sponge,
    unaligned x bounds) run ``march_config``. Other GPUs, dtypes and orders: ``march_config``.
    Interpreter: a few large programs (it pays per program, not per point).

    The x chunks a plane ahead (``halo_ahead=1``): H200, the whole CPML step 52.9 / 53.4% of copy
    against 51.7 / 48.1% without (two alternating rounds, same run; ``halo_ahead=2`` with the prefetch
    three planes ahead 51.2 / 51.6%; benchmarks/results/2026-11-27-h200/wave-halo-a4715a6.json).

    The ring inside the CPML step (2026-11-27/28, 64 planes per program): H200, the whole CPML step 47.7% of copy
    against 56.3-56.4% (two rounds, ``wave-smem.json``); its interior launch alone 0.692 ms against 0.640 ms
    (``wave-smem-parts.json``; benchmarks/results/2026-11-27-h200/, 2026-11-27). With p_prev and m in the
    ring's slots (2026-11-28, H100) its interior launch is faster (0.767 against 0.831 ms), the whole step is
    not: 1.836 ms (streams) / 1.742 (one stream) against 1.707 ms for zwin with the streams, which overlap
    zwin's interior and not the ring's (``benchmarks/results/2026-11-28-h100/wave-ring-streams-orders.json``)."""
    if device.type != "cuda":
        return WaveConfig(block_y=8, block_x=32, block_z=16, num_warps=1)
    if dtype == torch.float32 and order == 8 and torch.version.hip is None:
        return smem_config() if _ring_device(device) and ring_box(lo, hi) else zwin_config()
    return march_config(dtype, order, device)


#: Tiles of 32 x 64 points (y, x) and planes the box of a CPML step needs for its interior to be the ring with
#: 256 planes per program (``cpml_interior_config``): 408**2 boxes (a 384**3 model + 12-point CPML) have 91.
RING_CPML_MIN_TILES = 91
RING_CPML_PLANES = 256


def cpml_interior_config(dtype: torch.dtype, order: int, device: torch.device, lo=None, hi=None) -> WaveConfig:
    """The interior's configuration in the CPML step (``cpml_step``): on an sm90 NVIDIA GPU, fp32 order 8, a 3D
    box of at least ``RING_CPML_MIN_TILES`` tiles of 32 x 64 points in y and x and ``RING_CPML_PLANES`` planes,
    the cp.async ring with 256 planes per program (zwin's bits); elsewhere ``default_config`` without a box
    (zwin on NVIDIA GPUs for fp32 order 8).

    H200, fp32 order 8, 12-point CPML, with the layer launches of ``default_cpml_config`` (no x face waits for
    the interior; three side streams when this was measured, five since), the whole step checked against float64 then timed, two rounds in turn
    (``benchmarks/wave_side_streams.py --sizes 384,512,640``, 2026-11-29): 384**3 0.537 / 0.544 ms against 0.567 /
    0.566 for zwin (128 planes: 0.548 / 0.553), 512**3 1.034 / 1.034 against 1.107 / 1.105 (63.2% of copy against
    59.0%), 640**3 1.939 / 1.938 against 1.979 / 1.980 (128 planes 1.933). Before those layer launches the ring
    lost there (docs/wave.md): the x faces waited for the interior, and the ring's interior, which leaves no
    room beside it, then ran alone before them. Not measured below 384**3 (the ring lost at 256**3 without a
    boundary: 32 tiles), nor on an H100."""
    if (device.type == "cuda" and dtype == torch.float32 and order == 8 and torch.version.hip is None
            and _ring_device(device) and lo is not None and hi is not None and len(lo) == 3
            and hi[0] - lo[0] >= RING_CPML_PLANES
            and triton_cdiv(hi[1] - lo[1], 32) * triton_cdiv(hi[2] - lo[2], 64) >= RING_CPML_MIN_TILES):
        return replace(smem_config(), block_z=RING_CPML_PLANES)
    return default_config(dtype, order, device)


#: Tiles of 32 x 64 points (y, x) a box needs for the ring to be the plain step's default (``default_config``).
RING_MIN_TILES = 128


def ring_box(lo, hi) -> bool:
    """Whether the box [lo, hi) is 3D with at least ``RING_MIN_TILES`` tiles of the ring's 32 x 64 points in y
    and x (512**3 has 128, 384**3 72)."""
    if lo is None or hi is None or len(lo) != 3:
        return False
    return triton_cdiv(hi[1] - lo[1], 32) * triton_cdiv(hi[2] - lo[2], 64) >= RING_MIN_TILES


def _ring_device(device: torch.device) -> bool:
    """Whether the plain step's default interior is the cp.async ring on this device: an sm90 NVIDIA GPU (where
    it was measured faster; ``default_config``)."""
    return (device.type == "cuda" and torch.version.hip is None and torch.cuda.is_available()
            and torch.cuda.get_device_capability(device)[0] == 9)


def zwin_config() -> WaveConfig:
    """The register-window interior (``kernel="zwin"``) as ``default_config`` took it before the ring: 32 x 64
    tiles, 16 warps, 64 planes, the loop unrolled by 8, L1 prefetch 2 planes ahead, the x chunks a plane ahead.
    The default on NVIDIA GPUs other than sm90, in the CPML step's interior, on boxes of fewer than
    ``RING_MIN_TILES`` tiles, and where the ring cannot take a box (``_launch_step``)."""
    return WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="zwin", loop_unroll=8, l1_prefetch=2,
                      halo_ahead=1)


def smem_config() -> WaveConfig:
    """The plain step's interior as the cp.async-ring march (fp32 order 8, sm80+): 32 x 64 tiles, 16 warps, 64
    planes, 2 planes ahead, a CTA barrier per plane (no slack slots); each slot holds the plane's window of p
    and the tile's p_prev and m of the output plane R below (128 KB of shared memory).

    H100, 512**3 + 20-point CPML, the interior launch alone (``benchmarks/wave_ring_ab.py``, two rounds, the
    whole step's bits equal to zwin's first; ``benchmarks/results/2026-11-28-h100/wave-ring-ab.json``):
    0.767-0.768 ms (86.8-86.9% of copy) against 0.831 ms (80.2%) for the register-window interior; 2 ahead
    with one slack slot 0.773, 3 ahead with none 0.792, 16 x 64 tiles of 8 warps 0.801-0.810 ms. Before
    p_prev and m went through the ring (they were read from global memory at the emit) the ring lost to zwin
    (H200, 0.692 against 0.640 ms, ``2026-11-27-h200/wave-smem-parts.json``). The whole CPML step is still
    faster with zwin (``default_config``): the side stream's launches overlap zwin's interior, not the ring's."""
    return WaveConfig(block_y=32, block_x=64, block_z=64, num_warps=16, kernel="smem", ahead=2, slack=0)


def march_config(dtype: torch.dtype, order: int, device: torch.device) -> WaveConfig:
    """``wave_step_kernel`` (the L1 z-march). GPU: tiles of 128 points x 8 rows at 8 warps (4 points
    per thread), 16 planes per program, a 56-register budget (fp32, orders <= 8): the fastest of the
    sweep in ``benchmarks/wave_bench.py`` (H200, fp32 order 8, 512**3 + PML: 67.3% of copy bandwidth;
    16x128 at 16 warps 66.6%, without the register budget 62.7%;
    benchmarks/results/2026-11-21-h200/wave-step-3897131.json)."""
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


# ----------------------------------------------------------------------------------------------
# Triton launches (on validated arguments)
# ----------------------------------------------------------------------------------------------
_CACHE: dict[tuple, torch.Tensor] = {}


def _const(key: tuple, values, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A cached constant tensor; ``values`` a list or a function returning it (called on a miss
    only: building the lists from exact coefficients costs more CPU per step than the launches)."""
    k = key + (dtype, str(device))
    t = _CACHE.get(k)
    if t is None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        t = _CACHE[k] = torch.tensor(values() if callable(values) else values, dtype=dtype, device=device)
    return t


def _d1(order: int, h: float, dtype, device) -> torch.Tensor:
    """The first-difference weights [d_1..d_R] / h."""
    return _const(("d1", order, h), lambda: [float(c) / h for c in first_derivative_coefficients(order)], dtype,
                  device)


def _cpml_weights(order: int, h: float, dtype, device) -> torch.Tensor:
    """[d_1..d_R] / h, [c_0..c_R] / h**2 of one axis (``wave_layer_kernel``, ``wave_cpml_kernel``)."""
    return _const(("cpml", order, h), lambda: [float(c) / h for c in first_derivative_coefficients(order)]
                  + [float(c) / h**2 for c in second_derivative_coefficients(order)], dtype, device)


def _as3d(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 3 else t.unsqueeze(0)


_OPTIONS = ("num_warps", "num_stages", "maxnreg", "enable_fp_fusion")
_LAUNCHERS: dict[tuple, object] = {}
# The wave kernels compiled without FMA contraction (Triton's ``enable_fp_fusion=False``: every
# operation rounds on its own, as in the interpreter): "all", or kernel names separated by commas.
NO_FP_FUSION = os.environ.get("TILECRAFT_WAVE_NO_FP_FUSION", "")


def _fusion_off(name: str) -> bool:
    return NO_FP_FUSION == "all" or name in NO_FP_FUSION.split(",")


def _arg_class(v: object) -> object:
    """What Triton specializes a runtime argument on: a tensor's dtype and 16-byte alignment, an
    integer's width, divisibility by 16 and being 1."""
    if isinstance(v, torch.Tensor):
        return (v.dtype, v.data_ptr() % 16 == 0)
    if isinstance(v, bool) or not isinstance(v, int):
        return (type(v), v)
    return (v == 1, v % 16 == 0, -2**31 <= v < 2**31)


def _launch(kernel, grid: tuple[int, ...], args: list, kw: dict):
    """``kernel[grid](*args, **kw)`` on a GPU, through the compiled kernel's own launcher once the
    same specialization (``_arg_class`` of every argument, the constexprs and options) was launched
    before: Triton's per-call binding costs about 50 us of CPU per launch, and the step with the
    CPML makes about 14 launches, a few of them shorter than that (measured: the layers' corner
    launch, 0.11 M points, took 74 us between events). Interpreter: a plain launch."""
    if not args or not isinstance(args[0], torch.Tensor) or args[0].device.type != "cuda":
        return kernel[grid](*args, **kw)
    if _fusion_off(kernel.fn.__name__ if hasattr(kernel, "fn") else ""):
        kw = {**kw, "enable_fp_fusion": False}
    const = {k: v for k, v in kw.items() if k not in _OPTIONS}
    # the device too: a compiled kernel is loaded on one device's context
    key = (kernel.fn.__name__ if hasattr(kernel, "fn") else id(kernel), args[0].device.index,
           tuple(sorted(kw.items())), tuple(_arg_class(v) for v in args))
    launcher = _LAUNCHERS.get(key)
    if launcher is None:
        compiled = kernel[grid](*args, **kw)
        if len(_LAUNCHERS) > 256:
            _LAUNCHERS.clear()
        _LAUNCHERS[key] = (compiled, len(args))
        return compiled
    compiled, n = launcher
    values = launch_values(kernel, args, const, n)
    compiled[tuple(grid) + (1,) * (3 - len(grid))](*values)
    return compiled


X_ALIGN = 8  # x tiles start on multiples of 8 points (32 B in fp32): a multiple of every vector width


def zwin_step_ok(p: torch.Tensor, order: int, lo, hi, sponge, cfg: WaveConfig) -> str | None:
    """Why ``wave_zwin_kernel`` cannot take this step's box, or None: it needs a 3D grid, no sponge,
    16-byte multiples for nx, the strides, the pointers and the box's x bounds (every access
    128-bit, the store masks constant over a vector), rows of at least ``block_x`` points, and the
    box R or more from every face (its loads are not masked)."""
    if p.dim() != 3:
        return "the zwin step is 3D only"
    if sponge is not None:
        return "the zwin step has no sponge"
    vec = 16 // p.element_size()
    nz, ny, nx = p.shape
    if any(v % vec for v in (nx, *p.stride()[:2], lo[2], hi[2])) or p.data_ptr() % 16:
        return "the zwin step needs nx, the strides, the pointers and the box's x bounds to be multiples of 16 bytes"
    if nx < cfg.block_x or cfg.block_x % vec:
        return f"the zwin step needs nx >= block_x ({cfg.block_x}) and block_x a multiple of {vec}"
    r = order // 2
    if any(a < r or b > n - r for a, b, n in zip(lo, hi, (nz, ny, nx))):
        return "the zwin step needs the box R or more from every face"
    return None


def smem_step_ok(p: torch.Tensor, order: int, lo, hi, sponge, cfg: WaveConfig) -> str | None:
    """Why ``wave_smem_kernel`` cannot take this step's box, or None: zwin's conditions (``zwin_step_ok``),
    plus an sm90+ NVIDIA GPU (sm80+ with ``slack=0``) running compiled kernels (the ring is inline PTX), fp32 order 8, p_prev, m
    and out sharing p's strides (checked by the caller), a tile of one vector per thread and offsets
    inside a plane in int32."""
    why = zwin_step_ok(p, order, lo, hi, sponge, cfg)
    if why:
        return why.replace("zwin", "smem")
    if triton_on_cpu():
        return "the smem step runs on NVIDIA GPUs only, with compiled kernels (not the interpreter)"
    why = (nvidia_arch_error(p, "smem step", 9, " with mbarriers (slack > 0; slack=0 runs on sm80)")
           if cfg.slack > 0 else nvidia_arch_error(p, "smem step", 8, " (cp.async)"))
    if why:
        return why
    if p.dtype != torch.float32 or order != 8:
        return "the smem step takes fp32 order 8"
    probe = StencilConfig("smem", block_y=cfg.block_y, block_x=cfg.block_x, num_warps=cfg.num_warps,
                          block_z=cfg.block_z, prefetch=cfg.ahead, num_stages=cfg.slack)
    return smem_ok(p, p, order, probe, wave=True)


def _same_strides(*ts: torch.Tensor) -> bool:
    return all(t.stride() == ts[0].stride() and t.data_ptr() % 16 == 0 for t in ts)


def _launch_smem(p, p_prev, m, out, order, lo, hi, sp3, cfg: WaveConfig):
    """``wave_smem_kernel`` on a box ``smem_step_ok`` accepted."""
    from tilecraft.kernels import stencil_smem as _s

    nz, ny, nx = p.shape
    s_z, s_y, _ = p.stride()
    vec = 16 // p.element_size()
    probe = StencilConfig("smem", block_y=cfg.block_y, block_x=cfg.block_x, num_warps=cfg.num_warps,
                          block_z=cfg.block_z, prefetch=cfg.ahead, num_stages=cfg.slack)
    n_prog = (triton_cdiv(hi[2] - lo[2], cfg.block_x) * triton_cdiv(hi[1] - lo[1], cfg.block_y)
              * triton_cdiv(hi[0] - lo[0], cfg.block_z))
    r = order // 2
    wts = stencil_weights(order, sp3)
    axes = [wts[1 + a * r:1 + (a + 1) * r] + [0.0] * (4 - r) for a in range(3)]
    return _launch(_s.wave_smem_kernel, (n_prog,), [
        p, p_prev, m, out, wts[0], *axes[0], *axes[1], *axes[2], nz, ny, nx // vec, s_z // vec, s_y // vec, lo[0],
        hi[0], lo[1], hi[1], lo[2] // vec, hi[2] // vec], dict(
        R=r, BY=cfg.block_y, BXV=cfg.block_x // vec, BZ=cfg.block_z, VEC=vec, D=cfg.ahead, NW=cfg.num_warps,
        RING=smem_ring_elements(probe, r, p.element_size(), True), S=smem_slots(probe), MBAR=cfg.slack > 0, PF=0,
        # zwin's explicit FMAs and nothing for the compiler to contract (``_launch_zwin``)
        num_warps=cfg.num_warps, enable_fp_fusion=False, **({"maxnreg": cfg.maxnreg} if cfg.maxnreg else {})))


def _launch_zwin(p, p_prev, m, out, order, lo, hi, w, cfg: WaveConfig):
    """``wave_zwin_kernel`` on a box ``zwin_step_ok`` accepted (``w``: the stencil weights)."""
    nz, ny, nx = p.shape
    s_z, s_y, _ = p.stride()
    vec = 16 // p.element_size()
    n_prog = (triton_cdiv(hi[2] - lo[2], cfg.block_x) * triton_cdiv(hi[1] - lo[1], cfg.block_y)
              * triton_cdiv(hi[0] - lo[0], cfg.block_z))
    opts = {"num_warps": cfg.num_warps, **({"maxnreg": cfg.maxnreg} if cfg.maxnreg and _nvidia(p) else {}),
            # its sums are explicit FMAs (``_scatter_z``): no contraction left to the compiler, whose
            # choices varied with the program's z origin (slabs differed from one GPU in the last bits)
            "enable_fp_fusion": False}
    return _launch(_k.wave_zwin_kernel, (n_prog,), [
        p, p_prev, m, out, w, nz, ny, nx // vec, s_z // vec, s_y // vec, lo[0], hi[0], lo[1], hi[1], lo[2] // vec,
        hi[2] // vec], dict(
        R=order // 2, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z, VEC=vec,
        NONTEMPORAL=cfg.nontemporal, OFFS64=_plane_offsets_need_64bit(p, out, cfg.block_x), PREFETCH=1,
        LOOP_UNROLL=cfg.loop_unroll, HALO_AHEAD=cfg.halo_ahead,
        # a cache hint (PTX prefetch): NVIDIA only; the interpreter cannot run inline asm
        L1_PREFETCH=cfg.l1_prefetch if _nvidia(p) else 0, SECTOR=32 // p.element_size(), **opts))


def _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg: WaveConfig, x_org: int | None = None):
    r = order // 2
    has_z = p.dim() == 3
    p3, pp3, m3, o3 = (_as3d(t) for t in (p, p_prev, m, out))
    sp3 = spacing if has_z else (math.inf,) + tuple(spacing)
    lo3 = tuple(lo) if has_z else (0,) + tuple(lo)
    hi3 = tuple(hi) if has_z else (1,) + tuple(hi)
    w = _const(("w", order, sp3), lambda: stencil_weights(order, sp3), p.dtype, p.device)
    if cfg.kernel == "smem":
        if smem_step_ok(p, order, lo, hi, sponge, cfg) is None and _same_strides(p, p_prev, m, out):
            return _launch_smem(p, p_prev, m, out, order, lo, hi, sp3, cfg)
        # a box it cannot take: on an NVIDIA GPU the register window (the default before the ring), else the
        # march kernel's own tiles
        nvidia = p.device.type == "cuda" and torch.version.hip is None
        cfg = zwin_config() if nvidia else march_config(p.dtype, order, p.device)
    if cfg.kernel == "zwin":
        if zwin_step_ok(p, order, lo, hi, sponge, cfg) is None:
            return _launch_zwin(p, p_prev, m, out, order, lo, hi, w, cfg)
        cfg = march_config(p.dtype, order, p.device)  # a box it cannot take: the march kernel's own tiles
    if sponge is not None:
        g3 = tuple(sponge) if has_z else (_const(("zero",), [0.0], p.dtype, p.device),) + tuple(sponge)
    else:
        g3 = (w, w, w)  # never read
    nz, ny, nx = p3.shape
    s_z, s_y, _ = p3.stride()
    vec = min(16 // p.element_size(), cfg.block_x)
    scale = vec if all(v % vec == 0 for v in (nx, s_z, s_y)) else 1
    if x_org is None:
        x_org = lo3[2] - lo3[2] % X_ALIGN  # x tiles start here (a multiple of the vector width)
    n_prog = (triton_cdiv(hi3[2] - x_org, cfg.block_x) * triton_cdiv(hi3[1] - lo3[1], cfg.block_y)
              * triton_cdiv(hi3[0] - lo3[0], cfg.block_z))
    opts = {"num_warps": cfg.num_warps}
    # The register budget is sized for the plain step with 128-bit loads (56 at order 8, sm90). Unaligned
    # rows (scale 1) need about 150 and the sponge variant 91 (cross-compiled): under 56 they spill
    # (the sponge measured 48% of copy with 120 spilled bytes), so they run without it.
    if cfg.maxnreg and scale > 1 and sponge is None and _nvidia(p):
        opts["maxnreg"] = cfg.maxnreg
    return _launch(_k.wave_step_kernel, (n_prog,), [
        p3, pp3, m3, o3, w, *g3, nz, ny, nx // scale, s_z // scale, s_y // scale,
        lo3[0], hi3[0], lo3[1], hi3[1], lo3[2], hi3[2], x_org // scale], dict(
        R=r, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z, VEC=vec, SCALE=scale,
        HAS_Z=has_z, SPONGE=sponge is not None, NONTEMPORAL=cfg.nontemporal, **opts))


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
    _launch(kernel, grid, [*[_as3d(t) if t.dim() > 1 else t for t in tensors], *extra_ptrs, *lo3, *n, s0, s1, t0, t1,
                           origin], {"AXIS": ax3, "R": order // 2, "BLOCK_R": block_r, "BLOCK_C": block_c,
                                     "Z_ROWS": z_rows, "num_warps": 4})


def cpml_psi(p, psi, a, b, axis: int, order: int, h: float, lo, hi, backend: str, origin: int = 0,
             z_rows: bool = False, psi_out: torch.Tensor | None = None) -> None:
    """psi = b psi + a dp/dx_axis on the box [lo, hi) (a, b: 1D profiles along ``axis``). psi holds
    indices [origin, origin + psi.shape[axis]) of ``axis`` (the other axes as p). ``z_rows`` (Triton,
    axis 0 of a 3D grid only): tiles hold columns of planes, so the z neighbours are rows of the tile
    (an alternative tile order). ``psi_out`` (Triton): where to write (default psi, in place)."""
    if backend == "torch":
        cpml_psi_torch(p, psi, a, b, axis, order, h, lo, hi, origin)
        return
    d1 = _d1(order, h, p.dtype, p.device)
    out = _as3d(psi if psi_out is None else psi_out)
    _axis_launch(_k.cpml_psi_kernel, (p, psi, a, b), p, psi, axis, order, lo, hi, (d1, out), origin, z_rows)


def cpml_correct(p, psi, zeta, a, b, m, out, axis: int, order: int, h: float, lo, hi, backend: str,
                 origin: int = 0, z_rows: bool = False) -> None:
    """zeta = b zeta + a (d2p/dx2 + dpsi/dx), out += m (dpsi/dx + zeta) on the box, along ``axis``;
    psi and zeta hold indices [origin, ...) of ``axis``. ``z_rows``: the tile order of
    ``cpml_psi`` (Triton only)."""
    if backend == "torch":
        cpml_correct_torch(p, psi, zeta, a, b, m, out, axis, order, h, lo, hi, origin)
        return
    d1 = _d1(order, h, p.dtype, p.device)
    d2 = _const(("d2", order, h), lambda: [float(c) / h**2 for c in second_derivative_coefficients(order)], p.dtype,
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
    cfg = config or default_config(p.dtype, order, p.device, lo, hi)
    if p.device.type == "cuda":
        with torch.cuda.device(p.device):
            return _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg)
    return _launch_step(p, p_prev, m, out, order, spacing, lo, hi, sponge, cfg)


# ----------------------------------------------------------------------------------------------
# two plain steps a pass (a prototype of temporal blocking)
# ----------------------------------------------------------------------------------------------
def two_steps_config(dtype: torch.dtype) -> WaveConfig:
    """The prototype's tiles: 32 x 64 fp32 (32 x 32 fp64) register tiles, owned tiles 2R smaller each way, chunks
    of 64 planes, 16 warps (sm90 cross-compile at order 8: 104 registers fp32, 112 fp64, no spills; 8 warps take
    187-190). Not tuned: nothing of it was timed yet."""
    return WaveConfig(block_y=32, block_x=64 if dtype == torch.float32 else 32, block_z=64, num_warps=16)


def two_steps_ok(p_prev: torch.Tensor, p: torch.Tensor, m: torch.Tensor, p1: torch.Tensor, p2: torch.Tensor,
                 order: int, lo, hi, cfg: WaveConfig) -> str | None:
    """Why ``wave_two_steps_kernel`` cannot take these fields and box, or None: 3D fields; R a multiple of the
    16-byte vector (fp32 orders 8 and 16, fp64 orders 4, 8, 12, 16); nx, the strides, the pointers and the box's
    x bounds multiples of 16 bytes; tiles larger than 2R each way, block_x a multiple of the vector; p1 and p2
    sharing memory with none of p_prev, p, m or each other (step 1 stores p1 on the tiles' halos, which
    neighbouring programs read as p_prev and p)."""
    if p.dim() != 3:
        return "two steps a pass are 3D only"
    r = order // 2
    vec = 16 // p.element_size()
    if r % vec:
        return (f"two steps a pass need R = order / 2 to be a multiple of {vec} ({p.dtype}: "
                f"{'orders 8 and 16' if vec == 4 else 'orders 4, 8, 12 and 16'}), got order {order}")
    nx = p.shape[2]
    ts = (p_prev, p, m, p1, p2)
    if any(v % vec for v in (nx, *p.stride()[:2], lo[2], hi[2])) or any(t.data_ptr() % 16 for t in ts):
        return "two steps a pass need nx, the strides, the pointers and the box's x bounds to be multiples of 16 bytes"
    if cfg.block_y <= 2 * r or cfg.block_x <= 2 * r or cfg.block_x % vec or cfg.block_z < 1:
        return (f"two steps a pass need block_y and block_x above 2R ({2 * r}), block_x a multiple of {vec} and "
                f"block_z >= 1, got {cfg.block_y} x {cfg.block_x} x {cfg.block_z}")
    names = ("p_prev", "p", "m", "p1", "p2")
    for i in (3, 4):
        for j, other in enumerate(ts):
            if j != i and ts[i].untyped_storage().data_ptr() == other.untyped_storage().data_ptr():
                return f"{names[i]} shares memory with {names[j]}: two steps a pass need p1 and p2 apart from the rest"
    return None


def two_steps_into(p_prev: torch.Tensor, p: torch.Tensor, m: torch.Tensor, p1: torch.Tensor, p2: torch.Tensor,
                   order: int, spacing, lo=None, hi=None, config: WaveConfig | None = None):
    """Two plain time steps in one pass on the box [lo, hi) (default: every point R or more from the faces):
    p1 = 2 p - p_prev + m lap(p) and p2 = 2 p1 - p + m lap(p1) there. Points of p1 and p2 outside the box are not
    written; step 2 reads p1 outside the box as the caller left it (the absorbing layers' own step, in a solver).
    m = v**2 dt**2. A prototype of temporal blocking (docs/wave.md, "two time steps a pass"): it reads three
    words a point and writes two for two steps, against four words a step for ``step_into``. Measured 3.3 times
    slower a step than ``step_into`` (H200, fp32 order 8, 512³: 24.7% of copy against 80.4%; latency-bound at one
    program an SM, and its recomputed halos cost more instructions than one step's), so ``simulate`` does not use
    it. GPU or ``TRITON_INTERPRET=1``; the checks of :func:`two_steps_ok`, plus the
    fields', the order's, the box's and the spacing's, raise ``ValueError``/``TypeError`` before any launch.
    Returns the compiled kernel on a GPU."""
    check_fields(p, p_prev=p_prev, m=m, p1=p1, p2=p2)
    _check_order(order)
    spacing = check_spacing(spacing, p.dim(), p.dtype)
    r = order // 2
    lo = tuple(lo) if lo is not None else (r,) * p.dim()
    hi = tuple(hi) if hi is not None else tuple(n - r for n in p.shape)
    check_box(tuple(p.shape), order, lo, hi)
    cfg = config or two_steps_config(p.dtype)
    why = two_steps_ok(p_prev, p, m, p1, p2, order, lo, hi, cfg)
    if why:
        raise ValueError(why)
    if p.device.type != "cuda" and not triton_on_cpu():
        raise ValueError("two_steps_into runs on a GPU, or on CPU tensors with TRITON_INTERPRET=1 (the kernels in "
                         "Triton's interpreter)")
    nz, ny, nx = p.shape
    s_z, s_y, _ = p.stride()
    vec = 16 // p.element_size()
    w = _const(("w", order, spacing), lambda: stencil_weights(order, spacing), p.dtype, p.device)
    ty, tx = cfg.block_y - 2 * r, cfg.block_x - 2 * r
    n_prog = triton_cdiv(hi[2] - lo[2], tx) * triton_cdiv(hi[1] - lo[1], ty) * triton_cdiv(hi[0] - lo[0], cfg.block_z)
    args = [p, p_prev, m, p1, p2, w, nz, ny, nx // vec, s_z // vec, s_y // vec, lo[0], hi[0], lo[1], hi[1],
            lo[2] // vec, hi[2] // vec]
    kw = dict(R=r, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z, VEC=vec,
              NONTEMPORAL=cfg.nontemporal, OFFS64=_plane_offsets_need_64bit(p, p2, cfg.block_x),
              num_warps=cfg.num_warps, num_stages=1)  # never software-pipelined: step 2 loads what step 1 stored
    if p.device.type == "cuda":
        with torch.cuda.device(p.device):
            return _launch(_k.wave_two_steps_kernel, (n_prog,), args, kw)
    return _launch(_k.wave_two_steps_kernel, (n_prog,), args, kw)


# ----------------------------------------------------------------------------------------------
# the step with the CPML folded in
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CpmlConfig:
    """How the Triton step runs the CPML: ``march`` (the layers' z-march, ``wave_layer_kernel``:
    (block_y, block_x) tiles at ``num_warps`` where no x term is, ``narrow`` = (block_y, block_x,
    num_warps) where one is, ``block_z`` planes per program, register budgets ``march_regs``), else
    ``march_tiles`` = (block_y, block_x, block_z, num_warps) per kind of box (z, y, x faces, edges,
    corners) overriding both; ``psi_tiles`` = (block_y, block_x, block_z, num_warps) per axis
    (z, y, x): psi_new by ``cpml_psi_march_kernel``, else by ``cpml_psi_kernel``; ``interior_first``:
    the interior's launch before the psi launches, so the CPU queues the rest while the GPU runs
    the longest launch; ``streams``: the psi and layer launches on a second CUDA stream (priority
    ``side_priority``, torch's convention: lower is higher) concurrently with the interior, a
    launch whose tiles rewrite columns of another box that may run at the same time ordered after
    it, ``_march_schedule``; ``x_align``: the layer and psi tiles start at multiples of it at or
    below their box (4 lets 8-column tiles cover a 24-column x layer exactly); ``split_interior``:
    the interior box cut in x so that no tile passes it, its last columns a launch of tiles ending
    at the box's end; ``psi_x_fused``: no psi launch for x, the layer launches with x terms compute
    psi_x themselves where each box's x tile holds its whole x store, ``wave_layer_kernel``'s
    PSI_X); ``x_store_boxes``: the layer boxes with x terms cut at their x stores' bounds (whole
    vectors: [4, 32) and [528, 556) for 24-column layers) instead of the layers', so the x faces'
    32-column tiles own every column they store but the frozen halo's and need not wait for a
    register-window (zwin) interior, which stores only its own box (``_march_schedule``); the extra
    columns add exact zeros (a = 0, psi and zeta 0 there); ``x_box_tiles`` (with ``x_store_boxes``):
    those boxes widened to whole x tiles from the store's start (down to a multiple of ``x_align``),
    so that no x tile stores a column of the interior's box and none waits for it where the store is
    narrower than a tile (24 columns at 12 points: the 32-column tiles from its start stored 8 interior
    columns again, after the interior); ``layer_zwin``: the kinds of layer box (0, 1, 2: z, y, x faces, 3 edges,
    4 corners) whose launches keep the tile's 2R + 1 planes of p in registers along the march (one load a
    plane instead of 2R + 1; ``wave_layer_kernel``'s ZWIN), with ``psi_zwin`` those with z terms psi_z's planes
    too (ZWIN = 2); ``layer_order``: kinds of layer box whose launches are issued first, in that order (the rest
    after them in the plan's order: faces z, y, x, then edges, corners); ``x_face_pairs``: the x faces' launch
    (two boxes of as many programs) interleaves their programs, so that rows neighbouring in memory (the right
    face's row y, the left face's row y + 1) are read together (``wave_layer_kernel``'s PAIR); ``side_streams``
    (with ``streams``): the layer launches that run beside the interior spread over that many side streams after the psi
    launches (launches whose boxes clash share a stream, in order: ``_side_lanes``), so that they
    also run beside each other, else ``fused`` (``wave_cpml_kernel`` on
    the layers' boxes: ``two_phase``, ``by_axes``, ``unroll``, ``maxnreg``), else the unfused launches."""

    block_y: int
    block_x: int
    block_z: int
    num_warps: int
    unroll: bool = True
    maxnreg: int | None = None
    by_axes: bool = False
    two_phase: bool = False
    fused: bool = True
    march: bool = False
    narrow: tuple[int, int, int] = (16, 32, 4)
    march_regs: tuple[int, ...] = ()
    march_tiles: tuple[tuple[int, int, int, int], ...] = ()
    psi_tiles: tuple[tuple[int, int, int, int], ...] = ()
    interior_first: bool = False
    streams: bool = False
    side_priority: int = 0
    x_align: int = 8
    split_interior: bool = False
    psi_x_fused: bool = False
    x_store_boxes: bool = False
    x_box_tiles: bool = False
    side_streams: int = 1
    layer_zwin: tuple[int, ...] = ()
    psi_zwin: bool = False
    layer_order: tuple[int, ...] = ()
    x_face_pairs: bool = False

    def __post_init__(self):
        if not isinstance(self.x_face_pairs, bool):
            raise TypeError(f"x_face_pairs must be a bool (the two x faces' programs interleaved), "
                            f"got {self.x_face_pairs!r}")
        order = self.layer_order
        if (not isinstance(order, tuple) or any(type(k) is not int or k not in range(5) for k in order)
                or len(set(order)) != len(order)):
            raise ValueError(f"layer_order must be a tuple of distinct kinds of layer box (0, 1, 2: the z, y, x faces; "
                             f"3: edges; 4: corners), got {self.layer_order!r}")
        kinds = self.layer_zwin
        if not isinstance(kinds, tuple) or any(type(k) is not int or k not in range(5) for k in kinds):
            raise ValueError(f"layer_zwin must be a tuple of kinds of layer box (0, 1, 2: the z, y, x faces; 3: edges; "
                             f"4: corners), got {self.layer_zwin!r}")
        if not isinstance(self.psi_zwin, bool):
            raise TypeError(f"psi_zwin must be a bool (psi_z's planes in registers too), got {self.psi_zwin!r}")
        if isinstance(self.side_streams, bool) or not isinstance(self.side_streams, int) or self.side_streams < 1:
            raise ValueError(f"side_streams must be a positive int (the streams the layer launches share with "
                             f"``streams``), got {self.side_streams!r}")
        if isinstance(self.x_align, bool) or not isinstance(self.x_align, int) or self.x_align < 1:
            raise ValueError(f"x_align must be a positive int (the x tiles start at its multiples), got {self.x_align!r}")
        if isinstance(self.side_priority, bool) or not isinstance(self.side_priority, int):
            raise TypeError(f"side_priority must be an int (a CUDA stream priority: 0 normal, -1 high), "
                            f"got {self.side_priority!r}")

    def as_dict(self) -> dict:
        return asdict(self)


# Per kind of layer box (z, y, x faces, edges, corners): register budgets and (block_y, block_x, block_z,
# num_warps), the fastest of benchmarks/wave_layers_sweep.py (H200, fbcaf64; the faces) and
# benchmarks/wave_psi_sweep.py (H200, e0b1e2f; edges and corners: 2 planes per program).
MARCH_REGS = (96, 96, 72, 128, 168)
MARCH_TILES = ((4, 128, 8, 4), (4, 128, 8, 4), (8, 32, 4, 2), (8, 32, 2, 2), (4, 32, 2, 1))
# The previous default's edge and corner tiles (16 and 8 planes per program), kept for the benchmark.
MARCH_TILES_PREVIOUS = ((4, 128, 8, 4), (4, 128, 8, 4), (8, 32, 4, 2), (16, 32, 8, 4), (4, 32, 8, 1))
# The budgets with psi_x inside the x launches (``psi_x_fused``): the x faces need 80 registers
# without spills (72: 88 bytes spilled; cross-compiled for sm90).
MARCH_REGS_PSI_X = (96, 96, 80, 128, 168)
# The kinds of layer box whose launches keep the tile's z window of p in registers (``CpmlConfig.layer_zwin``: the
# z and y faces) and the budgets with it (the z and y faces at 128: the same four CTAs of 4 warps an SM as at 112, no
# spills; the x faces spill 312 bytes with it at 80 and lost at 112 and 128). H200, 512**3 + 12-point CPML
# (benchmarks/wave_side_streams.py --zwin-faces, 2026-11-29, three rounds in turn): 1.009 / 1.009 / 1.010 ms a
# step against 1.018 ×3 without (y faces alone 1.011-1.012, z faces alone 1.018, with the edges 1.017).
LAYER_ZWIN = (0, 1)
MARCH_REGS_ZWIN = (128, 128, 80, 128, 168)
# The z faces also keep psi_z's 2R + 1 planes in registers (``CpmlConfig.psi_zwin``, ZWIN = 2; 128 registers, no
# spills on sm90). H200, 512**3 + 12-point CPML (benchmarks/wave_side_streams.py --zwin-psi, 2026-11-29, seventeenth
# session, three rounds in turn): 1.000-1.002 ms a step against 1.009 ×3 without (16 planes a program: 1.000-1.001).
PSI_ZWIN = True
# The side streams the layer launches share (``CpmlConfig.side_streams``): H200, 512**3 + 12-point CPML
# (benchmarks/wave_side_streams.py, 2026-11-29, two or three rounds each): with the ring interior (the default
# there, ``cpml_interior_config``) 1.019 ms a step with 5 against 1.031-1.032 (3), 1.083-1.084 (1); with zwin's
# 1.113-1.114 with 3 against 1.122 (1), 1.125 (2), 1.118 (7).
SIDE_STREAMS = 5
# (block_y, block_x, block_z, num_warps) of the marching psi launch per axis (z, y, x)
PSI_TILES = ((4, 128, 10, 4), (4, 128, 8, 4), (16, 32, 8, 4))


#: The x faces' two boxes' programs interleaved in their launch (``CpmlConfig.x_face_pairs``), the GPU default since
#: 2026-11-29 (eighteenth session; ``benchmarks/wave_side_streams.py --x-face-pairs``).
X_FACE_PAIRS = True


def default_cpml_config(device: torch.device) -> CpmlConfig:
    """GPU: the layers' z-march (``march=True``: the plain step on the interior, the marching psi
    launches for z and y, psi_x inside the x layer launches where their tiles hold the x stores,
    ``wave_layer_kernel`` per set of active axes) with the fastest tiles of the sweeps, the psi and
    layer launches on a high-priority side stream beside the interior (``streams``). On H200 (fp32,
    order 8, 512**3, W = 20; benchmarks/results/2026-11-25-h200/wave-streams-run2-5eea8be.json):
    1.559 ms a step against 1.690 ms for the previous default (one stream, a psi launch for x),
    1.628 with the streams alone, 1.620 with psi_x alone; ``simulate`` 1.485 against 1.639 ms per
    step; from CUDA graphs 1.479 against 1.599 ms. Earlier: the first march configuration 1.80 ms,
    the unfused launches 1.89 ms, the folded variants 2.74 and 3.31 ms.
    Since 2026-11-25 (fourth session) also ``x_store_boxes``: the x layer boxes end on the x stores'
    whole vectors, so the x faces run beside the zwin interior instead of after it: H100, the whole
    step 1.886 / 1.961 / 1.878 ms against 2.028 / 2.041 / 1.970 and 1.888 / 1.817 / 1.828 against
    1.935 / 1.915 / 1.916 (three rounds in turn in each of two runs; medians 58.5% and 59.6% of copy
    against 54.4% and 56.9%; benchmarks/results/2026-11-25-h100/wave-layers-{20e084c,a629900}.json).
    Since 2026-11-29 (fifteenth session) also ``x_box_tiles`` and three side streams: at the default 12 points
    the x store is 24 columns wide, so the x faces' 32-column tiles stored interior columns and waited for the
    whole interior (0.19 ms alone at the end of every step); with the boxes widened to whole tiles nothing
    waits. H200, 512**3 + 12-point CPML, three rounds in turn: 1.165 ms a step (56.5% of copy) before, 1.122 ms
    (58.6%) with ``x_box_tiles``, 1.113-1.114 ms (59.1%) with three side streams too (two: 1.125, seven:
    1.118; ``benchmarks/wave_side_streams.py``, ``benchmarks/results/2026-11-29-h200-fifteenth/``). With the
    ring interior that these launches let the CPML step take (``cpml_interior_config``): 1.031-1.032 ms with
    three side streams, **1.019 ms (64.5% of copy) with five** (``SIDE_STREAMS``), 1.083-1.084 with one.
    Since 2026-11-29 (sixteenth session) also ``layer_zwin`` on the z and y faces (``LAYER_ZWIN``, budgets
    ``MARCH_REGS_ZWIN``): 1.009-1.010 ms a step against 1.018 in the same run (H200, 512**3 + 12 points).
    Since 2026-11-29 (seventeenth session) also ``psi_zwin`` (``PSI_ZWIN``): the z faces keep psi_z's planes in
    registers too, 1.000-1.002 ms against 1.009 in the same run.
    Since 2026-11-29 (eighteenth session) also ``x_face_pairs`` (``X_FACE_PAIRS``): the x faces' two boxes' programs
    interleaved, 1.000-1.002 ms against 1.003 four times in the same run (two rounds of each twice; the same bits).
    Interpreter: the folded kernel, few large programs."""
    if device.type != "cuda":
        return CpmlConfig(block_y=8, block_x=32, block_z=16, num_warps=1)
    return CpmlConfig(block_y=4, block_x=128, block_z=8, num_warps=4, march=True, narrow=(8, 32, 2),
                      march_regs=MARCH_REGS_ZWIN, march_tiles=MARCH_TILES, psi_tiles=PSI_TILES, interior_first=True,
                      streams=True, side_priority=-1, psi_x_fused=True, x_store_boxes=True, x_box_tiles=True,
                      side_streams=SIDE_STREAMS, layer_zwin=LAYER_ZWIN, psi_zwin=PSI_ZWIN, x_face_pairs=X_FACE_PAIRS)


_NO_SPLIT = 2**30
STORE_ALIGN = 4  # points: a 128-bit vector in fp32 (two in fp64)


@dataclass
class CpmlAxis:
    """One axis's CPML on a (local) grid: the profiles a, b along the axis, the layers widened by R
    (``regions``: (w0, w1, origin) each, [w0, w1) where the axis's terms are not zero, ``origin``
    where its store starts along the axis), and the memory variables: ``psi`` = [old, new] and
    ``zeta``, (K, ...) stacks of one store per region (K = len(regions)), each of extent
    ``extent`` along the axis and the grid's along the others. ``swap()`` after every step."""

    axis: int
    h: float
    a: torch.Tensor
    b: torch.Tensor
    regions: tuple[tuple[int, int, int], ...]
    psi: list[torch.Tensor]
    zeta: torch.Tensor
    _tables: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def create(cls, shape: tuple[int, ...], axis: int, h: float, a: torch.Tensor, b: torch.Tensor,
               layers: list[tuple[int, int]], order: int, full: bool = False) -> CpmlAxis:
        """Zeroed memory variables for the widened layers ``layers`` ([w0, w1) each, at most two, in
        increasing order): per layer a store of [w0 - R, w1 + R) (cut to the grid), or with ``full``
        one store of the whole axis (what a slab split along this axis keeps, its halos exchanged;
        it may have no layer at all)."""
        r, n = order // 2, shape[axis]
        if not (0 if full else 1) <= len(layers) <= 2 or (len(layers) == 2 and layers[0][1] > layers[1][0]):
            raise ValueError(f"CPML layers along axis {axis} must be one or two increasing intervals, got {layers}")
        if full:
            regions, extent = tuple((w0, w1, 0) for w0, w1 in layers), n
            k = 1
        else:
            regions = tuple((w0, w1, max(w0 - r, 0)) for w0, w1 in layers)
            if axis == len(shape) - 1:  # x stores start and end on whole vectors (128-bit accesses)
                regions = tuple((w0, w1, o - o % STORE_ALIGN) for w0, w1, o in regions)
            extent = max(min(w1 + r, n) - o for w0, w1, o in regions)
            if axis == len(shape) - 1 and all(o + extent + (-extent) % STORE_ALIGN <= n for _, _, o in regions):
                extent += (-extent) % STORE_ALIGN
            k = len(regions)
        store = (k,) + tuple(extent if d == axis else v for d, v in enumerate(shape))
        z = a.new_zeros(store)
        return cls(axis, float(h), a, b, regions, [z, torch.zeros_like(z)], torch.zeros_like(z))

    @property
    def extent(self) -> int:
        return self.zeta.shape[1 + self.axis]

    def swap(self) -> None:
        self.psi = [self.psi[1], self.psi[0]]

    def c_table(self, order: int) -> torch.Tensor:
        """(n, 4R+1): the coefficients of p[c + s], s = -2R..2R, in sum_k d_k (a(c+k) dp/dx(c+k)
        - a(c-k) dp/dx(c-k)) (d_k / h the first-difference weights; a = 0 beyond the grid), built
        in float64 once and cast to the fields' dtype."""
        t = self._tables.get(order)
        if t is None:
            r = order // 2
            d = [float(c) / self.h for c in first_derivative_coefficients(order)]
            a = torch.nn.functional.pad(self.a.detach().to("cpu", torch.float64), (r, r))  # a[c + r] = a(c)
            n = self.a.shape[0]
            c = torch.zeros(n, 4 * r + 1, dtype=torch.float64)
            for k in range(1, r + 1):
                a_hi, a_lo = a[r + k:r + k + n], a[r - k:r - k + n]  # a(c + k), a(c - k)
                for j in range(1, r + 1):
                    w = d[k - 1] * d[j - 1]
                    c[:, 2 * r + k + j] += w * a_hi
                    c[:, 2 * r + k - j] -= w * a_hi
                    c[:, 2 * r - k + j] -= w * a_lo
                    c[:, 2 * r - k - j] += w * a_lo
            t = self._tables[order] = c.to(dtype=self.a.dtype, device=self.a.device).contiguous()
        return t


_CHECKED: dict[tuple, list] = {}


def check_cpml(p: torch.Tensor, pml: list[CpmlAxis], order: int) -> None:
    """The CPML axes fit p: distinct axes of p, profiles of p's extent, stores of p's dtype/device.

    A run calls this every step with the same tensors: a set of (p's shape, dtype, device, order,
    and per axis its regions and the identities and shapes of its tensors) that passed is
    remembered, with weak references that must still name the same objects (a freed tensor's id
    may be reused), so a step skips the ~40 attribute checks (CPU time before the first launch)."""
    tensors = [t for ax in pml for t in (ax.a, ax.b, *ax.psi, ax.zeta)]
    key = (order, tuple(p.shape), p.dtype, p.device, tuple((ax.axis, ax.regions, ax.h) for ax in pml),
           tuple((id(t), tuple(t.shape)) for t in tensors))
    refs = _CHECKED.get(key)
    if refs is not None and all(r() is t for r, t in zip(refs, tensors)):
        return
    _check_cpml(p, pml, order)
    if len(_CHECKED) > 64:
        _CHECKED.clear()
    _CHECKED[key] = [weakref.ref(t) for t in tensors]


def _check_cpml(p: torch.Tensor, pml: list[CpmlAxis], order: int) -> None:
    axes = [ax.axis for ax in pml]
    if len(set(axes)) != len(axes) or not all(0 <= a < p.dim() for a in axes):
        raise ValueError(f"CPML axes must be distinct axes of a {p.dim()}D grid, got {axes}")
    r = order // 2
    for ax in pml:
        n = p.shape[ax.axis]
        for name, t in (("a", ax.a), ("b", ax.b)):
            if t.dim() != 1 or t.shape[0] != n or t.dtype != p.dtype or t.device != p.device:
                raise ValueError(f"CPML profile {name} of axis {ax.axis} must be a 1D {p.dtype} tensor of {n} values on "
                                 f"{p.device}, got {tuple(t.shape)} {t.dtype} on {t.device}")
        want = ax.zeta.shape
        if (len(want) != p.dim() + 1 or tuple(want[1:]) != tuple(ax.extent if d == ax.axis else v for d, v in
                                                                  enumerate(p.shape))):
            raise ValueError(f"CPML stores of axis {ax.axis} have shape {tuple(want)}, not (K, ...) over p's grid")
        for t in (*ax.psi, ax.zeta):
            if t.shape != want or t.dtype != p.dtype or t.device != p.device or not t.is_contiguous():
                raise ValueError(f"CPML memory variables of axis {ax.axis} must be contiguous {p.dtype} tensors of "
                                 f"shape {tuple(want)} on {p.device}")
        k = want[0]
        for w0, w1, o in ax.regions:
            if not (r <= w0 < w1 <= n - r and 0 <= o <= max(w0 - r, 0) and min(w1 + r, n) <= o + ax.extent):
                raise ValueError(f"CPML region {(w0, w1, o)} of axis {ax.axis} does not fit its store "
                                 f"(extent {ax.extent}, grid {n}, R={r})")
        if k != 1 and k != len(ax.regions):
            raise ValueError(f"axis {ax.axis}: {k} stores for {len(ax.regions)} regions")


def _split_axis(lo: int, hi: int, layers) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """[lo, hi) into the inner interval that meets no layer and the (at most two) end pieces that do."""
    i_lo, i_hi = lo, hi
    for w0, w1 in layers:
        a, b = max(lo, w0), min(hi, w1)
        if a >= b:
            continue
        if a <= i_lo:
            i_lo = max(i_lo, b)
        elif b >= i_hi:
            i_hi = min(i_hi, a)
        else:
            raise ValueError(f"a CPML layer [{w0}, {w1}) lies inside the box [{lo}, {hi}), not at its ends")
    if i_lo >= i_hi:
        return None, [(lo, hi)]
    return (i_lo, i_hi), [s for s in ((lo, i_lo), (i_hi, hi)) if s[0] < s[1]]


def cpml_boxes(lo3, hi3, layers3, by_axes: bool = False) -> tuple[tuple | None, list[tuple[tuple, list]]]:
    """The box [lo3, hi3) (z, y, x) split into the interior (no layer: ``wave_step_kernel``) and
    boxes that meet a layer (``wave_cpml_kernel``), as groups (axes, boxes): ``axes`` the kernel
    axes whose terms the group's launch computes.

    One group (default): up to six boxes, the z layers' slabs over the whole (y, x) box, then the y
    layers' over the inner z, then the x layers' over the inner z and y; the launch computes every
    axis's terms where a tile meets that axis's layer. ``by_axes``: the box cut into up to 27 pieces
    (inner or layer along each axis); the faces (in one axis's layer) one launch per axis, compiled
    for that axis's terms only (fewer registers), the edges and corners one more launch."""
    split = [_split_axis(lo3[d], hi3[d], layers3[d]) for d in range(3)]
    (zi, zs), (yi, ys), (xi, xs) = split
    interior = (zi, yi, xi) if None not in (zi, yi, xi) else None
    present = tuple(d for d in range(3) if layers3[d])
    if not by_axes:
        full_y, full_x = (lo3[1], hi3[1]), (lo3[2], hi3[2])
        boxes = [(z, full_y, full_x) for z in zs]
        if zi is not None:
            boxes += [(zi, y, full_x) for y in ys]
            if yi is not None:
                boxes += [(zi, yi, x) for x in xs]
        return interior, ([(present, boxes)] if boxes else [])
    groups: dict[tuple, list] = {}
    pieces = [([(inner, False)] if inner is not None else []) + [(sh, True) for sh in shells] for inner, shells in split]
    for pz, lz in pieces[0]:
        for py, ly in pieces[1]:
            for px, lx in pieces[2]:
                axes = tuple(d for d, flag in enumerate((lz, ly, lx)) if flag)
                if axes:  # edges and corners (a few percent of the layers) share one launch
                    groups.setdefault(axes if len(axes) == 1 else present, []).append((pz, py, px))
    return interior, sorted(groups.items(), key=lambda g: (len(g[0]), g[0]))


def _axis_ints(ax: CpmlAxis | None, ndim: int) -> list[int]:
    """The 11 ints of one kernel axis in the meta table (``_axis_meta``)."""
    if ax is None:
        return [0] * 11
    st = ax.zeta if ndim == 3 else ax.zeta.unsqueeze(1)
    s_k, t0, t1 = st.stride()[0], st.stride()[1], st.stride()[2]
    regs = ax.regions
    two = len(regs) == 2 and ax.zeta.shape[0] == 2
    o_lo = regs[0][2]
    o_hi = regs[1][2] if two else o_lo
    split = regs[0][1] if two else _NO_SPLIT
    w = [regs[0][0], regs[0][1]] + ([regs[1][0], regs[1][1]] if len(regs) == 2 else [0, 0])
    return [s_k, t0, t1, o_lo, o_hi, split, ax.extent] + w


def _pml_meta(lo3, hi3, kaxes: dict[int, CpmlAxis], ndim: int, cfg: CpmlConfig, scale: int, device):
    """(interior box, [(axes, meta tensor, number of boxes, programs)] one per launch); cached."""
    key = ("pml", tuple(lo3), tuple(hi3), cfg, scale, str(device),
           tuple((ka, ax.regions, tuple(ax.zeta.stride())) for ka, ax in sorted(kaxes.items())))
    hit = _PLANS.get(key)
    if hit is not None:
        return hit
    layers3 = [[(w0, w1) for w0, w1, _ in kaxes[d].regions] if d in kaxes else [] for d in range(3)]
    interior, groups = cpml_boxes(lo3, hi3, layers3, cfg.by_axes)
    axis_ints = [v for d in range(3) for v in _axis_ints(kaxes.get(d), ndim)]
    launches = []
    for axes, boxes in groups:
        ints, start = list(axis_ints), 0
        for (z0, z1), (y0, y1), (x0, x1) in boxes:
            x_org = x0 - x0 % X_ALIGN
            ints += [z0, z1, y0, y1, x0, x1, x_org // scale, start]
            start += (triton_cdiv(x1 - x_org, cfg.block_x) * triton_cdiv(y1 - y0, cfg.block_y)
                      * triton_cdiv(z1 - z0, cfg.block_z))
        if max(abs(v) for v in ints) >= 2**31:
            raise ValueError("grid too large for the CPML kernel's 32-bit tables")
        launches.append((axes, torch.tensor(ints, dtype=torch.int32, device=device), len(boxes), start))
    if len(_PLANS) > 64:
        _PLANS.clear()
    plan = _PLANS[key] = (interior, launches)
    return plan


_PLANS: dict[tuple, tuple] = {}


def _launch_cpml(p, p_prev, m, out, order, spacing, lo, hi, pml: list[CpmlAxis], cfg: WaveConfig,
                 pcfg: CpmlConfig) -> None:
    r = order // 2
    ndim = p.dim()
    has_z = ndim == 3
    p3, pp3, m3, o3 = (_as3d(t) for t in (p, p_prev, m, out))
    lo3 = tuple(lo) if has_z else (0,) + tuple(lo)
    hi3 = tuple(hi) if has_z else (1,) + tuple(hi)
    kaxes = {ax.axis + 3 - ndim: ax for ax in pml if ax.regions}
    nz, ny, nx = p3.shape
    s_z, s_y, _ = p3.stride()
    vec = min(16 // p.element_size(), pcfg.block_x)
    scale = vec if all(v % vec == 0 for v in (nx, s_z, s_y)) else 1
    if pcfg.march:
        _march_layers(p3, pp3, m3, o3, order, spacing, lo, hi, pml, kaxes, cfg, pcfg)
        return
    if not pcfg.fused:
        _unfused(p, p_prev, m, out, order, spacing, lo, hi, pml, cfg)
        return
    interior, launches = _pml_meta(lo3, hi3, kaxes, ndim, pcfg, scale, p.device)
    if pcfg.two_phase:
        _psi_phase(p, order, lo, hi, pml)
    if interior is not None:
        ilo = tuple(a for a, _ in interior)[3 - ndim:]
        ihi = tuple(b for _, b in interior)[3 - ndim:]
        _launch_step(p, p_prev, m, out, order, spacing, ilo, ihi, None, cfg)
    if not launches:
        return
    sp3 = spacing if has_z else (math.inf,) + tuple(spacing)
    w = _const(("w", order, sp3), lambda: stencil_weights(order, sp3), p.dtype, p.device)
    per_axis = []
    for d in range(3):
        ax = kaxes.get(d)
        if ax is None:
            per_axis += [w] * 7  # never read
            continue
        per_axis += [ax.psi[0], ax.psi[1], ax.zeta, ax.a, ax.b, _cpml_weights(order, ax.h, p.dtype, p.device),
                     ax.c_table(order)]
    opts = {"num_warps": pcfg.num_warps, **({"enable_fp_fusion": False} if p.device.type == "cuda" and _fusion_off("wave_cpml_kernel") else {})}
    if pcfg.maxnreg and _nvidia(p):
        opts["maxnreg"] = pcfg.maxnreg
    for axes, meta, nb, n_prog in launches:
        _k.wave_cpml_kernel[(n_prog,)](
            p3, pp3, m3, o3, w, meta, *per_axis, nz, ny, nx // scale, s_z // scale, s_y // scale,
            R=r, BLOCK_Y=pcfg.block_y, BLOCK_X=pcfg.block_x, BLOCK_Z=pcfg.block_z, VEC=vec, SCALE=scale,
            HAS_Z=has_z, NB=nb, PML_Z=0 in axes, PML_Y=1 in axes, PML_X=2 in axes, UNROLL=pcfg.unroll,
            PRECOMPUTED=pcfg.two_phase, **opts)


def _axis_pieces(lo: int, hi: int, regions) -> list[tuple[int, int, int | None]]:
    """[lo, hi) cut where a region starts or ends: (a, b, k), k the region that holds [a, b) or
    None where none does (the pieces without a region merged)."""
    cuts = sorted({lo, hi} | {v for w0, w1, _ in regions for v in (w0, w1) if lo < v < hi})
    out: list[tuple[int, int, int | None]] = []
    for a, b in itertools.pairwise(cuts):
        k = next((i for i, (w0, w1, _) in enumerate(regions) if w0 <= a and b <= w1), None)
        if k is None and out and out[-1][2] is None and out[-1][1] == a:
            out[-1] = (out[-1][0], b, None)
        else:
            out.append((a, b, k))
    return out


def _store_view(ax: CpmlAxis, ndim: int) -> torch.Tensor:
    return ax.zeta if ndim == 3 else ax.zeta.unsqueeze(1)


def _plan_regions(ax: CpmlAxis, cfg: CpmlConfig) -> tuple[tuple[int, int, int], ...]:
    """The regions the march plan cuts the box at: the axis's own, or with ``cfg.x_store_boxes`` on
    the x axis its stores' bounds [origin, origin + extent) (the widened layer's points and the
    store's further columns, where a = 0 and psi and zeta stay 0: the x terms add exact zeros), where
    the stores do not meet."""
    if not cfg.x_store_boxes or ax.axis != ax.zeta.dim() - 2 or ax.zeta.shape[0] != len(ax.regions):
        return ax.regions
    wide = tuple((min(w0, o), max(w1, o + ax.extent), o) for w0, w1, o in ax.regions)
    if any(a[1] > b[0] for a, b in itertools.pairwise(wide)):
        return ax.regions
    if cfg.x_box_tiles:  # whole x tiles from the store's start (down to x_align): no tile stores past its box
        bx = max(_march_tile_of(cfg, axes)[1] for axes in ((2,), (0, 2), (1, 2), (0, 1, 2)))
        starts = [w0 - w0 % cfg.x_align if triton_cdiv(w1 - w0 + w0 % cfg.x_align, bx) == triton_cdiv(w1 - w0, bx)
                  else w0 for w0, w1, _o in wide]  # aligned further down where that costs no tile
        tiled = tuple((t0, t0 + triton_cdiv(w1 - t0, bx) * bx, o) for t0, (_w0, w1, o) in zip(starts, wide))
        if not any(a[1] > b[0] for a, b in itertools.pairwise(tiled)):
            return tiled
    return wide


def layer_plan(lo3, hi3, kaxes: dict[int, CpmlAxis], ndim: int, nx: int, cfg: CpmlConfig, vec: int,
               strides: tuple[int, int]):
    """The march variant's launches: the box [lo3, hi3) (z, y, x) cut at every region's bounds into
    boxes with no CPML term (``interiors``: ``wave_step_kernel``) and boxes where exactly the axes
    ``axes`` have terms, one ``wave_layer_kernel`` launch per set of axes (tiles of (block_y,
    block_x) at ``num_warps``; launches with x terms take the narrow tiles ``cfg.narrow``: x layers
    are a few vectors wide). Boxes of one launch whose tiles would share a vector of a row (an edge
    tile rewrites the columns it does not own) go to separate launches. Returns (interiors, scale,
    launches); a launch is (axes, (block_y, block_x, block_z, warps), table rows (16 ints per box, unscaled),
    programs). ``scale``: the vector width when every offset is a multiple of it (else 1)."""
    regions = [_plan_regions(kaxes[d], cfg) if d in kaxes else () for d in range(3)]
    pieces = [_axis_pieces(lo3[d], hi3[d], regions[d]) for d in range(3)]
    interiors, groups = [], {}
    for pz in pieces[0]:
        for py in pieces[1]:
            for px in pieces[2]:
                box = (pz, py, px)
                axes = tuple(d for d in range(3) if box[d][2] is not None)
                if axes:
                    groups.setdefault(axes, []).append(box)
                else:
                    interiors.append(tuple((a, b) for a, b, _ in box))
    ints = [nx, *strides]
    store = {}
    for d, ax in kaxes.items():
        st = _store_view(ax, ndim).stride()
        store[d] = st
        ints += list(st[:3])
    xe = kaxes[2].extent if 2 in kaxes else 0
    launches = []
    first = {k: i for i, k in enumerate(cfg.layer_order)}  # kinds issued first, in that order; the rest after
    for axes, boxes in sorted(groups.items(), key=lambda g: (first.get(_box_kind(g[0]), 5), len(g[0]), g[0])):
        by, bx, bz, warps = _march_tile_of(cfg, axes)
        slots: list[list] = []
        for box in boxes:
            (z0, z1, _), (y0, y1, _), (x0, x1, _) = box
            x_org = x0 - x0 % cfg.x_align
            if cfg.x_store_boxes and 2 in axes:  # tiles from the x store's origin (whole vectors): they hold it
                x_org = min(x0, kaxes[2].regions[box[2][2]][2])
                if cfg.x_box_tiles:  # or from the start of the region's whole tiles
                    x_org = min(x_org, regions[2][box[2][2]][0])
            cover = (x_org, min(x_org + triton_cdiv(x1 - x_org, bx) * bx, nx))
            row = [z0, z1, y0, y1, x0, x1, x_org, 0, 0, 0, 0, 0, 0, 0, 0, 0]
            for d in axes:
                k = box[d][2]
                ax = kaxes[d]
                st = store[d]
                origin = ax.regions[k][2]
                row[8 + d] = (k if ax.zeta.shape[0] > 1 else 0) * st[0] - origin * (st[1], st[2], 1)[d]
                if d == 2:
                    row[11] = origin
            ints += row[6:7] + row[8:12]
            for slot in slots:  # the first launch of the group where no box shares a vector of a row
                if all(z1 <= o[0] or o[1] <= z0 or y1 <= o[2] or o[3] <= y0 or cover[1] <= o[6] or o[7] <= cover[0]
                       for o in slot):
                    slot.append(row[:6] + list(cover) + [row])
                    break
            else:
                slots.append([row[:6] + list(cover) + [row]])
        for slot in slots:
            table, start = [], 0
            for *_, row in slot:
                row = list(row)
                row[7] = start
                table.append(row)
                start += (triton_cdiv(row[5] - row[6], bx) * triton_cdiv(row[3] - row[2], by)
                          * triton_cdiv(row[1] - row[0], bz))
            launches.append((axes, (by, bx, bz, warps), table, start))
    if xe:
        ints.append(xe)
    scale = vec if all(v % vec == 0 for v in ints) else 1
    return interiors, scale, launches


def _box_kind(axes: tuple[int, ...]) -> int:
    """0, 1, 2: the z, y, x faces; 3: edges; 4: corners."""
    return axes[0] if len(axes) == 1 else len(axes) + 1


def _march_budget(pcfg: CpmlConfig, axes: tuple[int, ...]) -> int | None:
    """The register budget of a ``wave_layer_kernel`` launch: ``march_regs`` = (z faces, y faces,
    x faces, edges, corners) (0: none), else ``maxnreg``."""
    if not pcfg.march_regs:
        return pcfg.maxnreg
    return pcfg.march_regs[_box_kind(axes)] or None


def _march_tile_of(cfg: CpmlConfig, axes: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(block_y, block_x, block_z, num_warps) of the launch for the boxes where ``axes`` have terms."""
    if cfg.march_tiles:
        return cfg.march_tiles[_box_kind(axes)]
    by, bx, warps = cfg.narrow if 2 in axes else (cfg.block_y, cfg.block_x, cfg.num_warps)
    return by, bx, cfg.block_z, warps


def _march_layers(p3, pp3, m3, o3, order: int, spacing, lo, hi, pml: list[CpmlAxis], kaxes, cfg: WaveConfig,
                  pcfg: CpmlConfig, parts: tuple[str, ...] = ("psi", "interior", "layers")) -> None:
    """The march variant: psi_new on the layers (``_psi_phase``), ``wave_step_kernel`` on the box's
    interior, ``wave_layer_kernel`` on the layers' boxes (one launch per set of active axes).
    ``parts``: which of the three run (the benchmark times them alone; ``"layers:0,2"``: only the
    launch of the z and x edges)."""
    ndim = len(lo)
    has_z = ndim == 3
    lo3 = tuple(lo) if has_z else (0,) + tuple(lo)
    hi3 = tuple(hi) if has_z else (1,) + tuple(hi)
    # Everything but the tensors is planned once per (box, configuration, grid, stores): the CPU
    # time of a call before its first launch is GPU time lost in a step timed alone.
    icfg = cfg if cfg is not None else cpml_interior_config(p3.dtype, order, p3.device, lo3 if has_z else None, hi3)
    key = ("march", lo3, hi3, pcfg, icfg, p3.data_ptr() % 16, order, tuple(p3.shape), tuple(p3.stride()), p3.dtype,
           str(p3.device), tuple((d, ax.regions, tuple(ax.zeta.shape), ax.h) for d, ax in sorted(kaxes.items())))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _march_plan(p3, order, lo3, hi3, kaxes, ndim, pcfg, icfg)
    interiors, launches, strides, schedule, skip = plan
    p, p_prev, m, out = (t if has_z else t[0] for t in (p3, pp3, m3, o3))
    if pcfg.streams and p3.device.type == "cuda" and set(parts) == {"psi", "interior", "layers"}:
        _march_streams(p3, pp3, m3, o3, order, spacing, lo, hi, pml, kaxes, cfg, pcfg, interiors, launches,
                       strides, schedule, skip)
        return
    # The interior reads p, p_prev, m and writes its own box of out: independent of psi and of the
    # layers' boxes (which rewrite its edge columns with the same bits after it), so it may go first.
    for stage in (("interior", "psi") if pcfg.interior_first else ("psi", "interior")):
        if stage not in parts:
            continue
        if stage == "psi" and pcfg.psi_tiles:
            _psi_march(p3, order, lo, hi, pml, pcfg.psi_tiles, pcfg.x_align, skip)
        elif stage == "psi":
            _psi_phase(p, order, lo, hi, pml, skip)
        else:
            for box_lo, box_hi, x_org in interiors:
                _launch_step(p, p_prev, m, out, order, spacing, box_lo, box_hi, None, cfg, x_org)
    if not launches or not any(part.startswith("layers") for part in parts):
        return
    head = _layer_args(p3, pp3, m3, o3, order, spacing, kaxes)
    for name, table, n_prog, kw in launches:
        if "layers" in parts or name in parts:
            _launch_layer(head, table, strides, n_prog, kw)


def _layer_args(p3, pp3, m3, o3, order: int, spacing, kaxes) -> list:
    """``wave_layer_kernel``'s tensor arguments but the box table (which goes after the first five)
    and the integers (before the last, psi_x's old buffer)."""
    sp3 = spacing if len(spacing) == 3 else (math.inf,) + tuple(spacing)
    w = _const(("w", order, sp3), lambda: stencil_weights(order, sp3), p3.dtype, p3.device)
    per_axis = []
    for d in range(3):
        ax = kaxes.get(d)
        per_axis += ([ax.psi[1], ax.zeta, ax.a, ax.b, _cpml_weights(order, ax.h, p3.dtype, p3.device)] if ax is not None
                     else [w] * 5)  # never read
    return [p3, pp3, m3, o3, w, *per_axis, kaxes[2].psi[0] if 2 in kaxes else w]


def _launch_layer(head: list, table, strides: list, n_prog: int, kw: dict) -> None:
    """One ``wave_layer_kernel`` launch: ``head`` from ``_layer_args``, the launch's box table, the
    plan's integer arguments."""
    _launch(_k.wave_layer_kernel, (n_prog,), [*head[:5], table, *head[5:-1], *strides, head[-1]], kw)


_STREAMS: dict[tuple, tuple] = {}


def _side_stream(device: torch.device, priority: int, lane: int = 0) -> tuple:
    """(side stream, fork, psi done, join events) of a device, made once; ``lane`` > 0: the extra side
    streams of ``side_streams`` (their psi-done event unused)."""
    key = (device.index if device.index is not None else torch.cuda.current_device(), priority, lane)
    hit = _STREAMS.get(key)
    if hit is None:
        hit = _STREAMS[key] = (torch.cuda.Stream(device=device, priority=priority),
                               *(torch.cuda.Event() for _ in range(3)))
    return hit


def _side_lanes(covers: list, late: list[bool], lanes: int) -> list[int]:
    """The side stream (0 .. lanes - 1) of each layer launch: launches whose boxes clash (``_clash``,
    ``covers[i]``: launch i's ``_cover`` tuples) form one group, run on one stream in plan order; the
    groups go to the stream with the fewest launches so far, in plan order. Late launches (run on
    the interior's stream) get -1."""
    n = len(covers)
    group = list(range(n))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i in range(n):
        for j in range(i):
            if not late[i] and not late[j] and any(_clash(a, b) for a in covers[i] for b in covers[j]):
                group[root(i)] = root(j)
    lane_of: dict[int, int] = {}
    count = [0] * lanes
    out = []
    for i in range(n):
        if late[i]:
            out.append(-1)
            continue
        r = root(i)
        if r not in lane_of:
            lane_of[r] = min(range(lanes), key=lambda k: count[k])
        count[lane_of[r]] += 1
        out.append(lane_of[r])
    return out


def _march_streams(p3, pp3, m3, o3, order: int, spacing, lo, hi, pml, kaxes, cfg: WaveConfig, pcfg: CpmlConfig,
                   interiors, launches, strides, schedule, skip=()) -> None:
    """``_march_layers`` on two streams: the interior on the caller's stream, the psi launches and
    then the layer launches on a side stream that forks from it and joins it before returning, so
    the caller's stream sees the whole step done. The layer launches that clash with the interior
    (``_march_schedule``) run on the caller's stream after the interior and the psi launches (or
    after the whole side stream). Same kernels, same arguments: the bits of one stream."""
    ndim = len(lo)
    late, wait_all, lanes = schedule
    main = torch.cuda.current_stream(p3.device)
    side, fork, psi_done, join = _side_stream(p3.device, pcfg.side_priority)
    p, p_prev, m, out = (t if ndim == 3 else t[0] for t in (p3, pp3, m3, o3))
    head = _layer_args(p3, pp3, m3, o3, order, spacing, kaxes)
    fork.record(main)

    def interior():
        for box_lo, box_hi, x_org in interiors:
            _launch_step(p, p_prev, m, out, order, spacing, box_lo, box_hi, None, cfg, x_org)

    def side_work():
        with torch.cuda.stream(side):
            side.wait_event(fork)
            if pcfg.psi_tiles:
                _psi_march(p3, order, lo, hi, pml, pcfg.psi_tiles, pcfg.x_align, skip)
            else:
                _psi_phase(p, order, lo, hi, pml, skip)
            psi_done.record(side)
            dones = []
            for k in range(1, pcfg.side_streams):
                extra, _fork, _unused, done = _side_stream(p3.device, pcfg.side_priority, k)
                with torch.cuda.stream(extra):
                    extra.wait_event(psi_done)
                    for (_name, table, n_prog, kw), lane in zip(launches, lanes):
                        if lane == k:
                            _launch_layer(head, table, strides, n_prog, kw)
                    done.record(extra)
                dones.append(done)
            for (_name, table, n_prog, kw), lane in zip(launches, lanes):
                if lane == 0:
                    _launch_layer(head, table, strides, n_prog, kw)
            for done in dones:
                side.wait_event(done)
            join.record(side)

    if pcfg.interior_first:
        interior()
        side_work()
    else:
        side_work()
        interior()
    if any(late):
        main.wait_event(join if wait_all else psi_done)
        for (_name, table, n_prog, kw), later in zip(launches, late):
            if later:
                _launch_layer(head, table, strides, n_prog, kw)
    main.wait_event(join)


def _cover(box, bx: int, nx: int, x_org: int) -> tuple:
    """(z0, z1, y0, y1, x0, x1, c0, c1): a box and the columns [c0, c1) its (., bx) tiles load and
    store (tiles start at x_org <= x0; rows and planes never pass the box, columns up to a whole
    tile)."""
    (z0, z1), (y0, y1), (x0, x1) = box
    return (z0, z1, y0, y1, x0, x1, x_org, min(x_org + triton_cdiv(x1 - x_org, bx) * bx, nx))


def _clash(a: tuple, b: tuple) -> bool:
    """Whether two launches' boxes (``_cover`` tuples) may not run at the same time: their rows
    and planes meet and one's stored columns reach into the other's box (an edge tile rewrites
    the columns it does not own with the bits it read: a write of the owner in between is lost)."""
    return (a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]
            and ((a[6] < b[5] and b[4] < a[7]) or (b[6] < a[5] and a[4] < b[7])))


def _march_schedule(interiors, interior_bx: int, plan, nx: int, exact=(), lanes: int = 1) -> tuple[list[bool], bool,
                                                                                                  list[int]]:
    """Which layer launches may run on the side stream while the interior runs (``streams``):
    ``interiors``: (box, x_org) of the interior launches; ``exact[i]``: interior i stores only its
    box (``wave_zwin_kernel``), else its tiles' columns. ``late[i]`` when launch i's boxes clash
    with an interior box (``_clash``): it then runs on the
    interior's stream after it (and after the psi launches); ``wait_all`` when a late launch also
    clashes with a layer launch of the side stream (then it waits for the whole side stream); the
    side stream of each launch among ``lanes`` (``_side_lanes``; -1 for the late ones)."""
    inner = [_cover(box, interior_bx, nx, x_org) for box, x_org in interiors]
    inner = [c[:6] + c[4:6] if i < len(exact) and exact[i] else c for i, c in enumerate(inner)]
    covers = [[_cover(((r[0], r[1]), (r[2], r[3]), (r[4], r[5])), tile[1], nx, r[6]) for r in table]
              for _axes, tile, table, _n in plan]
    late = [any(_clash(a, b) for a in cov for b in inner) for cov in covers]
    wait_all = any(_clash(a, b) for i, ci in enumerate(covers) if late[i] for j, cj in enumerate(covers)
                   if not late[j] for a in ci for b in cj)
    return late, wait_all, _side_lanes(covers, late, lanes)


def _march_plan(p3, order: int, lo3, hi3, kaxes, ndim: int, pcfg: CpmlConfig,
                interior: int | WaveConfig = 128):
    """``_march_layers``' launches: (interior boxes as (lo, hi) in p's dimensions, [(name, box table,
    programs, constexprs and options)] of ``wave_layer_kernel``, its integer arguments, and the
    streams' schedule, ``_march_schedule``, and the axes whose psi launch the layer launches replace:
    2 with ``psi_x_fused``). ``interior``: the interior's configuration (its x tile
    width; its zwin launches store only their boxes), or just its x tile width."""
    interior_cfg = interior if isinstance(interior, WaveConfig) else None
    interior_bx = interior.block_x if interior_cfg is not None else interior
    nx = p3.shape[2]
    s_z, s_y, _ = p3.stride()
    vec = min([16 // p3.element_size()] + [_march_tile_of(pcfg, axes)[1] for axes in ((0,), (1,), (2,), (0, 1), (0, 1, 2))])
    interiors, scale, plan = layer_plan(lo3, hi3, kaxes, ndim, nx, pcfg, vec, (s_z, s_y))
    strides = [nx // scale, s_z // scale, s_y // scale]
    for d in range(3):
        ax = kaxes.get(d)
        if ax is None:
            strides.append(0)
            continue
        st = _store_view(ax, ndim).stride()
        if d < 2 and st[2] != s_y:
            raise ValueError(f"CPML stores of axis {ax.axis} must have p's row stride")
        strides.append(st[1] // scale)
    st = _store_view(kaxes[2], ndim).stride() if 2 in kaxes else (0, 0, 0)
    strides += [st[2] // scale, kaxes[2].extent // scale if 2 in kaxes else 0]
    # psi_x inside the x launches: every box's single x tile [x_org, x_org + bx) holds its x store
    # [origin, origin + extent) (row[11]: the origin), so the tiles write all of psi_x in their rows
    fuse_x = pcfg.psi_x_fused and 2 in kaxes and all(
        r[6] <= r[11] and r[11] + kaxes[2].extent <= r[6] + bx and r[5] <= r[6] + bx
        for axes, (_by, bx, _bz, _w), table, _n in plan if 2 in axes for r in table)
    inner = _interior_pieces(interiors, interior_bx, pcfg, 16 // p3.element_size())
    exact = [interior_cfg is not None and ndim == 3
             and ((interior_cfg.kernel == "zwin" and zwin_step_ok(p3, order, blo, bhi, None, interior_cfg) is None)
                  or (interior_cfg.kernel == "smem" and smem_step_ok(p3, order, blo, bhi, None, interior_cfg) is None))
             for blo, bhi, _x in _interior_boxes(inner, ndim)]
    schedule = _march_schedule(inner, interior_bx, plan, nx, exact, pcfg.side_streams)
    launches = []
    for axes, (by, bx, bz, warps), table, n_prog in plan:
        flat = [v // scale if i % 16 in (6, 8, 9, 10, 11) else v for row in table for i, v in enumerate(row)]
        kw = dict(R=order // 2, BLOCK_Y=by, BLOCK_X=bx, BLOCK_Z=bz, VEC=vec, SCALE=scale, HAS_Z=ndim == 3,
                  NB=len(table), AX_Z=0 in axes, AX_Y=1 in axes, AX_X=2 in axes, PSI_X=fuse_x and 2 in axes,
                  ZWIN=(2 if pcfg.psi_zwin and 0 in axes else 1) if ndim == 3 and _box_kind(axes) in pcfg.layer_zwin
                  else 0, PAIR=int(pcfg.x_face_pairs and tuple(axes) == (2,) and len(table) == 2
                                   and 2 * table[1][7] == n_prog), num_warps=warps)
        regs = _march_budget(pcfg, axes)
        if regs and _nvidia(p3):
            kw["maxnreg"] = regs
        launches.append(("layers:" + ",".join(map(str, axes)), torch.tensor(flat, dtype=torch.int64, device=p3.device),
                         n_prog, kw))
    if len(_PLANS) > 64:
        _PLANS.clear()
    skip = (2,) if fuse_x else ()
    return _interior_boxes(inner, ndim), launches, strides, schedule, skip


def _interior_pieces(interiors, interior_bx: int, pcfg: CpmlConfig, ivec: int) -> list:
    """The interior boxes as (box, x_org) launches (``split_interior``: cut in x so that no tile passes the box)."""
    inner = []
    for box in interiors:
        x0, x1 = box[2]
        full = (x1 - x0) // interior_bx * interior_bx
        if pcfg.split_interior and x0 % ivec == 0 and x1 % ivec == 0 and full and x0 + full < x1:
            # whole tiles from x0, then one tile per row ending at x1 (it rewrites columns of the
            # first part: the same stream, after it), so no tile stores past the box
            inner.append(((box[0], box[1], (x0, x0 + full)), x0))
            inner.append(((box[0], box[1], (x0 + full, x1)), x1 - interior_bx))
        else:
            inner.append((box, x0 - x0 % X_ALIGN))
    return inner


def _interior_boxes(inner, ndim: int) -> list:
    """``_interior_pieces`` as (lo, hi, x_org) in p's dimensions."""
    return [(tuple(a for a, _ in box)[3 - ndim:], tuple(b for _, b in box)[3 - ndim:], x_org) for box, x_org in inner]


def _layer_interval(ax: CpmlAxis, k: int) -> tuple[int, int] | None:
    """The points of region k where a != 0 (the layer itself, without the R widening)."""
    key = ("layer", k)
    if key not in ax._tables:
        w0, w1, _ = ax.regions[k]
        idx = (ax.a[w0:w1] != 0).nonzero().flatten().tolist()
        ax._tables[key] = (w0 + idx[0], w0 + idx[-1] + 1) if idx else None
    return ax._tables[key]


def _psi_boxes(lo, hi, ax: CpmlAxis, n: int, r: int):
    """(k, store index, origin, box lo, box hi) of each region of ``ax`` whose layer meets the box
    [lo, hi) widened by R along the axis: where psi_new is computed (``_psi_phase``)."""
    out = []
    for k, (_w0, _w1, origin) in enumerate(ax.regions):
        layer = _layer_interval(ax, k)
        if layer is None:
            continue
        a0 = max(lo[ax.axis] - r, layer[0], r)
        a1 = min(hi[ax.axis] + r, layer[1], n - r)
        if a0 >= a1:
            continue
        blo = tuple(a0 if d == ax.axis else v for d, v in enumerate(lo))
        bhi = tuple(a1 if d == ax.axis else v for d, v in enumerate(hi))
        out.append((k, k if ax.zeta.shape[0] > 1 else 0, origin, blo, bhi))
    return out


def _psi_march(p3, order: int, lo, hi, pml: list[CpmlAxis], tiles, x_align: int = X_ALIGN, skip=()) -> None:
    """psi_new on the layers (``_psi_phase``'s boxes) by ``cpml_psi_march_kernel``: one launch per
    axis over its layers' boxes, ``tiles`` = (block_y, block_x, block_z, num_warps) per axis
    (z, y, x)."""
    ndim = len(lo)
    r = order // 2
    nx = p3.shape[2]
    s_z, s_y, _ = p3.stride()
    vec = min([16 // p3.element_size()] + [t[1] for t in tiles])
    for ax in pml:
        d = ax.axis + 3 - ndim
        if d in skip:
            continue
        by, bx, bz, warps = tiles[d]
        key = ("psi", tuple(lo), tuple(hi), d, (by, bx, bz), vec, tuple(p3.shape), str(p3.device), ax.regions,
               tuple(ax.zeta.shape), x_align)
        plan = _PLANS.get(key)
        if plan is None:
            st = _store_view(ax, ndim).stride()
            rows, start = [], 0
            for _reg, s_, origin, blo, bhi in _psi_boxes(lo, hi, ax, p3.shape[d], r):
                (z0, y0, x0), (z1, y1, x1) = ((0,) * (3 - ndim) + blo), ((1,) * (3 - ndim) + bhi)
                x_org = x0 - x0 % x_align
                rows.append([z0, z1, y0, y1, x0, x1, x_org, start, s_ * st[0] - origin * st[1 + d],
                             origin if d == 2 else 0] + [0] * 6)
                start += triton_cdiv(x1 - x_org, bx) * triton_cdiv(y1 - y0, by) * triton_cdiv(z1 - z0, bz)
            ints = [nx, s_z, s_y, st[1], st[2]] + [v for row in rows for v in (row[6], row[8], row[9])]
            if d == 2:
                ints.append(ax.extent)
            scale = vec if all(v % vec == 0 for v in ints) else 1
            flat = [v // scale if i % 16 in (6, 8, 9) else v for row in rows for i, v in enumerate(row)]
            table = torch.tensor(flat, dtype=torch.int64, device=p3.device) if rows else None
            if len(_PLANS) > 64:
                _PLANS.clear()
            plan = _PLANS[key] = (table, len(rows), start, scale, (st[1], st[2]))
        table, nb, n_prog, scale, (t0, t1) = plan
        if not nb:
            continue
        d1 = _d1(order, ax.h, p3.dtype, p3.device)
        psi = [t if ndim == 3 else t.unsqueeze(1) for t in ax.psi]
        _launch(_k.cpml_psi_march_kernel, (n_prog,), [
            p3, psi[0], psi[1], ax.a, ax.b, d1, table, nx // scale, s_z // scale, s_y // scale, t0 // scale,
            t1 // scale, ax.extent // scale if d == 2 else 0], dict(
            AXIS=d, R=r, BLOCK_Y=by, BLOCK_X=bx, BLOCK_Z=bz, VEC=vec, SCALE=scale, NB=nb, num_warps=warps))


def _psi_phase(p, order: int, lo, hi, pml: list[CpmlAxis], skip=()) -> None:
    """Two-phase variant, phase 1: psi_new = b psi_old + a dp/dx (``cpml_psi_kernel``, psi[0] into
    psi[1]) on each layer's points of the box and its R neighbours along the axis (where p's R
    neighbours exist), so the step launch reads psi_new. Recomputing a point (boxes that share
    neighbours) writes the same value: psi is double-buffered."""
    for ax in pml:
        if ax.axis + 3 - p.dim() in skip:
            continue
        for _reg, s_, origin, blo, bhi in _psi_boxes(lo, hi, ax, p.shape[ax.axis], order // 2):
            cpml_psi(p, ax.psi[0][s_], ax.a, ax.b, ax.axis, order, ax.h, blo, bhi, "triton", origin,
                     psi_out=ax.psi[1][s_])


def _unfused(p, p_prev, m, out, order: int, spacing, lo, hi, pml: list[CpmlAxis], cfg: WaveConfig) -> None:
    """The CPML in separate launches: psi_new (``_psi_phase``), the plain fused step on the whole box,
    then per axis and layer ``cpml_correct_kernel`` (zeta, and p_next += m (dpsi/dx + zeta)) on the
    box's points of the widened layer. More traffic than the folded step (p, m and p_next again in
    the layers), but each launch is a simple, well-occupied kernel: the fastest measured on H200."""
    _psi_phase(p, order, lo, hi, pml)
    _launch_step(p, p_prev, m, out, order, spacing, lo, hi, None, cfg)
    for ax in pml:
        for k, (w0, w1, origin) in enumerate(ax.regions):
            a0, a1 = max(lo[ax.axis], w0), min(hi[ax.axis], w1)
            if a0 >= a1:
                continue
            blo = tuple(a0 if d == ax.axis else v for d, v in enumerate(lo))
            bhi = tuple(a1 if d == ax.axis else v for d, v in enumerate(hi))
            s_ = k if ax.zeta.shape[0] > 1 else 0
            cpml_correct(p, ax.psi[1][s_], ax.zeta[s_], ax.a, ax.b, m, out, ax.axis, order, ax.h, blo, bhi, "triton",
                         origin)


def cpml_step(p, p_prev, m, out, order: int, spacing: tuple[float, ...], lo, hi, pml: list[CpmlAxis], backend: str,
              config: WaveConfig | None = None, pml_config: CpmlConfig | None = None) -> None:
    """out = 2 p - p_prev + m (lap p + sum_a (dpsi_a/dx_a + zeta_a)) on the box [lo, hi), updating
    each axis's memory variables there (psi into ``psi[1]``, zeta in place); validated arguments
    (``check_cpml``), resolved backend. ``out`` may be ``p_prev``. Triton: with
    ``pml_config.fused`` the box's interior runs ``wave_step_kernel`` (``config``) and the layers'
    boxes ``wave_cpml_kernel`` (one launch, or one per face axis with ``by_axes``); otherwise the
    unfused launches (``_unfused``, the GPU default). Call ``swap()`` on every axis after the whole step (all boxes of it)."""
    check_cpml(p, pml, order)
    if backend == "torch":
        wave_step_torch(p, p_prev, m, out, order, spacing, tuple(lo), tuple(hi))
        for ax in pml:
            cpml_terms_torch(p, m, out, ax.psi[0], ax.psi[1], ax.zeta, ax.a, ax.b, ax.axis, order, ax.h, lo, hi,
                             ax.regions)
        return
    cfg = config or cpml_interior_config(p.dtype, order, p.device, lo, hi)
    pcfg = pml_config or default_cpml_config(p.device)
    if p.device.type == "cuda":
        with torch.cuda.device(p.device):
            _launch_cpml(p, p_prev, m, out, order, spacing, lo, hi, pml, cfg, pcfg)
    else:
        _launch_cpml(p, p_prev, m, out, order, spacing, lo, hi, pml, cfg, pcfg)


# ----------------------------------------------------------------------------------------------
# CUDA graphs of a step
# ----------------------------------------------------------------------------------------------
class StepGraphs:
    """CUDA graphs of a step whose state cycles through ``len(graphs)`` parities (the step with the
    CPML: p and p_prev exchange, psi's two buffers exchange, so two), captured by ``capture_steps``.
    ``replay(n)`` launches the graph of step n's parity (n % len(graphs)) on the current stream:
    the same kernels with the same arguments as the uncaptured calls, so the same bits, without
    the CPU's launch latency (about 12 launches and their Python per step with the CPML).

    A graph holds raw pointers: ``keep`` references every tensor the launches may read (the
    callers' fields, plus the cached constants, box tables and plans alive at capture time), so a
    later eviction of ``_CACHE`` or ``_PLANS`` cannot free memory a graph still reads."""

    def __init__(self, graphs: list, keep: tuple):
        self.graphs = graphs
        self.keep = keep

    def replay(self, n: int) -> None:
        self.graphs[n % len(self.graphs)].replay()


def capture_steps(step, parities: int, device: torch.device, keep: tuple = ()) -> StepGraphs | str:
    """Capture ``step(k)`` (the step in parity k's state; k = 0 .. parities-1) each into one CUDA
    graph; a ``StepGraphs``, or the reason (a string) where capture is not possible (not CUDA, or
    the capture raised: e.g. a launch that allocates, compiles or synchronises). Capturing runs
    nothing; ``step`` must have run uncaptured before in every parity (compiled kernels, cached
    plans and constants: capture must not allocate or copy from the host)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return f"CUDA graphs need a CUDA device, not {device}"
    graphs = []
    try:
        with torch.cuda.device(device):
            torch.cuda.synchronize(device)
            for k in range(parities):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, capture_error_mode="thread_local"):
                    step(k)
                graphs.append(g)
    except Exception as exc:  # noqa: BLE001 - any capture failure means: run the step uncaptured
        torch.cuda.synchronize(device)
        return f"capture failed: {type(exc).__name__}: {str(exc)[:200]}"
    cached = (list(_CACHE.values()), list(_PLANS.values()), list(_LAUNCHERS.values()))
    return StepGraphs(graphs, (keep, cached))


# ----------------------------------------------------------------------------------------------
# the public op
# ----------------------------------------------------------------------------------------------
def validate(p, p_prev, m, out, order, spacing, lo, hi, sponge) -> tuple[int, tuple[float, ...], tuple, tuple]:
    for name, t in (("p_prev", p_prev), ("m", m)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    check_fields(p, p_prev=p_prev, m=m, out=out)
    order = _check_order(order)
    spacing = check_spacing(spacing, p.dim(), p.dtype)
    r = order // 2
    if min(p.shape) < 2 * r + 1:
        raise ValueError(f"order {order} needs every extent >= {2 * r + 1} (2R+1), got shape {tuple(p.shape)}")
    lo = tuple(int(v) for v in lo) if lo is not None else (r,) * p.dim()
    hi = tuple(int(v) for v in hi) if hi is not None else tuple(n - r for n in p.shape)
    check_box(tuple(p.shape), order, lo, hi)
    if sponge is not None:
        if not isinstance(sponge, (list, tuple)) or len(sponge) != p.dim():
            raise ValueError(f"sponge needs a list of one 1D profile per axis ({p.dim()}), got {sponge!r}")
        for d, g in enumerate(sponge):
            if not isinstance(g, torch.Tensor):
                raise TypeError(f"sponge profile {d} must be a torch.Tensor, got {type(g).__name__}")
            if g.dim() != 1 or g.shape[0] != p.shape[d] or g.dtype != p.dtype or g.device != p.device:
                raise ValueError(f"sponge profile {d} must be a 1D {p.dtype} tensor of {p.shape[d]} values on "
                                 f"{p.device}, got {tuple(g.shape)} {g.dtype} on {g.device}")
    if out is not None:
        same_as_prev = out.data_ptr() == p_prev.data_ptr() and out.stride() == p_prev.stride()
        for name, t in (("p", p), ("p_prev", p_prev), ("m", m), *((f"sponge[{d}]", g) for d, g in enumerate(sponge or ()))):
            if isinstance(t, torch.Tensor) and not (name == "p_prev" and same_as_prev) and _overlaps(out, t):
                raise ValueError(f"out overlaps {name}: the step reads p's neighbours and every input while it "
                                 "writes; out may be p_prev itself (in place), else memory of its own")
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
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (p, p_prev, m, out, *(sponge or ()))):
        # the op has no backward: a p_prev.clone() out would carry the clone's gradient and nothing else
        raise RuntimeError("wave_step has no backward (automatic differentiation is not supported): an input or "
                           "out requires grad; call it under torch.no_grad() or on detached tensors")
    refuse_forward_ad("wave_step", p, p_prev, m, out)
    backend = resolve_backend(backend, p.device)
    if out is None:
        out = p_prev.clone()
    if eager_direct(p, p_prev, m, out, *(sponge or [])):  # the registered op's body, without its dispatch
        step_into(p, p_prev, m, out, order, spacing, lo, hi, sponge or None, backend)
        return out
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


__all__ = ["BACKENDS", "CpmlAxis", "CpmlConfig", "StepGraphs", "WaveConfig", "capture_steps", "check_cpml", "cpml_boxes",
           "cpml_correct", "cpml_psi", "cpml_step", "default_config", "default_cpml_config", "march_config", "step_into",
           "wave_step"]
