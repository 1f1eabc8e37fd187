"""tilecraft.matmul in Triton's interpreter: every dtype and precision, every transpose, odd and
tiny shapes, batches, the fused epilogue, split-K and the TMA kernel, empty dimensions, NaN/Inf,
bad input, torch.library (opcheck, torch.compile). Outputs are checked against the float64
reference into poisoned results: ``matmul``'s output is NaN (int32: -2**31 + 1) before the
kernels run (:func:`poisoned_outputs`), and the pinned-config tests poison the output they compare
(unwritten elements keep the poison and fail)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecraft
from tilecraft.ops import gemm as ops
from tilecraft.reference.gemm import TOLERANCES, matmul_reference, relative_error
from tilecraft.tuning.gemm import GemmConfig

FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}
FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
#: the TOLERANCES key of each fp32 precision: 3xTF32 and bf16x6 are "fp32-accurate" (NVIDIA / AMD);
#: bf16x3 has no bound of its own and is held to fp32-accurate's (docs/gemm.md: 3.8e-6 on the H200)
PRECISION_TOLERANCE = {"ieee": "fp32-ieee", "tf32": "tf32", "fp32-accurate": "fp32-accurate",
                       "tf32x3": "fp32-accurate", "bf16x6": "fp32-accurate", "bf16x3": "fp32-accurate"}
POISON_INT32 = -(2**31) + 1


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every result ``compute`` allocates is poisoned before the kernels run: NaN, or -2**31 + 1 for
    int32 (no test product reaches it), so an element no kernel writes fails the comparison."""
    real = ops._new_output

    def poisoned(spec, device):
        out = real(spec, device)
        return out.fill_(float("nan") if spec.out_dtype.is_floating_point else POISON_INT32)
    monkeypatch.setattr(ops, "_new_output", poisoned)


def _operands(field, m, n, k, dtype, layout="NN", batch=None):
    lead = (batch,) if batch else ()
    a = field((*lead, k, m)).transpose(-1, -2) if layout[0] == "T" else field((*lead, m, k))
    b = field((*lead, n, k)).transpose(-1, -2) if layout[1] == "T" else field((*lead, k, n))
    if dtype == torch.int8:
        return (a * 100).round().to(dtype), (b * 100).round().to(dtype)
    return a.to(dtype), b.to(dtype)


def _ref(a, b, out_dtype, **kw):
    return matmul_reference(a, b, out_dtype=torch.float64 if out_dtype.is_floating_point else torch.int64, **kw)


def _run_pinned(a, b, cfg, **kw):
    """Launch ``cfg`` into a NaN-poisoned output (any unwritten element fails the comparison)."""
    spec = ops.validate(a, b, **kw)
    out = torch.full(spec.out_shape, float("nan")).to(spec.out_dtype) if spec.out_dtype.is_floating_point \
        else torch.full(spec.out_shape, -(2**31), dtype=spec.out_dtype)
    ops.launch(a, b, out, spec, cfg, kw.get("c"), kw.get("bias"), kw.get("scale_a"), kw.get("scale_b"))
    return out


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32", "fp64"])
def test_float_dtypes_every_layout(field, name, layout):
    dtype = FLOAT_DTYPES[name]
    a, b = _operands(field, 37, 29, 45, dtype, layout)
    out = tilecraft.matmul(a, b)
    assert out.dtype == dtype and out.shape == (37, 29) and out.is_contiguous()
    tol = TOLERANCES["fp32-ieee" if name == "fp32" else name]
    assert relative_error(out, _ref(a, b, dtype)) <= tol


@pytest.mark.parametrize("precision", ops.PRECISIONS)
def test_fp32_precisions(field, precision):
    a, b = _operands(field, 19, 33, 70, torch.float32, "NT")
    out = tilecraft.matmul(a, b, precision=precision)
    # The interpreter computes every precision in fp32 (it has no TF32 rounding): the bound is the
    # documented one of each mode, which the GPU runs are checked against.
    tol = TOLERANCES[PRECISION_TOLERANCE[precision]]
    assert relative_error(out, _ref(a, b, torch.float32)) <= tol


def test_fp32_accurate_maps_to_3xtf32():
    a = torch.zeros(4, 4)
    assert ops.validate(a, a, precision="fp32-accurate").precision == "tf32x3"
    assert ops.validate(a, a).precision == "ieee"
    assert ops.validate(a.half(), a.half()).precision is None


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
def test_int8_exact(field, layout):
    a, b = _operands(field, 33, 17, 65, torch.int8, layout)
    out = tilecraft.matmul(a, b)
    assert out.dtype == torch.int32
    assert torch.equal(out, _ref(a, b, torch.int32).to(torch.int32))


def test_int8_epilogue_integer(field):
    a, b = _operands(field, 9, 11, 40, torch.int8)
    c = (field((9, 11)) * 1000).round().to(torch.int32)
    bias = (field((11,)) * 1000).round().to(torch.int32)
    out = tilecraft.matmul(a, b, alpha=3, beta=-2, c=c, bias=bias, activation="relu")
    assert torch.equal(out, _ref(a, b, torch.int32, alpha=3, beta=-2, c=c, bias=bias, activation="relu").to(torch.int32))


def test_int8_with_scales_float_out(field):
    a, b = _operands(field, 12, 20, 48, torch.int8)
    sa, sb = field((12, 1)).abs() + 0.5, field((1, 20)).abs() + 0.5
    out = tilecraft.matmul(a, b, out_dtype=torch.float32, scale_a=sa.float(), scale_b=sb.float())
    assert relative_error(out, _ref(a, b, torch.float32, scale_a=sa.float(), scale_b=sb.float())) <= 1e-6


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("scales", ["tensor", "row_col", "none"])
def test_fp8_scales(field, name, scales):
    a, b = _operands(field, 20, 24, 64, FP8[name], "NT")
    kw = {}
    if scales == "tensor":
        kw = {"scale_a": torch.tensor(0.5), "scale_b": torch.tensor([2.0])}
    elif scales == "row_col":
        kw = {"scale_a": (field((20,)).abs() + 0.5).float(), "scale_b": (field((1, 24)).abs() + 0.5).float()}
    out = tilecraft.matmul(a, b, **kw)
    assert out.dtype == torch.bfloat16
    # Against the exact product of the fp8 values; only the bf16 output rounding remains.
    assert relative_error(out, _ref(a, b, torch.bfloat16, **kw)) <= 1e-2


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 7, 129), (7, 1, 16), (129, 7, 1), (65, 33, 100),
                                   (1000, 7, 1), (7, 1000, 129), (1, 129, 1000)])
def test_odd_and_tiny_shapes(field, m, n, k):
    a, b = _operands(field, m, n, k, torch.float32)
    out = tilecraft.matmul(a, b)
    assert relative_error(out, _ref(a, b, torch.float32)) <= 1e-5


def test_batched_and_broadcast(field):
    a, b = _operands(field, 13, 21, 30, torch.float16, "TN", batch=3)
    out = tilecraft.matmul(a, b)
    assert out.shape == (3, 13, 21)
    assert relative_error(out, _ref(a, b, torch.float16)) <= 2e-3
    b2 = field((30, 21)).half()
    out2 = tilecraft.matmul(a, b2)  # one B for every batch entry
    assert relative_error(out2, _ref(a, b2, torch.float16)) <= 2e-3
    a1 = a[:1]
    out3 = tilecraft.matmul(a1, b)  # a batch of 1 broadcasts
    assert out3.shape == (3, 13, 21)
    assert relative_error(out3, _ref(a1.expand(3, -1, -1), b, torch.float16)) <= 2e-3


def test_non_contiguous_strided_views(field):
    big_a, big_b = field((40, 60)), field((70, 50))
    a = big_a[1::2, 3:50:1]  # rows stride 2, a column offset: no unit-stride promise on rows
    b = big_b[2:49, ::2]  # column stride 2: neither dimension has unit stride
    out = tilecraft.matmul(a, b)
    assert relative_error(out, _ref(a, b, torch.float32)) <= 1e-5


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_epilogue(field, activation):
    a, b = _operands(field, 17, 23, 31, torch.float32, "TT", batch=2)
    c = field((2, 17, 23)).float().transpose(1, 2).contiguous().transpose(1, 2)  # column-major C
    bias = field((23,)).float()
    kw = {"alpha": 0.75, "beta": -1.5, "c": c, "bias": bias, "activation": activation}
    out = tilecraft.matmul(a, b, **kw)
    assert relative_error(out, _ref(a, b, torch.float32, **kw)) <= 1e-5


def test_out_dtype_and_fp32_c_with_bf16(field):
    a, b = _operands(field, 16, 24, 32, torch.bfloat16)
    c = field((16, 24)).float()
    out = tilecraft.matmul(a, b, out_dtype=torch.float32, beta=1.0, c=c)
    assert out.dtype == torch.float32
    assert relative_error(out, _ref(a, b, torch.float32, beta=1.0, c=c)) <= 1e-5


def test_fp64_alpha_beta_keep_double_precision(field):
    a, b = _operands(field, 8, 8, 16, torch.float64)
    c = field((8, 8))
    kw = {"alpha": 1 / 3, "beta": math.pi, "c": c}
    out = tilecraft.matmul(a, b, **kw)
    assert relative_error(out, _ref(a, b, torch.float64, **kw)) <= 1e-12


@pytest.mark.parametrize("split", [2, 3, 5])
def test_split_k_with_epilogue(field, split):
    a, b = _operands(field, 20, 40, 200, torch.float32, "NT", batch=2)
    c, bias = field((2, 20, 40)).float(), field((40,)).float()
    kw = {"alpha": 0.5, "beta": 2.0, "c": c, "bias": bias, "activation": "silu"}
    out = _run_pinned(a, b, GemmConfig("pointer", 16, 32, 16, 2, 4, 1, split), **kw)
    assert relative_error(out, _ref(a, b, torch.float32, **kw)) <= 1e-5


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("name", ["fp16", "bf16", "tf32", "int8", "fp8_e4m3"])
def test_tma_kernel_in_interpreter(field, name, layout):
    """The persistent TMA kernel's logic (descriptors, K tail, tile walk, transposes, the K-major
    copies for 32/8-bit types), on aligned odd shapes with ragged tiles."""
    dtype = {"tf32": torch.float32, "int8": torch.int8, **FP8, **FLOAT_DTYPES}[name]
    a, b = _operands(field, 48, 40, 80, dtype, layout, batch=2)
    kw = {"precision": "tf32"} if name == "tf32" else {}
    copies = ops.tma_plan(a, b, ops.DTYPE_NAMES[dtype])[0]
    # 16-bit operands are read in either layout; tf32/int8/fp8 MN-major ones are copied K-major
    assert copies == (0 if name in ("fp16", "bf16") else (layout[0] == "T") + (layout[1] == "N"))
    out = _run_pinned(a, b, GemmConfig("tma", 32, 16, 32, 2, 4, 2), **kw)
    spec = ops.validate(a, b, **kw)
    ref = _ref(a, b, spec.out_dtype)
    if dtype == torch.int8:
        assert torch.equal(out, ref.to(torch.int32))
    else:
        assert relative_error(out, ref) <= 1e-2


@pytest.mark.parametrize("split", [2, 3, 7])
@pytest.mark.parametrize("name", ["bf16", "int8"])
def test_tma_split_k(field, name, split):
    """Split-K inside the persistent TMA kernel: ragged M/N tiles, a K tail inside the last split,
    a batch, the epilogue after the reduce; 7 splits of K = 88 in 16-steps clamp to 6 units per tile
    (a split with no K would otherwise write zeros, harmlessly, but must not read past K)."""
    dtype = {"int8": torch.int8, **FLOAT_DTYPES}[name]
    a, b = _operands(field, 40, 48, 88, dtype, "NT", batch=2)
    if dtype == torch.int8:
        kw = {"alpha": 3, "beta": -2, "c": (field((2, 40, 48)) * 50).round().to(torch.int32), "activation": "relu"}
    else:
        kw = {"alpha": 0.5, "beta": 2.0, "c": field((2, 40, 48)).float(), "bias": field((48,)).float(),
              "activation": "silu", "out_dtype": torch.float32}
    cfg = GemmConfig("tma", 32, 16, 16, 2, 4, 2, split)
    spec = ops.validate(a, b, **kw)
    out = _run_pinned(a, b, cfg, **kw)
    ref = _ref(a, b, spec.out_dtype, **{k: v for k, v in kw.items() if k != "out_dtype"})
    if dtype == torch.int8:
        assert torch.equal(out, ref.to(torch.int32))
    else:
        assert relative_error(out, ref) <= 1e-5


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_tma_copies_unaligned_operands(field, layout):
    """Rows that are not 16-byte aligned (K = 7 fp16: 14 bytes) cannot be described to the TMA: the
    kernel reads aligned K-major copies instead, and still gives the right answer."""
    a, b = _operands(field, 9, 12, 7, torch.float16, layout, batch=2)
    assert ops.tma_plan(a, b, "fp16")[0] >= 1
    out = _run_pinned(a, b, GemmConfig("tma", 16, 16, 16, 2, 4, 2))
    assert relative_error(out, _ref(a, b, torch.float16)) <= 2e-3


def test_tma_refuses_fp64():
    a = torch.zeros(16, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match="TMA kernel cannot take"):
        ops.launch(a, a, torch.empty(16, 16, dtype=torch.float64), ops.validate(a, a), GemmConfig("tma", 16, 16, 16))


def test_empty_dimensions(field):
    a, b = field((0, 5)), field((5, 3))
    assert tilecraft.matmul(a, b).shape == (0, 3)
    assert tilecraft.matmul(field((4, 5)), field((5, 0))).shape == (4, 0)
    assert tilecraft.matmul(field((0, 4, 5)), field((5, 3))).shape == (0, 4, 3)
    # K = 0: the product is empty, so out = act(beta * c + bias)
    c, bias = field((4, 3)).float(), field((3,)).float()
    out = tilecraft.matmul(field((4, 0)).float(), field((0, 3)).float(), beta=2.0, c=c, bias=bias, activation="relu")
    assert torch.allclose(out, torch.relu(2.0 * c + bias))
    assert torch.equal(tilecraft.matmul(field((4, 0)), field((0, 3))), torch.zeros(4, 3, dtype=torch.float64))


def test_nan_inf_propagate(field):
    a, b = field((16, 16)), field((16, 16))
    a[3, 5] = float("nan")
    a[7, 2] = float("inf")
    b[2, :] = 1.0
    out = tilecraft.matmul(a, b)
    ref = torch.matmul(a.double(), b.double())
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    # beta == 0: NaN in c is not read (as in torch.addmm)
    c = torch.full((16, 16), float("nan"), dtype=torch.float64)
    assert not torch.isnan(tilecraft.matmul(field((16, 16)), field((16, 16)), c=c, beta=0.0)).any()


@pytest.mark.parametrize("split", [1, 2])
def test_relu_keeps_nan(field, split):
    """relu(NaN) is NaN (as torch.relu and the reference say): the epilogue's `where(x > 0, x, 0)` gave 0, through
    the product, C and the bias alike, and in split-K's reduce."""
    a, b = field((16, 24)), field((24, 8))
    a[3, 5] = float("nan")
    c = field((16, 8))
    c[9, 2] = float("nan")
    bias = field((8,))
    bias[6] = float("nan")
    cfg = GemmConfig("pointer", 16, 16, 16, group_m=1, num_warps=4, num_stages=1, split_k=split)
    spec = ops.validate(a, b, c=c, beta=1.0, bias=bias, activation="relu")
    got = ops.compute(a, b, spec, c, bias, cfg=cfg)
    ref = matmul_reference(a, b, out_dtype=torch.float64, c=c, beta=1.0, bias=bias, activation="relu")
    assert torch.isnan(ref[3]).all() and torch.isnan(ref[9, 2]) and torch.isnan(ref[:, 6]).all()
    assert torch.equal(torch.isnan(got), torch.isnan(ref))
    assert torch.allclose(torch.nan_to_num(got), torch.nan_to_num(ref), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_nan_propagates(fp8):
    """An fp8 NaN (e4m3fn: 0x7F, which Triton 3.6's interpreter decoded as 480) makes its row NaN."""
    a = torch.tensor([[float("nan"), 1.0], [2.0, 0.5]]).to(fp8)
    b = torch.ones(2, 3).to(fp8)
    out = tilecraft.matmul(a, b)
    assert torch.isnan(out[0]).all() and torch.equal(out[1].float(), torch.full((3,), 2.5))


def test_meta_tensors_give_a_meta_result():
    """The eager path returns the result's shape and type on meta tensors (it launched, and failed, before)."""
    out = tilecraft.matmul(torch.empty(5, 7, device="meta"), torch.empty(7, 3, device="meta"), activation="gelu")
    assert out.device.type == "meta" and out.shape == (5, 3) and out.dtype == torch.float32


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"b": torch.zeros(6, 3)}, ValueError, "inner dimensions"),
    ({"b": torch.zeros(5, 3, dtype=torch.float64)}, TypeError, "share one dtype"),
    ({"b": torch.zeros(5, 3, 2)}, ValueError, "batch sizes|inner"),
    ({"out_dtype": torch.int32}, TypeError, "out_dtype"),
    ({"precision": "tf33"}, ValueError, "precision"),
    ({"beta": 1.0}, ValueError, "needs c"),
    ({"beta": 1.0, "c": torch.zeros(3, 4)}, ValueError, "c has shape"),
    ({"bias": torch.zeros(4)}, ValueError, "bias must have shape"),
    ({"activation": "tanh"}, ValueError, "activation"),
    ({"scale_a": torch.tensor(1.0)}, ValueError, "fp8 and int8"),
    ({"alpha": "2"}, TypeError, "numbers"),
    ({"a": torch.zeros(4, 5, dtype=torch.bool), "b": torch.zeros(5, 3, dtype=torch.bool)}, TypeError, "torch.bool"),
    ({"a": torch.zeros(4, 5, dtype=torch.complex64), "b": torch.zeros(5, 3, dtype=torch.complex64)}, TypeError,
     "complex64"),
    ({"a": torch.zeros(5)}, ValueError, "a must be 2D"),
    ({"a": torch.zeros(2, 4, 5), "b": torch.zeros(3, 5, 3)}, ValueError, "batch sizes differ"),
    ({"a": torch.zeros(4, 5).bfloat16(), "b": torch.zeros(5, 3).bfloat16(), "out_dtype": torch.int8}, TypeError,
     "out_dtype one of"),
    ({"out_dtype": "bf16"}, TypeError, "must be a torch.dtype"),
    ({"a": torch.zeros(4, 5).half(), "b": torch.zeros(5, 3).half(), "precision": "tf32"}, ValueError,
     "float32 operands only"),
    ({"a": torch.zeros(4, 5, dtype=torch.int8), "b": torch.zeros(5, 3, dtype=torch.int8), "activation": "gelu"},
     ValueError, "int32 output takes activation"),
    ({"beta": 1.0, "c": torch.zeros(4, 3, dtype=torch.float64)}, TypeError, "c has dtype"),
    ({"bias": torch.zeros(3, dtype=torch.float16)}, TypeError, "bias has dtype"),
    ({"bias": torch.zeros(1, 3)}, ValueError, "bias must have shape"),
    ({"activation": ["relu"]}, TypeError, "activation must be None or a str"),
    ({"alpha": 1e300}, ValueError, "alpha=1e\\+300 is out of range"),
    ({"beta": -1e-40, "c": torch.zeros(4, 3)}, ValueError, "beta=-1e-40 is out of range"),
    ({"alpha": 10**400}, ValueError, "alpha is too large"),  # was an OverflowError
    ({"a": torch.eye(4, 5).to_sparse()}, TypeError, "layout torch.sparse_coo"),  # was a RuntimeError
    ({"bias": torch.zeros(3).to_sparse()}, TypeError, "layout torch.sparse_coo"),
])
def test_bad_input(kwargs, exc, match):
    args = {"a": torch.zeros(4, 5), "b": torch.zeros(5, 3)}
    args.update({k: v for k, v in kwargs.items() if k in ("a", "b")})
    kw = {k: v for k, v in kwargs.items() if k not in ("a", "b")}
    with pytest.raises(exc, match=match):
        tilecraft.matmul(args["a"], args["b"], **kw)


def test_bad_scales_and_integer_epilogue():
    a = torch.zeros(4, 32, dtype=torch.float8_e4m3fn)
    b = torch.zeros(32, 6, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="scale_a must hold"):
        tilecraft.matmul(a, b, scale_a=torch.ones(5))
    with pytest.raises(TypeError, match="float32"):
        tilecraft.matmul(a, b, scale_b=torch.ones(6, dtype=torch.float64))
    i8 = torch.zeros(4, 32, dtype=torch.int8)
    with pytest.raises(ValueError, match="integer"):
        tilecraft.matmul(i8, torch.zeros(32, 4, dtype=torch.int8), alpha=0.5)
    with pytest.raises(ValueError, match="float out_dtype"):
        tilecraft.matmul(i8, torch.zeros(32, 4, dtype=torch.int8), scale_a=torch.tensor(1.0))
    with pytest.raises(TypeError, match="torch.Tensor"):
        tilecraft.matmul([[1.0]], torch.zeros(1, 1))


def test_different_devices():
    a = torch.zeros(4, 5)
    with pytest.raises(ValueError, match="device"):
        tilecraft.matmul(a, torch.zeros(5, 3, device="meta"))
    meta = {"device": "meta"}
    with pytest.raises(ValueError, match="c is on meta"):
        tilecraft.matmul(a, torch.zeros(5, 3), beta=1.0, c=torch.zeros(4, 3, **meta))
    with pytest.raises(ValueError, match="bias is on meta"):
        tilecraft.matmul(a, torch.zeros(5, 3), bias=torch.zeros(3, **meta))
    f8 = torch.zeros(4, 32, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="scale_b is on meta"):
        tilecraft.matmul(f8, f8.t(), scale_b=torch.ones(4, **meta))


def test_strided_bias(field):
    """A bias that is a strided view (every other element): read as the values it holds, in the
    direct kernel and in split-K's reduce."""
    a, b = _operands(field, 9, 20, 40, torch.float32, "NT")
    bias = field((40,)).float()[::2]
    assert bias.stride(0) == 2
    ref = _ref(a, b, torch.float32, bias=bias.contiguous())
    assert relative_error(tilecraft.matmul(a, b, bias=bias), ref) <= 1e-5
    out = _run_pinned(a, b, GemmConfig("pointer", 16, 16, 16, 2, 4, 1, 2), bias=bias)
    assert relative_error(out, ref) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_non_finite_alpha_beta_propagate(field, dtype):
    """alpha or beta = +-inf gives +-inf where the product (or c) is nonzero and NaN where it is 0,
    as IEEE says (not NaN everywhere), in the direct kernel and in split-K's reduce."""
    a, b = _operands(field, 12, 10, 24, dtype)
    a[3] = 0  # row 3 of the product is exactly 0: inf * 0 = NaN there
    c = field((12, 10)).to(dtype)
    c[:, 4] = 0
    for kw in ({"alpha": math.inf}, {"alpha": -math.inf}, {"beta": math.inf, "c": c}, {"alpha": math.nan}):
        ref = matmul_reference(a, b, out_dtype=torch.float64, **kw)
        for out in (tilecraft.matmul(a, b, **kw), _run_pinned(a, b, GemmConfig("pointer", 16, 16, 16, 2, 4, 1, 2), **kw)):
            assert torch.equal(torch.isnan(out), torch.isnan(ref)), kw
            assert torch.equal(out[~torch.isnan(ref)].double(), ref[~torch.isnan(ref)].to(dtype).double()), kw


def test_alpha_beta_at_the_ends_of_their_range(field):
    """The largest and smallest accepted magnitudes keep fp64's precision (two float32 halves)."""
    a, b = _operands(field, 8, 8, 16, torch.float64)
    c = field((8, 8))
    lo, hi = ops.ALPHA_RANGE
    for kw in ({"alpha": hi}, {"alpha": -lo}, {"beta": -hi, "c": c}, {"beta": lo, "c": c}):
        assert relative_error(tilecraft.matmul(a, b, **kw), _ref(a, b, torch.float64, **kw)) <= 1e-12, kw


def test_cpu_reference_path_without_interpreter(monkeypatch, field):
    """CPU tensors with the interpreter off: the float64 reference, rounded to out_dtype; no launch."""
    monkeypatch.setattr(ops, "triton_on_cpu", lambda: False)

    def no_launch(*args, **kwargs):
        raise AssertionError("launched a kernel on the reference path")
    monkeypatch.setattr(ops, "launch", no_launch)
    a, b = _operands(field, 7, 9, 13, torch.bfloat16, "TN", batch=2)
    c, bias = field((2, 7, 9)).float(), field((9,)).float()
    kw = {"alpha": 0.5, "beta": 2.0, "c": c, "bias": bias, "activation": "gelu", "out_dtype": torch.float32}
    out = tilecraft.matmul(a, b, **kw)
    assert out.dtype == torch.float32 and out.shape == (2, 7, 9)
    ref = _ref(a, b, torch.float32, **{k: v for k, v in kw.items() if k != "out_dtype"})
    assert relative_error(out, ref) <= 1e-6
    i8a, i8b = _operands(field, 5, 6, 40, torch.int8)
    assert torch.equal(tilecraft.matmul(i8a, i8b), _ref(i8a, i8b, torch.int32).to(torch.int32))


def test_opcheck(field):
    a, b = _operands(field, 9, 12, 20, torch.float32, "TN")
    c, bias = field((9, 12)).float(), field((12,)).float()
    torch.library.opcheck(torch.ops.tilecraft.matmul.default,
                          (a, b, torch.float32, 0.5, 1.0, c, bias, "relu", None, None, None))


def test_outputs_are_poisoned(monkeypatch, field):
    """The poison of :func:`poisoned_outputs` reaches ``matmul``'s result: a launch that writes
    nothing leaves it there."""
    monkeypatch.setattr(ops, "launch", lambda *args, **kwargs: [])
    assert tilecraft.matmul(field((4, 5)), field((5, 3))).isnan().all()
    i8 = torch.ones(4, 8, dtype=torch.int8)
    assert (tilecraft.matmul(i8, i8.t()) == POISON_INT32).all()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile(field, dynamic):
    """One graph (fullgraph), also with dynamic shapes and alpha a graph input: validate's checks
    of alpha's value are not traced (``math.isfinite`` breaks a dynamic graph), and a bad alpha
    still raises, in the op when it runs."""
    torch._dynamo.reset()
    a, b = _operands(field, 9, 12, 20, torch.float16, "NT")
    bias = field((12,)).half()

    def f(x, y, alpha=1.0):
        return tilecraft.matmul(x, y, alpha=alpha, bias=bias, activation="gelu") * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=dynamic)
    assert relative_error(compiled(a, b), f(a, b)) == 0
    assert relative_error(compiled(a, b, 0.5), f(a, b, 0.5)) == 0
    if dynamic:
        a2, b2 = _operands(field, 17, 12, 36, torch.float16, "NT")
        assert relative_error(compiled(a2, b2, 0.25), f(a2, b2, 0.25)) == 0
    with pytest.raises(ValueError, match="out of range"):
        compiled(a, b, 1e300)


def test_heuristic_configs_fit_and_interpreter_choice(field):
    from tilecraft.tuning.gemm import (
        SHARED_LIMIT,
        Problem,
        config_space,
        fits,
        heuristic,
    )
    for arch in ("sm90", "sm80", "cdna"):
        for dt in ("bf16", "fp32", "fp64", "int8", "fp8_e4m3"):
            for m in (1, 64, 4096):
                p = Problem(m, 4096, 4096, 1, dt, "tf32" if dt == "fp32" else None, arch, arch == "sm90", True, False)
                assert fits(heuristic(p), p), (arch, dt, m)
                assert all(fits(c, p) for c in config_space(p))
    assert SHARED_LIMIT["cdna"] == 65536
    a, b = field((8, 8)), field((8, 8))
    cfg = ops.choose_config(a, b, ops.validate(a, b))
    assert cfg.kernel == "pointer"


def test_tma_epilogue_in_halves(field):
    a, b = _operands(field, 40, 64, 48, torch.float16, "TN")
    c, bias = field((40, 64)).half(), field((64,)).half()
    kw = {"alpha": 2.0, "beta": 0.5, "c": c, "bias": bias, "activation": "gelu_tanh"}
    out = _run_pinned(a, b, GemmConfig("tma", 16, 32, 16, 2, 4, 2, epilogue_split=True), **kw)
    assert relative_error(out, _ref(a, b, torch.float16, **kw)) <= 2e-3


def test_batches_beyond_the_grid_limit_launch_in_slices(field, monkeypatch):
    monkeypatch.setattr(ops, "MAX_GRID_BATCH", 2)
    a, b = _operands(field, 9, 10, 20, torch.float32, "NT", batch=5)
    c = field((5, 9, 10)).float()
    for split in (1, 2):
        out = _run_pinned(a, b[:1], GemmConfig("pointer", 16, 16, 16, 2, 4, 1, split), beta=1.0, c=c)
        assert relative_error(out, _ref(a, b[:1], torch.float32, beta=1.0, c=c)) <= 1e-5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(0, 70), layout=st.sampled_from(["NN", "NT", "TN", "TT"]),
       batch=st.sampled_from([None, 1, 3]), name=st.sampled_from(["fp16", "fp32", "int8"]),
       split=st.sampled_from([1, 3]))
def test_any_shape_layout_batch_split_matches_reference(field, m, n, k, layout, batch, name, split):
    dtype = {"int8": torch.int8, **FLOAT_DTYPES}[name]
    a, b = _operands(field, m, n, k, dtype, layout, batch=batch)
    out = _run_pinned(a, b, GemmConfig("pointer", 16, 16, 16, 2, 4, 1, split))
    ref = _ref(a, b, out.dtype)
    if dtype == torch.int8:
        assert torch.equal(out, ref.to(torch.int32))
    else:
        assert relative_error(out, ref) <= (2e-3 if name == "fp16" else 1e-5)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_presplit_3xtf32(field, layout):
    """3xTF32 on operands split before the GEMM (two tf32_split launches, then the TMA kernel with
    three dots per K step): every layout, a batch against a broadcast B, ragged tiles, a K tail,
    the full epilogue, a poisoned output, against float64."""
    a, _ = _operands(field, 40, 24, 88, torch.float32, layout, batch=2)
    _, b = _operands(field, 40, 24, 88, torch.float32, layout)
    kw = {"precision": "fp32-accurate", "alpha": 0.5, "beta": 2.0, "c": field((2, 40, 24)).float(),
          "bias": field((24,)).float(), "activation": "gelu"}
    cfg = GemmConfig("tma", 32, 16, 16, 2, 4, 2, presplit=True)
    spec = ops.validate(a, b, **kw)
    plan = ops.launch_plan(a, b, torch.empty(spec.out_shape), spec, cfg, kw["c"], kw["bias"])
    assert [k.kernel.__name__ for k in plan] == ["tf32_split_kernel", "tf32_split_kernel", "matmul_tma_kernel"]
    assert plan[-1].constexprs["PRESPLIT"] and plan[-1].constexprs["INPUT_PRECISION"] == "tf32"
    out = _run_pinned(a, b, cfg, **kw)
    ref = _ref(a, b, torch.float32, **{k: v for k, v in kw.items() if k != "precision"})
    assert relative_error(out, ref) <= TOLERANCES["fp32-accurate"]


def test_presplit_needs_3xtf32_and_split_values():
    a = torch.zeros(16, 16)
    with pytest.raises(ValueError, match="presplit is the 3xTF32 form"):
        ops.launch(a, a, torch.empty(16, 16), ops.validate(a, a, precision="tf32"),
                   GemmConfig("tma", 16, 16, 16, presplit=True))
    # hi: tf32 (13 low bits zero), round to nearest even; hi + lo == x exactly; inf, NaN, the top
    x = torch.tensor([[1.0, 1 + 2**-11, 1 + 3 * 2**-11, -3.1, 1e-40, 0.0, 3.4028235e38, -3.4028235e38,
                       float("inf"), -float("inf"), float("nan")]])
    x = torch.cat([x, torch.rand(3, x.shape[1]) * 2 - 1])
    hi, lo, launch = ops.tf32_split(x, -1)
    hi.fill_(7.0)
    lo.fill_(7.0)
    launch.run()
    assert hi.stride(-1) == 1 and not (hi.view(torch.int32) & 0x1FFF).any()
    fin = torch.isfinite(x)
    assert torch.equal(hi[fin].double() + lo[fin].double(), x[fin].double())
    assert hi[0, 1].item() == 1.0 and hi[0, 2].item() == 1 + 2**-9
    assert torch.isfinite(hi[0, 6:8]).all()  # rounding the largest floats up would give inf
    assert hi[0, 8] == float("inf") and hi[0, 9] == -float("inf") and (lo[0, 8:10] == 0).all()
    assert hi[0, 10].isnan() and lo[0, 10].isnan()
    # B (K, N) is split K-major: the views have B's shape with K contiguous
    hb, _, lbl = ops.tf32_split(x.t(), -2)
    lbl.run()
    assert hb.shape == x.t().shape and hb.stride(-2) == 1
    torch.testing.assert_close(hb, hi.t(), rtol=0, atol=0, equal_nan=True)


def test_presplit_inf_and_nan_rows(field):
    """An inf in A gives an inf row (the small terms' inf * lo is dropped, not summed to NaN)."""
    a = field((40, 48)).float()
    b = field((48, 24)).float().abs() + 0.5
    a[3, 7], a[5, 9] = float("inf"), float("nan")
    out = _run_pinned(a, b, GemmConfig("tma", 32, 16, 16, 2, 4, 2, presplit=True), precision="fp32-accurate")
    assert torch.isposinf(out[3]).all() and out[5].isnan().all() and torch.isfinite(out[0]).all()


def test_tma_copies_pad_rows_to_128_bytes():
    """Operands the TMA kernel copies get 128-byte rows (16 for rows under 512 bytes); rows 16- but
    not 128-byte aligned that it can read are read as they are (a copy inside the call lost on the
    H200: 3000x7000x5000 bf16 369 TFLOP/s against 486)."""
    def t(*s, dtype=torch.bfloat16):
        return torch.empty(*s, dtype=dtype, device="meta")
    assert ops.tma_plan(t(3000, 5000), t(5000, 7000), "bf16") == (0, True, False)
    c = ops.aligned_kmajor_copy(torch.zeros(5, 300, dtype=torch.bfloat16), -1)
    assert c.shape == (5, 300) and c.stride(0) == 320  # 600 bytes of row padded to 640
    c = ops.aligned_kmajor_copy(torch.zeros(2, 300, 5, dtype=torch.bfloat16), -2)  # B (K, N): K-major copy
    assert c.shape == (2, 300, 5) and c.stride(-2) == 1 and c.stride(-1) == 320
    c = ops.aligned_kmajor_copy(torch.zeros(5, 7, dtype=torch.float16), -1)
    assert c.stride(0) == 8  # short rows: 16 bytes
    hi, _, _ = ops.tf32_split(torch.zeros(3, 130), -1)
    assert hi.stride(0) == 160  # 520 bytes of row padded to 640


@pytest.mark.parametrize("bm", [1, 2, 4, 8])
@pytest.mark.parametrize("name", ["fp32", "bf16", "fp64", "int8"])
def test_matrix_vector_tiles(field, name, bm):
    """BLOCK_M below 16: the pointer kernel's broadcast multiply and sum over K (no tl.dot), at M from
    1 to 9 (several row tiles), a K tail, transposed views, split-K and the epilogue."""
    dtype = {"int8": torch.int8, **FLOAT_DTYPES}[name]
    for m, layout, split in ((1, "NN", 1), (bm + 1, "TT", 3), (9, "NT", 2)):
        a, b = _operands(field, m, 70, 45, dtype, layout)
        kw = {} if dtype == torch.int8 else {"bias": field((70,)).float() if name != "fp64" else field((70,)).double()}
        out = _run_pinned(a, b, GemmConfig("pointer", bm, 32, 16, group_m=1, num_warps=2, num_stages=2, split_k=split), **kw)
        ref = _ref(a, b, out.dtype, **kw)
        if dtype == torch.int8:
            assert torch.equal(out, ref.to(torch.int32))
        else:
            tol = {"bf16": 1e-2, "fp32": 1e-5, "fp64": 1e-12}[name]
            assert relative_error(out, ref) <= tol, (m, layout, split)


def test_bad_tile_sizes_and_copy_knob_are_refused_before_launch():
    a, b = torch.rand(3, 40), torch.rand(40, 20)
    spec = ops.validate(a, b)
    out = torch.empty(3, 20)
    for cfg in (GemmConfig("pointer", 3, 32, 16), GemmConfig("pointer", 16, 48, 16), GemmConfig("pointer", 16, 32, 0)):
        with pytest.raises(ValueError, match="powers of two"):
            ops.launch_plan(a, b, out, spec, cfg)
    am, bm = torch.empty(64, 64, device="meta"), torch.empty(64, 64, device="meta").t()
    with pytest.raises(ValueError, match="mn_copy"):
        ops.target_plan(am, bm, "sm90", sms=132, cfg=GemmConfig("fma", 64, 128, 32, num_warps=4, mn_copy="c"))
