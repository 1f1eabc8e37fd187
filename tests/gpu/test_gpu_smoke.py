"""The GPU run itself works: the stencil kernel compiled for the device agrees with float64."""
from __future__ import annotations

import torch

import tilecraft
from tilecraft.reference.stencil import laplacian_reference


def test_laplacian_on_the_gpu_matches_float64() -> None:
    gen = torch.Generator().manual_seed(20261121)
    u = torch.rand((37, 41, 45), dtype=torch.float64, generator=gen) * 2 - 1
    out = torch.full_like(u, float("nan"), device="cuda")
    tilecraft.laplacian(u.cuda(), order=4, out=out)
    ref = laplacian_reference(u, order=4)
    r = 2
    inner = (slice(r, -r),) * 3
    torch.testing.assert_close(out.cpu()[inner], ref, rtol=1e-12, atol=1e-10)
