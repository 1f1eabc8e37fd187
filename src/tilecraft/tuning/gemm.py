"""GEMM configurations: the knobs, the heuristics, the config spaces and the tuning loop.

Every technique of the seeds is a visible field of :class:`GemmConfig`:

=================== ==================================================================================
field               technique
=================== ==================================================================================
kernel              ``"tma"``: persistent grid + TMA descriptors + wgmma (sm90); ``"pointer"``: one
                    program per tile, pointer loads with any strides (every GPU, the interpreter);
                    ``"gluon"``: the sm90 Gluon kernel, persistent and warp-specialised (a TMA
                    producer warp, wgmma consumer warpgroups), with the fused epilogue in its consumers
block_m/n/k         the block tile (the patent's register/shared tiles)
num_stages          software-pipelining depth of the K loop (the patent's double buffering, generalised)
group_m             grouped rasterisation: GROUP_M tile rows walked together so tiles reuse L2 (BitBLAS)
split_k             split-K: K cut into split_k parts on separate programs, summed in a second pass
                    (small M or large K: more programs than output tiles)
epilogue_split      the TMA kernel's fused epilogue in two column halves (fewer live registers)
flatten / warp_spec the persistent loop flattened (the next tile's loads overlap this tile's epilogue)
                    / warp-specialised (producer and consumer warps), TMA kernel only
presplit            3xTF32 on operands split into tf32 hi + lo by a pass before (TMA kernel): three
                    wgmmas per K step on the loaded tiles, no per-tile split work
flush               3xTF32 on the Gluon kernel: K steps summed in the tensor cores before the sums
                    are added to the fp32 result (1: every step, the accuracy of the TMA kernel)
num_warps           warps per program (8 = two warpgroups on sm90)
mn_regs             Gluon kernel, tf32: an MN-major operand is read from shared memory into registers
                    (wgmma's A from registers) instead of copied K-major first; NN runs as C^T = B^T A^T
epi_prefetch        Gluon kernel: the producer warp prefetches each tile's C and bias into L2 as the
                    tile starts, for the fused epilogue at its end
=================== ==================================================================================

Config spaces are per architecture family and operand size, pruned by whether the pipeline's
shared memory (``num_stages`` A and B tiles) fits the device (:func:`shared_bytes`,
:data:`SHARED_LIMIT`). Tuned choices are cached on disk (``tilecraft.tuning.cache``), keyed by
device, versions and a bucketed shape (:func:`shape_key`).
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

# Shared memory (or LDS) a program may use, bytes. sm90: 227 KB; sm80: 163 KB; CDNA: 64 KB LDS.
SHARED_LIMIT = {"sm90": 232448, "sm80": 166912, "cdna": 65536, "interpreter": 1 << 30}


@dataclass(frozen=True)
class GemmConfig:
    kernel: str = "pointer"
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3
    split_k: int = 1
    flatten: bool = False
    warp_spec: bool = False
    epilogue_split: bool = False  # TMA kernel: epilogue in two column halves (fewer live registers)
    presplit: bool = False  # TMA kernel, 3xTF32: operands split into tf32 hi + lo by a pass before
    waves_per_eu: int = 0  # AMD only: occupancy hint (0: the compiler's choice)
    flush: int = 1  # Gluon kernel, 3xTF32: K steps chained in the tensor cores between fp32 adds
    pad_rows: bool = False  # TMA/Gluon: copy operands whose rows are not 128-byte aligned (layout kept)
    mn_regs: bool = False  # Gluon, tf32: an MN-major operand read into registers, not copied K-major
    row_perm: int = 0  # Gluon, mn_regs: the register operand's rows relabelled: 1 LDS.32 free of bank conflicts, 2 in pairs (LDS.64)
    fixup: bool = False  # Gluon, split_k 2: the halves joined in the kernel (no workspace pass), units <= SMs
    epi_prefetch: bool = False  # Gluon: the producer prefetches each tile's C and bias into L2 for the epilogue
    warps_m: int = 0  # FMA kernel: warps along M (0: half the warps, at least one)
    maxnreg: int = 0  # NVIDIA: register budget per thread (0: the compiler's choice)
    mn_copy: str = ""  # FMA kernel: K-contiguous operands ("a", "b", "ab") copied MN-contiguous before the product
    block_n2: int = 0  # Gluon, 16-bit: a second accumulator of block_n2 columns, tiles block_n + block_n2 wide (192)
    named_slots: bool = False  # Gluon, plain products: slots released to the producer by named barriers
    cluster_m: int = 1  # Gluon, 16-bit plain products: 2 = clusters of two CTAs (tile rows 2i, 2i + 1) sharing B by multicast
    programs: int = 0  # TMA/Gluon persistent grid: programs launched (0: one per SM), at most the SM count
    transposed: bool = False  # run as C^T = B^T A^T, the other fields for that product (small N: the small-M path)

    @property
    def tile_n(self) -> int:
        """Columns per output tile: ``block_n``, plus ``block_n2`` for the Gluon kernel's wide tiles."""
        return self.block_n + self.block_n2

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GemmConfig:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def short(self) -> str:
        n = f"{self.block_n}+{self.block_n2}" if self.block_n2 else f"{self.block_n}"
        s = f"{self.kernel} {self.block_m}x{n}x{self.block_k} w{self.num_warps} s{self.num_stages} g{self.group_m}"
        if self.split_k > 1:
            s += f" splitk{self.split_k}"
        if self.flatten:
            s += " flat"
        if self.warp_spec:
            s += " ws"
        if self.presplit:
            s += " presplit"
        if self.flush > 1:
            s += f" flush{self.flush}"
        if self.pad_rows:
            s += " pad"
        if self.mn_regs:
            s += " regs"
        if self.row_perm:
            s += " pair" if self.row_perm == 2 else " perm"
        if self.fixup:
            s += " fixup"
        if self.epi_prefetch:
            s += " epf"
        if self.warps_m:
            s += f" wm{self.warps_m}"
        if self.maxnreg:
            s += f" r{self.maxnreg}"
        if self.mn_copy:
            s += f" copy-{self.mn_copy}"
        if self.named_slots:
            s += " nb"
        if self.cluster_m > 1:
            s += f" c{self.cluster_m}"
        if self.programs:
            s += f" p{self.programs}"
        if self.transposed:
            s += " transposed"
        return s


@dataclass(frozen=True)
class Problem:
    """What the choice of configuration depends on."""

    m: int
    n: int
    k: int
    batch: int
    dtype: str  # operand dtype name: fp16, bf16, fp32, fp64, int8, fp8_e4m3, fp8_e5m2
    precision: str | None  # the tl.dot input precision ("ieee", "tf32", "tf32x3", ...; None: default)
    arch: str  # "sm90", "sm80", "cdna" or "interpreter"
    tma_ok: bool  # operands meet the TMA rules (see tilecraft.ops.gemm.tma_layout)
    a_kmajor: bool
    b_kmajor: bool
    sms: int = 132
    tma_copies: int = 0  # operands the TMA kernel must first copy (unaligned, or MN-major 8/32-bit)
    gluon_ok: bool = False  # the Gluon kernel can take the call (tilecraft.ops.gemm.gluon_ok)
    rows_128: bool = True  # the operands the TMA reads as they are have 128-byte aligned rows
    mn_regs_ok: bool = False  # tf32 with one MN-major operand the Gluon kernel can read into registers
    mn_regs_swap: bool = False  # ... and it is B (NN): the C^T form, whose N is the output's rows
    epilogue: str = ""  # what the epilogue reads: "c", "bias", "light" (alpha/activation/scales) or ""
    fma_ok: bool = False  # fp32 ieee on NVIDIA sm80+: the Gluon FMA kernel can take it (ops.gemm.fma_refusal)
    b_kcontig: bool = False  # B's unit stride is along K (NT, TT): the FMA kernel reads it slower
    out_itemsize: int = 0  # bytes per result where they differ from the operand type's default (fp32 out of bf16)

    @property
    def itemsize(self) -> int:
        return {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}[self.dtype]


def _gluon_pipe(cfg: GemmConfig, itemsize: int, three: bool) -> int:
    """Bytes of the Gluon kernel's operand ring: ``num_stages`` A and B tiles (B ``tile_n`` wide),
    hi and lo parts for 3xTF32 (``three``)."""
    return cfg.num_stages * (cfg.block_m + cfg.tile_n) * cfg.block_k * itemsize * (2 if three else 1)


def gluon_epilogue_buffers(cfg: GemmConfig, itemsize: int, three: bool = False, out_size: int = 4) -> int:
    """Chunk buffers (BLOCK_M x 64 results of ``out_size`` bytes) of the Gluon kernel's epilogue: two
    when they fit beside the pipeline, else one. ``three``: 3xTF32 (hi and lo tiles per stage)."""
    pipe = _gluon_pipe(cfg, itemsize, three)
    return 2 if pipe + 2 * cfg.block_m * _epi_cols(cfg) * out_size <= SHARED_LIMIT["sm90"] - 1024 else 1


def _epi_cols(cfg: GemmConfig) -> int:
    """Columns of the Gluon kernel's epilogue chunk buffers as counted here: 64, or 32 beside a
    32-column second accumulator (``block_n2``); 256-wide tiles with a heavy epilogue use 32 too
    (``ops.gemm.gluon_epilogue_width``), for which 64 is a bound."""
    return 32 if cfg.block_n2 == 32 else 64


def shared_bytes(cfg: GemmConfig, itemsize: int, three: bool = False, out_size: int = 0) -> int:
    """Shared memory of the K-loop pipeline: ``num_stages`` copies of an A and a B tile; one more
    when the persistent loop is flattened (sm90 compile of 128x256x64 bf16, 3 stages: 147480 bytes,
    flattened 180248). The Gluon kernel adds its epilogue chunk buffers and its 3xTF32 operands
    come in two parts (sm90 compile: int8 128x256x128 s3 213164 bytes, 3xTF32 128x128x32 s3
    229596). ``out_size``: bytes per result in the Gluon kernel's epilogue buffers (0: the default
    output, int32 / fp32 for 8- and 32-bit operands and the operand type for 16-bit; split-K's
    partials are fp32 whatever the output)."""
    if cfg.kernel == "gluon":
        if cfg.split_k > 1 or not out_size:
            out_size = 2 if itemsize == 2 and cfg.split_k == 1 else 4
        return (_gluon_pipe(cfg, itemsize, three)
                + gluon_epilogue_buffers(cfg, itemsize, three, out_size) * cfg.block_m * _epi_cols(cfg) * out_size
                + 1024)
    stages = max(cfg.num_stages, 1) + (1 if cfg.flatten else 0)
    return stages * (cfg.block_m + cfg.block_n) * cfg.block_k * itemsize * (2 if cfg.presplit else 1)


def fits(cfg: GemmConfig, p: Problem) -> bool:
    return shared_bytes(cfg, p.itemsize, p.precision == "tf32x3", p.out_itemsize) <= SHARED_LIMIT[p.arch]


#: ``TILECRAFT_GEMM_CLUSTER`` ("1", the default; "0" turns it off): whether ``matmul`` may run the Gluon kernel
#: on clusters of two CTAs sharing B (``cluster_m``) where the heuristic, the tuner or a tuning cache picks them
#: (the short-K 64x128 tile, five stages: 1000^3 0.90-0.99x torch on an H200 against 0.77-0.83x; docs/gemm.md,
#: follow-ups 31 and 32). The CTAs meet at hardware cluster barriers after their mbarrier inits and before they exit.
CLUSTER_ENV = "TILECRAFT_GEMM_CLUSTER"


def clusters_enabled() -> bool:
    """Whether ``matmul`` may choose clusters of CTAs (:data:`CLUSTER_ENV` "1", the default, or "0"); read on
    every choice (``ValueError`` for anything but 0 or 1)."""
    value = os.environ.get(CLUSTER_ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{CLUSTER_ENV}={value!r}: use 0 or 1")
    return value == "1"


def _pow2_at_least(x: int, lo: int = 16) -> int:
    return max(lo, 1 << max(0, math.ceil(math.log2(max(x, 1)))))


def shape_key(p: Problem) -> str:
    """The cache key: shapes bucketed to the next power of two (M exact below 16), dtype,
    precision, layout and whether TMA applies; for a batch the Gluon kernel can take, the powers of two
    dividing M and K (which of its tiles can stack the batch)."""
    m = p.m if p.m < 16 else _pow2_at_least(p.m)
    return (f"{p.dtype}/{p.precision}/m{m}/n{_pow2_at_least(p.n)}/k{_pow2_at_least(p.k)}/b{min(p.batch, 2)}"
            f"/{'T' if p.a_kmajor else 'N'}{'T' if p.b_kmajor else 'N'}/{'tma' if p.tma_ok else 'ptr'}"
            f"{p.tma_copies}/{p.arch}" + ("/gluon" if p.gluon_ok else "") + ("" if p.rows_128 else "/rows16")
            + ("/regs" if p.mn_regs_ok else "") + ("-nn" if p.mn_regs_swap else "") + (f"/epi-{p.epilogue}" if p.epilogue else "")
            + ("/fma" if p.fma_ok else "") + ("-bk" if p.fma_ok and p.b_kcontig else "")
            + (f"/o{p.out_itemsize}" if p.out_itemsize else "")
            # a batch on a 2-CTA cluster of the Gluon kernel stacks only where K is whole K steps when an operand is
            # read MN-major (gluon_batch_fit): the power of two dividing K, so that K = 1000 and 1024 (one K bucket)
            # do not share an entry one of them cannot run
            + (f"/st{min(p.k & -p.k, 128)}" if p.batch > 1 and p.gluon_ok else ""))


def _small_m_config(p: Problem) -> GemmConfig:
    """M <= 64: the GEMM is a stream over B (a matrix-vector product in all but name). One tile
    row; BLOCK_N chosen so the output tiles alone about fill the device, 512-byte rows of A per
    K step and a 4-deep pipeline, so each SM keeps 100-200 KB of B in flight.

    Measured on the H200 (bf16, 2026-11-21, benchmarks/gemm_tune.py smallm): N = K = 8192 with
    16x64x256 tiles and no split 94-95% of the copy bandwidth (M = 1, 16), 64x64x128 92% (M = 64);
    N = K = 4096 with BLOCK_N 32 (128 tiles) 67%, and 6 stages of 128-deep K steps 71-75% (below).
    Split-K lost everywhere once the tiles alone
    fill the device (its second pass costs more than it gains), so it is used only below half a
    wave of tiles."""
    bm = 16 if p.m <= 16 else (32 if p.m <= 32 else 64)
    bn = 64 if math.ceil(p.n / 64) * p.batch >= 0.9 * p.sms else 32
    bk = 512 // p.itemsize
    cfg = GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=4, num_stages=4)
    if bn == 32 and bm != 32 and p.itemsize == 2 and math.ceil(p.n / 32) * p.batch >= 0.9 * p.sms:
        # N = K = 4096 (gemm-llm-followup-296fd54): M <= 16 with 16x32x128 in 6 stages 75% / 74% of
        # copy (16x32x256 in 4: 67% / 68%); M = 64 with 64x64x128 in 6 stages 71% (64x32x256: 67%)
        cfg = replace(cfg, block_n=32 if bm == 16 else 64, block_k=128, num_stages=6)
    elif (bn == 32 and bm == 32 and p.itemsize == 2 and p.a_kmajor and p.b_kmajor
          and math.ceil(p.n / 32) * p.batch >= 0.9 * p.sms):
        # M = 32 NT (B's rows along K) at N = K = 4096: 128-deep steps in an 8-deep ring, 11.4-11.5 against
        # 12.1-12.3 us for 256-deep steps in 4 (1.21-1.23x torch against 1.13-1.16x, two runs; 7 stages 0.999x).
        # NN keeps the 256-deep steps (10.8 us; 8 stages 13.3); TT (B laid out as NT's) was not timed and keeps
        # them too. H200 2026-11-30, interleave-smallnt32 / -smalls8, docs/gemm.md follow-up 34
        cfg = replace(cfg, block_k=128, num_stages=8)
    tiles = math.ceil(p.n / bn) * p.batch
    if bn == 64 and bm == 32 and p.itemsize == 2 and p.a_kmajor and p.b_kmajor and 0.9 * p.sms <= tiles <= p.sms:
        # M = 32 NT with one wave of 64-column tiles (N = K = 8192): 8 warps. At 4 warps an SM holds one program (one
        # warp a scheduler) and NT's waits on shared-memory results (ncu: 2.7 cycles an issue against TT's 1.3) showed:
        # 34.1 against 36.7 us, 0.980x against 0.910x torch. TT keeps 4 warps (1.123x against 1.096x); M = 64, M <= 16
        # and N = K = 4096 lost with 8 (0.86-1.03x against 0.98-1.24x). H200 2026-11-30, interleave-smallw8, docs/gemm.md
        # follow-up 35
        cfg = replace(cfg, num_warps=8)
    if bn == 64 and bm <= 32 and p.itemsize == 2 and p.sms < tiles <= 2 * p.sms:
        # more 64-column tiles than SMs (N = 11008 / 14336): 128-deep K steps, so that two programs fit an SM
        # (80-96 KB of ring) and every tile runs at once instead of in two waves of one (160-192 KB). H200,
        # 2026-11-30 (gemm-tune-smallm3, three runs, % of copy / x torch): 1 x 11008 x 4096 NT 92% / 1.05x
        # against 72% / 0.82x, 16 x 11008 NT 91% / 1.04x against 75% / 0.87x, 32 x 11008 NT 81% / 0.92x
        # against 57% / 0.65x, 1 x 14336 NN 96% / 1.05x against 89% / 0.98x, 16 x 14336 NT 92-94% / 1.00x
        # against 88% / 0.95x; with one wave (N = K = 8192, 128 tiles) the 256-deep steps stay (97-100%
        # against 93-98%); 5 stages of 128 lost (71% at 11008)
        cfg = replace(cfg, block_k=128)
    while not fits(cfg, p) and cfg.block_k > 32:
        cfg = replace(cfg, block_k=cfg.block_k // 2)
    if cfg.num_stages == 6:
        return cfg  # measured unsplit (2 splits: 58-60% of copy)
    split = 1
    k_blocks = math.ceil(p.k / cfg.block_k)
    while tiles * split * 2 <= p.sms and k_blocks // (split * 2) >= 4:
        split *= 2
    return replace(cfg, split_k=split)


def tma_split(tiles: int, k_blocks: int, sms: int, max_split: int = 8, min_steps: int = 8) -> int:
    """Split-K factor for ``tiles`` output tiles of ``k_blocks`` K steps on ``sms`` persistent
    programs: the fewest step-times, counting every wave of work units in full, a pipeline fill
    of about 4 steps per unit and about 24 steps for the reduce pass (its launch and the workspace
    round trip), with at least ``min_steps`` K steps per unit.

    The 24 is measured (H200, bf16, 2026-11-21, gemm-llm-followup-296fd54): the reduce pass cost
    27-38 step-times at M = 128 (N = 4096, 64x128 tiles: 1 split 270 TFLOP/s, 2 splits 291; N =
    11008, 128x128: 1 split 381, 2 splits 261, 3 splits 292). With it, 64 tiles of 64 steps take
    2 splits (36 + 24 against 68) and 86 tiles stay whole (68 against 75 for 3 splits)."""
    best, best_cost = 1, math.inf
    for s in range(1, max_split + 1):
        if s > 1 and k_blocks / s < min_steps:
            break
        cost = math.ceil(tiles * s / sms) * (k_blocks / s + 4) + (24 if s > 1 else 0)
        if cost < best_cost - 1e-9:
            best, best_cost = s, cost
    return best


def _fill_config(p: Problem, kind: str, bk: int) -> GemmConfig:
    """Below two waves of 128x256 tiles.

    TMA (measured on the H200, bf16, 2026-11-21, gemm-llm-followup-296fd54): 128x128 tiles, 4
    stages, where they give at least half the SMs a tile (M = 128, N = 11008 / 14336: 0.86x /
    0.96x torch; split-K there lost, 0.56-0.67x); else 64x128 tiles, one warpgroup, 6 stages, with
    split-K inside the persistent grid where :func:`tma_split` says (M = 128, N = 4096, K = 4096 /
    11008 / 14336: 2 splits, 0.92x / 1.00x / 1.00x, against 0.81-0.96x for 128x128 in 4 splits;
    1000^3: no split, 0.71x against 0.56x for 64x64).

    Gluon kernel (bf16, sm90, H200 2026-11-21, gemm-gluon16-sweep-af91216, same run as the TMA
    numbers there): 128x128x64 s5 where 128x128 tiles give half the SMs a tile (M = 128, N = 11008
    / 14336: 0.934x / 0.990x torch against 0.854x / 0.954x); 64x64x64 s8 (one warpgroup) where
    64x64 tiles fit one wave and K <= 4096 (128x4096x4096: 1.034x against 0.909x); 64x128x64 s4
    where 64x128 tiles fit one wave unsplit (1000^3: 0.777x against 0.714x). M = 128, N = 4096 with
    K = 11008 / 14336 stays on the TMA kernel's split-K (1.023x / 1.056x; Gluon split 2: 1.005x /
    1.040x).

    fp16 as bf16. Where 128x128 tiles give half the SMs a tile, bf16's tile (:func:`_gluon16_tile`; H200,
    2026-11-30, gemm-tune-wide2, NT, torch in the same run): 256 x 11008 / 256 x 12288 / 512 x 6144 /
    1024 x 3072 (x 4096) on 192-column tiles 0.899 / 0.975 / 0.994 / 1.007x against 0.641 / 0.701 /
    0.713 / 0.730x for the TMA kernel's 128x128 s4, 512 x 11008 x 4096 on 128x128 s5 0.920x against
    0.822x.

    Pointer kernel: the largest tile that still gives every SM a program (128x128, 64x128, 64x64),
    else 64x64 with split-K."""
    if kind == "tma" and p.arch == "sm90" and p.gluon_ok and p.dtype in ("bf16", "fp16") and p.tma_copies == 0:
        tiles128 = math.ceil(p.m / 128) * math.ceil(p.n / 128) * p.batch
        if p.batch > 1 and p.sms / 2 <= tiles128 <= p.sms and (p.k >= 2048 or (p.k >= 1024 and p.m <= 256)):
            # a batch of one wave of 128x128 tiles with long K: the TMA kernel's 3D descriptors, not the Gluon
            # kernel's stacked batch (H200, 2026-12-01, gemm-batch-probe, bf16 NN, two rounds, x torch, Gluon
            # 128x128 s4 / s5 against TMA 128x128 s4): 32 x 256^2 x K = 512 / 1024 / 2048 0.989 / 0.889 / 0.927 against
            # 0.949 / 0.939 / 0.958; 8 x 512^2 x K 1.037 / 0.977 / 0.916 against 0.941 / 0.945 / 0.930
            return GemmConfig("tma", 128, 128, bk, group_m=8, num_warps=8, num_stages=4)
        if tiles128 >= p.sms / 2:
            return _gluon16_tile(p)
        if math.ceil(p.m / 64) * math.ceil(p.n / 64) * p.batch <= p.sms and p.k <= 4096:
            return GemmConfig("gluon", 64, 64, 64, group_m=8, num_warps=4, num_stages=8)
        tiles = math.ceil(p.m / 64) * math.ceil(p.n / 128) * p.batch
        # 64x128 s4 on the Gluon kernel at short K only (1000^3); M = 256 with K = 2048 / 4096 / 11008 (H200,
        # 2026-11-30, gemm-tune-midm, -tiles2): TMA 64x128 s6 0.957 / 0.932 / 0.942x torch against 0.810 /
        # 0.727 / 0.710x
        # fp16 1000^3 (H100, 2026-11-26, gemm-pdl-050c916): Gluon 64x128 s4 0.766x / 0.830x torch (PDL off / on)
        # against 0.720x / 0.723x for the TMA 64x128 s6; at K = 4096 / 11008 (H200, 2026-11-30, prefill fp16
        # 256 x 4096) it read 0.733 / 0.725x, where bf16's TMA 64x128 s6 reads 0.91-0.95x: K <= 1024 for both
        # a batch takes it at short K only: 16 x 256^2 x 1000 NN on the TMA kernel's 64x128 s6 1.012x torch against
        # 0.927x stacked on this tile (H200, 2026-12-01, gemm-ragged-probe-3); K <= 256 stacked in the rule below
        if (tiles <= p.sms and p.k <= 1024 and tma_split(tiles, math.ceil(p.k / 64), p.sms) == 1
                and (p.batch == 1 or p.k <= 256)):
            # in clusters of two CTAs sharing B by multicast (the pairs are the 128x128 tiles: fewer than half
            # the SMs here, so they fit one wave; the guard stays for other callers) (H200, 2026-11-30,
            # gemm-tune-cluster, torch in the same run): 1000^3 NN / NT / TN / TT 0.99 / 1.01 / 0.96 / 0.90x
            # against 0.83 / 0.85 / 0.82 / 0.77x, fp16 NN / TT 0.92 / 0.90x against 0.77x (docs/gemm.md, follow-up 31)
            # With the cluster five stages, not four (H200, 2026-11-30, twenty-seventh session, gemm-cluster-probe
            # stages, two rounds, torch in the same run): 1000^3 NN / TT / fp16 NN 0.989 / 0.90 / 0.905x against
            # 0.92 / 0.86 / 0.85x with s4; s6 the same as s5, s7 / s8 between. One tile a CTA: more of its short K
            # in flight from the start. Without the cluster s6 gained nothing over s4 (0.82 / 0.77 / 0.75x).
            rows = math.ceil(p.m / 64)
            pairs = math.ceil(rows / 2) * math.ceil(p.n / 128) * p.batch
            # not for a batch stacked on the Gluon kernel (H200, 2026-12-01, gemm-batch-probe, bf16 NN, x torch): 64 x
            # 128^3, 32 x 128 x 256 x 128, 16 x 256^3 without the cluster (s4) 1.080 / 1.079 / 1.088x, with it 0.917 /
            # 0.923 / 0.904x (the TMA kernel's 64x128 s6 0.890-0.926x)
            cluster = rows >= 2 and pairs <= p.sms // 2 and clusters_enabled() and p.batch == 1
            return GemmConfig("gluon", 64, 128, 64, group_m=8, num_warps=4, num_stages=5 if cluster else 4,
                              cluster_m=2 if cluster else 1)
    if kind == "tma":
        if math.ceil(p.m / 128) * math.ceil(p.n / 128) * p.batch >= p.sms / 2:
            return GemmConfig("tma", 128, 128, bk, group_m=8, num_warps=8, num_stages=4)
        tiles = math.ceil(p.m / 64) * math.ceil(p.n / 128) * p.batch
        return GemmConfig("tma", 64, 128, bk, group_m=8, num_warps=4, num_stages=6,
                          split_k=tma_split(tiles, math.ceil(p.k / bk), p.sms))
    for bm, bn in ((128, 128), (64, 128), (64, 64)):
        tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn) * p.batch
        if tiles >= p.sms:
            return GemmConfig(kind, bm, bn, bk, group_m=8, num_warps=8 if bm * bn >= 128 * 128 else 4,
                              num_stages=4)
    tiles = math.ceil(p.m / 64) * math.ceil(p.n / 64) * p.batch
    split = 1
    while tiles * split * 2 <= p.sms and math.ceil(p.k / bk) // (split * 2) >= 4:
        split *= 2
    return GemmConfig(kind if split == 1 else "pointer", 64, 64, bk, group_m=8, num_warps=4, num_stages=4,
                      split_k=split)


#: The Gluon kernel where it was measured faster than the Triton kernels (H200, 8192^3, 2026-11-21,
#: gemm-gluon-sweep-b626042 and gemm-gluon-sweep2-85f9275): int8 NT 128x256x128 s4 (one epilogue
#: chunk buffer) 1365 TOPS, s3 1317-1330 (Triton TMA kernel 1160, torch._int_mm 903-909); 3xTF32
#: 128x128x32 s3 with 4 K steps chained between fp32 adds 103-110 TFLOP/s NT and NN (Triton 77-80;
#: cuBLAS fp32 51), error against float64 3.5e-7 / 3.9e-7 at K = 4096 / 16384 (cuBLAS fp32 5.8e-7 /
#: 1.15e-6; a chain of 8 steps 6.4e-7 at 4096, worse than cuBLAS). Plain tf32 on the Gluon kernel
#: (128x256x32: NT 351, NN 299-305 with the K-major copy of B) was no faster than the TMA kernel; with
#: the MN-major operand read into registers (``mn_regs``, no copy) NN and TT are (:func:`heuristic`).
#: Keyed by operand type ("int8") or dot precision ("tf32x3"). Only for products of two waves of
#: 128x256 tiles or more (what was measured); ``Problem.gluon_ok`` says the call qualifies.
#: (Since 2026-11-30, with GROUP_M 16 and from :data:`TF32_GLUON_ROUNDS` rounds of tiles, tf32 NT is faster there.)
#: tf32 with both operands K-major takes the Gluon kernel from this many rounds of 128x256 tiles a SM: measured
#: faster at 16 (8192^3), slower at 2 (4096^3); the line between is not measured.
TF32_GLUON_ROUNDS = 8
GLUON_HEURISTIC: dict[str, GemmConfig] = {
    "int8": GemmConfig("gluon", 128, 256, 128, group_m=8, num_warps=8, num_stages=4),
    "tf32x3": GemmConfig("gluon", 128, 128, 32, group_m=8, num_warps=8, num_stages=3, flush=4),
}


def _wave_efficiency(p: Problem, bm: int, bn: int) -> float:
    """The share of the SMs' tile slots the output tiles fill: tiles / (waves x SMs)."""
    tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn) * p.batch
    return tiles / (math.ceil(tiles / p.sms) * p.sms)


def _gluon16_tile(p: Problem) -> GemmConfig:
    """The 16-bit Gluon tile: 128x256 s4, or 128x128 s5 where 128x256 tiles make at most 6 waves and
    fill the last one worse than 128x128 tiles do (by more than 2% of the slots). H200, 2026-11-30
    (gemm-tune-midm, -streamk; bf16, torch in the same run): 512 x 11008 x 4096 NT 128x128 0.878-0.886x
    against 0.703-0.705x (1.3 waves of 128x256), 2048 x 11008 x 4096 0.973x against 0.929-0.963x (5.2
    waves); where the last waves fill alike 128x256 wins: 1024 / 2048 x 4096 x 4096 1.009 / 1.010x
    against 0.964 / 0.953x, 2048 x 4096 x 11008 1.011x against 0.938x, 256 / 1024 x 11008 x 4096
    0.747-0.766 / 0.925-0.937x against 0.701-0.704 / 0.893-0.908x, 512 x 14336 x 4096 1.009x against
    0.939-0.975x. With more waves the tail matters less than the tile: at 4096 x 11008 NT 128x128
    gave 1.004x against 0.973x, TN 0.977x against 1.020x (not chosen by waves). Checked on shapes the
    rule was not made from (gemm-tune-tiles2): 1536 x 4096 x 4096 128x128 0.957x against 0.796x, 384 x
    4096 x 4096 0.910x against 0.491x, 1024 x 14336 x 4096 0.945x against 0.905x, 2048 x 11008 x 2048 TN
    0.984x against 0.969x; 128x256 at 768 x 11008, 3072 x 4096, 512 x 8192 x 8192 1.017 / 1.012 / 1.029x.
    Not where rows are not 128-byte aligned: 3000^3 128x256 0.650x against 0.572x.

    192-column tiles (128 + 64, ``block_n2``; 5 stages, one epilogue buffer) where they fill the
    waves better than both by more than 5% of the slots, in at most 4 waves. H200, 2026-11-30
    (gemm-tune-wide, bf16, torch in the same run), against 128x256 s4 / 128x128 s5: 256 x 11008 x 4096
    NT / NN / TN 0.909 / 0.986 / 0.977x against 0.778 / 0.829 / 0.832x (116 tiles for 132 SMs against
    86 / 172), 256 x 12288 x 4096 0.967x against 0.828x, 512 x 6144 x 4096 0.999x against 0.829x, 1024 x
    3072 x 4096 1.001x against 0.828x, 256 x 11008 x 11008 0.878x against 0.771x; where the fill is
    alike the 192 tile is slower or tied: 512 x 11008 0.900x against 0.898x (128x128), 1024 x 11008
    0.901x against 0.948x (128x256), 2048 x 6144 0.945-0.974x against 0.984x, 4096^3 0.860-0.891x
    against 1.013x. 128 + 32 columns lost everywhere (0.50-0.83x).

    At M <= 128 the same for 64 x 192 tiles (one warpgroup, 6 stages) in one wave (gemm-tune-wide2):
    128 x 11008 x 4096 NT / NN 0.962 / 0.959x against 0.875 / 0.844x for 128x128 s5 (116 tiles against
    86), 128 x 12288 x 4096 0.973x against 0.919x; s5 0.932-0.949x."""
    if p.n <= 128:
        # N of one 128-column tile: a 256-column tile would compute half of zeros. 65536 x 128 x 128 on 128x128 s5
        # (the tuner's choice) 1.072x torch against 0.687x on 128x256 (H200, 2026-12-01, cliff-gemm-tuned-4e0463a)
        return GemmConfig("gluon", 128, 128, 64, group_m=8, num_warps=8, num_stages=5)
    e256, e128 = _wave_efficiency(p, 128, 256), _wave_efficiency(p, 128, 128)
    e192 = _wave_efficiency(p, 128, 192)
    if (p.m <= 128 and p.rows_128 and math.ceil(p.m / 64) * math.ceil(p.n / 192) * p.batch <= p.sms
            and _wave_efficiency(p, 64, 192) > max(e256, e128, e192) + 0.05):
        return GemmConfig("gluon", 64, 128, 64, group_m=8, num_warps=4, num_stages=6, block_n2=64)
    tiles192 = math.ceil(p.m / 128) * math.ceil(p.n / 192) * p.batch
    if p.rows_128 and e192 > max(e256, e128) + 0.05 and tiles192 <= 4 * p.sms:
        wide = GemmConfig("gluon", 128, 128, 64, group_m=8, num_warps=8, num_stages=5, block_n2=64)
        return wide if fits(wide, p) else replace(wide, num_stages=4)  # fp32 results: 4 stages fit
    waves = math.ceil(math.ceil(p.m / 128) * math.ceil(p.n / 256) * p.batch / p.sms)
    if waves <= 6 and e128 > e256 + 0.02 and p.rows_128:
        return GemmConfig("gluon", 128, 128, 64, group_m=8, num_warps=8, num_stages=5)
    return GemmConfig("gluon", 128, 256, 64, group_m=8, num_warps=8, num_stages=4)


def _gluon16_measured(p: Problem) -> bool:
    """Where the Gluon kernel measured faster than the TMA kernel on 16-bit products of two waves
    of 128x256 tiles or more (see :func:`heuristic`).

    Short inner dimensions (K <= 2048, e.g. a training step's weight gradient over the tokens):
    every layout and both dtypes (H200, 2026-11-30, gemm-tune-shortk / shortk2, torch in the same
    run): bf16 TN 4096^2 x 512 / 1024 / 2048 1.054 / 1.026 / 1.007x torch against 0.851 / 0.889 /
    0.929x for the TMA 256x128 s4 tile, 4096 x 11008 x 512 TN / NN / NT 0.984 / 0.954 / 0.961x
    against 0.763 / 0.767 / 0.750x, 8192^2 x 2048 TN 0.971x against 0.916x; fp16 4096^2 x 512 TN /
    NN 1.014 / 1.024x against 0.817 / 0.841x, NT x 2048 1.031x against 0.916x. (The Gluon kernel's
    TMA stores let the next tile's loads start during the epilogue; the TMA kernel's 8 K steps a
    tile do not hide it.)

    Longer K: bf16 where one operand is K-major except outputs of 32-48 Mi elements (4096x11008x4096:
    1.013 against 1.020x for TMA 256x128 s4); bf16 TN (both operands MN-major) below 48 Mi outputs
    (4096^2 x 4096 / x 8192 1.009 / 0.986x against 0.930 / 0.906x, 4096 x 11008 x 4096 1.020x against
    0.955x, 11008 x 4096 x 4096 1.024x against 0.946x) but not at 8192^3 (0.982 against 1.011x);
    fp16 from 48 Mi outputs on, not NN (0.987 against 1.074x at 8192^3); below 48 Mi outputs every
    layout (H200, 2026-11-30, gemm-tune-wide3, NT unless said, the tile as :func:`_gluon16_tile` picks
    it, against the TMA kernel's 256x128 s4): 1024 x 14336 x 4096 0.921 against 0.854x, 1024 x 11008
    0.910 (NN 1.001) against 0.884x (NN 0.946), 2048 x 11008 0.965 against 0.926x, 2048 x 4096 x 11008
    1.011 against 0.954x, 4096^3 1.014 against 0.943x, 4096 x 11008 1.051 against 0.985x; one loss,
    2048 x 14336 0.986 against 1.046x."""
    elems = p.m * p.n * p.batch
    if p.dtype not in ("bf16", "fp16"):
        return False
    if p.k <= 2048 or (p.dtype == "fp16" and elems < 48 * 2**20):
        return True
    if p.dtype == "bf16":
        if not (p.a_kmajor or p.b_kmajor):
            return elems < 48 * 2**20
        return not 32 * 2**20 <= elems < 48 * 2**20
    return not (p.a_kmajor and not p.b_kmajor) and elems >= 48 * 2**20


def _pad_pays(p: Problem) -> bool:
    """Whether copying the operands into 128-byte rows (``pad_rows``) costs less than it saves: the
    padded product ran 1.36x faster (3000x7000x5000, 307 against 419 us, H200), so the copies
    (both operands read and written at ~3.6 TB/s) must stay under 15% of the unpadded product
    (~500 TFLOP/s) to leave a margin; 3000x7000x5000: 56 us against 420 us (13%)."""
    copy_s = 2 * (p.m * p.k + p.k * p.n) * p.batch * p.itemsize / 3.6e12
    return copy_s <= 0.15 * 2 * p.m * p.n * p.k * p.batch / 500e12


def _epilogue_on_gluon(p: Problem) -> bool:
    """Whether a call with this epilogue takes the Gluon kernel where its plain product would
    (H200, 2026-11-25, follow-up 7, gemm-followup7-11e1e9c and gemm-followup7b-377a262, against
    the TMA kernel's epilogue in the same runs): bf16 with a bias and/or an activation (8192^3
    bias+gelu 1638-1699 against 1690-1701 us; 4096x14336x4096 bias+silu 751/753 against 774/798;
    128x11008x4096 bias+gelu 31.1 with ``epi_prefetch`` against 34.4; 1000^3 12.8-13.0 against
    13.9-14.1), int8 (int32 out: bias+relu 799 against 976 us, alpha+beta*C 900 against 1003-1020)
    and tf32 (NN bias+gelu 3266-3284 against 3651-3654 us, alpha+beta*C 3278-3311 against 3540).
    Not taken: bf16 reading C (8192^3 alpha+beta*C 1676-1748 against 1658-1685 us, with bias and
    gelu 1763-1769 against 1760-1783; 4096^3 224-229 against 221-229: no faster), fp16 reading C
    (4096^2 x 512 alpha+beta*C 54.4-55.5 against 45.3-45.5 us on the TMA kernel, 2026-11-30,
    gemm-followup7c-fp16), and 3xTF32 with any epilogue (not measured). fp16 with a bias or an
    activation: as bf16 (:func:`heuristic`)."""
    if not p.epilogue:
        return True
    if p.dtype in ("bf16", "fp16"):
        return p.epilogue != "c"
    return p.dtype == "int8" or p.precision == "tf32"


def gluon_batch_rows(m: int, cfg: GemmConfig, *, swap: bool) -> int:
    """The rows an entry of a batch of M-row products takes in the Gluon kernel's stacked launch (``STACK``,
    :func:`tilecraft.kernels.gemm_gluon.matmul_ws_kernel`): M rounded up to whole tiles along the stacked
    dimension, which is the kernel's M (BLOCK_M, times 2 with a cluster) or, in the C^T form of a tf32 NN
    product with ``mn_regs`` (``swap``), the kernel's N (the tile's N). The rows past M are computed from the
    next entry's (or out-of-bounds, zero) rows and not stored: the output is written through a rank-3 TMA
    descriptor that clips each entry. Any padding is taken: every padded batch measured ran faster stacked than on
    the TMA kernel, even 77 rows padded to 128 or 256 (H200, 2026-12-01, ``benchmarks/gemm_batch_probe.py --suite
    ragged``, x torch: bf16 8 x 1000 x 1024^2 0.80 -> 0.99, 32 x 77 x 768^2 0.76 -> 0.94; tf32 NN 16 x 500 x 512^2
    0.42 -> 1.13, 32 x 77 x 768^2 0.27 -> 1.55 on 128x128; docs/gemm.md follow-up 39)."""
    tile = cfg.tile_n if swap else cfg.block_m * cfg.cluster_m
    return -(-m // tile) * tile


def gluon_batch_fit(m: int, k: int, cfg: GemmConfig, *, mn_major: bool) -> str | None:
    """Why ``cfg`` cannot run a batched product of M rows and depth K on the Gluon kernel, or None: the batch
    is stacked along the output's rows (``STACK``, :func:`tilecraft.kernels.gemm_gluon.matmul_ws_kernel`), each
    entry's rows padded to whole tiles (:func:`gluon_batch_rows`), with no split-K. An operand read MN-major
    (``mn_major``: its entries are K rows each) is read through rank-3 boxes that stop at each entry's K, except B
    with a 2-CTA cluster (its multicast halves are 2D boxes of the batch-flattened B, whose last partial K tile
    would read the next entry's rows): K a whole number of BLOCK_K there."""
    why = [w for w, bad in (("no split-K", cfg.split_k > 1 or cfg.fixup),
                            (f"K ({k}) a multiple of block_k ({cfg.block_k}) with an MN-major operand and a 2-CTA "
                             "cluster", mn_major and cfg.cluster_m > 1 and k % cfg.block_k)) if bad]
    return None if not why else f"a batched product on the Gluon kernel needs {', '.join(why)}"


def gluon_batch_misfit(p: Problem, cfg: GemmConfig) -> str | None:
    """:func:`gluon_batch_fit` for a problem: why ``cfg`` cannot stack ``p``'s batch on the Gluon kernel (None: not a
    batched Gluon config, or it fits). An operand counts as MN-major where the Gluon kernel would read it so: with
    ``mn_regs``, or where the TMA plan reads it MN-major (16-bit), or may (a 16-bit operand the TMA plan copies K-major:
    the Gluon kernel's copy keeps its layout)."""
    if p.batch <= 1 or cfg.kernel != "gluon":
        return None
    mn_major = cfg.mn_regs or not (p.a_kmajor and p.b_kmajor) or (p.itemsize == 2 and p.tma_copies > 0)
    return gluon_batch_fit(p.m, p.k, cfg, mn_major=mn_major)


def heuristic(p: Problem) -> GemmConfig:
    """:func:`_epilogue_heuristic`, except that a batched product whose choice the Gluon kernel cannot stack
    (:func:`gluon_batch_misfit`) takes the choice without the Gluon kernel."""
    cfg = _epilogue_heuristic(p)
    if gluon_batch_misfit(p, cfg):
        cfg = _epilogue_heuristic(replace(p, gluon_ok=False, mn_regs_ok=False))
    elif (cfg.kernel == "gluon" and cfg.mn_regs and cfg.tile_n == 256 and p.batch > 1 and p.mn_regs_swap
          and gluon_batch_rows(p.m, cfg, swap=True)
          >= 1.5 * gluon_batch_rows(p.m, replace(cfg, block_n=128), swap=True)):
        # a tf32 NN batch (stacked along the C^T form's N) whose entries the 256-wide tile pads to half as many rows
        # again as a 128-wide one: 32 x 77 x 768^2 on 128x128x32 s5 1.553x torch against 1.157x on 128x256x32 s4
        # (H200, 2026-12-01, gemm-ragged-probe; 16 x 500 x 512^2, padded alike by both: 1.071 against 1.126)
        cfg = replace(cfg, block_n=128, num_stages=5)
    return cfg


def _epilogue_heuristic(p: Problem) -> GemmConfig:
    """The configuration used without tuning: :func:`_heuristic` on the product, with the
    epilogue's rules on top (:func:`_epilogue_on_gluon`; ``epi_prefetch`` where it measured faster
    for a bf16 bias: 128x11008x4096 bias+gelu on 128x128 s5 31.1 against 32.5-35.5 us without,
    4096x11008x4096 bias+silu on 128x256 s4 567-573 against 606-616 us; not at 8192^3 (1680-1712
    against 1676-1699) or 1000^3 (12.8-12.9 both); H200, gemm-followup7b-377a262). bf16 NN outputs of 32-48 Mi elements with a bias
    take the Gluon kernel (its plain product does not): 4096x11008x4096 bias+silu 567-573 us
    against 600-602 us for the TMA kernel (same run)."""
    if p.gluon_ok and not _epilogue_on_gluon(p):
        return _heuristic(replace(p, gluon_ok=False, mn_regs_ok=False))
    if p.dtype == "fp16" and p.epilogue in ("bias", "light") and p.arch == "sm90" and p.gluon_ok and p.tma_copies == 0:
        # fp16 with a bias and/or an activation: bf16's choice (H200, 2026-11-30, gemm-followup7c-fp16, two
        # rounds against the TMA kernel's epilogue and torch): 2048 x 4096 x 4096 NT bias+gelu Gluon 128x256
        # s4 1.012x torch against 0.859-0.868x, 512 x 4096 x 4096 NT 128x128 s5 1.032-1.058x against
        # 0.904-0.931x, 8192^3 NN 0.997-1.001x against 0.966-0.975x; 4096 x 11008 x 4096 NT bias+silu stays
        # on the TMA kernel as bf16 does (1.013-1.045x; Gluon 0.985-1.085x)
        return _epilogue_heuristic(replace(p, dtype="bf16"))
    if (p.epilogue == "bias" and p.dtype == "bf16" and p.arch == "sm90" and p.gluon_ok and p.tma_copies == 0
            and p.a_kmajor and not p.b_kmajor and p.m > 64 and 32 * 2**20 <= p.m * p.n * p.batch < 48 * 2**20):
        return GemmConfig("gluon", 128, 256, 64, group_m=8, num_warps=8, num_stages=4, epi_prefetch=True)
    cfg = _heuristic(p)
    if cfg.kernel == "gluon" and p.epilogue == "bias" and p.dtype == "bf16" and (cfg.block_m, cfg.tile_n) == (128, 128):
        cfg = replace(cfg, epi_prefetch=True)  # the M = 128 products' tile (measured); not 8192^3 or 1000^3 (tied)
    return cfg


#: fp32 ``ieee`` on NVIDIA sm80+: the Gluon FMA kernel (``tilecraft.kernels.gemm_fma``): 8 x 8
#: results per thread, 16 FFMA per 128-bit shared-memory load. H100, 2026-11-26
#: (``benchmarks/gemm_fma.py``, cuBLAS fp32 in the same run): 64x128x32 at 4 warps 0.905x at 4096^3
#: NN (the pointer kernel's tl.dot 0.869x), 0.951x at 8192^3 (0.915x), NT / TN / TT 0.859 / 0.917 /
#: 0.908x (0.410 / 0.891 / 0.466x); 128x128x32 at 8 warps 0.880x at 4096^3 NN, 0.957x TN; a
#: 128-register budget (2 programs of 8 warps per SM) 0.789x; 16-deep K steps 0.78-0.83x.
FMA_HEURISTIC = GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2)
FMA_SMALL_M = GemmConfig("fma", 64, 128, 16, num_warps=4, num_stages=4, warps_m=2)  # M = 64: 0.246x (32-deep: 0.176x)
FMA_64X64 = GemmConfig("fma", 64, 64, 32, num_warps=2, num_stages=3, warps_m=2)  # a few waves of 64x128 tiles
FMA_SPACE = (GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3),
             GemmConfig("fma", 128, 64, 32, num_warps=4, num_stages=3, warps_m=4),
             FMA_64X64,
             GemmConfig("fma", 128, 128, 64, num_warps=8, num_stages=3),
             GemmConfig("fma", 128, 256, 32, num_warps=8, num_stages=3, warps_m=4))


#: fp32 ``ieee``, M <= 32 on NVIDIA: the pointer kernel's 16- or 32-row tiles (the FMA kernel computes 64
#: rows), split by :func:`split_to_fill`. H200 2026-11-26 (``benchmarks/gemm_fma_split.py``, cuBLAS fp32 in
#: the same run), N = K = 4096: M = 1 0.70x (the FMA kernel 0.08x; 16x128x64 w8 0.68x, split 8 / 16
#: 0.62 / 0.58x), M = 8 1.55x, M = 16 2.85x (FMA split 8: 1.42x), M = 24 / 32 with 32-row tiles split 4
#: 1.01 / 0.97x (FMA split 8: 0.74 / 0.73x); 32 x 11008 x 4096 split 2 1.27x (FMA split 4: 0.82x).
FP32_SMALL_M = GemmConfig("pointer", 16, 64, 64, group_m=1, num_warps=4, num_stages=4)


def split_to_fill(tiles: int, k: int, block_k: int, sms: int, max_split: int = 8, min_steps: int = 4) -> int:
    """Split-K factor (a power of two) that gives ``tiles`` output tiles at least 1.5 programs per SM,
    keeping 4 K steps per split or more. H200 2026-11-26 (``benchmarks/gemm_fma_split.py``, fp32
    ``ieee`` on the FMA kernel against cuBLAS fp32): M = 64, N = K = 4096 (32 tiles) 0.24x unsplit,
    0.63x split 4, 0.95x split 8; 1000^3 (128 tiles) 0.66x, split 2 0.98x (NT 0.68 -> 0.99x), split 4
    0.86x; M = 128 (64 tiles) 0.29x, split 4 0.89x; 64 x 11008 x 4096 (86 tiles) 0.58x, split 4 0.82x,
    split 8 0.80x; 512^3 (32 tiles, K = 512: split 4 at most) 0.30x, split 4 0.80x. ``min_steps``: the K steps
    a split keeps at least (4; the FMA kernel takes 2, :func:`fma_config`)."""
    split = 1
    while tiles * split < 1.5 * sms and split < max_split and k >= 2 * split * min_steps * block_k:
        split *= 2
    return split


def fma_config(p: Problem) -> GemmConfig:
    """fp32 ``ieee`` on NVIDIA sm80+ (``p.fma_ok``): the FMA kernel's 64x128 tiles, split along K when
    they leave SMs idle (:func:`split_to_fill`); M <= 32 on the pointer kernel's 16- or 32-row tiles.
    A K-contiguous B (NT, TT) is copied N-contiguous first when M >= 3000 rows share the copy (H200,
    2026-11-26, ``benchmarks/gemm_fma_copy.py``, the copy timed with the product, ratio to cuBLAS
    fp32): NT 4096^3 0.860 -> 0.894x, 8192^3 0.849 -> 0.929x, 4096 x 11008 x 4096 0.885 -> 0.929x,
    TT 4096^3 0.902 -> 0.953x, TT 3000 x 7000 x 5000 0.866 -> 0.877x; at 2048^3 NT it lost (0.874 ->
    0.788x). Copying a K-contiguous A (NN) did not pay (4096^3 0.911 -> 0.913x, 3000 x 7000 x 5000
    0.930 -> 0.923x).

    A few waves of tiles, where 3 blocks fit per SM (H100 2026-11-26, ``gemm_fma_split.py --suite mid``):
    2-2.75 tiles per SM split 2 (1536^3 0.841 -> 0.991x, TT 0.755 -> 0.905x; at 2.97, 1792^3, split 2
    lost: 1.029 -> 1.010x); 3-4.5 tiles per SM with K >= 2048 the 64x64 tile
    at 2 warps (2048^3 NN / NT / TT 0.824 / 0.880 / 0.722 -> 0.875 / 0.882 / 0.940x, 1024 x 4096 x 4096
    0.809 -> 0.864x; with K = 1024 it lost: 2048 x 4096 x 1024 0.905 -> 0.878x)."""
    if p.m <= 32:
        cfg = replace(FP32_SMALL_M, block_m=16 if p.m <= 16 else 32)
    else:
        cfg = FMA_HEURISTIC if p.m > 64 else FMA_SMALL_M
    tiles = math.ceil(p.m / cfg.block_m) * math.ceil(p.n / cfg.block_n) * p.batch
    # the FMA kernel's splits down to two K steps each (H200, 2026-12-01, gemm-fp32-probe, x cuBLAS fp32, two
    # rounds): 512^3 split 8 1.004x against 0.891x for split 4 (the tuner's choice in the cliff hunt too: 1.012x)
    split = split_to_fill(tiles, p.k, FMA_HEURISTIC.block_k, p.sms, min_steps=2 if cfg.kernel == "fma" else 4)
    if split > 1:
        return replace(cfg if p.m <= 32 else FMA_HEURISTIC, split_k=split)
    if cfg.kernel == "fma" and 2 * p.sms <= tiles < 2.75 * p.sms and p.k >= 8 * 2 * cfg.block_k:
        return replace(cfg, split_k=2)  # 1536^3: 288 tiles, a third wave on a few SMs (0.84 -> 0.99x)
    if cfg.kernel == "fma" and 3 * p.sms <= tiles < 4.5 * p.sms and p.k >= 2048:
        return FMA_64X64  # 2048^3: 512 tiles, 4 per SM where 3 fit (NN 0.82 -> 0.88x, TT 0.72 -> 0.94x)
    if p.m >= 3000 and p.b_kcontig and cfg.kernel == "fma":
        return replace(cfg, mn_copy="b")
    return cfg


def transposed_problem(p: Problem) -> Problem:
    """The problem of C^T = B^T A^T (M and N exchanged, B^T the left operand), for the pointer kernel's
    choices: the TMA, Gluon and FMA kernels are not offered on it."""
    return replace(p, m=p.n, n=p.m, a_kmajor=p.b_kmajor, b_kmajor=p.a_kmajor, tma_ok=False, gluon_ok=False,
                   mn_regs_ok=False, fma_ok=False, tma_copies=0, b_kcontig=p.a_kmajor)


def small_n_transposed(p: Problem) -> bool:
    """Whether the product runs transposed (``GemmConfig.transposed``): N <= 64 < M, 16- or 8-bit operands, NVIDIA
    (C is read through its transpose, the bias along C^T's rows). A matrix times a few vectors is then the small-M stream
    over B^T = A. On the product's own tiles (64 rows by 64-128 columns, split 2) it read 0.39-0.95x torch;
    transposed, 0.92-1.17x (bf16, M = K = 4096 / 8192, N = 1 / 16 / 32 / 64, all four layouts; H200 2026-11-30,
    gemm-smalln-4c7aae9, docs/gemm.md follow-up 35); fp16 at 8192 0.96-1.09x transposed; fp8 e4m3 NT (N = 16 / 64)
    0.50-0.67x against 0.81-1.01x transposed (torch._scaled_mm); int8 NT (N = 16 / 32 / 64) 0.55-0.91x against
    1.05-1.41x (torch._int_mm, gemm-smalln-int8-6bb90fc)."""
    return p.n <= 64 < p.m and p.itemsize <= 2 and p.arch in ("sm90", "sm80")


def _heuristic(p: Problem) -> GemmConfig:
    """The configuration used without tuning (``TILECRAFT_TUNE=0``, the interpreter, AMD).

    sm90 choices measured on the H200 (2026-11-21, ``benchmarks/gemm_tune.py``, 8192^3): TMA
    128x256 tiles, two warpgroups, 3 stages for bf16/fp16 (K step 64; 1.01-1.05x torch in all four
    transposes), fp8/int8 (K step 128) and tf32 (32); 3xTF32 128x128x32 (a 128x256 accumulator
    set with the split operands spills: 57.7 against 80.5 for 128x128x64); fp64 64x128x16 DMMA
    (0.95-0.97x cuBLAS); fp32 FMA 64x128x32 (0.91x)."""
    if p.arch == "interpreter":
        # Every Triton op is a numpy call per program: few, mid-sized programs run fastest.
        bk = 32 if p.k > 16 else 16
        return GemmConfig("pointer", 32, 32, bk, group_m=4, num_warps=4, num_stages=1)
    if p.dtype == "fp64":
        if p.arch == "sm90" and math.ceil(p.m / 64) * math.ceil(p.n / 64) * p.batch < 1.5 * p.sms:
            # under a wave and a half of 64x64 tiles: 32x32x32 tiles of two warps, four times the programs (H200,
            # 2026-12-01, gemm-fp64-probe, x cuBLAS in the same run): 512^3 0.858x, 768^3 0.847x against 0.548x /
            # 0.662x on 64x64x32 (32x64 of four warps 0.828x / 0.788x, split-K 2-4 on 64x64 0.69-0.72x); at 1024^3
            # (256 tiles of 64x64) 64x64x32 stays (0.865x against 0.717x)
            return GemmConfig("pointer", 32, 32, 32, num_warps=2, num_stages=3)
        if p.arch == "sm90" and math.ceil(p.m / 64) * math.ceil(p.n / 128) * p.batch < 2 * p.sms:
            # under two waves of 64x128 tiles: 64x64x32, chosen by the tuner at 512^3 and 1024^3 (H200,
            # 2026-12-01, cliff-gemm-tuned-4e0463a: 0.542x / 0.840x cuBLAS against 0.314x / 0.735x)
            return GemmConfig("pointer", 64, 64, 32, num_warps=4, num_stages=3)
        return GemmConfig("pointer", 64, 128 if p.arch == "sm90" else 64, 16, num_warps=4, num_stages=3)
    if p.precision == "ieee" and p.dtype == "fp32":
        if p.fma_ok:
            return fma_config(p)
        if p.arch == "cdna":
            return GemmConfig("pointer", 128, 128, 16, group_m=8, num_warps=8, num_stages=2)
        return GemmConfig("pointer", 64, 128, 32, num_warps=4, num_stages=3)  # 46.7 TFLOP/s, 0.91x
    if small_n_transposed(p):
        pt = transposed_problem(p)
        cfg = replace(_small_m_config(pt), transposed=True)
        if ((cfg.block_m, cfg.block_n, cfg.num_warps, cfg.split_k) == (32, 64, 4, 1) and p.a_kmajor and not p.b_kmajor
                and 0.9 * p.sms <= math.ceil(pt.n / 64) * p.batch <= p.sms):
            # NN (C^T on TT's layout) at 8192 x 32: 8 warps 35.5 against 44.0 us (0.975x against 0.792x torch,
            # whose slices spread 0.71-0.89; gemm bench 0.912x); TN keeps 4 (1.026x against 0.951x). The same
            # kernel on TT's own M = 32 product is faster with 4 (1.123x / 1.145x): what differs is not found.
            # H200 2026-11-30, interleave-smalln-a966aa4, docs/gemm.md follow-up 35
            cfg = replace(cfg, num_warps=8)
        return cfg
    if p.m <= 64 and p.arch != "cdna":
        return _small_m_config(p)
    if p.arch == "cdna":
        # 64 KB of LDS and Triton's AMD stream pipeliner (num_stages 2): two stages of the A and B
        # tiles must fit, so the tile shrinks as the element grows.
        if p.itemsize >= 4:
            return GemmConfig("pointer", 128, 128, 16, group_m=8, num_warps=8, num_stages=2)
        bk = 64 if p.itemsize == 1 else 32
        return GemmConfig("pointer", 256, 256, bk, group_m=8, num_warps=8, num_stages=2)
    big = p.m * p.n * p.batch >= 2 * p.sms * 128 * 256  # two waves of 128x256 tiles or more
    bk = 128 if p.itemsize == 1 else (32 if p.itemsize == 4 else 64)
    # Copies for the TMA kernel cost a pass over an operand: worth it against the pointer kernel's
    # scalar loads on unaligned rows (8191^3 bf16: 30 TFLOP/s; 997x1009x1013: TMA 64x128 with both
    # copies 1.22x torch, the pointer kernel 0.70x, H200 2026-11-21, gemm-llm-followup-296fd54), not
    # for thin products (below 512 rows and columns: not measured, left on the pointer kernel).
    tma = p.arch == "sm90" and p.tma_ok and (p.tma_copies == 0 or min(p.m, p.n) >= 512
                                             or p.dtype in ("fp32", "int8", "fp8_e4m3", "fp8_e5m2"))
    gluon_key = "int8" if p.dtype == "int8" else p.precision
    if big and p.arch == "sm90" and p.gluon_ok and gluon_key in GLUON_HEURISTIC:
        return GLUON_HEURISTIC[gluon_key]
    if big and p.arch == "sm90" and p.gluon_ok and p.mn_regs_ok:
        # tf32 with one operand MN-major (NN, TT): read into registers on the Gluon kernel, no
        # K-major copy (H200, 8192^3, 2026-11-25, gemm-odd-tf32-44db7cb: NN 0.944x / TT 0.940x
        # torch with TF32 against 0.885x / 0.907x for the TMA kernel after its copy of 466 us), its rows
        # read in pairs (``row_perm=2``: half the shared-memory wavefronts, tensor pipe 87.9 -> 89.7%) and
        # tile rows grouped by 16 (by arithmetic a fifth fewer distinct bytes a K step): NN 8192^3 in
        # one-second windows interleaved with torch 0.979x -> 0.987 (pairs) -> 0.996 (and GROUP_M 16);
        # H200 2026-11-30, docs/gemm.md follow-up 33
        return GemmConfig("gluon", 128, 256, 32, group_m=16, num_warps=8, num_stages=3, mn_regs=True, row_perm=2)
    if (p.arch == "sm90" and p.gluon_ok and p.mn_regs_ok and p.precision == "tf32" and p.tma_copies
            and min(math.ceil(p.m / 128) * math.ceil(p.n / 256), math.ceil(p.n / 128) * math.ceil(p.m / 256))
            * p.batch >= p.sms // 2):
        # the same below two waves, down to half a wave of 128x256 tiles (either orientation), where the TMA kernel
        # would copy the MN-major operand K-major on every call: tf32 NN 2048^3 Gluon 128x256x32 s4 (the tuner's
        # choice) 1.056x torch against 0.584x for the TMA kernel and its copy (H200, 2026-12-01,
        # cliff-gemm-tuned-4e0463a). Fewer tiles keep the TMA kernel, whose smaller tiles and split-K fill the SMs
        # (not measured on the Gluon tile: a bug hunt counted 4-16x longer chains of work per SM there)
        return GemmConfig("gluon", 128, 256, 32, group_m=8, num_warps=8, num_stages=4, mn_regs=True, row_perm=2)
    if (p.arch == "sm90" and p.gluon_ok and p.mn_regs_ok and p.precision == "tf32" and p.tma_copies and p.batch > 1
            and math.ceil(p.m / 128) * math.ceil(p.n / 128) * p.batch >= p.sms // 4):
        # a batch under half a wave of 128x256 tiles: 128x128 register tiles, not the TMA kernel and its K-major
        # copy of B a call (H200, 2026-12-01, gemm-ragged-probe-3, x torch): 8 x 512^2 x 1000 NN (128 tiles of
        # 128x128) 1.154 against 0.444, 16 x 200 x 256 x 100 TT (64 tiles) 1.077 against 0.706 (128x256: 0.864 /
        # 0.670). Not measured under 64 tiles
        return GemmConfig("gluon", 128, 128, 32, group_m=8, num_warps=8, num_stages=5, mn_regs=True, row_perm=2)
    if (big and p.arch == "sm90" and p.gluon_ok and p.precision == "tf32" and p.tma_copies == 0
            and math.ceil(p.m / 128) * math.ceil(p.n / 256) * p.batch >= TF32_GLUON_ROUNDS * p.sms):
        # tf32 NT (both operands K-major, nothing for registers) on the Gluon kernel with GROUP_M 16: 8192^3 in
        # one-second windows interleaved with torch 1.013x (slices 1.012-1.015) against 1.003x for the TMA
        # kernel's rule (GROUP_M 8: 1.001x); at 4096^3 (2 rounds of tiles) the Gluon tile read 0.977x against
        # 0.997x, so fewer rounds keep the TMA kernel. H200 2026-11-30, interleave-tf32nt-f5dc2e3, docs/gemm.md
        # follow-up 34
        return GemmConfig("gluon", 128, 256, 32, group_m=16, num_warps=8, num_stages=3)
    if (big and tma and p.itemsize == 2 and p.tma_copies == 0 and not p.rows_128 and (p.k > 128 or not p.gluon_ok)
            and _pad_pays(p)):
        # rows 16- but not 128-byte aligned: pad_rows_kernel copies them into 128-byte rows first
        # (H200, bf16 NN 3000x7000x5000, 2026-11-25, gemm-odd-tf32-44db7cb: TMA 256x128 s4 padded
        # 0.839x torch, Gluon 128x256 s4 padded 0.786x, unpadded Gluon 0.725x / TMA 0.708x; the
        # copies alone 16.5 + 39.0 us at 3.6 TB/s). Not for K of one or two steps where the Gluon kernel takes the
        # call: 4096^2 x 16 padded 0.725x, the Gluon kernel unpadded 1.116x (H200, 2026-12-01,
        # cliff-gemm-tuned-4e0463a); calls it does not take (batches, bf16 reading C) pad as before (not measured)
        return GemmConfig("tma", 256, 128, bk, group_m=8, num_warps=8, num_stages=4, pad_rows=True)
    if (big and p.arch == "sm90" and p.gluon_ok and p.tma_copies == 0 and _gluon16_measured(p)):
        # bf16 on the Gluon kernel (H200, 2026-11-21, gemm-gluon16-sweep-af91216, against the TMA
        # kernel in the same run): 8192^3 NN / NT / TT 1.019 / 1.020 / 1.020x torch (TMA 1.013 /
        # 0.992 / 0.991); M = 4096 LLM products 0.985-1.014x (TMA 0.944-0.990); fp16 8192^3
        # (2026-11-25, gemm-odd-tf32-44db7cb) NT / TN / TT 1.038 / 1.036 / 1.019x (TMA 1.014 /
        # 0.992 / 1.011x). The tile by the last waves' fill (:func:`_gluon16_tile`).
        return _gluon16_tile(p)
    if tma and p.precision == "tf32x3":
        # three wgmmas per step: 128x128x64, 2 stages, 80.5 TFLOP/s; 128x256x32 spills (57.7)
        return GemmConfig("tma", 128, 128, 64, group_m=8, num_warps=8, num_stages=2)
    if big and tma and p.itemsize == 2 and p.k <= 1024:
        # a short inner dimension (8-16 K steps a tile) where the Gluon kernel does not take the call
        # (a 16-bit product reading C): the flattened loop issues the next tile's loads
        # during the epilogue (H200, 2026-11-30, gemm-tune-shortk: bf16 4096^2 x 512 TN / NN / NT
        # 0.979 / 0.971 / 0.967x torch against 0.875 / 0.881 / 0.889x unflattened and 0.851 / 0.844 /
        # 0.842x for 256x128 s4; x 1024 TN 0.983x against 0.910x; fp16 TN / NN x 512 0.953 / 0.968x)
        return GemmConfig("tma", 128, 256, bk, group_m=8, num_warps=8, num_stages=3, flatten=True)
    if big and tma:
        if p.itemsize == 2 and p.m * p.n * p.batch < 48 * 2**20:
            # a few waves only (4096^2 .. 4096x11008): 256x128, 4 stages, chosen by the tuner on
            # the H200 for every such LLM shape (4096^3: 672 TFLOP/s against 613 for 128x256 s3)
            return GemmConfig("tma", 256, 128, bk, group_m=8, num_warps=8, num_stages=4)
        return GemmConfig("tma", 128, 256, bk, group_m=8, num_warps=8, num_stages=3)
    if big:
        # pointer kernel, 16-bit: 128x256x64 w8 s3 627 TFLOP/s (0.92x torch), 128x128x64 w8 s4 614
        if p.itemsize == 2:
            return GemmConfig("pointer", 128, 256, 64, group_m=8, num_warps=8, num_stages=3)
        return GemmConfig("pointer", 128, 128, bk, group_m=8, num_warps=8, num_stages=4)
    return _fill_config(p, "tma" if tma else "pointer", bk)


def config_space(p: Problem) -> list[GemmConfig]:
    """Candidates for tuning on this problem, pruned by shared-memory fit; the heuristic first."""
    cands: list[GemmConfig] = [heuristic(p)]
    if p.arch == "interpreter":
        return cands
    if p.fma_ok:
        split = split_to_fill(math.ceil(p.m / 64) * math.ceil(p.n / 128) * p.batch, p.k, 32, p.sms)
        fma = [FMA_HEURISTIC, FMA_SMALL_M, *FMA_SPACE] + [replace(FMA_HEURISTIC, split_k=s) for s in (2, 4, 8) if s <= 2 * split]
        # 128x128 at 8 warps, split: M = 96 / 128 / 256 0.907 / 0.919 / 0.912x against the heuristic's 0.887 /
        # 0.898 / 0.893x (H100, gemm-fma-midm-f68d964), 0.77-0.79x at M = 192: the tuner's to pick
        fma += [replace(FMA_SPACE[0], split_k=s) for s in (2, 4) if s <= 2 * split]
        if p.b_kcontig:
            fma.append(replace(FMA_HEURISTIC, mn_copy="b"))
        if p.m <= 32:
            fma += [replace(FP32_SMALL_M, block_m=16 if p.m <= 16 else 32, split_k=s) for s in (1, 2, 4, 8)]
        cands += [c for c in fma if c != cands[0]]
    if p.m == 1:
        # matrix-vector tiles (BLOCK_M 1: no tl.dot); H100 2026-11-26 (benchmarks/gemm_gemv.py): fp32 1 x 4096
        # x 4096 1x64x128 split 8 0.891x cuBLAS against the heuristic's 0.857x, 1 x 8192^2 1x128x64 split 4
        # 0.998x (0.961x); bf16 1 x 11008 x 4096 split 4 0.947x torch (0.911x), 1 x 4096^2 0.85x (1.035x)
        cands += [GemmConfig("pointer", 1, bn, bk, group_m=1, num_warps=4, num_stages=4, split_k=s)
                  for bn, bk, s in ((64, 128, 8), (128, 64, 4), (128, 64, 8)) if p.k >= s * 2 * bk]
    if p.dtype == "fp64" or (p.dtype == "fp32" and p.precision == "ieee"):
        for bm, bn, w in ((64, 64, 4), (128, 64, 4), (128, 128, 8), (64, 128, 4), (32, 32, 2), (32, 64, 4)):
            for bk in (16, 32):
                for st in (2, 3):
                    cands.append(GemmConfig("pointer", bm, bn, bk, num_warps=w, num_stages=st))
    elif p.m <= 64:
        bm = 16 if p.m <= 16 else (32 if p.m <= 32 else 64)
        for bn in (32, 64, 128):
            for bk in (128 // p.itemsize, 256 // p.itemsize):
                for split in (1, 2, 4):
                    cands.append(GemmConfig("pointer", bm, bn, bk, group_m=1, num_warps=4, num_stages=4,
                                            split_k=split))
        for bn in (32, 64):
            cands.append(GemmConfig("pointer", bm, bn, 256 // p.itemsize, group_m=1, num_warps=4, num_stages=6))
    else:
        bk = 128 if p.itemsize == 1 else (32 if p.itemsize == 4 else 64)
        if p.arch == "sm90" and p.gluon_ok and p.itemsize == 2:
            for c in (GemmConfig("gluon", 128, 256, 64, num_warps=8, num_stages=4),
                      GemmConfig("gluon", 128, 128, 64, num_warps=8, num_stages=5),
                      GemmConfig("gluon", 128, 128, 64, num_warps=8, num_stages=5, block_n2=64),
                      GemmConfig("gluon", 64, 128, 64, num_warps=4, num_stages=6, block_n2=64),
                      GemmConfig("gluon", 64, 128, 64, num_warps=4, num_stages=4),
                      GemmConfig("gluon", 64, 128, 64, num_warps=4, num_stages=5, cluster_m=2),
                      GemmConfig("gluon", 128, 256, 64, num_warps=8, num_stages=4, cluster_m=2),
                      GemmConfig("gluon", 64, 64, 64, num_warps=4, num_stages=8)):
                if c.cluster_m > 1 and (math.ceil(p.m / c.block_m) < 2 or not clusters_enabled()):
                    continue  # one tile row: no partner to share B with; or clusters not enabled
                cands += [c] + ([replace(c, pad_rows=True)] if not p.rows_128 else [])
                if p.epilogue in ("bias", "c"):  # C and bias prefetched into L2 by the producer
                    cands.append(replace(c, epi_prefetch=True))
        if p.arch == "sm90" and p.gluon_ok and p.itemsize != 2:
            for c in (*GLUON_HEURISTIC.values(), GemmConfig("gluon", 128, 256, 32, num_warps=8, num_stages=3)):
                if (c.block_k == 128) == (p.dtype == "int8") and (c.flush > 1) == (p.precision == "tf32x3"):
                    cands.append(c)
            if p.precision == "tf32x3":
                cands.append(GemmConfig("gluon", 128, 128, 32, num_warps=8, num_stages=3, flush=2))
            if p.mn_regs_ok:
                for st in (3, 4):
                    cands.append(GemmConfig("gluon", 128, 256, 32, num_warps=8, num_stages=st, mn_regs=True,
                                            row_perm=2))
            if p.precision == "tf32" and p.tma_copies == 0:  # NT: the rule's GROUP_M 16 from 8 rounds
                cands.append(GemmConfig("gluon", 128, 256, 32, group_m=16, num_warps=8, num_stages=3))
        if p.arch == "sm90" and p.tma_ok and p.precision == "tf32x3":
            # 3xTF32 on operands split before the GEMM (H200, 8192^3, gemm-explore-f49c9d4: 128x256x32
            # s2 78.6 / 78.2 TFLOP/s NT / NN against 79.6 / 76.5 for the heuristic; 128x128x32 s3 73.2)
            for bm, bn, st in ((128, 256, 2), (128, 128, 3)):
                cands.append(GemmConfig("tma", bm, bn, 32, group_m=8, num_warps=8, num_stages=st, presplit=True))
        if p.arch == "sm90" and p.tma_ok:
            for bm, bn, w in ((128, 256, 8), (256, 128, 8), (128, 128, 8), (64, 128, 4), (128, 64, 4), (64, 64, 4)):
                for st in (3, 4):
                    cands.append(GemmConfig("tma", bm, bn, bk, group_m=8, num_warps=w, num_stages=st))
            if p.itemsize == 2 and p.k <= 2048:  # short K: the flattened loop (see _heuristic)
                cands += [GemmConfig("tma", bm, bn, bk, group_m=8, num_warps=8, num_stages=3, flatten=True)
                          for bm, bn in ((128, 256), (256, 128))]
            if p.m * p.n * p.batch < 2 * p.sms * 128 * 256:
                # few tiles: split-K inside the persistent grid, and deeper pipelines on small tiles
                for bm, bn, w, st in ((128, 128, 8, 4), (128, 64, 4, 6), (64, 128, 4, 6)):
                    tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn) * p.batch
                    for split in sorted({tma_split(tiles, math.ceil(p.k / bk), p.sms), 2, 4}):
                        if split > 1 and math.ceil(p.k / bk) >= 4 * split:
                            cands.append(GemmConfig("tma", bm, bn, bk, group_m=8, num_warps=w, num_stages=st,
                                                    split_k=split))
                for bm, bn in ((128, 64), (64, 128), (64, 64)):
                    cands.append(GemmConfig("tma", bm, bn, bk, group_m=8, num_warps=4, num_stages=6))
        if not (p.arch == "sm90" and p.tma_ok) or p.tma_copies:
            for bm, bn, w in ((128, 128, 8), (128, 128, 4), (64, 128, 4), (128, 64, 4)):
                for st in (3, 4):
                    cands.append(GemmConfig("pointer", bm, bn, bk, group_m=8, num_warps=w, num_stages=st))
        if p.m * p.n <= 4 * p.sms * 128 * 128 and p.k >= 4 * bk:
            for split in (2, 4):
                cands.append(GemmConfig("pointer", 64, 128, bk, num_warps=4, num_stages=4, split_k=split))
                cands.append(GemmConfig("pointer", 128, 128, bk, num_warps=8, num_stages=3, split_k=split))
    if small_n_transposed(p):  # the small-M candidates on the transpose (the heuristic's among them)
        cands += [replace(c, transposed=True) for c in config_space(transposed_problem(p))]
    seen, out = set(), []
    for c in cands:
        if c not in seen and fits(c, p) and not gluon_batch_misfit(p, c):
            seen.add(c)
            out.append(c)
    return out


def tune(p: Problem, candidates: Sequence[GemmConfig], time_config: Callable[[GemmConfig], float | None],
         progress: Callable[[int, int, GemmConfig], None] | None = None) -> tuple[GemmConfig, list[dict]]:
    """Time every candidate (``time_config`` returns ms, or None when the candidate failed to
    compile or to match the reference) and return the fastest with the table of timings."""
    table, best, best_ms = [], None, math.inf
    for i, cfg in enumerate(candidates):
        if progress:
            progress(i, len(candidates), cfg)
        ms = time_config(cfg)
        table.append({"config": cfg.as_dict(), "ms": ms})
        if ms is not None and ms < best_ms:
            best, best_ms = cfg, ms
    if progress:
        progress(len(candidates), len(candidates), best or candidates[0])
    return best or candidates[0], table
