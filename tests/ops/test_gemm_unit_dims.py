"""A size-1 dimension's stride addresses nothing, but a launch specializes a stride of 1 as contiguity. The
transpose of a (K, 1) tensor is A of shape (1, K) with strides (1, 1): before 2026-11-30 the pointer kernel then
read A's K run in 2-byte loads (M=1 TT at 0.51x torch on the H200). ``launch_plan`` now views such operands
with the size-1 stride set past the other dimensions (``unit_dims_outermost``)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig


def test_unit_dims_outermost_views_without_copying():
    t = torch.randn(7, 1).t()  # (1, 7), strides (1, 1)
    assert t.stride() == (1, 1)
    v = ops.unit_dims_outermost(t)
    assert v.stride() == (7, 1) and v.data_ptr() == t.data_ptr() and torch.equal(v, t)
    b = torch.randn(1, 5).t()  # (5, 1), strides (1, 1)
    assert ops.unit_dims_outermost(b).stride() == (1, 5)
    x = torch.randn(3, 4)
    assert ops.unit_dims_outermost(x) is x  # nothing of size 1: the tensor itself
    assert ops.unit_dims_outermost(None) is None
    e = torch.randn(1, 1, 6)[:, :, ::2]  # (1, 1, 3), strides (6, 6, 2)
    assert ops.unit_dims_outermost(e).stride() == (6, 6, 2)


def _census(m, n, k, layout):
    dt = torch.bfloat16
    a = torch.empty(k, m, dtype=dt, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dt, device="meta")
    b = torch.empty(n, k, dtype=dt, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dt, device="meta")
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=GemmConfig("pointer", 16, 32, 128, 1, 4, 6))
    (launch,) = plan
    sig = ops.compile_signature(launch)
    res = cross_compile("tilecraft.kernels.gemm", "matmul_kernel", sig, launch.constexprs, "sm90",
                        num_warps=launch.options["num_warps"], num_stages=launch.options["num_stages"], sass=False)
    assert res.error is None, res.error
    return sig, {key: v for key, v in res.census.items() if key.startswith(("global_load", "cp_async", "cp.async"))}


@pytest.mark.parametrize("layout,m,n", [("TT", 1, 4096), ("NN", 4096, 1)])
def test_a_vector_operand_compiles_as_its_contiguous_layout(layout, m, n):
    """M=1 TT reads A as NT does, N=1 NN reads B as NT does: the same loads, no scalar ones."""
    sig, census = _census(m, n, 4096, layout)
    ref_sig, ref = _census(m, n, 4096, "NT")
    assert census == ref and not any(key.startswith("global_load_16") for key in census), (census, ref)
    assert sig["stride_am"] != "i32:1" and sig["stride_bn"] != "i32:1", sig
