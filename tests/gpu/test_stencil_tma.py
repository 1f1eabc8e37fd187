"""The sm90 Gluon TMA z-march (``kernels.stencil_gluon``) against the float64 reference on the GPU:
odd extents, short z chunks (ring wrap-around and a short last chunk), every lane-shift distance
(R up to two vectors), padded strides, non-uniform spacing, NaN-poisoned outputs whose boundary
must stay untouched. The Triton interpreter cannot run Gluon; tests/ops/test_stencil_tma_compile.py
cross-compiles it in CI."""
from __future__ import annotations

import pytest
import torch

from tilecraft.bench.stencil import check_case
from tilecraft.ops import stencil as ops


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


pytestmark = pytest.mark.skipif(not _sm90(), reason="the TMA kernel is sm90 Gluon")


def _cfg(warps: int, rows: int, bz: int, ahead: int) -> ops.StencilConfig:
    return ops.StencilConfig("tma", block_y=rows, block_x=0, num_warps=warps, block_z=bz, prefetch=ahead,
                             nontemporal=True)


@pytest.mark.parametrize("dtype,order,shape,cfg", [
    (torch.float64, 2, (19, 37, 70), _cfg(4, 16, 5, 2)),
    (torch.float64, 2, (33, 130, 134), _cfg(2, 32, 8, 1)),
    (torch.float64, 4, (17, 45, 66), _cfg(2, 16, 4, 1)),
    (torch.float64, 8, (21, 29, 142), _cfg(2, 16, 3, 1)),
    (torch.float32, 2, (21, 43, 132), _cfg(4, 16, 7, 2)),
    (torch.float32, 2, (11, 67, 260), _cfg(2, 16, 64, 3)),
    (torch.float32, 4, (15, 31, 132), _cfg(2, 16, 6, 1)),
    (torch.float32, 8, (23, 41, 140), _cfg(2, 16, 4, 1)),
])
def test_tma_kernel_matches_float64(dtype, order, shape, cfg):
    gen = torch.Generator().manual_seed(1)
    u = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype).cuda()
    spacing = (0.7, 1.1, 0.9)
    ok, err, msg = check_case(u, order, spacing, lambda a, o: ops.launch(a, o, order, spacing, cfg))
    assert ok, (err, msg)


def test_tma_kernel_padded_strides():
    gen = torch.Generator().manual_seed(2)
    big = (torch.rand(30, 50, 136, generator=gen, dtype=torch.float64) * 2 - 1).cuda()
    u = big[3:26, 5:44, :128]  # rows padded (stride 136), planes padded (50 rows)
    cfg = _cfg(2, 16, 6, 2)
    assert ops.tma_ok(u, torch.empty_like(u), 2, cfg) is None
    ok, err, msg = check_case(u, 2, (1.0, 1.0, 1.0), lambda a, o: ops.launch(a, o, 2, (1.0, 1.0, 1.0), cfg))
    assert ok, (err, msg)
