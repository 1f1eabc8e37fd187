"""``tilecraft.laplacian``: every variant against the float64 reference, input validation, strided
views, 64-bit offsets, and the CPU path without the interpreter.

The kernels run through Triton's interpreter (see ``tests/conftest.py``), which costs about
0.01-0.5 s per call at these sizes, so grids are small and odd: (2R+1, 2R+2, 2R+3) is the smallest
grid with an interior, (2R+4, 2R+7, 2R+5) has a few interior points per axis and no extent a
multiple of another. Larger grids appear only where a code path needs them (several tiles per
axis), sized from the variant's own configuration.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecraft
from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import LADDER, VARIANTS, StencilConfig, laplacian
from tilecraft.reference.stencil import laplacian_reference, quadratic_field, stencil_weights

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

DTYPES = [torch.float32, torch.float64]
# Relative error ||ours - ref|| / ||ref|| against the float64 reference on random data.
REL_TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
MAIN_ORDERS = [2, 4, 8, 16]
SPOT_ORDERS = [6, 10, 12, 14]
# Distinct per axis (hz, hy, hx), so a kernel that applies a weight to the wrong axis fails.
SPACING = (0.9, 1.1, 1.3)


def dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def small_shapes(r: int) -> list[tuple[int, int, int]]:
    """The smallest grid with an interior, an odd one, and one whose nx (hence every stride) is a
    multiple of 16: the kernels take a different, vectorised path when it is."""
    return [(2 * r + 1, 2 * r + 2, 2 * r + 3), (2 * r + 4, 2 * r + 7, 2 * r + 5),
            (2 * r + 2, 2 * r + 3, 16 * (1 + 2 * r // 16))]


def make_field(shape, dtype, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, dtype=torch.float64, generator=gen) * 2 - 1).to(dtype)


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill t (any strides) with NaN in place; returns t."""
    return t.fill_(float("nan"))


def interior_mask(shape, r: int) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[r:shape[0] - r, r:shape[1] - r, r:shape[2] - r] = True
    return mask


def assert_interior_matches(result: torch.Tensor, u: torch.Tensor, order: int, spacing, what: str = "") -> float:
    """Interior of ``result`` against the float64 reference: no NaN, relative error within REL_TOL
    in norm and every point within REL_TOL * max|ref|. Returns the relative error."""
    r = order // 2
    nz, ny, nx = u.shape
    interior = result[r:nz - r, r:ny - r, r:nx - r].double()
    ref = laplacian_reference(u, order, spacing)
    n_nan = int(torch.isnan(interior).sum())
    assert n_nan == 0, f"{what}: {n_nan} of {interior.numel()} interior points unwritten (NaN)"
    tol = REL_TOL[u.dtype]
    err = ((interior - ref).norm() / ref.norm()).item()
    assert err < tol, f"{what}: relative error {err:.3e} >= {tol:.0e}"
    worst = (interior - ref).abs().max().item()
    assert worst <= tol * ref.abs().max().item(), f"{what}: worst point off by {worst:.3e}"
    return err


def assert_boundary(result: torch.Tensor, order: int, *, nan: bool, what: str = "") -> None:
    """The R-wide boundary is all NaN (a poisoned ``out`` left untouched) or exactly zero
    (allocated by tilecraft)."""
    boundary = result[~interior_mask(result.shape, order // 2)]
    if nan:
        written = int((~torch.isnan(boundary)).sum())
        assert written == 0, f"{what}: {written} of {boundary.numel()} boundary points were written"
    else:
        assert torch.equal(boundary, torch.zeros_like(boundary)), f"{what}: boundary is not exactly zero"


def run_poisoned(u: torch.Tensor, order: int, spacing, variant: str, out: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """laplacian into a NaN-poisoned out; checks it returns out, leaves u alone, writes exactly
    the interior, correctly."""
    what = f"variant={variant} order={order} dtype={u.dtype} shape={tuple(u.shape)}"
    before = u.clone()
    out = poison(torch.empty_like(u, memory_format=torch.contiguous_format) if out is None else out)
    result = laplacian(u, order=order, spacing=spacing, out=out, variant=variant)
    assert result is out, f"{what}: did not return the given out"
    assert torch.equal(u, before), f"{what}: modified its input"
    assert_interior_matches(out, u, order, spacing, what)
    assert_boundary(out, order, nan=True, what=what)
    return out


# ----------------------------------------------------------------------------------------------
# correctness of every variant
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_kind", [0, 1, 2], ids=["min", "odd", "nx16"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", MAIN_ORDERS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_poisoned_out(variant, order, dtype, shape_kind, poisoned_like):
    shape = small_shapes(order // 2)[shape_kind]
    u = make_field(shape, dtype, seed=order)
    run_poisoned(u, order, SPACING, variant, out=poisoned_like(u))


@pytest.mark.parametrize("order", SPOT_ORDERS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_spot_orders(variant, order):
    r = order // 2
    run_poisoned(make_field(small_shapes(r)[1], torch.float64, seed=order), order, SPACING, variant)
    run_poisoned(make_field(small_shapes(r)[0], torch.float32, seed=order), order, SPACING, variant)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", [2, 16])
@pytest.mark.parametrize("variant", VARIANTS)
def test_allocated_out_has_zero_boundary(variant, order, dtype):
    u = make_field(small_shapes(order // 2)[1], dtype, seed=7)
    what = f"variant={variant} order={order} dtype={dtype}"
    result = laplacian(u, order=order, spacing=SPACING, variant=variant)
    assert result.shape == u.shape and result.dtype == u.dtype and result.device == u.device, what
    assert result.is_contiguous(), what
    assert_interior_matches(result, u, order, SPACING, what)
    assert_boundary(result, order, nan=False, what=what)


def test_default_arguments_are_order_2_unit_spacing_auto():
    u = make_field((5, 6, 7), torch.float64)
    result = tilecraft.laplacian(u)
    assert_interior_matches(result, u, 2, 1.0, "defaults")
    assert torch.equal(result, laplacian(u, order=2, spacing=1.0, variant="auto"))


def _multi_tile_shape(cfg: StencilConfig, order: int) -> tuple[int, int, int]:
    """A grid on which ``cfg`` has at least three x tiles (one of them entirely interior), a
    partial last tile in y and z, and more y tiles than one grid-order band / more planes than one
    z chunk."""
    r = order // 2
    nx = 2 * cfg.block_x + r + 5
    if cfg.kernel == "zwin":  # 16-byte rows only: three x tiles, the last one shifted
        return (2 * r + cfg.block_z + 3, 2 * r + cfg.block_y + 3, 2 * cfg.block_x + 16)
    if cfg.kernel in ("zmarch", "rows"):
        return (2 * r + cfg.block_z + 3, 2 * r + cfg.block_y + 3, nx)
    return (2 * r + 2, 2 * r + cfg.block_y * max(cfg.group_y, 1) + 3, nx)


def _multi_tile_case(variant: str, dtype: torch.dtype, order: int) -> tuple[int, int, int]:
    """``_multi_tile_shape`` for the configuration the variant picks on that very shape ("auto"
    chooses by shape): iterate to a fixed point."""
    shape = (64, 64, 64)
    for _ in range(4):
        new = _multi_tile_shape(ops.config_for(variant, dtype, order, shape), order)
        if new == shape:
            break
        shape = new
    return shape


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", [2, 8])
@pytest.mark.parametrize("variant", LADDER + ("auto",))
def test_several_tiles_per_axis(variant, order, dtype):
    shape = _multi_tile_case(variant, dtype, order)
    run_poisoned(make_field(shape, dtype, seed=3), order, SPACING, variant)


@pytest.mark.slow
def test_several_tiles_per_axis_order_16_auto():
    shape = _multi_tile_case("auto", torch.float64, 16)
    run_poisoned(make_field(shape, torch.float64, seed=4), 16, SPACING, "auto")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", [2, 4])  # orders >= 6: one configuration, tested above
def test_auto_configs_of_large_planes(order, dtype):
    """What "auto" runs on planes too large for the interpreter (chosen by plane size), launched
    on a small grid with several tiles per axis."""
    r = order // 2
    cfg = ops.auto_config(dtype, order, (2 * r + 64, 8192, 8192))
    shape = _multi_tile_shape(cfg, order)
    u = make_field(shape, dtype, seed=6)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    out = poison(torch.empty_like(u))
    ops.launch(u, out, order, spacing, cfg)
    assert_interior_matches(out, u, order, spacing, f"auto config {cfg}")
    assert_boundary(out, order, nan=True, what=f"auto config {cfg}")


# Small explicit configurations run through ``launch``: many tiles, bands, slabs and z chunks on
# grids the interpreter handles quickly, and every knob of the z-march kernel.
_PLANE = StencilConfig("plane", block_y=2, block_x=16, num_warps=1)
_ZMARCH = StencilConfig("zmarch", block_y=2, block_x=16, num_warps=1, block_z=3)
SMALL_CONFIGS = {
    "plane": _PLANE,
    "plane-ascending-nt": replace(_PLANE, block_y=4, ascending=True, nontemporal=True),
    "plane-bands": replace(_PLANE, grid_order=1, group_y=3),
    "plane-slabs": replace(_PLANE, nontemporal=True, subdomain_bytes=1),  # 1 byte: block_y rows a slab
    "zmarch": _ZMARCH,
    "zmarch-z1": replace(_ZMARCH, block_y=4, block_x=32, block_z=1, nontemporal=True),
    "zmarch-yfirst-prefetch2": replace(_ZMARCH, zorder=1, prefetch=2),
    "zmarch-xfirst-prefetch3": replace(_ZMARCH, zorder=2, prefetch=3, block_z=4),
    "zmarch-z-via-l1": replace(_ZMARCH, z_in_regs=False),
    "zmarch-z-via-l1-prefetch2": replace(_ZMARCH, z_in_regs=False, prefetch=2, block_z=5),
    "zmarch-stages2": replace(_ZMARCH, num_stages=2),
    "zmarch-vec1": replace(_ZMARCH, vec=1),
    "zmarch-vec2": replace(_ZMARCH, vec=2),
    "zmarch-unrolled-2": replace(_ZMARCH, unroll_z=True, block_z=2, zorder=2),
    "zmarch-unrolled-4": replace(_ZMARCH, unroll_z=True, block_z=4, nontemporal=True),
    "zmarch-pipeline-xy": replace(_ZMARCH, pipeline_xy=True, prefetch=2, zorder=2),
    "zmarch-static-strides": replace(_ZMARCH, static_strides=True),
    "zmarch-unrolled-static": replace(_ZMARCH, unroll_z=True, static_strides=True),
    "zmarch-z-via-l1-static": replace(_ZMARCH, z_in_regs=False, static_strides=True),
    # the row kernel: unrolled short march (mode 0), register window in a loop (1), z through L1 (2)
    "rows-unrolled": StencilConfig("rows", block_y=2, block_x=16, num_warps=1, block_z=3, unroll_z=True),
    "rows-unrolled-1row-nt": StencilConfig("rows", block_y=1, block_x=32, num_warps=1, block_z=2, unroll_z=True,
                                           nontemporal=True),
    "rows-window": StencilConfig("rows", block_y=3, block_x=16, num_warps=1, block_z=2, zorder=0),
    "rows-z-via-l1": StencilConfig("rows", block_y=2, block_x=16, num_warps=1, block_z=3, z_in_regs=False),
    "rows-vec1": StencilConfig("rows", block_y=2, block_x=16, num_warps=1, block_z=3, unroll_z=True, vec=1),
}


@pytest.mark.parametrize("order,nx_kind", [(2, "nx16-fp32"), (6, "odd-fp64"), (10, "nx16-fp64")])
@pytest.mark.parametrize("name", list(SMALL_CONFIGS))
def test_launch_small_configs(name, order, nx_kind):
    cfg = SMALL_CONFIGS[name]
    r = order // 2
    if nx_kind.startswith("nx16"):  # nx and strides multiples of the vector width
        nx = 2 * cfg.block_x + 16
    else:
        nx = (2 * cfg.block_x + r + 3) | 1
    dtype = torch.float32 if nx_kind.endswith("fp32") else torch.float64
    shape = (2 * r + 5, 2 * r + 5, nx)
    u = make_field(shape, dtype, seed=5)
    spacing = ops.validate(u, order, SPACING, None, "auto")[1]
    out = poison(torch.empty_like(u))
    handles = ops.launch(u, out, order, spacing, cfg)
    if cfg.subdomain_bytes:
        assert len(handles) > 1, "the slab configuration should launch one kernel per slab"
    assert_interior_matches(out, u, order, spacing, name)
    assert_boundary(out, order, nan=True, what=name)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    order=st.sampled_from(MAIN_ORDERS),
    variant=st.sampled_from(VARIANTS),
    dtype=st.sampled_from(DTYPES),
    extra=st.tuples(*[st.integers(0, 9)] * 3),
    spacing=st.tuples(*[st.floats(0.25, 4.0)] * 3),
    seed=st.integers(0, 2**16),
)
def test_random_shapes(order, variant, dtype, extra, spacing, seed):
    r = order // 2
    shape = tuple(2 * r + 1 + e for e in extra)
    run_poisoned(make_field(shape, dtype, seed), order, spacing, variant)


# ----------------------------------------------------------------------------------------------
# the quadratic field: Laplacian exactly 3
# ----------------------------------------------------------------------------------------------
def quadratic_tolerance(u: torch.Tensor, order: int, spacing) -> float:
    """Rounding bound for the stencil on ``u``: input rounding plus accumulation, each at most
    eps * max|u| * sum|w| (every weight, both of a pair); 4x that as the allowance."""
    w = stencil_weights(order, spacing)
    total = abs(w[0]) + 2 * sum(abs(x) for x in w[1:])
    return 4 * torch.finfo(u.dtype).eps * u.abs().max().item() * total


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.5, 0.25, 2.0)], ids=["unit", "anisotropic"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", [2, 4, 6, 8, 10, 12, 14, 16])
@pytest.mark.parametrize("variant", ["baseline", "reordered", "auto", "reference"])
def test_quadratic_field_laplacian_is_3(variant, order, dtype, spacing):
    r = order // 2
    shape = (2 * r + 4, 2 * r + 7, 2 * r + 5)
    u = quadratic_field(shape, spacing, dtype=dtype)
    out = poison(torch.empty_like(u))
    laplacian(u, order=order, spacing=spacing, out=out, variant=variant)
    interior = out[r:-r, r:-r, r:-r].double()
    tol = quadratic_tolerance(u, order, spacing)
    assert tol < 0.02, "tolerance too loose to mean anything"
    worst = (interior - 3).abs().max().item()
    assert worst <= tol, f"max |lap - 3| = {worst:.3e} > {tol:.3e}"
    assert_boundary(out, order, nan=True)


# ----------------------------------------------------------------------------------------------
# spacing and strides
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["baseline", "grid_order", "auto", "reference"])
def test_scalar_spacing_equals_triple(variant):
    u = make_field((9, 10, 11), torch.float64)
    a = laplacian(u, order=4, spacing=0.7, variant=variant)
    b = laplacian(u, order=4, spacing=(0.7, 0.7, 0.7), variant=variant)
    c = laplacian(u, order=4, spacing=[0.7, 0.7, 0.7], variant=variant)
    assert torch.equal(a, b) and torch.equal(a, c)
    assert_interior_matches(a, u, 4, 0.7)
    # the spacing matters (guards against a spacing that is ignored)
    d = laplacian(u, order=4, spacing=1.0, variant=variant)
    torch.testing.assert_close(d[2:-2, 2:-2, 2:-2] * (1 / 0.7**2), a[2:-2, 2:-2, 2:-2])


@pytest.mark.parametrize("variant", ["baseline", "auto"])
def test_spacing_axis_order_is_z_y_x(variant):
    """A field varying along one axis only: its Laplacian depends on that axis's spacing alone."""
    shape = (9, 10, 11)
    spacing = (0.5, 1.0, 2.0)  # (hz, hy, hx)
    for axis in range(3):
        coord = torch.arange(shape[axis], dtype=torch.float64) * spacing[axis]
        view = [1, 1, 1]
        view[axis] = -1
        u = (coord**2).reshape(view).expand(shape).contiguous()  # d2u/da2 = 2
        out = laplacian(u, order=4, spacing=spacing, variant=variant)
        torch.testing.assert_close(out[2:-2, 2:-2, 2:-2], torch.full((5, 6, 7), 2.0, dtype=torch.float64),
                                   rtol=0, atol=1e-11, msg=f"axis {axis}")


def padded_view(shape, dtype, pad=(2, 3, 5), offset=(1, 2, 3), seed=11) -> torch.Tensor:
    """A view of ``shape`` inside a larger random tensor: x stride 1, padded rows and planes."""
    nz, ny, nx = shape
    big = make_field((nz + pad[0], ny + pad[1], nx + pad[2]), dtype, seed)
    z0, y0, x0 = offset
    v = big[z0:z0 + nz, y0:y0 + ny, x0:x0 + nx]
    assert v.stride(-1) == 1 and not v.is_contiguous()
    return v


@pytest.mark.parametrize("layout", ["u_strided", "out_strided", "both_strided"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("variant", VARIANTS)
def test_strided_views(variant, dtype, layout):
    order, r = 4, 2
    shape = (2 * r + 4, 2 * r + 7, 2 * r + 5)
    if layout == "out_strided":
        u = make_field(shape, dtype, seed=11)
    else:
        u = padded_view(shape, dtype)
    if layout == "u_strided":
        out = torch.empty(shape, dtype=dtype)
    else:
        out = torch.empty(shape[0] + 3, shape[1] + 2, shape[2] + 9, dtype=dtype)[2:-1, 1:-1, 4:4 + shape[2]]
        assert out.stride(-1) == 1 and not out.is_contiguous()
    run_poisoned(u, order, SPACING, variant, out=out)
    # the same answer as on contiguous copies
    expect = laplacian(u.contiguous(), order=order, spacing=SPACING, variant=variant)
    torch.testing.assert_close(out[r:-r, r:-r, r:-r], expect[r:-r, r:-r, r:-r])


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("variant", ["auto", "baseline"])
def test_strided_views_vector_aligned(variant, dtype):
    """nx and every stride a multiple of 16, x offset of the view a multiple of 4 (the z-march
    kernel's vectorised path), and the same with the out view's strides not aligned."""
    order = 2
    shape = (5, 6, 16)
    u = padded_view(shape, dtype, pad=(1, 2, 16), offset=(1, 1, 8))
    assert all(s % 16 == 0 for s in u.stride()[:2])
    out = torch.empty(6, 8, 32, dtype=dtype)[1:, 1:-1, 4:20]
    run_poisoned(u, order, SPACING, variant, out=out)
    out_odd = torch.empty(5, 7, 21, dtype=dtype)[:, :-1, 1:17]
    run_poisoned(u, order, SPACING, variant, out=out_odd)


@pytest.mark.parametrize("variant", ["baseline", "reordered", "auto", "reference"])
def test_broadcast_input(variant):
    """u with a zero z stride (one plane expanded) is a valid input: x is contiguous, nothing is
    written to it. Constant along z, its Laplacian has no z part."""
    base = make_field((1, 8, 9), torch.float64)
    u = base.expand(7, 8, 9)
    assert u.stride(0) == 0
    run_poisoned(u, 2, SPACING, variant, out=torch.empty(7, 8, 9, dtype=torch.float64))


def test_strided_brief_example():
    """``big[:, 1:-1, :][..., :nx]``: padded rows, x stride 1, for u and out."""
    nz, ny, nx = 7, 8, 9
    big_u = make_field((nz, ny + 2, nx + 6), torch.float64)
    u = big_u[:, 1:-1, :][..., :nx]
    big_out = poison(torch.empty(nz, ny + 2, nx + 4, dtype=torch.float64))
    out = big_out[:, 1:-1, :][..., :nx]
    for variant in ("baseline", "subdomains", "auto"):
        run_poisoned(u, 2, 1.0, variant, out=out)
    # padding around out is never touched
    assert torch.isnan(big_out[:, 0]).all() and torch.isnan(big_out[:, -1]).all()
    assert torch.isnan(big_out[..., nx:]).all()


@pytest.mark.parametrize("variant", ["baseline", "auto", "reference"])
def test_out_in_same_storage_but_disjoint(variant):
    """Disjoint views of one allocation are not an overlap."""
    shape = (6, 7, 8)
    big = make_field((2 * shape[0], *shape[1:]), torch.float64)
    u, out = big[:shape[0]], big[shape[0]:]
    before = u.clone()
    laplacian(u, order=2, out=out, variant=variant)
    assert torch.equal(u, before)
    assert_interior_matches(out, u, 2, 1.0)


# ----------------------------------------------------------------------------------------------
# validation: the right exception, before anything is launched
# ----------------------------------------------------------------------------------------------
class Launched(Exception):
    pass


@pytest.fixture
def no_launch(monkeypatch):
    """Any kernel launch or torch fallback fails the test: errors must come from validation."""
    def fail(*args, **kwargs):
        raise Launched("launched before the input was rejected")
    monkeypatch.setattr(ops, "launch", fail)
    monkeypatch.setattr(ops, "laplacian_torch", fail)


U = lambda: make_field((5, 6, 7), torch.float64)  # noqa: E731
ALL_VARIANTS_AND_DEFAULT = ["auto", "baseline", "reference"]

TYPE_ERRORS = {
    "list": lambda: dict(u=U().tolist()),
    "numpy": lambda: dict(u=U().numpy()),
    "none": lambda: dict(u=None),
    "int32": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.int32)),
    "int64": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.int64)),
    "bool": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.bool)),
    "complex64": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.complex64)),
    "complex128": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.complex128)),
    "float16": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.float16)),
    "bfloat16": lambda: dict(u=torch.ones(5, 6, 7, dtype=torch.bfloat16)),
    "order-bool": lambda: dict(u=U(), order=True),
    "order-float": lambda: dict(u=U(), order=4.0),
    "order-str": lambda: dict(u=U(), order="4"),
    "order-none": lambda: dict(u=U(), order=None),
    "out-dtype": lambda: dict(u=U(), out=torch.empty(5, 6, 7, dtype=torch.float32)),
    "out-numpy": lambda: dict(u=U(), out=U().numpy()),
    "spacing-str": lambda: dict(u=U(), spacing="1.0"),
    "spacing-none": lambda: dict(u=U(), spacing=None),
    "spacing-bool": lambda: dict(u=U(), spacing=True),
    "spacing-entry-str": lambda: dict(u=U(), spacing=(1.0, "1", 1.0)),
}

VALUE_ERRORS = {
    "0d": lambda: dict(u=torch.tensor(1.0, dtype=torch.float64)),
    "2d": lambda: dict(u=torch.ones(6, 7, dtype=torch.float64)),
    "4d": lambda: dict(u=torch.ones(2, 5, 6, 7, dtype=torch.float64)),
    "order-odd": lambda: dict(u=U(), order=3),
    "order-0": lambda: dict(u=U(), order=0),
    "order-negative": lambda: dict(u=U(), order=-2),
    "order-18": lambda: dict(u=make_field((19, 19, 19), torch.float64), order=18),
    "small-z": lambda: dict(u=make_field((4, 5, 5), torch.float64), order=4),
    "small-y": lambda: dict(u=make_field((5, 4, 5), torch.float64), order=4),
    "small-x": lambda: dict(u=make_field((5, 5, 4), torch.float64), order=4),
    "small-order16": lambda: dict(u=make_field((17, 17, 16), torch.float64), order=16),
    "empty": lambda: dict(u=torch.empty(0, 5, 5, dtype=torch.float64)),
    "x-strided": lambda: dict(u=make_field((5, 6, 14), torch.float64)[..., ::2]),
    "x-transposed": lambda: dict(u=make_field((7, 6, 5), torch.float64).transpose(0, 2)),
    "out-shape": lambda: dict(u=U(), out=torch.empty(5, 6, 8, dtype=torch.float64)),
    "out-2d": lambda: dict(u=U(), out=torch.empty(6, 7, dtype=torch.float64)),
    "out-device": lambda: dict(u=U(), out=torch.empty(5, 6, 7, dtype=torch.float64, device="meta")),
    "out-x-strided": lambda: dict(u=U(), out=torch.empty(5, 6, 14, dtype=torch.float64)[..., ::2]),
    "spacing-zero": lambda: dict(u=U(), spacing=0.0),
    "spacing-negative": lambda: dict(u=U(), spacing=-1.0),
    "spacing-nan": lambda: dict(u=U(), spacing=float("nan")),
    "spacing-inf": lambda: dict(u=U(), spacing=float("inf")),
    "spacing-entry-zero": lambda: dict(u=U(), spacing=(1.0, 0.0, 1.0)),
    "spacing-entry-negative": lambda: dict(u=U(), spacing=(1.0, 1.0, -0.5)),
    "spacing-entry-nan": lambda: dict(u=U(), spacing=(float("nan"), 1.0, 1.0)),
    "spacing-entry-inf": lambda: dict(u=U(), spacing=(1.0, float("-inf"), 1.0)),
    "spacing-tiny": lambda: dict(u=U(), spacing=1e-200),  # 1/h^2 overflows: was a ZeroDivisionError
    "spacing-huge": lambda: dict(u=U(), spacing=(1.0, 1.0, 1e200)),  # 1/h^2 underflows: was all zeros
    "spacing-fp32-range": lambda: dict(u=U().float(), spacing=1e-20),  # 1e40 is past float32
    "variant-unknown": lambda: dict(u=U(), variant="fastest"),
    "variant-case": lambda: dict(u=U(), variant="Auto"),
    "variant-empty": lambda: dict(u=U(), variant=""),
}


def _call(kwargs, variant=None):
    kwargs = dict(kwargs)
    u = kwargs.pop("u")
    if variant is not None and "variant" not in kwargs:
        kwargs["variant"] = variant
    return laplacian(u, **kwargs)


@pytest.mark.parametrize("variant", ALL_VARIANTS_AND_DEFAULT)
@pytest.mark.parametrize("case", list(TYPE_ERRORS))
def test_type_errors(no_launch, case, variant):
    with pytest.raises(TypeError):
        _call(TYPE_ERRORS[case](), variant)


@pytest.mark.parametrize("variant", ALL_VARIANTS_AND_DEFAULT)
@pytest.mark.parametrize("case", list(VALUE_ERRORS))
def test_value_errors(no_launch, case, variant):
    with pytest.raises(ValueError):
        _call(VALUE_ERRORS[case](), variant)


@pytest.mark.parametrize("spacing", [(1.0, 1.0), (1.0, 1.0, 1.0, 1.0), (), [2.0]])
def test_spacing_of_wrong_length(no_launch, spacing):
    with pytest.raises((TypeError, ValueError), match=re.escape(repr(spacing))):
        laplacian(U(), spacing=spacing)


@pytest.mark.parametrize("variant", ALL_VARIANTS_AND_DEFAULT)
def test_out_is_u(no_launch, variant):
    u = U()
    with pytest.raises(ValueError, match="overlap"):
        laplacian(u, out=u, variant=variant)


@pytest.mark.parametrize("variant", ALL_VARIANTS_AND_DEFAULT)
def test_out_overlaps_u(no_launch, variant):
    big = make_field((6, 6, 7), torch.float64)
    u, out = big[:-1], big[1:]  # shifted by one plane: same shape, shared memory
    with pytest.raises(ValueError, match="overlap"):
        laplacian(u, out=out, variant=variant)
    # a view into u's padding region that shares rows with it
    big2 = make_field((5, 6, 16), torch.float64)
    with pytest.raises(ValueError, match="overlap"):
        laplacian(big2[..., :7], out=big2[..., 3:10], variant=variant)


@pytest.mark.parametrize("variant", ["auto", "baseline"])
def test_out_overlaps_u_through_another_storage(no_launch, variant):
    import numpy as np

    buf = np.random.default_rng(0).random((7, 6, 7))
    u, out = torch.from_numpy(buf[:-1]), torch.from_numpy(buf[1:])  # shifted by one plane
    assert u.data_ptr() < out.data_ptr() < u.data_ptr() + u.numel() * u.element_size()
    with pytest.raises(ValueError, match="overlap"):
        laplacian(u, out=out, variant=variant)


@pytest.mark.parametrize("variant", ["auto", "baseline", "reference"])
def test_out_with_internal_overlap(no_launch, variant):
    out = torch.zeros(1, 6, 7, dtype=torch.float64).expand(5, 6, 7)  # stride 0 along z
    with pytest.raises(ValueError):
        laplacian(U(), out=out, variant=variant)


@pytest.mark.parametrize("order", [3, 18, 0])
def test_order_error_names_the_value(no_launch, order):
    with pytest.raises(ValueError, match=rf"\b{order}\b"):
        laplacian(make_field((19, 19, 19), torch.float64), order=order)


def test_small_extent_error_names_the_shape(no_launch):
    with pytest.raises(ValueError, match=r"\(9, 9, 8\)"):
        laplacian(make_field((9, 9, 8), torch.float64), order=8)


def test_unknown_variant_names_it(no_launch):
    with pytest.raises(ValueError, match="fastest"):
        laplacian(U(), variant="fastest")


def test_validate_normalises_arguments():
    u = U()
    assert ops.validate(u, 4, 2, None, "auto") == (4, (2.0, 2.0, 2.0))
    order, spacing = ops.validate(u, 2, [0.5, 1, 2.0], None, "baseline")
    assert spacing == (0.5, 1.0, 2.0) and all(isinstance(h, float) for h in spacing)


# ----------------------------------------------------------------------------------------------
# configurations: each ladder step is what its name says
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", [2, 16])
def test_ladder_configs_carry_their_technique(dtype, order):
    cfgs = {v: ops.ladder_config(v, dtype, order) for v in LADDER}
    assert all(isinstance(c, StencilConfig) for c in cfgs.values())
    assert cfgs["baseline"].block_y == 1, "baseline is one row of points per program"
    assert cfgs["tiling"].block_y > 1, "tiling computes several rows per program"
    assert not cfgs["tiling"].ascending and cfgs["reordered"].ascending
    assert not cfgs["launch_bounds"].nontemporal and cfgs["nontemporal"].nontemporal
    assert cfgs["grid_order"].grid_order != 0 and cfgs["grid_order"].nontemporal
    assert cfgs["subdomains"].subdomain_bytes != 0 and cfgs["subdomains"].nontemporal
    small, huge = (64, 64, 64), (16, 8192, 8192)  # planes that fit in L2 three times / do not
    small_cfg = ops.auto_config(dtype, order, small, 50 * 2**20)
    huge_cfg = ops.auto_config(dtype, order, huge, 50 * 2**20)
    assert small_cfg.kernel in ("zmarch", "rows") and huge_cfg.kernel == "zmarch"
    assert small_cfg.unroll_z == (order <= 4), "short unrolled marches while the chunk's planes fit in L2"
    assert not huge_cfg.unroll_z and huge_cfg.block_z >= 32, "no cache cliff: long marches on large planes"
    with pytest.raises(ValueError):
        ops.ladder_config("auto", dtype, order)


def test_launch_rejects_unknown_kernel():
    u = U()
    with pytest.raises(ValueError, match="bogus"):
        ops.launch(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), replace(SMALL_CONFIGS["plane"], kernel="bogus"))


# ----------------------------------------------------------------------------------------------
# subprocesses: CPU without the interpreter, the pytest guard, 64-bit offsets
# ----------------------------------------------------------------------------------------------
def _run_python(code: str, *, interpret: bool, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=timeout)


CPU_NO_INTERPRETER = """
    import json, torch
    import tilecraft
    from tilecraft.ops import stencil as ops
    from tilecraft.reference.stencil import laplacian_reference
    report = {"interpreted": ops.triton_on_cpu(), "ladder": {}, "ok": {}}
    for dtype in (torch.float32, torch.float64):
        u = torch.rand(6, 9, 7, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 2 - 1
        ref = laplacian_reference(u, 4, (0.9, 1.1, 1.3))
        for v in ("auto", "reference"):
            a = tilecraft.laplacian(u, order=4, spacing=(0.9, 1.1, 1.3), variant=v)
            out = torch.full_like(u, float("nan"))
            b = tilecraft.laplacian(u, order=4, spacing=(0.9, 1.1, 1.3), variant=v, out=out)
            inner = lambda t: t[2:-2, 2:-2, 2:-2].double()
            err = max(((inner(t) - ref).norm() / ref.norm()).item() for t in (a, b))
            mask = torch.ones_like(u, dtype=torch.bool); mask[2:-2, 2:-2, 2:-2] = False
            report["ok"][f"{v}-{dtype}"] = (
                err < (1e-5 if dtype == torch.float32 else 1e-12) and a.dtype == dtype and b is out
                and bool((a[mask] == 0).all()) and bool(torch.isnan(out[mask]).all()))
        for v in ops.LADDER:
            try:
                tilecraft.laplacian(u, order=4, variant=v)
                report["ladder"][v] = "no error"
            except ValueError as exc:
                report["ladder"][v] = "ValueError" if "interpret" in str(exc).lower() else "ValueError: " + str(exc)
            except Exception as exc:
                report["ladder"][v] = type(exc).__name__ + ": " + str(exc)
    try:
        tilecraft.laplacian(torch.ones(5, 5, 5), order=3)
        report["validation"] = "no error"
    except ValueError:
        report["validation"] = "ValueError"
    print("REPORT" + json.dumps(report))
"""


def _report(proc: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT")]
    assert proc.returncode == 0 and lines, (
        f"subprocess failed (rc={proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("REPORT"):])


def test_cpu_without_interpreter():
    """Without TRITON_INTERPRET, CPU tensors run the torch path for "auto"/"reference" and a ladder
    variant is a ValueError that says how to get the interpreter."""
    report = _report(_run_python(CPU_NO_INTERPRETER, interpret=False))
    assert report["interpreted"] is False
    assert all(report["ok"].values()), report["ok"]
    assert report["ladder"] == {v: "ValueError" for v in LADDER}, report["ladder"]
    assert report["validation"] == "ValueError"


def test_pytest_refuses_to_run_without_interpreter():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO),
         str(REPO / "tests" / "analysis" / "test_fom.py")],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "TRITON_INTERPRET=1" in output and "passed" not in output, output


# 64-bit offsets. u and out are views into two float32 allocations of more than 2**32 elements
# (16 GiB each), laid out so that offsets pass 2**31:
# * "plane_stride": a plane stride just over 2**28 elements; R * stride > 2**31 already for the z
#   neighbours of the first interior plane, and the last plane starts past 2**32;
# * "row_stride": a row stride just over 2**28 (and planes interleaved within a row, as in
#   ``v.transpose(0, 1)`` of a contiguous tensor): y * stride > 2**31 for y >= 8, an offset
#   *within* one plane that does not fit in int32.
# Only the views' few thousand elements are ever written, so Linux commits a few pages of each
# allocation; the rest stays virtual. The interpreter dereferences wrapped (32-bit) offsets as raw
# addresses, which segfaults, hence the subprocess: a crash is a test failure, not a dead session.
BIG_OFFSETS = """
    import json, sys, torch
    from tilecraft.ops import stencil as ops
    from tilecraft.reference.stencil import laplacian_reference
    R, order = 8, 16
    nz, ny, nx = 2 * R + 1, 2 * R + 3, 2 * R + 5
    big = 2**28 + 64
    sz, sy = (big, 32) if LAYOUT == "plane_stride" else (32, big)
    n = (nz - 1) * sz + (ny - 1) * sy + nx
    assert n > 2**32 and max((nz - 1) * sz, (ny - 1) * sy) > 2**32 and R * big > 2**31
    assert nx <= min(sz, sy) and min(sz, sy) * max(nz, ny) <= big  # no two elements share memory
    try:
        store_u = torch.empty(n, dtype=torch.float32)
        store_out = torch.empty(n, dtype=torch.float32)
    except (RuntimeError, MemoryError) as exc:
        print("SKIP cannot reserve 2 x 16 GiB of virtual memory:", exc)
        sys.exit(77)
    u = store_u.as_strided((nz, ny, nx), (sz, sy, 1))
    out = store_out.as_strided((nz, ny, nx), (sz, sy, 1))
    u.copy_(torch.rand(nz, ny, nx, generator=torch.Generator().manual_seed(0)) * 2 - 1)
    ref = laplacian_reference(u.contiguous(), order)
    mask = torch.ones(nz, ny, nx, dtype=torch.bool); mask[R:-R, R:-R, R:-R] = False
    report = {}
    for v in ("auto",) + ops.LADDER:
        out.fill_(float("nan"))
        ops.laplacian(u, order=order, out=out, variant=v)
        inner = out[R:-R, R:-R, R:-R].double()
        report[v] = {"nan": int(torch.isnan(inner).sum()),
                     "err": float(((inner - ref).norm() / ref.norm()).item()),
                     "boundary_written": int((~torch.isnan(out[mask])).sum())}
        print(v, report[v], flush=True)
    print("REPORT" + json.dumps(report))
"""


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["plane_stride", "row_stride"])
def test_64bit_offsets(layout):
    proc = _run_python(f"LAYOUT = {layout!r}\n" + textwrap.dedent(BIG_OFFSETS), interpret=True, timeout=400)
    if proc.returncode == 77:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, (
        f"subprocess died (rc={proc.returncode}{', a signal: offsets wrapped?' if proc.returncode < 0 else ''})\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    report = _report(proc)
    assert set(report) == {"auto", *LADDER}
    for v, res in report.items():
        assert res["nan"] == 0, (v, res)
        assert res["boundary_written"] == 0, (v, res)
        assert res["err"] < REL_TOL[torch.float32], (v, res)


# ----------------------------------------------------------------------------------------------
# auto's choice depends on the grid: alignment and plane size
# ----------------------------------------------------------------------------------------------
def test_auto_routes_unaligned_high_orders_to_baseline():
    aligned = ops.auto_config(torch.float32, 6, (528, 528, 528), 50 * 2**20, vector_aligned=True)
    unaligned = ops.auto_config(torch.float32, 6, (518, 518, 518), 50 * 2**20, vector_aligned=False)
    assert aligned.kernel == "zwin"  # measured faster at fp32 order 6 (H100, round 3d)
    assert unaligned == ops.ladder_config("baseline", torch.float32, 6)
    small = ops.auto_config(torch.float32, 2, (514, 514, 514), 50 * 2**20, vector_aligned=False)
    big = ops.auto_config(torch.float32, 2, (16, 4098, 4098), 50 * 2**20, vector_aligned=False)
    assert small == ops.ladder_config("tiling", torch.float32, 2)
    assert big.kernel == "plane" and big.grid_order == 1, "unaligned large planes: banded, no cache cliff"


def test_vector_aligned_reads_shape_strides_and_pointers():
    u = make_field((5, 6, 16), torch.float32)
    assert ops.vector_aligned(u, torch.empty_like(u))
    odd = make_field((5, 6, 18), torch.float32)
    assert not ops.vector_aligned(odd, torch.empty_like(odd))
    shifted = make_field((5, 6, 17), torch.float32)[..., 1:]  # nx = 16 but rows start 4 bytes in
    assert not ops.vector_aligned(shifted, torch.empty(5, 6, 16))


@pytest.mark.parametrize("order", [2, 4, 6, 8])
def test_auto_unaligned_is_correct(order):
    r = order // 2
    shape = (2 * r + 3, 2 * r + 4, 2 * r + 7)  # nx not a multiple of 4: the baseline route
    run_poisoned(make_field(shape, torch.float32, seed=9), order, SPACING, "auto")


def test_compile_signature_carries_launch_hints():
    u = torch.empty((8, 16, 32), dtype=torch.float64, device="meta")
    cfg = ops.auto_config(torch.float64, 2, tuple(u.shape), 50 * 2**20)
    plan = ops.launch_plan(u, torch.empty_like(u), 2, (1.0, 1.0, 1.0), cfg)
    sig = ops.compile_signature(plan[0])
    assert sig["u_ptr"] == "*fp64:16" and sig["out_ptr"] == "*fp64:16"
    assert set(sig) | set(plan[0].constexprs) == set(plan[0].kernel.arg_names)
    ints = {k: v for k, v in zip(plan[0].kernel.arg_names, plan[0].args) if not isinstance(v, torch.Tensor)}
    for name, value in ints.items():
        hint = sig[name].partition(":")[2]
        assert hint == ("16" if value % 16 == 0 else "1" if value == 1 else ""), (name, value, sig[name])


# ----------------------------------------------------------------------------------------------
# torch.library registration: the ops trace under torch.compile
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["auto", "baseline", "reference"])
def test_opcheck_laplacian_ops(variant):
    u = make_field((9, 10, 16), torch.float64, seed=11)
    torch.library.opcheck(torch.ops.tilecraft.laplacian.default, (u, 4, [1.0, 0.5, 2.0], variant))
    out = poison(torch.empty_like(u))
    torch.library.opcheck(torch.ops.tilecraft.laplacian_out.default, (u, 2, [1.0, 1.0, 1.0], variant, out))


def test_compiled_function_calls_laplacian():
    u = make_field((7, 9, 12), torch.float64, seed=12)

    def f(x):
        return tilecraft.laplacian(x * 2, order=2, spacing=(1.0, 0.5, 2.0)) + 1

    got = torch.compile(f, backend="aot_eager", fullgraph=True)(u)
    ref = laplacian_reference(u * 2, 2, (1.0, 0.5, 2.0)) + 1
    assert torch.allclose(got[1:-1, 1:-1, 1:-1], ref, rtol=1e-12, atol=1e-12)
    assert torch.equal(got[0], torch.ones_like(got[0])), "boundary: zeros + 1"


def test_registered_op_validates_when_called_directly():
    with pytest.raises(ValueError, match="order"):
        torch.ops.tilecraft.laplacian(U(), 3, [1.0, 1.0, 1.0], "auto")
    with pytest.raises(ValueError, match="variant"):
        torch.ops.tilecraft.laplacian(U(), 2, [1.0, 1.0, 1.0], "fastest")
