"""``tilecraft.attention``: validation, configuration, launch, torch.library registration and autograd
of the flash-attention kernels (``tilecraft.kernels.attention``).

Layouts (``layout=``):

====== ================================ ==============================================================
layout q (k, v)                          notes
====== ================================ ==============================================================
bhsd   (B, H, S_q, D)  (B, H_kv, S_k, D) the default; lse is (B, H, S_q)
bshd   (B, S_q, H, D)  (B, S_k, H_kv, D) FlashAttention's own layout; lse is (B, H, S_q)
thd    (T_q, H, D)     (T_k, H_kv, D)    packed variable-length batch with ``cu_seqlens_q/k``; lse (H, T_q)
====== ================================ ==============================================================

Any batch/head/sequence strides are taken as they are (no copies); the head dimension must be
contiguous. Causal masking is bottom-right aligned (FlashAttention-2): query i sees key j when
j <= i + S_k - S_q; a query that sees no key (S_q > S_k) gets output 0 and lse -inf.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, replace

import torch

from tilecraft.kernels import attention as _k
from tilecraft.ops.launch import (PLAIN_TENSORS, ReplayCache, device_capability, eager_direct, empty,
                                  gluon_descriptor, has_storage, pdl_env, refuse_forward_ad, remember, replay_enabled,
                                  run_kernel, run_op, signature, zeros)
from tilecraft.reference.attention import (
    attention_backward_reference,
    attention_reference,
    attention_varlen_reference,
)

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
LAYOUTS = ("bhsd", "bshd", "thd")
MAX_HEAD_DIM = 256
LOG2E = 1.4426950408889634


#: ``FwdConfig.order`` for "the group size ``causal_group`` gives for the call and the GPU's L2"
ORDER_AUTO = -1


def _check_order(order) -> None:
    """``FwdConfig.order`` / ``BwdConfig.order``: heads per group (0: none) or ``ORDER_AUTO``."""
    if isinstance(order, bool) or not isinstance(order, int) or order < ORDER_AUTO:
        raise ValueError(f"order must be an integer >= 0 (heads per group; 0: none) or ORDER_AUTO (-1), got {order!r}")


@dataclass(frozen=True)
class FwdConfig:
    """Forward launch: BLOCK_M queries per program, BLOCK_N keys per loop step; ``tma`` moves the
    tiles with tensor descriptors (dense layouts whose strides are 16-byte multiples; others fall
    back to pointer loads)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    tma: bool = False
    warp_specialize: bool = False  # Triton's automatic warp specialisation of the unmasked key loop
    # TMA only: about one program per SM walking the tiles (not measured yet). The loop across tiles
    # takes more shared memory: 128x128 tiles at D = 128 fit sm90 with 2 stages (197 KB), not 3 (263 KB).
    persistent: bool = False
    # TMA only: ``attention_fwd_ws_kernel``, one key loop under Triton's automatic warp specialisation
    # (sm90: a TMA producer warpgroup and two consumer warpgroups of block_m / 2 rows each; give
    # num_warps=4, the warps of one consumer warpgroup). Experimental: wrong (NaN) on an H200 so far,
    # refused on a GPU unless PRODUCER_CONSUMER_ON_GPU is set.
    producer_consumer: bool = False
    # sm90 only: ``kernels.attention_gluon.attention_fwd_gluon_kernel`` (Gluon: explicit TMA ring,
    # wgmma, block_m = 128 over num_warps = 8); ``overlap`` = FlashAttention-3's intra-warpgroup
    # overlap of the softmax of tile j with P_{j-1} V_{j-1}. Calls it cannot take (other GPUs, CPU,
    # packed batches, head dims other than 64/128/256, strides TMA cannot address) run the Triton kernels.
    gluon: bool = False
    overlap: bool = True
    # with gluon: ``attention_fwd_gluon_ws_kernel`` instead, warp-specialised (a 1-warp TMA loader and
    # two consumer warpgroups of 64 rows, each its own partition; ``pingpong``: the consumers take
    # turns at the tensor cores, FlashAttention-3's inter-warpgroup schedule: True / 1 hands the turn over by
    # mbarriers, 2 by named barriers (``bar.sync`` / ``bar.arrive``, as FlashAttention-3), 0 / False: no turns).
    # num_warps = 8 counts the consumers' warps (the loader's warp comes on top).
    ws: bool = False
    pingpong: bool | int = True
    # ws only, at most 2 stages: the consumers release the K/V ring's slots to the loader by named barriers
    # (every consumer thread's ``bar.arrive``, the loader's ``bar.sync``) instead of "empty" mbarriers
    named_slots: bool = False
    # Gluon only: the odd columns of every ``poly``-th key tile take a polynomial exp2 on the FMA units
    # instead of the MUFU (FlashAttention-4's trick; 0: every exp2 on the MUFU). With ws, ``persistent``
    # runs one program per SM walking the tiles (the loader running ahead into the next tile).
    poly: int = 0
    # ws only: consumer warpgroups of 64 rows (2, or 3 with block_m = 192 and num_warps = 12); ``early``:
    # P's conversion (and, plain order, O's rescale) right after the softmax, in its basic block;
    # ``tree``: the row max / row sum as in-register trees, l kept as per-lane partial sums.
    consumers: int = 2
    early: bool = False
    tree: bool = False
    # Gluon only: a row's running max is raised only when a key tile exceeds it by more than 2^8 (log2 units),
    # and each warp branches over its O rescale when none of its 16 rows raised it (a warp vote;
    # FlashAttention-4's conditional rescaling, ``kernels.attention_gluon._rescale``)
    lazy: bool = False
    # causal calls only (ignored otherwise; not with persistent or producer_consumer): each program
    # takes two query tiles, the heavy n_m - 1 - i and the light i, so every program walks about the
    # same number of keys and the launch has no tail of long tiles (grid (cdiv(n_m, 2), B * H)).
    paired: bool = False
    # one-tile-per-program kernels on NVIDIA: the register cap per thread (0: the compiler's choice), e.g.
    # 128 so two 8-warp programs share an SM where the compiler would take a few registers more
    maxnreg: int = 0
    # causal calls on the Gluon kernels only (ignored otherwise; not with paired): G > 0 launches the tiles
    # in groups of G (batch, head)s, inside a group every head's heaviest query tile first, then every
    # head's next one (``kernels.attention_gluon._grouped``): the lightest tiles come last, so the
    # launch's tail is short, and the programs in flight share the K/V of G heads in L2. 0: each head's
    # tiles together, heaviest first. ``ORDER_AUTO`` (-1): G from the call and the GPU's L2 (``causal_group``).
    order: int = 0

    def __post_init__(self):
        rows = 64 * self.consumers
        if self.gluon and (self.block_m != rows or self.num_warps != 4 * self.consumers or self.producer_consumer
                           or (self.persistent and not self.ws)):
            raise ValueError("a Gluon forward config takes block_m=64*consumers, num_warps=4*consumers (warpgroups "
                             f"of 64 rows), no producer_consumer, persistent only with ws, got {self}")
        if (self.consumers != 2 or self.early or self.tree) and not self.ws:
            raise ValueError(f"consumers, early and tree are options of the ws Gluon forward, got {self}")
        if self.lazy and not self.gluon:
            raise ValueError(f"lazy (the conditional rescale) is an option of the Gluon forwards, got {self}")
        if self.consumers not in (2, 3):
            raise ValueError(f"ws takes 2 or 3 consumer warpgroups, got {self}")
        if self.poly and not self.gluon:
            raise ValueError(f"poly (the FMA-unit exp2) is a Gluon kernel option, got {self}")
        if self.ws and not self.gluon:
            raise ValueError(f"ws (the warp-specialised Gluon forward) needs gluon=True, got {self}")
        if self.producer_consumer and not self.tma:
            raise ValueError("producer_consumer needs tma=True (the producer warpgroup loads through tensor descriptors)")
        if self.producer_consumer and self.persistent:
            raise ValueError("producer_consumer and persistent cannot be combined (one loop per kernel)")
        if not isinstance(self.paired, bool):
            raise TypeError(f"paired must be a bool, got {self.paired!r}")
        if self.named_slots and not (self.ws and self.num_stages <= 2):
            raise ValueError(f"named_slots is an option of the ws Gluon forward with at most 2 stages, got {self}")
        if self.pingpong not in (0, 1, 2):  # bools included
            raise ValueError(f"pingpong is False/0 (no turns), True/1 (mbarrier turns) or 2 (named barriers), got {self}")
        if self.maxnreg and (self.ws or self.maxnreg < 24 or self.maxnreg > 255):
            raise ValueError(f"maxnreg is 24..255 for the one-tile-per-program kernels (ws sets its own), got {self}")
        _check_order(self.order)
        if self.order and (self.paired or not self.gluon):
            raise ValueError(f"order (grouped heavy-first tiles) is an option of the Gluon forwards without paired "
                             f"tiles, got {self}")
        if self.paired and (self.persistent or self.producer_consumer):
            raise ValueError(f"paired causal tiles are an option of the one-tile-per-program kernels and ws (not "
                             f"persistent or producer_consumer), got {self}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BwdConfig:
    """Backward launch: the dK/dV kernel walks BLOCK_M1 queries at a time over a tile of BLOCK_N1
    keys; the dQ kernel walks BLOCK_N2 keys at a time over a tile of BLOCK_M2 queries."""

    block_m1: int
    block_n1: int
    block_m2: int
    block_n2: int
    num_warps: int
    num_stages: int
    dq_num_warps: int = 0  # the dQ kernel's; 0: the same as the dK/dV kernel's
    dq_num_stages: int = 0
    # causal calls only: each dK/dV program takes key tiles i and n_k - 1 - i, each dQ program query
    # tiles n_m - 1 - i and i (the forward's ``paired``): about the same work per program
    paired: bool = False
    # deterministic=False only: dQ shares added by TMA bulk reductions (sm90+ where the fp32 rows are
    # 16-byte multiples) instead of element-wise atomics
    dq_tma: bool = True
    # the dK/dV kernel's stages when it also adds dQ (deterministic=False; 0: num_stages): its dQ tile
    # takes shared memory the deterministic kernel's ring has (D256 at 4 stages: 261 KB, over sm90's 227)
    atomic_num_stages: int = 0
    # causal calls only (not with paired): G > 0 launches the dK/dV (and dQ) programs in the forward's grouped
    # heavy-first order (``FwdConfig.order``) over groups of G K/V heads (query heads for dQ); ``ORDER_AUTO``:
    # the groups from the L2 (``bwd_orders``); 0: each head's tiles in order
    order: int = 0

    def __post_init__(self):
        for name in ("paired", "dq_tma"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        _check_order(self.order)
        if self.order and self.paired:
            raise ValueError(f"order (grouped heavy-first tiles) and paired tiles exclude each other, got {self}")
        n = self.atomic_num_stages
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"atomic_num_stages must be an integer >= 0 (0: num_stages), got {n!r}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DecodeConfig:
    """Split-KV (decode) launch: the key sequence cut into ``splits`` chunks (0: enough chunks to
    give every SM two programs), BLOCK_N keys per loop step, rows = query heads of a group x S_q."""

    block_n: int
    num_warps: int
    num_stages: int
    splits: int = 0
    # with splits = 0: chunks enough for this many programs per SM in one wave
    programs_per_sm: int = 2
    # ``attention_decode_gluon_kernel`` (sm90 only, ``gluon_ok`` calls): one warpgroup of 64 rows,
    # K/V by TMA into a ``num_stages`` ring, both products on wgmma; ``overlap``: the softmax of S_j
    # beside P_{j-1} V_{j-1} (FlashAttention-3's order)
    gluon: bool = False
    overlap: bool = False
    # the Triton kernel merges the chunks itself (the last program of a row tile; no combine kernel)
    fuse: bool = False

    def __post_init__(self):
        if self.gluon and self.num_warps != 4:
            raise ValueError(f"the Gluon decode kernel is one warpgroup (num_warps=4), got {self}")
        if self.overlap and not self.gluon:
            raise ValueError(f"overlap is a Gluon decode option, got {self}")
        if self.fuse and self.gluon:
            raise ValueError(f"fuse is a Triton decode option, got {self}")

    def as_dict(self) -> dict:
        return asdict(self)


def triton_on_cpu() -> bool:
    """True when the Triton interpreter is active (TRITON_INTERPRET=1 was set before import)."""
    return type(_k.attention_fwd_kernel).__name__ == "InterpretedFunction"


def _fix_interpreter_bf16_dot() -> None:
    """Triton 3.6's interpreter multiplies bfloat16 operands of ``tl.dot`` as their raw uint16 bit
    patterns (``InterpreterBuilder.create_dot`` calls ``np.matmul`` on the storage), so every bf16
    product it returns is garbage. Convert bf16 operands to float32 first, as it already does for
    fp8: bf16 products are exact in float32, so this is what a GPU's matrix unit computes. Applied
    only when the interpreter is active; a no-op once Triton fixes it or when already patched."""
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    original = builder.create_dot
    if getattr(original, "_tilecraft_bf16", False):
        return

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        import triton.language as tl

        def widen(x):
            if x.dtype.scalar != tl.bfloat16:
                return x
            data = interp._convert_float(x.data, tl.bfloat16, tl.float32, None).view("float32")
            return interp.TensorHandle(data, tl.float32)
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._tilecraft_bf16 = True
    builder.create_dot = create_dot


def _fix_interpreter_bf16_rounding() -> None:
    """Triton 3.6's interpreter casts float32 to bfloat16 (``x.to(tl.bfloat16)``, a store into a bf16
    tensor) by truncating the mantissa (``InterpreterBuilder.cast_impl`` calls ``_convert_float``
    with no rounding mode), where a GPU rounds to nearest even (``cvt.rn.bf16.f32``): a bias of up to
    one bf16 ulp towards zero in every rounded O and P, which made bf16 results in the interpreter
    several times worse than on a GPU. Round to nearest even (NaN kept quiet), as torch does. Only
    the float32 -> bfloat16 cast changes; every other cast goes to the original. Applied only when
    the interpreter is active (like ``_fix_interpreter_bf16_dot``, for every interpreted kernel:
    it makes the interpreter round as a GPU does); a no-op when already patched."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    original = builder.cast_impl
    if getattr(original, "_tilecraft_rtne", False):
        return

    def cast_impl(self, src, dst_type):
        if not (src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16):
            return original(self, src, dst_type)
        bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
        rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded = np.where(np.isnan(src.data), ((bits >> 16) | 0x40).astype(np.uint16), rounded)
        return interp.TensorHandle(rounded.reshape(np.shape(src.data)), dst_type.scalar)

    cast_impl._tilecraft_rtne = True
    builder.cast_impl = cast_impl


def _fix_interpreter_fp8_dot() -> None:
    """Triton 3.6's interpreter widens fp8 operands of ``tl.dot`` to float16 with a generic bit decoder that
    knows no fp8 e4m3fn NaN (0x7F / 0xFF): it reads them as 480, so a NaN in an fp8 operand left finite results.
    Decode fp8 operands with torch's own float8 types first (exact in float16, NaN kept), as a GPU's matrix unit
    reads them. Applied only when the interpreter is active; a no-op when already patched."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    original = builder.create_dot
    if getattr(original, "_tilecraft_fp8", False):
        return
    types = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        def widen(x):
            kind = types.get(x.dtype.scalar)
            if kind is None:
                return x
            raw = torch.from_numpy(np.ascontiguousarray(x.data).view(np.uint8))
            return interp.TensorHandle(raw.view(kind).to(torch.float16).numpy(), tl.float16)
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._tilecraft_fp8 = True
    create_dot._tilecraft_bf16 = getattr(original, "_tilecraft_bf16", False)
    builder.create_dot = create_dot


if triton_on_cpu():
    _fix_interpreter_bf16_dot()
    _fix_interpreter_bf16_rounding()
    _fix_interpreter_fp8_dot()


def block_d(head_dim: int) -> int:
    """The head dimension the kernels compute with: the next power of two, at least 16 (the
    smallest matrix-instruction K); the padded columns are masked off."""
    return max(16, 1 << (head_dim - 1).bit_length())


# Interpreter runs: small tiles, so tiny test shapes still cross several tiles, the diagonal and the tails.
INTERPRETER_FWD = FwdConfig(16, 16, 4, 1)
INTERPRETER_BWD = BwdConfig(16, 16, 16, 16, 4, 1)


def _hopper_or_later(device: torch.device, hopper: bool | None = None) -> bool:
    if hopper is not None:
        return hopper
    return device.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(device)[0] >= 9


#: The Gluon forward's tiles per (head dimension, causal), used by ``default_fwd_config`` on sm90 GPUs
#: where they were measured faster than the Triton kernels (H200, 2026-11-21, bf16, the issue's shapes;
#: docs/attention.md rounds 5 and 6). D = 128 and 256 run the warp-specialised ping-pong kernel (``ws``,
#: run at 95831b7: 589 / 549 and 627 / 563 TFLOP/s against 494 / 446 and 519 / 461 for the one-partition
#: kernel in the same run); D = 64 keeps the one-partition plain order (452 against 390 for ``ws``);
#: D = 64 causal stayed on Triton (314; ``ws`` 309, one-partition 268) until round 11 below.
#: Round 10 (H200, 2026-11-25; ratios to cuDNN in the same process, medians of alternating rounds): D = 128 with
#: ``early`` and ``tree`` 0.973 / 0.981 (two runs, `attention-round10-95ae808.json`, `attention-round10b-e049503.json`)
#: against 0.941 / 0.954 for the plain round-6 kernel; D = 128 causal with the overlap, ``early`` and ``tree`` 1.019
#: against 0.962 (round-6) and 0.982 (plain order with early and tree) in run b; D = 256 overlap with ``tree``
#: 1.030 / 1.030 and causal 1.021 / 1.022 against 0.975 / 0.972 and 0.982 / 0.972 (round 6).
#: Round 11 (H100, 2026-11-25, `attention-round11{,b}-*.json` in results/2026-11-25-h100): causal calls pair their
#: query tiles (``paired``: a program takes the heavy tile n_m - 1 - i and the light tile i, so the launch has no
#: tail of long tiles): D = 128 causal 1.047 against 1.011 for the unpaired default in the same run, D = 256
#: causal 1.083 against 1.008; D = 64 causal moves from the Triton kernel (0.850 / 0.864) to the one-partition
#: Gluon kernel, paired and capped at 128 registers (uncapped it compiles to 132 and only one program fits an
#: SM): 0.998 / 0.979 in two runs (capped alone 0.981).
#: Round 17 (H200, 2026-11-27, `attention-round17-6cf91ef.json`): D = 64 causal launches its tiles heaviest first
#: inside groups of heads (``order``, the group from the L2: ``causal_group``) instead of pairing them: 1.032
#: against 0.975 (rounds 1.027-1.039 against 0.974-0.976); D = 128 / 256 causal keep their pairs (order 4: 1.046 /
#: 1.113 against 1.064 / 1.093, within the rounds' spread).
#: Round 16 (2026-11-27, docs/attention.md): D = 64 non-causal on the warp-specialised kernel with three consumer
#: warpgroups (192-row tiles), persistent (one program per SM walking the tiles): 1.021 (H200, rounds 1.019-1.032)
#: and 1.027 (H100, rounds 1.021-1.052) against 0.985 / 0.987 for the one-partition kernel in the same runs
#: (`attention-round16b-011e18f.json`, `attention-round16c-7b6e714.json`); the same kernel causal ran at 0.56.
#: Round 20 (H200, 2026-11-30, `results/2026-11-30-h200-twentyfourth/attention-round20*.json`): every ws default hands
#: its turns over by named barriers and releases the ring's slots by named barriers (``pingpong=2``,
#: ``named_slots``), and D = 128 takes the intra-warpgroup overlap with them: D = 128 1.027 / 1.012 against 0.992 /
#: 0.980 for the round-10 default in the same runs (the overlap alone 1.000, with named turns only 0.985); D = 64
#: 1.034 / 1.033 against 1.027 / 1.022; D = 256 1.029 / 1.028 against 1.002 / 1.016; D = 128 causal 1.067 / 1.064
#: against 1.042 / 1.049; D = 256 causal 1.125 against 1.097.
#: Round 21 (H200, 2026-11-30, `results/2026-11-30-h200-twentyfifth/attention-round21*`, each implementation timed after
#: 0.3 s untimed, 5 rounds): FlashAttention-4's conditional rescaling on every ws default (``lazy``: a row's max raised
#: only past 2^8, each warp branching over its O multiplies when none of its rows raised it): D = 256 1.082 against
#: 1.016, D = 256 causal 1.162 against 1.101, D = 128 causal 1.105 against 1.067, D = 64 1.057 against 1.035, D = 128
#: 1.015 against 1.007 (rounds 0.971-1.050); a warpgroup-wide decision (a shared-memory reduction, two bar.syncs per
#: key tile) had lost everywhere (D = 128 0.949).
_NAMED = {"pingpong": 2, "named_slots": True, "lazy": True}
GLUON_FWD: dict[tuple[int, bool], FwdConfig] = {
    (64, False): FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3, persistent=True,
                           **_NAMED),
    (64, True): FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, maxnreg=128, order=ORDER_AUTO),
    (128, False): FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True, tree=True, **_NAMED),
    (128, True): FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True, tree=True,
                           paired=True, **_NAMED),
    (256, False): FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True, **_NAMED),
    (256, True): FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True, paired=True, **_NAMED),
}


def default_fwd_config(head_dim: int, device: torch.device, hopper: bool | None = None,
                       causal: bool = False) -> FwdConfig:
    """What ``tilecraft.attention`` runs forward: on an sm90 GPU the Gluon kernel's tiles where
    ``GLUON_FWD`` has them (head dimensions 64/128/256 where measured faster), else
    ``triton_fwd_config``. ``launch_fwd`` still hands calls the Gluon kernel cannot take
    (``gluon_ok``) to the Triton kernels."""
    key = (head_dim, causal)
    if device.type == "cuda" and key in GLUON_FWD and (hopper if hopper is not None else _is_sm90(device)):
        return GLUON_FWD[key]
    return triton_fwd_config(head_dim, device, hopper)


def triton_fwd_config(head_dim: int, device: torch.device, hopper: bool | None = None) -> FwdConfig:
    """The Triton forward's tiles by padded head dimension, measured on an H200 (2026-11-21,
    ``benchmarks/attention_tune.py``; bf16, causal and not):

    * D <= 64 (B8 H16 S2048): 128x64 tiles, 8 warps: 399 / 315 TFLOP/s (128x128: 336 / 257); causal calls
      pair their query tiles (H100, round 11: 331 / 327 against 310 / 308 TFLOP/s unpaired in the same runs);
    * D = 128 (B4 H16 S4096): 128x128 tiles through tensor descriptors (TMA), 8 warps, 3 stages:
      494 / 434 (pointer loads 466-474 / 425; 128x64: 446-472 / 393-420; warp specialisation: no change);
    * D = 256 (B2 H16 S4096): 128x64 tiles through tensor descriptors (TMA), 8 warps, 2 stages:
      530 / 455 (pointer loads, 128x32: 448 / 383; 128x64 with pointers spills).

    Other GPUs (less shared memory than sm90's 227 KB) get the pointer tiles of ``pointer_fwd_config``.
    ``hopper`` overrides the detection (for cross-compiling on a machine without the GPU)."""
    if device.type != "cuda":
        return INTERPRETER_FWD
    d = block_d(head_dim)
    if not _hopper_or_later(device, hopper):
        return pointer_fwd_config(head_dim, device, hopper)
    if d <= 64:
        return FwdConfig(128, 64, 8, 3, paired=True)
    if d <= 128:
        return FwdConfig(128, 128, 8, 3, tma=True)
    return FwdConfig(128, 64, 8, 2, tma=True)


def pointer_fwd_config(head_dim: int, device: torch.device, hopper: bool | None = None) -> FwdConfig:
    """Tiles with pointer loads only: the fallback of a TMA configuration on tensors descriptors
    cannot address, and the choice on GPUs other than sm90 (tiles sized for 100-160 KB of shared
    memory; not measured here)."""
    if device.type != "cuda":
        return INTERPRETER_FWD
    d = block_d(head_dim)
    if _hopper_or_later(device, hopper):
        return FwdConfig(128, 64, 8, 3) if d <= 64 else FwdConfig(128, 128, 8, 3) if d <= 128 else FwdConfig(128, 32, 8, 3)
    if d <= 64:
        return FwdConfig(128, 64, 4, 3)
    return FwdConfig(128, 64, 8, 2) if d <= 128 else FwdConfig(64, 32, 4, 2)


def default_bwd_config(head_dim: int, device: torch.device, hopper: bool | None = None) -> BwdConfig:
    """Backward tiles by padded head dimension, measured on an H200 (2026-11-21, bf16):

    * D <= 64 (B8 H16 S2048): dK/dV over 32-query steps of 128-key tiles, dQ over 32-key steps of
      128-query tiles, 4 warps: 302 / 206 TFLOP/s (8 warps, 64/128 tiles: 247 / 202);
    * D = 128 (B4 H16 S4096): 64/128 tiles, 8 warps, 3 stages in both kernels: 373 / 306 (2 stages:
      337-340 / 282; 32/128: 266 / 212; 64/64: 169; dQ with 4 warps: 313-325);
    * D = 256: dK/dV 32/64 tiles, dQ 128/32, 8 warps: 191 / 145 (64/32: 143 / 113; far under SDPA;
      larger dK/dV tiles spill).

    dK and dV (BLOCK_N1 x D each, fp32) stay in registers for the whole query walk: 4 warps spilled
    3.9 KB per thread at D = 128 (``bench.attention.compile_report``).

    Causal calls pair their tiles (``paired``; H100, 2026-11-25, medians of 3 alternating rounds,
    `attention-bwd-paired-1b55b5a.json`): D128 causal 302 against 294 TFLOP/s (FA2 233: 1.30x against
    1.26x), D64 causal 178 against 170. Since round 17 they launch in the grouped heavy-first
    order instead (``order=ORDER_AUTO``, ``bwd_orders``; H200, 2026-11-27, `attention-bwd-paired-grouped-701fc14.json`,
    3 alternating rounds): D128 causal 349 against 340 paired (FA2 257: 1.357x against 1.321x), D64 causal 248
    against 242 (1.287x against 1.257x), D256 causal 170 against 162 (`attention-bwd-paired-grouped-5eb29fc.json`:
    0.784x against 0.747x FA2).

    D = 256 on sm90: dK/dV with 4 stages, dQ with 3 (H200, 2026-11-27, `attention-bwd-sweep-*-d256.json`,
    medians of 2 rounds, x FlashAttention-2: 0.906 / causal 0.749 against 0.779 / 0.689 with 2 stages; both
    at 3 stages 0.883 / 0.753; 4 stages in the dQ kernel do not fit shared memory, nor 3 or 4 in the
    dK/dV kernel when it adds dQ atomically: ``atomic_num_stages`` 2 there). Other GPUs keep 2
    stages (less shared memory than sm90's 227 KB). ``hopper`` overrides the detection (cross-compiling)."""
    if device.type != "cuda":
        return INTERPRETER_BWD
    d = block_d(head_dim)
    if d <= 64:
        return BwdConfig(32, 128, 128, 32, 4, 3, order=ORDER_AUTO)
    if d <= 128:
        return BwdConfig(64, 128, 128, 64, 8, 3, order=ORDER_AUTO)
    if _hopper_or_later(device, hopper):
        return BwdConfig(32, 64, 128, 32, 8, 4, dq_num_stages=3, order=ORDER_AUTO, atomic_num_stages=2)
    return BwdConfig(32, 64, 128, 32, 8, 2, order=ORDER_AUTO)


INTERPRETER_DECODE = DecodeConfig(16, 4, 1, 3)
#: The split-KV path takes calls with at most this many queries against at least DECODE_MIN_KEYS keys.
DECODE_MAX_QUERIES = 16
DECODE_MIN_KEYS = 1024


def default_decode_config(head_dim: int, device: torch.device) -> DecodeConfig:
    if device.type != "cuda":
        return INTERPRETER_DECODE
    return DecodeConfig(64 if block_d(head_dim) <= 128 else 32, 4, 3)


#: Rows of a full group tile: the query heads of one K/V head x S_q filling a 64-row program.
DECODE_FULL_ROWS = 64
#: sm90, per head dimension: (the config for full group tiles, G x S_q >= 64; the one for fewer rows).
#: Measured on an H200 (docs/attention.md, round 8, commit 239b0f2): B8 H32/8 S16x8192 went from 73.2%
#: to 82.0% of copy with one program per SM and a 4-stage ring (the Gluon kernel the same way: 80.9%);
#: with fewer rows the Gluon kernel (FlashAttention-3's order) beat the Triton one: 88.9 -> 90.5%
#: (S1 GQA), 91.9 -> 104.4% (B16 H32 S1x4096), 96.3 -> 97.0% (S4x32768). Round 9 (commit eb67ed0):
#: full tiles merge their chunks in the decode kernel (``fuse``, no combine kernel): 79.3 -> 82.4%.
SM90_DECODE: dict[int, tuple[DecodeConfig, DecodeConfig]] = {
    128: (DecodeConfig(64, 4, 4, programs_per_sm=1, fuse=True), DecodeConfig(64, 4, 3, gluon=True, overlap=True)),
}


def sm90_decode_choice(head_dim: int, rows: int) -> DecodeConfig | None:
    """The measured sm90 split-KV launch for ``rows`` = G x S_q rows per K/V head, or None."""
    if head_dim not in SM90_DECODE:
        return None
    full, few = SM90_DECODE[head_dim]
    return full if rows >= DECODE_FULL_ROWS else few


def decode_config(p: Problem, *tensors: torch.Tensor) -> DecodeConfig:
    """The split-KV launch ``attention`` uses for these validated tensors: on sm90 the measured
    choice (``SM90_DECODE``; the Gluon kernel only where ``gluon_ok`` takes the call), else the
    Triton kernel's default."""
    dev = tensors[0].device
    if dev.type == "cuda" and _is_sm90(dev):
        cfg = sm90_decode_choice(p.head_dim, (p.heads // p.kv_heads) * p.seqlen_q)
        if cfg is not None and (not cfg.gluon or gluon_ok(p, *tensors)):
            return cfg
    return default_decode_config(p.head_dim, dev)


def uses_decode(p: Problem) -> bool:
    """Whether ``attention`` takes the split-KV path: few queries against many keys (not packed)."""
    return not p.varlen and p.seqlen_q <= DECODE_MAX_QUERIES and p.seqlen_k >= DECODE_MIN_KEYS


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def _check_tensor(t: object, name: str, dims: int, layout: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        shape = "(T, H, D)" if layout == "thd" else ("(B, H, S, D)" if layout == "bhsd" else "(B, S, H, D)")
        raise ValueError(f"{name} must be {dims}D {shape} for layout {layout!r}, got shape {tuple(t.shape)}")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {t.dtype}; attention supports float16 and bfloat16")
    if t.device.type not in ("cuda", "cpu", "meta"):
        raise ValueError(f"{name} is on device {t.device}; tilecraft runs on CUDA/ROCm GPUs (and CPU)")
    strides = t.stride()
    if t.shape[-1] > 1 and strides[-1] != 1:
        raise ValueError(f"{name} must be contiguous in the head dimension (stride(-1) == 1), got strides {strides}")
    if min(strides) < 0:
        raise ValueError(f"{name} has negative strides {strides}")
    if has_storage(t) and t.data_ptr() % t.element_size():
        raise ValueError(f"{name}'s data pointer is not aligned to its element size")
    return t


def _check_cu(cu: object, name: str, device: torch.device, total: int) -> torch.Tensor:
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of int32 offsets, got {type(cu).__name__}")
    if cu.dtype != torch.int32:
        raise TypeError(f"{name} must be int32, got {cu.dtype}")
    if cu.dim() != 1 or cu.shape[0] < 2:
        raise ValueError(f"{name} must be 1D with batch + 1 >= 2 entries, got shape {tuple(cu.shape)}")
    if cu.device != device:
        raise ValueError(f"{name} is on {cu.device}, q on {device}")
    if cu.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous, got stride {cu.stride(0)}")
    # The values are checked where reading them costs no device synchronisation.
    if cu.device.type == "cpu" and has_storage(cu):
        vals = cu.tolist()
        if vals[0] != 0 or any(b < a for a, b in itertools.pairwise(vals)) or vals[-1] > total:
            raise ValueError(f"{name} must start at 0, never decrease and end at most at {total} "
                             f"(the packed length), got {vals[:8]}{'...' if len(vals) > 8 else ''}")
    return cu


def _check_scale(scale: object, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a number or None, got {type(scale).__name__}")
    try:
        float(scale)
    except OverflowError:
        raise ValueError(f"scale is too large for a floating-point number: {scale!r:.40}...") from None
    if not (math.isfinite(scale) and scale > 0):
        # The kernels take max(qk) * scale for max(qk * scale): true for positive scales only.
        raise ValueError(f"scale must be finite and > 0, got {scale}")
    return float(scale)


@dataclass(frozen=True)
class Problem:
    """A validated call: sizes, and the (B, H, S, D)-ordered views the kernels index through."""

    layout: str
    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int  # the longest query sequence (varlen: max_seqlen_q)
    seqlen_k: int
    head_dim: int
    causal: bool
    scale: float
    varlen: bool


def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, scale: float | None, layout: str,
             cu_seqlens_q: torch.Tensor | None = None, cu_seqlens_k: torch.Tensor | None = None,
             max_seqlen_q: int | None = None, max_seqlen_k: int | None = None) -> Problem:
    """All checks ``attention`` makes before launching anything."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    varlen = layout == "thd"
    dims = 3 if varlen else 4
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_tensor(t, name, dims, layout)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"q has head dimension {d}, k and v {k.shape[-1]}")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dimension must be in [1, {MAX_HEAD_DIM}], got {d}")
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("layout 'thd' (packed sequences) needs cu_seqlens_q and cu_seqlens_k")
        cu_q = _check_cu(cu_seqlens_q, "cu_seqlens_q", q.device, q.shape[0])
        cu_k = _check_cu(cu_seqlens_k, "cu_seqlens_k", q.device, k.shape[0])
        if cu_q.shape != cu_k.shape:
            raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have the same length (batch + 1), got "
                             f"{cu_q.shape[0]} and {cu_k.shape[0]}")
        batch, h, h_kv = cu_q.shape[0] - 1, q.shape[1], k.shape[1]
        s_q = _max_seqlen(max_seqlen_q, cu_q, "max_seqlen_q")
        s_k = _max_seqlen(max_seqlen_k, cu_k, "max_seqlen_k")
    else:
        if cu_seqlens_q is not None or cu_seqlens_k is not None:
            raise ValueError(f"cu_seqlens_q/cu_seqlens_k need layout='thd', got layout {layout!r}")
        seq_axis, head_axis = (2, 1) if layout == "bhsd" else (1, 2)
        batch, h, h_kv = q.shape[0], q.shape[head_axis], k.shape[head_axis]
        s_q, s_k = q.shape[seq_axis], k.shape[seq_axis]
        if k.shape[0] != batch:
            raise ValueError(f"q has batch {batch}, k and v {k.shape[0]}")
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"key/value heads ({h_kv}) must divide query heads ({h})")
    return Problem(layout, batch, h, h_kv, s_q, s_k, d, causal, _check_scale(scale, d), varlen)


#: Problems of earlier eager calls (not packed) by what :func:`validate` reads: the tensors' types, dtypes, devices,
#: layouts, shapes, strides and the 16-byte alignment of their data pointers, and the scalar arguments.
_VALIDATED: dict = {}


def _validated(q, k, v, causal, scale, layout) -> Problem:
    """:func:`validate` of a call without packed sequences, remembered where q, k and v are plain tensors with memory
    (validation was 7.7 us of an eager call's host time on the CPU machine, 2026-12-01, as much as the rest of the call
    before its replay). Only successful validations are remembered, so a bad call raises every time; traced, fake,
    meta, subclassed and functorch-wrapped tensors are validated afresh."""
    key = None
    if (all(type(t) in PLAIN_TENSORS for t in (q, k, v)) and not torch.compiler.is_compiling()
            and not torch._C._are_functorch_transforms_active() and q.device.type != "meta"):
        try:
            key = (type(layout), layout, type(causal), causal, type(scale), repr(scale),
                   q.dtype, q.device, q.layout, q.shape, q.stride(), q.data_ptr() & 15,
                   k.dtype, k.device, k.layout, k.shape, k.stride(), k.data_ptr() & 15,
                   v.dtype, v.device, v.layout, v.shape, v.stride(), v.data_ptr() & 15)
            p = _VALIDATED.get(key)
        except (TypeError, RuntimeError):  # unhashable, or no data pointer: validate says what is wrong
            key = p = None
        if p is not None:
            return p
    p = validate(q, k, v, causal=causal, scale=scale, layout=layout)
    if key is not None:
        remember(_VALIDATED, key, p)
    return p


def _max_seqlen(given: int | None, cu: torch.Tensor, name: str) -> int:
    if given is None:
        if not has_storage(cu):
            raise ValueError(f"{name} must be given under torch.compile (it sizes the launch grid)")
        return int((cu[1:] - cu[:-1]).max().item())  # one device synchronisation
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise ValueError(f"{name} must be a non-negative int, got {given!r}")
    # A bound below the longest sequence would leave rows uncomputed: checked where the offsets can
    # be read without a device synchronisation (on a GPU it is the caller's promise).
    if cu.device.type == "cpu" and has_storage(cu):
        longest = int((cu[1:] - cu[:-1]).max())
        if given < longest:
            raise ValueError(f"{name}={given} is less than the longest sequence in the offsets ({longest})")
    return given


# ----------------------------------------------------------------------------------------------
# views and launches
# ----------------------------------------------------------------------------------------------
def _bhsd_strides(t: torch.Tensor, layout: str) -> tuple[int, int, int]:
    """(batch, head, sequence) strides in elements; batch stride 0 for packed tensors."""
    if layout == "bhsd":
        return t.stride(0), t.stride(1), t.stride(2)
    if layout == "bshd":
        return t.stride(0), t.stride(2), t.stride(1)
    return 0, t.stride(1), t.stride(0)


def _lse_shape(p: Problem, total_q: int) -> tuple[int, ...]:
    return (p.heads, total_q) if p.varlen else (p.batch, p.heads, p.seqlen_q)


def _lse_strides(lse: torch.Tensor, varlen: bool) -> tuple[int, int]:
    return (0, lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _on_device(t: torch.Tensor):
    return torch.cuda.device(t.device) if t.device.type == "cuda" else _NullContext()


class _NullContext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def tma_ok(p: Problem, *tensors: torch.Tensor) -> bool:
    """Whether tensor descriptors can address these (B, H, S, D)-ordered tensors: a dense layout,
    16-byte aligned base pointers and strides, rows of at least 16 bytes."""
    if p.varlen or p.head_dim * 2 < 16 or p.seqlen_k == 0:
        return False
    for t in tensors:
        if t.data_ptr() % 16 or any((st * t.element_size()) % 16 for st in _bhsd_strides(t, p.layout)):
            return False
    return True


def _descriptor(t: torch.Tensor, p: Problem, seqlen: int, heads: int, block: int):
    from triton.tools.tensor_descriptor import TensorDescriptor

    sb, sh, ss = _bhsd_strides(t, p.layout)
    return TensorDescriptor(t, [p.batch, heads, seqlen, p.head_dim], [sb, sh, ss, 1],
                            [1, 1, block, block_d(p.head_dim)])


#: Register split of the warp-specialised Gluon forward (FlashAttention-3's: 12 warps, 240 for each
#: consumer warpgroup, 24 for the loader's; 2 x 128 x 240 + 128 x 24 = 64512 of the SM's 65536).
WS_CONSUMER_REGS = 240
WS_LOADER_REGS = 24
#: The register cap at entry (12 warps: 65536 / 384, rounded down to 8) that ``setmaxnreg`` needs.
WS_MAXNREG = 168
#: With three consumer warpgroups (16 warps with the loader's, padded to a warpgroup): 160 each, so
#: that an SM sub-partition's 16384 registers hold its 3 consumer warps and a loader-group warp
#: (3 x 32 x 160 + 32 x 24 = 16128), and 65536 / 512 = 128 at entry.
WS3_CONSUMER_REGS = 160
WS3_MAXNREG = 128


def ws_registers(cfg: FwdConfig) -> tuple[int, int, int]:
    """(consumer registers, loader registers, cap at entry) of the warp-specialised forward."""
    if cfg.consumers == 3:
        return WS3_CONSUMER_REGS, WS_LOADER_REGS, WS3_MAXNREG
    return WS_CONSUMER_REGS, WS_LOADER_REGS, WS_MAXNREG

#: Shared memory an sm90 program may take (227 KB) less room for the mbarriers.
SM90_SMEM_BYTES = 232448 - 1024


def ws_separate_o(cfg: FwdConfig, head_dim: int, itemsize: int = 2) -> bool:
    """Whether the persistent (or paired) warp-specialised forward gives O its own shared buffer (its
    TMA store then stays in flight into the next tile): where Q, O and the K/V ring fit together."""
    ring = 2 * cfg.num_stages * cfg.block_n * head_dim
    return (cfg.persistent or cfg.paired) and (2 * cfg.block_m * head_dim + ring) * itemsize <= SM90_SMEM_BYTES


def _paired(p: Problem, cfg: FwdConfig) -> bool:
    """Whether a one-tile-per-program forward launch pairs its query tiles (causal calls only)."""
    return cfg.paired and p.causal


def causal_group(batch_heads: int, group: int, seqlen_k: int, head_dim: int, l2_bytes: int, itemsize: int = 2) -> int:
    """Heads per group of the grouped heavy-first causal order (``FwdConfig.order``): the largest power of
    two, at most ``batch_heads``, whose K/V (every key of the group's K/V heads, K and V; ``group`` query
    heads share one K/V head) takes at most a third of the L2, at least 1. D64 causal B8 H16 S2048 on an
    H100 / H200 (50 MB): 32 heads, 16 MB (round 17: 1.032x cuDNN on an H200 against 0.997 for 16, 1.011 for
    all 128 and 0.975 paired)."""
    per_kv_head = 2 * seqlen_k * head_dim * itemsize
    return _group_fitting(batch_heads, lambda g: _cdiv(g, group) * per_kv_head, l2_bytes)


def _group_fitting(units: int, bytes_of, l2_bytes: int) -> int:
    """The largest power of two g <= ``units`` (at least 1) with 3 * bytes_of(g) <= ``l2_bytes``."""
    g = 1
    while 2 * g <= units and 3 * bytes_of(2 * g) <= l2_bytes:
        g *= 2
    return g


def bwd_orders(p: Problem, cfg: BwdConfig, l2_bytes: int, itemsize: int = 2) -> tuple[int, int]:
    """``ORDER`` of the backward's dK/dV and dQ kernels (0 unless causal with ``cfg.order``). ``ORDER_AUTO``:
    the dK/dV kernel's groups of K/V heads whose query-side inputs (Q and dO of their ``group`` query heads)
    take at most a third of the L2, the dQ kernel's as the forward's (``causal_group``: K and V)."""
    if not p.causal or not cfg.order:
        return 0, 0
    if cfg.order != ORDER_AUTO:
        return cfg.order, cfg.order
    group = p.heads // p.kv_heads
    per_kv_head = group * 2 * p.seqlen_q * p.head_dim * itemsize
    dkdv = _group_fitting(p.batch * p.kv_heads, lambda g: g * per_kv_head, l2_bytes)
    return dkdv, causal_group(p.batch * p.heads, group, p.seqlen_k, p.head_dim, l2_bytes, itemsize)


def order_constexpr(cfg: FwdConfig, causal: bool, batch_heads: int, group: int, seqlen_k: int, head_dim: int,
                    l2_bytes: int) -> int:
    """The Gluon forwards' ``ORDER``: heads per heavy-first group for causal calls (``ORDER_AUTO``
    resolved by ``causal_group``), 0 otherwise."""
    if not causal:
        return 0
    if cfg.order == ORDER_AUTO:
        return causal_group(batch_heads, group, seqlen_k, head_dim, l2_bytes)
    return cfg.order


def _order(p: Problem, cfg: FwdConfig, device: torch.device) -> int:
    return order_constexpr(cfg, p.causal, p.batch * p.heads, p.heads // p.kv_heads, p.seqlen_k, p.head_dim,
                           _l2_bytes(device))


def _maxnreg(cfg: FwdConfig, device: torch.device | None = None) -> dict:
    """The launch option of ``cfg.maxnreg`` (NVIDIA GPUs only: not the interpreter, not AMD)."""
    if not cfg.maxnreg or (device is not None and (device.type != "cuda" or torch.version.hip is not None)):
        return {}
    return {"maxnreg": cfg.maxnreg}


def _programs(seqlen: int, block: int, paired: bool) -> int:
    """Programs along grid axis 0 for cdiv(seqlen, block) tiles: one per tile, or one per pair of
    tiles (rounded up) when the tiles are paired."""
    tiles = _cdiv(seqlen, block)
    return _cdiv(tiles, 2) if paired else tiles


def fwd_grid(p: Problem, cfg: FwdConfig) -> tuple[int, int]:
    """Grid of the one-tile-per-program forward kernels: (query tiles, B * H), or with ``paired``
    causal tiles (half of them, rounded up; each program takes two)."""
    return (_programs(p.seqlen_q, cfg.block_m, _paired(p, cfg)), p.batch * p.heads)


def ws_grid(p: Problem, cfg: FwdConfig, device: torch.device) -> int:
    """Programs of the warp-specialised forward: one per tile, or one per SM when persistent."""
    if cfg.persistent:
        return min(_cdiv(p.seqlen_q, cfg.block_m) * p.batch * p.heads, _sm_count(device))
    return math.prod(fwd_grid(p, cfg))


#: Head dimensions the Gluon forward takes (unpadded: the TMA box is the whole head dimension).
GLUON_HEAD_DIMS = (64, 128, 256)


def _is_sm90(device: torch.device) -> bool:
    return (device.type == "cuda" and torch.version.hip is None
            and torch.cuda.get_device_capability(device) == (9, 0))


def gluon_ok(p: Problem, *tensors: torch.Tensor) -> bool:
    """Whether the Gluon forward (``kernels.attention_gluon``) can take this call: CUDA tensors on
    an sm90 GPU (not the interpreter, not CPU), not packed, head dimension 64, 128 or 256, and
    layouts tensor descriptors can address (``tma_ok``: 16-byte aligned base and strides)."""
    if any(t.device.type != "cuda" for t in tensors) or not _is_sm90(tensors[0].device):
        return False
    if p.varlen or p.head_dim not in GLUON_HEAD_DIMS or p.seqlen_k == 0:
        return False
    return tma_ok(p, *tensors)


def _gluon_descriptor(t: torch.Tensor, p: Problem, seqlen: int, heads: int, block: int):
    sb, sh, ss = _bhsd_strides(t, p.layout)
    return gluon_descriptor(t, [p.batch, heads, seqlen, p.head_dim], [sb, sh, ss, 1], [1, 1, block, p.head_dim])


def launch_fwd_gluon(q, k, v, out, lse, p: Problem, cfg: FwdConfig):
    """The Gluon forward on validated sm90 tensors ``gluon_ok`` accepted; returns the compiled kernel."""
    from tilecraft.kernels import attention_gluon as _g

    if cfg.ws:
        if cfg.paired and not p.causal:  # nothing to pair: the one-tile grid (and no separate O buffer)
            cfg = replace(cfg, paired=False)
        rows = cfg.block_m // cfg.consumers  # each consumer warpgroup's Q and O box
        regs, loader_regs, maxnreg = ws_registers(cfg)
        with _on_device(q):
            return run_kernel(_g.attention_fwd_gluon_ws_kernel, (ws_grid(p, cfg, q.device),),
                _gluon_descriptor(q, p, p.seqlen_q, p.heads, rows),
                _gluon_descriptor(k, p, p.seqlen_k, p.kv_heads, cfg.block_n),
                _gluon_descriptor(v, p, p.seqlen_k, p.kv_heads, cfg.block_n),
                _gluon_descriptor(out, p, p.seqlen_q, p.heads, rows),
                lse, *_lse_strides(lse, p.varlen), p.batch * p.heads, p.heads, p.heads // p.kv_heads, p.seqlen_q,
                p.seqlen_k, p.scale * LOG2E, HEAD_DIM=p.head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                STAGES=cfg.num_stages, CAUSAL=p.causal, PIPELINE=cfg.overlap, PINGPONG=int(cfg.pingpong),
                SEPARATE_O=ws_separate_o(cfg, p.head_dim), POLY=cfg.poly, PERSISTENT=cfg.persistent,
                CONSUMER_REGS=regs, LOADER_REGS=loader_regs, num_warps=4, maxnreg=maxnreg, EARLY=cfg.early,
                TREE=cfg.tree, PAIRED=_paired(p, cfg), ORDER=_order(p, cfg, q.device), NAMED_SLOTS=cfg.named_slots,
                LAZY=cfg.lazy)
    with _on_device(q):
        return run_kernel(_g.attention_fwd_gluon_kernel, fwd_grid(p, cfg),
            _gluon_descriptor(q, p, p.seqlen_q, p.heads, cfg.block_m),
            _gluon_descriptor(k, p, p.seqlen_k, p.kv_heads, cfg.block_n),
            _gluon_descriptor(v, p, p.seqlen_k, p.kv_heads, cfg.block_n),
            _gluon_descriptor(out, p, p.seqlen_q, p.heads, cfg.block_m),
            lse, *_lse_strides(lse, p.varlen), p.heads, p.heads // p.kv_heads, p.seqlen_q, p.seqlen_k,
            p.scale * LOG2E, HEAD_DIM=p.head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, STAGES=cfg.num_stages,
            CAUSAL=p.causal, PIPELINE=cfg.overlap, num_warps=cfg.num_warps, POLY=cfg.poly,
            PAIRED=_paired(p, cfg), ORDER=_order(p, cfg, q.device), LAZY=cfg.lazy, **_maxnreg(cfg))


def launch_fwd(q, k, v, out, lse, cu_q, cu_k, p: Problem, cfg: FwdConfig):
    """The forward kernel on validated tensors; returns Triton's compiled kernel (or None). A Gluon
    config runs the Gluon kernel only where ``gluon_ok``; anything else gets the Triton tiles of
    ``triton_fwd_config`` for the device."""
    if p.batch * p.heads == 0 or p.seqlen_q == 0:
        return None
    if cfg.gluon:
        if gluon_ok(p, q, k, v, out):
            return launch_fwd_gluon(q, k, v, out, lse, p, cfg)
        cfg = triton_fwd_config(p.head_dim, q.device)
    if cfg.tma and not tma_ok(p, q, k, v, out):
        cfg = pointer_fwd_config(p.head_dim, q.device)
    if cfg.producer_consumer:
        _check_producer_consumer(q.device)
        _ensure_triton_allocator()
        with _on_device(q):
            return run_kernel(_k.attention_fwd_ws_kernel, (_cdiv(p.seqlen_q, cfg.block_m), p.batch * p.heads),
                q, k, v, out, lse, *_bhsd_strides(q, p.layout), *_bhsd_strides(k, p.layout), *_bhsd_strides(v, p.layout),
                *_bhsd_strides(out, p.layout),
                *_lse_strides(lse, p.varlen), p.heads, p.heads // p.kv_heads, p.seqlen_q, p.seqlen_k, p.scale * LOG2E,
                HEAD_DIM=p.head_dim, BLOCK_D=block_d(p.head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                CAUSAL=p.causal, MASK=p.causal or p.seqlen_k % cfg.block_n != 0, num_warps=cfg.num_warps,
                num_stages=cfg.num_stages)
    if cfg.tma:
        tiles = _cdiv(p.seqlen_q, cfg.block_m) * p.batch * p.heads
        grid = (min(tiles, _sm_count(q.device)),) if cfg.persistent else fwd_grid(p, cfg)
        with _on_device(q):
            return run_kernel(_k.attention_fwd_tma_kernel, grid,
                _descriptor(q, p, p.seqlen_q, p.heads, cfg.block_m), _descriptor(k, p, p.seqlen_k, p.kv_heads, cfg.block_n),
                _descriptor(v, p, p.seqlen_k, p.kv_heads, cfg.block_n), _descriptor(out, p, p.seqlen_q, p.heads, cfg.block_m),
                lse, *_lse_strides(lse, p.varlen), p.heads, p.heads // p.kv_heads, p.seqlen_q, p.seqlen_k,
                p.scale * LOG2E, p.batch * p.heads, HEAD_DIM=p.head_dim, BLOCK_D=block_d(p.head_dim),
                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=p.causal, WARP_SPECIALIZE=cfg.warp_specialize,
                PERSISTENT=cfg.persistent, PAIRED=_paired(p, cfg), num_warps=cfg.num_warps,
                num_stages=cfg.num_stages, **_maxnreg(cfg))
    cu_q = cu_q if cu_q is not None else lse  # an unused pointer when not varlen
    cu_k = cu_k if cu_k is not None else lse
    with _on_device(q):
        return run_kernel(_k.attention_fwd_kernel, fwd_grid(p, cfg),
            q, k, v, out, lse, cu_q, cu_k,
            *_bhsd_strides(q, p.layout), *_bhsd_strides(k, p.layout), *_bhsd_strides(v, p.layout),
            *_bhsd_strides(out, p.layout), *_lse_strides(lse, p.varlen),
            p.heads, p.heads // p.kv_heads, p.seqlen_q, p.seqlen_k, p.scale * LOG2E,
            HEAD_DIM=p.head_dim, BLOCK_D=block_d(p.head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            CAUSAL=p.causal, VARLEN=p.varlen, WARP_SPECIALIZE=cfg.warp_specialize, PAIRED=_paired(p, cfg),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages, **_maxnreg(cfg, q.device))


#: The producer/consumer forward compiles for sm90 but returned NaN on an H200 (2026-11-21, runs 4
#: and 5 of docs/attention.md): on a GPU it runs only where this is set True (the tuning script does),
#: so nobody gets it by accident. The interpreter runs it regardless (it is correct there).
PRODUCER_CONSUMER_ON_GPU = False


def _check_producer_consumer(device: torch.device) -> None:
    if device.type != "cpu" and not PRODUCER_CONSUMER_ON_GPU:
        raise RuntimeError("FwdConfig(producer_consumer=True) is experimental: it returned NaN on an H200 "
                           "(docs/attention.md); set tilecraft.ops.attention.PRODUCER_CONSUMER_ON_GPU = True "
                           "to run it anyway")


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_triton_allocator() -> None:
    """The producer/consumer forward builds Q's tensor descriptor on the device (128 bytes of global
    scratch per program, asked from Triton's allocator at launch). Installs a torch allocator when
    none is set; an allocator the caller set stays."""
    import triton
    from triton.runtime import _allocation

    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_scratch)


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


#: The L2 the grouped causal order assumes where the device does not say (CPU, cross-compiles): an H100 / H200's.
HOPPER_L2_BYTES = 50 * 2**20


def _l2_bytes(device: torch.device) -> int:
    """The GPU's L2 in bytes (``HOPPER_L2_BYTES`` where the device does not say)."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or HOPPER_L2_BYTES)
    return HOPPER_L2_BYTES


def decode_splits(p: Problem, cfg: DecodeConfig, device: torch.device) -> tuple[int, int, int]:
    """(splits, keys per split, row tile): as many chunks as fit ``cfg.programs_per_sm`` programs per
    SM in ONE wave (rounded down: 320 programs on 264 slots ran the last 56 as a second wave, 59% of
    copy against 73% for 256 programs at B8 H32/8 S16x8192 on an H200, commit c5409ea; one program per
    SM, twice as long, 82%, round 8), each chunk at least 4 key tiles long."""
    rows = (p.heads // p.kv_heads) * p.seqlen_q
    block_m = 64 if cfg.gluon else max(16, min(64, 1 << (rows - 1).bit_length()))
    programs = p.batch * p.kv_heads * _cdiv(rows, block_m)
    splits = cfg.splits or max(1, (cfg.programs_per_sm * _sm_count(device)) // programs)
    splits = max(1, min(splits, _cdiv(p.seqlen_k, 4 * cfg.block_n)))
    per = _cdiv(_cdiv(p.seqlen_k, splits), cfg.block_n) * cfg.block_n
    return _cdiv(p.seqlen_k, per), per, block_m


#: (device, stream) -> zeroed int32 arrival counters of the fused decode merge; every launch leaves
#: them zero. Grown by replacing; the old ones stay referenced (a captured CUDA graph may use them).
_DECODE_COUNTERS: dict[tuple, list[torch.Tensor]] = {}
#: device -> a zeroed (and synchronized) set no stream holds yet: what a stream first seen while it
#: captures a CUDA graph takes, so the graph needs no memset node of its own
_SPARE_COUNTERS: dict[str, torch.Tensor] = {}


def decode_counters(n: int, device: torch.device) -> torch.Tensor:
    """At least ``n`` zeroed int32 counters for the fused decode merge on the current stream of
    ``device`` (one set per stream: launches on one stream run in order, each re-arms them)."""
    cuda = device.type == "cuda"
    key = (str(device), torch.cuda.current_stream(device).cuda_stream if cuda else 0)
    kept = _DECODE_COUNTERS.setdefault(key, [])
    if not kept or kept[-1].numel() < n:
        size = max(n, 4096)
        spare = _SPARE_COUNTERS.pop(str(device), None)
        kept.append(spare if spare is not None and spare.numel() >= size else
                    torch.zeros(size, dtype=torch.int32, device=device))
        if cuda and not torch.cuda.is_current_stream_capturing():
            _SPARE_COUNTERS[str(device)] = torch.zeros(size, dtype=torch.int32, device=device)
            torch.cuda.synchronize(device)  # once per new stream: the zeros are done before any stream uses them
    return kept[-1]


def launch_decode(q, k, v, out, lse, p: Problem, cfg: DecodeConfig) -> list:
    """Split-KV forward (bhsd/bshd): partial outputs per key chunk, then the combine kernel (with
    ``cfg.fuse`` the decode kernel's last program per row tile merges instead)."""
    if p.batch * p.heads == 0 or p.seqlen_q == 0:
        return []
    splits, per, block_m = decode_splits(p, cfg, q.device)
    bd = block_d(p.head_dim)
    group = p.heads // p.kv_heads
    o_part = empty((splits, p.batch, p.heads, p.seqlen_q, bd), dtype=torch.float32, device=q.device)
    l_part = empty((splits, p.batch, p.heads, p.seqlen_q), dtype=torch.float32, device=q.device)
    grid = (splits, p.batch * p.kv_heads, _cdiv(group * p.seqlen_q, block_m))
    if cfg.gluon and not gluon_ok(p, q, k, v):
        raise ValueError("the Gluon decode kernel needs CUDA tensors on sm90 that TMA can address, D in "
                         f"{GLUON_HEAD_DIMS}; use a Triton DecodeConfig for this call")
    with _on_device(q):
        if cfg.gluon:
            from tilecraft.kernels import attention_gluon as _g
            h1 = run_kernel(_g.attention_decode_gluon_kernel, grid,
                q, _gluon_descriptor(k, p, p.seqlen_k, p.kv_heads, cfg.block_n),
                _gluon_descriptor(v, p, p.seqlen_k, p.kv_heads, cfg.block_n), o_part, l_part,
                *_bhsd_strides(q, p.layout), *l_part.stride(), p.heads, group, p.seqlen_q, p.seqlen_k, per,
                p.scale * LOG2E, HEAD_DIM=p.head_dim, BLOCK_N=cfg.block_n, STAGES=cfg.num_stages, CAUSAL=p.causal,
                PIPELINE=cfg.overlap, num_warps=4)
        else:
            count = decode_counters(grid[1] * grid[2], q.device) if cfg.fuse else l_part
            h1 = run_kernel(_k.attention_decode_kernel, grid,
                q, k, v, o_part, l_part, *_bhsd_strides(q, p.layout), *_bhsd_strides(k, p.layout),
                *_bhsd_strides(v, p.layout), *l_part.stride(), p.heads, group, p.seqlen_q, p.seqlen_k, per,
                p.scale * LOG2E, out, lse, count, *_bhsd_strides(out, p.layout), *_lse_strides(lse, False), splits,
                HEAD_DIM=p.head_dim, BLOCK_D=bd, BLOCK_M=block_m, BLOCK_N=cfg.block_n,
                CAUSAL=p.causal, FUSE=cfg.fuse, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
            if cfg.fuse:
                return [h1]
        h2 = run_kernel(_k.attention_combine_kernel, (p.batch * p.heads * p.seqlen_q,),
            o_part, l_part, out, lse, *_bhsd_strides(out, p.layout), *_lse_strides(lse, False), l_part.stride(0),
            p.heads, p.seqlen_q, splits, HEAD_DIM=p.head_dim, BLOCK_D=bd,
            BLOCK_S=max(2, 1 << (splits - 1).bit_length()), num_warps=4 if bd >= 128 else 2)
    return [h1, h2]


def resolve_deterministic(deterministic: bool | None, p: Problem, q: torch.Tensor) -> bool:
    """The backward's dQ path: ``True``/``False`` as given; ``None`` (the default) is deterministic when
    ``torch.use_deterministic_algorithms(True)`` is on, and otherwise the atomic dQ only where it was
    measured faster: D = 128 with TMA bulk reductions (sm90+, :func:`dq_tma_ok`). H100, 2026-11-27,
    × FlashAttention-2, the issue's shapes: D128 causal 1.32-1.33 against 1.27 for the dQ kernel, D128
    1.33 against 1.32; but D64 1.13 / causal 1.22 against 1.29 / 1.27 and D256 0.56 / 0.62 against
    0.76 / 0.70 (the atomic dK/dV kernel spills there), and element-wise atomics no faster anywhere."""
    if deterministic is not None:
        if not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be a bool or None, got {type(deterministic).__name__}")
        return deterministic
    if torch.are_deterministic_algorithms_enabled():
        return True
    return not (p.head_dim == 128 and dq_tma_ok(p, q))


def dq_path(deterministic: bool | None, p: Problem, q: torch.Tensor, cfg: BwdConfig) -> str:
    """How the backward computes dQ: "kernel" (its own kernel, deterministic), "atomic-tma" (fp32 TMA
    bulk reductions from the dK/dV kernel) or "atomic" (element-wise fp32 atomics from it)."""
    if resolve_deterministic(deterministic, p, q):
        return "kernel"
    return "atomic-tma" if cfg.dq_tma and dq_tma_ok(p, q) else "atomic"


def launch_bwd(do, q, k, v, out, lse, dlse, dq, dk, dv, cu_q, cu_k, p: Problem, cfg: BwdConfig,
               deterministic: bool | None = True) -> list:
    """Preprocess (delta = rowsum(dO * O) - dlse), dK/dV and dQ kernels on validated tensors; dq,
    dk, dv are written. ``deterministic=None`` picks as :func:`resolve_deterministic`. Returns
    Triton's compiled kernels."""
    path = dq_path(deterministic, p, q, cfg)
    deterministic = path == "kernel"
    if p.batch * p.heads == 0 or p.seqlen_q == 0 or p.seqlen_k == 0:
        dq.zero_(), dk.zero_(), dv.zero_()  # no query head (H = 0 with H_kv > 0 too) or no key: all 0
        return []
    delta = empty(lse.shape, dtype=lse.dtype, device=lse.device, stride=lse.stride())  # laid out as lse
    cu_q = cu_q if cu_q is not None else lse
    cu_k = cu_k if cu_k is not None else lse
    bd = block_d(p.head_dim)
    group = p.heads // p.kv_heads
    handles = []
    with _on_device(q):
        handles.append(run_kernel(_k.attention_bwd_preprocess_kernel, (_cdiv(p.seqlen_q, 64), p.batch * p.heads),
            out, do, delta, cu_q, *_bhsd_strides(out, p.layout), *_bhsd_strides(do, p.layout),
            *_lse_strides(lse, p.varlen), p.heads, p.seqlen_q,
            HEAD_DIM=p.head_dim, BLOCK_D=bd, BLOCK_M=64, VARLEN=p.varlen, num_warps=4))
        if dlse is not None:
            # d lse_i / d s_ij = P_ij: a gradient on the lse joins dS = P (dP - delta) as -dlse.
            run_op(torch.Tensor.sub_, delta, dlse)
        atomic = {"kernel": 0, "atomic": 1, "atomic-tma": 2}[path]
        # fp32 accumulator for the atomic dQ: dq's own layout (element-wise) or (B*H, S_q, D) / (H, T_q, D)
        # planes for the bulk reductions; the deterministic path writes dq directly.
        if atomic == 2:
            planes, rows = (p.heads, q.shape[0]) if p.varlen else (p.batch * p.heads, p.seqlen_q)
            dq_acc = zeros((planes, rows, p.head_dim), dtype=torch.float32, device=dq.device)
            dq_desc = _dq_descriptor(dq_acc, cfg.block_m1)
            dq_strides = (0, 0, 0)
        else:
            dq_acc = zeros(dq.shape, dtype=torch.float32, device=dq.device) if atomic else dq
            dq_desc = dq_acc
            dq_strides = _bhsd_strides(dq_acc, p.layout)
        sm = p.scale
        paired = cfg.paired and p.causal
        order_kv, order_q = bwd_orders(p, cfg, _l2_bytes(q.device))
        handles.append(run_kernel(_k.attention_bwd_dkdv_kernel,
                                  (_programs(p.seqlen_k, cfg.block_n1, paired), p.batch * p.kv_heads),
            q, k, v, do, lse, delta, dk, dv, dq_acc, dq_desc, cu_q, cu_k,
            *_bhsd_strides(q, p.layout), *_bhsd_strides(k, p.layout), *_bhsd_strides(v, p.layout),
            *_bhsd_strides(do, p.layout), *_bhsd_strides(dk, p.layout), *_bhsd_strides(dv, p.layout),
            *dq_strides, *_lse_strides(lse, p.varlen),
            p.heads, group, p.seqlen_q, p.seqlen_k, sm, sm * LOG2E,
            HEAD_DIM=p.head_dim, BLOCK_D=bd, BLOCK_M=cfg.block_m1, BLOCK_N=cfg.block_n1, CAUSAL=p.causal,
            VARLEN=p.varlen, ATOMIC_DQ=atomic, PAIRED=paired, ORDER=order_kv, num_warps=cfg.num_warps,
            num_stages=(atomic and cfg.atomic_num_stages) or cfg.num_stages))
        if deterministic:
            handles.append(run_kernel(_k.attention_bwd_dq_kernel,
                                      (_programs(p.seqlen_q, cfg.block_m2, paired), p.batch * p.heads),
                q, k, v, do, lse, delta, dq, cu_q, cu_k,
                *_bhsd_strides(q, p.layout), *_bhsd_strides(k, p.layout), *_bhsd_strides(v, p.layout),
                *_bhsd_strides(do, p.layout), *_bhsd_strides(dq, p.layout), *_lse_strides(lse, p.varlen),
                p.heads, group, p.seqlen_q, p.seqlen_k, sm, sm * LOG2E,
                HEAD_DIM=p.head_dim, BLOCK_D=bd, BLOCK_M=cfg.block_m2, BLOCK_N=cfg.block_n2, CAUSAL=p.causal,
                VARLEN=p.varlen, PAIRED=paired, ORDER=order_q, num_warps=cfg.dq_num_warps or cfg.num_warps,
                num_stages=cfg.dq_num_stages or cfg.num_stages))
        else:
            run_op(torch.Tensor.copy_, dq, _dq_planes_as(dq_acc, p) if atomic == 2 else dq_acc)
    return handles


def dq_tma_ok(p: Problem, q: torch.Tensor) -> bool:
    """Whether the atomic dQ can go through TMA bulk reductions: a CUDA GPU of sm90 or later (not the
    interpreter, not ROCm) and fp32 rows of a 16-byte multiple (D % 4 == 0)."""
    if q.device.type != "cuda" or torch.version.hip is not None or p.head_dim % 4:
        return False
    return device_capability(q.device.index if q.device.index is not None else torch.cuda.current_device())[0] >= 9


def _dq_descriptor(acc: torch.Tensor, block_m: int):
    from triton.tools.tensor_descriptor import TensorDescriptor

    planes, rows, d = acc.shape
    return TensorDescriptor(acc, [planes, rows, d], [rows * d, d, 1], [1, block_m, block_d(d)])


def _dq_planes_as(acc: torch.Tensor, p: Problem) -> torch.Tensor:
    """The (B*H, S_q, D) or (H, T_q, D) accumulator as a view in dq's layout."""
    if p.varlen:
        return acc.transpose(0, 1)
    x = acc.view(p.batch, p.heads, p.seqlen_q, p.head_dim)
    return x.transpose(1, 2) if p.layout == "bshd" else x


def _uses_triton(t: torch.Tensor) -> bool:
    return t.device.type == "cuda" or (t.device.type == "cpu" and triton_on_cpu())


def _fwd_outputs(q: torch.Tensor, p: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    """The output and lse :func:`_fwd_compute` returns, before the kernels write them (one place, so
    that the tests can poison them). Packed rows past cu_seqlens_q[-1] belong to no sequence and are
    never written: output 0, lse -inf."""
    out = (torch.zeros_like if p.varlen else torch.empty_like)(q, memory_format=torch.contiguous_format)
    lse = torch.empty(_lse_shape(p, q.shape[0]), dtype=torch.float32, device=q.device)
    if p.varlen:
        lse.fill_(-math.inf)
    return out, lse


def _fwd_compute(q, k, v, cu_q, cu_k, p: Problem, cfg: FwdConfig | None = None):
    out, lse = _fwd_outputs(q, p)
    if not _uses_triton(q):
        o_ref, l_ref = _reference(q, k, v, cu_q, cu_k, p)
        out[:o_ref.shape[0]].copy_(o_ref)  # the packed reference stops at cu_seqlens_q[-1]
        lse[..., :l_ref.shape[-1]].copy_(l_ref)
        return out, lse
    replay = cfg is None and not p.varlen and replay_enabled()
    if replay:
        key = (signature(q), signature(k), signature(v), p, pdl_env())
        slots = (q, k, v, out, lse)
        if _REPLAYS.run(key, slots):
            return out, lse
    with _REPLAYS.record(key, slots) if replay else _NullContext():
        if uses_decode(p):
            launch_decode(q, k, v, out, lse, p, decode_config(p, q, k, v))
        else:
            launch_fwd(q, k, v, out, lse, cu_q, cu_k, p,
                       cfg or default_fwd_config(p.head_dim, q.device, causal=p.causal))
    return out, lse


#: The forward launches of earlier calls per call key (``ops.launch.ReplayCache``; not for packed
#: variable-length batches, whose plan reads the offsets): a call with the layouts, dtypes and alignment
#: of an earlier one runs its kernels again without planning (``TILECRAFT_REPLAY=0``: off).
_REPLAYS = ReplayCache()


def _reference(q, k, v, cu_q, cu_k, p: Problem):
    """The CPU path without the interpreter: the torch reference in float32, in the given layout."""
    if p.varlen:
        return attention_varlen_reference(q, k, v, cu_q, cu_k, causal=p.causal, scale=p.scale, dtype=torch.float32)
    if p.layout == "bshd":
        o, lse = attention_reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=p.causal,
                                     scale=p.scale, dtype=torch.float32)
        return o.transpose(1, 2), lse
    return attention_reference(q, k, v, causal=p.causal, scale=p.scale, dtype=torch.float32)


def _reference_backward(do, dlse, q, k, v, cu_q, cu_k, p: Problem):
    """The CPU path's backward: the reference formulas in float32, in the given layout."""
    def one(q, k, v, do, dlse):
        return attention_backward_reference(q, k, v, do, dlse, causal=p.causal, scale=p.scale, dtype=torch.float32)
    if p.varlen:
        cq, ck = cu_q.tolist(), cu_k.tolist()
        grads = [torch.zeros(t.shape, dtype=torch.float32) for t in (q, k, v)]
        for b in range(len(cq) - 1):
            rq, rk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
            seq = [t.transpose(0, 1)[None] for t in (q[rq], k[rk], v[rk], do[rq])]
            g = one(*seq, dlse[:, rq][None] if dlse is not None else None)
            for dst, src, rows in zip(grads, g, (rq, rk, rk)):
                dst[rows] = src[0].transpose(0, 1)
        return grads
    if p.layout == "bshd":
        g = one(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), do.transpose(1, 2), dlse)
        return [t.transpose(1, 2) for t in g]
    return one(q, k, v, do, dlse)


def _bwd_compute(do, q, k, v, out, lse, dlse, cu_q, cu_k, p: Problem, deterministic: bool,
                 cfg: BwdConfig | None = None):
    alloc = torch.zeros_like if p.varlen else torch.empty_like  # packed rows past the offsets: gradient 0
    dq = alloc(q, memory_format=torch.contiguous_format)
    dk = alloc(k, memory_format=torch.contiguous_format)
    dv = alloc(v, memory_format=torch.contiguous_format)
    if not _uses_triton(q):
        for dst, g in zip((dq, dk, dv), _reference_backward(do, dlse, q, k, v, cu_q, cu_k, p)):
            dst.copy_(g)
        return dq, dk, dv
    do = do if do.stride(-1) == 1 else do.contiguous()
    replay = cfg is None and not p.varlen and replay_enabled()
    if replay:
        key = (signature(do), signature(q), signature(k), signature(v), signature(out), signature(lse),
               signature(dlse), p, deterministic, torch.are_deterministic_algorithms_enabled(), pdl_env())
        slots = (do, q, k, v, out, lse, dlse, dq, dk, dv)
        if _BWD_REPLAYS.run(key, slots):
            return dq, dk, dv
    with _BWD_REPLAYS.record(key, slots) if replay else _NullContext():
        launch_bwd(do, q, k, v, out, lse, dlse, dq, dk, dv, cu_q, cu_k, p,
                   cfg or default_bwd_config(p.head_dim, q.device), deterministic)
    return dq, dk, dv


#: The backward's launches per call key, as :data:`_REPLAYS` for the forward (the fp32 dQ accumulator
#: is zeroed afresh, the delta's ``dlse`` term and dQ's copy out of its accumulator are replayed steps).
_BWD_REPLAYS = ReplayCache()


# ----------------------------------------------------------------------------------------------
# torch.library registration and autograd
# ----------------------------------------------------------------------------------------------
@torch.library.custom_op("tilecraft::attention_fwd", mutates_args=())
def _attention_fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor | None,
                      cu_seqlens_k: torch.Tensor | None, max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                      scale: float, layout: str, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward; ``deterministic`` is the backward's choice, carried here so autograd sees it."""
    p = validate(q, k, v, causal=causal, scale=scale, layout=layout, cu_seqlens_q=cu_seqlens_q,
                 cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    return _fwd_compute(q, k, v, cu_seqlens_q, cu_seqlens_k, p)


@_attention_fwd_op.register_fake
def _attention_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, layout,
                        deterministic):
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if layout == "thd":
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:
        b, h, s = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bhsd" else (q.shape[0], q.shape[2], q.shape[1])
        lse = q.new_empty((b, h, s), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("tilecraft::attention_bwd", mutates_args=())
def _attention_bwd_op(grad_out: torch.Tensor, grad_lse: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor,
                      v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, cu_seqlens_q: torch.Tensor | None,
                      cu_seqlens_k: torch.Tensor | None, max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                      scale: float, layout: str, deterministic: bool
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p = validate(q, k, v, causal=causal, scale=scale, layout=layout, cu_seqlens_q=cu_seqlens_q,
                 cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    return _grads(grad_out, grad_lse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, p, deterministic)


def _grads(grad_out, grad_lse, q, k, v, out, lse, cu_q, cu_k, p: Problem, deterministic: bool):
    """dQ, dK, dV for the output's and the lse's gradients (``None``: no gradient reached them)."""
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    if grad_out.shape != out.shape:
        raise ValueError(f"grad_out has shape {tuple(grad_out.shape)}, out {tuple(out.shape)}")
    return _bwd_compute(grad_out.to(q.dtype), q, k, v, out, lse, grad_lse, cu_q, cu_k, p, deterministic)


@_attention_bwd_op.register_fake
def _attention_bwd_fake(grad_out, grad_lse, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                        max_seqlen_k, causal, scale, layout, deterministic):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, layout, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.args = (max_q, max_k, causal, scale, layout, deterministic)


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    max_q, max_k, causal, scale, layout, deterministic = ctx.args
    dq, dk, dv = torch.ops.tilecraft.attention_bwd(grad_out, grad_lse, q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                                   causal, scale, layout, deterministic)
    return dq, dk, dv, None, None, None, None, None, None, None, None


torch.library.register_autograd("tilecraft::attention_fwd", _backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """The registered op's forward and backward bodies as a plain autograd function, for eager calls
    that autograd records (``eager_direct(..., autograd=True)``): the same kernels and bits, without
    the custom op's dispatch in either direction. Under torch.compile, modes, transforms or the
    profiler the registered op runs instead. Not twice differentiable (as the op's backward)."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, p: Problem, deterministic: bool):
        out, lse = _fwd_compute(q, k, v, cu_q, cu_k, p)
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
        ctx.p, ctx.deterministic = p, deterministic
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        if torch.is_grad_enabled():  # create_graph=True: a double backward, which once_differentiable's error node
            # misses when autograd.grad(..., inputs=...) prunes it (the second-order term was dropped silently)
            raise RuntimeError("tilecraft.attention's backward is not differentiable (no double backward): call "
                               "torch.autograd.grad / backward without create_graph=True")
        return _EagerAttention._backward(ctx, grad_out, grad_lse)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def _backward(ctx, grad_out, grad_lse):
        q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
        dq, dk, dv = _grads(grad_out, grad_lse, q, k, v, out, lse, cu_q, cu_k, ctx.p, ctx.deterministic)
        return dq, dk, dv, None, None, None, None


# ----------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              scale: float | None = None, layout: str = "bhsd", return_lse: bool = False,
              cu_seqlens_q: torch.Tensor | None = None, cu_seqlens_k: torch.Tensor | None = None,
              max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
              deterministic: bool | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Flash attention: softmax(Q Kᵀ · scale) · V, fp16 or bf16, differentiable.

    Shapes (``layout``): "bhsd" q (B, H, S_q, D), k and v (B, H_kv, S_k, D); "bshd" q (B, S_q, H, D),
    k and v (B, S_k, H_kv, D); "thd" (packed variable-length batch) q (T_q, H, D), k and v (T_k, H_kv, D)
    with ``cu_seqlens_q``/``cu_seqlens_k`` (int32, batch + 1 cumulative offsets) and optionally
    ``max_seqlen_q``/``max_seqlen_k`` (computed from the offsets, with one device synchronisation,
    when left out; give them under torch.compile). H_kv must divide H (grouped-query attention;
    H_kv = 1 is multi-query). D is any size from 1 to 256 (powers of two run unpadded).

    ``scale`` defaults to 1/sqrt(D) and must be > 0. ``causal`` is bottom-right aligned as in
    FlashAttention-2: query i sees key j when j <= i + S_k - S_q; queries that see no key (the
    first S_q - S_k when S_q > S_k) get output 0 and lse -inf (and zero gradients).

    Returns the output (q's shape and dtype, contiguous in its layout), and with ``return_lse`` also
    the natural-log log-sum-exp of the scaled logits, float32, (B, H, S_q) or (H, T_q) for "thd".
    Gradients flow to q, k, v (through the lse too). ``deterministic=True`` computes dQ in its own
    kernel (every gradient bitwise repeatable); ``False`` accumulates dQ with fp32 atomics inside the
    dK/dV kernel (one kernel and one recomputation fewer; summation order not fixed: TMA bulk
    reductions on sm90+, element-wise atomics elsewhere). ``None`` (default): deterministic under
    ``torch.use_deterministic_algorithms(True)``, else the atomic dQ where it was measured faster (D = 128
    on sm90+ GPUs) and the deterministic kernel elsewhere (:func:`resolve_deterministic`).

    Devices: CUDA/ROCm tensors run the Triton kernels; CPU tensors run them in Triton's interpreter
    when ``TRITON_INTERPRET=1`` was set before tilecraft was imported, and otherwise the float32
    torch reference (``tilecraft.reference.attention``), forward and backward.

    Example::

        >>> q = torch.randn(2, 16, 1024, 128, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        >>> k, v = (torch.randn(2, 4, 1024, 128, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        >>> o = tilecraft.attention(q, k, v, causal=True)   # grouped-query: 16 query heads, 4 K/V heads
        >>> o.sum().backward()
    """
    if (cu_seqlens_q is not None or cu_seqlens_k is not None) and layout == "bhsd":
        layout = "thd"  # packed sequences imply the packed layout
    if layout != "thd" and (max_seqlen_q is not None or max_seqlen_k is not None):  # they were ignored without a word
        raise ValueError(f"max_seqlen_q/max_seqlen_k need layout='thd' (packed sequences), got layout {layout!r}")
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    if cu_seqlens_q is None and cu_seqlens_k is None and max_seqlen_q is None and max_seqlen_k is None:
        p = _validated(q, k, v, causal, scale, layout)
    else:
        p = validate(q, k, v, causal=causal, scale=scale, layout=layout, cu_seqlens_q=cu_seqlens_q,
                     cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    if deterministic is not None:
        resolve_deterministic(deterministic, p, q)  # its type is checked on every call
    refuse_forward_ad("tilecraft.attention", q, k, v)
    if eager_direct(q, k, v, cu_seqlens_q, cu_seqlens_k):  # the registered op's body, without its dispatch
        out, lse = _fwd_compute(q, k, v, cu_seqlens_q, cu_seqlens_k, p)  # no backward: no dQ path to pick
    elif eager_direct(q, k, v, cu_seqlens_q, cu_seqlens_k, autograd=True):  # the same, recorded by autograd
        out, lse = _EagerAttention.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, p,
                                         resolve_deterministic(deterministic, p, q))
    else:
        deterministic = resolve_deterministic(deterministic, p, q)
        out, lse = torch.ops.tilecraft.attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, p.seqlen_q, p.seqlen_k,
                                                     p.causal, p.scale, p.layout, deterministic)
    return (out, lse) if return_lse else out


__all__ = [
    "LAYOUTS",
    "BwdConfig",
    "FwdConfig",
    "attention",
    "default_bwd_config",
    "default_fwd_config",
    "gluon_ok",
    "launch_bwd",
    "launch_fwd",
    "launch_fwd_gluon",
    "resolve_deterministic",
    "triton_fwd_config",
    "validate",
]
