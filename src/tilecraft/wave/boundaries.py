"""The padded grid and the absorbing boundaries: damping sponge, convolutional PML, free surface.

Layout along each axis of the arrays the solver steps (``Layout``)::

    | R halo | W absorbing layer | model points | W absorbing layer | R halo (+ alignment) |

The halo points are never updated (they stay 0, a rigid wall the layer keeps waves from reaching);
the layer and the model are. The model's velocities are extended into the layer by repeating the
edge values. With a free surface the top of axis 0 has no layer: the model's first plane is the
surface (p = 0) and the halo above it holds the mirror image -p (the image method), which keeps the
stencil's accuracy up to the surface.

Absorbing profiles (depth q in (0, 1] through the layer, 1 at the outer edge):

* CPML (Komatitsch & Martin 2007 damping profile, the second-order formulation of Pasalic &
  McGarry 2010): d(q) = d0 q**2, d0 = -3 vmax ln(Rc) / (2 L), alpha(q) = pi f0 (1 - q),
  b = exp(-(d + alpha) dt), a = d (b - 1) / (d + alpha); memory variables psi, zeta per axis.
* sponge: p_tt + 2 eta p_t = v**2 lap p with eta = d(q) (the same profile): g = eta dt / 2 enters the
  update (2 p - (1 - g) p_prev + m lap p) / (1 + g).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BOUNDARIES = ("pml", "sponge", "none")
ALIGN_POINTS = 4  # x extent padded to a multiple of this (16 bytes of fp32)
# ... and with a CPML, to 128 bytes of fp32 (``row_align``): H200, 512**3, fp32 order 8, three rounds
# (2026-11-28, benchmarks/wave_row_align.py, benchmarks/results/2026-11-28-h200-twelfth/wave-row-align.json;
# the same records): the CPML step at 10 points 1.197 -> 1.165 ms, at 20 points 1.357 -> 1.318 ms, at 12
# points unchanged (its rows are 128-byte multiples already); without a boundary 0.690 -> 0.697 ms (slower,
# so only with a CPML).
CPML_ALIGN_POINTS = 32
# Theoretical reflection coefficient the damping profile is designed for (Collino & Tsogka 2001).
PML_REFLECTION = 1e-3
PML_POWER = 2
# Default layer width in points per boundary (``layer_width``). The CPML: 12 points (20 before 2026-11-28):
# measured to reflect 0.04-0.16% in 3D and 0.07-0.11% in 2D at 4-15 Hz (less than 20 points' 0.06-0.19%),
# and the fastest width timed on an H200 (512**3, fp32 order 8: 1.156 ms a step against 1.358 at 20;
# 10 and 16 points ran slower, in their x-face launches); docs/wave.md, "The layer's width". The sponge
# keeps 20: a damping layer reflects more the thinner it is (2.6% at 20).
DEFAULT_WIDTH = {"pml": 12, "sponge": 20, "none": 0}


def row_align(boundary: str, width: int) -> int:
    """Points the padded rows are a multiple of (``Layout.align_points``): ``CPML_ALIGN_POINTS`` (128 bytes of
    fp32) with a CPML of some width, else ``ALIGN_POINTS`` (16 bytes)."""
    return CPML_ALIGN_POINTS if boundary == "pml" and width > 0 else ALIGN_POINTS


def layer_width(boundary: str, pml_width: int | None) -> int:
    """The absorbing layer's width in points: 0 without one, ``DEFAULT_WIDTH[boundary]`` for None."""
    if boundary == "none":
        return 0
    return DEFAULT_WIDTH.get(boundary, 0) if pml_width is None else pml_width


@dataclass(frozen=True)
class Layout:
    """Where the model sits in the padded arrays."""

    model_shape: tuple[int, ...]
    order: int
    width: int  # absorbing layer width W in points (0: none)
    free_surface: bool
    align_points: int | None = None  # rows padded to a multiple of this many points (None: ALIGN_POINTS)

    def __post_init__(self):
        a = self.align_points
        if a is not None and (isinstance(a, bool) or not isinstance(a, int) or a < 1 or a % ALIGN_POINTS):
            raise ValueError(f"align_points must be a positive multiple of {ALIGN_POINTS} (16 bytes of fp32), got {a!r}")

    @property
    def radius(self) -> int:
        return self.order // 2

    @property
    def pad_lo(self) -> tuple[int, ...]:
        r, w = self.radius, self.width
        return tuple(r if (d == 0 and self.free_surface) else r + w for d in range(len(self.model_shape)))

    @property
    def align(self) -> tuple[int, ...]:
        """Extra frozen points at the high end of each axis: x (the last axis) is padded to a multiple
        of ``align_points`` (default ``ALIGN_POINTS``, 4 points), so rows start on 16-byte boundaries and
        the step's loads stay 128-bit (an unaligned fp32 order-8 step compiles to 152 registers instead
        of 56, sm90); the solver pads to 128 bytes with a CPML (``row_align``)."""
        n = len(self.model_shape)
        last = self.model_shape[-1] + self.pad_lo[-1] + self.radius + self.width
        return (0,) * (n - 1) + ((-last) % (self.align_points or ALIGN_POINTS),)

    @property
    def pad_hi(self) -> tuple[int, ...]:
        return tuple(self.radius + self.width + a for a in self.align)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n + a + b for n, a, b in zip(self.model_shape, self.pad_lo, self.pad_hi))

    @property
    def updated(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(lo, hi): the box of points the step updates (R from every face)."""
        r = self.radius
        return (r,) * len(self.shape), tuple(n - r - a for n, a in zip(self.shape, self.align))

    def depth(self, axis: int) -> torch.Tensor:
        """q per array index along ``axis``: 0 outside the layers, (0, 1] inside (float64)."""
        size, r, w = self.shape[axis], self.radius, self.width
        n = size - self.align[axis]  # the extra aligned points sit beyond the halo, never updated
        q = torch.zeros(size, dtype=torch.float64)
        if w == 0:
            return q
        i = torch.arange(size, dtype=torch.float64)
        hi = (i - (n - r - w - 1)) / w
        q = torch.where((i >= n - r - w) & (i < n - r), hi, q)
        if not (axis == 0 and self.free_surface):
            lo = (r + w - i) / w
            q = torch.where((i >= r) & (i < r + w), lo, q)
        return q

    def slabs(self, axis: int, extra: int = 0) -> list[tuple[int, int]]:
        """Index ranges along ``axis`` of its absorbing layers, widened by ``extra`` towards the model."""
        n, r, w = self.shape[axis] - self.align[axis], self.radius, self.width
        if w == 0:
            return []
        out = [] if (axis == 0 and self.free_surface) else [(r, min(r + w + extra, n - r))]
        lo = max(n - r - w - extra, r)
        if out and lo < out[0][1]:
            return [(r, n - r)]
        return out + [(lo, n - r)]

    def pad_model(self, velocity: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """The velocities on planes [start, stop) of axis 0 of the padded grid (default: all), edge
        values repeated into the layers and halo. Only those planes are built (a slab of a large
        model costs the slab's memory)."""
        stop = self.shape[0] if stop is None else stop
        rows = (torch.arange(start, stop, device=velocity.device) - self.pad_lo[0]).clamp(0, velocity.shape[0] - 1)
        v = velocity.index_select(0, rows)
        for d in range(1, v.dim()):
            lo, hi = self.pad_lo[d], self.pad_hi[d]
            first = v.narrow(d, 0, 1).expand(*[lo if k == d else s for k, s in enumerate(v.shape)])
            last = v.narrow(d, v.shape[d] - 1, 1).expand(*[hi if k == d else s for k, s in enumerate(v.shape)])
            v = torch.cat([first, v, last], dim=d)
        return v.contiguous()


def damping(q: torch.Tensor, vmax: float, h: float, width: int) -> torch.Tensor:
    """d(q) = d0 q**2 with d0 = -(N+1) vmax ln(Rc) / (2 L), L = W h (1/s, float64)."""
    if width == 0:
        return torch.zeros_like(q)
    d0 = -(PML_POWER + 1) * vmax * math.log(PML_REFLECTION) / (2 * width * h)
    return d0 * q**PML_POWER


def cpml_profiles(layout: Layout, axis: int, vmax: float, h: float, dt: float, f0: float
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) per array index along ``axis`` (float64); a = 0, b = 1 outside the layers."""
    q = layout.depth(axis)
    d = damping(q, vmax, h, layout.width)
    alpha = math.pi * f0 * (1 - q)
    inside = q > 0
    b = torch.where(inside, torch.exp(-(d + alpha) * dt), torch.ones_like(q))
    a = torch.where(inside & (d > 0), d * (b - 1) / (d + alpha).clamp_min(1e-300), torch.zeros_like(q))
    return a, b


def sponge_profile(layout: Layout, axis: int, vmax: float, h: float, dt: float) -> torch.Tensor:
    """g = eta dt / 2 per array index along ``axis`` (float64)."""
    return damping(layout.depth(axis), vmax, h, layout.width) * dt / 2


def apply_free_surface(p: torch.Tensor, radius: int, surface: int | None = None) -> None:
    """p = 0 on the surface plane (index ``surface`` of axis 0, default R) and the mirror image -p on
    the R planes above it."""
    s = radius if surface is None else surface
    p[s] = 0
    for k in range(1, radius + 1):
        p[s - k] = -p[s + k]
