"""Cross-compiled for sm90 (no GPU needed): the marching psi kernel keeps every plane access of its
loop 128-bit and does not spill, for each axis at the GPU default's tiles."""
import pytest
import triton
import triton.language as tl

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops.wave import PSI_TILES


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_psi_march_kernel_is_vectorized_without_spills(axis):
    by, bx, bz, warps = PSI_TILES[axis]
    sig = {n: "*fp32:16" for n in ("p_ptr", "psi_ptr", "psi_out_ptr", "a_ptr", "b_ptr", "d_ptr")}
    sig["box_ptr"] = "*i64:16"
    sig.update({n: "i32" for n in ("nx_s", "s_z_s", "s_y_s", "t0_s", "t1_s", "xe_s")})
    res = cross_compile("tilecraft.kernels.wave", "cpml_psi_march_kernel", sig,
                        dict(AXIS=axis, R=4, BLOCK_Y=by, BLOCK_X=bx, BLOCK_Z=bz, VEC=4, SCALE=4, NB=2), "sm90",
                        num_warps=warps)
    if res.error and "ptxas" in res.error:
        pytest.skip(res.error)
    assert res.error is None, res.error
    assert not res.spills and res.registers <= 64
    census = res.census
    # the plane loop: 2R p tiles (or 2 R/VEC + 1 shifted tiles along x) and psi_old, one psi_new store
    want = 2 * 4 + 1 if axis < 2 else 3 + 1
    assert census.get("sass_global_load_128b", 0) >= want and census.get("sass_global_store_128b", 0) == 1
    assert not any(k.startswith("sass_global_store") and not k.endswith("128b") for k in census)


@triton.jit
def _defaults_probe(x_ptr, n, A: tl.constexpr, B: tl.constexpr = 3):
    tl.store(x_ptr + tl.arange(0, A), n + B)


def test_cached_launches_take_the_signature_defaults():
    """The GPU launch path (``ops.wave._launch``) calls a compiled kernel's launcher once it was launched; a constexpr
    the call leaves to its default in the signature must then come from that default, not be missing (2026-11-28:
    every CPML step on a GPU raised KeyError for ``wave_layer_kernel``'s then PSI_Z, a constexpr with a default)."""
    from tilecraft.ops import wave as ow

    assert ow.launch_values(_defaults_probe, ["x", 5], {"A": 16}, 2) == ["x", 5, 16, 3]
    assert ow.launch_values(_defaults_probe, ["x", 5], {"A": 16, "B": 7}, 2) == ["x", 5, 16, 7]
    with pytest.raises(TypeError, match="'A'"):
        ow.launch_values(_defaults_probe, ["x", 5], {"B": 7}, 2)
