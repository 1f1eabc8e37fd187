"""Sources (Ricker wavelets at off-grid positions) and receivers, with their grid interpolation.

A point off the grid is spread onto (or read from) its neighbouring grid points with weights:

* ``"trilinear"`` (bilinear in 2D): the 2**ndim corners of the cell holding the point;
* ``"sinc"``: a Kaiser-windowed sinc of radius 4 per axis (Hicks 2002, Geophysics 67(1)), (2*4)**ndim
  points, which keeps the injected wavelet's spectrum flat up to about 2/3 of Nyquist where
  trilinear weights smear it.

Positions are metres from the model's first point, one row (z, [y,] x) per source or receiver, and
must lie inside the model.
"""
from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

INTERPOLATIONS = ("trilinear", "sinc")
SINC_RADIUS = 4
# Kaiser window shape b for radius r (Hicks 2002, table 2: kmax = 2/3 of Nyquist).
_KAISER_B = {1: 1.84, 2: 3.04, 3: 4.14, 4: 5.26, 5: 6.40, 6: 7.51, 7: 8.56, 8: 9.56}


def ricker(t: torch.Tensor | np.ndarray, f0: float, t0: float | None = None) -> torch.Tensor:
    """Ricker wavelet (1 - 2 a) exp(-a), a = (pi f0 (t - t0))**2, peak frequency ``f0`` Hz, centred at
    ``t0`` seconds (default 1.5 / f0, where the wavelet is below 1e-9 of its peak at t = 0)."""
    t0 = 1.5 / f0 if t0 is None else t0
    t = torch.as_tensor(t, dtype=torch.float64)
    a = (math.pi * f0 * (t - t0)) ** 2
    return (1 - 2 * a) * torch.exp(-a)


def _check_positions(positions: object, what: str) -> torch.Tensor:
    pos = torch.as_tensor(positions, dtype=torch.float64)
    if pos.dim() == 1:
        pos = pos[None, :]
    if pos.dim() != 2 or pos.shape[1] not in (2, 3) or pos.shape[0] < 1:
        raise ValueError(f"{what} positions must be (n, 2) or (n, 3) metres (z, [y,] x), got shape {tuple(pos.shape)}")
    if not bool(torch.isfinite(pos).all()):
        raise ValueError(f"{what} positions must be finite, got {pos.tolist()}")
    return pos


def _check_interpolation(name: str) -> str:
    if name not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {name!r}")
    return name


@dataclass(frozen=True)
class Source:
    """Point sources of the term s in p_tt = v**2 lap p + s.

    ``positions``: (n, ndim) metres. ``f0``: Ricker peak frequency (Hz), ``t0``: its centre (default
    1.5/f0), ``amplitude``: a factor per source (scalar or n values). ``wavelet``: instead of the
    Ricker, your own samples at t = 0, dt, 2 dt, ... ((nt,) for all sources, or (nt, n)).
    """

    positions: object
    f0: float = 10.0
    t0: float | None = None
    amplitude: float | Sequence[float] = 1.0
    wavelet: torch.Tensor | None = None
    interpolation: str = "trilinear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", _check_positions(self.positions, "source"))
        _check_interpolation(self.interpolation)
        if not (isinstance(self.f0, numbers.Real) and not isinstance(self.f0, bool) and math.isfinite(self.f0)
                and self.f0 > 0):
            raise ValueError(f"f0 must be a positive frequency in Hz, got {self.f0!r}")
        amp = torch.as_tensor(self.amplitude, dtype=torch.float64).reshape(-1)
        if amp.numel() not in (1, self.count):
            raise ValueError(f"amplitude must be one value or one per source ({self.count}), got {amp.numel()}")
        object.__setattr__(self, "amplitude", amp.expand(self.count).clone())

    @property
    def count(self) -> int:
        return int(self.positions.shape[0])

    def samples(self, nt: int, dt: float) -> torch.Tensor:
        """The source time functions at t = n dt, n = 0..nt-1: (nt, n_sources) float64."""
        if self.wavelet is not None:
            w = torch.as_tensor(self.wavelet, dtype=torch.float64).cpu()
            if w.dim() == 1:
                w = w[:, None].expand(w.shape[0], self.count)
            if w.dim() != 2 or w.shape[1] != self.count or w.shape[0] < nt:
                raise ValueError(f"wavelet must be (nt,) or (nt, {self.count}) with at least nt={nt} samples, "
                                 f"got shape {tuple(w.shape)}")
            return w[:nt] * self.amplitude[None, :]
        t = torch.arange(nt, dtype=torch.float64) * dt
        return ricker(t, self.f0, self.t0)[:, None] * self.amplitude[None, :]


@dataclass(frozen=True)
class Receivers:
    """Pressure recorded at ``positions`` ((n, ndim) metres) every time step: the shot gather."""

    positions: object
    interpolation: str = "trilinear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", _check_positions(self.positions, "receiver"))
        _check_interpolation(self.interpolation)

    @property
    def count(self) -> int:
        return int(self.positions.shape[0])

    @classmethod
    def line(cls, start: Sequence[float], stop: Sequence[float], n: int, interpolation: str = "trilinear") -> Receivers:
        """``n`` receivers evenly spaced from ``start`` to ``stop`` (metres, (z, [y,] x))."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive number of receivers, got {n!r}")
        a, b = torch.tensor(start, dtype=torch.float64), torch.tensor(stop, dtype=torch.float64)
        if a.dim() != 1 or a.shape != b.shape:
            raise ValueError(f"start and stop must be two points of the same length (z, [y,] x), got {start!r} and "
                             f"{stop!r}")
        s = torch.linspace(0, 1, n, dtype=torch.float64)[:, None]
        return cls(a[None, :] + s * (b - a)[None, :], interpolation)


def _axis_weights(x: float, n: int, method: str) -> tuple[list[int], list[float]]:
    """Grid indices (model coordinates, may leave [0, n)) and weights for one axis; x in grid units."""
    if method == "trilinear":
        i0 = min(math.floor(x), max(n - 2, 0))
        f = x - i0
        return ([i0, i0 + 1], [1.0 - f, f]) if n > 1 else ([0], [1.0])
    r, b = SINC_RADIUS, _KAISER_B[SINC_RADIUS]
    i0 = math.floor(x)
    idx = list(range(i0 - r + 1, i0 + r + 1))
    w = []
    for i in idx:
        d = x - i
        kaiser = float(np.i0(b * math.sqrt(max(0.0, 1 - (d / r) ** 2)))) / float(np.i0(b)) if abs(d) <= r else 0.0
        # sin(pi d) is not exactly 0 in floating point at whole d: make an on-grid point a delta.
        w.append(0.0 if d != 0 and d == round(d) else float(np.sinc(d)) * kaiser)
    return idx, w


def point_weights(positions: torch.Tensor, shape: Sequence[int], spacing: Sequence[float], method: str,
                  what: str) -> list[tuple[list[tuple[int, ...]], list[float]]]:
    """For each position: the grid points (model coordinates) and weights of its interpolation.

    Raises ValueError for a position outside the model (naming it)."""
    ndim = len(shape)
    if positions.shape[1] != ndim:
        raise ValueError(f"{what} positions have {positions.shape[1]} coordinates, the model is {ndim}D")
    extent = [(n - 1) * h for n, h in zip(shape, spacing)]
    out = []
    for row in positions.tolist():
        bad = [i for i, (x, e) in enumerate(zip(row, extent)) if not -1e-9 * max(e, 1) <= x <= e * (1 + 1e-12) + 1e-9]
        if bad:
            box = " x ".join(f"[0, {e:g}]" for e in extent)
            raise ValueError(f"{what} at {tuple(row)} m is outside the model {box} m (axes z, [y,] x)")
        per_axis = [_axis_weights(min(max(x / h, 0.0), n - 1), n, method) for x, h, n in zip(row, spacing, shape)]
        pts, ws = [], []
        for combo in itertools.product(*[list(zip(*a)) for a in per_axis]):
            w = math.prod(c[1] for c in combo)
            if w != 0.0:
                pts.append(tuple(c[0] for c in combo))
                ws.append(w)
        out.append((pts, ws))
    return out
