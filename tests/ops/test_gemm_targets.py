"""The GEMM kernels compile for every target, each compile in its own process (no GPU needed):
sm90 (the persistent TMA kernel issues wgmma with TMA loads), sm80 (mma.sync), and CDNA gfx942 /
gfx90a (MFMA) with the AMD configuration of ``tilecraft.tuning.gemm``. AMD is compiled, never run
here: it is untested on hardware."""
from __future__ import annotations

import pytest
import triton.language as tl

from tilecraft.analysis.compiled import cross_compile
from tilecraft.tuning.gemm import Problem, heuristic

MODULE = "tilecraft.kernels.gemm"
_EPI_SIG = {"out_ptr": "*bf16:16", "c_ptr": "*bf16:16", "bias_ptr": "*bf16:16", "sa_ptr": "*fp32:16",
            "sb_ptr": "*fp32:16", "stride_ob": "i32:16", "stride_om": "i32:16", "stride_on": "i32:1",
            "stride_cb": "i32:16", "stride_cm": "i32:16", "stride_cn": "i32:1", "stride_bias_b": "i32",
            "stride_sa_b": "i32", "stride_sb_b": "i32", "alpha_hi": "fp32", "alpha_lo": "fp32",
            "beta_hi": "fp32", "beta_lo": "fp32"}
_EPI_CX = {"EPI": tl.float32, "HAS_ALPHA": True, "HAS_C": True, "HAS_BIAS": True, "SCALE_A": 0, "SCALE_B": 0,
           "ACTIVATION": 2, "UPCAST": False}


def _pointer(dtype: str, target: str, precision=None):
    arch = {"sm90": "sm90", "sm80": "sm80"}.get(target, "cdna")
    cfg = heuristic(Problem(4096, 4096, 4096, 1, {"bf16": "bf16", "fp32": "fp32"}[dtype], precision, arch, False,
                            True, False))
    sig = {"a_ptr": f"*{dtype}:16", "b_ptr": f"*{dtype}:16", "M": "i32:16", "N": "i32:16", "K": "i32:16",
           "K_PER_SPLIT": "i32:16", "stride_ab": "i32:16", "stride_am": "i32:16", "stride_ak": "i32:1",
           "stride_bb": "i32:16", "stride_bk": "i32:16", "stride_bn": "i32:1", **_EPI_SIG}
    cx = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
          "SPLIT_K": 1, "ACC": tl.float32, "INPUT_PRECISION": precision, "OFFS64": False, "EVEN_K": True, **_EPI_CX}
    return cross_compile(MODULE, "matmul_kernel", sig, cx, target, num_warps=cfg.num_warps,
                         num_stages=cfg.num_stages, sass=False)


@pytest.mark.parametrize("target", ["gfx942", "gfx90a"])
def test_pointer_kernel_compiles_for_cdna(target):
    res = _pointer("bf16", target)
    assert res.error is None, res.error
    assert any(k.startswith("matrix:v_mfma") for k in res.census), res.census
    assert res.shared_bytes <= 65536
    # fp32-accurate on AMD is the bf16x6 split (tf32x3 does not exist there)
    res = _pointer("fp32", target, "bf16x6")
    assert res.error is None, res.error


def test_pointer_kernel_sm80_uses_mma():
    res = _pointer("bf16", "sm80")
    assert res.error is None, res.error
    assert any("mma.sync" in k for k in res.census), res.census


def test_tma_kernel_sm90_uses_wgmma_and_tma():
    cfg = heuristic(Problem(8192, 8192, 8192, 1, "bf16", None, "sm90", True, True, False))
    assert cfg.kernel == "tma"
    sig = {"a_desc": f"tensordesc<bf16[1,{cfg.block_m},{cfg.block_k}]>",
           "b_desc": f"tensordesc<bf16[1,{cfg.block_k},{cfg.block_n}]>",
           "M": "i32:16", "N": "i32:16", "K": "i32:16", "BATCH": "i32", "K_PER_SPLIT": "i32:16", **_EPI_SIG}
    cx = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
          "NUM_SMS": 132, "A_KMAJOR": True, "B_KMAJOR": False, "A_BATCHED": False, "B_BATCHED": False,
          "ACC": tl.float32, "INPUT_PRECISION": None, "FLATTEN": cfg.flatten, "WARP_SPECIALIZE": False,
          "EPILOGUE_SPLIT": True, "SPLIT_K": 1, **_EPI_CX}
    res = cross_compile(MODULE, "matmul_tma_kernel", sig, cx, "sm90", num_warps=cfg.num_warps,
                        num_stages=cfg.num_stages, sass=False)
    assert res.error is None, res.error
    assert any("wgmma" in k for k in res.census), res.census
    assert res.spills <= 8  # the full epilogue (C, bias, gelu) in halves: 8 bytes (760 at once)
