"""``ops.launch.eager_direct``: the public ops skip their torch.library dispatch only in a plain eager
call, and give the same result either way."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import tilecraft
from tilecraft.ops import stencil as stencil_ops
from tilecraft.ops.launch import eager_direct


class _Seen(TorchDispatchMode):
    """Records the ops a call dispatches."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_plain_eager_call_is_direct():
    t = torch.rand(3)
    assert eager_direct(t, None, torch.nn.Parameter(torch.rand(2), requires_grad=False))
    assert eager_direct()


def test_autograd_needs_the_op():
    t = torch.rand(3, requires_grad=True)
    assert not eager_direct(t)
    with torch.no_grad():
        assert eager_direct(t)


def test_modes_subclasses_and_the_profiler_need_the_op():
    t = torch.rand(3)
    with _Seen():
        assert not eager_direct(t)
    assert not eager_direct(torch.empty(3, device="meta").as_subclass(_Sub))
    with torch.autograd.profiler.profile():
        assert not eager_direct(t)
    assert not torch.func.vmap(lambda x: torch.tensor(float(eager_direct(x))))(torch.rand(2, 3)).any()


class _Sub(torch.Tensor):
    pass


@pytest.mark.parametrize("with_out", [False, True])
def test_laplacian_same_result_direct_and_through_the_op(with_out):
    g = torch.Generator().manual_seed(3)
    u = torch.rand(7, 9, 11, dtype=torch.float64, generator=g)
    out = torch.full_like(u, float("nan")) if with_out else None
    direct = tilecraft.laplacian(u, order=4, spacing=0.5, out=out)
    if with_out:
        via = torch.full_like(u, float("nan"))
        torch.ops.tilecraft.laplacian_out(u, 4, [0.5] * 3, "auto", via)
    else:
        via = torch.ops.tilecraft.laplacian(u, 4, [0.5] * 3, "auto")
    assert torch.equal(direct.nan_to_num(7.0), via.nan_to_num(7.0))


def test_a_dispatch_mode_sees_the_registered_op():
    u = torch.rand(5, 5, 5, dtype=torch.float64)
    seen = _Seen()
    with seen:
        tilecraft.laplacian(u)
    assert any("tilecraft.laplacian" in op for op in seen.ops), seen.ops
    plain = _Seen()
    stencil_ops.laplacian(u)  # outside the mode: no op recorded, and no error
    assert plain.ops == []


def test_autograd_may_be_recorded_by_the_caller():
    t = torch.rand(3, requires_grad=True)
    assert eager_direct(t, autograd=True)
    with _Seen():
        assert not eager_direct(t, autograd=True)


@pytest.mark.parametrize("causal,with_lse", [(False, False), (True, True)])
def test_attention_autograd_same_bits_eager_and_through_the_op(causal, with_lse):
    """An eager call that autograd records runs the op's bodies in a plain autograd function; the
    registered op (what torch.compile and the modes see) gives the same output and gradients, bit for
    bit, with the lse's gradient or without one (None, not zeros)."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 13, 32, generator=g).to(torch.float16) for _ in range(3))
    do = torch.randn(1, 2, 13, 32, generator=g).to(torch.float16)
    dlse = torch.randn(1, 2, 13, generator=g)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = tilecraft.attention(*leaves, causal=causal, return_lse=True, deterministic=True)
    assert type(out.grad_fn).__name__.startswith("_EagerAttention"), out.grad_fn
    grads = torch.autograd.grad((out, lse) if with_lse else (out,), leaves, (do, dlse) if with_lse else (do,))
    op_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    op_out, op_lse = torch.ops.tilecraft.attention_fwd(*op_leaves, None, None, 13, 13, causal, 32 ** -0.5,
                                                       "bhsd", True)
    assert "_EagerAttention" not in type(op_out.grad_fn).__name__
    op_grads = torch.autograd.grad((op_out, op_lse) if with_lse else (op_out,), op_leaves,
                                   (do, dlse) if with_lse else (do,))
    assert torch.equal(out, op_out) and torch.equal(lse, op_lse)
    for a, b in zip(grads, op_grads):
        assert torch.equal(a, b)


def test_attention_eager_autograd_only_through_the_lse_and_not_twice():
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 1, 9, 16, generator=g).to(torch.float16).requires_grad_() for _ in range(3))
    out, lse = tilecraft.attention(q, k, v, return_lse=True)
    dq, = torch.autograd.grad(lse.sum(), [q], retain_graph=True)  # no gradient reaches the output
    assert torch.isfinite(dq).all()
    # not twice: a graph of the backward is refused up front (a double backward through autograd.grad(...,
    # inputs=...) pruned once_differentiable's error node and dropped the second-order term silently)
    with pytest.raises(RuntimeError, match="no double backward"):
        torch.autograd.grad(lse.sum(), [q], create_graph=True)
