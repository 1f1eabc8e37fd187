"""``tilecraft.matmul``'s gradients on the GPU, where the TMA and Gluon kernels run: bf16/fp16/fp32 products of
a linear layer (transposed weight, bias, activations, batched) against float64 autograd; the eager autograd
function and the registered op give the same bits (the op called directly with gelu or silu fuses them and
recomputes the pre-activation in its backward: against float64 too).

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_gemm_grad_gpu.py
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft

ACTS = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu}
CASES = {  # name: (dtype, precision, batch, M, K, N, activation, tolerance)
    "bf16-linear-gelu": (torch.bfloat16, None, None, 1024, 768, 3072, "gelu", 2e-2),
    "bf16-batched-silu": (torch.bfloat16, None, 4, 200, 136, 520, "silu", 2e-2),
    "fp16-odd-relu": (torch.float16, None, None, 97, 131, 77, "relu", 1e-2),
    "bf16-small-m": (torch.bfloat16, None, None, 16, 4096, 4096, None, 2e-2),
    "fp32-tf32-gelu-tanh": (torch.float32, "tf32", None, 512, 384, 256, "gelu_tanh", 5e-3),
    "fp32-ieee": (torch.float32, "ieee", None, 300, 200, 100, None, 1e-5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matmul_gradients_on_the_gpu(monkeypatch, case):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    dtype, precision, batch, m, k, n, act, tol = CASES[case]
    g = torch.Generator(device="cuda").manual_seed(0)
    lead = (batch,) if batch else ()
    x = (torch.randn(*lead, m, k, device="cuda", generator=g) / 2).to(dtype).requires_grad_()
    w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).to(dtype).requires_grad_()
    bias = torch.randn(n, device="cuda", generator=g).requires_grad_()
    dy = torch.randn(*lead, m, n, device="cuda", generator=g).to(dtype)
    y = tilecraft.matmul(x, w.t(), bias=bias, activation=act, precision=precision)
    fused = act in (None, "relu")  # gelu and silu: a torch op after the product under autograd
    assert (type(y.grad_fn).__name__ == "_EagerMatmulBackward") == fused
    grads = torch.autograd.grad(y, [x, w, bias], dy)
    y_op = torch.ops.tilecraft.matmul(x, w.t(), y.dtype, 1.0, 0.0, None, bias, act, precision, None, None)
    via_op = torch.autograd.grad(y_op, [x, w, bias], dy)
    ref_leaves = [t.detach().double().requires_grad_() for t in (x, w, bias)]
    ref = torch.autograd.grad(ACTS[act](F.linear(*ref_leaves)), ref_leaves, dy.double())
    for name, got, op, r in zip(("x", "w", "bias"), grads, via_op, ref):
        if fused:
            assert torch.equal(got, op), name
        for x in (got, op):  # the op called directly fuses every activation, its backward recomputes Z
            err = float((x.double() - r).norm() / r.norm())
            assert err < tol, (case, name, err)
