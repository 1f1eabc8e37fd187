"""The sm90 Gluon TMA stencil kernel without a GPU: it cross-compiles for sm90 to TMA loads, 128-bit
shared-memory loads and 128-bit stores with no spills and shared memory within the limit, and the
launcher refuses what it cannot take. Its numbers are checked on the GPU (tests/gpu/test_stencil_tma.py,
benchmarks/stencil_tma.py): the Triton interpreter cannot run Gluon."""
from __future__ import annotations

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as gemm_ops
from tilecraft.ops import stencil as ops


def _launch(dtype, order, cfg, shape=(512, 512, 512)):
    u = torch.empty(shape, dtype=dtype, device="meta")
    w = torch.empty(3 * (order // 2) + 1, dtype=dtype, device="meta")
    return ops._tma_launch(u, torch.empty_like(u), w, order // 2, cfg)


@pytest.mark.parametrize("dtype,order,cfg", [
    (torch.float64, 2, ops.StencilConfig("tma", block_y=8, block_x=0, num_warps=4, block_z=32, prefetch=1)),
    (torch.float32, 8, ops.StencilConfig("tma", block_y=16, block_x=0, num_warps=2, block_z=64, prefetch=1)),
])
def test_tma_kernel_cross_compiles_for_sm90(dtype, order, cfg):
    k = _launch(dtype, order, cfg)
    res = cross_compile("tilecraft.kernels.stencil_gluon", "laplacian_tma_kernel", gemm_ops.compile_signature(k),
                        k.constexprs, "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0
    assert res.shared_bytes <= 227 * 1024
    c = res.census
    assert c["sass:UTMALDG"] > 0  # the planes arrive by TMA
    assert c["sass_global_store_128b"] > 0 and c["sass_shared_load_128b"] > 0


def test_tma_refusals():
    cfg = ops.StencilConfig("tma", block_y=8, block_x=0, num_warps=4, block_z=32, prefetch=1)
    cpu = torch.empty(8, 8, 16)
    assert "NVIDIA" in ops.tma_ok(cpu, torch.empty_like(cpu), 2, cfg)
    odd = torch.empty(16, 16, 18, device="meta")  # rows of 72 bytes
    assert "16-byte" in ops.tma_ok(odd, torch.empty_like(odd), 2, cfg)
    u = torch.empty(16, 16, 16, device="meta")
    assert "2R" in ops.tma_ok(u, torch.empty_like(u), 8, cfg)  # 8 rows cannot hold 2 x 4 halo rows
    assert ops.tma_ok(u, torch.empty_like(u), 2, cfg) is None
    with pytest.raises(ValueError):
        ops.launch(cpu, torch.empty_like(cpu), 2, (1.0, 1.0, 1.0), cfg)
