"""CDNA3 SMFMAC, RDNA3/RDNA4 WMMA and RDNA4 SWMMAC in the matrix-instruction calculator.

Published examples (AMD's matrix instruction calculator README, MIT): the sparse index of
v_smfmac_f32_16x16x32_f16 and v_swmmac_f32_16x16x32_f16, the RDNA3 v_wmma_f16_16x16x16_f16 D layout
with and without OPSEL[2], the RDNA3 B layout under NEG, CDNA3 fp64 BLGP as negate bits. Then every
layout exhaustively: a bijection, or the documented RDNA3 replication across 16-lane groups.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from _mi_cli import mi_invoker

from tilecraft.analysis import matrix_instructions as mi

SMFMAC = [i.name for i in mi.list_instructions("cdna3") if i.family == "smfmac"]
RDNA3 = [i.name for i in mi.list_instructions("rdna3")]
RDNA4 = [i.name for i in mi.list_instructions("rdna4")]


# ------------------------------------------------------------------------------------------------
# published examples


def test_published_sparse_index_examples():
    # CDNA3: K[2][31] = v0{50}.[7:4]; with cbsz 0, abid 3: v0{50}.[31:28]
    assert mi.amd_notation(*mi.index_bits_for_column("cdna3", "v_smfmac_f32_16x16x32_f16", 2, 31)) == "v0{50}.[7:4]"
    assert mi.amd_notation(*mi.index_bits_for_column("mi300x", "v_smfmac_f32_16x16x32_f16", 2, 31, abid=3)) \
        == "v0{50}.[31:28]"
    # cbsz != 0: abid is ignored, the low set is used
    assert mi.index_bits_for_column("cdna3", "v_smfmac_f32_16x16x32_f16", 2, 31, cbsz=1, abid=3).bits == (7, 4)
    # RDNA4: K[2][31] = v0{18}.[15:12]; with opsel 1: v0{18}.[31:28]
    assert mi.amd_notation(*mi.index_bits_for_column("rdna4", "v_swmmac_f32_16x16x32_f16", 2, 31)) == "v0{18}.[15:12]"
    assert mi.amd_notation(*mi.index_bits_for_column("gfx1201", "v_swmmac_f32_16x16x32_f16", 2, 31, opsel=1)) \
        == "v0{18}.[31:28]"
    # "... put into the 13th and 12th bits of the Src2 VGPR's lane 18. Or ... the 15th and 14th bits, if
    # this is the second value contained in the post-compression block"
    assert mi.element_to_location("rdna4", "v_swmmac_f32_16x16x32_f16", "K", 2, 14) == [(0, 18, (13, 12))]
    assert mi.element_to_location("rdna4", "v_swmmac_f32_16x16x32_f16", "K", 2, 15) == [(0, 18, (15, 14))]


@pytest.mark.parametrize("opsel,bits", [(0, "[15:0]"), (4, "[31:16]")])
def test_published_rdna3_f16_d_with_opsel(opsel, bits):
    recs = {(r["row"], r["column"]): r["location"]
            for r in mi.layout_table("rdna3", "v_wmma_f16_16x16x16_f16", "D", opsel=opsel)}
    assert recs[(0, 0)] == f"v0{{0}}.{bits}" and recs[(1, 15)] == f"v0{{31}}.{bits}"
    assert recs[(2, 4)] == f"v1{{4}}.{bits}" and recs[(15, 15)] == f"v7{{31}}.{bits}"
    for (i, j), loc in recs.items():
        assert loc == f"v{i // 2}{{{16 * (i % 2) + j}}}.{bits}"


def test_published_rdna3_b_with_neg():
    # --neg 6: B negated; lane l holds column l % 16, VGPR k//2, half k%2 (lanes 16-31 repeat)
    for r in mi.layout_table("rdna3", "v_wmma_f32_16x16x16_f16", "B", neg=6):
        k, j = r["row"], r["column"]
        half = "[15:0]" if k % 2 == 0 else "[31:16]"
        assert r["location"] == f"v{k // 2}{{{j}}}.{half} v{k // 2}{{{j + 16}}}.{half}"
        assert r["value"] == "negated"
    assert all(r["value"] is None for r in mi.layout_table("rdna3", "v_wmma_f32_16x16x16_f16", "A", neg=6))


def test_published_cdna3_fp64_blgp_negates():
    recs = mi.layout_table("cdna3", "v_mfma_f64_16x16x4_f64", "B", blgp=6)
    for r in recs:   # lanes do not move: B[k][j] at lane 16k + j, v[1:0]
        assert r["lanes"] == [16 * r["row"] + r["column"]] and r["location"].startswith("v[0:1]")
        assert r["value"] == "negated"
    assert all(r["value"] is None for r in mi.layout_table("cdna3", "v_mfma_f64_16x16x4_f64", "A", blgp=6))
    assert all(r["value"] == "negated" for r in mi.layout_table("cdna3", "v_mfma_f64_16x16x4_f64", "C", blgp=4))


def test_gpuopen_rdna3_fragment_rules():
    # GPUOpen Orochi WMMA sample: a_frag[e] = A[lane % 16][e], b_frag[e] = B[e][lane % 16],
    # result element 2e of lane l is C[2e + l // 16][l % 16] (fp16 result, low halves)
    for lane in range(32):
        for e in range(16):
            reg, lo = e // 2, 16 * (e % 2)
            got = mi.location_to_elements("rdna3", "v_wmma_f16_16x16x16_f16", "A", reg, lane)
            assert (mi.Element(lane % 16, e, 0), (lo + 15, lo)) in got
            got = mi.location_to_elements("rdna3", "v_wmma_f16_16x16x16_f16", "B", reg, lane)
            assert (mi.Element(e, lane % 16, 0), (lo + 15, lo)) in got
        for e in range(8):
            assert mi.location_to_element("rdna3", "v_wmma_f16_16x16x16_f16", "D", e, lane) \
                == (2 * e + lane // 16, lane % 16, 0)


def test_rdna4_accumulator_and_registers():
    # llama.cpp RDNA4 tiles: C row 8*(lane//16) + l, column lane % 16
    for lane in range(32):
        for e in range(8):
            assert mi.location_to_element("rdna4", "v_wmma_f32_16x16x16_f16", "D", e, lane) \
                == (8 * (lane // 16) + e, lane % 16, 0)
    # fp16 results on RDNA4 are packed two rows per VGPR (no OPSEL choice)
    assert mi.element_to_location("rdna4", "v_wmma_f16_16x16x16_f16", "D", 9, 3) == [(0, 19, (31, 16))]
    ins = mi.instruction("rdna4", "v_swmmac_f32_16x16x32_f16")
    assert (ins.registers("A"), ins.registers("B"), ins.registers("D"), ins.registers("K")) == (4, 8, 8, 1)


def test_register_counts():
    ins = mi.instruction("rdna3", "v_wmma_f16_16x16x16_f16")
    assert (ins.registers("A"), ins.registers("B"), ins.registers("D")) == (8, 8, 8)
    ins = mi.instruction("rdna3", "v_wmma_f32_16x16x16_f16_w64")
    assert (ins.lanes, ins.registers("A"), ins.registers("D"), ins.cycles) == (64, 8, 4, None)
    assert mi.instruction("rdna3", "v_wmma_i32_16x16x16_iu4").registers("A") == 2
    ins = mi.instruction("cdna3", "v_smfmac_f32_32x32x16_bf16")
    assert (ins.registers("A"), ins.registers("B"), ins.registers("D"), ins.registers("K")) == (2, 4, 16, 1)
    assert ins.shape("A") == (32, 8) and ins.shape("K") == (32, 8) and ins.shape("B") == (16, 32)


# ------------------------------------------------------------------------------------------------
# exhaustive: bijection, or the documented replication


def _check(arch: str, name: str, op: str, **mods) -> None:
    ins = mi.instruction(arch, name)
    rows, cols = ins.shape(op)
    copies = ins.lanes // 16 if (ins.arch == "rdna3" and op in "AB") else 1
    seen: dict = {}
    for rec in mi.layout_table(arch, name, op, **mods):
        assert len(rec["lanes"]) == copies, rec
        if copies > 1:   # the copies: same register and bits, one per 16-lane group
            assert sorted(lane // 16 for lane in rec["lanes"]) == list(range(copies))
            assert len({lane % 16 for lane in rec["lanes"]}) == 1
        for lane in rec["lanes"]:
            key = (rec["register"], lane)
            hi, lo = rec["bits"]
            for other_hi, other_lo in seen.get(key, []):
                assert hi < other_lo or lo > other_hi, (op, rec)   # no two elements share a bit
            seen.setdefault(key, []).append((hi, lo))
            assert 0 <= lane < ins.lanes
            assert mi.location_to_element(arch, name, op, rec["register"], lane, bit=lo, **mods) \
                == (rec["row"], rec["column"], rec["block"])
    used = sum(hi - lo + 1 for ranges in seen.values() for hi, lo in ranges)
    assert used == rows * cols * ins.blocks * copies * mi._elem_bits(ins, op)
    # the operand fills its registers exactly, less the documented unused parts: the other index
    # sets of K, and the other half of RDNA3 16-bit C/D VGPRs
    fill = 1.0
    if op == "K":
        fill = 1 / mi._index_sets(ins)
    elif ins.arch == "rdna3" and op in "CD" and mi._elem_bits(ins, op) == 16:
        fill = 0.5
    elif ins.arch == "rdna4" and ins.lanes == 64 and op in "AB" and ins.k * mi._elem_bits(ins, op) == 64:
        fill = 0.5   # wave64 v_wmma_i32_16x16x16_iu4: lanes 0-31 only (the guide)
    assert used == ins.registers(op) * ins.lanes * 32 * fill
    assert max(r for r, _ in seen) < ins.registers(op)


@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_exhaustive(name):
    for op in "ABCDK":
        _check("cdna3", name, op)
    sets = mi._index_sets(mi.instruction("cdna3", name))
    assert sets == (4 if "f16" in name and "bf8" not in name else 2)
    # every index set lands in its own bits: together they fill the VGPR
    bits = set()
    for abid in range(sets):
        _check("cdna3", name, "K", abid=abid)
        for r in mi.layout_table("cdna3", name, "K", abid=abid):
            bits |= {(r["lanes"][0], b) for b in range(r["bits"][1], r["bits"][0] + 1)}
    assert len(bits) == 64 * 32


def test_smfmac_shares_b_and_k_lane_groups():
    # A[i][c] (stored column c of chunk c//2) meets B rows 4*(c//2)..+3 in the same lane group
    for name in SMFMAC:
        ins = mi.instruction("cdna3", name)
        for c in range(ins.k // 2):
            a_lane = mi.element_to_location("cdna3", name, "A", 0, c)[0].lane
            k_lane = mi.element_to_location("cdna3", name, "K", 0, c)[0].lane
            assert a_lane == k_lane
            for k in range(4 * (c // 2), 4 * (c // 2) + 4):
                assert mi.element_to_location("cdna3", name, "B", k, 0)[0].lane // ins.m == a_lane // ins.m


@pytest.mark.parametrize("name", RDNA3)
def test_rdna3_exhaustive(name):
    for wave in ("", "_w64"):
        for op in "ABCD":
            _check("rdna3", name + wave, op)
    ins = mi.instruction("rdna3", name)
    if "opsel" in ins.modifiers:
        for op in "CD":
            _check("rdna3", name, op, opsel=4)


@pytest.mark.parametrize("name", RDNA4)
def test_rdna4_exhaustive(name):
    ins = mi.instruction("rdna4", name)
    for op in ins.operands:
        _check("rdna4", name, op)
    if ins.sparse:
        for opsel in range(1, mi._index_sets(ins)):
            _check("rdna4", name, "K", opsel=opsel)


def test_every_amd_instruction_has_a_layout():
    for arch in ("cdna1", "cdna2", "cdna3", "rdna3", "rdna4"):
        assert all(mi.layout_supported(i) for i in mi.list_instructions(arch))


# ------------------------------------------------------------------------------------------------
# RDNA4 wave32: the RDNA4 ISA reference guide (7 April 2025), 7.12.2-7.12.3


RDNA4_DENSE = [n for n in RDNA4 if mi.instruction("rdna4", n).family == "wmma"]


def _bits(x: int, *positions: int) -> int:
    """Concatenate bits of x, most significant first (Verilog {x[a], x[b], ...})."""
    out = 0
    for p in positions:
        out = 2 * out + ((x >> p) & 1)
    return out


def _isa_w32(bits: int, kdim: int, r: int, k: int) -> tuple[int, int, int]:
    """(lane, vgpr, startPosn) transcribed from the guide's table, column Wave32."""
    if bits == 16:
        return 16 * _bits(k, 2) + r, _bits(k, 3, 1), k & 1          # { k[2], r }, { k[3], k[1] }, k[0]
    if bits == 8:
        return 16 * _bits(k, 3) + r, _bits(k, 2), k & 3             # { k[3], r }, k[2], k[1:0]
    if kdim == 16:
        return 16 * _bits(k, 3) + r, 0, k & 7                       # { k[3], r }, 0, k[2:0]
    return 16 * _bits(k, 4) + r, _bits(k, 3), k & 7                 # 16x32 A / 32x16 B: { k[4], r }, k[3], k[2:0]


def test_rdna4_wave32_dense_matches_isa_table():
    for name in RDNA4_DENSE:
        ins = mi.instruction("rdna4", name)
        for op in "AB":
            bits = mi._elem_bits(ins, op)
            for rec in mi.layout_table("rdna4", name, op):
                r, k = (rec["row"], rec["column"]) if op == "A" else (rec["column"], rec["row"])
                lane, vgpr, pos = _isa_w32(bits, ins.k, r, k)
                assert (rec["lanes"], rec["register"]) == ([lane], vgpr), (name, rec)
                assert rec["bits"] == [pos * bits + bits - 1, pos * bits], (name, rec)


def test_rdna4_guide_wave32_a_example():
    # The guide's "Example: 16x16 A-Matrix of 16-bit data in Row-Major order": each entry is the WORD
    # address (16 * row + column, hex) held by lane `th` in V0 lo, V0 hi, ..., V3 hi. Rows of its table:
    published = {
        0: "00 01 02 03 08 09 0a 0b", 1: "10 11 12 13 18 19 1a 1b", 9: "90 91 92 93 98 99 9a 9b",
        15: "f0 f1 f2 f3 f8 f9 fa fb", 16: "04 05 06 07 0c 0d 0e 0f", 19: "34 35 36 37 3c 3d 3e 3f",
        28: "c4 c5 c6 c7 cc cd ce cf", 31: "f4 f5 f6 f7 fc fd fe ff",
    }
    for name in ("v_wmma_f32_16x16x16_f16", "v_wmma_bf16_16x16x16_bf16"):
        for lane in range(32):
            got = []
            for vgpr in range(4):
                for lo in (0, 16):
                    (el, _), = [(e, b) for e, b in mi.location_to_elements("gfx1201", name, "A", vgpr, lane)
                                   if b[1] == lo]
                    got.append(f"{16 * el.row + el.col:02x}")
            # every lane: row lane % 16, columns 0-3 and 8-11 (lanes 0-15) or 4-7 and 12-15
            want = [f"{16 * (lane % 16) + c + 4 * (lane // 16):02x}" for c in (0, 1, 2, 3, 8, 9, 10, 11)]
            assert got == want
            if lane in published:
                assert " ".join(got) == published[lane]
    r = mi_invoker()("where", "rdna4", "v_wmma_f32_16x16x16_f16", "-o", "A", "--row", "3", "--col", "9")
    assert r.exit_code == 0 and "v2{3}.[31:16]" in r.output          # 0x39: lane 3, V2 hi


def test_rdna4_gpuopen_llamacpp_relabelling_gives_same_d():
    # GPUOpen's "Matrix Cores of RDNA 4" and llama.cpp's RDNA4 tiles load A/B with K 0-7 in lanes 0-15
    # (half2 h of lane l is A[l % 16][2 * (4 * (l // 16) + h)] and the next k). Read through the guide's
    # layout those registers hold A and B with one permutation of K applied to both, so D = A @ B
    # is unchanged: fill registers the llama.cpp way, read them back the guide's way, multiply.
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 8, (16, 16)).astype(np.float64)
    b = rng.integers(-8, 8, (16, 16)).astype(np.float64)
    c = rng.integers(-8, 8, (16, 16)).astype(np.float64)
    for name in ("v_wmma_f32_16x16x16_f16", "v_wmma_f16_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"):
        seen_a, seen_b = np.full((16, 16), np.nan), np.full((16, 16), np.nan)
        perm = set()
        for lane in range(32):
            for h in range(8):                       # 16-bit element h of the lane: VGPR h // 2
                k_llama = 8 * (lane // 16) + h
                lo = 16 * (h % 2)
                for op, src, dst in (("A", a, seen_a), ("B", b, seen_b)):
                    (el, _), = [(e, bb) for e, bb in mi.location_to_elements("rdna4", name, op, h // 2, lane)
                                if bb[1] == lo]
                    if op == "A":
                        dst[el.row, el.col] = src[lane % 16, k_llama]
                        perm.add((k_llama, el.col))
                    else:
                        dst[el.row, el.col] = src[k_llama, lane % 16]
        assert not np.isnan(seen_a).any() and not np.isnan(seen_b).any()
        assert len(perm) == 16 and any(x != y for x, y in perm)        # a relabelling, not the identity
        np.testing.assert_array_equal(seen_a @ seen_b + c, a @ b + c)


SPARSE = [n for n in RDNA4 if mi.instruction("rdna4", n).family == "swmmac"]


def _dense_counterpart(name: str) -> str:
    """The dense WMMA of the same types with half the K (its B is one of the sparse B's groups)."""
    ins = mi.instruction("rdna4", name)
    if ins.in_type == "iu4":
        return "v_wmma_i32_16x16x32_iu4"
    return name.replace("v_swmmac", "v_wmma").replace("x32_", "x16_")


def test_rdna4_swmmac_b_two_consecutive_groups():
    # The guide, 7.12.3: "All vector-memory loads (with or without transpose) are the same as the 16x16
    # matrix load, except that two load instructions are used and they load into the next consecutive
    # group of VGPRs." So B rows 0..K/2-1 sit as the dense B, rows K/2.. the same in the next VGPRs
    # (16-bit: VGPRs 0-3 and 4-7, lanes 0-15 holding rows 0-3, 8-11, 16-19, 24-27). 4-bit K=32: the
    # guide's table has a 32x16 B row of its own, used as is (one dense v_wmma_i32_16x16x32_iu4 B).
    for name in SPARSE:
        ins = mi.instruction("rdna4", name)
        dense = _dense_counterpart(name)
        if ins.in_type == "iu4" and ins.k == 32:
            for rec in mi.layout_table("rdna4", name, "B"):
                assert rec["location"] == mi.layout_table("rdna4", dense, "B")[16 * rec["row"] + rec["column"]]["location"]
            continue
        half, group = ins.k // 2, mi.instruction("rdna4", dense).registers("B")
        assert ins.registers("B") == 2 * group
        for k in range(ins.k):
            for j in range(16):
                (want,) = mi.element_to_location("rdna4", dense, "B", k % half, j)
                assert mi.element_to_location("rdna4", name, "B", k, j) \
                    == [(want.register + group * (k // half), want.lane, want.bits)], (name, k, j)
    lanes = {r["row"] for r in mi.layout_table("rdna4", "v_swmmac_f32_16x16x32_f16", "B") if r["lanes"][0] < 16}
    assert lanes == {*range(4), *range(8, 12), *range(16, 20), *range(24, 28)}


def test_rdna4_swmmac_a_and_index_follow_the_guides_pseudocode():
    # The guide, 7.12.3 "Expanding a packed sparse A-matrix": for each row and each group of four
    # expanded columns col, idxLane = <same as VGPR layout lane#>, idxFirstBit = col[3:2]*4 (wave32;
    # K=64 "operate[s] similarly": col[4:2]*4), idx0/idx1 at bits idxFirstBit+1:+0 and +3:+2, selecting
    # Packed_A[row][col/2] and Packed_A[row][col/2 + 1].
    for name in SPARSE:
        ins = mi.instruction("rdna4", name)
        groups_per_lane = ins.k // 8
        for row in range(16):
            for col in range(0, ins.k, 4):
                a0, a1 = (mi.element_to_location("rdna4", name, "A", row, col // 2 + d)[0] for d in (0, 1))
                assert a0.lane == a1.lane
                first = (col // 4) % groups_per_lane * 4
                for d in (0, 1):
                    assert mi.element_to_location("rdna4", name, "K", row, col // 2 + d) \
                        == [(0, a0.lane, (first + 2 * d + 1, first + 2 * d))], (name, row, col)
        # 8- and 4-bit: also the dense table applied to the packed A ("for sparse matrices this
        # procedure is applied on the pre-expanded matrix data")
        bits = mi._elem_bits(ins, "A")
        if bits < 16:
            for rec in mi.layout_table("rdna4", name, "A"):
                lane, vgpr, pos = _isa_w32(bits, ins.k // 2, rec["row"], rec["column"])
                assert (rec["lanes"], rec["register"], rec["bits"][1]) == ([lane], vgpr, pos * bits)
    # ... which the table's 16-bit interleave cannot satisfy: it puts packed columns 0 and 8 (chunks 0
    # and 4, expanded columns 0 and 16, both idxFirstBit 0) in the same lane
    assert _isa_w32(16, 16, 0, 0)[0] == _isa_w32(16, 16, 0, 8)[0] and (0 >> 2) % 4 == (16 >> 2) % 4


# ------------------------------------------------------------------------------------------------
# RDNA4 wave64 (dense WMMA): the RDNA4 ISA reference guide (7 April 2025), 7.12.2


def _isa_w64(ins, op: str, i: int, j: int) -> tuple[int, int, int]:
    """(lane, vgpr, startPosn) transcribed from the guide's table, column Wave64."""
    if op in "CD":
        lane = 16 * _bits(i, 2, 3) + j                  # { row[2], row[3], col[3:0] }
        if mi._elem_bits(ins, op) == 32:
            return lane, i & 3, 0                       # vgpr row[1:0], startPosn 0
        return lane, (i >> 1) & 1, i & 1                # vgpr row[1], startPosn row[0]
    bits = mi._elem_bits(ins, op)
    r, k = (i, j) if op == "A" else (j, i)
    if bits == 16:
        return 16 * _bits(k, 3, 2) + r, (k >> 1) & 1, k & 1          # { k[3:2], r[3:0] }, k[1], k[0]
    if bits == 8:
        return 16 * _bits(k, 2, 3) + r, 0, k & 3                      # { k[2], k[3], r }, 0, k[1:0]
    if ins.k == 16:
        return 16 * _bits(k, 3) + r, 0, k & 7                         # { 0, k[3], r }, 0, k[2:0]
    return 16 * _bits(k, 3, 4) + r, 0, k & 7                          # { k[3], k[4], r }, 0, k[2:0]


@pytest.mark.parametrize("name", RDNA4_DENSE)
def test_rdna4_wave64_matches_isa_table(name):
    ins = mi.instruction("rdna4", name + "_w64")
    assert ins.lanes == 64 and mi.layout_supported(ins)
    for op in "ABCD":
        bits = mi._elem_bits(ins, op)
        for rec in mi.layout_table("rdna4", name + "_w64", op):
            lane, vgpr, pos = _isa_w64(ins, op, rec["row"], rec["column"])
            assert (rec["lanes"], rec["register"]) == ([lane], vgpr), rec
            assert rec["bits"] == [pos * bits + bits - 1, pos * bits], rec


def test_rdna4_wave64_published_examples():
    # the guide's wave64 result example (WMMA_F32_16x16x16_F16) and its two result formulas
    n = "v_wmma_f32_16x16x16_f16_w64"
    table = {(0, 0): (0, 0), (0, 1): (1, 0), (0, 2): (2, 0), (0, 3): (3, 0), (1, 0): (0, 1), (1, 1): (1, 1),
             (1, 3): (3, 1), (15, 0): (0, 15), (15, 3): (3, 15), (16, 0): (8, 0), (16, 1): (9, 0),
             (16, 3): (11, 0), (32, 0): (4, 0), (32, 3): (7, 0), (63, 0): (12, 15), (63, 3): (15, 15)}
    for (lane, vgpr), (row, col) in table.items():
        assert mi.location_to_element("gfx1201", n, "D", vgpr, lane) == (row, col, 0)
    for row in range(16):
        for col in range(16):
            lane = (row // 4) % 2 * 32 + (row // 8) * 16 + col
            assert mi.element_to_location("rdna4", n, "C", row, col) == [(row % 4, lane, (31, 0))]
            lo = (row % 2) * 16
            assert mi.element_to_location("rdna4", "v_wmma_f16_16x16x16_f16_w64", "D", row, col) \
                == [((row % 4) // 2, lane, (15 + lo, lo))]
    # the prose: lanes 0-15 hold rows 0-3, 16-31 rows 8-11, 32-47 rows 4-7, 48-63 rows 12-15
    for lane in range(64):
        rows = {mi.location_to_element("rdna4", n, "D", v, lane).row for v in range(4)}
        assert rows == set(range(4 * [0, 2, 1, 3][lane // 16], 4 * [0, 2, 1, 3][lane // 16] + 4))


def test_rdna4_wave64_register_counts():
    # the guide's Table 43 (dense A = B: 16-bit 2, 8-bit 1, 4-bit 1) and LLVM's wave64 assembler test
    # (llvm/test/MC/AMDGPU/gfx12_asm_wmma_w64.s): v_wmma_f32_16x16x16_f16 v[4:7], v[0:1], v[2:3], v[4:7];
    # v_wmma_f16_16x16x16_f16 v[4:5], v[0:1], v[2:3]; iu8 / fp8 / 16x16x32_iu4: v[2:5], v0, v1
    want = {"v_wmma_f32_16x16x16_f16": (2, 2, 4, 4), "v_wmma_f32_16x16x16_bf16": (2, 2, 4, 4),
            "v_wmma_f16_16x16x16_f16": (2, 2, 2, 2), "v_wmma_bf16_16x16x16_bf16": (2, 2, 2, 2),
            "v_wmma_i32_16x16x16_iu8": (1, 1, 4, 4), "v_wmma_i32_16x16x16_iu4": (1, 1, 4, 4),
            "v_wmma_i32_16x16x32_iu4": (1, 1, 4, 4), "v_wmma_f32_16x16x16_fp8_fp8": (1, 1, 4, 4),
            "v_wmma_f32_16x16x16_bf8_bf8": (1, 1, 4, 4)}
    for name, regs in want.items():
        ins = mi.instruction("rdna4", name + "_w64")
        assert tuple(ins.registers(op) for op in "ABCD") == regs, name
        assert ins.cycles is None and ins.flops_per_unit_per_clock is None
    # "WMMA_16X16X16_IU4: works with wave64 but uses only lanes 0..31; others unused"
    for op in "AB":
        lanes = {r["lanes"][0] for r in mi.layout_table("rdna4", "v_wmma_i32_16x16x16_iu4_w64", op)}
        assert lanes == set(range(32))
    assert any("lanes 0-31" in n for n in mi.instruction("rdna4", "v_wmma_i32_16x16x16_iu4_w64").notes)


@pytest.mark.parametrize("name", RDNA4_DENSE)
def test_rdna4_wave64_exhaustive(name):
    for op in "ABCD":
        _check("rdna4", name + "_w64", op)
    ins = mi.instruction("rdna4", name + "_w64")
    assert ins.modifiers == mi.instruction("rdna4", name).modifiers
    if "neg" in ins.modifiers and not mi._is_integer(ins):
        assert all(r["value"] == "negated" for r in mi.layout_table("rdna4", name + "_w64", "B", neg=2))


def test_rdna4_wave64_relation_to_wave32():
    # The guide's wave64 column is its wave32 column with the upper half of the VGPRs moved to lanes
    # 32-63 (A/B with more than one wave32 VGPR; C/D always).
    for name in RDNA4_DENSE:
        ins32, ins64 = mi.instruction("rdna4", name), mi.instruction("rdna4", name + "_w64")
        for op in "ABCD":
            n32 = ins32.registers(op)
            for rec in mi.layout_table("rdna4", name + "_w64", op):
                (w32,) = mi.element_to_location("rdna4", name, op, rec["row"], rec["column"])
                reg, lane = w32.register, w32.lane
                if n32 > 1:
                    lane, reg = lane + 32 * (reg // (n32 // 2)), reg % (n32 // 2)
                assert (rec["lanes"], rec["register"], tuple(rec["bits"])) == ([lane], reg, w32.bits), (name, op, rec)
        assert ins64.registers("A") == max(1, ins32.registers("A") // 2)


def test_cli_rdna4_wave64(cli):
    r = cli("where", "rdna4", "v_wmma_f32_16x16x16_f16_w64", "-o", "A", "--row", "5", "--col", "9")
    assert r.exit_code == 0 and "v0{37}.[31:16]" in r.output
    r = cli("which", "gfx1200", "v_wmma_f32_16x16x16_f16_w64", "-o", "D", "--register", "3", "--lane", "63")
    assert r.exit_code == 0 and "D[15][15]" in r.output
    r = cli("show", "rx9070", "v_wmma_i32_16x16x16_iu8_w64")
    assert r.exit_code == 0 and "A 1" in r.output and "D 4" in r.output
    r = cli("layout", "rdna4", "v_wmma_f16_16x16x16_f16_w64", "-o", "D", "--format", "json")
    recs = [json.loads(line) for line in r.output.splitlines()]
    assert r.exit_code == 0 and len(recs) == 256
    assert next(x for x in recs if (x["row"], x["column"]) == (5, 2))["location"] == "v0{34}.[31:16]"


# ------------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("arch,name,op,kwargs,match", [
    ("rdna3", "v_wmma_f32_16x16x16_f16", "D", {"opsel": 4}, "does not support opsel"),
    ("rdna3", "v_wmma_f16_16x16x16_f16", "D", {"opsel": 2}, "opsel must be 0 or 4"),
    ("rdna4", "v_wmma_f16_16x16x16_f16", "D", {"opsel": 4}, "does not support opsel"),
    ("rdna4", "v_swmmac_f32_16x16x32_f16", "K", {"opsel": 2}, "opsel 0..1"),
    ("rdna4", "v_swmmac_i32_16x16x64_iu4", "K", {"opsel": 1}, "opsel 0..0"),
    ("rdna4", "v_wmma_f32_16x16x16_fp8_fp8", "A", {"neg": 1}, "does not support neg"),
    ("rdna3", "v_wmma_i32_16x16x16_iu8", "A", {"neg": 4}, "not allowed for integer"),
    ("rdna3", "v_wmma_f32_16x16x16_f16", "A", {"neg": 8}, "0..7"),
    ("cdna3", "v_smfmac_f32_16x16x32_f16", "K", {"abid": 4}, "abid 0..3"),
    ("cdna3", "v_smfmac_i32_16x16x64_i8", "K", {"abid": 2}, "abid 0..1"),
    ("cdna3", "v_smfmac_f32_16x16x32_f16", "B", {"blgp": 1}, "does not support blgp"),
    ("cdna2", "v_mfma_f32_16x16x4f32", "A", {"neg": 1}, "does not support neg"),
    ("sm90", "mma.sync.m16n8k16.f16", "A", {"opsel": 4}, "does not support opsel"),
])
def test_modifiers_rejected(arch, name, op, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mi.layout_table(arch, name, op, **kwargs)


def test_bad_operands_and_names():
    with pytest.raises(ValueError, match="only for sparse"):
        mi.layout_table("rdna3", "v_wmma_f32_16x16x16_f16", "K")
    with pytest.raises(ValueError, match="outside"):
        mi.element_to_location("cdna3", "v_smfmac_f32_16x16x32_f16", "A", 0, 16)   # A is 16 x 16 stored
    with pytest.raises(ValueError, match="outside"):
        mi.index_bits_for_column("cdna3", "v_smfmac_f32_16x16x32_f16", 0, 32)
    with pytest.raises(ValueError, match="dense"):
        mi.index_bits_for_column("cdna3", "v_mfma_f32_16x16x16_f16", 0, 0)
    with pytest.raises(ValueError, match="did you mean v_wmma_f32_16x16x16_f16"):
        mi.instruction("rdna3", "v_wmma_f32_16x16x16_f15")
    assert mi.instruction("rdna3", "v_wmma_f32_16x16x16_f16_w32") is mi.instruction("rdna3", "v_wmma_f32_16x16x16_f16")


# ------------------------------------------------------------------------------------------------
# CLI


@pytest.fixture(scope="module")
def cli():
    return mi_invoker()


def test_cli_sparse_and_rdna(cli):
    r = cli("where", "cdna3", "v_smfmac_f32_16x16x32_f16", "-o", "K", "--row", "2", "--k", "31", "--abid", "3")
    assert r.exit_code == 0 and "K[2][31] = v0{50}.[31:28]" in r.output
    r = cli("where", "rdna4", "v_swmmac_f32_16x16x32_f16", "-o", "K", "--row", "2", "--col", "14")
    assert r.exit_code == 0 and "v0{18}.[13:12]" in r.output
    r = cli("layout", "rdna3", "v_wmma_f16_16x16x16_f16", "-o", "D", "--opsel", "4", "--format", "csv")
    assert r.exit_code == 0 and "v0{16}.[31:16]" in r.output
    r = cli("layout", "rdna3", "v_wmma_f32_16x16x16_f16", "-o", "B", "--neg", "2")
    assert r.exit_code == 0 and "-B[0][0]" in r.output and "v0{0}.[15:0] v0{16}.[15:0]" in r.output
    r = cli("which", "rdna3", "v_wmma_f32_16x16x16_f16_w64", "-o", "A", "--register", "1", "--lane", "50")
    assert r.exit_code == 0 and "A[2][2]" in r.output and "A[2][3]" in r.output
    r = cli("show", "gfx942", "v_smfmac_f32_16x16x32_f16")
    assert r.exit_code == 0 and "K 1" in r.output and "index" in r.output


@pytest.mark.parametrize("args", [
    ("layout", "rdna3", "v_wmma_f32_16x16x16_f16", "-o", "K"),
    ("layout", "rdna3", "v_wmma_f16_16x16x16_f16", "-o", "D", "--opsel", "1"),
    ("where", "cdna3", "v_smfmac_f32_16x16x32_f16", "-o", "A", "--row", "0", "--k", "3"),
    ("where", "cdna3", "v_smfmac_f32_16x16x32_f16", "-o", "A", "--row", "0"),
    ("where", "rdna4", "v_swmmac_f32_16x16x32_f16", "-o", "K", "--row", "0", "--k", "32"),
    ("layout", "rdna4", "v_wmma_f32_16x16x16_fp8_fp8", "-o", "A", "--neg", "1"),
    ("show", "rdna4", "v_swmmac_f32_16x16x32_f16_w64"),
    ("where", "rdna4", "v_wmma_f32_16x16x16_f16_w64", "-o", "D", "--row", "16", "--col", "0"),
    ("which", "rdna4", "v_wmma_f32_16x16x16_f16_w64", "-o", "A", "--register", "2", "--lane", "0"),
])
def test_cli_bad_input(cli, args):
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert not isinstance(r.exception, ValueError)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
