"""``tilecraft.matmul`` under autograd: dA, dB, dC and dbias of ``act(alpha * A @ B + beta * C + bias)``
against torch's autograd of the same expression in float64, for every activation, transposed and batched
(broadcast) operands, empty dimensions; the eager autograd function and the registered op give the same
bits; torch.compile, opcheck, gradcheck and gradgradcheck; clear errors for what is not differentiable.
Every product's result is poisoned (NaN) before its kernels run (``ops._new_output``)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft
from tilecraft.ops import gemm as ops

pytestmark = pytest.mark.skipif(not ops.triton_on_cpu(), reason="needs TRITON_INTERPRET=1 (the kernels on CPU)")

ACTS = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu}


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    real = ops._new_output

    def poisoned(spec, device):
        return real(spec, device).fill_(float("nan"))
    monkeypatch.setattr(ops, "_new_output", poisoned)


def _leaf(g, shape, dtype, transposed=False):
    if transposed:  # a transposed view (the TN/NT/TT products), no copy
        return torch.randn(*shape[:-2], shape[-1], shape[-2], generator=g, dtype=torch.float64).to(dtype) \
            .transpose(-1, -2).requires_grad_()
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()


def _both(a, b, c, bias, alpha, beta, act, dy, **kw):
    """(ours, float64 reference) gradients for every tensor given."""
    leaves = [t for t in (a, b, c, bias) if t is not None]
    y = tilecraft.matmul(a, b, alpha=alpha, beta=beta, c=c, bias=bias, activation=act, **kw)
    ours = torch.autograd.grad(y, leaves, dy)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    ra, rb, *rest = ref_leaves
    rc = rest.pop(0) if c is not None else None
    rbias = rest.pop(0) if bias is not None else None
    z = alpha * (ra @ rb) + (beta * rc if rc is not None else 0) + (rbias if rbias is not None else 0)
    ref = torch.autograd.grad(ACTS[act](z), ref_leaves, dy.double())
    return y, ours, ref


@pytest.mark.parametrize("act", list(ACTS), ids=lambda a: str(a))
@pytest.mark.parametrize("shapes", [((7, 5), (5, 3)), ((2, 7, 5), (5, 3)), ((7, 5), (2, 5, 3)), ((1, 7, 5), (3, 5, 3)),
                                    ((3, 1, 9), (3, 9, 4))], ids=["2d", "a3d", "b3d", "a-batch1", "m1"])
def test_fp64_gradients_match_torch(act, shapes):
    g = torch.Generator().manual_seed(1)
    a, b = _leaf(g, shapes[0], torch.float64, True), _leaf(g, shapes[1], torch.float64)
    m, n = shapes[0][-2], shapes[1][-1]
    c, bias = _leaf(g, (m, n), torch.float64), _leaf(g, (n,), torch.float64)
    y, ours, ref = _both(a, b, c, bias, 0.5, 2.0, act, torch.randn(*torch.broadcast_shapes(
        shapes[0][:-2], shapes[1][:-2]), m, n, generator=g, dtype=torch.float64))
    assert type(y.grad_fn).__name__ == ("_EagerMatmulBackward" if act in (None, "relu") else
                                        {"silu": "SiluBackward0"}.get(act, "GeluBackward0"))
    for name, o, r in zip("abc+", ours, ref):
        assert o.shape == r.shape and o.dtype == torch.float64
        torch.testing.assert_close(o, r, rtol=1e-10, atol=1e-10, msg=f"d{name}")


@pytest.mark.parametrize("dtype,precision,tol", [(torch.float32, "ieee", 1e-5), (torch.float32, "tf32", 3e-3),
                                                 (torch.bfloat16, None, 2e-2), (torch.float16, None, 5e-3)],
                         ids=["fp32-ieee", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("act", [None, "gelu"], ids=str)
def test_low_precision_gradients(dtype, precision, tol, act):
    """Gradients in the operands' dtype, dZ rounded to it: relative norm error against float64."""
    g = torch.Generator().manual_seed(2)
    a, b = _leaf(g, (33, 40), dtype), _leaf(g, (40, 17), dtype, True)
    bias = _leaf(g, (17,), torch.float32)
    dy = torch.randn(33, 17, generator=g).to(dtype)
    _, ours, ref = _both(a, b, None, bias, 1.0, 0.0, act, dy, precision=precision)
    for name, o, r, t in zip("ab+", ours, ref, (a, b, bias)):
        assert o.dtype == t.dtype and not o.isnan().any()
        err = float((o.double() - r).norm() / r.norm())
        assert err < tol, f"d{name}: {err:.2e}"


def test_only_the_gradients_asked_for_and_empty_dimensions():
    g = torch.Generator().manual_seed(3)
    a = _leaf(g, (6, 4), torch.float64)
    b = torch.randn(4, 5, generator=g, dtype=torch.float64)
    y = tilecraft.matmul(a, b, activation="relu")
    (da,) = torch.autograd.grad(y, [a], torch.ones_like(y))
    torch.testing.assert_close(da, ((a.detach() @ b) > 0).double() @ b.t())
    for ma, kb in (((0, 4), (4, 5)), ((6, 0), (0, 5))):  # M = 0; K = 0 (dA and dB empty or zero)
        a0, b0 = _leaf(g, ma, torch.float64), _leaf(g, kb, torch.float64)
        y0 = tilecraft.matmul(a0, b0)
        ga, gb = torch.autograd.grad(y0, [a0, b0], torch.randn(y0.shape, generator=g, dtype=torch.float64))
        assert ga.shape == a0.shape and gb.shape == b0.shape
        assert not ga.isnan().any() and not gb.any()


def test_registered_op_gives_the_eager_bits_and_compiles():
    g = torch.Generator().manual_seed(4)
    a, b = _leaf(g, (2, 9, 12), torch.float32), _leaf(g, (12, 10), torch.float32, True)
    bias = _leaf(g, (10,), torch.float32)
    dy = torch.randn(2, 9, 10, generator=g)
    eager = torch.autograd.grad(tilecraft.matmul(a, b, bias=bias, activation="relu", alpha=0.5), [a, b, bias], dy)
    y_op = torch.ops.tilecraft.matmul(a, b, torch.float32, 0.5, 0.0, None, bias, "relu", None, None, None)
    assert "_EagerMatmul" not in type(y_op.grad_fn).__name__
    via_op = torch.autograd.grad(y_op, [a, b, bias], dy)
    for x, y in zip(eager, via_op):
        assert torch.equal(x, y)
    # silu: the public call applies it as a torch op (autograd keeps Z); the op itself, called directly,
    # fuses it and recomputes Z in its backward: both against float64
    eager = torch.autograd.grad(tilecraft.matmul(a, b, bias=bias, activation="silu", alpha=0.5), [a, b, bias], dy)
    y_op = torch.ops.tilecraft.matmul(a, b, torch.float32, 0.5, 0.0, None, bias, "silu", None, None, None)
    via_op = torch.autograd.grad(y_op, [a, b, bias], dy)
    ref_leaves = [t.detach().double().requires_grad_() for t in (a, b, bias)]
    ref = torch.autograd.grad(F.silu(0.5 * ref_leaves[0] @ ref_leaves[1] + ref_leaves[2]), ref_leaves, dy.double())
    for x, y, r in zip(eager, via_op, ref):
        torch.testing.assert_close(x.double(), r, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(y.double(), r, rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w, c: tilecraft.matmul(x, w, bias=c, activation="silu", alpha=0.5) * 2,
                             backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(a, b, bias), [a, b, bias], dy / 2)
    for x, y in zip(eager, got):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_opcheck_autograd_registration():
    g = torch.Generator().manual_seed(5)
    a, b = _leaf(g, (5, 7), torch.float32), _leaf(g, (7, 3), torch.float32)
    c, bias = _leaf(g, (5, 3), torch.float32), _leaf(g, (3,), torch.float32)
    torch.library.opcheck(torch.ops.tilecraft.matmul.default,
                          (a, b, torch.float32, 0.5, 1.0, c, bias, "gelu", None, None, None),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_the_recomputing_backward_of_the_fused_activations():
    """The registered op called directly with a fused gelu/silu: its backward recomputes Z."""
    g = torch.Generator().manual_seed(8)
    for act in ("gelu", "gelu_tanh", "silu"):
        a, b = _leaf(g, (2, 6, 5), torch.float64), _leaf(g, (5, 4), torch.float64, True)
        c, bias = _leaf(g, (6, 4), torch.float64), _leaf(g, (4,), torch.float64)
        y = torch.ops.tilecraft.matmul(a, b, torch.float64, 0.5, 2.0, c, bias, act, None, None, None)
        dy = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
        ours = torch.autograd.grad(y, [a, b, c, bias], dy)
        ref_leaves = [t.detach().requires_grad_() for t in (a, b, c, bias)]
        ra, rb, rc, rbias = ref_leaves
        ref = torch.autograd.grad(ACTS[act](0.5 * ra @ rb + 2.0 * rc + rbias), ref_leaves, dy)
        for o, r in zip(ours, ref):
            torch.testing.assert_close(o, r, rtol=1e-10, atol=1e-10)


def test_gradcheck_and_gradgradcheck():
    g = torch.Generator().manual_seed(6)
    a, b = _leaf(g, (4, 3), torch.float64), _leaf(g, (3, 5), torch.float64, True)
    bias = _leaf(g, (5,), torch.float64)
    f = lambda x, w, c: tilecraft.matmul(x, w, bias=c, activation="gelu_tanh", alpha=0.7)  # noqa: E731
    assert torch.autograd.gradcheck(f, (a, b, bias))
    assert torch.autograd.gradgradcheck(lambda x, w: tilecraft.matmul(x, w, alpha=0.7), (a, b))


def test_what_is_not_differentiable_says_so():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 8, generator=g)
    with pytest.raises(TypeError, match="differentiable"):
        tilecraft.matmul(x.to(torch.float8_e4m3fn).requires_grad_(), x.t().to(torch.float8_e4m3fn),
                         out_dtype=torch.float32)
    s = torch.ones(1, requires_grad=True)
    with pytest.raises(TypeError, match="differentiable"):
        tilecraft.matmul(x.to(torch.float8_e4m3fn), x.t().to(torch.float8_e4m3fn), out_dtype=torch.float32,
                         scale_a=s, scale_b=torch.ones(1))
    with torch.no_grad():  # no autograd: scales that require grad are fine
        assert tilecraft.matmul(x.to(torch.float8_e4m3fn), x.t().to(torch.float8_e4m3fn), out_dtype=torch.float32,
                                scale_a=s, scale_b=torch.ones(1)).shape == (4, 4)
