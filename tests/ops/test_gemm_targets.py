"""The GEMM kernels compile for every target, each compile in its own process (no GPU needed):
sm90 (the persistent TMA kernel issues wgmma with TMA loads), sm80 (mma.sync), and CDNA gfx942 /
gfx90a (MFMA) with the AMD configuration of ``tilecraft.tuning.gemm``. AMD is compiled, never run
here: it is untested on hardware.

What is compiled is what a launch would run: ``ops.gemm.target_plan`` builds the launch arguments
with the launch code itself (on meta tensors) and ``ops.gemm.compile_signature`` specialises them
as Triton does; no signature is written by hand here."""
from __future__ import annotations

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops

ARCH = {"sm90": "sm90", "sm80": "sm80", "gfx942": "cdna", "gfx90a": "cdna"}


def _compile(target: str, dtype: torch.dtype, size: int = 4096, **kwargs):
    """(config, resources) of ``matmul`` on contiguous size^3 operands for ``target``, with the full
    epilogue (alpha, C, bias, gelu) unless ``kwargs`` says otherwise."""
    a = torch.empty(size, size, dtype=dtype, device="meta")
    b = torch.empty(size, size, dtype=dtype, device="meta")
    out_dtype = ops.OUT_DTYPES[ops.DTYPE_NAMES[dtype]][0]
    epilogue = {"alpha": 2.0, "beta": 1.0, "c": torch.empty(size, size, dtype=out_dtype, device="meta"),
                "bias": torch.empty(size, dtype=out_dtype, device="meta"), "activation": "gelu"}
    _, cfg, plan = ops.target_plan(a, b, ARCH[target], sms=132, **{**epilogue, **kwargs})
    (launch,) = plan
    res = cross_compile("tilecraft.kernels.gemm", launch.kernel.__name__, ops.compile_signature(launch),
                        launch.constexprs, target, num_warps=launch.options["num_warps"],
                        num_stages=launch.options["num_stages"], sass=False)
    return cfg, launch, res


@pytest.mark.parametrize("target", ["gfx942", "gfx90a"])
def test_pointer_kernel_compiles_for_cdna(target):
    cfg, launch, res = _compile(target, torch.bfloat16)
    assert cfg.kernel == "pointer" and launch.kernel.__name__ == "matmul_kernel"
    assert res.error is None, res.error
    assert any(k.startswith("matrix:v_mfma") for k in res.census), res.census
    assert res.shared_bytes <= 65536
    # fp32-accurate on AMD is the bf16x6 split (tf32x3 does not exist there)
    _, launch, res = _compile(target, torch.float32, precision="fp32-accurate")
    assert launch.constexprs["INPUT_PRECISION"] == "bf16x6"
    assert res.error is None, res.error


@pytest.mark.parametrize("target,dtype,mfma", [
    ("gfx942", torch.float16, "f16"), ("gfx90a", torch.float16, "f16"),
    ("gfx942", torch.int8, "i32"), ("gfx90a", torch.int8, "i32"),
    ("gfx942", torch.float8_e4m3fn, "v_mfma"),  # e4m3fn (not gfx942's fnuz): widened to f16 before the MFMA
])
def test_other_dtypes_compile_for_cdna(target, dtype, mfma):
    """fp16, int8 (int32 out, exact) and fp8 through the pointer kernel's AMD configuration, as a
    launch would compile them (plain product, per-tensor scales for fp8): each issues MFMA."""
    a = torch.empty(1024, 1024, dtype=dtype, device="meta")
    b = torch.empty(1024, 1024, dtype=dtype, device="meta")
    kw = ({"scale_a": torch.empty((), device="meta"), "scale_b": torch.empty((), device="meta")}
          if dtype == torch.float8_e4m3fn else {})
    _, cfg, (launch,) = ops.target_plan(a, b, ARCH[target], sms=304, **kw)
    assert cfg.kernel == "pointer" and launch.kernel.__name__ == "matmul_kernel"
    res = cross_compile("tilecraft.kernels.gemm", launch.kernel.__name__, ops.compile_signature(launch),
                        launch.constexprs, target, num_warps=launch.options["num_warps"],
                        num_stages=launch.options["num_stages"], sass=False)
    assert res.error is None, res.error
    assert any(k.startswith("matrix:v_mfma") and mfma in k for k in res.census), res.census


def test_pointer_kernel_sm80_uses_mma():
    cfg, _, res = _compile("sm80", torch.bfloat16)
    assert cfg.kernel == "pointer"
    assert res.error is None, res.error
    assert any("mma.sync" in k for k in res.census), res.census


def test_tma_kernel_sm90_uses_wgmma_and_tma():
    """The TMA kernel with the full epilogue (the heuristic sends this call to the Gluon kernel,
    whose epilogue tests/ops/test_gemm_gluon_compile.py checks: the TMA config pinned here)."""
    from tilecraft.tuning.gemm import GemmConfig
    cfg, launch, res = _compile("sm90", torch.bfloat16, size=8192, cfg=GemmConfig("tma", 128, 256, 64, 8, 8, 3))
    assert cfg.kernel == "tma" and (cfg.block_m, cfg.block_n) == (128, 256)
    # 2048 tiles in 16 even rounds of 128 programs (ops.persistent_programs)
    assert launch.constexprs["EPILOGUE_SPLIT"] and launch.constexprs["NUM_SMS"] == 128 and launch.grid == (128,)
    sig = ops.compile_signature(launch)
    assert sig["a_desc"] == "tensordesc<bf16[1,128,64]>" and sig["b_desc"] == "tensordesc<bf16[1,64,256]>"
    assert res.error is None, res.error
    assert any("wgmma" in k for k in res.census), res.census
    assert res.spills <= 8  # the full epilogue (C, bias, gelu) in halves: 8 bytes (760 at once)


def test_compile_signature_specialises_as_a_launch():
    """16-byte aligned pointers and multiples of 16 get ':16', an integer 1 ':1', a float none."""
    a = torch.empty(100, 48, dtype=torch.float16, device="meta")
    b = torch.empty(48, 8, dtype=torch.float16, device="meta").t().contiguous().t()  # column-major: NT
    _, _, plan = ops.target_plan(a, b, "sm80", sms=108, alpha=0.5)
    sig = ops.compile_signature(plan[0])
    assert sig["a_ptr"] == "*fp16:16" and sig["M"] == "i32" and sig["N"] == "i32" and sig["K"] == "i32:16"
    assert sig["stride_ak"] == "i32:1" and sig["stride_bk"] == "i32:1" and sig["stride_bn"] == "i32:16"
    assert sig["alpha_hi"] == "fp32"
    defaults = {"PDL"}  # left at its default (off) by the plan
    assert not defaults & set(plan[0].constexprs) and not set(sig) & set(plan[0].constexprs)
    assert set(sig) | set(plan[0].constexprs) | defaults == set(plan[0].kernel.arg_names)
    with pytest.raises(ValueError, match="unknown GPU family"):
        ops.target_plan(a, b, "sm70")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.int8, torch.float32])
def test_k0_on_sm90_runs_the_pointer_kernel(dtype):
    """K = 0 (out = act(beta * C + bias)) of a product big enough for the TMA and Gluon kernels:
    their descriptors cannot describe an empty K, so the choice is the pointer kernel, which writes
    the epilogue alone; a pinned TMA config is refused with a clear error."""
    from tilecraft.tuning.gemm import GemmConfig
    a = torch.empty(4096, 0, dtype=dtype, device="meta")
    b = torch.empty(0, 4096, dtype=dtype, device="meta")
    out_dtype = ops.OUT_DTYPES[ops.DTYPE_NAMES[dtype]][0]
    kw = {"precision": "tf32"} if dtype == torch.float32 else {}
    for extra in ({}, {"beta": 2, "c": torch.empty(4096, 4096, dtype=out_dtype, device="meta")}):
        spec, cfg, plan = ops.target_plan(a, b, "sm90", sms=132, **kw, **extra)
        assert spec.k == 0 and cfg.kernel == "pointer", cfg
        assert [k.kernel.__name__ for k in plan] == ["matmul_kernel"]
    p = ops.problem_of(a, b, spec, arch="sm90", sms=132)
    assert not p.tma_ok and not p.gluon_ok
    with pytest.raises(ValueError, match="needs K > 0"):
        ops.target_plan(a, b, "sm90", sms=132, cfg=GemmConfig("tma", 128, 256, 64, 8, 8, 3), **kw)
