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
                      bwd: ops.BwdConfig | None = None, deterministic: bool = True) -> list[dict]:
    """What ``launch_fwd``/``launch_bwd`` would compile for contiguous "bhsd" tensors of shape s on a
    GPU: per kernel its name, Triton signature (with the alignment hints a launch specialises on),
    constexprs, num_warps and num_stages — the input of ``analysis.compiled.cross_compile``."""
    dev = torch.device("cuda")
    fwd = fwd or ops.default_fwd_config(s.head_dim, dev)
    bwd = bwd or ops.default_bwd_config(s.head_dim, dev)
    t = "*" + _TRITON[dtype] + ":16"
    d = s.head_dim
    q_str = {"b": s.heads * s.seqlen_q * d, "h": s.seqlen_q * d, "s": d}
    k_str = {"b": s.kv_heads * s.seqlen_k * d, "h": s.seqlen_k * d, "s": d}
    lse_str = {"lb": s.heads * s.seqlen_q, "lh": s.seqlen_q}
    shared = {"HEAD_DIM": d, "BLOCK_D": ops.block_d(d), "CAUSAL": s.causal, "VARLEN": False}

    def strides(prefix: str, st: dict) -> dict:
        return {f"stride_{prefix}{a}": _int_hint(st[a]) for a in ("b", "h", "s")}

    ints = {"H": _int_hint(s.heads), "GROUP": _int_hint(s.heads // s.kv_heads), "S_Q": _int_hint(s.seqlen_q),
            "S_K": _int_hint(s.seqlen_k)}
    lse = {f"stride_{k}": _int_hint(v) for k, v in lse_str.items()}
    fwd_sig = {"Q": t, "K": t, "V": t, "O": t, "LSE": "*fp32:16", "CU_Q": "*i32:16", "CU_K": "*i32:16",
               **strides("q", q_str), **strides("k", k_str), **strides("v", k_str), **strides("o", q_str), **lse,
               **ints, "qk_scale": "fp32"}
    dq_t = t if deterministic else "*fp32:16"
    dkdv_sig = {"Q": t, "K": t, "V": t, "DO": t, "LSE": "*fp32:16", "DELTA": "*fp32:16", "DK": t, "DV": t,
                "DQ": dq_t, "CU_Q": "*i32:16", "CU_K": "*i32:16",
                **strides("q", q_str), **strides("k", k_str), **strides("v", k_str), **strides("do", q_str),
                **strides("dk", k_str), **strides("dv", k_str), **strides("dq", q_str), **lse, **ints,
                "sm_scale": "fp32", "qk_scale": "fp32"}
    dq_sig = {"Q": t, "K": t, "V": t, "DO": t, "LSE": "*fp32:16", "DELTA": "*fp32:16", "DQ": t, "CU_Q": "*i32:16",
              "CU_K": "*i32:16", **strides("q", q_str), **strides("k", k_str), **strides("v", k_str),
              **strides("do", q_str), **strides("dq", q_str), **lse, **ints, "sm_scale": "fp32", "qk_scale": "fp32"}
    out = [{"kernel": "attention_fwd_kernel", "signature": fwd_sig,
            "constexprs": dict(shared, BLOCK_M=fwd.block_m, BLOCK_N=fwd.block_n),
            "num_warps": fwd.num_warps, "num_stages": fwd.num_stages},
           {"kernel": "attention_bwd_dkdv_kernel", "signature": dkdv_sig,
            "constexprs": dict(shared, BLOCK_M=bwd.block_m1, BLOCK_N=bwd.block_n1, ATOMIC_DQ=not deterministic),
            "num_warps": bwd.num_warps, "num_stages": bwd.num_stages}]
    if deterministic:
        out.append({"kernel": "attention_bwd_dq_kernel", "signature": dq_sig,
                    "constexprs": dict(shared, BLOCK_M=bwd.block_m2, BLOCK_N=bwd.block_n2),
                    "num_warps": bwd.num_warps, "num_stages": bwd.num_stages})
    return out


def compile_report(s: Shape, dtype: torch.dtype, target: str = "sm90", fwd: ops.FwdConfig | None = None,
                   bwd: ops.BwdConfig | None = None, deterministic: bool = True, kernels: Sequence[str] | None = None,
                   timeout_s: float = 300.0) -> list[dict]:
    """Each kernel cross-compiled for ``target`` (a child process each): registers, spills, shared
    memory, occupancy, instruction census; ``error`` set when the compiler failed or aborted."""
    from tilecraft.analysis.compiled import cross_compile

    out = []
    for k in kernel_signatures(s, dtype, fwd, bwd, deterministic):
        if kernels and k["kernel"] not in kernels:
            continue
        res = cross_compile("tilecraft.kernels.attention", k["kernel"], k["signature"], k["constexprs"], target,
                            num_warps=k["num_warps"], num_stages=k["num_stages"], timeout_s=timeout_s)
        d = res.as_dict()
        d["config"] = {kk: v for kk, v in k["constexprs"].items() if kk.startswith("BLOCK")}
        d["config"].update(num_warps=k["num_warps"], num_stages=k["num_stages"])
        out.append(d)
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
