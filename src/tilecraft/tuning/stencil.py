"""Stencil tuning: the candidates ``variant="auto"`` times on a new grid, and the cache key.

``auto_config`` is a static heuristic measured on one GPU (H200, H100 for some rules). On another
GPU, or another grid, a different launch can be faster: ``tilecraft.ops.stencil.choose_config``
times the few :func:`candidates` on the device once per :func:`shape_key` and caches the fastest
(``tilecraft.tuning.cache``, op ``"stencil"``).
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig

_DTYPE_NAMES = {torch.float32: "fp32", torch.float64: "fp64"}


def model_tensors(dtype: torch.dtype, shape: tuple[int, int, int], vector_aligned: bool,
                  flat_ok: bool, half_aligned: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(u, out) as ``meta`` tensors (no memory) with the facts of a grid: contiguous where the flat
    kernel can take it (``flat_ok``), else rows padded: by one 16-byte vector where ``vector_aligned``; where
    ``half_aligned`` (rows of 8-byte vectors only) so that the pitch stays 8 but not 16 bytes; otherwise to an odd
    number of elements (fp32 rows of single elements), so the launch checks
    (``ops.launch_error``) see what they would see on the real tensors. Meta tensors' data pointers read 0
    (16-byte aligned)."""
    nz, ny, nx = shape
    vec = 16 // (torch.finfo(dtype).bits // 8)
    if flat_ok:
        row = nx
    elif vector_aligned:  # padded by one 16-byte vector
        row = nx + vec
    elif half_aligned:  # rows of 8-byte vectors that are not 16-byte ones, whatever nx is (a stride or the pointer
        row = nx + (vec if nx % vec else vec // 2)  # may be what breaks the 16 bytes)
    else:  # rows of single elements: an odd pitch
        row = nx + (2 if nx % 2 else 1)
    if vector_aligned and nx % vec:
        raise ValueError(f"vector_aligned grids have nx a multiple of {vec} for {dtype}, got nx = {nx}")
    if half_aligned and (vector_aligned or nx % (vec // 2) or (flat_ok and not nx % vec)):
        raise ValueError(f"half_aligned grids have nx a multiple of {vec // 2} (and, contiguous, not of {vec}) for "
                         f"{dtype}, got nx = {nx}")
    strides = (ny * row, row, 1)
    u = torch.empty_strided(shape, strides, dtype=dtype, device="meta")
    return u, torch.empty_strided(shape, strides, dtype=dtype, device="meta")


def candidates(dtype: torch.dtype, order: int, shape: tuple[int, int, int], l2_bytes: int | None,
               vector_aligned: bool, flat_ok: bool, smem: bool = False, half_aligned: bool = False
               ) -> list[StencilConfig]:
    """The configurations the tuner times for this grid: ``auto_config``'s choice first (the heuristic,
    and the reference every other candidate's result is checked against), then alternatives:

    * the ladder's ``tiling`` and ``baseline`` steps (one plane tile per program: on an H100 at fp64
      order 2, 512^3, ``tiling`` measured 86.9% of copy and ``baseline`` 83.9% against 81.1% for the
      heuristic's short march);
    * orders 2 and 4, 16-byte aligned rows: the best plane kernel of an order-2 sweep on an H100
      (:func:`plane_sweep_best`), the short unrolled z-march at both tile widths (64 and 128 points)
      and the long pipelined march (the heuristic takes one of them by the plane size); order 4 also
      the register-window march ``zwin`` (the heuristic's for fp64 on planes of 512^2 and more);
    * orders 2 and 4, unaligned rows: the tiled plane kernel banded in y (``grid_order``), the flat
      kernel where ``flat_ok`` and the short z-march;
    * orders 6 and up: the z-march with the z terms through L1 (``auto``'s choice before ``zwin``) and,
      orders 6 and 8 on aligned rows, ``zwin`` (the heuristic's there), at order 8 also its form
      without the halo a plane ahead (``halo_ahead=0``, prefetch two planes ahead: fp64 o8 520^3 on an
      H100 69.4% of copy against 68.2%, on an H200 58.9% against 61.4%; fp32 worse on both,
      2026-11-27). Not above order 8: with it (its
      loop unrolled by 2R), the GPU test tuning fp64 order 16 on 128x160x192 took 196 s on an H100,
      against 3-15 s for orders 2-8; the kernels run for microseconds there, so that is compilation.

    * with ``smem`` (an sm90 GPU): the cp.async-ring march where ``auto`` takes it (orders 4 to 8,
      ``ops.stencil._smem_auto``) in its measured shapes: ``ops.smem_march``, the same tile with the copies
      5 planes ahead (fp64 order 8's choice) or 3, 32-row tiles of 16 warps 3 ahead (fp32 order 4's ring is
      8 x 128), 8-row tiles of 128 points (fp32; fp32 order 4's choice) and 16-row tiles of 8 warps, 4 ahead
      (fp64 order 8 on an H200: 73.5% of copy against 69.9% for 32 rows), each with 64 planes per program
      (the heuristic's tile with 64 planes too, where ``ops.ring_block_z`` gave it more); fp32 order 8, whose
      ring computes two elements a thread, also the 16-byte ring (``ops.ring16``) and these shapes of it; where the
      heuristic meets a CTA barrier every few planes (fp64 order 8 on 512-plane marches), its tile with mbarriers,
      5 ahead (``auto`` before 2026-11-29: 0.5 points faster on 520 x 1032^2, 2 slower on 520^3). The
      heuristic without ``smem`` stays a candidate.

    Each passes the launch checks for a grid with these facts (``ops.launch_error`` on
    :func:`model_tensors`); none is listed twice."""
    r = order // 2
    heuristic = ops.auto_config(dtype, order, shape, l2_bytes, vector_aligned, flat_ok, smem, half_aligned)
    alts = [ops.ladder_config("tiling", dtype, order), ops.ladder_config("baseline", dtype, order)]
    if smem and not half_aligned and not vector_aligned and dtype == torch.float32:
        # the 4-byte ring (``ops.word_ring``, the heuristic on odd fp32 rows), its other tiles, and the paths below it
        alts += [ops.word_ring(r), ops.auto_config(dtype, order, shape, l2_bytes, vector_aligned, flat_ok)]
        alts += [StencilConfig("smem", block_y=by, block_x=32, num_warps=by, block_z=64, prefetch=d, num_stages=st,
                               vec=1, nontemporal=True) for by, d, st in ((16, 4, 2), (32, 4, 2), (32, 5, 0))]
    if smem and half_aligned and not vector_aligned:  # the 8-byte ring: the paths below, and its other tiles
        wide = 64 if dtype == torch.float32 else 32
        v = 2 if dtype == torch.float32 else 1
        alts += [ops.auto_config(dtype, order, shape, l2_bytes, vector_aligned, flat_ok),
                 StencilConfig("smem", block_y=16, block_x=wide, num_warps=16, block_z=64, prefetch=4, num_stages=2,
                               vec=v, nontemporal=True),
                 StencilConfig("smem", block_y=8, block_x=wide, num_warps=8, block_z=64, prefetch=3, num_stages=2,
                               vec=v, nontemporal=True),
                 StencilConfig("smem", block_y=16, block_x=wide, num_warps=16, block_z=64, prefetch=4, num_stages=0,
                               vec=v, nontemporal=True)]
    if heuristic.kernel == "smem":
        ring = ops.ring16(dtype, r)  # fp32 order 8: the 16-byte ring beside auto's two elements a thread
        wide = 64 if dtype == torch.float32 else 32
        if heuristic.planes_per_barrier > 1:  # fp64 order 8's long marches: also their mbarrier ring (before 2026-11-29)
            alts.append(replace(heuristic, num_stages=2, prefetch=5, planes_per_barrier=1))
        alts += [ops.auto_config(dtype, order, shape, l2_bytes, vector_aligned, flat_ok), ops.smem_march(dtype, r), ring,
                 replace(ring, prefetch=3 if ring.prefetch == 5 else 5),
                 replace(ring, block_y=32, block_x=wide, num_warps=16, prefetch=3),
                 replace(ring, block_y=8, block_x=128, num_warps=8, prefetch=3),
                 replace(ring, block_y=16, block_x=wide, num_warps=8, prefetch=4)]
    if r <= 2 and vector_aligned:
        alts += [plane_sweep_best(dtype), ops.short_march(dtype, r, 64), ops.short_march(dtype, r, 128),
                 ops.long_march(dtype)]
        alts += [ops.window_march(dtype, r)] if r == 2 else []
    elif r <= 2:
        alts.append(replace(ops.ladder_config("tiling", dtype, order), grid_order=1, group_y=4))
        if flat_ok:
            alts.append(StencilConfig("flat", block_y=1, block_x=1024, num_warps=8 if dtype == torch.float64 else 4,
                                      nontemporal=True))
        alts.append(ops.short_march(dtype, r))
    else:
        # not zwin above order 8: minutes of compilation (see above)
        alts += [ops.l1_march(dtype, r)] + ([ops.window_march(dtype, r)] if vector_aligned and r <= 4 else [])
        if vector_aligned and r == 4:  # the order-8 window without the halo ahead: faster for fp64 on an H100
            alts.append(replace(ops.window_march(dtype, r), halo_ahead=0, l1_prefetch=2))
    u, out = model_tensors(dtype, shape, vector_aligned, flat_ok, half_aligned and not vector_aligned)
    chosen: list[StencilConfig] = []
    for cfg in [heuristic, *alts]:
        if cfg not in chosen and ops.launch_error(u, out, order, cfg) is None:
            chosen.append(cfg)
    return chosen


def plane_sweep_best(dtype: torch.dtype) -> StencilConfig:
    """The fastest plane kernel of a 22-configuration sweep at order 2, 512^3 on an H100 (2026-11-26,
    ``benchmarks/stencil_tune.py``, ``results/2026-11-26-h100/stencil-tune/`` on main): fp64 tiles of
    8 x 128 points, 4 warps, 88.8% of copy; fp32 rows of 512 points, 4 warps, 81.3%; both with ascending
    loads and streaming stores."""
    by, bx = (8, 128) if dtype == torch.float64 else (1, 512)
    return StencilConfig("plane", block_y=by, block_x=bx, num_warps=4, ascending=True, nontemporal=True)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def shape_key(dtype: torch.dtype, order: int, shape: tuple[int, int, int], vector_aligned: bool, flat_ok: bool,
              arch: str, heuristic: StencilConfig, half_aligned: bool = False) -> str:
    """The cache key: dtype, order, the plane size nx*ny and nz rounded up to powers of two, the
    alignment and flat flags, the device's architecture, and the heuristic's choice for the grid.
    The last one keeps grids on either side of a threshold ``auto_config`` draws inside one bucket
    apart: whether a short march's planes fit in the L2, the plane size from which fp64 order 4 takes
    the register window, the flat kernel's L2 limit."""
    nz, ny, nx = shape
    flags = ("aligned" if vector_aligned else "half" if half_aligned else "unaligned") + ("-flat" if flat_ok else "")
    return (f"{_DTYPE_NAMES[dtype]}/o{order}/plane{_pow2_at_least(ny * nx)}/nz{_pow2_at_least(nz)}/{flags}/{arch}"
            f"/h:{heuristic.short().replace(' ', ',')}")
