"""What the ops do not differentiate is refused, never dropped: wave_step has no backward, laplacian(out=) none
either, no op has a forward-mode formula, attention's backward is not differentiable again. Each of these gave
silently wrong or missing derivatives before (a torch-integration audit, 2026-11-30). And the transforms and
compile modes that do work: vmap (torch's loop), torch.compile(dynamic=True) with the default spacing."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwad

import tilecraft
from tilecraft.wave import wave_step


def _wave_fields():
    g = torch.Generator().manual_seed(3)
    p, pp = (torch.randn(7, 7, 7, dtype=torch.float64, generator=g) for _ in range(2))
    return p, pp, torch.rand(7, 7, 7, dtype=torch.float64, generator=g) * 0.1


@pytest.mark.parametrize("which", ["p", "p_prev", "m", "out"])
def test_wave_step_refuses_inputs_that_require_grad(which):
    """pp.grad came back all ones (the default out's clone) and p.grad None."""
    p, pp, m = _wave_fields()
    out = torch.zeros_like(p)
    args = {"p": p, "p_prev": pp, "m": m, "out": out}
    args[which] = args[which].clone().requires_grad_()
    with pytest.raises(RuntimeError, match="wave_step has no backward"):
        wave_step(args["p"], args["p_prev"], args["m"], args["out"], order=2)
    with torch.no_grad():
        wave_step(args["p"], args["p_prev"], args["m"], args["out"], order=2)  # fine without a graph


def test_laplacian_out_that_requires_grad_is_refused():
    x = torch.randn(5, 5, 5, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        tilecraft.laplacian(torch.randn(5, 5, 5, dtype=torch.float64), out=x * 1.0)


def _dual_call(fn, *tensors):
    with fwad.dual_level():
        fn(*[fwad.make_dual(t, torch.ones_like(t)) for t in tensors])


@pytest.mark.parametrize("op", ["matmul", "laplacian", "attention", "wave_step"])
def test_forward_mode_is_refused(op):
    a, b = torch.randn(4, 5, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    u = torch.randn(5, 5, 5, dtype=torch.float64)
    q = torch.randn(1, 1, 4, 16, dtype=torch.float16)
    p, pp, m = _wave_fields()
    calls = {"matmul": (lambda x: tilecraft.matmul(x, b), a), "laplacian": (tilecraft.laplacian, u),
             "attention": (lambda x: tilecraft.attention(x, q, q), q),
             "wave_step": (lambda x: wave_step(x, pp, m, order=2), p)}
    fn, x = calls[op]
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        _dual_call(fn, x)
    with pytest.raises(RuntimeError, match="no forward-mode derivative"):
        torch.func.jvp(fn, (x,), (torch.ones_like(x),))


def test_attention_double_backward_is_refused():
    """The second-order term was dropped: autograd.grad(..., inputs=q) pruned once_differentiable's error node."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 1, 4, 16, generator=g).half().requires_grad_()
    k, v = torch.randn(1, 1, 4, 16, generator=g).half(), torch.randn(1, 1, 4, 16, generator=g).half()
    o = tilecraft.attention(q, k, v, scale=0.5)
    with pytest.raises(RuntimeError, match="no double backward"):
        torch.autograd.grad(o.float().square().sum(), q, create_graph=True)
    o = tilecraft.attention(q, k, v, scale=0.5)
    (dq,) = torch.autograd.grad(o.float().square().sum(), q)  # first order: unchanged
    assert torch.isfinite(dq).all() and dq.abs().sum() > 0


def test_vmap_runs_and_compile_takes_the_default_spacing():
    u = torch.randn(2, 9, 9, 10, dtype=torch.float64)
    got = torch.func.vmap(tilecraft.laplacian)(u)  # the data pointer of vmap's wrapper was read before
    assert torch.equal(got[1], tilecraft.laplacian(u[1]))
    f = torch.compile(lambda x: tilecraft.laplacian(x), fullgraph=True, dynamic=True, backend="aot_eager")
    assert torch.equal(f(u[0]), tilecraft.laplacian(u[0]))  # failed on math.isfinite of a symbolic float


def test_laplacian_on_meta_tensors_gives_a_meta_result():
    """It refused meta tensors, where matmul, attention and wave_step give their results' shape and type."""
    u = torch.empty(6, 7, 8, dtype=torch.float32, device="meta")
    got = tilecraft.laplacian(u, order=4)
    assert got.device.type == "meta" and got.shape == u.shape and got.dtype == u.dtype
    with pytest.raises(ValueError, match="order 4 needs every extent"):
        tilecraft.laplacian(torch.empty(3, 7, 8, device="meta"), order=4)
