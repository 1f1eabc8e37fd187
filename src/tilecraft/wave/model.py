"""Velocity models: a grid of P-wave velocities (m/s) with its spacing.

The grid is 2D (nz, nx) or 3D (nz, ny, nx); z (axis 0) is depth, x (the last axis) is contiguous.
Point (i, j, k) sits at (i hz, j hy, k hx) from the model's origin, so a model of nx points spans
(nx - 1) hx metres along x. Positions of sources and receivers are given in the same metres.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tilecraft.ops.wave import check_field as _check_field
from tilecraft.ops.wave import check_spacing as _check_spacing


def _check_shape(shape: object) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list, torch.Size)) or len(shape) not in (2, 3):
        raise ValueError(f"shape must be (nz, nx) or (nz, ny, nx), got {shape!r}")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in shape):
        raise ValueError(f"shape entries must be positive integers, got {tuple(shape)!r}")
    return tuple(int(n) for n in shape)


@dataclass(frozen=True)
class Model:
    """A velocity model: ``velocity`` (nz, nx) or (nz, ny, nx) in m/s, float32 or float64, on the
    device the simulation runs on; ``spacing`` (hz, [hy,] hx) in metres.

    Example::

        >>> m = Model.constant((101, 201), 1500.0, spacing=10.0)
        >>> m = Model.layered((64, 64, 64), [1500.0, 2500.0], [320.0], spacing=10.0, device="cuda")
    """

    velocity: torch.Tensor
    spacing: tuple[float, ...]

    def __post_init__(self) -> None:
        v = _check_field("velocity", self.velocity)
        if v.device.type not in ("cpu", "cuda"):
            raise ValueError(f"velocity is on {v.device}; CUDA/ROCm GPUs and the CPU are supported")
        if v.numel() == 0:
            raise ValueError(f"velocity is empty (shape {tuple(v.shape)}): every extent must be at least 1")
        object.__setattr__(self, "spacing", _check_spacing(self.spacing, v.dim(), v.dtype))
        if not bool(torch.isfinite(v).all()):
            raise ValueError("velocity has non-finite values (nan or inf)")
        vmin = float(v.min())
        if vmin <= 0:
            raise ValueError(f"velocity must be > 0 everywhere, got a minimum of {vmin:g} m/s")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.velocity.shape)

    @property
    def ndim(self) -> int:
        return self.velocity.dim()

    @property
    def vmax(self) -> float:
        return float(self.velocity.max())

    @property
    def vmin(self) -> float:
        return float(self.velocity.min())

    @property
    def extent(self) -> tuple[float, ...]:
        """Metres from the first to the last point along each axis."""
        return tuple((n - 1) * h for n, h in zip(self.shape, self.spacing))

    @classmethod
    def constant(cls, shape: Sequence[int], velocity: float, spacing: float | Sequence[float] = 10.0, *,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Model:
        """A homogeneous medium of ``velocity`` m/s."""
        shape = _check_shape(tuple(shape))
        velocity = float(velocity)
        if dtype.is_floating_point and math.isfinite(velocity) and abs(velocity) > torch.finfo(dtype).max:
            raise ValueError(f"velocity {velocity:g} m/s does not fit in {dtype} (at most {torch.finfo(dtype).max:.3g})")
        return cls(torch.full(shape, velocity, dtype=dtype, device=device), spacing)

    @classmethod
    def layered(cls, shape: Sequence[int], velocities: Sequence[float], interfaces: Sequence[float],
                spacing: float | Sequence[float] = 10.0, *, dtype: torch.dtype = torch.float32,
                device: str | torch.device = "cpu") -> Model:
        """Flat layers: ``velocities[i]`` above depth ``interfaces[i]`` (metres, increasing), the last
        velocity below the last interface (a point on an interface belongs to the layer below).
        ``len(velocities) == len(interfaces) + 1``."""
        shape = _check_shape(tuple(shape))
        velocities, interfaces = [float(v) for v in velocities], [float(d) for d in interfaces]
        if len(velocities) != len(interfaces) + 1:
            raise ValueError(f"layered needs one more velocity than interfaces, got {len(velocities)} "
                             f"velocities and {len(interfaces)} interfaces")
        if any(b <= a for a, b in itertools.pairwise(interfaces)):
            raise ValueError(f"interfaces must increase with depth, got {interfaces}")
        hz = _check_spacing(spacing, len(shape))[0]
        depth = torch.arange(shape[0], dtype=torch.float64) * hz
        layer = torch.bucketize(depth, torch.tensor(interfaces, dtype=torch.float64), right=True)
        column = torch.tensor(velocities, dtype=torch.float64)[layer]
        v = column.reshape((-1,) + (1,) * (len(shape) - 1)).expand(shape)
        return cls(v.to(dtype=dtype, device=device).contiguous(), spacing)
