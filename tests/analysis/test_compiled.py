"""tilecraft.analysis.compiled: cross compiles for absent GPUs, compiler aborts, occupancy models.

The cross compiles run in a child process (without TRITON_INTERPRET, which the suite sets), for
kernels in ``_compiled_kernels.py`` beside this file; that folder must be on the import path the
child inherits, which pytest's default import mode provides and the guard below makes sure of.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tilecraft.analysis.compiled import (
    AMD_CU_LIMITS,
    NVIDIA_SM_LIMITS,
    TARGETS,
    KernelResources,
    amd_unified_vgprs,
    amd_waves_per_simd,
    cross_compile,
    nvidia_resident_warps,
    parse_amdgcn,
    parse_ptxas_log,
    resources_of_launched,
)

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

KERNELS = "_compiled_kernels"
SCALE_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
DOT_SIG = {"a_ptr": "*fp64", "b_ptr": "*fp64", "c_ptr": "*fp64"}
SM90, SM80 = NVIDIA_SM_LIMITS[90], NVIDIA_SM_LIMITS[80]
CDNA3 = AMD_CU_LIMITS["gfx942"]

MEASURED = ("registers", "agprs", "sgprs", "spills", "scratch_bytes", "shared_bytes", "occupancy")


def _assert_failed(r: KernelResources) -> None:
    assert isinstance(r, KernelResources)
    assert r.error
    assert all(getattr(r, f) is None for f in MEASURED), r


# ---- cross compiles ---------------------------------------------------------------------------


def test_targets() -> None:
    from triton.backends.compiler import GPUTarget

    assert TARGETS == {"sm90": ("cuda", 90, 32), "sm80": ("cuda", 80, 32),
                       "gfx942": ("hip", "gfx942", 64), "gfx90a": ("hip", "gfx90a", 64)}
    for args in TARGETS.values():
        GPUTarget(*args)


@pytest.mark.parametrize("target", ["sm90", "sm80", "gfx942", "gfx90a"])
def test_trivial_kernel_every_target(target: str) -> None:
    r = cross_compile(KERNELS, "scale", SCALE_SIG, {"BLOCK": 1024}, target, num_warps=4)
    assert r.error is None, r.error
    assert (r.target, r.kernel, r.num_warps) == (target, "scale", 4)
    assert r.registers is not None and 0 < r.registers <= 64
    assert r.spills == 0 and r.scratch_bytes == 0 and r.shared_bytes == 0
    if target.startswith("sm"):
        assert r.occupancy_unit == "warps/SM"
        assert r.agprs is None and r.sgprs is None
        assert 0 < r.occupancy <= 64 and r.occupancy % 4 == 0
        assert r.occupancy == nvidia_resident_warps(r.registers, 0, 4, NVIDIA_SM_LIMITS[int(target[2:])])
    else:
        assert r.occupancy_unit == "waves/SIMD"
        assert r.agprs == 0 and r.sgprs is not None and r.sgprs > 0
        assert r.occupancy == 8.0  # ~10 VGPRs, no LDS: the 8-wave cap binds
    json.dumps(r.as_dict())


def test_gluon_kernel_cross_compiles_for_sm90() -> None:
    r = cross_compile(KERNELS, "gluon_smem_shift", {"x_ptr": "*fp32", "y_ptr": "*fp32"},
                      {"BLOCK": 256}, "sm90", num_warps=4)
    assert r.error is None, r.error
    assert r.kernel == "gluon_smem_shift"
    assert r.shared_bytes is not None and r.shared_bytes >= 256 * 4
    assert r.spills == 0


def test_maxnreg_forces_spills_on_sm90() -> None:
    # 4096 fp32 values over one warp: 128 live values per thread across two reductions. The ':16'
    # hints (16-byte aligned pointers) are what a launch on torch tensors compiles.
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16"}
    free = cross_compile(KERNELS, "softmax_row", sig, {"BLOCK": 4096}, "sm90", num_warps=1)
    capped = cross_compile(KERNELS, "softmax_row", sig, {"BLOCK": 4096}, "sm90", num_warps=1, maxnreg=32)
    assert free.error is None and capped.error is None, (free.error, capped.error)
    assert free.registers > 128 and free.spills == 0
    assert capped.registers <= 32
    assert capped.spills > 0 or capped.scratch_bytes > 0
    # Fewer registers per thread: more warps fit on the SM (up to the 32-block limit at 1 warp each).
    assert free.occupancy == nvidia_resident_warps(free.registers, 0, 1, SM90) < capped.occupancy == 32


def test_dtype_constexpr_and_missing_constexpr_signature() -> None:
    import triton.language as tl

    # BLOCK and DTYPE are not in the signature: constexprs fill them in.
    r = cross_compile(KERNELS, "cast", {"x_ptr": "*fp32", "y_ptr": "*fp16"},
                      {"BLOCK": 256, "DTYPE": tl.float16}, "sm80", num_warps=2)
    assert r.error is None, r.error
    assert (r.kernel, r.num_warps, r.spills) == ("cast", 2, 0)


def test_fp64_dot_on_gfx942_is_an_error_not_a_crash() -> None:
    # Triton 3.6's MFMA lowering asserts on fp64 for gfx942 (a RuntimeError when MLIR's crash
    # recovery catches the assertion, a SIGABRT otherwise): either way, a result with `error`.
    r = cross_compile(KERNELS, "dot_fp64", DOT_SIG, {"BLOCK": 32}, "gfx942")
    _assert_failed(r)
    assert (r.target, r.kernel, r.occupancy_unit) == ("gfx942", "dot_fp64", "waves/SIMD")
    assert "Assertion" in r.error or "SIGABRT" in r.error or "failed" in r.error


def test_compiler_process_abort_is_an_error() -> None:
    # Test-only hook: importing _compiled_abort_on_import calls os.abort() in the compiler process,
    # as an LLVM assertion does when nothing catches it.
    r = cross_compile("_compiled_abort_on_import", "kernel", {}, {}, "sm90")
    _assert_failed(r)
    assert "SIGABRT" in r.error


def test_compiler_process_timeout_is_an_error() -> None:
    r = cross_compile("_compiled_hang_on_import", "kernel", {}, {}, "gfx90a", timeout_s=1.0)
    _assert_failed(r)
    assert "timed out" in r.error


def test_bad_requests() -> None:
    with pytest.raises(ValueError, match="unknown target"):
        cross_compile(KERNELS, "scale", SCALE_SIG, {"BLOCK": 1024}, "sm70")
    with pytest.raises(TypeError, match="constexpr"):
        cross_compile(KERNELS, "scale", SCALE_SIG, {"BLOCK": object()}, "sm90")
    # A missing argument type is the child's finding, reported like a compile error.
    r = cross_compile(KERNELS, "scale", {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 1024}, "sm90")
    _assert_failed(r)
    assert "'n'" in r.error
    r = cross_compile(KERNELS, "scale", {**SCALE_SIG, "n": "i32:8"}, {"BLOCK": 1024}, "sm90")
    _assert_failed(r)
    assert "hint" in r.error


# ---- occupancy models, hand-computed -------------------------------------------------------------


@pytest.mark.parametrize("regs, shared, warps, limits, expected", [
    # 40 regs -> 1280 per warp; 16384 // 1280 = 12 warps per sub-partition, 48 per SM = 12 blocks.
    (40, 0, 4, SM90, 48),
    # 168 regs -> 5376 per warp; 3 per sub-partition, 12 per SM; 1 warp per block.
    (168, 0, 1, SM90, 12),
    # 32 regs -> 16 warps per sub-partition = 64 per SM, the warp limit too: 16 blocks of 4.
    (32, 16, 4, SM90, 64),
    # 51 regs round to 56 -> 1792 per warp, 9 per sub-partition = 36 warps = 9 blocks of 4;
    # shared (16384 + 1024) allows 233472 // 17408 = 13 blocks.
    (51, 16384, 4, SM90, 36),
    # 100 KB shared + 1 KB reserved: 233472 // 103424 = 2 blocks on sm90, 167936 // 103424 = 1 on sm80.
    (32, 100 * 1024, 4, SM90, 8),
    (32, 100 * 1024, 4, SM80, 4),
    # 1-warp blocks with few registers: the 32-block limit binds before the 64-warp limit.
    (16, 0, 1, SM90, 32),
    # 8 warps of 255 regs: 8160 -> 8192 per warp, 2 per sub-partition = 8 warps = 1 block.
    (255, 0, 8, SM90, 8),
    # 16 warps of 255 regs: 16 * 8192 > 65536, the block cannot launch.
    (255, 0, 16, SM90, 0),
    # shared memory over the per-block maximum (227 KB on sm90, 163 KB on sm80).
    (32, 200 * 1024, 4, SM90, 4),
    (32, 200 * 1024, 4, SM80, 0),
    # no registers reported (empty kernel): warps limit only.
    (0, 0, 4, SM80, 64),
])
def test_nvidia_resident_warps(regs: int, shared: int, warps: int, limits, expected: int) -> None:
    assert nvidia_resident_warps(regs, shared, warps, limits) == expected


def test_amd_unified_vgprs() -> None:
    assert amd_unified_vgprs(103, 0) == 103
    assert amd_unified_vgprs(256, 165) == 421  # as LLVM's "; TotalNumVgprs: 421"
    assert amd_unified_vgprs(201, 64) == 268  # 201 aligned to 204, then 64 AGPRs
    assert amd_unified_vgprs(0, 16) == 16


@pytest.mark.parametrize("vgprs, agprs, sgprs, lds, warps, expected", [
    (10, 0, 19, 0, 4, 8.0),  # 512 // 16 = 32, capped at 8
    (103, 0, 16, 0, 4, 4.0),  # 104 per lane: 4 per SIMD
    (103, 0, 16, 0, 1, 4.0),  # 1-wave workgroups: 16 of them on the CU
    (256, 165, 16, 0, 1, 1.0),  # 424 of 512
    (201, 64, 20, 16384, 4, 1.0),  # 268 -> 272: 1 per SIMD
    (71, 16, 20, 4096, 4, 5.0),  # 88: 5 per SIMD; LDS allows 16 workgroups
    # 144 VGPRs allow 3 waves per SIMD, but a workgroup of 8 puts 2 on each SIMD: 1 workgroup.
    (144, 0, 20, 16384, 8, 2.0),
    (32, 0, 20, 40 * 1024, 4, 1.0),  # LDS: one 40 KB workgroup per 64 KB CU
    (32, 0, 20, 40 * 1024, 1, 0.25),  # ... of a single wave: a quarter wave per SIMD
    (32, 0, 20, 20 * 1024, 2, 1.5),  # 3 workgroups of 2 waves over 4 SIMDs
    (16, 0, 20, 0, 2, 8.0),  # 16 workgroups of 2 (barrier limit) = 32 waves = 8 per SIMD
    (16, 0, 106, 0, 4, 7.0),  # more than 100 SGPRs: 7 waves
    (16, 0, 20, 80 * 1024, 4, 0.0),  # more LDS than the CU has
    (300, 240, 20, 0, 4, 0.0),  # more VGPRs than the file has
])
def test_amd_waves_per_simd(vgprs: int, agprs: int, sgprs: int, lds: int, warps: int, expected: float) -> None:
    assert amd_waves_per_simd(vgprs, agprs, sgprs, lds, warps, CDNA3) == expected


# ---- parsers and launched kernels ----------------------------------------------------------------

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'softmax_row' for 'sm_90a'
ptxas info    : Function properties for softmax_row
    1464 bytes stack frame, 2844 bytes spill stores, 3440 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1464 bytes cumulative stack size
ptxas info    : Compile time = 103.415 ms
"""

# Excerpt of the AMDGCN Triton 3.6 emits for gfx942 (a 64x64x64 fp16 matmul, num_warps=1).
AMDGCN = """\
\t\t.amdhsa_private_segment_fixed_size 0
; Kernel info:
; codeLenInByte = 5000
; TotalNumSgprs: 106
; NumVgprs: 159
; NumAgprs: 64
; TotalNumVgprs: 224
; ScratchSize: 0
; LDSByteSize: 0 bytes/workgroup (compile time only)
; Occupancy: 2
amdhsa.kernels:
  - .agpr_count:     64
    .private_segment_fixed_size: 0
    .sgpr_count:     106
    .sgpr_spill_count: 40
    .vgpr_count:     224
    .vgpr_spill_count: 0
"""


def test_parse_ptxas_log() -> None:
    assert parse_ptxas_log(PTXAS_LOG, "softmax_row") == {
        "registers": 32, "stack_bytes": 1464, "spill_stores": 2844 + 8, "spill_loads": 3440 + 8}
    with pytest.raises(ValueError):
        parse_ptxas_log("ptxas info    : 0 bytes gmem\n")


def test_parse_amdgcn() -> None:
    assert parse_amdgcn(AMDGCN) == {"vgprs": 159, "agprs": 64, "sgprs": 106, "vgpr_spills": 0,
                                    "sgpr_spills": 40, "scratch_bytes": 0, "lds_bytes": 0, "occupancy": 2}
    # The compiler's own occupancy agrees with the model here (224 unified VGPRs -> 2 waves).
    assert amd_waves_per_simd(159, 64, 106, 0, 4) == 2.0


def _launched(backend: str, arch, n_regs: int, n_spills: int, shared: int, asm: dict | None = None):
    """A stand-in for the CompiledKernel a launch returns (there is no GPU here)."""
    from triton.backends.compiler import GPUTarget

    meta = SimpleNamespace(name="k", shared=shared, target=GPUTarget(backend, arch, 32 if backend == "cuda" else 64))
    return SimpleNamespace(n_regs=n_regs, n_spills=n_spills, metadata=meta, asm=asm or {})


def test_resources_of_launched_nvidia() -> None:
    r = resources_of_launched(_launched("cuda", 90, 40, 0, 0), num_warps=4)
    assert r == KernelResources(target="device", kernel="k", num_warps=4, registers=40, agprs=None, sgprs=None,
                                spills=0, scratch_bytes=0, shared_bytes=0, occupancy=48.0,
                                occupancy_unit="warps/SM")
    # Triton's n_spills is the local memory in 4-byte words.
    r = resources_of_launched(_launched("cuda", 80, 32, 366, 100 * 1024), num_warps=4)
    assert (r.spills, r.scratch_bytes, r.occupancy) == (366, 1464, 4.0)
    # An architecture without a limits table: everything but the occupancy.
    r = resources_of_launched(_launched("cuda", 120, 32, 0, 0), num_warps=4)
    assert r.registers == 32 and r.occupancy is None and r.error is None


def test_resources_of_launched_amd_reads_the_amdgcn() -> None:
    r = resources_of_launched(_launched("hip", "gfx942", 224, 0, 8192, {"amdgcn": AMDGCN}), num_warps=1)
    assert (r.registers, r.agprs, r.sgprs, r.spills, r.scratch_bytes, r.shared_bytes) == (159, 64, 106, 40, 0, 8192)
    assert r.occupancy == 2.0 and r.occupancy_unit == "waves/SIMD"
    # Without the assembly: the driver's numbers.
    r = resources_of_launched(_launched("hip", "gfx90a", 96, 0, 0), num_warps=4)
    assert (r.registers, r.agprs, r.spills, r.occupancy) == (96, None, 0, 5.0)
