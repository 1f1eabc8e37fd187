"""``tilecraft.laplacian``'s gradient on the GPU (the compiled kernels, ``auto``'s configurations) against
torch's autograd of the slicing implementation in float64.

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_stencil_grad_gpu.py
"""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.reference.stencil import laplacian_torch


@pytest.mark.parametrize("order,dtype,shape", [(2, torch.float64, (64, 96, 128)), (8, torch.float32, (40, 72, 136)),
                                               (4, torch.float32, (17, 33, 61)), (16, torch.float64, (20, 24, 40))])
def test_laplacian_gradient_on_the_gpu(monkeypatch, order, dtype, shape):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    g = torch.Generator(device="cuda").manual_seed(order)
    u = torch.randn(*shape, device="cuda", generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    dy = torch.randn(*shape, device="cuda", generator=g, dtype=torch.float64).to(dtype)
    spacing = (0.5, 1.0, 0.25)
    (ours,) = torch.autograd.grad(tilecraft.laplacian(u, order=order, spacing=spacing), [u], dy)
    ud = u.detach().double().requires_grad_()
    (ref,) = torch.autograd.grad(laplacian_torch(ud, order, spacing), [ud], dy.double())
    err = float((ours.double() - ref).abs().max() / ref.abs().max())
    assert err < (1e-12 if dtype == torch.float64 else 1e-5), err
