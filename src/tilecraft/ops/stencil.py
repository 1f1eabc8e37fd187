"""``tilecraft.laplacian``: validation, variant choice and launch of the stencil kernels.

The seeds' optimisation ladder is kept as named, selectable variants (each one correct on its own):

============== =====================================================================================
variant        what it adds
============== =====================================================================================
baseline       one row of points per program, every neighbour through the caches (seeds' kernel 1)
tiling         loop tiling: m rows (points along y) per program; shared neighbour rows hit L1
reordered      + every load of a point issued in ascending address order
launch_bounds  + register budget fitted to the block (num_warps and maxnreg)
nontemporal    + streaming (``.cs``, evict-first) stores of the output
grid_order     + programs walk bands of rows through all z before the next band (no L2 cliff)
subdomains     nontemporal + the plane cut into y-slabs whose 2R+1 planes fit in L2, launched in turn
auto           the fastest of a few candidates timed on the device (``choose_config``; cached), else
               the heuristic ``auto_config``: mostly z-marches (each plane read once, z terms in
               registers or L1, every access 128-bit)
reference      the torch slicing implementation (the peer; also the CPU path, see ``laplacian``)
============== =====================================================================================

``grid_order`` and ``subdomains`` are the seeds' two alternative cures for the cache cliff, each built
on ``nontemporal``.
"""
from __future__ import annotations

import contextlib
import functools
import heapq
import math
import numbers
import time
from dataclasses import asdict, dataclass, replace

import torch

from tilecraft.hardware.device import l2_bytes as device_l2_bytes
from tilecraft.kernels import stencil as _k
from tilecraft.ops.launch import (PLAIN_TENSORS, KernelLaunch, ReplayCache, clear_replays, constant, eager_direct,
                                  environ_key, environ_names, has_storage, refuse_forward_ad, remember, replay_enabled,
                                  runtime_arg_names, signature)
from tilecraft.tuning import cache as _cache
from tilecraft.tuning.measure import device_facts, graph_time_ms, say
from tilecraft.reference.stencil import (
    MAX_ORDER,
    MIN_ORDER,
    laplacian_torch,
    second_derivative_coefficients,
    stencil_weights,
)

SUPPORTED_DTYPES = (torch.float32, torch.float64)
LADDER = ("baseline", "tiling", "reordered", "launch_bounds", "nontemporal", "grid_order", "subdomains")
VARIANTS = LADDER + ("auto", "reference")
# CUDA grid limits for the y and z dimensions of the 3D grid the plane kernels use.
_MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class StencilConfig:
    """A launch configuration; every field is a knob a reader can map to a seed technique."""

    kernel: str  # "plane" (one plane tile per program), "zmarch" (z-marching column), "zwin" (register-window
    # z-march without load masks, for tall tiles and L1 prefetch), "rows" (z-march, row tiles) or "tma"
    # (sm90 Gluon z-march through a TMA ring in shared memory; block_y = rows per warp strip with its 2R halo
    # rows, num_warps = strips per program, prefetch = planes requested ahead) or "smem" (sm80+ Gluon
    # z-march through a cp.async ring in shared memory, one 16-byte vector per thread (``vec``: 8 bytes), block_y x
    # block_x tiles, prefetch = planes requested ahead)
    block_y: int
    block_x: int
    num_warps: int
    block_z: int = 0  # zmarch: planes per program
    num_stages: int = 1  # zmarch: software-pipelining depth of the plane loop (1: register prefetch); smem: the
    # ring's slack slots with mbarriers (0: a CTA barrier per plane instead)
    vec: int = 0  # zmarch: elements per 128-bit access for the x-neighbour shuffle; smem: elements a thread
    # computes (2 in fp32, 1 in fp64: an 8-byte vector, twice the threads of a tile, each with half the registers);
    # 0 = 16 bytes
    zorder: int = 0  # zmarch grid order: 0 z chunks fastest, 1 y tiles fastest, 2 x tiles fastest
    prefetch: int = 1  # zmarch: planes whose centre tiles are loaded ahead of use
    z_in_regs: bool = True  # zmarch: z terms in a register window (True) or through L1 (False)
    unroll_z: bool = False  # zmarch: unroll the block_z planes at compile time (short marches)
    pipeline_xy: bool = False  # zmarch loop: load the next plane's y rows and x chunks a step ahead
    static_strides: bool = False  # zmarch: compile the y/z strides in (one compile per grid layout)
    loop_unroll: int = 1  # zmarch loops: unroll factor (2R in the register window: its rotation becomes renames)
    l1_prefetch: int = 0  # zmarch loops: prefetch into L1 every sector of the plane this many planes ahead;
    # smem: prefetch into L2 the copies of the plane this many planes ahead (when more than ``prefetch``)
    halo_ahead: int = 0  # zwin: the x chunks (1) and the outer y rows (2) loaded a plane ahead, in registers
    maxnreg: int | None = None  # register budget per thread (the seeds' launch bounds); CUDA only
    ascending: bool = False
    nontemporal: bool = False
    grid_order: int = 0  # 0: 3D grid, x fastest; 1: bands of group_y tile rows through all z
    group_y: int = 1
    subdomain_bytes: int = 0  # > 0: y-slabs whose 2R+1 planes take at most this many bytes
    planes_per_barrier: int = 1  # smem with a CTA barrier (num_stages 0): planes between two barriers (the ring
    # then has prefetch + planes_per_barrier slots, a multiple of it)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> StencilConfig:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def short(self) -> str:
        """A compact label of the fields that differ from their defaults (tuning reports, cache keys)."""
        s = f"{self.kernel} {self.block_y}x{self.block_x} w{self.num_warps}" + (f" z{self.block_z}" if self.block_z else "")
        flags = [("unroll", self.unroll_z), ("L1z", not self.z_in_regs and self.kernel in ("zmarch", "rows")),
                 (f"pf{self.prefetch}", self.prefetch > 1), ("pipe", self.pipeline_xy),
                 (f"s{self.num_stages}", self.num_stages > 1), (f"v{self.vec}", self.vec),
                 (f"zo{self.zorder}", self.zorder), (f"u{self.loop_unroll}", self.loop_unroll > 1),
                 (f"l1pf{self.l1_prefetch}", self.l1_prefetch),
                 (f"ha{self.halo_ahead}", self.halo_ahead),
                 (f"r{self.maxnreg}", self.maxnreg),
                 ("asc", self.ascending), ("nt", self.nontemporal), ("static", self.static_strides),
                 (f"pb{self.planes_per_barrier}", self.planes_per_barrier != 1),
                 (f"band{self.group_y}", self.grid_order), (f"sub{self.subdomain_bytes}", self.subdomain_bytes)]
        return " ".join([s] + [name for name, on in flags if on])


def ladder_config(variant: str, dtype: torch.dtype, order: int) -> StencilConfig:
    """The configuration of a ladder step; each step is the previous one plus one technique."""
    if variant not in LADDER:
        raise ValueError(f"unknown ladder variant {variant!r}; choose one of {LADDER}")
    # One point per thread, 256 threads, as in the seeds' kernel 1.
    cfg = StencilConfig("plane", block_y=1, block_x=256, num_warps=8)
    steps = LADDER[1:LADDER.index(variant) + 1] if variant != "subdomains" else LADDER[1:5] + ("subdomains",)
    for step in steps:
        if step == "tiling":
            cfg = replace(cfg, block_y=8, block_x=128, num_warps=4)
        elif step == "reordered":
            cfg = replace(cfg, ascending=True)
        elif step == "launch_bounds":
            # The register budget fitted to the block: twice the threads for the same tile (half
            # the points per thread) under a cap that leaves room for 4 programs per SM (o2, o4).
            # A cap under what the high orders need spills: measured 7.5% of copy at order 8.
            cfg = replace(cfg, num_warps=8, maxnreg=64 if order <= 4 else None)
        elif step == "nontemporal":
            cfg = replace(cfg, nontemporal=True)
        elif step == "grid_order":
            cfg = replace(cfg, grid_order=1, group_y=4)
        elif step == "subdomains":
            cfg = replace(cfg, subdomain_bytes=-1)  # -1: half the device's L2, resolved at launch
    return cfg


def auto_config(dtype: torch.dtype, order: int, shape: tuple[int, int, int],
                l2_bytes: int | None = None, vector_aligned: bool = True, flat_ok: bool = False,
                smem: bool = False, half_aligned: bool = False) -> StencilConfig:
    """The configuration ``variant="auto"`` runs, chosen from measurements (H200, 2026-11-21;
    ``benchmarks/stencil_tune.py``, results under ``benchmarks/results/``).

    * Orders 2 and 4, planes small enough that the BLOCK_Z + 2R planes of a z chunk fit in half the
      L2: a short z-march unrolled at compile time (4 planes per program for fp64, 2 for fp32;
      programs walk x, then y, then z chunks); fp64 order 2 in tiles of 4 x 64 points, fp32 order
      2 in the row kernel (2 rows of 512 points, y neighbours from registers). Every plane load of a program is in flight at once,
      as in a one-tile-per-program kernel, which streams from DRAM best (a plain copy reached
      96-99% of cudaMemcpy in that pattern, 80-92% in a long march), and the z terms still come
      from registers. The chunk's 2R halo planes are re-read from L2.
    * Larger planes: those halo planes would be re-read from DRAM (the cache cliff), so a long
      z-march (32 planes per program) with the z terms in a register window, whose working set does
      not grow with the plane; its loop loads the next plane's centre two steps and its y rows and
      x chunks one step ahead (``prefetch``, ``pipeline_xy``).
    * fp32 orders 6 and 8, fp64 orders 6 and 8, and fp64 order 4 on planes of 512^2 points and more
      (``_zwin_auto``): the register-window march ``zwin`` (tall tiles, one vector per thread, z
      terms in registers, y rows and x chunks from L1, where a ``prefetch.global.L1`` put them two
      planes earlier; loop unrolled by 2R; rows and planes clamped instead of masked). fp32 order 8:
      45.6% of copy against 33-37% for the L1 march (H200); fp32 order 6 55.4% against 36%, fp64
      orders 4-8 58-62% against 48-57% (H100, 2026-11-25).
    * Other orders 6 and up (orders 10-16 off sm90, short rows): the z-march with the z terms read through L1
      and tall tiles, so a register window of 2R+1 tiles does not limit occupancy and few halo rows
      are read per row (20-25% of copy at orders 10-16 on an H200, 2026-12-01).
    * Contiguous grids whose rows are not 16-byte aligned (``flat_ok``: ``flat_ok()`` found nothing
      against it), fp64 order 2 and fp32 orders 2 and 4, planes small enough: the flat kernel
      (``_flat_auto``: tiles of the flat array on 16-byte boundaries, every access 128-bit; H100
      2026-11-25: 76.0% of copy against 68.3-71.9% for fp64 o2 515^3, 51.4/47.3% against 35.3/37.0%
      for fp32 o4 518^3). Everything else below.
    * Grids whose rows are not 16-byte aligned (``vector_aligned`` False: nx or a stride not a
      multiple of 16 bytes) make every z-march load scalar and its register count explode; there the
      plane kernels win (fp64 o2 515^3: tiling 59.8% of copy, z-marches 43-48%; fp32 o2 514^3:
      44.9% against 30-35%; fp32 o4 518^3: 28.2% against 19-27%; fp32 o6 518^3 and o8 522^3: the
      baseline as fast as any). Unaligned orders 2 and 4 take the tiled plane kernel, banded in y
      (grid order 1) once the 2R+1 planes no longer fit in L2 (not measured unaligned); orders 6 and
      up take the baseline. Pad nx to a multiple of 16 bytes for the fast path.
    * ``smem`` (the tensors are on an sm90 NVIDIA GPU, ``smem_device``), 16-byte aligned rows: orders 4 to 16
      where ``_smem_auto`` says so (orders 8 to 16 always) take the cp.async-ring march (``smem_march``: y rows and x chunks from a
      ring of planes in shared memory, z in registers). 520^3, % of copy against the register-window
      march in the same runs (2026-11-27): fp64 o8 82.8 against 74.4-74.8 (H100), fp32 o8 73.0 against
      70.6-71.1 (H100) and 67.8-68.0 against 64.9-65.1 (H200); fp64 o4 516^3 72.1 against 68.4 (H100).
      fp32 orders 4 and 6, fp64 order 6 (2026-11-28, against ``auto`` before): see ``smem_march``.
    * ``smem`` and rows of whole 8-byte vectors that are not 16-byte ones (``half_aligned``: fp32 grids of nx = 2 mod
      4, such as 512 + 2R for odd R; fp64 grids of odd nx): the ring with 8-byte copies (``half_ring``), 1.04-3.3x
      the paths below (H200, 2026-12-01). Other fp32 rows (odd nx): the ring with 4-byte copies (``word_ring``,
      1.27-2.5x the paths below; its GPU tests passed on the H200, 2026-12-01, thirty-third session).
    * Not used: the sm90 Gluon TMA z-march (``kernel="tma"``, selectable as an explicit config)
      measured slower than the above on every case and plane size (H200, 2026-11-25: fp64 o2 at
      most 67% of copy against 78%, fp32 o2 52% against 71%, fp32 o8 31% against 37%).
    """
    r = order // 2
    if not vector_aligned and smem and half_aligned:
        return half_ring(dtype, r, shape)
    if not vector_aligned and smem and dtype == torch.float32:
        return word_ring(r)
    if not vector_aligned:
        flat = _flat_auto(dtype, r, shape, l2_bytes) if flat_ok else None
        if flat is not None:
            return flat
        if r >= 3:
            return ladder_config("baseline", dtype, order)
        tiled = ladder_config("tiling", dtype, order)
        itemsize_ = torch.finfo(dtype).bits // 8
        if (2 * r + 1) * shape[1] * shape[2] * itemsize_ > (l2_bytes or 50 * 2**20) // 2:
            return replace(tiled, grid_order=1, group_y=4)
        return tiled
    itemsize = torch.finfo(dtype).bits // 8
    plane_bytes = shape[1] * shape[2] * itemsize
    l2 = l2_bytes or 50 * 2**20
    if smem and _smem_auto(dtype, r, shape):
        return smem_march(dtype, r, shape)
    if r == 2 and shape[1] * shape[2] >= 512 * 512:
        window = _zwin_auto(dtype, r, shape[2])  # fp64 order 4 on planes of 512^2 and more
        if window is not None:
            return window
    if r <= 2:
        short = short_march(dtype, r)
        if (short.block_z + 2 * r) * plane_bytes <= l2 // 2:
            # fp32 order 2: the tile march on 4 x 128 tiles of 4 warps, no longer the row kernel (2 rows of 512
            # points, 4 warps; it led the tile march of 2 warps 76.5-76.7% to 73.7-73.8% of copy in explore
            # rounds 1 and 2, timings that held the host's launch path). H200, 2026-11-29 (two rounds each,
            # ``benchmarks/results/2026-11-29-h200-twentyfirst/stencil-auto-ab-f32o2-tiles.json``), % of copy,
            # 4 warps against the row kernel: 512^3 82.5 / 81.8, 2048 x 256^2 77.8 / 65.7, 1024 x 384^2
            # 82.1 / 77.7, 301 x 257 x 520 59.1 / 56.1 (8 x 128 tiles of 8 warps 0.4-1.2 under 4 warps).
            return short
        return long_march(dtype)
    window = _zwin_auto(dtype, r, shape[2])
    if window is not None:
        return window
    return l1_march(dtype, r)


def _smem_auto(dtype: torch.dtype, r: int, shape: tuple[int, int, int]) -> bool:
    """Whether ``auto`` takes the cp.async-ring march on sm90 (aligned rows): orders 8 to 16, order 6 on planes of
    256^2 points and more, order 4 on planes of 256^2 (fp32) or 512^2 (fp64) and more. Not order 2 (H200,
    512^3, 2026-11-28: fp64 68-70% of copy against 84.6% for the short march, fp32 64-68.5% against 81.9%:
    ``benchmarks/results/2026-11-28-h200/stencil-auto-ab-smem-o2.json``)."""
    plane = shape[1] * shape[2]
    if r >= 4:  # orders 8 to 16 (10-16 since 2026-12-01: see ``smem_march``)
        return True
    if r == 3:
        return plane >= 256 * 256
    if r == 2:
        return plane >= (256 * 256 if dtype == torch.float32 else 512 * 512)
    return False


def smem_march(dtype: torch.dtype, r: int, shape: tuple[int, int, int] | None = None) -> StencilConfig:
    """The cp.async-ring march as ``auto`` takes it on sm90 (``kernel="smem"``): one 16-byte vector per thread
    (fp32 order 8: an 8-byte one, below), two slack slots in the ring (mbarriers; fp32 order 8: a CTA barrier),
    planes per program from ``ring_block_z`` for ``shape`` (order 8: up to 512; 64 at the other orders and
    without a shape), and per case the tile and the planes the copies run ahead:

    * fp32 order 8 before 2026-11-28, fp64 orders 4 and 6: 32 rows of 64 (fp32) or 32 (fp64) points, 16 warps, 3 ahead;
      fp64 order 8 the same, 5 ahead. H100, 520^3 (2026-11-27,
      ``benchmarks/results/2026-11-27-h100/stencil-auto-ab-smem-pf-h100-d97f510.json``): fp32 o8 72.9 / 73.0% of
      copy (3 planes ahead; 5: 69.8, 6: 68.2; an L2 prefetch further ahead 67.7-68.4); fp64 o8 82.8% (5
      ahead; 3: 81.7, 6: 82.3-82.4).
    * fp32 order 6: the same tile, 4 ahead. fp32 order 4: 8 rows of 128 points, 8 warps, 3 ahead.
    * fp32 order 8 since 2026-11-28 (thirteenth session): two elements a thread (``vec=2``: 8-byte vectors, 32
      warps over the 32 x 64 tile, 48-58 registers), a CTA barrier per plane (no slack slots), 5 planes ahead.
      H200, 520^3, 256 planes per program (``benchmarks/results/2026-11-28-h200-thirteenth/
      stencil-auto-ab-v2s0-*.json``; % of copy, rounds): 73.4 / 73.4 against 69.7-69.8 for the 16-byte ring
      (16 warps, 3 ahead, 2 slack slots); 4 ahead 71.7-72.2, 3 ahead 70.6-71.0, 6 ahead 73.4 (a wider spread),
      with mbarriers and one slack slot 69.1-69.3, 16 x 64 tiles of 16 warps (two CTAs an SM) 63.6-64.0. Not at
      order 6 (56-59 against 65.6) or fp32 order 4 / 2 (55.9-61.5 / 67.0-67.4 against 70.0 / 81.8). Not measured
      on an H100.
    * fp64 order 8 where ``ring_block_z`` gives 512 planes (2026-11-29): a CTA barrier every second plane
      (``planes_per_barrier=2``), 6 planes ahead, 8 slots, no mbarriers. H200, 520^3 (``benchmarks/results/
      2026-11-29-h200/stencil-auto-ab-pb-f64o8*.json``, two runs of two rounds): 83.2-83.5% of copy against
      80.9-81.9 for the mbarrier ring (5 ahead, 2 slack slots); a barrier every plane 79.4-80.4 (5-7 ahead),
      every third 83.2-83.3, 8 ahead 83.3-83.5, 4 ahead 76.5, 256 planes 81.3. Not where the march is
      shorter: on 264 x 520^2 (256 planes) 81.2-81.9 against 84.5. fp32 order 8 loses with it (62.7-70.1
      against 73.6-73.8), and fp64 orders 4 / 6 and fp32 order 6 gain nothing (70.0 / 62.5-62.6 / 64.5-65.0).
      Against ``auto`` before, two checkouts in one call (``stencil-auto-ab-f64o8-{old,new}-*.json``): 520^3
      83.2-83.5 / 81.3-81.5, 1032 x 520^2 79.6 / 79.1-79.3, 776^3 79.3 / 78.7-79.1, 520 x 1032^2 76.5-76.6 /
      76.8-77.2 (the tuner also times the mbarrier ring there).

    fp32 orders 4 and 6 and fp64 order 6 (2026-11-28, ``stencil-auto-ab-ring-o46-{h100,h200}.json`` in
    ``benchmarks/results/2026-11-28-{h100,h200}/``; two rounds, medians; % of copy, the ring against ``auto``
    before, which took the short march at order 4 and the register-window march at order 6):

    ============================  ==============  ==============
    case                          H100            H200
    ============================  ==============  ==============
    fp32 o4 516^3                 74.6 / 60.3     70.0 / 49.6
    fp32 o4 2052 x 260^2          71.6 / 49.6     63.3 / 40.2
    fp32 o4 132 x 1028^2          (not run)       69.2 / 51.9
    fp32 o6 520^3                 72.7 / 58.5     65.6 / 48.9
    fp32 o6 2056 x 264^2          69.1 / 49.2     62.2 / 40.1
    fp64 o6 520^3                 65.2 / 59.0     62.2 / 52.9
    ============================  ==============  ==============
    """
    if r >= 5:
        cfg = _smem_high(dtype, r, shape)
    elif dtype == torch.float32 and r == 2:
        cfg = StencilConfig("smem", block_y=8, block_x=128, num_warps=8, block_z=64, prefetch=3, num_stages=2,
                            nontemporal=True)
    elif dtype == torch.float32 and r == 4:
        cfg = StencilConfig("smem", block_y=32, block_x=64, num_warps=32, block_z=64, prefetch=5, num_stages=0,
                            vec=2, nontemporal=True)
    else:
        ahead = 5 if (dtype == torch.float64 and r == 4) else 4 if (dtype == torch.float32 and r == 3) else 3
        cfg = StencilConfig("smem", block_y=32, block_x=64 if dtype == torch.float32 else 32, num_warps=16,
                            block_z=64, prefetch=ahead, num_stages=2, nontemporal=True)
    if shape is None:
        return cfg
    cfg = replace(cfg, block_z=ring_block_z(cfg, r, shape, torch.finfo(dtype).bits // 8))
    if dtype == torch.float64 and r == 4 and cfg.block_z >= 512:
        # marches of 512 planes: a CTA barrier every second plane, 6 planes ahead (8 slots); see the docstring
        cfg = replace(cfg, num_stages=0, prefetch=6, planes_per_barrier=2)
    return cfg


def _smem_high(dtype: torch.dtype, r: int, shape: tuple[int, int, int] | None) -> StencilConfig:
    """The ring at orders 10 to 16 (R = 5..8; ``smem_march``): 16-byte vectors, mbarriers with 2 slack slots, 64
    planes a program, and per case:

    * fp32 orders 10 and 12 on planes of 512^2 points and more: 32 x 64 tiles of 16 warps, 4 / 3 planes ahead
      (126-128 registers; a few spilled at order 12); smaller planes and fp32 orders 14 and 16: 16 x 64 of 8
      warps, 3 ahead (165-193 registers: one CTA of 8 warps an SM, 64 KB of ring);
    * fp64: 16 x 32 of 8 warps, 5 planes ahead at order 10, 3 at orders 12-16.

    Measured on an H200 (2026-12-01, ``benchmarks/stencil_auto_ab.py``, one round each, every case checked against
    float64 on the timed grid first; ``benchmarks/results/2026-12-01-h200-thirtysecond/stencil-auto-ab-hi*.json``),
    % of copy, the ring against ``auto`` before (the z-march with z through L1, 20-25%):

    ==============================  ===========  ==============================================
    case                            before       ring
    ==============================  ===========  ==============================================
    fp32 o10 522^2 x 524            24.8         59.4 (32 x 64 w16, 4 ahead); 16 x 64 w8 48.5
    fp32 o10 266^2 x 268            14.7         37.4 (16 x 64 w8); 32 x 64 w16 33.1-33.4
    fp32 o12 524^3                  23.2-23.3    50.3 (32 x 64 w16, 3 ahead); 16 x 64 w8 45.4
    fp32 o16 528^3                  20.1         44.1 (16 x 64 w8); 16 x 64 w16 v2 43.0-43.6
    fp32 o14 270^2 x 272            13.8         31.8 (16 x 64 w8); 16 x 64 w16 v2 29.0-30.1
    fp64 o10 522^2 x 524            23.4         55.1 (5 ahead); 4 ahead 52.4, 3 ahead 50.8
    fp64 o16 528^3                  20.7         43.3 (3 ahead); 5 ahead 44.1 (226 registers)
    fp64 o12 268^3                  17.5         52.5 (3 ahead); 4 ahead 53.6
    ==============================  ===========  ==============================================

    Also timed: CTA-barrier rings (2-11 points slower at every high order), 8-byte vectors a thread (fp32 32 x 64
    w32: 42-48; fp64 one element a thread: 29-47), 8-row tiles (within a point or two). The tuner (on by default)
    times the other tiles too: on fp32 o12 524^3 it kept 32 x 64 w16 (0.513 ms against 0.572 for 16 x 64 w8)."""
    if dtype == torch.float32:
        if r <= 6 and (shape is None or shape[1] * shape[2] >= 512 * 512):
            return StencilConfig("smem", block_y=32, block_x=64, num_warps=16, block_z=64, prefetch=4 if r == 5 else 3,
                                 num_stages=2, nontemporal=True)
        return StencilConfig("smem", block_y=16, block_x=64, num_warps=8, block_z=64, prefetch=3, num_stages=2,
                             nontemporal=True)
    return StencilConfig("smem", block_y=16, block_x=32, num_warps=8, block_z=64, prefetch=5 if r == 5 else 3,
                         num_stages=2, nontemporal=True)


def half_ring(dtype: torch.dtype, r: int, shape: tuple[int, int, int] | None = None) -> StencilConfig:
    """The ring ``auto`` takes on sm90 where the rows are whole 8-byte vectors but not 16-byte ones (``half_aligned``:
    fp32 grids of nx = 2 mod 4, such as 512 + 2R for odd R, and fp64 grids of odd nx): 8-byte copies (``cp.async.ca``)
    and an 8-byte vector a thread (``vec`` 2 in fp32, 1 in fp64), 64 planes a program, per case:

    * fp32: order 2 16 x 64 tiles of 16 warps, 3 ahead, mbarriers; order 4 the same tile, 4 ahead, a CTA barrier
      a plane; orders 6 and 8 8 x 64 tiles of 8 warps, 3 ahead, mbarriers; orders 10-16 16 x 64 of 16 warps, 4
      ahead, mbarriers;
    * fp64: order 2 32 x 32 tiles of 32 warps, 5 ahead, a CTA barrier a plane; order 4 16 x 32 of 16 warps, 3
      ahead, a CTA barrier; orders 6-16 16 x 32 of 16 warps, 4 ahead, mbarriers.

    H200 (2026-12-01, ``benchmarks/stencil_auto_ab.py``, one round, every case checked against float64 on the timed
    grid first; ``benchmarks/results/2026-12-01-h200-thirtysecond/stencil-auto-ab-half-*.json``), % of copy, the ring
    against ``auto`` before (the flat, plane and L1-march kernels):

    ======================  =======  ======  ======================  =======  ======
    fp32                    before   ring    fp64                    before   ring
    ======================  =======  ======  ======================  =======  ======
    o2 514^3                50.1     67.6    o2 514^2 x 515          65.4     67.9
    o4 516^2 x 518          40.4     67.7    o4 516^2 x 517          45.8     68.5
    o6 518^3                20.3     58.4    o8 520^2 x 521          25.7     49.1
    o8 520^2 x 522          17.8     52.4    o12 524^2 x 525         18.2     37.7
    o10 522^3               14.2     43.0
    o12 524^2 x 526         12.9     41.5
    o14 526^3               11.1     35.4
    o16 528^2 x 530         10.1     33.6
    ======================  =======  ======  ======================  =======  ======

    The 16-byte rows stay faster (fp32 o2 82.7%, o8 74.7%): pad nx to a multiple of 16 bytes where you can."""
    if dtype == torch.float32:
        if r <= 2:
            return StencilConfig("smem", block_y=16, block_x=64, num_warps=16, block_z=64, prefetch=3 if r == 1 else 4,
                                 num_stages=2 if r == 1 else 0, vec=2, nontemporal=True)
        if r <= 4:
            return StencilConfig("smem", block_y=8, block_x=64, num_warps=8, block_z=64, prefetch=3, num_stages=2,
                                 vec=2, nontemporal=True)
        return StencilConfig("smem", block_y=16, block_x=64, num_warps=16, block_z=64, prefetch=4, num_stages=2,
                             vec=2, nontemporal=True)
    if r == 1:
        return StencilConfig("smem", block_y=32, block_x=32, num_warps=32, block_z=64, prefetch=5, num_stages=0, vec=1,
                             nontemporal=True)
    return StencilConfig("smem", block_y=16, block_x=32, num_warps=16, block_z=64, prefetch=3 if r == 2 else 4,
                         num_stages=0 if r == 2 else 2, vec=1, nontemporal=True)


def word_ring(r: int) -> StencilConfig:
    """The ring ``auto`` takes on sm90 for fp32 rows that are not whole 8-byte vectors (odd nx, or an odd stride):
    4-byte copies (``cp.async.ca``), one element a thread, 32-column tiles (a tile row is one warp), 64 planes a
    program: order 2 32 x 32 tiles of 32 warps, 5 planes ahead, a CTA barrier a plane; orders 4-8 and 14-16 16 x 32
    of 16 warps, 4 ahead, mbarriers; orders 10-12 32 x 32 of 32 warps, 4 ahead, mbarriers.

    H200 (2026-12-01, ``benchmarks/stencil_auto_ab.py``, one round, every case checked against float64 on the timed
    grid first; ``benchmarks/results/2026-12-01-h200-thirtysecond/stencil-auto-ab-word.json``), % of copy against
    what ``auto`` ran before (the flat kernel at orders 2-4, the plane kernel beyond): o2 514^2 x 515 59.1 / 46.6
    (16 x 32 w16 55.7), o4 516^2 x 517 54.0 / 39.9, o8 520^2 x 521 40.0 / 17.8, o12 524^2 x 525 30.3 / 12.9 (16 x 32
    w16 28.3), o16 528^2 x 529 24.9 / 10.1 (32 x 32 w32 20.9-21.9, spilling). Rows of 8- or 16-byte vectors are
    faster still (``half_ring``, ``smem_march``). The heuristic since the GPU tests of odd y and z extents, short
    chunks and offset views through it passed (``tests/gpu/test_stencil_smem.py::test_4_byte_ring_matches_float64``,
    H200, 2026-12-01, thirty-third session); the bench above checked every configuration against float64 on its full
    grid."""
    if r == 1:
        return StencilConfig("smem", block_y=32, block_x=32, num_warps=32, block_z=64, prefetch=5, num_stages=0,
                             vec=1, nontemporal=True)
    if r in (5, 6):
        return StencilConfig("smem", block_y=32, block_x=32, num_warps=32, block_z=64, prefetch=4, num_stages=2,
                             vec=1, nontemporal=True)
    return StencilConfig("smem", block_y=16, block_x=32, num_warps=16, block_z=64, prefetch=4, num_stages=2, vec=1,
                         nontemporal=True)


#: SMs the ring's grid is scheduled on in ``ring_block_z``'s model (H100 and H200 SXM: 132), and a program's
#: start in plane times (its launch and the wait for its first planes, with nothing else on its SM).
RING_SMS = 132
RING_START_PLANES = 4
#: The 8-byte ring (fp32 order 8) takes one program per tile through all planes where the tiles fill at least this share
#: of the SMs (520^2 planes: 128 tiles of 32 x 64 for 132 SMs), as ``ring_block_z`` says.
RING_ONE_WAVE = 0.9


@functools.lru_cache(maxsize=256)
def _ring_makespan(n_xy: int, nzi: int, bz: int, extra: int, sms: int) -> int:
    """Plane times until the last program ends when the grid's programs (x and y tiles fastest, then z chunks
    of ``bz`` planes, each also reading ``extra`` planes' worth of halo and start) go in order to the first free
    of ``sms`` SMs, one program each."""
    free = [0] * sms
    for c in range(triton_cdiv(nzi, bz)):
        length = min(bz, nzi - c * bz) + extra
        for _ in range(n_xy):
            heapq.heapreplace(free, free[0] + length)
    return max(free)


def ring16(dtype: torch.dtype, r: int) -> StencilConfig:
    """The ring with a 16-byte vector a thread in ``smem_march``'s tile (fp32 order 8's ring before two elements a
    thread: 16 warps, 3 planes ahead, 2 slack slots; the other cases' ring is already that): a tuner candidate."""
    ring = smem_march(dtype, r)
    return replace(ring, vec=0, num_warps=16, prefetch=3, num_stages=2) if ring.vec else ring


def ring_block_z(cfg: StencilConfig, r: int, shape: tuple[int, int, int], itemsize: int) -> int:
    """Planes per program of the ring march on ``shape``. Order 8 (R = 4): of 64, 128, 256 and 512, the one whose
    grid ends first in a model of the schedule (``_ring_makespan``: ``RING_SMS`` SMs, one program each; a program
    costs its planes, its 2R halo planes, the planes it copies ahead and ``RING_START_PLANES``), the longer on a
    tie, among those that leave at least one program per SM. A longer march reads fewer z-halo planes and starts
    fewer programs, each of which waits for its first planes with nothing else on its SM. Other orders: 64.

    H200, two or three rounds each (2026-11-28, ``benchmarks/results/2026-11-28-h200-twelfth/``,
    ``stencil-auto-ab-bz-d.json`` and ``stencil-auto-ab-bz-orders.json``; % of copy at 64 / 128 / 256 / 512
    planes):

    * 520^3 fp64 order 8: 77.4-78.2 / 79.8-80.2 / 81.4-81.9 / 81.5-83.7 (the model: 512);
      fp32 order 8: 67.5-68.1 / 67.3-69.5 / 69.7-70.0 / 66.9-70.6 (512 leaves 128 programs for 132 SMs; the
      model: 256).
    * Orders 4 and 6 lose from longer marches, even where the grid has no short last wave: fp32 order 4 on
      132 x 1028^2 69.0 at 64 planes against 66.2 at 128 (one chunk), fp64 order 4 516^3 69.8 / 69.4 / 69.0 /
      68.4, fp32 order 6 520^3 65.3 / 64.3 / 56.8 / 45.9, fp32 order 4 516^3 69.8 / 69.8 / 63.3 / 51.3.

    The 8-byte ring of fp32 order 8 (two elements a thread, since the thirteenth session) also takes marches of
    1024 and 2048 planes and grids of fewer programs than SMs, down to ``RING_ONE_WAVE`` of them: one program per
    tile through every plane where 520^2 planes give 128 tiles. H200, 2026-11-29 (``benchmarks/results/
    2026-11-29-h200/stencil-auto-ab-bz-f32o8*.json``, two rounds; % of copy at 128 / 256 / 512 / 1024 planes,
    the one-wave choice in bold): 520^3 69.6-70.2 / 74.1 / **74.7** (the model before: 256); 1032 x 520^2 65.2-65.4 /
    63.7-64.6 / 66.5-66.8 / **74.7-74.9** (before: 512); 264 x 520^2 70.9-71.1 / **72.6-72.9** / 72.5-72.6 (before:
    128). Where the tiles outnumber the SMs the model is unchanged: 776^3 (288 tiles) 64.7-64.9 / 64.2 (the model:
    512) / 52.4 at 1024; 520 x 1032^2 (512 tiles) 62.7-62.9 at every length."""
    if r != 4:
        return 64
    vec = 16 // itemsize
    nz, ny, nx = shape
    n_tx = triton_cdiv(triton_cdiv(nx - r, vec) * vec - r // vec * vec, cfg.block_x)
    n_xy = n_tx * triton_cdiv(ny - 2 * r, cfg.block_y)
    nzi = nz - 2 * r
    extra = 2 * r + max(1, cfg.prefetch) + RING_START_PLANES
    best, best_t = 64, _ring_makespan(n_xy, nzi, 64, extra, RING_SMS)
    v8 = bool(cfg.vec)  # the 8-byte ring (fp32 order 8): longer marches, and one wave a little short of the SMs
    least = math.ceil(RING_ONE_WAVE * RING_SMS) if v8 else RING_SMS
    for bz in (128, 256, 512) + ((1024, 2048) if v8 else ()):
        if bz // 2 >= nzi or n_xy * triton_cdiv(nzi, bz) < least:
            break
        t = _ring_makespan(n_xy, nzi, bz, extra, RING_SMS)
        if t <= best_t:
            best, best_t = bz, t
    return best


def smem_device(u: torch.Tensor) -> bool:
    """Whether ``auto`` may take the cp.async-ring march on u's device: an sm90 NVIDIA GPU (where it was
    measured) running compiled kernels (``smem_ok`` checks the rest)."""
    return (u.device.type == "cuda" and torch.version.hip is None and not triton_on_cpu()
            and torch.cuda.get_device_capability(u.device)[0] == 9)


def short_march(dtype: torch.dtype, r: int, block_x: int | None = None) -> StencilConfig:
    """The short z-march unrolled at compile time (orders 2 and 4, planes whose z chunk fits in L2):
    4 rows of ``block_x`` points (default: 64 for fp64 order 2, else 128), 2 warps for 64-point rows,
    else 4 (fp64, fp32 order 2) or 2 (fp32 order 4); fp64 order 2 on 64-point rows: 8 rows and 4 warps."""
    if block_x is None:
        # fp64 order 2: tiles 64 points wide, 2 warps: 81.0% against 79.7% (128 wide) at 512^3, and
        # 78.1/80.5% against 76.3/79.0% on 256^2/768^2 planes (explore round 2).
        block_x = 64 if r == 1 and dtype == torch.float64 else 128
    nw = 2 if block_x <= 64 or (dtype == torch.float32 and r != 1) else 4
    rows = 4
    if r == 1 and dtype == torch.float64 and block_x == 64:
        # 8 rows of 64 points over 4 warps (y halo 10/8 rows instead of 6/4; the same 4 points a thread):
        # H200 (2026-11-29, ``benchmarks/results/2026-11-29-h200-twentyfirst/stencil-auto-ab-zm-tiles*``, two
        # rounds each, % of copy) 85.9 against 84.6-84.7 at 512^3, 82.2 against 81.5 on 2048 x 256^2; 16 rows of
        # 8 warps 71-79, 8 rows of 2 warps 78.3, 8 rows of 128 points 67-76.
        rows, nw = 8, 4
    # Planes per program (measured best for R = 1); a chunk also reads its 2R halo planes, so
    # R = 2 takes 8 to keep that overhead at half the chunk.
    bz = 8 if r == 2 else (4 if dtype == torch.float64 else 2)
    return StencilConfig("zmarch", block_y=rows, block_x=block_x, num_warps=nw, block_z=bz, nontemporal=True,
                         zorder=2, unroll_z=True)


def row_march() -> StencilConfig:
    """The row kernel's short march (fp32 order 2): 2 rows of 512 points, 4 warps, 2 planes, y
    neighbours from registers."""
    return StencilConfig("rows", block_y=2, block_x=512, num_warps=4, block_z=2, nontemporal=True, zorder=2,
                         unroll_z=True)


def long_march(dtype: torch.dtype) -> StencilConfig:
    """The long z-march (32 planes per program) with the z terms in a register window, its loop loading
    the next plane's centre two steps and its y rows and x chunks one step ahead: orders 2 and 4 on
    planes whose short-march chunk would not fit in L2."""
    return StencilConfig("zmarch", block_y=4, block_x=128, num_warps=8 if dtype == torch.float64 else 4,
                         block_z=32, nontemporal=True, zorder=2, prefetch=2, pipeline_xy=True)


def l1_march(dtype: torch.dtype, r: int) -> StencilConfig:
    """The z-march with the z terms read through L1 and tall tiles (orders 6 and up where the
    register window ``zwin`` is not taken): rows of 512 bytes, 16 rows, 64 planes."""
    itemsize = torch.finfo(dtype).bits // 8
    bx = 512 // itemsize  # rows of 512 bytes: 4 lines, x halos cost 1/8 more at most
    # Order 8: warps wait on loads (Nsight Compute: long-scoreboard stalls 70%) and registers cap
    # the occupancy at 50%; a 56-register budget measured 38.1% of copy against 34.0% (run 27).
    return StencilConfig("zmarch", block_y=16, block_x=bx, num_warps=16 * bx // (32 * (16 // itemsize)), block_z=64,
                         nontemporal=True, zorder=2, z_in_regs=False, maxnreg=56 if r == 4 else None)


def _zwin_auto(dtype: torch.dtype, r: int, nx: int) -> StencilConfig | None:
    """The register-window march (kernel "zwin") where it measured faster than the marches ``auto`` ran
    before, or None: 32 rows of one 128-bit vector per thread (64 points in fp32, 32 in fp64), 16
    warps, 64 planes, the loop unrolled by 2R, every sector of a plane prefetched into L1 two planes
    ahead. Measured (% of copy, against ``auto`` before it in the same run):

    * fp32 order 8: 45.6% against 33.2/36.5% (H200, stencil-round3c-325e963.json; its zmarch twin
      46.9% against 38.5/38.6%, round3a-aa91c13); H100: 54.1/52.1% as ``auto`` (round3d-fdf3519);
    * fp32 order 6 (520^3): 55.4% against 36.0/35.7% (H100, stencil-round3d-d4975ac.json);
    * fp64 order 8: 60.2 and 57.6% against 49.8/49.5 and 48.0/51.1%; order 6: 61.2% against
      56.6/53.9%; order 4 (516^3, against the short unrolled march): 61.9% against 55.3/53.5%
      (H100, stencil-round3d-fdf3519.json and -d4975ac.json). ``auto`` takes it for fp64 order 4 on
      planes of 512^2 points and more (the measured size; its working set does not grow with the
      plane, so the larger planes, where the long march ran, are expected to keep it; not measured).

    Not taken: fp32 order 4 (51.4-52.1% against 50.8/53.0%: no gain), orders above 8 (not measured)."""
    window = window_march(dtype, r)
    if nx >= window.block_x and r in ((3, 4) if dtype == torch.float32 else (2, 3, 4)):
        return window
    return None


def window_march(dtype: torch.dtype, r: int) -> StencilConfig:
    """The register-window march (kernel "zwin") as ``auto`` takes it (``_zwin_auto``): 32 rows of one
    128-bit vector per thread, 16 warps, 64 planes, the loop unrolled by 2R, L1 prefetch two planes ahead.

    Order 8 (R = 4): the x chunks and the outer y rows a plane ahead in registers (``halo_ahead=2``)
    and the prefetch three planes ahead. H200, 520^3, medians of alternating rounds against the
    two-ahead form in the same run (% of copy): fp32 55.4 against 54.2 (5 rounds) and 54.0 against 51.4
    (3 rounds), fp64 61.4 against 58.9 and 61.6 against 59.9
    (benchmarks/results/2026-11-27-h200/stencil-auto-ab-{ss,halo}-380d446.json). Not measured at
    other orders: they keep the two-ahead form."""
    cfg = StencilConfig("zwin", block_y=32, block_x=64 if dtype == torch.float32 else 32, num_warps=16, block_z=64,
                        nontemporal=True, loop_unroll=2 * r, l1_prefetch=2)
    return replace(cfg, l1_prefetch=3, halo_ahead=2) if r == 4 else cfg


def _flat_auto(dtype: torch.dtype, r: int, shape: tuple[int, int, int], l2_bytes: int | None) -> StencilConfig | None:
    """The flat kernel (``kernel="flat"``) for unaligned contiguous grids where it measured faster than
    the tiled plane kernel ``auto`` ran there before, or None. Measured (H100, 2026-11-25, one run,
    copy 2.985 TB/s, ``benchmarks/results/2026-11-25-h100/stencil-unaligned-003eb7d.json``; % of copy,
    flat against the plane kernel before and after it in the same run):

    * fp64 order 2, 515^3: 76.0% (1024 points, 8 warps; 512 x 4 warps: 69.1/73.8%) against 68.3/71.9%;
    * fp32 order 2, 514^3: 64.0/55.1% (1024 points, 4 warps; the second timing's spread was 0.38)
      against 56.1/53.6%; 512 x 4: 59.5%, 2048 x 8: 60.2%;
    * fp32 order 4, 518^3: 51.4/47.3% (1024 x 4) against 35.3/37.0%.

    Not taken: fp64 order 4 (517^3: 52.9-55.3% against 55.9/56.6%), orders 6 and up (not measured),
    and planes whose 2R + 1 copies take more than a sixth of the L2: the kernel reads every z neighbour
    from L2 (fp32 order 4 on 1001^2 planes, 20 MB: 40.9/40.3% against 42.7%; order 2 on 2050^2 planes:
    48.3% against 64.6/61.5%). Between the 6.4 MB measured faster and those 20 MB it is not measured."""
    itemsize = torch.finfo(dtype).bits // 8
    if (2 * r + 1) * shape[1] * shape[2] * itemsize > (l2_bytes or 50 * 2**20) // 6:
        return None
    if r == 1 and dtype == torch.float64:
        return StencilConfig("flat", block_y=1, block_x=1024, num_warps=8, nontemporal=True)
    if r in (1, 2) and dtype == torch.float32:
        return StencilConfig("flat", block_y=1, block_x=1024, num_warps=4, nontemporal=True)
    return None


def config_for_tensors(variant: str, u: torch.Tensor, out: torch.Tensor, order: int,
                       l2_bytes: int | None = None) -> StencilConfig:
    """``config_for`` with the grid's facts read from the tensors: their alignment (``vector_aligned``),
    whether the flat kernel can take them (``flat_ok``) and whether they are on an sm90 GPU (``smem_device``)."""
    return config_for(variant, u.dtype, order, tuple(u.shape), l2_bytes, vector_aligned(u, out),
                      flat_ok(u, out) is None, smem_device(u), half_aligned(u, out))


def config_for(variant: str, dtype: torch.dtype, order: int, shape: tuple[int, int, int],
               l2_bytes: int | None = None, vector_aligned: bool = True, flat_ok: bool = False,
               smem: bool = False, half_aligned: bool = False) -> StencilConfig:
    """The configuration of ``variant`` for a grid; ``vector_aligned``, ``flat_ok`` (the grid is
    contiguous with 16-byte aligned pointers, ``flat_ok()``), ``smem`` (sm90) and ``half_aligned`` (rows of
    8-byte vectors only) describe the tensors (``auto`` only)."""
    if variant == "auto":
        return auto_config(dtype, order, shape, l2_bytes, vector_aligned, flat_ok, smem, half_aligned)
    return ladder_config(variant, dtype, order)


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def _check_order(order: object) -> int:
    if isinstance(order, bool) or not isinstance(order, int):
        raise TypeError(f"order must be an int, got {type(order).__name__}")
    if order % 2 or not MIN_ORDER <= order <= MAX_ORDER:
        raise ValueError(f"order must be an even integer in [{MIN_ORDER}, {MAX_ORDER}], got {order}")
    return order


def check_spacing(spacing: object, ndim: int, dtype: torch.dtype | None = None) -> tuple[float, ...]:
    """A positive number (every axis) or ``ndim`` positive numbers (Python or numpy reals), as a tuple of
    floats. ``ValueError`` where 1/h^2, the stencil weights' scale, is not a normal number (in ``dtype`` when
    given, else float64): such a spacing gives inf or zero weights, not a Laplacian."""
    def real(h: object) -> bool:
        return isinstance(h, numbers.Real) and not isinstance(h, bool)
    if real(spacing):
        spacing = (spacing,) * ndim
    if not isinstance(spacing, (tuple, list)) or len(spacing) != ndim:
        axes = "a triple (hz, hy, hx)" if ndim == 3 else f"{ndim} numbers (one per axis)"
        raise TypeError(f"spacing must be a positive number or {axes}, got {spacing!r}")
    out = []
    for h in spacing:
        if not real(h):
            raise TypeError(f"spacing entries must be numbers, got {h!r}")
        h = float(h)
        if not torch.compiler.is_compiling() and not (math.isfinite(h) and h > 0):  # symbolic under dynamic=True
            raise ValueError(f"spacing entries must be finite and > 0, got {tuple(spacing)!r}")
        out.append(h)
    if torch.compiler.is_compiling():  # symbolic floats under dynamic=True: the op's body checks them when it runs
        return tuple(out)
    fi = torch.finfo(dtype if dtype is not None and dtype.is_floating_point else torch.float64)
    for h in out:
        scale = 1.0 / (h * h) if h * h > 0 else math.inf
        if not fi.tiny <= scale <= fi.max:
            raise ValueError(f"spacing {h!r} is out of range: the weights scale as 1/h^2 = {scale:.3g}, outside "
                             f"the normal numbers of {str(fi.dtype).replace('torch.', '')} "
                             f"[{fi.tiny:.3g}, {fi.max:.3g}]; rescale the units")
    return tuple(out)


def _check_grid(u: object, name: str = "u") -> torch.Tensor:
    if not isinstance(u, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(u).__name__}")
    if u.dim() != 3:
        raise ValueError(f"{name} must be 3D (nz, ny, nx), got shape {tuple(u.shape)}")
    if u.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {u.dtype}; the Laplacian supports float32 and float64")
    if u.device.type not in ("cuda", "cpu", "meta"):  # meta: the result's shape and type, nothing computed
        raise ValueError(f"{name} is on device {u.device}; tilecraft runs on CUDA/ROCm GPUs (and CPU)")
    if u.shape[-1] > 1 and u.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous along x (stride(-1) == 1), got strides {u.stride()}")
    if any(s < 0 for s in u.stride()):
        raise ValueError(f"{name} has negative strides {u.stride()}")
    if has_storage(u) and u.data_ptr() % u.element_size():
        raise ValueError(f"{name}'s data pointer is not aligned to its element size")
    return u


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory spans of a and b intersect (also across storages that alias one buffer,
    as torch.from_numpy of overlapping numpy views do)."""
    if a.device != b.device or not (has_storage(a) and has_storage(b)):
        return False
    return _spans_meet(a.data_ptr(), _extent(a), b.data_ptr(), _extent(b))


def _extent(t: torch.Tensor) -> int:
    """The bytes from t's first element to the end of its last."""
    return (sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1) * t.element_size()


def _spans_meet(a0: int, a_len: int, b0: int, b_len: int) -> bool:
    return a0 < b0 + b_len and b0 < a0 + a_len


def _self_overlapping(t: torch.Tensor) -> bool:
    """True when two elements of t may share memory: with dims sorted by stride, each stride must
    step over the whole extent of the dims below it (padded rows and planes are fine)."""
    dims = sorted((st, n) for st, n in zip(t.stride(), t.shape) if n > 1)
    reach = 1
    for stride, n in dims:
        if stride < reach:
            return True
        reach = stride * (n - 1) + reach
    return False


def _check_apart(u: torch.Tensor, out: torch.Tensor) -> None:
    if _overlaps(u, out):
        raise ValueError("out overlaps u: the stencil reads neighbours, so it cannot run in place")


#: (order, spacing) of earlier eager calls by what :func:`validate` reads but the addresses: the tensors' types,
#: dtypes, devices, layouts, shapes, strides and 16-byte alignment, and the arguments (types and reprs)
_VALIDATED: dict = {}


def _facts(t: torch.Tensor | None) -> tuple | None:
    return None if t is None else (t.dtype, t.device, t.layout, t.shape, t.stride(), t.data_ptr() & 15)


def _validated(u, order, spacing, out, variant) -> tuple[int, tuple[float, float, float]]:
    """:func:`validate`, remembered for eager calls on plain tensors with memory (about 10 us of a replayed call's
    host time on the CPU machine, 2026-12-01). Whether ``out`` overlaps ``u`` depends on their addresses, so that
    check runs on every call (on the spans' lengths remembered with the key); only successful validations are
    remembered, so a bad call raises every time."""
    key = None
    if (type(u) in PLAIN_TENSORS and (out is None or type(out) in PLAIN_TENSORS)
            and not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active()
            and u.device.type != "meta"):
        try:
            key = (type(order), order, type(spacing), repr(spacing), type(variant), variant, _facts(u), _facts(out))
            done = _VALIDATED.get(key)
        except (TypeError, RuntimeError):  # unhashable, or no data pointer: validate says what is wrong
            key = done = None
        if done is not None:
            done, u_len, out_len = done
            if out is not None and _spans_meet(u.data_ptr(), u_len, out.data_ptr(), out_len):
                _check_apart(u, out)  # raises
            return done
    done = validate(u, order, spacing, out, variant)
    if key is not None:
        remember(_VALIDATED, key, (done, _extent(u), None if out is None else _extent(out)))
    return done


def validate(u: torch.Tensor, order: int, spacing: object, out: torch.Tensor | None, variant: str
             ) -> tuple[int, tuple[float, float, float]]:
    """All checks ``laplacian`` makes before it launches anything; returns (order, spacing)."""
    _check_grid(u)
    order = _check_order(order)
    spacing = check_spacing(spacing, 3, u.dtype)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
    r = order // 2
    if min(u.shape) < 2 * r + 1:
        raise ValueError(f"order {order} needs every extent >= {2 * r + 1} (2R+1), got shape {tuple(u.shape)}")
    if out is not None:
        _check_grid(out, "out")
        if out.shape != u.shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(u.shape)}")
        if out.dtype != u.dtype:
            raise TypeError(f"out has dtype {out.dtype}, expected {u.dtype}")
        if out.device != u.device:
            raise ValueError(f"out is on {out.device}, u on {u.device}")
        _check_apart(u, out)
        if _self_overlapping(out):
            raise ValueError(f"out has elements that share memory (strides {out.stride()} for shape "
                             f"{tuple(out.shape)}); pass a tensor with distinct elements")
    return order, spacing


# ----------------------------------------------------------------------------------------------
# launch
# ----------------------------------------------------------------------------------------------
def triton_on_cpu() -> bool:
    """True when the Triton interpreter is active (TRITON_INTERPRET=1 was set before import)."""
    return type(_k.laplacian_plane_kernel).__name__ == "InterpretedFunction"


_WEIGHTS: dict[tuple, torch.Tensor] = {}


def _weights(order: int, spacing: tuple[float, float, float], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    key = (order, spacing, dtype, str(device))
    w = _WEIGHTS.get(key)
    if w is None:
        if len(_WEIGHTS) > 64:
            _WEIGHTS.clear()
        w = constant(torch.tensor(stencil_weights(order, spacing), dtype=dtype, device=device))
        _WEIGHTS[key] = w
    return w


def _l2_bytes(device: torch.device) -> int:
    """The device's L2 size (50 MiB for interpreter runs: any value exercises the code paths)."""
    return device_l2_bytes(device) or 50 * 2**20


def subdomain_rows(cfg: StencilConfig, shape: tuple[int, int, int], r: int, itemsize: int,
                   device: torch.device) -> int:
    """Rows per y-slab for the subdomain variant: 2R+1 slab planes in ``subdomain_bytes``."""
    budget = cfg.subdomain_bytes if cfg.subdomain_bytes > 0 else _l2_bytes(device) // 2
    rows = budget // ((2 * r + 1) * shape[2] * itemsize)
    return max(cfg.block_y, rows - rows % cfg.block_y)


def _nvidia(u: torch.Tensor) -> bool:
    """Whether ``u``'s kernels compile for an NVIDIA GPU (CUDA tensors, or ``meta`` ones cross-compiled)."""
    return u.device.type in ("cuda", "meta") and torch.version.hip is None


def launch_plan(u: torch.Tensor, out: torch.Tensor, order: int, spacing: tuple[float, float, float],
                cfg: StencilConfig) -> list[KernelLaunch]:
    """The kernel launches of ``cfg`` on validated tensors (one, or one per subdomain slab)."""
    r = order // 2
    nz, ny, nx = u.shape
    w = _weights(order, spacing, u.dtype, u.device)
    su_z, su_y, _ = u.stride()
    so_z, so_y, _ = out.stride()
    opts = {"num_warps": cfg.num_warps, "num_stages": max(1, cfg.num_stages)}
    if cfg.maxnreg and _nvidia(u):
        opts["maxnreg"] = cfg.maxnreg
    why = halo_ahead_error(cfg.halo_ahead, cfg.kernel)
    if why:
        raise ValueError(why)
    if cfg.kernel in ("zmarch", "zwin", "rows"):
        return [_march_launch(u, out, w, r, cfg, opts)]
    if cfg.kernel == "tma":
        return [_tma_launch(u, out, w, r, cfg)]
    if cfg.kernel == "smem":
        return [_smem_launch(u, out, r, spacing, cfg)]
    if cfg.kernel == "flat":
        return [_flat_launch(u, out, w, r, cfg, opts)]
    if cfg.kernel != "plane":
        raise ValueError(f"unknown kernel {cfg.kernel!r}")
    slabs = [(r, ny - r)]
    if cfg.subdomain_bytes:
        rows = subdomain_rows(cfg, u.shape, r, u.element_size(), u.device)
        slabs = [(y, min(y + rows, ny - r)) for y in range(r, ny - r, rows)]
    plan = []
    for y_lo, y_hi in slabs:
        n_tx = triton_cdiv(nx, cfg.block_x)
        n_ty = triton_cdiv(y_hi - y_lo, cfg.block_y)
        if cfg.grid_order == 0:
            if n_ty > _MAX_GRID_YZ or nz - 2 * r > _MAX_GRID_YZ:
                raise ValueError(f"grid {tuple(u.shape)} exceeds the 3D launch grid of this variant "
                                 f"({_MAX_GRID_YZ} tiles in y or z); use variant='auto'")
            grid = (n_tx, n_ty, nz - 2 * r)
        else:
            grid = (n_tx * n_ty * (nz - 2 * r),)
        args = (u, out, w, nz, ny, nx, su_z, su_y, so_z, so_y, y_lo, y_hi, r, nx - r)
        constexprs = dict(R=r, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, ASCENDING=cfg.ascending,
                          NONTEMPORAL=cfg.nontemporal, GRID_ORDER=cfg.grid_order, GROUP_Y=cfg.group_y)
        plan.append(KernelLaunch(_k.laplacian_plane_kernel, grid, args, constexprs, opts))
    return plan



def _march_launch(u: torch.Tensor, out: torch.Tensor, w: torch.Tensor, r: int, cfg: StencilConfig,
                  opts: dict) -> KernelLaunch:
    """The launch of a z-marching kernel (``zmarch``, ``zwin``, ``rows``): one program per column
    of tiles and chunk of planes."""
    nz, ny, nx = u.shape
    su_z, su_y, _ = u.stride()
    so_z, so_y, _ = out.stride()
    n_tx = triton_cdiv(nx, cfg.block_x)
    if cfg.kernel == "zwin":  # x tiles from the first vector with an interior column (the kernel's X_FIRST)
        x_first = r // (16 // u.element_size()) * (16 // u.element_size())
        n_tx = triton_cdiv(nx - r - x_first, cfg.block_x)
    n_prog = n_tx * triton_cdiv(ny - 2 * r, cfg.block_y) * triton_cdiv(nz - 2 * r, cfg.block_z)
    # What zmarch and zwin share.
    march = dict(R=r, BLOCK_Y=cfg.block_y, BLOCK_X=cfg.block_x, BLOCK_Z=cfg.block_z, NONTEMPORAL=cfg.nontemporal,
                 PREFETCH=max(1, cfg.prefetch), LOOP_UNROLL=max(1, cfg.loop_unroll),
                 # a cache hint (PTX prefetch): NVIDIA only; the interpreter cannot run inline asm
                 L1_PREFETCH=cfg.l1_prefetch if _nvidia(u) else 0, SECTOR=32 // u.element_size(),
                 **dict(zip(("STATIC_SU_Z", "STATIC_SU_Y", "STATIC_SO_Z", "STATIC_SO_Y"),
                            (su_z, su_y, so_z, so_y) if cfg.static_strides else (0, 0, 0, 0))),
                 OFFS64=_plane_offsets_need_64bit(u, out, cfg.block_x))
    if cfg.kernel == "zwin":
        why = zwin_ok(u, out, cfg)
        if why:
            raise ValueError(why)
        vec = 16 // u.element_size()
        args = (u, out, w, nz, ny, nx // vec, su_z // vec, su_y // vec, so_z // vec, so_y // vec)
        return KernelLaunch(_k.laplacian_zwin_kernel, (n_prog,), args, dict(march, VEC=vec, HALO_AHEAD=cfg.halo_ahead),
                            opts)
    vec = min(cfg.vec or 16 // u.element_size(), cfg.block_x)
    # Tell Triton nx and the strides are multiples of vec (see the zmarch kernel's docstring).
    scale = vec if all(v % vec == 0 for v in (nx, su_z, su_y, so_z, so_y)) else 1
    args = (u, out, w, nz, ny, nx // scale, su_z // scale, su_y // scale, so_z // scale, so_y // scale,
            r, ny - r, r, nx - r)
    if cfg.kernel == "zmarch":
        constexprs = dict(march, VEC=vec, SCALE=scale, NUM_STAGES=max(1, cfg.num_stages), GRID_ORDER=cfg.zorder,
                          Z_IN_REGS=cfg.z_in_regs, UNROLL_Z=cfg.unroll_z, PIPELINE_XY=cfg.pipeline_xy)
        return KernelLaunch(_k.laplacian_zmarch_kernel, (n_prog,), args, constexprs, opts)
    constexprs = {"R": r, "BLOCK_Y": cfg.block_y, "BLOCK_X": cfg.block_x, "BLOCK_Z": cfg.block_z, "VEC": vec,
                  "SCALE": scale, "NONTEMPORAL": cfg.nontemporal, "MODE": rows_mode(cfg),
                  "GRID_ORDER": cfg.zorder, "OFFS64": _plane_offsets_need_64bit(u, out, cfg.block_x)}
    return KernelLaunch(_k.laplacian_rows_kernel, (n_prog,), args, constexprs, opts)


def launch_error(u: torch.Tensor, out: torch.Tensor, order: int, cfg: StencilConfig) -> str | None:
    """Why ``cfg`` cannot launch on these tensors, or None: every check ``launch_plan`` makes (``zwin_ok``,
    ``flat_ok``, ``tma_ok``, the 3D grid limits, the kernel name), without launching. ``meta`` tensors
    describe a grid without memory (their data pointers read 0: 16-byte aligned)."""
    try:
        launch_plan(u, out, order, (1.0, 1.0, 1.0), cfg)
    except ValueError as exc:
        return str(exc)
    return None


def halo_ahead_error(halo_ahead: object, kernel: str) -> str | None:
    """Why ``halo_ahead`` (a knob of the register-window march, stencil and wave step) is not valid for
    ``kernel``, or None: 0, 1 or 2, and anything but 0 only with ``kernel="zwin"``."""
    if isinstance(halo_ahead, bool) or halo_ahead not in (0, 1, 2):
        return f"halo_ahead must be 0, 1 or 2, got {halo_ahead!r}"
    if halo_ahead and kernel != "zwin":
        return f"halo_ahead is an option of the zwin kernel, got kernel {kernel!r}"
    return None


def zwin_ok(u: torch.Tensor, out: torch.Tensor, cfg: StencilConfig) -> str | None:
    """Why the register-window march without load masks (``kernel="zwin"``) cannot take this call,
    or None: it needs 16-byte aligned rows, strides and pointers (every tile access is 128-bit and
    unmasked) and at least ``block_x`` points per row (its last x tile is shifted left to end at nx)."""
    if not vector_aligned(u, out):
        return "the zwin kernel needs nx, the strides and the pointers to be multiples of 16 bytes"
    if u.shape[2] < cfg.block_x:
        return f"the zwin kernel needs nx >= block_x ({cfg.block_x}), got nx = {u.shape[2]}"
    if cfg.block_x * u.element_size() % 16:
        return "the zwin kernel needs block_x to be a whole number of 16-byte vectors"
    return None


def flat_ok(u: torch.Tensor, out: torch.Tensor) -> str | None:
    """Why the flat kernel (``kernel="flat"``) cannot take this call, or None: u and out must be
    contiguous (the flat index is z * ny * nx + y * nx + x in both) with 16-byte aligned base
    pointers (its tiles start on 16-byte boundaries), and ny, nx below 2**21."""
    nz, ny, nx = u.shape
    dense = (ny * nx, nx, 1)
    if u.stride() != dense or out.stride() != dense:
        return "the flat kernel needs contiguous u and out"
    if has_storage(u) and has_storage(out) and (u.data_ptr() % 16 or out.data_ptr() % 16):
        return "the flat kernel needs 16-byte aligned data pointers"
    if max(ny, nx) >= 2**21 or nz >= 2**31:
        return "the flat kernel takes ny and nx below 2**21 (float32 row and plane quotients)"
    return None


def _flat_launch(u: torch.Tensor, out: torch.Tensor, w: torch.Tensor, r: int, cfg: StencilConfig,
                 opts: dict) -> KernelLaunch:
    """The flat kernel's launch: tiles of ``block_x`` points from the 16-byte boundary at or below the
    first interior point to the last interior point."""
    why = flat_ok(u, out)
    if why:
        raise ValueError(why)
    nz, ny, nx = u.shape
    vec = 16 // u.element_size()
    if cfg.block_x % vec or cfg.block_x > 4096:
        raise ValueError(f"the flat kernel needs block_x to be a multiple of {vec} (16 bytes), at most 4096")
    plane = ny * nx
    first = r * plane + r * nx + r
    last = (nz - 1 - r) * plane + (ny - 1 - r) * nx + (nx - 1 - r)
    g_lo = first - first % vec
    n_prog = triton_cdiv(last + 1 - g_lo, cfg.block_x)
    args = (u, out, w, nz, ny, nx, nx // vec, plane // vec, u.numel() // vec, g_lo // vec)
    constexprs = dict(R=r, BLOCK=cfg.block_x, VEC=vec, PHASE_Y=nx % vec, PHASE_Z=plane % vec,
                      NONTEMPORAL=cfg.nontemporal)
    return KernelLaunch(_k.laplacian_flat_kernel, (n_prog,), args, constexprs, opts)


def tma_ok(u: torch.Tensor, out: torch.Tensor, order: int, cfg: StencilConfig) -> str | None:
    """Why the sm90 Gluon kernel (``kernels.stencil_gluon``) cannot take this call, or None.

    It needs a CUDA (or ``meta``) tensor on an sm90+ NVIDIA GPU, rows and strides of a multiple of 16
    bytes (TMA and its 128-bit stores), a z stride that is a whole number of rows (u is read as one
    2D tensor of rows), R no more than two vectors (its lane shuffles), a strip taller than its 2R
    halo rows, and offsets inside a plane that fit int32."""
    r = order // 2
    vec = 16 // u.element_size()
    why = nvidia_arch_error(u, "TMA kernel", 9)
    if why:
        return why
    if not (all(v % vec == 0 for v in (u.shape[2], *u.stride()[:2], *out.stride()[:2]))
            and (u.device.type == "meta" or (u.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0))):
        return "the TMA kernel needs 16-byte aligned rows and strides"
    if u.stride(0) % u.stride(1):
        return "the TMA kernel needs a z stride that is a multiple of the y stride"
    if r > 2 * vec or cfg.block_y <= 2 * r:
        return f"the TMA kernel takes R <= {2 * vec} and strips taller than 2R rows"
    if _plane_offsets_need_64bit(u, out, 32 * vec) or u.stride(0) * u.shape[0] >= 2**31 * u.stride(1):
        return "the TMA kernel keeps plane offsets and row indices in int32"
    return None


def _tma_launch(u: torch.Tensor, out: torch.Tensor, w: torch.Tensor, r: int, cfg: StencilConfig) -> KernelLaunch:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from tilecraft.kernels import stencil_gluon as _g

    why = tma_ok(u, out, 2 * r, cfg)
    if why:
        raise ValueError(why)
    nz, ny, nx = u.shape
    vec = 16 // u.element_size()
    bx = 32 * vec
    hv = vec * triton_cdiv(r, vec)
    rows_per_plane = u.stride(0) // u.stride(1)
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8 * u.element_size(), rank=3)
    # rows past the last plane's ny (padding of a view) are out of bounds: TMA fills them with zeros
    n_rows = (nz - 1) * rows_per_plane + ny
    desc = TensorDescriptor(u, [1, n_rows, nx], [n_rows * u.stride(1), u.stride(1), 1], [1, cfg.block_y, bx], layout)
    strip = cfg.block_y - 2 * r
    n_prog = (triton_cdiv(nx, bx - 2 * hv) * triton_cdiv(ny - 2 * r, cfg.num_warps * strip)
              * triton_cdiv(nz - 2 * r, cfg.block_z))
    so_z, so_y, _ = out.stride()
    args = (desc, out, w, nz, ny, nx // vec, rows_per_plane, so_z // vec, so_y // vec, r, ny - r, r, nx - r)
    constexprs = dict(R=r, NW=cfg.num_warps, ROWS=cfg.block_y, VEC=vec, BZ=cfg.block_z, D=max(1, cfg.prefetch),
                      NONTEMPORAL=cfg.nontemporal)
    return KernelLaunch(_g.laplacian_tma_kernel, (n_prog,), args, constexprs, {"num_warps": cfg.num_warps})


def nvidia_arch_error(u: torch.Tensor, what: str, major: int, feature: str = "") -> str | None:
    """Why a Gluon / inline-PTX kernel (``what``) cannot run on u's device, or None: it needs a CUDA (or
    ``meta``, cross-compiled) tensor on an NVIDIA GPU of compute capability ``major`` or newer."""
    if u.device.type not in ("cuda", "meta") or torch.version.hip:
        return f"the {what} runs on NVIDIA GPUs only"
    if u.device.type == "cuda" and torch.cuda.get_device_capability(u.device)[0] < major:
        return f"the {what} needs sm{major}0 or newer{feature}"
    return None


#: The largest R the ring's Laplacian kernels take (their weights are kernel parameters, SMEM_MAX_R per axis); the
#: wave step's ring takes 4.
SMEM_MAX_R = 8


def smem_ok(u: torch.Tensor, out: torch.Tensor, order: int, cfg: StencilConfig, wave: bool = False) -> str | None:
    """Why the cp.async-ring march (``kernel="smem"``, ``kernels.stencil_smem``) cannot take this call, or
    None. It needs a CUDA (or ``meta``) tensor on an sm90+ NVIDIA GPU (sm80+ for the CTA-barrier ring,
    ``num_stages=0``: ``mbarrier.try_wait`` is sm90); rows, strides and pointers of whole
    16-byte vectors, or (not the wave step) of 8-byte vectors with ``vec`` an 8-byte vector (2 in fp32, 1 in fp64; 8-byte
    copies), or in fp32 of single elements with ``vec=1`` (4-byte copies); R at most ``SMEM_MAX_R`` = 8 (its weights are 25 kernel parameters: orders 2 to 16; the wave
    step's ring 4, orders 2 to 8; the x halo is
    ceil(R / VEC) whole vectors a side, and where R is not a whole number of vectors the edge vectors are
    stored component by component); a tile of one vector per
    thread (block_x / VEC a power of two up to 32 and block_y = num_warps * 32 / (block_x / VEC); in fp32
    ``vec=2`` (fp64: 1): an 8-byte vector a thread, block_y = num_warps * 32 / (block_x / vec)); a ring
    that fits the shared memory (``wave``: the wave step's ring, whose slots also hold the tile's p_prev and
    m); offsets inside a plane in int32."""
    r = order // 2
    vec = 16 // u.element_size()
    # cp.async is sm80+; the mbarrier ring's ``mbarrier.try_wait`` sm90+ (the CTA-barrier ring runs on sm80)
    why = (nvidia_arch_error(u, "smem kernel", 9, " with mbarriers (num_stages > 0; num_stages=0 runs on sm80)")
           if cfg.num_stages > 0 else nvidia_arch_error(u, "smem kernel", 8, " (cp.async)"))
    if why:
        return why
    if not vector_aligned(u, out):
        copy = _narrow_copy_bytes(u, out)
        if wave or not copy:
            return ("the smem kernel needs nx, the strides and the pointers to be multiples of 16 bytes"
                    + ("" if wave else " (or 8, or in fp32 4: narrower copies)"))
        if cfg.vec * u.element_size() != copy:
            return (f"on these rows (whole {copy}-byte vectors, not 16-byte ones) the smem kernel's copies are {copy} "
                    f"bytes and a thread computes one such vector: vec={copy // u.element_size()}, got vec {cfg.vec}")
        vec = copy // u.element_size()  # the copies' vector: 8 or 4 bytes
    if not 1 <= r <= (4 if wave else SMEM_MAX_R):
        return (f"the smem kernel takes orders 2 to {8 if wave else 2 * SMEM_MAX_R} (R = 1..{4 if wave else SMEM_MAX_R}, "
                f"its weights are kernel parameters{'; the wave step: 4 a side' if wave else ''}); got order {order}")
    bxv = cfg.block_x // vec
    if cfg.block_x % vec or bxv & (bxv - 1) or not 1 <= bxv <= 32:
        return f"the smem kernel needs block_x / {vec} to be a power of two up to 32, got block_x {cfg.block_x}"
    cv = cfg.vec or vec
    if cv not in (vec, vec // 2):
        return (f"the smem kernel computes 16-byte vectors ({vec} elements) or 8-byte ones ({vec // 2}) a thread; "
                f"got vec {cfg.vec}")
    if cfg.num_warps * 32 > 1024:
        return f"the smem kernel's program is one CTA of at most 32 warps, got num_warps {cfg.num_warps}"
    if cfg.block_x // cv > 32:
        return f"the smem kernel takes at most 32 threads a tile row: block_x / {cv} = {cfg.block_x // cv}"
    if cfg.block_y != cfg.num_warps * 32 // (cfg.block_x // cv):
        return (f"the smem kernel takes one vector of {cv} elements per thread: block_y must be num_warps * 32 / "
                f"(block_x / {cv}) = {cfg.num_warps * 32 // (cfg.block_x // cv)}, got {cfg.block_y}")
    pb = cfg.planes_per_barrier
    if isinstance(pb, bool) or not isinstance(pb, int):
        return f"planes_per_barrier must be an int, got {type(pb).__name__}"
    if pb != 1 and (wave or cfg.num_stages > 0 or not 1 <= pb <= max(1, cfg.prefetch)
                    or smem_slots(cfg) % pb):
        return (f"planes_per_barrier {pb}: the CTA-barrier ring of the stencil (num_stages 0) only, at most prefetch "
                f"({cfg.prefetch}) planes, and prefetch + planes_per_barrier slots a multiple of it")
    if smem_ring_elements(cfg, r, u.element_size(), wave) * u.element_size() > 227 * 1024:
        return (f"the smem kernel's ring of {smem_slots(cfg)} planes (prefetch + planes_per_barrier + slack slots) "
                "does not fit 227 KB of shared memory")
    if cfg.block_z < 1:
        return "the smem kernel needs block_z >= 1"
    if _plane_offsets_need_64bit(u, out, cfg.block_x):
        return "the smem kernel keeps offsets inside a plane in int32"
    return None


def smem_slots(cfg: StencilConfig) -> int:
    """Slots of the smem kernel's ring: prefetch + 1, plus ``num_stages`` with mbarriers (``num_stages`` > 0:
    warps then wait for their plane's copies and for a slot to be free, not for each other at every plane,
    and may drift that many planes apart); ``num_stages`` 0: one CTA barrier per plane, or per
    ``planes_per_barrier`` planes (prefetch + planes_per_barrier slots)."""
    return max(1, cfg.prefetch) + max(1, cfg.planes_per_barrier) + max(0, cfg.num_stages)


def smem_ring_elements(cfg: StencilConfig, r: int, itemsize: int, wave: bool = False) -> int:
    """Elements of the smem kernel's shared memory: its slots of (block_y + 2R) rows of block_x + 2 ceil(R / VEC)
    VEC points (whole halo vectors), with ``wave`` (the wave step) also the tile's p_prev and m, then two 8-byte
    mbarriers per slot; rounded up to a power of two (Gluon's allocations)."""
    slots = smem_slots(cfg)
    vec = 16 // itemsize
    halo = -(-r // vec) * vec
    window = (cfg.block_y + 2 * r) * (cfg.block_x + 2 * halo) + (2 * cfg.block_y * cfg.block_x if wave else 0)
    need = slots * window + -(-16 * slots // itemsize)
    return 1 << (need - 1).bit_length()


def _smem_launch(u: torch.Tensor, out: torch.Tensor, r: int, spacing: tuple[float, float, float],
                 cfg: StencilConfig) -> KernelLaunch:
    from tilecraft.kernels import stencil_smem as _s

    why = smem_ok(u, out, 2 * r, cfg)
    if why:
        raise ValueError(why)
    nz, ny, nx = u.shape
    # the copies' vector: 16 bytes, or 8 on rows of whole 8-byte vectors only (``half_aligned``), or 4 on other fp32
    # rows (``smem_ok``)
    vec = (16 if vector_aligned(u, out) else _narrow_copy_bytes(u, out)) // u.element_size()
    # x tiles from the vector holding x = R to the one holding nx - R - 1 (the kernel's x range)
    n_tx = triton_cdiv(triton_cdiv(nx - r, vec) * vec - r // vec * vec, cfg.block_x)
    n_prog = n_tx * triton_cdiv(ny - 2 * r, cfg.block_y) * triton_cdiv(nz - 2 * r, cfg.block_z)
    su_z, su_y, _ = u.stride()
    so_z, so_y, _ = out.stride()
    # the weights as kernel parameters (fp32 ones rounded by the launch as ``_weights`` rounds its tensor)
    wts = stencil_weights(2 * r, spacing)
    axes = [wts[1 + a * r:1 + (a + 1) * r] + [0.0] * (SMEM_MAX_R - r) for a in range(3)]
    args = (u, out, wts[0], *axes[0], *axes[1], *axes[2], nz, ny, nx // vec, su_z // vec, su_y // vec, so_z // vec,
            so_y // vec)
    constexprs = dict(R=r, BY=cfg.block_y, BXV=cfg.block_x // vec, BZ=cfg.block_z, VEC=vec, D=max(1, cfg.prefetch),
                      NW=cfg.num_warps, RING=smem_ring_elements(cfg, r, u.element_size()), S=smem_slots(cfg),
                      MBAR=cfg.num_stages > 0, PF=cfg.l1_prefetch if cfg.l1_prefetch > max(1, cfg.prefetch) else 0,
                      CV=cfg.vec if cfg.vec != vec else 0, PB=cfg.planes_per_barrier)
    opts = {"num_warps": cfg.num_warps}
    if cfg.maxnreg:
        opts["maxnreg"] = cfg.maxnreg
    kernel = _s.laplacian_smem_kernel if u.dtype == torch.float32 else _s.laplacian_smem_kernel_f64
    return KernelLaunch(kernel, (n_prog,), args, constexprs, opts)


def rows_mode(cfg: StencilConfig) -> int:
    """The row kernel's MODE: 0 unrolled short march, 1 register window in a loop, 2 z through L1."""
    if cfg.unroll_z:
        return 0
    return 1 if cfg.z_in_regs else 2


def launch(u: torch.Tensor, out: torch.Tensor, order: int, spacing: tuple[float, float, float],
           cfg: StencilConfig) -> list:
    """Launch the kernels of ``cfg`` on validated tensors; returns what each launch returned
    (Triton's compiled kernels on a GPU: registers and spills can be read from them)."""
    return [k.run() for k in launch_plan(u, out, order, spacing, cfg)]


_TRITON_TYPES = {torch.float32: "fp32", torch.float64: "fp64"}


def compile_signature(k: KernelLaunch) -> dict[str, str]:
    """Triton types of a launch's runtime arguments, with the hints a launch specialises on
    (16-byte aligned pointers, integers that are multiples of 16 or equal to 1); floats as the parameter's
    annotation says (``"fp64"``), else fp32."""
    names = runtime_arg_names(k)
    typed = {p.name: p.annotation_type for p in getattr(k.kernel, "params", ()) if p.annotation_type}
    sig = {}
    for name, value in zip(names, k.args):
        if isinstance(value, torch.Tensor):
            sig[name] = f"*{_TRITON_TYPES[value.dtype]}" + (":16" if value.data_ptr() % 16 == 0 else "")
        elif isinstance(value, float):  # a launch passes floats as fp32 unless the parameter is annotated
            sig[name] = typed.get(name, "fp32")
        else:
            ty = "i64" if abs(value) >= 2**31 else "i32"
            sig[name] = ty + (":16" if value % 16 == 0 else ":1" if value == 1 else "")
    return sig


def vector_aligned(u: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether rows of u and out start on 16-byte boundaries (nx, strides and base pointers)."""
    vec = 16 // u.element_size()
    return (all(v % vec == 0 for v in (u.shape[2], *u.stride()[:2], *out.stride()[:2]))
            and u.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0)


def _narrow_copy_bytes(u: torch.Tensor, out: torch.Tensor) -> int:
    """The ring's copy on rows that are not whole 16-byte vectors: 8 bytes (``half_aligned``), 4 for other fp32 rows
    whose pointers are 4-byte aligned, else 0."""
    if half_aligned(u, out):
        return 8
    if u.dtype == torch.float32 and u.data_ptr() % 4 == 0 and out.data_ptr() % 4 == 0:
        return 4
    return 0


def half_aligned(u: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether rows of u and out start on 8-byte boundaries but not all on 16-byte ones: fp32 grids whose nx (or a
    stride) is 2 mod 4, such as 512 + 2R for odd R, and fp64 grids of odd nx. The cp.async ring takes them with
    8-byte copies (``smem_ok``)."""
    vec = 8 // u.element_size()
    return (not vector_aligned(u, out)
            and all(v % vec == 0 for v in (u.shape[2], *u.stride()[:2], *out.stride()[:2]))
            and u.data_ptr() % 8 == 0 and out.data_ptr() % 8 == 0)


def _plane_offsets_need_64bit(u: torch.Tensor, out: torch.Tensor, block_x: int) -> bool:
    """Whether an offset inside one plane (y * stride_y + x, plus a tile's overhang) can pass int32."""
    ny, nx = u.shape[1:]
    reach = max(u.stride(1), out.stride(1)) * (ny + 1) + nx + 2 * block_x
    return reach >= 2**31


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def laplacian(u: torch.Tensor, *, order: int = 2, spacing: float | tuple[float, float, float] = 1.0,
              out: torch.Tensor | None = None, variant: str = "auto") -> torch.Tensor:
    """3D finite-difference Laplacian of ``u`` (nz, ny, nx), x contiguous, float32 or float64.

    Central second differences of accuracy ``order`` (even, 2..16; radius R = order/2) along each
    axis, scaled by 1/h**2 with ``spacing`` = h or (hz, hy, hx). Only interior points (R or more
    from every face) are computed. The R-wide boundary of the result holds zeros when tilecraft
    allocates it, and is left untouched when you pass ``out``. Every extent must be >= 2R+1.

    Differentiable in ``u`` (without ``out``): the gradient is the adjoint, the Laplacian of the incoming
    gradient's interior zero-extended by R (one more launch of the same kernels on a grid 2R larger per
    axis); twice differentiable too.

    ``variant`` selects a step of the seeds' optimisation ladder (``tilecraft.ops.stencil.VARIANTS``);
    ``"auto"`` is the fastest, ``"reference"`` the torch slicing implementation. On a GPU, ``"auto"``
    times a few candidate launches on the first call for a kind of grid and caches the fastest
    (:func:`choose_config`; ``TILECRAFT_TUNE=0``: the heuristic and cached entries only; before
    CUDA-graph capture call :func:`warmup`).

    Devices: CUDA (and ROCm) tensors run the Triton kernels. CPU tensors run the Triton kernels
    through Triton's interpreter when ``TRITON_INTERPRET=1`` was set before tilecraft was imported
    (that is how the kernels are tested without a GPU); otherwise ``"auto"`` and ``"reference"``
    run the torch implementation in u's dtype, and asking for a ladder variant is an error.

    Example::

        >>> u = torch.rand(64, 64, 64, dtype=torch.float64, device="cuda")
        >>> lap = tilecraft.laplacian(u, order=8, spacing=(0.01, 0.01, 0.02))
    """
    order, spacing = _validated(u, order, spacing, out, variant)
    if variant not in ("auto", "reference") and u.device.type == "cpu" and not triton_on_cpu():
        raise ValueError(
            f"variant {variant!r} runs a Triton kernel, which needs a GPU tensor or the Triton "
            "interpreter (set TRITON_INTERPRET=1 before importing tilecraft); on CPU use "
            "variant='auto' or 'reference' (the torch implementation)")
    if out is not None and (u.requires_grad or out.requires_grad) and torch.is_grad_enabled():
        # out's own gradient history would pass through untouched: silently wrong gradients
        raise RuntimeError("laplacian(out=...) does not support automatic differentiation (u or out requires grad): "
                           "call it without out, or under torch.no_grad()")
    refuse_forward_ad("laplacian", u, out)
    if u.device.type == "meta":  # as matmul, attention and wave_step: the result's shape and type
        return out if out is not None else torch.zeros_like(u, memory_format=torch.contiguous_format)
    if eager_direct(u, out):  # the registered ops' bodies, without their dispatch (host time)
        return _compute(u, order, spacing, out, variant)
    if out is None:
        return torch.ops.tilecraft.laplacian(u, order, list(spacing), variant)
    torch.ops.tilecraft.laplacian_out(u, order, list(spacing), variant, out)
    return out


def _compute(u: torch.Tensor, order: int, spacing: tuple[float, float, float], out: torch.Tensor | None,
             variant: str) -> torch.Tensor:
    """The body of the registered ops, on validated arguments."""
    if variant == "reference" or (u.device.type == "cpu" and not triton_on_cpu()):
        return laplacian_torch(u, order, spacing, out)
    if out is None:
        out = torch.zeros_like(u, memory_format=torch.contiguous_format)
    replay = replay_enabled()
    if replay:
        key = (signature(u), signature(out), order, spacing, variant, environ_key(_PLAN_ENV))
        if _REPLAYS.run(key, (u, out)):
            return out
    with _REPLAYS.record(key, (u, out)) if replay else contextlib.nullcontext():
        if u.device.type == "cuda":
            with torch.cuda.device(u.device):
                launch(u, out, order, spacing, _config(variant, u, out, order, spacing))
        else:
            launch(u, out, order, spacing, _config(variant, u, out, order, spacing))
    return out


#: The launches of earlier eager calls per call key (``ops.launch.ReplayCache``): a call on grids with the
#: layouts, dtype and alignment of an earlier one's (same order, spacing, variant and tuning switch) runs
#: that call's kernels again without planning (``TILECRAFT_REPLAY=0``: off).
_REPLAYS = ReplayCache()
#: The settings the choice reads (tuning on or off, the tuning cache's place), raw, in every replay key
_PLAN_ENV = environ_names("TILECRAFT_TUNE", "TILECRAFT_CACHE")


def _config(variant: str, u: torch.Tensor, out: torch.Tensor, order: int,
            spacing: tuple[float, float, float]) -> StencilConfig:
    if variant == "auto":
        return choose_config(u, out, order, spacing).config
    return ladder_config(variant, u.dtype, order)


# ----------------------------------------------------------------------------------------------
# auto: the cached or tuned choice
# ----------------------------------------------------------------------------------------------
#: Relative error ||candidate - heuristic|| / ||heuristic|| (interior, random data) a tuning candidate may have.
TUNE_TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}
#: The op name of the stencil's tuning cache files (``tilecraft.tuning.cache``).
CACHE_OP = "stencil"
#: Another candidate replaces the heuristic only when it is faster by more than this fraction. On an
#: H100 (fp64 order 2, 512^3) the heuristic and the ladder's ``tiling`` timed 0.7604/0.7620 ms in one
#: run and 0.7636/0.7625 ms in the next: without a margin, such ties would flip the cached choice by noise.
TUNE_MARGIN = 0.01


@dataclass(frozen=True)
class Choice:
    """The configuration ``auto`` runs on a grid, and where it came from."""

    config: StencilConfig
    source: str  # "tuned" (timed by this process), "cache" (an entry on disk) or "heuristic" (auto_config)
    key: str | None = None  # the cache key; None where tuning does not apply (CPU, the interpreter)
    entry: dict | None = None  # the cache entry ("tuned", "cache"): the winner's and every candidate's time


_CHOSEN: dict[tuple, Choice] = {}


def _tunes_on(u: torch.Tensor) -> bool:
    """Whether ``auto`` tunes on u's device: a GPU tensor and compiled (not interpreted) kernels."""
    return u.device.type == "cuda" and not triton_on_cpu()


def _capturing(u: torch.Tensor) -> bool:
    return u.device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _sync(u: torch.Tensor) -> None:
    if u.device.type == "cuda":
        torch.cuda.synchronize(u.device)


def clear_choices() -> None:
    """Forget the choices made in this process (tests; a cache file changed), and the launches recorded
    with them (``ops.launch.clear_replays``)."""
    _CHOSEN.clear()
    clear_replays()


def choose_config(u: torch.Tensor, out: torch.Tensor, order: int,
                  spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> Choice:
    """The configuration ``variant="auto"`` runs on these (validated) tensors.

    On a GPU (compiled kernels, not the interpreter): the cached entry for the grid's
    ``tilecraft.tuning.stencil.shape_key`` if there is one (and it can launch on these tensors); else,
    with tuning on (``TILECRAFT_TUNE`` not 0), the fastest of ``tilecraft.tuning.stencil.candidates``
    timed now (:func:`_tune`; the heuristic unless another is faster by more than ``TUNE_MARGIN``),
    which is cached; else ``auto_config``. On the CPU: ``auto_config``.
    Remembered per grid layout for the rest of the process. Tuning during CUDA-graph capture raises
    (call :func:`warmup` first)."""
    aligned, flat, half = vector_aligned(u, out), flat_ok(u, out) is None, half_aligned(u, out)
    l2 = _l2_bytes(u.device)
    enabled = _cache.tuning_enabled()
    memo = (u.dtype, order, tuple(u.shape), u.stride(), out.stride(), aligned, flat, half, str(u.device), enabled)
    choice = _CHOSEN.get(memo)
    if choice is not None:
        return choice
    shape = tuple(u.shape)
    smem = smem_device(u)
    heuristic = auto_config(u.dtype, order, shape, l2, aligned, flat, smem, half)
    if heuristic.kernel == "smem" and smem_ok(u, out, order, heuristic) is not None:
        heuristic = auto_config(u.dtype, order, shape, l2, aligned, flat)
    if not _tunes_on(u):
        choice = Choice(heuristic, "heuristic")
    else:
        from tilecraft.tuning import stencil as tuning

        facts = device_facts(u.device)
        key = tuning.shape_key(u.dtype, order, shape, aligned, flat, facts.arch, heuristic, half)
        path = _cache.cache_file(CACHE_OP, facts.name, facts.versions)
        choice = _cached(_cache.load(path).get(key), u, out, order, key, heuristic)
        if choice is None:
            cands = tuning.candidates(u.dtype, order, shape, l2, aligned, flat, smem, half) if enabled else []
            # the heuristic first (the reference the others are checked against: above, it left a ring these tensors
            # refuse for its fallback), and only what launches on these tensors (the candidates were checked on
            # model tensors of the grid's facts, which share all but, e.g., the int32 plane offsets)
            others = [c for c in cands if c != heuristic]
            if others and _capturing(u):  # before launch_error: a plan may make tensors (no copies in a capture)
                raise RuntimeError(
                    f"tilecraft.laplacian would tune the stencil for {key} during CUDA-graph capture; "
                    "call tilecraft.ops.stencil.warmup(u, order=..., spacing=..., out=None) with the same "
                    "grid (and out) before capturing, or set TILECRAFT_TUNE=0")
            cands = [heuristic] + [c for c in others if launch_error(u, out, order, c) is None]
            if len(cands) < 2:  # tuning off, or nothing to choose from
                choice = Choice(heuristic, "heuristic", key)
            else:
                entry = _tune(u, out, order, spacing, key, cands)
                if entry is None:
                    choice = Choice(heuristic, "heuristic", key)
                else:
                    _cache.store(path, key, entry)
                    choice = Choice(StencilConfig.from_dict(entry["config"]), "tuned", key, entry)
    _CHOSEN[memo] = choice
    return choice


def _cached(entry: dict | None, u: torch.Tensor, out: torch.Tensor, order: int, key: str,
            heuristic: StencilConfig) -> Choice | None:
    """The choice a cache entry gives, or None (no entry, or one unreadable). A bucket holds grids of
    other sizes: an entry whose config cannot launch on this one gives the heuristic."""
    if entry is None:
        return None
    try:
        cfg = StencilConfig.from_dict(entry["config"])
    except (KeyError, TypeError):
        return None
    why = launch_error(u, out, order, cfg)
    if why:
        say(f"cached stencil config for {key} cannot run on {tuple(u.shape)} ({why}); running the heuristic")
        return Choice(heuristic, "heuristic", key)
    return Choice(cfg, "cache", key, entry)


def _twin(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor with t's shape, strides and data-pointer alignment (mod 128 bytes)."""
    size = t.element_size()
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    base = torch.empty(span + 128 // size, dtype=t.dtype, device=t.device)
    offset = ((t.data_ptr() - base.data_ptr()) % 128) // size
    return base.as_strided(t.shape, t.stride(), offset)


def _disagreement(got: torch.Tensor, ref: torch.Tensor, r: int, tol: float) -> str | None:
    """Why ``got`` (a NaN-poisoned output) is not ``ref`` (the heuristic's), or None."""
    if not torch.equal(torch.isnan(got), torch.isnan(ref)):
        return "unwritten interior points or a written boundary"
    inner = (slice(r, -r),) * 3
    err = (torch.linalg.vector_norm(got[inner] - ref[inner]) / torch.linalg.vector_norm(ref[inner])).item()
    return None if err <= tol else f"relative error {err:.1e} against the heuristic's result (> {tol:.0e})"


def _tune(u: torch.Tensor, out: torch.Tensor, order: int, spacing: tuple[float, float, float], key: str,
          cands: list[StencilConfig]) -> dict | None:
    """Time ``cands`` (the heuristic first) on a grid with u's shape, strides and alignment, random values,
    into scratch outputs laid out as ``out`` (never ``out`` itself); returns the cache entry of the
    fastest, or None when the scratch grids do not fit in memory.

    Each candidate runs once into a NaN-poisoned output first; one that fails to compile or launch, or
    whose result differs from the heuristic's (unwritten points, a written boundary, a relative error
    above ``TUNE_TOLERANCE``), is skipped and reported on stderr. Times come from CUDA-graph replays
    (``graph_time_ms``), cycling through input copies while the grid is under twice the L2, so every
    timed call reads its input from memory as a real call does."""
    from tilecraft.bench.harness import rotation_sets

    n = len(cands)
    say(f"tuning stencil {key}: {n} configs (cached afterwards; TILECRAFT_TUNE=0 skips)")
    gen = torch.Generator(device=u.device).manual_seed(20261127)
    l2 = _l2_bytes(u.device)
    grid_bytes = u.numel() * u.element_size()
    n_sets = rotation_sets(2 * grid_bytes, l2, minimum=1, maximum=8) if grid_bytes < 2 * l2 else 1
    r = order // 2
    rows: list[dict] = []
    try:
        sets = [(_twin(u).uniform_(-1, 1, generator=gen), _twin(out)) for _ in range(n_sets)]
        u0, out0 = sets[0]
        ref = None
        for i, cfg in enumerate(cands, 1):
            label = f"tuning {i}/{n} {cfg.short()}"
            try:
                out0.fill_(float("nan"))
                launch(u0, out0, order, spacing, cfg)
                _sync(u)
                why = None if ref is None else _disagreement(out0, ref, r, TUNE_TOLERANCE[u.dtype])
                if ref is None:
                    ref = out0.clone()  # the heuristic's result: what every other candidate must give
                if why is None:
                    ms = graph_time_ms([lambda s=s, c=cfg: launch(s[0], s[1], order, spacing, c) for s in sets],
                                       u.device)
            except torch.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - a candidate that does not compile or launch is skipped
                if i == 1:
                    raise  # the heuristic itself: fail as an untuned call would
                lines = str(exc).strip().splitlines() or [""]
                why = f"{type(exc).__name__}: {lines[0][:160]}"
            if why is not None:
                say(f"{label}: skipped ({why})")
                rows.append({"config": cfg.as_dict(), "ms": None, "skipped": why})
                continue
            say(f"{label}: {ms:.4g} ms")
            rows.append({"config": cfg.as_dict(), "ms": ms})
    except torch.OutOfMemoryError:
        say(f"tuning stencil {key}: out of memory for the scratch grids; running the heuristic (not cached)")
        return None
    best = min((row for row in rows if row["ms"] is not None), key=lambda row: row["ms"])  # ties: the earlier
    note = ""
    if best["ms"] > (1 - TUNE_MARGIN) * rows[0]["ms"] and best is not rows[0]:
        best, note = rows[0], f"; kept: no candidate faster by more than {TUNE_MARGIN:.0%}"
    say(f"tuned stencil {key}: {StencilConfig.from_dict(best['config']).short()} ({best['ms']:.4g} ms; "
        f"heuristic {rows[0]['ms']:.4g} ms{note})")
    return {"config": best["config"], "ms": best["ms"], "heuristic": rows[0]["config"],
            "heuristic_ms": rows[0]["ms"], "candidates": rows, "shape": list(u.shape),
            "date": time.strftime("%Y-%m-%d")}


def warmup(u: torch.Tensor, *, order: int = 2, spacing: float | tuple[float, float, float] = 1.0,
           out: torch.Tensor | None = None) -> StencilConfig:
    """Choose (tuning if need be) and compile the kernel ``laplacian(u, order=order, spacing=spacing,
    out=out)`` runs, so that a later call with a grid laid out the same way, e.g. inside CUDA-graph
    capture, neither tunes nor compiles. Runs the call once (into ``out`` when given). Returns the
    configuration."""
    res = laplacian(u, order=order, spacing=spacing, out=out)
    _sync(u)
    return choose_config(u, res, order).config  # made by the call above: remembered


# Registered with torch.library, so the op traces under torch.compile (a fake implementation gives
# the output's metadata without running a kernel) and shows up by name in profiles. ``laplacian``
# validates before it calls them; the ops re-validate for callers that use torch.ops directly.
@torch.library.custom_op("tilecraft::laplacian", mutates_args=())
def _laplacian_op(u: torch.Tensor, order: int, spacing: list[float], variant: str) -> torch.Tensor:
    order, spacing_t = validate(u, order, tuple(spacing), None, variant)
    return _compute(u, order, spacing_t, None, variant)


@_laplacian_op.register_fake
def _laplacian_fake(u: torch.Tensor, order: int, spacing: list[float], variant: str) -> torch.Tensor:
    return torch.empty_like(u, memory_format=torch.contiguous_format)


def _laplacian_setup_context(ctx, inputs, output):
    _u, order, spacing, variant = inputs
    ctx.args = (order, tuple(spacing))


def _laplacian_backward(ctx, grad):
    """The gradient of the interior-only Laplacian: its adjoint, which (the coefficients being symmetric)
    is the Laplacian of the gradient's interior zero-extended by R on every side, taken over the whole
    grid (the padded grid's interior). Computed by ``laplacian`` itself, so it is differentiable again."""
    order, spacing = ctx.args
    r = order // 2
    padded = torch.nn.functional.pad(grad[r:-r, r:-r, r:-r], (2 * r,) * 6)
    return laplacian(padded, order=order, spacing=spacing)[r:-r, r:-r, r:-r], None, None, None


torch.library.register_autograd("tilecraft::laplacian", _laplacian_backward, setup_context=_laplacian_setup_context)


@torch.library.custom_op("tilecraft::laplacian_out", mutates_args=("out",))
def _laplacian_out_op(u: torch.Tensor, order: int, spacing: list[float], variant: str, out: torch.Tensor) -> None:
    order, spacing_t = validate(u, order, tuple(spacing), out, variant)
    _compute(u, order, spacing_t, out, variant)


@_laplacian_out_op.register_fake
def _laplacian_out_fake(u: torch.Tensor, order: int, spacing: list[float], variant: str, out: torch.Tensor) -> None:
    return None


__all__ = ["laplacian", "StencilConfig", "LADDER", "VARIANTS", "ladder_config", "auto_config", "choose_config",
           "Choice", "launch", "validate", "warmup", "second_derivative_coefficients"]
