"""The Gluon FMA GEMM (fp32 ``ieee``, ``tilecraft.kernels.gemm_fma``) without a GPU: it cross-compiles
for sm90 and sm80 to the instruction mix it is built for, and the dispatch takes it only where it can
run. Its numbers are checked on the GPU (tests/gpu/test_gemm_fma.py, benchmarks/gemm_fma.py): the
Triton interpreter cannot run Gluon."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import (FMA_64X64, FMA_HEURISTIC, FMA_SMALL_M, FP32_SMALL_M, GemmConfig, Problem, heuristic,
                                    shape_key, split_to_fill)


def _meta(m, n, k, layout):
    a = torch.empty(k, m, device="meta").t() if layout[0] == "T" else torch.empty(m, k, device="meta")
    b = torch.empty(n, k, device="meta").t() if layout[1] == "T" else torch.empty(k, n, device="meta")
    return a, b


def _compile(a, b, arch, target, cfg=None):
    spec, cfg, plan = ops.target_plan(a, b, arch, sms=132, cfg=cfg)
    launch = next(k for k in plan if k.kernel.__name__ == "matmul_fma_kernel")
    res = cross_compile("tilecraft.kernels.gemm_fma", "matmul_fma_kernel", ops.compile_signature(launch),
                        launch.constexprs, target, num_warps=launch.options["num_warps"], sass=True)
    assert res.error is None, res.error
    return cfg, launch, res


@pytest.mark.parametrize("target", ["sm90", "sm80"])
@pytest.mark.parametrize("shape,layout", [((4096, 4096, 4096), "NN"), ((3000, 7000, 5000), "NN"),
                                          ((3000, 7000, 5000), "TT"), ((1000, 1000, 1000), "NT")])
def test_fma_kernel_cross_compiles_to_the_sgemm_mix(target, shape, layout):
    """No spills; each 32-deep K step of a 64 x 128 tile at 4 warps (8 x 8 results per thread) is
    128 shared loads of 128 bits for 64 x 32 FMAs per thread, i.e. 16 FFMA per LDS.128; every
    global-to-shared copy is a 16-byte cp.async, also on rows of 5000 / 7000 / 1000 floats (``VEC4``)."""
    a, b = _meta(*shape, layout)
    cfg, launch, res = _compile(a, b, target, target)
    assert replace(cfg, split_k=1, mn_copy="") == FMA_HEURISTIC  # 1000^3: split 2; TT: B copied N-contiguous
    assert launch.constexprs["VEC4"] and launch.constexprs["A_KCONTIG"] == (layout[0] == "N")
    assert res.spills == 0 and res.scratch_bytes == 0
    c = res.census
    assert c.get("sass_shared_load_128b") == 128
    # A (64 x 32) and B (32 x 128) per stage in 16-byte pieces over 128 threads: 4 + 8 per thread,
    # issued in the prologue (STAGES - 1 = 2 stages) and once in the loop
    assert c.get("cp_async_128b") == 3 * 12 and not c.get("cp_async_32b")


def test_fma_kernel_unaligned_rows_still_compile():
    """Rows of an odd number of floats: 4-byte copies (``VEC4`` off), still no spills."""
    a, b = _meta(1001, 999, 1003, "NN")
    _, launch, res = _compile(a, b, "sm90", "sm90")
    assert not launch.constexprs["VEC4"]
    assert res.spills == 0 and res.census.get("cp_async_32b", 0) > 0


@pytest.mark.parametrize("cfg", [FMA_SMALL_M, GemmConfig("fma", 128, 128, 32, num_warps=8, num_stages=3),
                                 GemmConfig("fma", 128, 256, 32, num_warps=8, num_stages=3, warps_m=4)])
def test_fma_space_compiles_without_spills(cfg):
    a, b = _meta(4096, 4096, 4096, "NN")
    _, _, res = _compile(a, b, "sm90", "sm90", cfg)
    assert res.spills == 0 and res.shared_bytes <= 232448


def test_fma_dispatch_rules():
    f = torch.rand(300, 200)
    spec = ops.validate(f, f.t())
    assert ops.fma_refusal(f, f.t(), spec) is not None  # CPU: the interpreter cannot run Gluon
    assert heuristic(ops.problem_of(f, f.t(), spec)).kernel != "fma"
    a, b = _meta(4096, 4096, 4096, "NN")
    p = ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132)
    assert p.fma_ok and heuristic(p) == FMA_HEURISTIC and shape_key(p).endswith("/fma")
    assert heuristic(Problem(**{**p.__dict__, "fma_ok": False})).kernel == "pointer"
    for kw in ({"precision": "tf32"}, {"precision": "fp32-accurate"}):
        assert not ops.problem_of(a, b, ops.validate(a, b, **kw), arch="sm90", sms=132).fma_ok
    assert not ops.problem_of(a, b, ops.validate(a, b), arch="cdna", sms=304).fma_ok
    h = torch.empty(512, 512, dtype=torch.float16, device="meta")
    assert not ops.problem_of(h, h, ops.validate(h, h), arch="sm90", sms=132).fma_ok
    strided = torch.empty(512, 8192, device="meta")[:, ::2]  # no unit stride along K or M
    assert "unit stride" in ops.fma_refusal(strided, b, ops.validate(strided, b))
    with pytest.raises(ValueError, match="FMA kernel cannot take"):
        ops.target_plan(strided, b, "sm90", sms=132, cfg=FMA_HEURISTIC)


def test_fma_batches_beyond_the_grid_limit_launch_in_slices(monkeypatch):
    """The batch is grid axis 1 (CUDA: at most 65535), as for the pointer kernel: launched in slices."""
    monkeypatch.setattr(ops, "MAX_GRID_BATCH", 2)
    a = torch.empty(5, 64, 32, device="meta")
    b = torch.empty(5, 32, 128, device="meta")
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=FMA_HEURISTIC)
    assert [k.grid[1] for k in plan] == [2, 2, 1]
    assert all(k.kernel.__name__ == "matmul_fma_kernel" for k in plan)


def test_fma_kernel_compiles_with_64bit_offsets():
    """An MN-major operand whose K stride times K passes 2**31 elements: 64-bit offsets, still no spills."""
    a = torch.empty(60000, 40000, device="meta").t()  # A (M, K) = (40000, 60000), M-contiguous: stride_ak 40000
    b = torch.empty(60000, 256, device="meta")
    _, launch, res = _compile(a, b, "sm90", "sm90")
    assert launch.constexprs["OFFS64"] and not launch.constexprs["A_KCONTIG"]
    assert res.spills == 0


def test_fp32_split_to_fill_the_sms():
    """fp32 ieee products whose 64x128 tiles leave SMs idle split K (the H200 sweep behind
    ``split_to_fill``): M = 64 and N = K = 4096 8 ways, 1000^3 2 ways, 512^3 8 ways (two K steps a split on the
    FMA kernel: 1.004x cuBLAS against 0.891x for 4 ways, H200 2026-12-01), 4096^3 and M = 64 with N = 32768 (256
    tiles) not at all; M <= 32 on 16/32-row pointer tiles (splits of 4 K steps at least)."""
    def p(m, n, k, batch=1):
        a, b = _meta(m, n, k, "NN")
        return Problem(**{**ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132).__dict__, "batch": batch})
    assert heuristic(p(64, 4096, 4096)) == replace(FMA_HEURISTIC, split_k=8)
    assert heuristic(p(1000, 1000, 1000)) == replace(FMA_HEURISTIC, split_k=2)
    assert heuristic(p(512, 512, 512)) == replace(FMA_HEURISTIC, split_k=8)
    assert split_to_fill(32, 512, 32, 132) == 4 and split_to_fill(32, 512, 32, 132, min_steps=2) == 8
    assert heuristic(p(4096, 4096, 4096)) == FMA_HEURISTIC
    assert heuristic(p(64, 32768, 4096)) == FMA_SMALL_M
    assert heuristic(p(1000, 1000, 1000, batch=4)) == FMA_HEURISTIC  # 512 tiles
    assert heuristic(p(16, 4096, 4096)) == replace(FP32_SMALL_M, split_k=4)
    assert heuristic(p(1, 4096, 4096)) == replace(FP32_SMALL_M, split_k=4)
    assert heuristic(p(32, 4096, 4096)) == replace(FP32_SMALL_M, block_m=32, split_k=4)
    assert heuristic(p(32, 11008, 4096)) == replace(FP32_SMALL_M, block_m=32, split_k=2)
    assert heuristic(p(16, 14336, 4096)) == FP32_SMALL_M  # 224 tiles of 64 columns: no split
    assert heuristic(p(64, 64, 64)).split_k == 1  # K = 64: two K steps, nothing to split

    def lay(m, n, k, layout):
        a, b = _meta(m, n, k, layout)
        return ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132)
    # a K-contiguous B is copied N-contiguous when 3000+ rows share the copy
    assert heuristic(lay(4096, 4096, 4096, "NT")) == replace(FMA_HEURISTIC, mn_copy="b")
    assert heuristic(lay(4096, 4096, 4096, "TT")) == replace(FMA_HEURISTIC, mn_copy="b")
    assert heuristic(lay(4096, 4096, 4096, "TN")) == FMA_HEURISTIC
    assert heuristic(lay(2048, 2048, 2048, "NT")) == FMA_64X64  # 512 tiles: 4 per SM where 3 fit
    assert heuristic(lay(2048, 4096, 1024, "NN")) == FMA_HEURISTIC  # the same tiles, K = 1024: kept
    assert heuristic(lay(1536, 1536, 1536, "NN")) == replace(FMA_HEURISTIC, split_k=2)  # 288 tiles
    assert heuristic(lay(3072, 3072, 3072, "NN")) == FMA_HEURISTIC  # 1152 tiles
    assert heuristic(lay(1792, 1792, 1792, "NN")) == FMA_HEURISTIC  # 392 tiles: 2.97 per SM, split 2 lost
    assert shape_key(lay(4096, 4096, 4096, "NT")) != shape_key(lay(4096, 4096, 4096, "NN"))
    assert split_to_fill(1, 1 << 20, 32, 132) == 8  # at most 8 ways
    for cfg in (heuristic(p(64, 4096, 4096)), heuristic(p(16, 4096, 4096))):
        assert cfg in __import__("tilecraft.tuning.gemm", fromlist=["config_space"]).config_space(p(64, 4096, 4096)) \
            or cfg.kernel == "pointer"

