"""``tilecraft.laplacian`` under autograd: the gradient (the adjoint of the interior-only stencil) against
torch's autograd of the slicing implementation, gradcheck and gradgradcheck in float64, torch.compile, and
the error for ``out=``."""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.reference.stencil import laplacian_torch


@pytest.mark.parametrize("order,shape,spacing", [(2, (5, 6, 7), (1.0, 1.0, 1.0)), (4, (9, 7, 11), (0.5, 0.25, 2.0)),
                                                 (8, (9, 10, 12), (1.0, 0.5, 0.75))])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
def test_gradient_matches_torch_autograd(order, shape, spacing, dtype):
    g = torch.Generator().manual_seed(order)
    u = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    dy = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)  # its boundary must not matter
    y = tilecraft.laplacian(u, order=order, spacing=spacing)
    (ours,) = torch.autograd.grad(y, [u], dy)
    ud = u.detach().double().requires_grad_()
    (ref,) = torch.autograd.grad(laplacian_torch(ud, order, spacing), [ud], dy.double())
    assert ours.shape == u.shape and ours.dtype == dtype and not ours.isnan().any()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert float((ours.double() - ref).abs().max() / ref.abs().max()) < tol


def test_gradcheck_gradgradcheck_and_compile():
    g = torch.Generator().manual_seed(1)
    u = torch.randn(5, 6, 7, generator=g, dtype=torch.float64, requires_grad=True)
    f = lambda x: tilecraft.laplacian(x, order=4, spacing=(0.5, 1.0, 2.0))  # noqa: E731
    assert torch.autograd.gradcheck(f, (u,), fast_mode=True)  # random projections: a few calls (interpreter)
    assert torch.autograd.gradgradcheck(f, (u,), fast_mode=True)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: f(x).square().sum(), backend="aot_eager", fullgraph=True)
    (got,) = torch.autograd.grad(compiled(u), [u])
    (want,) = torch.autograd.grad(f(u).square().sum(), [u])
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_out_is_not_differentiable():
    u = torch.rand(5, 5, 5, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        tilecraft.laplacian(u, out=torch.zeros(5, 5, 5, dtype=torch.float64))
    with torch.no_grad():
        tilecraft.laplacian(u, out=torch.zeros(5, 5, 5, dtype=torch.float64))
