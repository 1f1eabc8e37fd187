"""Attention suites: ours against SDPA's cuDNN, FlashAttention-2 and memory-efficient backends.

Every case is checked against a float64 reference (outputs poisoned with NaN first) before it is
timed. Useful work (FlashAttention's convention, the one SDPA's numbers are quoted in):

* forward FLOPs = 4 · B · H · S_q · S_k · D (two products), halved when causal (about half the
  (i, j) pairs are visible; exactly, the count of visible pairs is used below);
* backward FLOPs = 2.5 × forward (five products against two);
* least bytes: q, k, v read once and out written once (backward: q, k, v, out, dO, lse read, dq,
  dk, dv written) — the decode shapes are measured against these bytes and the copy bandwidth.

``compile_report`` cross-compiles the kernels for a GPU that need not be present (registers,
spills, shared memory, occupancy), through ``tilecraft.analysis.compiled``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tilecraft.bench.harness import SETTLE_S as harness_settle_s
from tilecraft.ops import attention as ops

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# ||ours - ref|| / ||ref|| allowed against the float64 reference, random N(0, 1) inputs.
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SDPA_BACKENDS = ("cudnn", "flash", "efficient")


@dataclass(frozen=True)
class Shape:
    """One attention problem: batch, query heads, K/V heads, query and key lengths, head dim."""

    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    causal: bool = False

    @property
    def label(self) -> str:
        gqa = f"/{self.kv_heads}" if self.kv_heads != self.heads else ""
        sk = f"x{self.seqlen_k}" if self.seqlen_k != self.seqlen_q else ""
        return (f"B{self.batch} H{self.heads}{gqa} S{self.seqlen_q}{sk} D{self.head_dim}"
                + (" causal" if self.causal else ""))

    def as_dict(self) -> dict:
        return {"batch": self.batch, "heads": self.heads, "kv_heads": self.kv_heads, "seqlen_q": self.seqlen_q,
                "seqlen_k": self.seqlen_k, "head_dim": self.head_dim, "causal": self.causal}


def visible_pairs(seqlen_q: int, seqlen_k: int, causal: bool) -> int:
    """(query, key) pairs the softmax sums over: all of them, or under the bottom-right causal
    mask sum over i of clamp(i + S_k - S_q + 1, 0, S_k)."""
    if not causal:
        return seqlen_q * seqlen_k
    total = 0
    diag = seqlen_k - seqlen_q
    # rows whose visible count is clamped at S_k, and the ramp below them
    for i in range(seqlen_q):
        total += min(max(i + diag + 1, 0), seqlen_k)
    return total


def attention_flops(s: Shape, backward: bool = False) -> float:
    """Useful FLOPs: 4·B·H·D per visible (query, key) pair forward, 2.5 times that backward."""
    fwd = 4.0 * s.batch * s.heads * s.head_dim * visible_pairs(s.seqlen_q, s.seqlen_k, s.causal)
    return 2.5 * fwd if backward else fwd


def attention_bytes(s: Shape, itemsize: int = 2, backward: bool = False) -> int:
    """Least device-memory traffic: every input read once, every output written once."""
    q = s.batch * s.heads * s.seqlen_q * s.head_dim * itemsize
    kv = 2 * s.batch * s.kv_heads * s.seqlen_k * s.head_dim * itemsize
    lse = s.batch * s.heads * s.seqlen_q * 4
    if not backward:
        return q + kv + q  # q, k, v in; out
    return (3 * q + kv + lse) + (q + kv)  # q, out, dO, k, v, lse in; dq, dk, dv out


# ----------------------------------------------------------------------------------------------
# cross-compiled resources
# ----------------------------------------------------------------------------------------------
_TRITON = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def _int_hint(value: int) -> str:
    return "i32" + (":16" if value % 16 == 0 else ":1" if value == 1 else "")


def kernel_signatures(s: Shape, dtype: torch.dtype, fwd: ops.FwdConfig | None = None,
                      bwd: ops.BwdConfig | None = None, deterministic: bool = True, tma: bool = True) -> list[dict]:
    """What ``launch_fwd``/``launch_bwd`` would compile for contiguous "bhsd" tensors of shape s on an
    sm90 GPU: per kernel its name, Triton signature (with the alignment hints a launch specialises
    on), constexprs, num_warps and num_stages — the input of ``analysis.compiled.cross_compile``.
    ``fwd`` sets the pointer forward's tiles; ``tma`` adds the tensor-descriptor forward with its
    default tiles."""
    dev = torch.device("cuda")
    # the pointer kernel's tiles as sm90 would run them (the TMA variant takes descriptor arguments)
    fwd = fwd or ops.pointer_fwd_config(s.head_dim, dev, hopper=True)
    bwd = bwd or ops.default_bwd_config(s.head_dim, dev, hopper=True)
    t = "*" + _TRITON[dtype] + ":16"
    d = s.head_dim
    q_str = {"b": s.heads * s.seqlen_q * d, "h": s.seqlen_q * d, "s": d}
    k_str = {"b": s.kv_heads * s.seqlen_k * d, "h": s.seqlen_k * d, "s": d}
    lse_str = {"lb": s.heads * s.seqlen_q, "lh": s.seqlen_q}
    shared = {"HEAD_DIM": d, "BLOCK_D": ops.block_d(d), "CAUSAL": s.causal, "VARLEN": False}
    # the backward's grouped heavy-first order as on an H100 / H200 (50 MiB of L2; a Shape has a Problem's sizes)
    bwd_order = ops.bwd_orders(s, bwd, ops.HOPPER_L2_BYTES)

    def strides(prefix: str, st: dict) -> dict:
        return {f"stride_{prefix}{a}": _int_hint(st[a]) for a in ("b", "h", "s")}

    ints = {"H": _int_hint(s.heads), "GROUP": _int_hint(s.heads // s.kv_heads), "S_Q": _int_hint(s.seqlen_q),
            "S_K": _int_hint(s.seqlen_k)}
    lse = {f"stride_{k}": _int_hint(v) for k, v in lse_str.items()}
    fwd_sig = {"Q": t, "K": t, "V": t, "O": t, "LSE": "*fp32:16", "CU_Q": "*i32:16", "CU_K": "*i32:16",
               **strides("q", q_str), **strides("k", k_str), **strides("v", k_str), **strides("o", q_str), **lse,
               **ints, "qk_scale": "fp32"}
    dq_t = t if deterministic else "*fp32:16"
    # the atomic dQ as sm90 runs it: TMA bulk reductions where the fp32 rows allow (ops.dq_tma_ok)
    atomic = 0 if deterministic else (2 if bwd.dq_tma and d % 4 == 0 else 1)
    dq_desc = f"tensordesc<fp32[1,{bwd.block_m1},{ops.block_d(d)}]>" if atomic == 2 else dq_t
    dkdv_sig = {"Q": t, "K": t, "V": t, "DO": t, "LSE": "*fp32:16", "DELTA": "*fp32:16", "DK": t, "DV": t,
                "DQ": dq_t, "DQ_DESC": dq_desc, "CU_Q": "*i32:16", "CU_K": "*i32:16",
                **strides("q", q_str), **strides("k", k_str), **strides("v", k_str), **strides("do", q_str),
                **strides("dk", k_str), **strides("dv", k_str), **strides("dq", q_str), **lse, **ints,
                "sm_scale": "fp32", "qk_scale": "fp32"}
    dq_sig = {"Q": t, "K": t, "V": t, "DO": t, "LSE": "*fp32:16", "DELTA": "*fp32:16", "DQ": t, "CU_Q": "*i32:16",
              "CU_K": "*i32:16", **strides("q", q_str), **strides("k", k_str), **strides("v", k_str),
              **strides("do", q_str), **strides("dq", q_str), **lse, **ints, "sm_scale": "fp32", "qk_scale": "fp32"}
    out = [{"kernel": "attention_fwd_kernel", "signature": fwd_sig,
            "constexprs": dict(shared, BLOCK_M=fwd.block_m, BLOCK_N=fwd.block_n, WARP_SPECIALIZE=fwd.warp_specialize,
                               PAIRED=fwd.paired and s.causal),
            "num_warps": fwd.num_warps, "num_stages": fwd.num_stages, "maxnreg": fwd.maxnreg or None},
           {"kernel": "attention_bwd_dkdv_kernel", "signature": dkdv_sig,
            "constexprs": dict(shared, BLOCK_M=bwd.block_m1, BLOCK_N=bwd.block_n1, ATOMIC_DQ=atomic,
                               PAIRED=bwd.paired and s.causal, ORDER=bwd_order[0]),
            "num_warps": bwd.num_warps,
            "num_stages": (atomic and bwd.atomic_num_stages) or bwd.num_stages}]
    if tma:
        tma_cfg = ops.triton_fwd_config(s.head_dim, dev, hopper=True)
        bd = ops.block_d(d)

        def desc(rows: int) -> str:
            return f"tensordesc<{_TRITON[dtype]}[1,1,{rows},{bd}]>"
        out.append({"kernel": "attention_fwd_tma_kernel",
                    "signature": {"Q_DESC": desc(tma_cfg.block_m), "K_DESC": desc(tma_cfg.block_n),
                                  "V_DESC": desc(tma_cfg.block_n), "O_DESC": desc(tma_cfg.block_m),
                                  "LSE": "*fp32:16", **lse, **ints, "qk_scale": "fp32",
                                  "BH": _int_hint(s.batch * s.heads)},
                    "constexprs": {"HEAD_DIM": d, "BLOCK_D": bd, "CAUSAL": s.causal, "BLOCK_M": tma_cfg.block_m,
                                   "BLOCK_N": tma_cfg.block_n, "WARP_SPECIALIZE": tma_cfg.warp_specialize,
                                   "PERSISTENT": tma_cfg.persistent, "PAIRED": tma_cfg.paired and s.causal},
                    "num_warps": tma_cfg.num_warps, "num_stages": tma_cfg.num_stages})
    if deterministic:
        out.append({"kernel": "attention_bwd_dq_kernel", "signature": dq_sig,
                    "constexprs": dict(shared, BLOCK_M=bwd.block_m2, BLOCK_N=bwd.block_n2, PAIRED=bwd.paired and s.causal,
                                       ORDER=bwd_order[1]),
                    "num_warps": bwd.dq_num_warps or bwd.num_warps, "num_stages": bwd.dq_num_stages or bwd.num_stages})
    return out


def compile_report(s: Shape, dtype: torch.dtype, target: str = "sm90", fwd: ops.FwdConfig | None = None,
                   bwd: ops.BwdConfig | None = None, deterministic: bool = True, kernels: Sequence[str] | None = None,
                   timeout_s: float = 300.0, tma: bool = True) -> list[dict]:
    """Each kernel cross-compiled for ``target`` (a child process each): registers, spills, shared
    memory, occupancy, instruction census; ``error`` set when the compiler failed or aborted."""
    from tilecraft.analysis.compiled import cross_compile

    out = []
    for k in kernel_signatures(s, dtype, fwd, bwd, deterministic, tma):
        if kernels and k["kernel"] not in kernels:
            continue
        res = cross_compile("tilecraft.kernels.attention", k["kernel"], k["signature"], k["constexprs"], target,
                            num_warps=k["num_warps"], num_stages=k["num_stages"], maxnreg=k.get("maxnreg"),
                            timeout_s=timeout_s)
        d = res.as_dict()
        d["config"] = {kk: v for kk, v in k["constexprs"].items() if kk.startswith("BLOCK")}
        d["config"].update(num_warps=k["num_warps"], num_stages=k["num_stages"])
        out.append(d)
    return out


def gluon_kernel_signature(s: Shape, dtype: torch.dtype, cfg: ops.FwdConfig) -> dict:
    """What ``launch_fwd_gluon`` compiles for contiguous "bhsd" tensors of shape s: the Gluon
    forward's name, signature (4D tensor descriptors with their NVMMA shared layouts), constexprs,
    num_warps and num_stages — the input of ``analysis.compiled.cross_compile``."""
    from triton.experimental.gluon import language as gl

    gdt = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16

    def desc(rows: int) -> str:
        box = [1, 1, rows, s.head_dim]
        return f"tensordesc<{_TRITON[dtype]}[{','.join(map(str, box))}],{gl.NVMMASharedLayout.get_default_for(box, gdt)!r}>"
    q_rows = cfg.block_m // cfg.consumers if cfg.ws else cfg.block_m
    # the grouped heavy-first order as on an H100 / H200 (50 MiB of L2)
    order = ops.order_constexpr(cfg, s.causal, s.batch * s.heads, s.heads // s.kv_heads, s.seqlen_k, s.head_dim,
                                ops.HOPPER_L2_BYTES)
    sig = {"q_desc": desc(q_rows), "k_desc": desc(cfg.block_n), "v_desc": desc(cfg.block_n),
           "o_desc": desc(q_rows), "LSE": "*fp32:16", "stride_lb": _int_hint(s.heads * s.seqlen_q),
           "stride_lh": _int_hint(s.seqlen_q), "H": _int_hint(s.heads), "GROUP": _int_hint(s.heads // s.kv_heads),
           "S_Q": _int_hint(s.seqlen_q), "S_K": _int_hint(s.seqlen_k), "qk_scale": "fp32"}
    if cfg.ws:
        sig = dict(list(sig.items())[:7] + [("BH", _int_hint(s.batch * s.heads))] + list(sig.items())[7:])
        cx = {"HEAD_DIM": s.head_dim, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "STAGES": cfg.num_stages, "CAUSAL": s.causal,
              "PIPELINE": cfg.overlap, "PINGPONG": int(cfg.pingpong), "SEPARATE_O": ops.ws_separate_o(cfg, s.head_dim),
              "POLY": cfg.poly, "PERSISTENT": cfg.persistent, "CONSUMER_REGS": ops.ws_registers(cfg)[0],
              "LOADER_REGS": ops.ws_registers(cfg)[1], "num_warps": 4, "EARLY": cfg.early, "TREE": cfg.tree,
              "PAIRED": cfg.paired and s.causal, "ORDER": order, "NAMED_SLOTS": cfg.named_slots, "LAZY": cfg.lazy}
        return {"kernel": "attention_fwd_gluon_ws_kernel", "signature": sig, "constexprs": cx, "num_warps": 4,
                "num_stages": cfg.num_stages, "maxnreg": ops.ws_registers(cfg)[2]}
    cx = {"HEAD_DIM": s.head_dim, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "STAGES": cfg.num_stages,
          "CAUSAL": s.causal, "PIPELINE": cfg.overlap, "num_warps": cfg.num_warps, "POLY": cfg.poly,
          "PAIRED": cfg.paired and s.causal, "ORDER": order, "LAZY": cfg.lazy}
    return {"kernel": "attention_fwd_gluon_kernel", "signature": sig, "constexprs": cx, "num_warps": cfg.num_warps,
            "num_stages": cfg.num_stages, "maxnreg": cfg.maxnreg or None}


def gluon_compile_report(s: Shape, dtype: torch.dtype, cfg: ops.FwdConfig | None = None, target: str = "sm90",
                         timeout_s: float = 300.0) -> dict:
    """The Gluon forward cross-compiled for sm90 in a child process (no GPU needed): registers,
    spills, shared memory and the instruction census (``wgmma``, TMA, ``HGMMA``); ``cfg`` defaults
    to the measured choice for the shape (or 128 x 128, 2 stages)."""
    from tilecraft.analysis.compiled import cross_compile

    cfg = cfg or ops.GLUON_FWD.get((s.head_dim, s.causal)) or ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True)
    k = gluon_kernel_signature(s, dtype, cfg)
    res = cross_compile("tilecraft.kernels.attention_gluon", k["kernel"], k["signature"], k["constexprs"], target,
                        num_warps=k["num_warps"], num_stages=1, maxnreg=k.get("maxnreg"), timeout_s=timeout_s)
    d = res.as_dict()
    d["config"] = cfg.as_dict()
    return d


def gluon_decode_compile_report(s: Shape, dtype: torch.dtype, cfg: ops.DecodeConfig, target: str = "sm90",
                                timeout_s: float = 300.0) -> dict:
    """``attention_decode_gluon_kernel`` as ``launch_decode`` compiles it for contiguous "bhsd"
    tensors of shape s (K/V through 4D descriptors), cross-compiled for sm90 in a child process:
    registers, spills, shared memory, instruction census."""
    from triton.experimental.gluon import language as gl

    from tilecraft.analysis.compiled import cross_compile

    gdt = gl.bfloat16 if dtype == torch.bfloat16 else gl.float16
    box = [1, 1, cfg.block_n, s.head_dim]
    desc = f"tensordesc<{_TRITON[dtype]}[{','.join(map(str, box))}],{gl.NVMMASharedLayout.get_default_for(box, gdt)!r}>"
    d = s.head_dim
    splits_stride = s.batch * s.heads * s.seqlen_q
    sig = {"Q": "*" + _TRITON[dtype] + ":16", "k_desc": desc, "v_desc": desc, "O_PART": "*fp32:16",
           "LSE_PART": "*fp32:16", "stride_qb": _int_hint(s.heads * s.seqlen_q * d), "stride_qh": _int_hint(s.seqlen_q * d),
           "stride_qs": _int_hint(d), "stride_ps": _int_hint(splits_stride), "stride_pb": _int_hint(s.heads * s.seqlen_q),
           "stride_ph": _int_hint(s.seqlen_q), "stride_pm": "i32:1", "H": _int_hint(s.heads),
           "GROUP": _int_hint(s.heads // s.kv_heads), "S_Q": _int_hint(s.seqlen_q), "S_K": _int_hint(s.seqlen_k),
           "keys_per_split": "i32:16", "qk_scale": "fp32"}
    cx = {"HEAD_DIM": d, "BLOCK_N": cfg.block_n, "STAGES": cfg.num_stages, "CAUSAL": s.causal,
          "PIPELINE": cfg.overlap, "num_warps": 4}
    res = cross_compile("tilecraft.kernels.attention_gluon", "attention_decode_gluon_kernel", sig, cx, target,
                        num_warps=4, num_stages=1, timeout_s=timeout_s)
    out = res.as_dict()
    out["config"] = cfg.as_dict()
    return out


# ----------------------------------------------------------------------------------------------
# correctness check (the one every timed case passes first)
# ----------------------------------------------------------------------------------------------
def make_inputs(s: Shape, dtype: torch.dtype, device: str | torch.device, generator: torch.Generator | None = None,
                requires_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random N(0, 1) q, k, v in "bhsd" (never zeros: they hide unwritten outputs)."""
    def one(h: int, n: int) -> torch.Tensor:
        x = torch.randn(s.batch, h, n, s.head_dim, device=device, generator=generator, dtype=torch.float32)
        return x.to(dtype).requires_grad_(requires_grad)
    return one(s.heads, s.seqlen_q), one(s.kv_heads, s.seqlen_k), one(s.kv_heads, s.seqlen_k)


def rel_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    """||ours - ref|| / ||ref|| over finite reference entries; NaN in ours makes it NaN."""
    ours = ours.double()
    den = ref.norm().item()
    return ((ours - ref).norm().item() / den) if den > 0 else (ours - ref).norm().item()


def check_forward(s: Shape, dtype: torch.dtype, run: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple],
                  device: str = "cuda", seed: int = 0) -> tuple[bool, float, str]:
    """Run ``run(q, k, v) -> (out, lse)`` once on fresh random inputs against the float64 reference."""
    from tilecraft.reference.attention import attention_reference

    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = make_inputs(s, dtype, device, gen)
    out, lse = run(q, k, v)
    ref_o, ref_l = attention_reference(q, k, v, causal=s.causal)
    if torch.isnan(out).any():
        return False, float("nan"), "NaN in the output (unwritten or invalid)"
    err = rel_error(out, ref_o)
    if lse is not None:
        fin = torch.isfinite(ref_l)
        if not torch.equal(torch.isfinite(lse), fin):
            return False, err, "lse is not -inf exactly on the rows that see no key"
        lerr = (lse.double()[fin] - ref_l[fin]).abs().max().item() if fin.any() else 0.0
        if not lerr < 1e-2:
            return False, err, f"lse differs from the reference by {lerr:.2e}"
    tol = TOLERANCE[dtype]
    return err <= tol, err, "" if err <= tol else f"relative error {err:.2e} > {tol:.0e}"


def check_backward(s: Shape, dtype: torch.dtype, run: Callable[..., tuple], device: str = "cuda",
                   seed: int = 1) -> tuple[bool, float, str]:
    """``run(q, k, v, do) -> (dq, dk, dv)`` on fresh random inputs against the float64 formulas;
    the error is the largest of the three relative errors."""
    from tilecraft.reference.attention import attention_backward_reference

    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = make_inputs(s, dtype, device, gen)
    do = torch.randn(q.shape, device=device, generator=gen).to(dtype)
    grads = run(q, k, v, do)
    ref = attention_backward_reference(q, k, v, do, causal=s.causal)
    errs = []
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        if torch.isnan(g).any():
            return False, float("nan"), f"NaN in {name} (unwritten or invalid)"
        errs.append(rel_error(g, r))
    err = max(errs)
    tol = 1.5 * TOLERANCE[dtype]
    return err <= tol, err, "" if err <= tol else f"relative error {err:.2e} > {tol:.0e}"


# ----------------------------------------------------------------------------------------------
# timing: ours and SDPA's backends on the same rotated inputs
# ----------------------------------------------------------------------------------------------
#: The issue's target shapes (B, H, H_kv, S_q, S_k, D, causal); decode shapes are measured
#: against the copy bandwidth over their K/V bytes.
ISSUE_SHAPES = (
    Shape(4, 16, 16, 4096, 4096, 128), Shape(4, 16, 16, 4096, 4096, 128, True),
    Shape(8, 16, 16, 2048, 2048, 64), Shape(8, 16, 16, 2048, 2048, 64, True),
    Shape(2, 16, 16, 4096, 4096, 256), Shape(2, 16, 16, 4096, 4096, 256, True),
    Shape(8, 32, 8, 1, 8192, 128), Shape(8, 32, 8, 16, 8192, 128),
    Shape(16, 32, 32, 1, 4096, 128), Shape(4, 32, 8, 4, 32768, 128),
)


def is_decode(s: Shape) -> bool:
    """Few queries against a long key sequence: bound by reading K and V."""
    return s.seqlen_q <= 16 and s.seqlen_k >= 1024


def _check_shape(s: Shape) -> Shape:
    """The shape the float64 check runs on: the timed one with batch 1 and at most 2 K/V head groups
    (same lengths, head dim and grouping, so the same kernel specialisation)."""
    group = s.heads // s.kv_heads
    kv = min(s.kv_heads, 2)
    return Shape(1, kv * group, kv, s.seqlen_q, s.seqlen_k, s.head_dim, s.causal)


def _sdpa(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kind = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]

    def run(q, k, v, causal):
        with sdpa_kernel([kind]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    return run


def _sdpa_causal_ok(s: Shape) -> bool:
    # SDPA's is_causal is top-left aligned; it equals ours (bottom-right) only when S_q == S_k.
    return not s.causal or s.seqlen_q == s.seqlen_k


@dataclass
class Timed:
    impl: str
    ok: bool
    rel_error: float | None
    time_ms: float | None = None
    timing: dict | None = None
    message: str = ""
    resources: list | None = None


def _ours_fwd(s: Shape, cfg: ops.FwdConfig | ops.DecodeConfig | None):
    """Ours forward into given (or new, NaN-filled: the check sees unwritten elements) out/lse; ``cfg``
    picks the path: a FwdConfig the tiled kernel, a DecodeConfig the split-KV one, None what
    ``tilecraft.attention`` would run."""
    def run(q, k, v, out=None, lse=None):
        p = ops.validate(q, k, v, causal=s.causal, scale=None, layout="bhsd")
        out = torch.full_like(q, float("nan")) if out is None else out
        lse = (torch.full((p.batch, p.heads, p.seqlen_q), float("nan"), device=q.device, dtype=torch.float32)
               if lse is None else lse)
        c = cfg
        if c is None:
            c = (ops.decode_config(p, q, k, v) if ops.uses_decode(p)
                 else ops.default_fwd_config(p.head_dim, q.device, causal=p.causal))
        if isinstance(c, ops.DecodeConfig):
            handles = ops.launch_decode(q, k, v, out, lse, p, c)
        else:
            handles = [ops.launch_fwd(q, k, v, out, lse, None, None, p, c)]
        return out, lse, handles
    return run


def graphed(fn: Callable[[int], object], n_sets: int) -> Callable[[int], object] | None:
    """``fn(i)`` captured once per input set as a CUDA graph; calling the result replays graph i.
    Takes the host's launch overhead out of short kernels' times (decode shapes: tens of µs).
    None when capture fails."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(n_sets):
                fn(i)
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for i in range(n_sets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn(i)
            graphs.append(g)
    except RuntimeError:
        return None
    return lambda i: graphs[i].replay()


def _time(fn: Callable[[int], object], n_sets: int, device: str, budget_s: float, use_graphs: bool,
          settle_s: float = 0.0):
    from tilecraft.bench.harness import time_rotating

    replay = graphed(fn, n_sets) if use_graphs and torch.device(device).type == "cuda" else None
    t = time_rotating(replay or fn, n_sets, device=device, budget_s=budget_s, settle_s=settle_s)
    d = t.as_dict()
    d["method"] = "cuda-graph replay" if replay else "eager"
    d["settle_s"] = settle_s
    return t.median_ms, d


def _ours_bwd(s: Shape, cfg: ops.BwdConfig | None, deterministic: bool | None):
    """Ours backward into given (or new, NaN-filled) dq, dk, dv."""
    def run(q, k, v, do, out, lse, grads=None):
        p = ops.validate(q, k, v, causal=s.causal, scale=None, layout="bhsd")
        grads = grads or tuple(torch.full_like(t, float("nan")) for t in (q, k, v))
        handles = ops.launch_bwd(do, q, k, v, out, lse, None, *grads, None, None, p,
                                 cfg or ops.default_bwd_config(p.head_dim, q.device), deterministic)
        return grads, handles
    return run


def _resources(handles) -> list[dict]:
    """Registers, spills and shared memory of the launched kernels (Triton's compiled kernels)."""
    out = []
    for h in handles:
        if h is None or getattr(h, "n_regs", None) is None:
            continue
        meta = getattr(h, "metadata", None)
        out.append({"kernel": getattr(meta, "name", "?"), "registers": h.n_regs,
                    "spills": getattr(h, "n_spills", None), "num_warps": getattr(meta, "num_warps", None),
                    "shared_bytes": getattr(meta, "shared", None)})
    return out


def measure(s: Shape, dtype: torch.dtype, direction: str = "fwd", *, backends: Sequence[str] = SDPA_BACKENDS,
            fwd: ops.FwdConfig | ops.DecodeConfig | None = None, bwd: ops.BwdConfig | None = None,
            deterministic: bool | None = None, budget_s: float = 1.0, device: str = "cuda", l2_bytes: int | None = None,
            graphs: bool = True, settle_s: float = 0.0) -> list[Timed]:
    """Check, then time ours and each SDPA backend on one shape, one direction (fwd or bwd).

    Forward times are CUDA-graph replays (``graphs``) for ours and SDPA alike, so host launch
    overhead stays out of short kernels; backward times are eager (SDPA's through autograd). Each
    implementation runs untimed for ``settle_s`` seconds before its timing (``time_rotating``), so it
    is timed in its own clock state at the card's power cap rather than in its predecessor's."""
    from tilecraft.bench.harness import rotation_sets

    if direction not in ("fwd", "bwd"):
        raise ValueError(f"direction must be 'fwd' or 'bwd', got {direction!r}")
    results: list[Timed] = []
    small = _check_shape(s)
    ours_f = _ours_fwd(s, fwd)
    ours_b = _ours_bwd(s, bwd, deterministic)
    try:
        if direction == "fwd":
            ok, err, msg = check_forward(small, dtype, lambda q, k, v: ours_f(q, k, v)[:2], device)
        else:
            def run_b(q, k, v, do):
                out, lse, _ = ours_f(q, k, v)
                return ours_b(q, k, v, do, out, lse)[0]
            ok, err, msg = check_backward(small, dtype, run_b, device)
    except (RuntimeError, ValueError) as exc:  # compile failure, out of resources
        ok, err, msg = False, None, f"{type(exc).__name__}: {exc}"[:300]
    ours = Timed("tilecraft", ok, err, message=msg)
    results.append(ours)

    per_set = attention_bytes(s, torch.finfo(dtype).bits // 8, backward=direction == "bwd")
    n_sets = rotation_sets(per_set, l2_bytes)
    gen = torch.Generator(device=device).manual_seed(7)
    sets = [make_inputs(s, dtype, device, gen) for _ in range(n_sets)]
    dos = [torch.randn(x[0].shape, device=device, generator=gen).to(dtype) for x in sets] if direction == "bwd" else []
    if ours.ok:
        try:
            outs = [ours_f(*x) for x in sets]
            if direction == "fwd":
                ours.resources = _resources(outs[0][2])
                ours.time_ms, ours.timing = _time(lambda i: ours_f(*sets[i], outs[i][0], outs[i][1]), n_sets, device,
                                                  budget_s, graphs, settle_s)
            else:
                grads = [(torch.empty_like(x[0]), torch.empty_like(x[1]), torch.empty_like(x[2])) for x in sets]
                _, handles = ours_b(*sets[0], dos[0], outs[0][0], outs[0][1], grads[0])
                ours.resources = _resources(handles)
                ours.time_ms, ours.timing = _time(lambda i: ours_b(*sets[i], dos[i], outs[i][0], outs[i][1], grads[i]),
                                                  n_sets, device, budget_s, False, settle_s)
                q0 = sets[0][0]
                p0 = ops.validate(q0, sets[0][1], sets[0][2], causal=s.causal, scale=None, layout="bhsd")
                ours.timing["dq_path"] = ops.dq_path(deterministic, p0, q0,
                                                     bwd or ops.default_bwd_config(p0.head_dim, q0.device))
            del outs
        except (RuntimeError, ValueError) as exc:
            ours.ok, ours.message = False, f"{type(exc).__name__}: {exc}"[:300]

    for name in backends:
        res = Timed(f"sdpa-{name}", False, None)
        results.append(res)
        if not _sdpa_causal_ok(s):
            res.message = "SDPA's causal mask is top-left aligned; not the same problem when S_q != S_k"
            continue
        fn = _sdpa(name)
        try:
            if direction == "fwd":
                res.ok, res.rel_error, res.message = check_forward(
                    small, dtype, lambda q, k, v, fn=fn: (fn(q, k, v, s.causal), None), device)
                if res.ok:
                    res.time_ms, res.timing = _time(lambda i, fn=fn: fn(*sets[i], s.causal), n_sets, device,
                                                    budget_s, graphs, settle_s)
            else:
                def grads_of(q, k, v, do, fn=fn):
                    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
                    out = fn(*leaves, s.causal)
                    return torch.autograd.grad(out, leaves, do)
                res.ok, res.rel_error, res.message = check_backward(small, dtype, grads_of, device)
                if res.ok:
                    leaves = [[x.detach().requires_grad_() for x in xs] for xs in sets]
                    outs_p = [fn(*lv, s.causal) for lv in leaves]
                    res.time_ms, res.timing = _time(
                        lambda i, o=outs_p, lv=leaves: torch.autograd.grad(o[i], lv[i], dos[i], retain_graph=True),
                        n_sets, device, budget_s, False, settle_s)
                    del outs_p, leaves
        except (RuntimeError, ValueError, NotImplementedError) as exc:  # backend cannot take the shape
            res.ok, res.message = False, f"unsupported: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    return results


def records_for(s: Shape, dtype: str, direction: str, results: Sequence[Timed], copy_TBps: float | None = None,
                config: dict | None = None) -> list:
    """One Record per implementation: TFLOP/s (decode shapes: TB/s over the least bytes against the
    copy bandwidth), each with flops, bytes and time_ms in ``extra``; ours carries the ratio to
    every SDPA backend and the best one as its peer."""
    from tilecraft.bench.harness import Record

    torch_dtype = DTYPES[dtype]
    flops = attention_flops(s, backward=direction == "bwd")
    nbytes = attention_bytes(s, torch.finfo(torch_dtype).bits // 8, backward=direction == "bwd")
    decode = is_decode(s) and direction == "fwd"
    value = {}
    for r in results:
        if r.ok and r.time_ms:
            value[r.impl] = (nbytes / (r.time_ms * 1e-3) / 1e12) if decode else (flops / (r.time_ms * 1e-3) / 1e12)
    peers = {k: v for k, v in value.items() if k != "tilecraft"}
    best = max(peers, key=peers.get) if peers else None
    records = []
    for r in results:
        case = {**s.as_dict(), "label": s.label, "dtype": dtype, "direction": direction, "impl": r.impl}
        if r.impl == "tilecraft" and config:
            case["config"] = config
        extra = {"ok": r.ok, "rel_error": r.rel_error, "message": r.message, "flops": flops, "bytes": nbytes,
                 "time_ms": r.time_ms, "timing": r.timing, "decode": decode}
        if r.resources:
            extra["resources"] = r.resources
        ours_v = value.get(r.impl, float("nan"))
        if r.impl == "tilecraft" and r.impl in value:
            extra["ratio_to"] = {k: value["tilecraft"] / v for k, v in peers.items()}
        extra["tflops"] = flops / (r.time_ms * 1e-3) / 1e12 if r.time_ms else None
        extra["bandwidth_TBps"] = nbytes / (r.time_ms * 1e-3) / 1e12 if r.time_ms else None
        is_ours = r.impl == "tilecraft"
        records.append(Record(
            "attention." + direction, case, "bandwidth" if decode else "tflops", "TB/s" if decode else "TFLOP/s",
            ours_v, peer=best if is_ours and best and r.ok else None,
            peer_value=peers[best] if is_ours and best and r.ok else None,
            ceiling="copy" if decode and copy_TBps else None, ceiling_value=copy_TBps if decode else None,
            extra=extra))
    return records


def default_config(s: Shape, direction: str):
    """The configuration ``tilecraft.attention`` runs on a GPU for this shape and direction."""
    dev = torch.device("cuda")
    if direction == "bwd":
        return ops.default_bwd_config(s.head_dim, dev)
    if s.seqlen_q <= ops.DECODE_MAX_QUERIES and s.seqlen_k >= ops.DECODE_MIN_KEYS:
        hopper = torch.cuda.get_device_capability() == (9, 0)
        choice = ops.sm90_decode_choice(s.head_dim, s.heads // s.kv_heads * s.seqlen_q) if hopper else None
        return choice or ops.default_decode_config(s.head_dim, dev)
    return ops.default_fwd_config(s.head_dim, dev, hopper=torch.cuda.get_device_capability() == (9, 0),
                                  causal=s.causal)


def median_of_rounds(rounds: Sequence[Sequence[Timed]]) -> list[Timed]:
    """One :class:`Timed` per implementation from several rounds of :func:`measure` on one case: the
    round with the median time (the lower one of the middle two for an even count), its ``timing``
    with every round's time added (``round_times_ms``). An implementation that failed in any round
    keeps that failure (a wrong result must not be hidden by a good round)."""
    import statistics

    by_impl: dict[str, list[Timed]] = {}
    for results in rounds:
        for r in results:
            by_impl.setdefault(r.impl, []).append(r)
    merged = []
    for impl, runs in by_impl.items():
        bad = [r for r in runs if not r.ok or not r.time_ms]
        if bad:
            merged.append(bad[0])
            continue
        times = [r.time_ms for r in runs]
        pick = next(r for r in runs if r.time_ms == statistics.median_low(times))
        merged.append(Timed(pick.impl, pick.ok, pick.rel_error, pick.time_ms,
                            {**(pick.timing or {}), "round_times_ms": times}, pick.message, pick.resources))
    return merged


#: Seconds each implementation runs untimed before its timing in ``tilecraft attention bench`` and the report
#: (``measure(settle_s=...)``): :data:`tilecraft.bench.harness.SETTLE_S`.
SETTLE_S = harness_settle_s


def bench(shapes: Sequence[Shape] = ISSUE_SHAPES, dtype: str = "bf16", directions: Sequence[str] = ("fwd", "bwd"),
          *, backends: Sequence[str] = SDPA_BACKENDS, deterministic: bool | None = None, budget_s: float = 1.0,
          info=None, progress: Callable[[str], None] | None = None, rounds: int = 1, settle_s: float = 0.0) -> list:
    """The ``tilecraft attention bench`` suite: every shape and direction, ours and SDPA's backends
    (decode shapes forward only, against the copy bandwidth measured in the same run). ``rounds`` > 1
    measures each case that many times in a row (ours and every backend each round) and keeps each
    implementation's median round (:func:`median_of_rounds`): one pass of the forward at D128 read
    1.04x cuDNN on an H100 where three rounds of the same code read 0.953-0.965x (2026-11-27,
    ``benchmarks/results/2026-11-27-h100/``), cuDNN's own time moving by up to 7% between passes.
    ``settle_s`` (``measure``): each implementation runs untimed that long before its timing."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")  # as bench.stencil.measure_rounds
    from tilecraft.hardware.ceilings import measure_copy_bandwidth
    from tilecraft.hardware.device import detect

    info = info or detect()
    say = progress or (lambda _m: None)
    copy = None
    if any(is_decode(s) for s in shapes):
        say("copy bandwidth")
        copy = measure_copy_bandwidth()
    records = []
    for s in shapes:
        for direction in directions:
            if direction == "bwd" and is_decode(s):
                continue
            say(f"{direction} {s.label}")
            results = median_of_rounds([measure(s, DTYPES[dtype], direction, backends=backends,
                                                deterministic=deterministic, budget_s=budget_s,
                                                l2_bytes=info.l2_bytes, settle_s=settle_s) for _ in range(rounds)])
            cfg = default_config(s, direction).as_dict()
            records += records_for(s, dtype, direction, results, copy, cfg)
            torch.cuda.empty_cache()
    return records
