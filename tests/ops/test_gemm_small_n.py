"""Small N (a matrix times a few vectors) runs transposed: C^T = B^T A^T on the small-M path
(``GemmConfig.transposed``, ``tuning.gemm.small_n_transposed``, docs/gemm.md follow-up 35). In the interpreter:
every layout, odd shapes, batches, split-K, the epilogue (C, bias, alpha, activation) and per-row / per-column
scales, into NaN-poisoned
outputs against float64; the heuristic's choice on sm90; refusals."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import tilecraft
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig, config_space, heuristic, small_n_transposed

from test_gemm import _operands  # noqa: E402  (tests/ops is on the path, as test_stencil_zwin imports test_stencil)

T16 = GemmConfig("pointer", 16, 32, 32, group_m=1, num_warps=4, num_stages=1, transposed=True)


def _pinned(a, b, cfg, **kw):
    spec = ops.validate(a, b, **kw)
    out = torch.full(spec.out_shape, float("nan"), dtype=spec.out_dtype)
    ops.launch(a, b, out, spec, cfg, kw.get("c"), kw.get("bias"), kw.get("scale_a"), kw.get("scale_b"))
    return out


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("m,n,k", [(37, 1, 50), (70, 5, 33), (129, 16, 64), (33, 64, 7)])
@pytest.mark.parametrize("split", [1, 2])
def test_transposed_config_every_layout(field, layout, m, n, k, split):
    a, b = _operands(field, m, n, k, torch.bfloat16, layout)
    out = _pinned(a, b, replace(T16, split_k=split))
    assert out.is_contiguous() and out.shape == (m, n)
    assert relative_error(out, matmul_reference(a, b, out_dtype=torch.float64)) <= 1e-2


def test_transposed_config_batched_alpha_activation(field):
    a, b = _operands(field, 45, 3, 40, torch.float16, "TN", batch=3)
    out = _pinned(a, b, T16, alpha=-1.5, activation="gelu")
    ref = matmul_reference(a, b, out_dtype=torch.float64, alpha=-1.5, activation="gelu")
    assert out.shape == (3, 45, 3) and relative_error(out, ref) <= 2e-3


def test_transposed_config_swaps_row_and_column_scales(field):
    """scale_a per row of A is a per-column scale of C^T; scale_b per column of B a per-row one."""
    a, b = _operands(field, 40, 6, 32, torch.int8, "NN")
    sa, sb = (field((40, 1)).abs() + 0.5).float(), (field((1, 6)).abs() + 0.5).float()
    out = _pinned(a, b, T16, out_dtype=torch.float32, scale_a=sa, scale_b=sb)
    ref = matmul_reference(a, b, out_dtype=torch.float64, scale_a=sa, scale_b=sb)
    assert relative_error(out, ref) <= 1e-6


@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("split", [1, 2])
def test_transposed_config_with_c_and_bias(field, layout, split):
    """C is read through its transpose and the bias (along C's columns) along C^T's rows (``Spec.bias_rows``)."""
    a, b = _operands(field, 70, 5, 33, torch.bfloat16, layout)
    c = field((70, 5)).to(torch.bfloat16)
    bias = field((5,)).to(torch.bfloat16)
    cfg = replace(T16, split_k=split)
    for kw in (dict(bias=bias), dict(c=c, beta=-0.5), dict(c=c, beta=2.0, bias=bias, alpha=0.75, activation="gelu")):
        out = _pinned(a, b, cfg, **kw)
        ref = matmul_reference(a, b, out_dtype=torch.float64, **kw)
        assert relative_error(out, ref) <= 1e-2, kw


def test_transposed_config_batched_bias_and_broadcast_c(field):
    a, b = _operands(field, 45, 3, 40, torch.float16, "TN", batch=3)
    bias = field((3,)).to(torch.float16)
    c = field((1, 3)).to(torch.float16).expand(45, 3)  # a row of C broadcast down M (stride 0)
    out = _pinned(a, b, T16, bias=bias, c=c, beta=1.0)
    ref = matmul_reference(a, b, out_dtype=torch.float64, bias=bias, c=c, beta=1.0)
    assert out.shape == (3, 45, 3) and relative_error(out, ref) <= 2e-3


def test_transposed_bias_is_refused_on_the_gluon_kernel(field):
    a, b = _operands(field, 40, 4, 32, torch.bfloat16, "NN")
    with pytest.raises(ValueError, match="pointer or TMA kernel"):
        _pinned(a, b, replace(T16, kernel="gluon"), bias=field((4,)).to(torch.bfloat16))


def _problem(m, n, k, dtype="bf16", layout="NN", arch="sm90", **kw):
    itemsize = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1, "fp8": 1}[dtype]
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "int8": torch.int8,
                   "fp8": torch.float8_e4m3fn}[dtype]
    a = torch.empty(k, m, dtype=torch_dtype, device="meta").t() if layout[0] == "T" else \
        torch.empty(m, k, dtype=torch_dtype, device="meta")
    b = torch.empty(n, k, dtype=torch_dtype, device="meta").t() if layout[1] == "T" else \
        torch.empty(k, n, dtype=torch_dtype, device="meta")
    assert itemsize == a.element_size()
    return ops.problem_of(a, b, ops.validate(a, b, **kw), arch=arch, sms=132)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("n", [1, 16, 64])
def test_small_n_takes_the_small_m_path_transposed(layout, n):
    p = _problem(8192, n, 8192, layout=layout)
    cfg = heuristic(p)
    assert cfg.transposed and cfg.kernel == "pointer" and cfg.block_m == (16 if n <= 16 else 64)
    assert cfg == replace(heuristic(_problem(n, 8192, 8192, layout=layout[::-1].translate(str.maketrans("NT", "TN")))),
                          transposed=True)
    assert cfg in config_space(p) and config_space(p)[0] == cfg
    assert "transposed" in cfg.short()


def test_small_n_rule_bounds():
    assert not small_n_transposed(_problem(8192, 65, 8192))  # N above 64: the product's own tiles
    assert not small_n_transposed(_problem(64, 16, 8192))  # M small too: the small-M path as it is
    assert not heuristic(_problem(32, 4096, 4096)).transposed
    assert not small_n_transposed(_problem(8192, 16, 8192, dtype="fp32", precision="tf32"))  # measured: 16-bit
    assert small_n_transposed(_problem(8192, 16, 8192, dtype="int8", layout="NT"))
    fp8 = _problem(8192, 16, 8192, dtype="fp8", layout="NT", out_dtype=torch.bfloat16)
    assert small_n_transposed(fp8) and heuristic(fp8).transposed
    assert not small_n_transposed(_problem(8192, 16, 8192, arch="cdna"))
    bias = torch.empty(16, dtype=torch.bfloat16, device="meta")
    assert small_n_transposed(_problem(8192, 16, 8192, bias=bias))  # the bias along C^T's rows
    c = torch.empty(8192, 16, dtype=torch.bfloat16, device="meta")
    assert small_n_transposed(_problem(8192, 16, 8192, c=c, beta=1.0))  # C through its transpose
    assert small_n_transposed(_problem(8192, 16, 8192, alpha=2.0, activation="silu"))


def test_matmul_small_n_in_the_interpreter_is_right(field):
    """Through ``matmul`` (the interpreter's heuristic keeps its own tiles) and with the transposed config pinned
    through ``compute``: the same values."""
    a, b = _operands(field, 90, 3, 48, torch.bfloat16, "NT")
    spec = ops.validate(a, b)
    got = ops.compute(a, b, spec, cfg=T16)
    ref = matmul_reference(a, b, out_dtype=torch.float64)
    assert relative_error(got, ref) <= 1e-2
    assert relative_error(tilecraft.matmul(a, b), ref) <= 1e-2


def test_target_plan_of_a_transposed_product():
    """On sm90 the plan is the small-M pointer kernel on C^T: one launch of N / BLOCK_N' = M / 64 programs."""
    a = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")
    b = torch.empty(8192, 1, dtype=torch.bfloat16, device="meta")
    spec, cfg, plan = ops.target_plan(a, b, "sm90", sms=132)
    assert cfg.transposed and spec.m == 8192 and spec.n == 1
    (launch,) = plan
    assert launch.kernel.__name__ == "matmul_kernel" and launch.grid[0] == 8192 // cfg.block_n


def test_small_n_nn_with_32_columns_and_one_wave_takes_eight_warps():
    assert heuristic(_problem(8192, 32, 8192, layout="NN")).num_warps == 8
    assert heuristic(_problem(8192, 32, 8192, layout="TN")).num_warps == 4
    assert heuristic(_problem(8192, 16, 8192, layout="NN")).num_warps == 4
    assert heuristic(_problem(4096, 32, 4096, layout="NN")).num_warps == 4


def test_pdl_summary_of_a_transposed_product_is_the_small_m_one():
    """The launch (``pdl_plan``) and the report (``pdl_summary``, ``tilecraft gemm config``) see the product run."""
    a = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")
    b = torch.empty(8192, 16, dtype=torch.bfloat16, device="meta")
    spec, cfg, plan = ops.target_plan(a, b, "sm90", sms=132)
    at = torch.empty(16, 8192, dtype=torch.bfloat16, device="meta")
    spec_t, cfg_t, plan_t = ops.target_plan(at, a.mT, "sm90", sms=132, cfg=replace(cfg, transposed=False))
    assert cfg.transposed and ops.pdl_summary(spec, cfg, plan, 132) == ops.pdl_summary(spec_t, cfg_t, plan_t, 132)
    assert ops.pdl_summary(spec, cfg, plan, 132)["mode"] != "off"
