"""Small N (a matrix times a few vectors) on the GPU: ``matmul`` runs it transposed, C^T = B^T A^T on the small-M
path (``GemmConfig.transposed``), against float64, every layout, odd shapes, batches, split-K (M' = N small and
few column tiles), the epilogue (C, bias, alpha, activation); bf16, fp16, fp8 with per-row / per-column scales and int8 (exact); outputs
poisoned (NaN; int32 -2**31 + 1) before the kernels run. Heuristic only
(``TILECRAFT_TUNE=0``)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error


@pytest.fixture(autouse=True)
def _heuristic_and_poison(monkeypatch):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    real = ops._new_output
    monkeypatch.setattr(ops, "_new_output", lambda spec, device: real(spec, device).fill_(
        float("nan") if spec.out_dtype.is_floating_point else -(2**31) + 1))


def _operands(m, n, k, dtype, layout, gen, batch=None):
    lead = (batch,) if batch else ()

    def rnd(*shape):
        if dtype == torch.int8:
            return torch.randint(-64, 64, (*lead, *shape), device="cuda", generator=gen, dtype=torch.int8)
        return (torch.rand(*lead, *shape, device="cuda", generator=gen) * 2 - 1).to(dtype)
    a = rnd(k, m).mT if layout[0] == "T" else rnd(m, k)
    b = rnd(n, k).mT if layout[1] == "T" else rnd(k, n)
    return a, b


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.int8])
@pytest.mark.parametrize("m,n,k,batch", [(4096, 1, 4096, None), (1000, 7, 333, None), (8192, 64, 1024, None),
                                         (2048, 16, 512, 3), (300, 33, 4104, None), (129, 2, 17, None)])
def test_small_n_runs_transposed_and_right(dtype, m, n, k, batch):
    if dtype == torch.float8_e4m3fn and batch:
        pytest.skip("fp8 scales are per matrix: 2D products")
    gen = torch.Generator(device="cuda").manual_seed(m * 31 + n)
    bad = []
    for layout in ("NN", "NT", "TN", "TT"):
        a, b = _operands(m, n, k, dtype, layout, gen, batch)
        kw = {"alpha": 0.5, "activation": "silu"} if dtype != torch.int8 else {"activation": "relu"}  # int32: exact
        if dtype == torch.float8_e4m3fn:  # per-row scales of A and per-column ones of B: swapped when transposed
            kw.update(scale_a=torch.rand(m, 1, device="cuda", generator=gen) + 0.5,
                      scale_b=torch.rand(1, n, device="cuda", generator=gen) + 0.5, out_dtype=torch.bfloat16)
        cfg = ops.choose_config(a, b, ops.validate(a, b, **kw), scale_a=kw.get("scale_a"), scale_b=kw.get("scale_b"))
        out = ops.matmul(a, b, **kw)
        ref = matmul_reference(a, b, **{**kw, "out_dtype": torch.float64})
        err = relative_error(out, ref)
        tol = {torch.float16: 2e-3, torch.int8: 0.0}.get(dtype, 1e-2)
        if not (cfg.transposed and out.is_contiguous() and err <= tol):
            bad.append(f"{layout}: {cfg.short()} contiguous={out.is_contiguous()} err={err:.2e}")
    assert not bad, bad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k,batch", [(4096, 1, 4096, None), (1000, 7, 333, None), (2048, 16, 512, 3),
                                         (300, 33, 4104, None)])
def test_small_n_with_c_and_bias_runs_transposed_and_right(dtype, m, n, k, batch):
    """C through its transpose, the bias along C^T's rows (``Spec.bias_rows``), into NaN-poisoned outputs."""
    gen = torch.Generator(device="cuda").manual_seed(m * 17 + n)
    bad = []
    for layout in ("NN", "NT", "TN", "TT"):
        a, b = _operands(m, n, k, dtype, layout, gen, batch)
        c = (torch.rand(m, n, device="cuda", generator=gen) * 2 - 1).to(dtype)
        bias = (torch.rand(n, device="cuda", generator=gen) * 2 - 1).to(dtype)
        for kw in (dict(bias=bias), dict(c=c, beta=-0.5), dict(c=c.mT.contiguous().mT, beta=1.0, bias=bias,
                                                               activation="gelu")):
            cfg = ops.choose_config(a, b, ops.validate(a, b, **kw))
            out = ops.matmul(a, b, **kw)
            err = relative_error(out, matmul_reference(a, b, **{**kw, "out_dtype": torch.float64}))
            if not (cfg.transposed and err <= {torch.float16: 2e-3}.get(dtype, 1e-2)):
                bad.append(f"{layout} {sorted(kw)}: {cfg.short()} err={err:.2e}")
    assert not bad, bad
