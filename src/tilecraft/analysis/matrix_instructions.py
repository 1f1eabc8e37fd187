"""Matrix-instruction calculator: which lane and register hold which element of a matrix operand.

Covers AMD CDNA1-3 MFMA/SMFMAC and RDNA3-4 WMMA/SWMMAC (instruction facts from
``data/amd_matrix_instructions.json``), NVIDIA sm80 ``mma.sync`` and sm90 ``mma.sync`` + ``wgmma``,
and Intel XMX DPAS (PVC, sub-group 16; DG2, sub-group 8).

Layouts are computed from the formulas in ``shared/reference/matrix-layouts.md``, never stored as
tables. Computed: AMD CDNA MFMA (A, B, C, D with cbsz/abid/blgp; on CDNA3 fp64 blgp negates),
CDNA3 SMFMAC (A compressed 2:4, the index operand ``K``, B, C/D; cbsz/abid pick the index set),
RDNA3 WMMA (wave32 and wave64 with the documented replication of A/B across 16-lane groups; 16-bit
C/D in one half of each VGPR chosen by opsel[2]; neg), RDNA4 WMMA/SWMMAC (wave32; opsel picks the
SWMMAC index set; neg) and RDNA4 dense WMMA in wave64, both from the RDNA4 ISA guide (7.12.2-7.12.3), NVIDIA
mma.sync (the shapes of the reference table), wgmma (accumulator and register-sourced A), Intel DPAS
(the DPAS layout, and PVC tf32 A from Khronos' cl_intel_subgroup_matrix_multiply_accumulate_tf32;
SYCL ``joint_matrix`` leaves its mapping implementation-defined, and says so). What is not computed
(RDNA4 wave64 SWMMAC: no public wave64 layout of its B) is a ValueError naming why, never a guess.

Sparse instructions: A is stored compressed, M x K/2 (two kept values of every four along K);
``K`` is the compression index, M x K/2 two-bit entries, K[i][c] saying which of the four columns
4*(c//2) .. 4*(c//2)+3 the stored value A[i][c] came from. AMD's calculator names index bits by the
uncompressed column k instead (``K[2][31] = v0{50}.[7:4]``): both entries 2*(k//4) and 2*(k//4)+1;
:func:`index_bits_for_column` answers in that form.

Wave64 on RDNA: append ``_w64`` to the instruction name (``v_wmma_f32_16x16x16_f16_w64``); the
plain name and ``_w32`` are wave32.

Conventions: matrices are A (M x K), B (K x N), C and D (M x N); ``row``/``col`` index the operand
itself (for B, row = k and col = n). A location is ``Location(register, lane, bits)`` with
``bits = (hi, lo)``, as in AMD's ``v1{17}.[15:0]``. For 64-bit elements on AMD ``register`` is the
first VGPR of the pair; on NVIDIA it is the fragment's .f64 register.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple

DATA_FILE = Path(__file__).resolve().parent / "data" / "amd_matrix_instructions.json"

OPERANDS = ("A", "B", "C", "D")
SPARSE_OPERANDS = OPERANDS + ("K",)   # K: the compression index of a sparse instruction
AMD_ARCHS = ("cdna1", "cdna2", "cdna3", "rdna3", "rdna4")
NVIDIA_ARCHS = ("sm80", "sm90")
INTEL_ARCHS = ("pvc", "dg2")
ARCHS = AMD_ARCHS + NVIDIA_ARCHS + INTEL_ARCHS

ALIASES = {
    **{a: a for a in ARCHS},
    "gfx908": "cdna1", "mi100": "cdna1",
    "gfx90a": "cdna2", "mi200": "cdna2", "mi210": "cdna2", "mi250": "cdna2", "mi250x": "cdna2",
    "gfx940": "cdna3", "gfx941": "cdna3", "gfx942": "cdna3", "mi300": "cdna3", "mi300a": "cdna3",
    "mi300x": "cdna3",
    "gfx1100": "rdna3", "gfx1101": "rdna3", "gfx1102": "rdna3", "gfx1103": "rdna3", "rx7900": "rdna3",
    "rx7900xtx": "rdna3", "gfx1200": "rdna4", "gfx1201": "rdna4", "rx9070": "rdna4", "rx9070xt": "rdna4",
    "sm_80": "sm80", "a100": "sm80",
    "sm_90": "sm90", "h100": "sm90", "h200": "sm90",
    "xe-hpc": "pvc", "dg2": "dg2", "arc": "dg2", "xe-hpg": "dg2",
}

BITS = {"fp64": 64, "fp32": 32, "xf32": 32, "tf32": 32, "int32": 32, "s32": 32, "f32": 32,
        "fp16": 16, "bf16": 16, "f16": 16, "int8": 8, "iu8": 8, "s8": 8, "u8": 8, "fp8": 8, "bf8": 8,
        "amd_fp8": 8, "amd_bf8": 8, "e4m3": 8, "e5m2": 8, "iu4": 4, "s4": 4, "u4": 4, "f64": 64}


class Location(NamedTuple):
    register: int
    lane: int
    bits: tuple[int, int]  # (hi, lo)


class Element(NamedTuple):
    row: int
    col: int
    block: int


def _fail(msg: str) -> None:
    raise ValueError(msg)


# ------------------------------------------------------------------------------------------------
# architectures and instruction facts


def resolve_arch(arch: str) -> str:
    """Canonical architecture name for ``arch`` (case-insensitive alias); ValueError with close
    matches when unknown."""
    key = str(arch).strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    close = difflib.get_close_matches(key, list(ALIASES), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(ARCHS)}"
    raise ValueError(f"unknown architecture {arch!r}{hint}")


@lru_cache(maxsize=1)
def _amd_data() -> dict:
    return json.loads(DATA_FILE.read_text())


@dataclass(frozen=True)
class Instruction:
    arch: str
    name: str
    family: str            # mfma, smfmac, wmma, swmmac, mma.sync, wgmma, dpas
    m: int
    n: int
    k: int
    blocks: int
    in_type: str
    in_type_b: str
    out_type: str
    lanes: int             # lanes (threads / work-items) that hold the operands
    cycles: int | None
    modifiers: tuple[str, ...]
    coexec: bool | None
    coexec_delay: int | None
    sparse: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.blocks

    @property
    def flops_per_unit_per_clock(self) -> float | None:
        """FLOPs per CU per clock on AMD (CDNA: FLOPs*4/cycles, four SIMDs per CU; RDNA:
        FLOPs*2/cycles, two SIMD32 per CU; None where the cycle count is not known, e.g. RDNA wave64);
        nominal dense tensor rate per SM per clock on NVIDIA; None for Intel. Sparse instructions
        count the dense-equivalent FLOPs (2*M*N*K)."""
        if self.cycles is None and self.arch in AMD_ARCHS:
            return None
        if self.arch in ("cdna1", "cdna2", "cdna3"):
            return self.flops * 4 / self.cycles
        if self.arch in ("rdna3", "rdna4"):
            return self.flops * 2 / self.cycles
        if self.arch in NVIDIA_ARCHS:
            return _NV_RATE[self.arch].get(self.in_type)
        return None

    @property
    def operands(self) -> tuple[str, ...]:
        return SPARSE_OPERANDS if self.sparse else OPERANDS

    def registers(self, operand: str) -> int:
        """32-bit registers per lane that the operand occupies (VGPRs on AMD)."""
        op = _operand(operand, self)
        if op == "K":
            return 1
        if self.family == "wgmma" and op == "B":
            return 0  # read from shared memory through a descriptor: no register layout
        if self.family == "wmma" or self.family == "swmmac":
            return _rdna_registers(self, op)
        if op in ("C", "D"):
            return max(1, self.m * self.n * self.blocks * BITS[self.out_type] // (32 * self.lanes))
        rows, cols = self.shape(op)
        bits = BITS[self.in_type if op == "A" else self.in_type_b]
        return max(1, math.ceil(rows * cols * self.blocks * bits / (32 * self.lanes)))

    def shape(self, operand: str) -> tuple[int, int]:
        """(rows, columns) of the operand as held in registers: a sparse A and its index K are
        M x K/2."""
        op = _operand(operand, self)
        if op in ("K",) or (op == "A" and self.sparse):
            return (self.m, self.k // 2)
        return {"A": (self.m, self.k), "B": (self.k, self.n)}.get(op, (self.m, self.n))

    def as_dict(self) -> dict:
        return {
            "arch": self.arch, "instruction": self.name, "family": self.family,
            "m": self.m, "n": self.n, "k": self.k, "blocks": self.blocks,
            "in_type_a": self.in_type, "in_type_b": self.in_type_b, "out_type": self.out_type,
            "lanes": self.lanes, "cycles": self.cycles, "flops": self.flops,
            "flops_per_unit_per_clock": self.flops_per_unit_per_clock,
            "unit": _UNIT[self.arch],
            "registers": {op: self.registers(op) for op in self.operands},
            "wave": self.lanes if self.family in ("wmma", "swmmac", "mfma", "smfmac") else None,
            "modifiers": list(self.modifiers), "coexec": self.coexec, "coexec_delay": self.coexec_delay,
            "sparse": self.sparse, "layout_computed": layout_supported(self),
            "notes": list(self.notes),
        }


_UNIT = {**{a: "CU" for a in AMD_ARCHS}, "sm80": "SM", "sm90": "SM", "pvc": "Xe-core", "dg2": "Xe-core"}
# Nominal dense tensor-core FLOPs per SM per clock (A100: 312 TF fp16 / (108 SM x 1.41 GHz);
# H100 SXM: 989 TF fp16 / (132 SM x 1.83 GHz)); per SM, not per instruction.
_NV_RATE = {
    "sm80": {"f16": 2048, "bf16": 2048, "tf32": 1024, "s8": 4096, "u8": 4096, "f64": 128},
    "sm90": {"f16": 4096, "bf16": 4096, "tf32": 2048, "s8": 8192, "u8": 8192, "e4m3": 8192,
             "e5m2": 8192, "f64": 256},
}


def _amd_instruction(arch: str, name: str, rec: dict, lanes: int | None = None) -> Instruction:
    mods = []
    if rec["cbsz_abid"]:
        mods += ["cbsz", "abid"]
    if rec["blgp"]:
        mods.append("blgp")
    # RDNA3: OPSEL[2] picks the half of each C/D VGPR for 16-bit results (cd_opsel); RDNA4 SWMMAC:
    # OPSEL picks the compression-index set in the index VGPR (AMD calculator README).
    if rec["cd_opsel"] or (arch == "rdna4" and rec["sparse"]):
        mods.append("opsel")
    if rec["neg"]:
        mods.append("neg")
    family = name.split("_")[1]  # v_mfma_... -> mfma, v_swmmac_... -> swmmac
    notes: list[str] = []
    if rec["sparse"]:
        how = "cbsz/abid pick the index set" if arch == "cdna3" else "opsel picks the index set"
        notes.append(f"sparse: A holds K/2 values per row (2:4), the index operand K says which; {how}; "
                     "C is D (accumulate in place), src2 is the index VGPR")
    if arch == "cdna3" and rec["in_type"] == "fp64" and rec["blgp"]:
        notes.append("CDNA3 fp64: blgp bits negate A (bit 0), B (bit 1), C (bit 2) instead of moving B's lanes")
    if arch == "rdna3":
        notes.append("RDNA3: A and B are replicated in every 16-lane group (lanes i, i+16; also i+32, i+48 "
                     "in wave64); append _w64 to the name for wave64")
    if lanes is None:
        lanes = 64 if arch.startswith("cdna") else 32
    if arch == "rdna4" and lanes == 32 and rec["in_type"] in ("fp16", "bf16"):
        if rec["sparse"]:
            notes.append("RDNA4 SWMMAC 16-bit: packed A stored columns 0-7 in lanes 0-15, 8-15 in lanes "
                         "16-31 (the guide's index pseudo-code, 7.12.3); B rows 0-15 in VGPRs 0-3 and "
                         "16-31 in VGPRs 4-7, each as a dense 16x16 B (docs/mi.md)")
        else:
            notes.append("RDNA4 16-bit A/B: the RDNA4 ISA guide's table (7.12.2): K 0-3 and 8-11 in lanes "
                         "0-15; GPUOpen's RDNA 4 article and llama.cpp number K 0-7 there (a relabelling "
                         "of K on A and B alike: the same D)")
    cycles = rec["cycles"]
    if lanes == 64 and arch.startswith("rdna"):
        name, cycles = name + "_w64", None   # the tables list wave32 cycles only
        notes.append("wave64: cycles not listed (wave32 figures in the tables)")
        if arch == "rdna4":
            notes.append("RDNA4 wave64: the RDNA4 ISA guide's layout (7.12.2): its wave32 layout with "
                         "the upper half of the A/B/C/D VGPRs in lanes 32-63")
            if rec["in_type"] == "iu4" and rec["k"] == 16:
                notes.append("RDNA4 wave64 v_wmma_i32_16x16x16_iu4: A and B use lanes 0-31 only")
    return Instruction(arch, name, family, rec["m"], rec["n"], rec["k"], rec["blocks"], rec["in_type"],
                       rec["in_type_src1"], rec["out_type"], lanes,
                       cycles, tuple(mods), rec["coexec"],
                       rec["coexec_delay"] if rec["coexec_delay"] >= 0 else None, rec["sparse"], tuple(notes))


# NVIDIA mma.sync shapes of the reference table: (shape, types, sm90 only)
_MMA_SHAPES = [
    ("m16n8k16", ("f16", "bf16"), False), ("m16n8k8", ("f16", "bf16", "tf32"), False),
    ("m16n8k4", ("tf32",), False), ("m16n8k32", ("s8", "u8"), False), ("m16n8k32", ("e4m3", "e5m2"), True),
    ("m16n8k16", ("s8", "u8"), False), ("m8n8k4", ("f64",), False), ("m16n8k16", ("f64",), True),
]
_WGMMA_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
_WGMMA_LIST_N = (8, 16, 32, 64, 128, 256)
_DPAS_K = {"tf32": 8, "f16": 16, "bf16": 16, "s8": 32, "u8": 32, "s4": 64, "u4": 64}
# PVC (Xe-HPC) XMX adds tf32 (K = 8); DG2 (Xe-HPG) has none.
_DPAS_TYPES = {"pvc": ("tf32", "f16", "bf16", "s8", "u8", "s4", "u4"), "dg2": ("f16", "bf16", "s8", "u8", "s4", "u4")}
_SUBGROUP = {"pvc": 16, "dg2": 8}
_DPAS_NOTE = "SYCL joint_matrix: mapping is implementation-defined; shown is the DPAS register layout"


def _acc(t: str) -> str:
    return {"s8": "s32", "u8": "s32", "s4": "s32", "u4": "s32", "f64": "f64"}.get(t, "f32")


def _mma(arch: str, shape: str, t: str) -> Instruction:
    m, n, k = map(int, re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape).groups())
    return Instruction(arch, f"mma.sync.{shape}.{t}", "mma.sync", m, n, k, 1, t, t, _acc(t), 32, None,
                       (), None, None)


def _wgmma(arch: str, n: int, t: str) -> Instruction:
    return Instruction(arch, f"wgmma.m64n{n}k{_WGMMA_K[t]}.{t}", "wgmma", 64, n, _WGMMA_K[t], 1, t, t,
                       _acc(t), 128, None, (), None, None,
                       notes=("B is read from shared memory (descriptor); A from registers or shared memory",))


def _dpas(arch: str, m: int, t: str) -> Instruction:
    s = _SUBGROUP[arch]
    return Instruction(arch, f"dpas.m{m}n{s}k{_DPAS_K[t]}.{t}", "dpas", m, s, _DPAS_K[t], 1, t, t, _acc(t),
                       s, None, (), None, None,
                       notes=(_DPAS_NOTE,))


@cache
def _catalogue(arch: str) -> dict[str, Instruction]:
    if arch in AMD_ARCHS:
        return {name: _amd_instruction(arch, name, rec) for name, rec in _amd_data()[arch].items()}
    out: dict[str, Instruction] = {}
    if arch in NVIDIA_ARCHS:
        for shape, types, sm90_only in _MMA_SHAPES:
            if sm90_only and arch != "sm90":
                continue
            for t in types:
                ins = _mma(arch, shape, t)
                out[ins.name] = ins
        if arch == "sm90":
            for t in _WGMMA_K:
                for n in _WGMMA_LIST_N:
                    ins = _wgmma(arch, n, t)
                    out[ins.name] = ins
    if arch in INTEL_ARCHS:
        for t in _DPAS_TYPES[arch]:
            ins = _dpas(arch, 8, t)
            out[ins.name] = ins
    return out


def list_instructions(arch: str) -> list[Instruction]:
    """The instructions of ``arch`` (wgmma: a selection of N; any N = 8..256 step 8 is accepted by
    :func:`instruction`; DPAS: repeat count 8 listed, 1..8 accepted)."""
    return list(_catalogue(resolve_arch(arch)).values())


def instruction(arch: str, name: str) -> Instruction:
    a = resolve_arch(arch)
    cat = _catalogue(a)
    key = str(name).strip()
    if key in cat:
        return cat[key]
    low = key.lower()
    for n, ins in cat.items():
        if n.lower() == low:
            return ins
    # LLVM's spelling in a disassembly (what `tilecraft inspect` prints) joins the type to the shape:
    # v_mfma_f32_32x32x8f16 for AMD's v_mfma_f32_32x32x8_f16
    bare = [ins for n, ins in cat.items() if n.lower().replace("_", "") == low.replace("_", "")]
    if len(bare) == 1:
        return bare[0]
    if a in ("rdna3", "rdna4") and low.endswith(("_w32", "_w64")):
        base, wave = low[:-4], int(low[-2:])
        if base in _amd_data()[a]:
            if wave == 32:
                return cat[base]
            rec = _amd_data()[a][base]
            if a == "rdna4" and rec["sparse"]:
                _fail(f"{base}_w64: RDNA4 wave64 SWMMAC layouts are not computed: the RDNA4 ISA guide "
                      "(7.12.2-7.12.3) gives no wave64 layout for the sparse B operand (32x16, 64x16); "
                      "use the wave32 form")
            return _amd_instruction(a, base, rec, lanes=64)
    if a == "sm90":
        mt = re.fullmatch(r"wgmma\.m64n(\d+)k(\d+)\.(\w+)", low)
        if mt and mt.group(3) in _WGMMA_K and int(mt.group(2)) == _WGMMA_K[mt.group(3)]:
            n = int(mt.group(1))
            if n % 8 == 0 and 8 <= n <= 256:
                return _wgmma(a, n, mt.group(3))
            _fail(f"wgmma N must be a multiple of 8 in 8..256, got {n}")
    if a in INTEL_ARCHS:
        mt = re.fullmatch(r"dpas\.m(\d+)n(\d+)k(\d+)\.(\w+)", low)
        if mt and mt.group(4) in _DPAS_TYPES[a] and int(mt.group(2)) == _SUBGROUP[a] \
                and int(mt.group(3)) == _DPAS_K[mt.group(4)]:
            m = int(mt.group(1))
            if 1 <= m <= 8:
                return _dpas(a, m, mt.group(4))
            _fail(f"DPAS repeat count (M) must be 1..8, got {m}")
    close = difflib.get_close_matches(key, list(cat), n=4, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; `tilecraft mi list {a}` lists them"
    raise ValueError(f"unknown instruction {name!r} for {a}{hint}")


def _operand(operand: str, ins: Instruction | None = None) -> str:
    op = str(operand).strip().upper()
    if op in ("IDX", "INDEX"):
        op = "K"
    if op == "K" and ins is not None and not ins.sparse:
        raise ValueError(f"operand K (compression index) exists only for sparse instructions; "
                         f"{ins.name} is dense (A, B, C, D)")
    if op not in SPARSE_OPERANDS:
        raise ValueError(f"unknown operand {operand!r}; expected one of A, B, C, D (K: sparse index)")
    return op


def layout_supported(ins: Instruction) -> bool:
    return ins.family in ("mfma", "smfmac", "wmma", "swmmac", "mma.sync", "wgmma", "dpas")


# ------------------------------------------------------------------------------------------------
# forward layouts without modifiers: (operand, row, col, block) -> list of Location


def _packed(elem_index: int, bits: int, per_reg_bits: int = 32) -> tuple[int, tuple[int, int]]:
    """Register and (hi, lo) bit range of element ``elem_index`` of a fragment packed low to high."""
    if bits >= per_reg_bits:
        return elem_index, (bits - 1, 0)
    per = per_reg_bits // bits
    lo = (elem_index % per) * bits
    return elem_index // per, (lo + bits - 1, lo)


def _amd_mfma(ins: Instruction, op: str, i: int, j: int, b: int) -> list[Location]:
    """CDNA MFMA and SMFMAC (matrix-layouts.md). SMFMAC: the compressed A (M x K/2) follows the
    MFMA input formula with K/2 for K; B the dense one with K; the index K[i][c] sits in the lane of
    A[i][c], two bits per stored value, packed low to high (index set 0; see _forward_mod)."""
    M, N, K, B = ins.m, ins.n, ins.k, ins.blocks
    if op == "K":
        P = M * (K // 2) // 64            # stored A values per lane
        lo = 2 * (j % P)
        return [Location(0, i + M * (j // P), (lo + 1, lo))]
    if op in ("A", "B"):
        bits = BITS[ins.in_type if op == "A" else ins.in_type_b]
        rows = M if op == "A" else N
        r, k = (i, j) if op == "A" else (j, i)   # r indexes M (A) or N (B); k the shared dimension
        kdim = ins.shape("A")[1] if op == "A" else K
        P = rows * kdim * B // 64
        s = k % P
        lane = rows * b + (k // P) * rows * B + r
        if bits == 64:
            return [Location(2 * s, lane, (63, 0))]
        reg, rng = _packed(s, bits)
        return [Location(reg, lane, rng)]
    bits = BITS[ins.out_type]
    H = 1 if bits == 64 else 4
    R = 64 // N
    BPR = math.ceil(64 / (M * N / H))
    reg = b * ((M * N) // 64) + (i // (H * R)) * H + (i % H)
    lane = (b % BPR) * N + ((i // H) % R) * BPR * N + j
    if bits == 64:
        return [Location(2 * reg, lane, (63, 0))]
    return [Location(reg, lane, (31, 0))]


def _rdna_per_lane(ins: Instruction, op: str) -> int:
    """Values of one A row / B column (stored, for a sparse A) that one lane holds: RDNA3 the
    whole K (each 16-lane group holds a copy); RDNA4 half of it, lanes 16-31 the second half."""
    cols = ins.shape(op)[1] if op in ("A", "K") else ins.k
    return cols if ins.arch == "rdna3" else cols // 2


def _rdna_registers(ins: Instruction, op: str) -> int:
    if op in ("C", "D"):
        if ins.arch == "rdna3":   # one row per 16 lanes per VGPR; 16-bit results use half a VGPR
            return ins.m * ins.n // ins.lanes
        return ins.m * ins.n * BITS[ins.out_type] // (32 * ins.lanes)
    bits = BITS[ins.in_type if op == "A" else ins.in_type_b]
    wave32 = max(1, _rdna_per_lane(ins, op) * bits // 32)
    if ins.arch == "rdna4" and ins.lanes == 64:
        return max(1, wave32 // 2)   # RDNA4 ISA guide, Table 43: 16-bit 2, 8-bit 1, 4-bit 1
    return wave32


def _rdna4_w64(ins: Instruction, op: str, i: int, j: int) -> Location:
    """RDNA4 dense WMMA in wave64, from the RDNA4 ISA reference guide (7 April 2025), 7.12.2
    "Matrix Element Storage in VGPRs": lane, VGPR and start position as bit fields of the row and
    column. A[i][k] (and B[k][j], with j for i):
      16-bit: lane {k[3:2], i[3:0]}, VGPR k[1], position k[0];
      8-bit:  lane {k[2], k[3], i[3:0]}, VGPR 0, position k[1:0];
      4-bit, K=16: lane {0, k[3], i[3:0]} (lanes 0-31 only), VGPR 0, position k[2:0];
      4-bit, K=32: lane {k[3], k[4], i[3:0]}, VGPR 0, position k[2:0].
    C/D[i][j]: lane {i[2], i[3], j[3:0]}; 32-bit VGPR i[1:0]; 16-bit VGPR i[1], position i[0]
    (i.e. VGPR[(i/4)%2*32 + (i/8)*16 + j][i%4], the guide's formula)."""
    def bit(x: int, b: int) -> int:
        return (x >> b) & 1
    if op in ("C", "D"):
        lane = 32 * bit(i, 2) + 16 * bit(i, 3) + j
        if BITS[ins.out_type] == 32:
            return Location(i & 3, lane, (31, 0))
        lo = 16 * (i & 1)
        return Location(bit(i, 1), lane, (lo + 15, lo))
    bits = BITS[ins.in_type if op == "A" else ins.in_type_b]
    r, k = (i, j) if op == "A" else (j, i)
    if bits == 16:
        lane, reg, pos = 16 * (k >> 2) + r, bit(k, 1), k & 1
    elif bits == 8:
        lane, reg, pos = 32 * bit(k, 2) + 16 * bit(k, 3) + r, 0, k & 3
    elif ins.k == 16:
        lane, reg, pos = 16 * bit(k, 3) + r, 0, k & 7
    else:
        lane, reg, pos = 32 * bit(k, 3) + 16 * bit(k, 4) + r, 0, k & 7
    lo = pos * bits
    return Location(reg, lane, (lo + bits - 1, lo))


def _rdna4_w32_dense(bits: int, kdim: int, r: int, k: int) -> tuple[int, int, int]:
    """(lane, VGPR, startPosn) of A[r][k] (or B[k][r]) in RDNA4 wave32, from the RDNA4 ISA reference
    guide (7 April 2025), 7.12.2, its Wave32 column:
      16-bit: lane {k[2], r[3:0]}, VGPR {k[3], k[1]}, position k[0]  (K 0-3 and 8-11 in lanes 0-15);
      8-bit:  lane {k[3], r[3:0]}, VGPR k[2], position k[1:0];
      4-bit, K=16: lane {k[3], r[3:0]}, VGPR 0, position k[2:0];
      4-bit, K=32 (the 16x32 A / 32x16 B rows): lane {k[4], r[3:0]}, VGPR k[3], position k[2:0]."""
    def bit(x: int, b: int) -> int:
        return (x >> b) & 1
    if bits == 16:
        return 16 * bit(k, 2) + r, 2 * bit(k, 3) + bit(k, 1), k & 1
    if bits == 8:
        return 16 * bit(k, 3) + r, bit(k, 2), k & 3
    if kdim == 16:
        return 16 * bit(k, 3) + r, 0, k & 7
    return 16 * bit(k, 4) + r, bit(k, 3), k & 7


def _rdna4_w32_input(ins: Instruction, op: str, i: int, j: int) -> Location:
    """RDNA4 wave32 A/B. Dense WMMA: the guide's table (_rdna4_w32_dense). SWMMAC (7.12.3):
    - the packed A (M x K/2) and its index: lanes 0-15 hold stored columns 0..K/4-1 and lanes 16-31
      the rest, packed low to high; the index of stored A[i][c] two bits at 2*(c mod K/4) in A's
      lane. This is what the guide's index pseudo-code asks (idxLane "same as VGPR layout lane",
      idxFirstBit = col[3:2]*4 for expanded column col); for 8- and 4-bit A it is also the table
      applied to the packed matrix; for 16-bit A the table's interleave would put chunks g and g+4
      of a row on the same index bits of one lane, so the pseudo-code's form is used (docs/mi.md);
    - B (K x N): "the same as the 16x16 matrix load, except that two load instructions are used and
      they load into the next consecutive group of VGPRs": rows 0..K/2-1 are the dense B of the
      table (16x16 for 16/8-bit; the table's own 32x16 row for 4-bit), rows K/2.. the same in the
      next VGPRs. For 4-bit K=32 the table has a 32x16 B row, which is used as is."""
    bits = BITS[ins.in_type if op == "A" else ins.in_type_b]
    r, k = (i, j) if op == "A" else (j, i)
    if ins.family == "swmmac" and op == "A":
        per = ins.k // 4                       # stored values per lane
        reg, rng = _packed(k % per, bits)
        return Location(reg, r + 16 * (k // per), rng)
    if ins.family == "swmmac" and not (bits == 4 and ins.k == 32):
        half = ins.k // 2                      # B: two consecutive dense groups of K/2 rows
        group_regs = max(1, half * bits // 64)
        lane, reg, pos = _rdna4_w32_dense(bits, half, r, k % half)
        reg += group_regs * (k // half)
    else:
        lane, reg, pos = _rdna4_w32_dense(bits, ins.k, r, k)
    lo = pos * bits
    return Location(reg, lane, (lo + bits - 1, lo))


def _amd_wmma(ins: Instruction, op: str, i: int, j: int, b: int) -> list[Location]:
    """RDNA WMMA/SWMMAC. RDNA3 (AMD calculator's gfx11 formulas; GPUOpen "WMMA on RDNA3"): A[i][k]
    in lanes i + 16c for every 16-lane group c, element k packed low to high; B the same with j;
    C/D[i][j] in VGPR floor(16i / wave), lane (16i mod wave) + j, 16-bit results in bits [15:0].
    RDNA4 (ISA reference guide 7.12.2-7.12.3): A/B from _rdna4_w32_input (wave32) and _rdna4_w64;
    C/D[i][j] element i mod 8 of lane j + 16*(i // 8), 16-bit results packed two per VGPR. SWMMAC:
    the index K[i][c] in A[i][c]'s lane, two bits per stored value (set 0; see _forward_mod)."""
    L = ins.lanes
    if ins.arch == "rdna4" and L == 64:
        return [_rdna4_w64(ins, op, i, j)]
    if op in ("C", "D"):
        bits = BITS[ins.out_type]
        if ins.arch == "rdna3":
            return [Location(16 * i // L, (16 * i) % L + j, (31, 0) if bits == 32 else (15, 0))]
        reg, rng = _packed(i % 8, bits)
        return [Location(reg, j + 16 * (i // 8), rng)]
    if op == "K":
        per = _rdna_per_lane(ins, op)
        lo = 2 * (j % per)
        return [Location(0, i + 16 * (j // per), (lo + 1, lo))]
    if ins.arch == "rdna4":
        return [_rdna4_w32_input(ins, op, i, j)]
    bits = BITS[ins.in_type if op == "A" else ins.in_type_b]
    r, k = (i, j) if op == "A" else (j, i)
    reg, rng = _packed(k, bits)
    return [Location(reg, r + 16 * c, rng) for c in range(L // 16)]


def _mma_tables(shape: str, t: str):
    """(A, B, CD) as (count, f(g, t, i) -> (row, col)) from the reference table."""
    key = (shape, "f64" if t == "f64" else "tf32" if t == "tf32" else "i8" if t in ("s8", "u8", "e4m3", "e5m2") else "f16")
    cd = (4, lambda g, q, i: (g + 8 * (i >> 1), 2 * q + (i & 1)))
    tables = {
        ("m16n8k16", "f16"): ((8, lambda g, q, i: (g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2))),
                              (4, lambda g, q, i: (2 * q + (i & 1) + 8 * (i >> 1), g)), cd),
        ("m16n8k8", "f16"): ((4, lambda g, q, i: (g + 8 * (i >> 1), 2 * q + (i & 1))),
                             (2, lambda g, q, i: (2 * q + i, g)), cd),
        ("m16n8k8", "tf32"): ((4, lambda g, q, i: (g + 8 * (i & 1), q + 4 * (i >> 1))),
                              (2, lambda g, q, i: (q + 4 * i, g)), cd),
        ("m16n8k4", "tf32"): ((2, lambda g, q, i: (g + 8 * i, q)), (1, lambda g, q, i: (q, g)), cd),
        ("m16n8k32", "i8"): ((16, lambda g, q, i: (g + 8 * ((i >> 2) & 1), 4 * q + (i & 3) + 16 * (i >> 3))),
                             (8, lambda g, q, i: (4 * q + (i & 3) + 16 * (i >> 2), g)), cd),
        ("m16n8k16", "i8"): ((8, lambda g, q, i: (g + 8 * (i >> 2), 4 * q + (i & 3))),
                             (4, lambda g, q, i: (4 * q + i, g)), cd),
        ("m8n8k4", "f64"): ((1, lambda g, q, i: (g, q)), (1, lambda g, q, i: (q, g)),
                            (2, lambda g, q, i: (g, 2 * q + i))),
        ("m16n8k16", "f64"): ((8, lambda g, q, i: (g + 8 * (i & 1), 4 * (i >> 1) + q)),
                              (4, lambda g, q, i: (q + 4 * i, g)), cd),
    }
    if key not in tables:
        _fail(f"no mma.sync layout for {shape}.{t}")
    return tables[key]


@cache
def _nv_inverse_table(shape: str, t: str, op: str) -> dict:
    """Forward map of an mma.sync fragment by enumeration: (row, col) -> list of (lane, elem)."""
    a, b, cd = _mma_tables(shape, t)
    count, f = {"A": a, "B": b}.get(op, cd)
    fwd: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        for e in range(count):
            fwd.setdefault(f(g, q, e), []).append((lane, e))
    return fwd


def _nv_bits(ins: Instruction, op: str) -> int:
    return BITS[ins.out_type] if op in ("C", "D") else BITS[ins.in_type]


def _nv_mma(ins: Instruction, op: str, i: int, j: int, b: int) -> list[Location]:
    shape = ins.name.split(".")[2]
    fwd = _nv_inverse_table(shape, ins.in_type, op)
    bits = _nv_bits(ins, op)
    per_bits = 64 if bits == 64 else 32
    return [Location(*_nv_loc(lane, e, bits, per_bits)) for lane, e in fwd[(i, j)]]


def _nv_loc(lane: int, e: int, bits: int, per_bits: int):
    reg, rng = _packed(e, bits, per_bits)
    return reg, lane, rng


def _nv_wgmma(ins: Instruction, op: str, i: int, j: int, b: int) -> list[Location]:
    if op == "B":
        _fail(f"{ins.name}: B is read from shared memory through a descriptor; it has no register layout")
    w, r = divmod(i, 16)
    if op == "A":
        shape = {16: "m16n8k16", 8: "m16n8k8", 32: "m16n8k32"}[ins.k]
        fwd = _nv_inverse_table(shape, ins.in_type, "A")
        bits = BITS[ins.in_type]
        return [Location(*_nv_loc(32 * w + lane, e, bits, 32)) for lane, e in fwd[(r, j)]]
    # accumulator: i (row) = 16w + g + 8*((e>>1)&1), col = 8*(e>>2) + 2t + (e&1)
    g, h = r % 8, r // 8
    q, lo = (j % 8) // 2, j % 2
    e = 4 * (j // 8) + 2 * h + lo
    return [Location(e, 32 * w + 4 * g + q, (31, 0))]


def _intel_dpas(ins: Instruction, op: str, i: int, j: int, b: int) -> list[Location]:
    S = ins.lanes
    if op in ("C", "D"):
        return [Location(i, j, (31, 0))]
    bits = BITS[ins.in_type]
    if op == "A" and bits == 32:
        # cl_intel_subgroup_matrix_multiply_accumulate_tf32 (Khronos, rev 1.0.0, 6.13.X.Y): A is
        # ceil(M/2) floats per work-item; the first K = 8 work-items hold the even rows, the other 8 the
        # odd rows (M = 1: work-items 8-15 are ignored). Component r holds rows 2r and 2r + 1.
        return [Location(i // 2, j + ins.k * (i % 2), (31, 0))]
    if op == "A":
        wi_bits = 32 if S == 8 else 16
        if bits > wi_bits:
            _fail(f"{ins.name}: A layout for {bits}-bit elements with sub-group {S} is not in the reference")
        per = wi_bits // bits
        lo = (j % per) * bits
        return [Location(i, j // per, (lo + bits - 1, lo))]
    e = 32 // bits
    lo = (i % e) * bits
    return [Location(i // e, j, (lo + bits - 1, lo))]


def _forward(ins: Instruction) -> Callable[[Instruction, str, int, int, int], list[Location]]:
    if ins.family in ("mfma", "smfmac"):
        return _amd_mfma
    if ins.family in ("wmma", "swmmac"):
        return _amd_wmma
    if ins.family == "mma.sync":
        return _nv_mma
    if ins.family == "wgmma":
        return _nv_wgmma
    if ins.family == "dpas":
        return _intel_dpas
    raise ValueError(f"{ins.name} ({ins.arch} {ins.family}): layout not computed yet "
                     f"(computed: AMD MFMA/SMFMAC/WMMA/SWMMAC, NVIDIA mma.sync/wgmma, Intel DPAS)")


# ------------------------------------------------------------------------------------------------
# modifiers and the public queries


@dataclass(frozen=True)
class Modifiers:
    cbsz: int = 0
    abid: int = 0
    blgp: int = 0
    opsel: int = 0
    neg: int = 0


def _index_sets(ins: Instruction) -> int:
    """Compression-index sets one 32-bit index VGPR holds (2 bits per stored A value per lane)."""
    per = _rdna_per_lane(ins, "K") if ins.family == "swmmac" else ins.m * (ins.k // 2) // 64
    return 32 // (2 * per)


def _is_integer(ins: Instruction) -> bool:
    return ins.out_type in ("int32", "s32")


def _neg_bits(ins: Instruction, mods: Modifiers) -> int:
    """The 3-bit negate field (bit 0 A, bit 1 B, bit 2 C): NEG on RDNA, BLGP for CDNA3 fp64."""
    if ins.arch == "cdna3" and ins.in_type == "fp64":
        return mods.blgp
    return mods.neg


def _check_modifiers(ins: Instruction, cbsz: int = 0, abid: int = 0, blgp: int = 0, opsel: int = 0,
                     neg: int = 0) -> Modifiers:
    for name, val in (("cbsz", cbsz), ("abid", abid), ("blgp", blgp), ("opsel", opsel), ("neg", neg)):
        if val < 0:
            _fail(f"{name} must be >= 0, got {val}")
        if val and name not in ins.modifiers:
            sup = ", ".join(ins.modifiers) or "none"
            _fail(f"{ins.name} on {ins.arch} does not support {name} (supported modifiers: {sup})")
    if ins.family == "smfmac":
        # SMFMAC: cbsz/abid choose the compression-index set (AMD calculator README); no broadcast
        sets = _index_sets(ins)
        if cbsz > 7 or abid > 15:
            _fail(f"cbsz must be 0..7 and abid 0..15, got cbsz={cbsz} abid={abid}")
        if cbsz == 0 and abid >= sets:
            _fail(f"abid={abid}: {ins.name} holds {sets} index sets per VGPR (abid 0..{sets - 1})")
    elif cbsz or abid:
        if 2 ** cbsz > ins.blocks:
            _fail(f"cbsz={cbsz} broadcasts over {2 ** cbsz} blocks but {ins.name} has {ins.blocks}")
        if abid >= 2 ** cbsz:
            _fail(f"abid={abid} must be below 2**cbsz = {2 ** cbsz}")
    if blgp > 7:
        _fail(f"blgp must be 0..7, got {blgp}")
    if opsel:
        if ins.family == "swmmac":
            sets = _index_sets(ins)
            if opsel >= sets:
                _fail(f"opsel={opsel}: {ins.name} holds {sets} index set(s) per VGPR (opsel 0..{sets - 1})")
        elif opsel != 4:
            _fail(f"opsel must be 0 or 4 for {ins.name} (OPSEL[2] picks the half of each C/D VGPR), got {opsel}")
    if neg > 7:
        _fail(f"neg must be 0..7 (bit 0 A, bit 1 B, bit 2 C), got {neg}")
    if neg & 4 and _is_integer(ins):
        _fail(f"neg bit 2 (C) is not allowed for integer {ins.name}; bits 0 and 1 mark A and B signed")
    return Modifiers(cbsz, abid, blgp, opsel, neg)


def value_modifier(ins: Instruction, operand: str, mods: Modifiers) -> str | None:
    """How the modifiers change the values read from ``operand`` (not where they are): 'negated'
    for a float operand whose negate bit is set, 'signed'/'unsigned' for an integer RDNA input whose
    NEG bit says so, None otherwise."""
    bit = {"A": 1, "B": 2, "C": 4}.get(operand, 0)
    if "neg" in ins.modifiers and _is_integer(ins) and operand in ("A", "B"):
        return "signed" if mods.neg & bit else "unsigned"
    return "negated" if _neg_bits(ins, mods) & bit else None


def _blgp_source_lane(blgp: int, lane: int) -> int:
    """Physical lane whose B data the instruction reads as lane ``lane`` under ``blgp``."""
    if blgp == 0:
        return lane
    if blgp == 1:
        return lane % 32
    if blgp == 2:
        return 32 + lane % 32
    if blgp == 3:
        return (lane + 16) % 64
    return 16 * (blgp - 4) + lane % 16


def _check_index(ins: Instruction, op: str, i: int, j: int, block: int) -> None:
    rows, cols = ins.shape(op)
    if not (0 <= i < rows and 0 <= j < cols):
        _fail(f"{op}[{i}][{j}] is outside {ins.name}'s {op} ({rows}x{cols})")
    if not 0 <= block < ins.blocks:
        _fail(f"block {block} is beyond {ins.name}'s {ins.blocks} block(s) (0..{ins.blocks - 1})")


def element_to_location(arch: str, instr: str, operand: str, i: int, j: int, block: int = 0,
                        cbsz: int = 0, abid: int = 0, blgp: int = 0, opsel: int = 0,
                        neg: int = 0) -> list[Location]:
    """Where element ``operand[i][j]`` of ``block`` lives: a list of (register, lane, (hi, lo))
    (more than one where the hardware replicates: RDNA3 A/B). With cbsz/abid, A elements of a block
    are read from the broadcasting block (SMFMAC: the index set moves instead); with blgp, B
    elements the instruction reads at lane L are read from the lane blgp maps L to; opsel moves
    RDNA3 16-bit C/D to bits [31:16] and the RDNA4 SWMMAC index to another set. ``neg`` changes
    values, not places (:func:`value_modifier`)."""
    ins = instruction(arch, instr)
    op = _operand(operand, ins)
    fwd = _forward(ins)
    mods = _check_modifiers(ins, cbsz, abid, blgp, opsel, neg)
    _check_index(ins, op, i, j, block)
    return _forward_mod(ins, fwd, op, i, j, block, mods)


def _forward_mod(ins, fwd, op, i, j, block, mods: Modifiers) -> list[Location]:
    if op == "A" and mods.cbsz and ins.family == "mfma":
        group = 2 ** mods.cbsz
        block = (block // group) * group + mods.abid
    locs = fwd(ins, op, i, j, block)
    if op == "B" and mods.blgp and _neg_bits(ins, mods) != mods.blgp:
        locs = [Location(l.register, _blgp_source_lane(mods.blgp, l.lane), l.bits) for l in locs]
    shift = 0
    if op == "K":
        index_set = mods.opsel if ins.family == "swmmac" else (mods.abid if mods.cbsz == 0 else 0)
        shift = index_set * 32 // _index_sets(ins)
    elif op in ("C", "D") and mods.opsel & 4:
        shift = 16
    if shift:
        locs = [Location(l.register, l.lane, (l.bits[0] + shift, l.bits[1] + shift)) for l in locs]
    return locs


@lru_cache(maxsize=512)
def _inverse(arch: str, name: str, op: str, mods: Modifiers) -> dict:
    ins = instruction(arch, name)
    fwd = _forward(ins)
    rows, cols = ins.shape(op)
    inv: dict[tuple[int, int], list[tuple[Element, tuple[int, int]]]] = {}
    for b in range(ins.blocks):
        for i in range(rows):
            for j in range(cols):
                for loc in _forward_mod(ins, fwd, op, i, j, b, mods):
                    inv.setdefault((loc.register, loc.lane), []).append((Element(i, j, b), loc.bits))
    return inv


def location_to_elements(arch: str, instr: str, operand: str, register: int, lane: int,
                         cbsz: int = 0, abid: int = 0, blgp: int = 0, opsel: int = 0,
                         neg: int = 0) -> list[tuple[Element, tuple[int, int]]]:
    """Every (element, (hi, lo)) read from ``register`` at ``lane`` (several for packed types and
    for broadcasts); empty when nothing there is read."""
    ins = instruction(arch, instr)
    op = _operand(operand, ins)
    _forward(ins)
    mods = _check_modifiers(ins, cbsz, abid, blgp, opsel, neg)
    nreg, nlanes = _register_count(ins, op), ins.lanes
    if not 0 <= lane < nlanes:
        _fail(f"lane {lane} is outside 0..{nlanes - 1} for {ins.name}")
    if not 0 <= register < nreg:
        _fail(f"register {register} is outside 0..{nreg - 1} for {ins.name} operand {op}")
    inv = _inverse(ins.arch, ins.name, op, mods)
    key = register
    if ins.arch in AMD_ARCHS and _elem_bits(ins, op) == 64:
        key = register - register % 2   # either VGPR of the pair
    return sorted(inv.get((key, lane), []), key=lambda eb: (eb[1][1], eb[0].block))


def location_to_element(arch: str, instr: str, operand: str, register: int, lane: int, bit: int = 0,
                        cbsz: int = 0, abid: int = 0, blgp: int = 0, opsel: int = 0,
                        neg: int = 0) -> Element | None:
    """The (row, col, block) held at bit ``bit`` of ``register`` at ``lane``, or None when nothing
    there is read. Under cbsz/abid a broadcast value feeds several blocks: the source block is
    returned (all of them: :func:`location_to_elements`)."""
    hits = location_to_elements(arch, instr, operand, register, lane, cbsz, abid, blgp, opsel, neg)
    for el, (hi, lo) in hits:
        if lo <= bit % 64 <= hi or (hi - lo == 63):
            if cbsz and operand.upper() == "A" and instruction(arch, instr).family == "mfma":
                same = [e for e, _ in hits if (e.row, e.col) == (el.row, el.col) and e.block % 2 ** cbsz == abid]
                if same:
                    return same[0]
            return el
    return None


def index_bits_for_column(arch: str, instr: str, i: int, k: int, cbsz: int = 0, abid: int = 0,
                          opsel: int = 0) -> Location:
    """AMD's calculator form of a sparse index query, ``K[i][k]`` with k the uncompressed column:
    the 4 bits that hold both 2-bit indices of the 2:4 chunk k//4 of row i (the first kept value's
    index in the low two)."""
    ins = instruction(arch, instr)
    if not ins.sparse:
        _fail(f"{ins.name} is dense: it has no compression index")
    if not (0 <= i < ins.m and 0 <= k < ins.k):
        _fail(f"K[{i}][{k}] is outside {ins.name}'s uncompressed A ({ins.m}x{ins.k})")
    lo_loc, hi_loc = (element_to_location(arch, instr, "K", i, 2 * (k // 4) + h, cbsz=cbsz, abid=abid,
                                          opsel=opsel)[0] for h in (0, 1))
    assert (lo_loc.register, lo_loc.lane) == (hi_loc.register, hi_loc.lane)
    return Location(lo_loc.register, lo_loc.lane, (hi_loc.bits[0], lo_loc.bits[1]))


def _elem_bits(ins: Instruction, op: str) -> int:
    if op == "K":
        return 2
    if op in ("C", "D"):
        return BITS[ins.out_type]
    return BITS[ins.in_type if op == "A" else ins.in_type_b]


def _register_count(ins: Instruction, op: str) -> int:
    """Registers the location's ``register`` index ranges over (AMD: VGPRs; NVIDIA: fragment
    registers, .f64 ones for f64; Intel: components / 32-bit words)."""
    if ins.family in ("mfma", "smfmac", "wmma", "swmmac"):
        return ins.registers(op)
    rows, cols = ins.shape(op)
    bits = _elem_bits(ins, op)
    per_bits = 64 if bits == 64 else 32
    if ins.family != "dpas":
        return max(1, math.ceil(rows * cols * bits / (per_bits * ins.lanes)))
    if op == "B":
        return ins.k * bits // 32
    return math.ceil(ins.m / 2) if op == "A" and bits == 32 else ins.m   # tf32 A: two rows per component


def amd_notation(register: int, lane: int, bits: tuple[int, int]) -> str:
    """AMD's ``v{reg}{lane}.[hi:lo]`` (no bit suffix for a whole 32-bit VGPR, ``v[r:r+1]`` for 64)."""
    hi, lo = bits
    if hi - lo == 63:
        return f"v[{register}:{register + 1}]{{{lane}}}"
    if hi - lo == 31:
        return f"v{register}{{{lane}}}"
    return f"v{register}{{{lane}}}.[{hi}:{lo}]"


def _notation(ins: Instruction, op: str, loc: Location) -> str:
    if ins.arch in AMD_ARCHS:
        return amd_notation(*loc)
    hi, lo = loc.bits
    frag = op.lower()
    who = "WI" if ins.family == "dpas" else "T"
    suffix = "" if hi - lo + 1 in (32, 64) else f"[{hi}:{lo}]"
    return f"{who}{loc.lane}:{frag}{loc.register}{suffix}"


def element_name(ins: Instruction, op: str, el: Element) -> str:
    s = f"{op}[{el.row}][{el.col}]"
    return s + (f".B{el.block}" if ins.blocks > 1 else "")


def layout_table(arch: str, instr: str, operand: str, cbsz: int = 0, abid: int = 0,
                 blgp: int = 0, opsel: int = 0, neg: int = 0) -> list[dict]:
    """One record per element of the operand (all blocks): row, column, block, register, lanes,
    bits, the location in vendor notation (AMD: ``v1{17}.[15:0]``; several locations where the
    hardware replicates) and ``value`` (negated / signed / unsigned under neg, else None)."""
    ins = instruction(arch, instr)
    op = _operand(operand, ins)
    fwd = _forward(ins)
    mods = _check_modifiers(ins, cbsz, abid, blgp, opsel, neg)
    value = value_modifier(ins, op, mods)
    rows, cols = ins.shape(op)
    out = []
    for b in range(ins.blocks):
        for i in range(rows):
            for j in range(cols):
                locs = _forward_mod(ins, fwd, op, i, j, b, mods)
                out.append({
                    "element": element_name(ins, op, Element(i, j, b)),
                    "row": i, "column": j, "block": b,
                    "register": locs[0].register, "lanes": [l.lane for l in locs],
                    "bits": [locs[0].bits[0], locs[0].bits[1]],
                    "location": " ".join(_notation(ins, op, l) for l in locs),
                    "value": value,
                })
    return out
