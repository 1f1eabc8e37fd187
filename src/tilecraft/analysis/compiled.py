"""Hardware resources of a compiled Triton kernel: registers, spills, scratch, shared memory, occupancy.

Two ways in:

* :func:`resources_of_launched` reads the object a Triton launch returns on a real GPU
  (``kernel[grid](...)`` returns a ``CompiledKernel`` with ``n_regs``, ``n_spills``, ``metadata``).
* :func:`cross_compile` compiles a ``@triton.jit`` function for a GPU that need not be present
  (``"sm90"``, ``"sm80"``, ``"gfx942"``, ``"gfx90a"``; see :data:`TARGETS`). The compile runs in a
  child Python process, because a compiler abort (an LLVM assertion, a segfault) takes the whole
  process down with it; here it becomes ``KernelResources(error=...)``. The child prints a JSON line
  that the parent parses.

Where the numbers come from in a cross compile:

* NVIDIA: Triton's PTX is assembled once more by the ``ptxas`` Triton ships (the one Triton itself
  uses, with the same ``--gpu-name`` taken from the PTX's ``.target`` line, ``-lineinfo`` and
  ``--fmad`` setting) with ``-v``; its log gives registers per thread, the stack frame and the spill
  store/load bytes. ``maxnreg`` needs no ptxas flag: Triton writes it into the PTX as ``.maxnreg``.
* AMD: the AMDGCN assembly carries the compiler's own resource report (``; NumVgprs:``,
  ``; NumAgprs:``, ``; TotalNumSgprs:``, ``; ScratchSize:`` comment lines and the
  ``.vgpr_spill_count`` / ``.sgpr_spill_count`` entries of the code-object metadata).
* Shared memory / LDS per program is Triton's ``metadata.shared`` on both vendors.

Occupancy is computed here from those numbers, by the small functions :func:`nvidia_resident_warps`
and :func:`amd_waves_per_simd` (formulas in their docstrings), with the per-architecture limits in
:data:`NVIDIA_SM_LIMITS` and :data:`AMD_CU_LIMITS`.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "AMD_CU_LIMITS",
    "NVIDIA_SM_LIMITS",
    "TARGETS",
    "AMDCULimits",
    "KernelResources",
    "NvidiaSMLimits",
    "amd_unified_vgprs",
    "amd_waves_per_simd",
    "amd_waves_per_simd_by_registers",
    "amd_workgroups_per_cu",
    "census_amdgcn",
    "census_ptx",
    "census_sass",
    "census_summary",
    "check_function",
    "cross_compile",
    "nvidia_blocks_per_sm",
    "nvidia_resident_warps",
    "parse_amdgcn",
    "parse_ptxas_log",
    "resources_of_launched",
]

#: Cross-compile targets: name -> arguments of ``triton.backends.compiler.GPUTarget``
#: (backend, arch, warp size).
TARGETS: dict[str, tuple[str, int | str, int]] = {
    "sm90": ("cuda", 90, 32),
    "sm80": ("cuda", 80, 32),
    "gfx942": ("hip", "gfx942", 64),
    "gfx90a": ("hip", "gfx90a", 64),
}

WARPS_PER_SM = "warps/SM"
WAVES_PER_SIMD = "waves/SIMD"


@dataclass(frozen=True)
class KernelResources:
    """Hardware resources of one compiled kernel (see the module docstring for the sources).

    ``target`` is a :data:`TARGETS` key, or ``"device"`` for a launched kernel. ``registers`` is
    registers per thread on NVIDIA and architectural VGPRs per lane on AMD (AGPRs are ``agprs``).
    ``spills`` is, on NVIDIA, ptxas' spill store + spill load bytes per thread (for a launched
    kernel: Triton's ``n_spills``, the local-memory size in 4-byte words); on AMD the spilled
    VGPR + SGPR count. ``scratch_bytes`` is the per-thread local memory (stack frame) on NVIDIA, the
    per-lane private segment on AMD. ``shared_bytes`` is shared memory / LDS per program.
    ``occupancy`` is resident warps per SM on NVIDIA, waves per SIMD on AMD (``occupancy_unit``).
    When compiling failed or the compiler aborted, ``error`` says why and the measurement fields
    are ``None``. ``census`` (cross compiles only) counts instructions in the assembly: see
    :func:`census_ptx`, :func:`census_sass`, :func:`census_amdgcn` for its keys.
    """

    target: str
    kernel: str
    num_warps: int
    registers: int | None
    agprs: int | None
    sgprs: int | None
    spills: int | None
    scratch_bytes: int | None
    shared_bytes: int | None
    occupancy: float | None
    occupancy_unit: str
    error: str | None = None
    census: dict[str, int] | None = None

    def as_dict(self) -> dict:
        """The fields as a plain dict (JSON-serialisable)."""
        return asdict(self)


# --------------------------------------------------------------------------------------------
# Occupancy models
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaSMLimits:
    """Per-SM limits of an NVIDIA architecture, as in CUDA's occupancy calculator (cuda_occupancy.h)
    and the programming guide's table of technical specifications per compute capability."""

    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks (CTAs) per SM
    smem_per_sm: int  # shared memory per SM at the largest carveout, bytes
    smem_per_block: int  # largest (opt-in) shared memory one block may use, bytes
    regs_per_sm: int = 65536
    sub_partitions: int = 4  # register file split over 4 SM sub-partitions
    reg_alloc_unit: int = 256  # registers are allocated per warp in units of 256
    max_regs_per_thread: int = 255
    smem_reserved_per_block: int = 1024  # the driver reserves 1 KB per block (sm80 and later)
    smem_alloc_unit: int = 128
    max_threads_per_block: int = 1024
    warp_size: int = 32


#: NVIDIA limits by compute capability (major*10+minor).
NVIDIA_SM_LIMITS: dict[int, NvidiaSMLimits] = {
    80: NvidiaSMLimits(max_warps=64, max_blocks=32, smem_per_sm=164 * 1024, smem_per_block=163 * 1024),
    86: NvidiaSMLimits(max_warps=48, max_blocks=16, smem_per_sm=100 * 1024, smem_per_block=99 * 1024),
    89: NvidiaSMLimits(max_warps=48, max_blocks=24, smem_per_sm=100 * 1024, smem_per_block=99 * 1024),
    90: NvidiaSMLimits(max_warps=64, max_blocks=32, smem_per_sm=228 * 1024, smem_per_block=227 * 1024),
}


@dataclass(frozen=True)
class AMDCULimits:
    """Per-CU limits of an AMD CDNA architecture (as LLVM's AMDGPU backend models them)."""

    vgprs_per_simd_lane: int = 512  # unified arch-VGPR + AGPR file per lane (gfx90a, gfx942)
    vgpr_alloc_unit: int = 8
    agpr_offset_align: int = 4  # AGPRs start at a multiple of 4 after the arch VGPRs
    max_waves_per_simd: int = 8
    simds_per_cu: int = 4
    lds_per_cu: int = 64 * 1024
    max_workgroups_per_cu_with_barrier: int = 16  # barrier resources, for workgroups of >1 wave
    max_threads_per_workgroup: int = 1024
    wave_size: int = 64


#: AMD limits by gfx name.
AMD_CU_LIMITS: dict[str, AMDCULimits] = {
    "gfx90a": AMDCULimits(),
    "gfx942": AMDCULimits(),
}


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def nvidia_blocks_per_sm(registers: int, shared_bytes: int, num_warps: int,
                         limits: NvidiaSMLimits) -> int:
    """Resident blocks per SM: the least of four limits (CUDA occupancy calculator).

    * warps: ``max_warps // num_warps``;
    * blocks: ``max_blocks``;
    * registers: a warp holds ``round_up(registers * 32, 256)`` registers, allocated inside one of
      4 sub-partitions of ``regs_per_sm / 4``; warps per SM = ``4 * ((regs_per_sm/4) // per_warp)``,
      blocks = that ``// num_warps`` (0 when one block cannot get its registers);
    * shared memory: a block takes ``round_up(shared_bytes + 1024 reserved, 128)`` bytes of the
      ``smem_per_sm`` (largest carveout); 0 when that is over the per-block maximum.
    """
    if num_warps <= 0 or num_warps * limits.warp_size > limits.max_threads_per_block:
        return 0
    by_warps = limits.max_warps // num_warps
    if registers > limits.max_regs_per_thread:
        by_regs = 0
    elif registers <= 0:
        by_regs = by_warps
    else:
        per_warp = _round_up(registers * limits.warp_size, limits.reg_alloc_unit)
        # The hardware's per-block check assumes the block's warps are spread over all partitions.
        if per_warp * _round_up(num_warps, limits.sub_partitions) > limits.regs_per_sm:
            by_regs = 0
        else:
            per_partition = (limits.regs_per_sm // limits.sub_partitions) // per_warp
            by_regs = per_partition * limits.sub_partitions // num_warps
    smem = _round_up(max(shared_bytes, 0) + limits.smem_reserved_per_block, limits.smem_alloc_unit)
    if smem > limits.smem_per_block + limits.smem_reserved_per_block:
        by_smem = 0
    else:
        by_smem = limits.smem_per_sm // smem
    return min(by_warps, limits.max_blocks, by_regs, by_smem)


def nvidia_resident_warps(registers: int, shared_bytes: int, num_warps: int,
                          limits: NvidiaSMLimits) -> int:
    """Resident warps per SM: :func:`nvidia_blocks_per_sm` blocks times ``num_warps``.

    Example (sm90, 4 warps, 40 registers, no shared memory): a warp takes 1280 registers, a
    sub-partition of 16384 holds 12 such warps, 48 per SM = 12 blocks; the warp limit allows 16
    blocks, shared memory 228, the block limit 32: 12 blocks, 48 warps/SM.
    """
    return nvidia_blocks_per_sm(registers, shared_bytes, num_warps, limits) * num_warps


def amd_unified_vgprs(vgprs: int, agprs: int, limits: AMDCULimits = AMDCULimits()) -> int:
    """VGPRs a lane takes from the unified register file of gfx90a/gfx942: the architectural VGPRs,
    aligned up to 4, then the AGPRs (just the VGPRs when no AGPR is used), as LLVM counts them."""
    if agprs <= 0:
        return max(vgprs, 0)
    return _round_up(max(vgprs, 0), limits.agpr_offset_align) + agprs


def amd_waves_per_simd_by_registers(vgprs: int, agprs: int, sgprs: int | None,
                                    limits: AMDCULimits = AMDCULimits()) -> int:
    """Waves one SIMD can hold given the register use of each wave.

    VGPRs: ``vgprs_per_simd_lane // round_up(unified, 8)`` (unified = :func:`amd_unified_vgprs`),
    0 if over the file, capped at ``max_waves_per_simd``. SGPRs (GFX9 family): up to 80 -> 10 waves,
    88 -> 9, 100 -> 8, more -> 7, also capped at ``max_waves_per_simd``.
    """
    unified = amd_unified_vgprs(vgprs, agprs, limits)
    if unified > limits.vgprs_per_simd_lane:
        return 0
    by_vgpr = limits.vgprs_per_simd_lane // max(_round_up(unified, limits.vgpr_alloc_unit),
                                                 limits.vgpr_alloc_unit)
    if sgprs is None:
        by_sgpr = limits.max_waves_per_simd
    else:
        by_sgpr = 10 if sgprs <= 80 else 9 if sgprs <= 88 else 8 if sgprs <= 100 else 7
    return min(by_vgpr, by_sgpr, limits.max_waves_per_simd)


def amd_workgroups_per_cu(vgprs: int, agprs: int, sgprs: int | None, lds_bytes: int, num_warps: int,
                          limits: AMDCULimits = AMDCULimits()) -> int:
    """Workgroups (programs) of ``num_warps`` waves resident on one CU: the least of

    * registers: the CU holds ``simds_per_cu * waves_per_simd_by_registers`` waves; a workgroup's
      waves are dealt out over the 4 SIMDs, so ``(4 * per_simd) // num_warps`` workgroups fit
      (exact for the power-of-two ``num_warps`` Triton uses);
    * LDS: ``lds_per_cu // lds_bytes`` (0 when one workgroup needs more than the CU has);
    * barriers: 16 workgroups of more than one wave.
    """
    if num_warps <= 0 or num_warps * limits.wave_size > limits.max_threads_per_workgroup:
        return 0
    per_simd = amd_waves_per_simd_by_registers(vgprs, agprs, sgprs, limits)
    by_regs = limits.simds_per_cu * per_simd // num_warps
    by_lds = limits.lds_per_cu // lds_bytes if lds_bytes > 0 else by_regs
    by_barrier = limits.max_workgroups_per_cu_with_barrier if num_warps > 1 else by_regs
    return min(by_regs, by_lds, by_barrier)


def amd_waves_per_simd(vgprs: int, agprs: int, sgprs: int | None, lds_bytes: int, num_warps: int,
                       limits: AMDCULimits = AMDCULimits()) -> float:
    """Occupancy in waves per SIMD: resident workgroups (:func:`amd_workgroups_per_cu`) times
    ``num_warps`` waves, spread over the CU's 4 SIMDs, at most ``max_waves_per_simd``.

    It can be fractional (1 workgroup of 1 wave is 0.25 waves/SIMD). For ``num_warps`` = 4 it is
    the "; Occupancy:" the AMDGPU backend prints; for wider workgroups it can be lower, since only
    whole workgroups become resident. Example (gfx942, 4 waves, 103 VGPRs, no AGPR, 16 SGPRs,
    no LDS): 104 VGPRs per lane, 512 // 104 = 4 waves per SIMD, 16 waves per CU = 4 workgroups,
    4 waves/SIMD.
    """
    wgs = amd_workgroups_per_cu(vgprs, agprs, sgprs, lds_bytes, num_warps, limits)
    return min(float(limits.max_waves_per_simd), wgs * num_warps / limits.simds_per_cu)


def _occupancy(backend: str, arch: int | str | None, num_warps: int, registers: int | None,
               agprs: int | None, sgprs: int | None, shared_bytes: int | None) -> float | None:
    """Occupancy for a target, or None when the architecture or a needed number is unknown."""
    if registers is None or arch is None:
        return None
    shared = shared_bytes or 0
    if backend == "cuda":
        limits = NVIDIA_SM_LIMITS.get(int(arch))
        if limits is None:
            return None
        return float(nvidia_resident_warps(registers, shared, num_warps, limits))
    if backend == "hip":
        amd = AMD_CU_LIMITS.get(str(arch).split(":")[0])
        if amd is None:
            return None
        return amd_waves_per_simd(registers, agprs or 0, sgprs, shared, num_warps, amd)
    return None


def _unit(backend: str) -> str:
    return WAVES_PER_SIMD if backend == "hip" else WARPS_PER_SM


# --------------------------------------------------------------------------------------------
# Parsers of the compilers' reports
# --------------------------------------------------------------------------------------------

_PTXAS_FUNC = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")


def parse_ptxas_log(log: str, kernel: str | None = None) -> dict[str, int | None]:
    """Registers, stack frame and spill bytes of an entry function from a ``ptxas -v`` log.

    Returns ``{"registers", "stack_bytes", "spill_stores", "spill_loads"}``. ``kernel`` picks the
    entry function (default: the first one). Spills of non-entry functions (``.func``) are added
    to the kernel's, since a spill anywhere costs the kernel.
    """
    entries: dict[str, dict[str, int | None]] = {}
    other_spill_stores = other_spill_loads = 0
    current_entry: str | None = None
    props_for: str | None = None
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current_entry = m.group(1)
            entries.setdefault(current_entry, {"registers": None, "stack_bytes": None,
                                               "spill_stores": None, "spill_loads": None})
        elif m := _PTXAS_FUNC.search(line):
            props_for = m.group(1)
        elif m := _PTXAS_FRAME.search(line):
            stack, stores, loads = (int(g) for g in m.groups())
            if props_for is not None and props_for in entries:
                entries[props_for].update(stack_bytes=stack, spill_stores=stores, spill_loads=loads)
            else:
                other_spill_stores += stores
                other_spill_loads += loads
            props_for = None
        elif (m := _PTXAS_USED.search(line)) and current_entry is not None:
            entries[current_entry]["registers"] = int(m.group(1))
    if not entries:
        raise ValueError(f"no entry function in the ptxas log:\n{log}")
    name = kernel if kernel in entries else next(iter(entries))
    out = dict(entries[name])
    if out["spill_stores"] is not None:
        out["spill_stores"] += other_spill_stores
        out["spill_loads"] += other_spill_loads
    return out


def _amdgcn_value(text: str, patterns: tuple[str, ...]) -> int | None:
    for pattern in patterns:
        if m := re.search(pattern, text, re.MULTILINE):
            return int(m.group(1))
    return None


def parse_amdgcn(text: str) -> dict[str, int | None]:
    """Resource figures from AMDGCN assembly as LLVM prints it (one kernel per Triton module).

    Returns ``{"vgprs", "agprs", "sgprs", "vgpr_spills", "sgpr_spills", "scratch_bytes",
    "lds_bytes", "occupancy"}`` from the ``; Kernel info:`` comments (``NumVgprs`` = architectural
    VGPRs, ``NumAgprs``, ``TotalNumSgprs``, ``ScratchSize``, ``LDSByteSize``, ``Occupancy``: the
    compiler's own waves/SIMD figure) and the code-object metadata (``.vgpr_spill_count``,
    ``.sgpr_spill_count``; ``.agpr_count``, ``.sgpr_count``, ``.private_segment_fixed_size`` as
    fallbacks).
    """
    return {
        "vgprs": _amdgcn_value(text, (r"^\s*;\s*NumVgprs:\s*(\d+)",)),
        "agprs": _amdgcn_value(text, (r"^\s*;\s*NumAgprs:\s*(\d+)", r"^\s*-?\s*\.agpr_count:\s*(\d+)")),
        "sgprs": _amdgcn_value(text, (r"^\s*;\s*TotalNumSgprs:\s*(\d+)", r"^\s*-?\s*\.sgpr_count:\s*(\d+)")),
        "vgpr_spills": _amdgcn_value(text, (r"^\s*-?\s*\.vgpr_spill_count:\s*(\d+)",)),
        "sgpr_spills": _amdgcn_value(text, (r"^\s*-?\s*\.sgpr_spill_count:\s*(\d+)",)),
        "scratch_bytes": _amdgcn_value(text, (r"^\s*;\s*ScratchSize:\s*(\d+)",
                                              r"^\s*-?\s*\.private_segment_fixed_size:\s*(\d+)")),
        "lds_bytes": _amdgcn_value(text, (r"^\s*;\s*LDSByteSize:\s*(\d+)",
                                          r"^\s*-?\s*\.group_segment_fixed_size:\s*(\d+)")),
        "occupancy": _amdgcn_value(text, (r"^\s*;\s*Occupancy:\s*(\d+)",)),
    }


def _amdgcn_report(text: str) -> str:
    """The lines of AMDGCN assembly :func:`parse_amdgcn` reads (comments and metadata), to keep
    what travels from the child small."""
    keep = re.compile(r"^\s*;\s*\w[\w ]*:|spill_count|_count:|segment_fixed_size")
    return "\n".join(line for line in text.splitlines() if keep.search(line))


# --------------------------------------------------------------------------------------------
# Instruction census of the assembly
# --------------------------------------------------------------------------------------------
#
# Static counts (instructions in the text, not executed instructions: a load inside a loop counts
# once), under keys shared by both vendors so that a table can put them side by side:
#
#   matrix:<mnemonic>                      matrix instructions by name (shape and types are in it)
#   global_load_<bits>b, global_store_<bits>b   global-memory accesses by width per thread/lane
#   global_load_nt, global_store_nt        of those, the streaming / nontemporal ones
#   global_load_cg                         of those, the .cg ones (cached in L2, not L1)
#   shared_load_<bits>b, shared_store_<bits>b   shared memory (NVIDIA) / LDS (AMD) by width
#   ldmatrix, stmatrix, cp_async_<bits>b, tma   NVIDIA shared-memory movers (PTX)
#   bar_sync, bar_arrive                   NVIDIA CTA / named barriers (PTX ``bar``/``barrier`` .sync, .arrive;
#                                          not mbarriers)
#   buffer_load, buffer_store              AMD buffer instructions (also counted in global_*)
#   scratch_load, scratch_store            AMD scratch (private memory) accesses
#   sass:<opcode>, sass_<...>              the same questions asked of the SASS (NVIDIA)

_PTX_LINE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)\s*(.*)$")
_PTX_BITS = re.compile(r"\.[bfsu](\d+)(?:x\d+)?$")


def _bump(census: dict[str, int], key: str, n: int = 1) -> None:
    census[key] = census.get(key, 0) + n


def _ptx_width(mnemonic: str) -> int | None:
    parts = mnemonic.split(".")
    bits = None
    for part in reversed(parts):
        if m := re.fullmatch(r"[bfsu](\d+)", part):
            bits = int(m.group(1))
            break
    if bits is None:
        return None
    vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d+", p)), 1)
    return bits * vec


def _instructions(text: str, comment: str, pattern: re.Pattern):
    """(mnemonic, operands) of each instruction line of an assembly listing, comments removed."""
    for raw in text.splitlines():
        m = pattern.match(raw.split(comment, 1)[0])
        if m:
            yield m.group(1), m.group(2)


def census_ptx(text: str) -> dict[str, int]:
    """Instruction census of PTX (see the key list above this function).

    ``mma.*`` and ``wgmma.mma_async.*`` are matrix instructions (``wgmma.fence`` / ``commit_group``
    / ``wait_group`` are not counted); ``ld.global`` / ``st.global`` widths are the element bits
    times the vector length (``ld.global.v4.b32`` = 128 bits); nontemporal are the ``.cs``, ``.lu``,
    ``.L1::no_allocate`` and ``evict_first`` forms (``*_nt``), ``.cg`` (cached in L2 only) ``*_cg``; ``ld.shared`` / ``st.shared`` by width,
    ``ldmatrix`` / ``stmatrix``, ``cp.async`` by its copy size, ``cp.async.bulk`` (TMA) as ``tma``,
    CTA and named barriers (``bar.sync`` / ``barrier.sync``, ``bar.arrive``; mbarriers not) as ``bar_sync`` /
    ``bar_arrive``, warp votes (``vote.*``) as ``vote``.
    """
    census: dict[str, int] = {}
    for op, rest in _instructions(text, "//", _PTX_LINE):
        parts = op.split(".")
        if parts[0] == "mma" or op.startswith("wgmma.mma_async"):
            _bump(census, "matrix:" + op)
        elif parts[0] in ("ld", "st") and len(parts) > 1 and parts[1] in ("global", "shared", "shared::cta",
                                                                         "shared::cluster"):
            kind = ("global_" if parts[1] == "global" else "shared_") + ("load" if parts[0] == "ld" else "store")
            width = _ptx_width(op)
            _bump(census, f"{kind}_{width}b" if width else kind)
            if parts[1] == "global" and ({"cs", "lu", "L1::no_allocate"} & set(parts) or "evict_first" in op):
                _bump(census, kind + "_nt")
            if parts[1] == "global" and "cg" in parts:
                _bump(census, kind + "_cg")
        elif parts[0] in ("ldmatrix", "stmatrix"):
            _bump(census, parts[0])
        elif op.startswith("cp.async.bulk"):
            if "tensor" in parts or "global" in op:
                _bump(census, "tma")
        elif parts[0] in ("bar", "barrier") and len(parts) > 1 and parts[1] in ("sync", "arrive"):
            _bump(census, f"bar_{parts[1]}")
        elif parts[0] == "vote":
            _bump(census, "vote")
        elif op.startswith("cp.async.c"):  # cp.async.ca / .cg: [dst], [src], bytes
            # the size in decimal or hex (Triton writes ``0x10``)
            size = re.match(r"\[[^\]]*\]\s*,\s*\[[^\]]*\]\s*,\s*(0x[0-9a-fA-F]+|\d+)", rest)
            _bump(census, f"cp_async_{int(size.group(1), 0) * 8}b" if size else "cp_async")
    return census


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")
_SASS_MATRIX = ("HMMA", "HGMMA", "DMMA", "QGMMA", "IMMA", "IGMMA", "BMMA", "BGMMA", "OMMA", "UTCHMMA",
                "UTCQMMA", "UTCIMMA")


def _sass_width(parts: list[str]) -> int:
    for part in reversed(parts[1:]):
        if part in ("8", "16", "32", "64", "128"):
            return int(part)
        if part in ("U8", "S8"):
            return 8
        if part in ("U16", "S16"):
            return 16
    return 32


def census_sass(text: str) -> dict[str, int]:
    """Instruction census of ``cuobjdump --dump-sass`` output, under ``sass:`` / ``sass_`` keys:
    matrix instructions by full opcode (``sass:HGMMA.64x64x16.F32``, ``sass:HMMA.16816.F32``,
    ``sass:DMMA.8x8x4``), ``LDG``/``STG`` by width (``sass_global_load_128b``), evict-first /
    no-allocate (``.EF`` / ``.NA``) ones as ``sass_global_*_nt``, ``LDS``/``STS`` by width,
    ``LDSM``, ``LDGSTS`` (cp.async), ``UTMALDG``/``UTMASTG``/``UTMAREDG`` (TMA loads, stores, reductions) and ``CCTL`` (cache control:
    ``prefetch.global.L1`` becomes ``CCTL.E.PF1``) and ``BAR`` (CTA barriers)."""
    census: dict[str, int] = {}
    for line in text.splitlines():
        m = _SASS_LINE.search(line)
        if not m:
            continue
        op = m.group(1)
        parts = op.split(".")
        base = parts[0]
        if base in _SASS_MATRIX:
            _bump(census, "sass:" + op)
        elif base in ("LDG", "STG"):
            kind = "sass_global_" + ("load" if base == "LDG" else "store")
            _bump(census, f"{kind}_{_sass_width(parts)}b")
            if "EF" in parts or "NA" in parts:
                _bump(census, kind + "_nt")
        elif base in ("LDS", "STS"):
            kind = "sass_shared_" + ("load" if base == "LDS" else "store")
            _bump(census, f"{kind}_{_sass_width(parts)}b")
        elif base in ("LDSM", "STSM", "LDGSTS", "UTMALDG", "UTMASTG", "UTMAREDG", "CCTL", "BAR"):
            _bump(census, "sass:" + base)
    return census


_AMD_LINE = re.compile(r"^\s+([a-z][a-z0-9_]*)\b(.*)$")
_AMD_WIDTH = {"dword": 32, "dwordx2": 64, "dwordx3": 96, "dwordx4": 128, "ubyte": 8, "sbyte": 8, "byte": 8,
              "ushort": 16, "sshort": 16, "short": 16}


def _amd_mem_width(suffix: str) -> int | None:
    suffix = re.sub(r"_d16(_hi)?$", "", suffix)
    if suffix in _AMD_WIDTH:
        return _AMD_WIDTH[suffix]
    if m := re.fullmatch(r"[biu](\d+)", suffix):
        return int(m.group(1))
    return None


def census_amdgcn(text: str) -> dict[str, int]:
    """Instruction census of AMDGCN assembly (see the key list above :func:`census_ptx`).

    ``v_mfma_*`` / ``v_smfmac_*`` / ``v_wmma_*`` by name as ``matrix:``; ``global_load_*`` and
    ``buffer_load_*`` (also counted as ``buffer_load``) by width (``dwordx4`` = 128 bits,
    ``dwordx2`` = 64, ``dword`` = 32, ``ushort`` = 16, ...), the same for stores; nontemporal are
    those with the ``nt`` (gfx942) or ``slc`` (gfx90a, usually ``glc slc``) flag; LDS
    ``ds_read_*`` / ``ds_write_*`` (``ds_load``/``ds_store`` on newer chips) by bits moved
    (``ds_read_b128`` = 128, ``ds_read2_b64`` = 128, ``ds_read_u16`` = 16); ``scratch_*``.
    """
    census: dict[str, int] = {}
    for op, rest in _instructions(text, ";", _AMD_LINE):
        if op.startswith(("v_mfma_", "v_smfmac_", "v_wmma_", "v_swmmac_")):
            _bump(census, "matrix:" + op)
        elif mm := re.fullmatch(r"(global|buffer|flat)_(load|store)_(?:lds_)?(\w+)", op):
            space, direction, suffix = mm.groups()
            kind = f"global_{direction}"
            width = _amd_mem_width(suffix)
            _bump(census, f"{kind}_{width}b" if width else kind)
            if space == "buffer":
                _bump(census, f"buffer_{direction}")
            if re.search(r"\b(nt|slc)\b", rest):
                _bump(census, kind + "_nt")
        elif mm := re.fullmatch(r"ds_(read|write|load|store)(2st64|2)?_([biu])(\d+)(?:_d16(?:_hi)?)?", op):
            direction, two, _, bits = mm.groups()
            kind = "shared_load" if direction in ("read", "load") else "shared_store"
            _bump(census, f"{kind}_{int(bits) * (2 if two else 1)}b")
        elif mm := re.fullmatch(r"scratch_(load|store)_\w+", op):
            _bump(census, f"scratch_{mm.group(1)}")
    return census


def census_summary(census: dict[str, int] | None) -> dict[str, Any]:
    """The census' headline figures: ``matrix`` (``{mnemonic: count}``, PTX/AMDGCN names, or the
    SASS opcodes when that is all there is), ``global_loads`` / ``global_loads_128b``,
    ``global_stores`` / ``global_stores_128b`` and ``nontemporal_stores`` (static counts)."""
    census = census or {}
    matrix = {k.split(":", 1)[1]: v for k, v in census.items() if k.startswith("matrix:")}
    if not matrix:
        matrix = {k.split(":", 1)[1]: v for k, v in census.items()
                  if k.startswith("sass:") and k.split(":", 1)[1].split(".")[0] in _SASS_MATRIX}

    def total(prefix: str) -> int:
        return sum(v for k, v in census.items() if re.fullmatch(prefix + r"_\d+b", k))

    return {
        "matrix": matrix,
        "global_loads": total("global_load"),
        "global_loads_128b": census.get("global_load_128b", 0),
        "global_stores": total("global_store"),
        "global_stores_128b": census.get("global_store_128b", 0),
        "nontemporal_stores": census.get("global_store_nt", 0),
    }


def _cuobjdump_path() -> str:
    import triton.backends.nvidia as nv
    return str(Path(nv.__file__).parent / "bin" / "cuobjdump")


def _sass_census(cubin: bytes) -> dict[str, int]:
    """:func:`census_sass` of ``cuobjdump --dump-sass`` on the cubin; {} when that tool fails."""
    try:
        with tempfile.TemporaryDirectory(prefix="tilecraft-sass-") as tmp:
            path = os.path.join(tmp, "kernel.cubin")
            Path(path).write_bytes(cubin)
            proc = subprocess.run([_cuobjdump_path(), "--dump-sass", path], capture_output=True, text=True, check=False,
                                  timeout=60)
        return census_sass(proc.stdout) if proc.returncode == 0 else {}
    except Exception:  # noqa: BLE001 - the SASS census is a bonus: no cuobjdump, no SASS keys
        return {}


# --------------------------------------------------------------------------------------------
# Launched kernels
# --------------------------------------------------------------------------------------------


def resources_of_launched(compiled_kernel: Any, num_warps: int) -> KernelResources:
    """Resources of a kernel launched on this machine's GPU.

    ``compiled_kernel`` is what ``kernel[grid](...)`` returns on a GPU: a Triton ``CompiledKernel``
    whose ``n_regs`` and ``n_spills`` the driver filled in at load time (if they are not there yet
    and the object can load itself, it is loaded), with ``metadata.shared``, ``metadata.name`` and
    ``metadata.target``. On NVIDIA ``registers`` is ``n_regs``, ``spills`` is ``n_spills`` (Triton
    divides the local-memory bytes by 4) and ``scratch_bytes`` is ``4 * n_spills``. On AMD the
    kernel's AMDGCN (``asm["amdgcn"]``) is parsed as in :func:`cross_compile`, falling back on
    ``n_regs``/``n_spills``. Occupancy uses ``num_warps`` and the limits of
    ``metadata.target``'s architecture (None for an architecture not in
    :data:`NVIDIA_SM_LIMITS` / :data:`AMD_CU_LIMITS`).
    """
    meta = getattr(compiled_kernel, "metadata", None)
    if getattr(compiled_kernel, "n_regs", None) is None and hasattr(compiled_kernel, "_init_handles"):
        try:  # not launched yet: load it the way the first launch would
            compiled_kernel._init_handles()
        except Exception:  # noqa: BLE001 - no GPU, or it does not load: report what is known
            pass
    n_regs = getattr(compiled_kernel, "n_regs", None)
    n_spills = getattr(compiled_kernel, "n_spills", None)
    name = getattr(meta, "name", None) or getattr(compiled_kernel, "name", None) or "?"
    shared = getattr(meta, "shared", None)
    target = getattr(meta, "target", None)
    backend = getattr(target, "backend", "cuda")
    arch = getattr(target, "arch", None)

    registers: int | None = n_regs
    spills: int | None = n_spills
    scratch: int | None = None if n_spills is None else 4 * n_spills
    agprs = sgprs = None
    asm = getattr(compiled_kernel, "asm", None) or {}
    census: dict[str, int] | None = None
    if hasattr(asm, "get"):
        if isinstance(asm.get("ptx"), str):
            census = census_ptx(asm["ptx"])
        elif isinstance(asm.get("amdgcn"), str):
            census = census_amdgcn(asm["amdgcn"])
    if backend == "hip":
        text = asm.get("amdgcn") if hasattr(asm, "get") else None
        if text:
            rep = parse_amdgcn(text)
            registers = rep["vgprs"] if rep["vgprs"] is not None else n_regs
            agprs, sgprs = rep["agprs"], rep["sgprs"]
            if rep["vgpr_spills"] is not None or rep["sgpr_spills"] is not None:
                spills = (rep["vgpr_spills"] or 0) + (rep["sgpr_spills"] or 0)
            scratch = rep["scratch_bytes"]
    return KernelResources(
        target="device", kernel=name, num_warps=num_warps, registers=registers, agprs=agprs,
        sgprs=sgprs, spills=spills, scratch_bytes=scratch, shared_bytes=shared,
        occupancy=_occupancy(backend, arch, num_warps, registers, agprs, sgprs, shared),
        occupancy_unit=_unit(backend), census=census)


# --------------------------------------------------------------------------------------------
# Cross compiling in a child process
# --------------------------------------------------------------------------------------------

_RESULT_MARK = "@@tilecraft.compiled.result@@"
# The child: take the parent's import path, load this file (by path: importing it as
# tilecraft.analysis.compiled would run tilecraft/__init__.py, which imports torch, seconds per
# call) and run _child_main on the request read from stdin.
_CHILD_SCRIPT = (
    "import importlib.util, json, sys\n"
    "request = json.loads(sys.stdin.read())\n"
    "sys.path[:0] = request['sys_path']\n"
    "spec = importlib.util.spec_from_file_location('_tilecraft_compiled_child', request['this_file'])\n"
    "child = importlib.util.module_from_spec(spec)\n"
    "sys.modules[spec.name] = child\n"
    "spec.loader.exec_module(child)\n"
    "child._child_main(request)\n"
)
_DIAGNOSTIC = re.compile(r"Assertion|LLVM ERROR|error:|Error|Aborted|Segmentation|terminate")


def _encode_constexpr(value: object) -> object:
    """JSON form of a constexpr value: numbers, bools, strings and None as they are, a Triton
    dtype (``tl.float16``) as ``{"__tl_dtype__": "fp16"}``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton"):
        return {"__tl_dtype__": str(value)}
    raise TypeError(f"constexpr value {value!r} of type {type(value).__name__} cannot be sent to the "
                    "compiler process (use a number, bool, str, None or a triton.language dtype)")


def _decode_constexpr(value: object) -> object:
    if isinstance(value, dict) and "__tl_dtype__" in value:
        import triton.language as tl
        return tl.dtype(value["__tl_dtype__"])
    return value


def _child_sys_path() -> list[str]:
    """The parent's import path ('' as the working directory) with this package's root first, so
    that the child imports tilecraft and the kernel's module the way the parent would."""
    src_root = str(Path(__file__).resolve().parents[2])
    paths = [src_root]
    for p in sys.path:
        p = p or os.getcwd()
        if p not in paths:
            paths.append(p)
    return paths


def _diagnostics(stderr: str, limit: int = 6) -> str:
    """The lines of a child's stderr worth quoting: assertions, LLVM/MLIR errors, exceptions."""
    seen: list[str] = []
    for line in stderr.splitlines():
        line = line.strip()
        if line and _DIAGNOSTIC.search(line) and line not in seen:
            seen.append(line[:400])
    if not seen:
        seen = [ln.strip()[:400] for ln in stderr.strip().splitlines()[-limit:]]
    return "\n".join(seen[:limit])


def _kill_group(proc: subprocess.Popen) -> None:
    """End the compiler process and whatever it started (its own process group), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _error_result(target: str, function: str, num_warps: int, message: str) -> KernelResources:
    backend = TARGETS[target][0] if target in TARGETS else "cuda"
    return KernelResources(target=target, kernel=function, num_warps=num_warps, registers=None,
                           agprs=None, sgprs=None, spills=None, scratch_bytes=None, shared_bytes=None,
                           occupancy=None, occupancy_unit=_unit(backend), error=message)


def cross_compile(module: str, function: str, signature: dict[str, str], constexprs: dict[str, object],
                  target: str, *, num_warps: int = 4, num_stages: int = 3, maxnreg: int | None = None,
                  timeout_s: float = 120.0, sass: bool = True) -> KernelResources:
    """Compile the ``@triton.jit`` function ``module.function`` for ``target`` and report its resources.

    ``signature`` maps argument names to Triton types (``{"x_ptr": "*fp32", "n": "i32"}``);
    ``constexprs`` maps constexpr argument names to values (``{"BLOCK": 128}``); a constexpr missing
    from ``signature`` is added as ``"constexpr"``. As in Triton's AOT compiler
    (``triton/tools/compile.py``) a type may carry a hint: ``"*fp32:16"`` / ``"i32:16"`` says the
    pointer is 16-byte aligned / the integer a multiple of 16, ``"i32:1"`` that the integer is 1.
    A launch specializes on these (torch's tensors are 16-byte aligned, so a launch on them
    compiles ``*T:16`` pointers): give the same hints to get the kernel a launch would run, since
    alignment changes vectorization and so the register count. ``target`` is a :data:`TARGETS` key
    (``ValueError`` otherwise). ``maxnreg`` is a CUDA option and is dropped for AMD targets.

    The compile runs in a child ``sys.executable`` with this process's import path and environment,
    minus ``TRITON_INTERPRET`` (the interpreter would replace the ``@triton.jit`` function), so a
    compiler abort, a crash or a hang past ``timeout_s`` comes back as
    ``KernelResources(error=...)`` instead of taking the caller down. The child compiles with
    ``triton.compile`` (using Triton's cache), runs ptxas for NVIDIA targets, and prints its
    findings as one JSON line; the numbers are parsed and the occupancy computed here.
    ``num_warps`` in the result is the compiled kernel's own (``metadata.num_warps``).

    ``module`` is a dotted module name or the path of a ``.py`` file (loaded by path in the child,
    with its folder first on the import path). ``census`` in the result counts the instructions of
    the PTX (plus, with ``sass``, the SASS of the cubin via the ``cuobjdump`` Triton ships) or of
    the AMDGCN: see :func:`census_ptx`, :func:`census_sass`, :func:`census_amdgcn`.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    backend = TARGETS[target][0]
    options: dict[str, object] = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg is not None and backend == "cuda":
        options["maxnreg"] = maxnreg
    request = _request(module, function, signature, constexprs)
    request.update(target=list(TARGETS[target]), options=options, sass=sass)
    result, failure = _run_child(request, timeout_s, f"compiling {module}.{function} for {target}")
    if failure is not None:
        return _error_result(target, function, num_warps, failure)
    return _resources_from_child(result, target)


def check_function(module: str, function: str, signature: dict[str, str], constexprs: dict[str, object],
                   *, timeout_s: float = 120.0) -> list[str]:
    """Check, without compiling, that ``module.function`` is a ``@triton.jit`` function that
    ``signature`` and ``constexprs`` describe (the checks :func:`cross_compile` makes in its child:
    the module imports, the function exists, every argument has a type or a value, no unknown
    names, valid hints). Returns the function's argument names; ``ValueError`` with a one-line
    reason otherwise. Runs in a child process too, so importing the module cannot hurt the caller."""
    request = _request(module, function, signature, constexprs)
    request["probe"] = True
    result, failure = _run_child(request, timeout_s, f"loading {module}.{function}")
    if failure is not None:
        raise ValueError(failure.splitlines()[0])
    return list(result["arg_names"])


def _request(module: str, function: str, signature: dict[str, str], constexprs: dict[str, object]) -> dict:
    """What the child needs to find and describe ``module.function``."""
    return {
        "this_file": str(Path(__file__).resolve()),
        "sys_path": _child_sys_path(),
        "module": str(Path(module).resolve()) if _is_module_path(module) else module,
        "function": function,
        "signature": dict(signature),
        "constexprs": {k: _encode_constexpr(v) for k, v in constexprs.items()},
    }


def _run_child(request: dict, timeout_s: float, what: str) -> tuple[dict | None, str | None]:
    """Run the child on ``request``: (its JSON result, None) or (None, an error message)."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD_SCRIPT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                            start_new_session=True)  # its own process group: a timeout ends ptxas too
    try:
        stdout, stderr = proc.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, f"{what} timed out after {timeout_s:g} s"
    except BaseException:  # e.g. KeyboardInterrupt: the child's own session does not get it
        _kill_group(proc)
        raise

    result = None
    for line in reversed(stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            result = json.loads(line[len(_RESULT_MARK):])
            break
    if result is None:
        rc = proc.returncode
        how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals()
               else f"exited with status {rc}")
        diag = _diagnostics(stderr)
        return None, f"the compiler process {how} while {what}" + (f":\n{diag}" if diag else "")
    if not result["ok"]:
        diag = _diagnostics(stderr)
        return None, result["error"] + (f"\ncompiler output:\n{diag}" if diag else "")
    return result, None


def _resources_from_child(result: dict, target: str) -> KernelResources:
    backend, arch, _ = TARGETS[target]
    kernel, warps, shared = result["kernel"], result["num_warps"], result["shared"]
    if backend == "cuda":
        rep = parse_ptxas_log(result["report"], kernel)
        registers, agprs, sgprs = rep["registers"], None, None
        spills = None if rep["spill_stores"] is None else rep["spill_stores"] + rep["spill_loads"]
        scratch = rep["stack_bytes"]
    else:
        amd = parse_amdgcn(result["report"])
        registers, agprs, sgprs = amd["vgprs"], amd["agprs"], amd["sgprs"]
        spills = (None if amd["vgpr_spills"] is None and amd["sgpr_spills"] is None
                  else (amd["vgpr_spills"] or 0) + (amd["sgpr_spills"] or 0))
        scratch = amd["scratch_bytes"]
    return KernelResources(
        target=target, kernel=kernel, num_warps=warps, registers=registers, agprs=agprs, sgprs=sgprs,
        spills=spills, scratch_bytes=scratch, shared_bytes=shared,
        occupancy=_occupancy(backend, arch, warps, registers, agprs, sgprs, shared),
        occupancy_unit=_unit(backend), census=result.get("census"))


# ---- the child's side ------------------------------------------------------------------------


def _ptxas_path(arch: int) -> str:
    """The ptxas Triton uses for ``arch`` (honours ``TRITON_PTXAS_PATH``), else the bundled one."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(arch).path
    except Exception:  # noqa: BLE001 - internal API moved: fall back on the shipped binary
        import triton.backends.nvidia as nv
        return str(Path(nv.__file__).parent / "bin" / "ptxas")


def _run_ptxas(ptx: str, arch: int, metadata: Any) -> str:
    """``ptxas -v`` on Triton's PTX with the flags Triton's own ptxas call uses; returns the log."""
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    gpu_name = m.group(1) if m else f"sm_{arch}"
    flags = ["-lineinfo"]
    if not getattr(metadata, "enable_fp_fusion", True):
        flags.append("--fmad=false")
    extra = getattr(metadata, "ptx_options", None)
    if extra:
        flags += extra.split()
    with tempfile.TemporaryDirectory(prefix="tilecraft-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        Path(src).write_text(ptx)
        proc = subprocess.run([_ptxas_path(arch), "-v", *flags, f"--gpu-name={gpu_name}", src,
                               "-o", os.path.join(tmp, "kernel.cubin")],
                              capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed with status {proc.returncode}:\n{proc.stderr}")
    return proc.stdout + proc.stderr


def _is_module_path(module: str) -> bool:
    """Whether ``module`` names a Python file rather than a dotted module name."""
    return module.endswith(".py") or os.sep in module or "/" in module


def _bare_package(name: str, folder: Path) -> None:
    """Register package ``name`` (at ``folder``) without running its ``__init__``: tilecraft's
    imports torch (seconds per compile), and its kernel modules need only Triton. Submodules
    import as usual."""
    import types

    pkg = types.ModuleType(name)
    pkg.__path__ = [str(folder)]
    pkg.__file__ = str(folder / "__init__.py")
    pkg.__package__ = name
    sys.modules[name] = pkg


def _import_kernel_module(module: str) -> Any:
    """The module named ``module``: a dotted name, or a ``.py`` file path (its folder goes first on
    ``sys.path`` so that its own imports work; it is loaded under a name of its own, so that a file
    called ``copy.py`` does not meet the standard library's ``copy``)."""
    import importlib
    import importlib.util

    if not _is_module_path(module):
        if module.startswith("tilecraft.") and "tilecraft" not in sys.modules:
            _bare_package("tilecraft", Path(__file__).resolve().parents[1])
        return importlib.import_module(module)
    path = Path(module).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such kernel file: {module}")
    sys.path.insert(0, str(path.parent))
    name = "_tilecraft_user_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _resolve_request(request: dict) -> tuple[Any, dict, dict, dict]:
    """The JIT function, signature, constexprs and attrs a request names (errors for bad ones)."""
    import triton

    obj: Any = _import_kernel_module(request["module"])
    for part in request["function"].split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{request['module']} has no {request['function']!r}")
        obj = getattr(obj, part)
    fn = obj
    while not isinstance(fn, triton.runtime.JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn  # unwrap @triton.autotune / @triton.heuristics
    if not isinstance(fn, triton.runtime.JITFunction):
        raise TypeError(f"{request['module']}.{request['function']} is not a @triton.jit function "
                        f"({type(fn).__name__})")
    constexprs = {k: _decode_constexpr(v) for k, v in request["constexprs"].items()}
    given = request["signature"]
    unknown = sorted(set(given) - set(fn.arg_names))
    if unknown:
        raise ValueError(f"signature names arguments {unknown} that {fn.__name__} does not have "
                         f"(its arguments: {fn.arg_names})")
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for i, name in enumerate(fn.arg_names):
        if name in given:
            ty, _, hint = given[name].partition(":")
            signature[name] = ty.strip()
            if hint.strip() == "16":  # as a launch specializes a 16-byte aligned pointer / int % 16 == 0
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif hint.strip() == "1":  # as a launch specializes an int equal to 1
                signature[name] = "constexpr"
                constexprs[name] = 1
            elif hint.strip():
                raise ValueError(f"argument {name!r}: only ':16' and ':1' hints exist, got {given[name]!r}")
        elif name in constexprs:
            signature[name] = "constexpr"
        elif fn.params[i].is_constexpr and fn.params[i].default is not inspect.Parameter.empty:
            signature[name] = "constexpr"  # a constexpr left at its default, as a launch leaves it
            constexprs[name] = fn.params[i].default
        else:
            raise ValueError(f"argument {name!r} of {fn.__name__} has no type in signature and no "
                             "value in constexprs")
    return fn, signature, constexprs, attrs


def _compile_here(request: dict) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn, signature, constexprs, attrs = _resolve_request(request)
    if request.get("probe"):
        return {"ok": True, "kernel": fn.__name__, "arg_names": list(fn.arg_names)}
    backend, arch, warp_size = request["target"]
    if getattr(fn, "is_gluon", lambda: False)():  # @gluon.jit kernels parse through Gluon's front end
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget(backend, arch, warp_size), options=request["options"])
    meta = compiled.metadata
    if backend == "cuda":
        report = _run_ptxas(compiled.asm["ptx"], arch, meta)
        census = census_ptx(compiled.asm["ptx"])
        if request.get("sass", True) and compiled.asm.get("cubin"):
            census.update(_sass_census(compiled.asm["cubin"]))
    else:
        report = _amdgcn_report(compiled.asm["amdgcn"])
        census = census_amdgcn(compiled.asm["amdgcn"])
    return {"ok": True, "kernel": meta.name, "num_warps": meta.num_warps, "shared": meta.shared,
            "report": report, "census": census}


def _child_main(request: dict) -> None:
    """Entry point of the compiler process: compile, then print one marked JSON line."""
    try:
        out = _compile_here(request)
    except BaseException as exc:  # noqa: BLE001 - everything becomes an error report
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + _RESULT_MARK + json.dumps(out) + "\n")
    sys.stdout.flush()
