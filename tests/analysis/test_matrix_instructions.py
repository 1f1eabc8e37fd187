"""The matrix-instruction calculator (``tilecraft.analysis.matrix_instructions``) and ``tilecraft mi``.

Layouts are checked against the seed's published examples (000_…: v_mfma_f32_16x16x4f32 and
16x16x1f32) and, exhaustively, to be bijections over every operand of every computed instruction.
"""
from __future__ import annotations

import json

import pytest
from _mi_cli import mi_invoker

from tilecraft.analysis import matrix_instructions as mi

CDNA_MFMA = [(a, i.name) for a in ("cdna1", "cdna2", "cdna3") for i in mi.list_instructions(a)
             if i.family == "mfma"]
NV_MMA = [(a, i.name) for a in ("sm80", "sm90") for i in mi.list_instructions(a) if i.family == "mma.sync"]
WGMMA = [("sm90", f"wgmma.m64n{n}k{k}.{t}") for n in (8, 64, 256)
         for t, k in (("f16", 16), ("bf16", 16), ("tf32", 8), ("e4m3", 32), ("s8", 32))]
DPAS = [(a, i.name) for a in ("pvc", "dg2") for i in mi.list_instructions(a)] + \
    [("pvc", "dpas.m3n16k16.f16")] + [("pvc", f"dpas.m{m}n16k8.tf32") for m in (1, 2, 3, 4, 7)]


# ------------------------------------------------------------------------------------------------
# the seed's published examples


def test_seed_16x16x4f32_inputs_and_output():
    ins = "v_mfma_f32_16x16x4f32"
    for arch in ("cdna1", "cdna2"):
        for x in range(16):
            for y in range(4):
                lane = x + 16 * y
                assert mi.element_to_location(arch, ins, "A", x, y) == [(0, lane, (31, 0))]
                assert mi.element_to_location(arch, ins, "B", y, x) == [(0, lane, (31, 0))]
                assert mi.location_to_element(arch, ins, "A", 0, lane) == (x, y, 0)
                assert mi.location_to_element(arch, ins, "B", 0, lane) == (y, x, 0)
                for r in range(4):
                    assert mi.location_to_element(arch, ins, "D", r, lane) == (r + 4 * y, x, 0)
                    assert mi.element_to_location(arch, ins, "C", r + 4 * y, x) == [(r, lane, (31, 0))]
    # CDNA3's spelling of the same instruction
    assert mi.location_to_element("gfx942", "v_mfma_f32_16x16x4_f32", "D", 3, 5 + 16 * 2) == (11, 5, 0)


def test_seed_16x16x1f32_four_blocks():
    ins = "v_mfma_f32_16x16x1f32"
    for x in range(16):
        for y in range(4):  # y is the block (the seed's four 16x1 matrices)
            lane = x + 16 * y
            assert mi.element_to_location("cdna2", ins, "A", x, 0, block=y) == [(0, lane, (31, 0))]
            assert mi.element_to_location("cdna2", ins, "B", 0, x, block=y) == [(0, lane, (31, 0))]
            for block in range(4):
                for i in range(4):   # output register 4*block + i at lane x+16y is D_block[i+4y][x]
                    assert mi.location_to_element("cdna2", ins, "D", 4 * block + i, lane) == (i + 4 * y, x, block)


def test_amd_notation_and_packing():
    assert mi.amd_notation(1, 17, (15, 0)) == "v1{17}.[15:0]"
    # 16x16x16f16: A[i][k] in lane i + 16*(k//4), slot k%4 -> VGPR (k%4)//2, half (k%2)
    assert mi.element_to_location("cdna2", "v_mfma_f32_16x16x16f16", "A", 1, 6) == [(1, 17, (15, 0))]
    rec = [r for r in mi.layout_table("cdna2", "v_mfma_f32_16x16x16f16", "A") if (r["row"], r["column"]) == (1, 6)]
    assert rec[0]["location"] == "v1{17}.[15:0]"
    # int8: four per VGPR
    assert mi.element_to_location("cdna3", "v_mfma_i32_32x32x16_i8", "B", 13, 2) == [(1, 34, (15, 8))]
    # fp64: a VGPR pair, one accumulator row per register (H = 1)
    assert mi.element_to_location("cdna2", "v_mfma_f64_16x16x4f64", "A", 2, 3) == [(0, 50, (63, 0))]
    assert mi.element_to_location("cdna2", "v_mfma_f64_16x16x4f64", "D", 5, 7) == [(2, 23, (63, 0))]
    assert mi.location_to_element("cdna2", "v_mfma_f64_16x16x4f64", "D", 3, 23) == (5, 7, 0)
    assert mi.layout_table("cdna2", "v_mfma_f64_16x16x4f64", "D")[0]["location"] == "v[0:1]{0}"


# ------------------------------------------------------------------------------------------------
# exhaustive bijections


def _check_bijection(arch: str, name: str, op: str) -> None:
    ins = mi.instruction(arch, name)
    rows, cols = ins.shape(op)
    seen: dict = {}
    bits_total = 0
    for rec in mi.layout_table(arch, name, op):
        assert len(rec["lanes"]) == 1, rec
        key = (rec["register"], rec["lanes"][0], tuple(rec["bits"]))
        assert key not in seen, (op, rec, seen.get(key))
        seen[key] = (rec["row"], rec["column"], rec["block"])
        assert 0 <= rec["lanes"][0] < ins.lanes
        bits_total += rec["bits"][0] - rec["bits"][1] + 1
    assert len(seen) == rows * cols * ins.blocks
    # ranges of one register never overlap, and the operand fills its registers exactly
    nreg = mi._register_count(ins, op)
    per = 64 if mi._elem_bits(ins, op) == 64 and ins.family != "mfma" else 32
    unused = 0
    if ins.family == "dpas" and op == "A" and ins.lanes == 16 and ins.in_type != "tf32":
        per = 16   # PVC: each work-item carries 16 bits of an A row
    if ins.family == "dpas" and op == "A" and ins.in_type == "tf32" and ins.m % 2:
        unused = 8 * 32   # tf32, odd M: work-items 8-15 of the last component are ignored
    assert bits_total == nreg * ins.lanes * per - unused, (bits_total, nreg)
    assert max(r for r, _, _ in seen) < nreg
    # the inverse agrees with the forward map everywhere
    for (reg, lane, (hi, lo)), el in seen.items():
        assert mi.location_to_element(arch, name, op, reg, lane, bit=lo) == el


@pytest.mark.parametrize("arch,name", CDNA_MFMA)
def test_cdna_mfma_bijection(arch, name):
    for op in "ABCD":
        _check_bijection(arch, name, op)


def test_every_cdna_mfma_is_covered():
    assert len(CDNA_MFMA) == 20 + 27 + (46 - 14)   # cdna3 less its 14 SMFMAC
    assert all(mi.layout_supported(mi.instruction(a, n)) for a, n in CDNA_MFMA)


@pytest.mark.parametrize("arch,name", NV_MMA)
def test_mma_sync_bijection(arch, name):
    for op in "ABCD":
        _check_bijection(arch, name, op)


def test_mma_sync_table_examples():
    # m16n8k16 f16: lane 5 (g=1, t=1) a0 = A[1][2..3], a1 = A[9][2..3], a2 = A[1][10..11]
    n = "mma.sync.m16n8k16.f16"
    assert mi.element_to_location("sm80", n, "A", 9, 3) == [(1, 5, (31, 16))]
    assert mi.element_to_location("sm80", n, "A", 1, 10) == [(2, 5, (15, 0))]
    assert mi.element_to_location("sm80", n, "D", 9, 3) == [(3, 5, (31, 0))]
    assert mi.element_to_location("a100", "mma.sync.m8n8k4.f64", "C", 2, 7) == [(1, 11, (63, 0))]
    assert "mma.sync.m16n8k16.f64" not in {i.name for i in mi.list_instructions("sm80")}
    assert "mma.sync.m16n8k16.f64" in {i.name for i in mi.list_instructions("sm90")}


@pytest.mark.parametrize("arch,name", WGMMA)
def test_wgmma_bijection(arch, name):
    for op in "ACD":
        _check_bijection(arch, name, op)
    ins = mi.instruction(arch, name)
    assert ins.registers("D") == ins.n // 2   # N/2 f32 accumulators per thread
    with pytest.raises(ValueError, match="shared memory"):
        mi.element_to_location(arch, name, "B", 0, 0)


def test_wgmma_accumulator_formula():
    # element i -> row 16w + g + 8*((i>>1)&1), col 8*(i>>2) + 2t + (i&1)
    for thread in (0, 37, 101, 127):
        w, g, t = thread // 32, (thread % 32) >> 2, thread & 3
        for i in range(64):
            row = 16 * w + g + 8 * ((i >> 1) & 1)
            col = 8 * (i >> 2) + 2 * t + (i & 1)
            assert mi.location_to_element("h100", "wgmma.m64n128k16.bf16", "D", i, thread) == (row, col, 0)
    with pytest.raises(ValueError, match="multiple of 8"):
        mi.instruction("sm90", "wgmma.m64n12k16.f16")


@pytest.mark.parametrize("arch,name", DPAS)
def test_dpas_bijection(arch, name):
    for op in "ABCD":
        _check_bijection(arch, name, op)
    assert mi.layout_supported(mi.instruction(arch, name))


def test_pvc_tf32_a_from_the_khronos_spec():
    # cl_intel_subgroup_matrix_multiply_accumulate_tf32: "a" is ceil(M/2) floats per work-item; "for M
    # equal to one, only the first K work-items contribute to the matrix a ...; for other values of M,
    # the first K work-items contribute the even rows of the matrix a, and the remaining work-items
    # contribute the odd rows"
    for m in range(1, 9):
        name = f"dpas.m{m}n16k8.tf32"
        assert mi.instruction("pvc", name).registers("A") == mi._register_count(mi.instruction("pvc", name), "A") \
            == (m + 1) // 2
        for i in range(m):
            for k in range(8):
                (loc,) = mi.element_to_location("pvc", name, "A", i, k)
                assert (loc.lane < 8) == (i % 2 == 0) and loc.lane % 8 == k and loc.bits == (31, 0)
    assert mi.location_to_elements("xe-hpc", "dpas.m1n16k8.tf32", "A", 0, 9) == []   # ignored
    assert mi.location_to_element("pvc", "dpas.m8n16k8.tf32", "A", 3, 13) == (7, 5, 0)


@pytest.mark.parametrize("m", [1, 2, 4, 8])
def test_pvc_tf32_reproduces_the_spec_authors_emulation(m):
    # The emulated intel_sub_group_tf32_tf32_matrix_mad_k8 of the spec's author (bashbaug/
    # SimpleOpenCLSamples, matrix_helpers_tf32.cl): result row r of work-item n accumulates
    # sub_group_broadcast(a[r // 2], k + 8 * (r % 2)) * b[k] over k, b[k] of work-item n = B[k][n].
    # Registers filled from our layout and fed to that code give A @ B + C (float64 reference).
    import numpy as np
    rng = np.random.default_rng(m)
    A, B, C = rng.standard_normal((m, 8)), rng.standard_normal((8, 16)), rng.standard_normal((m, 16))
    name = f"dpas.m{m}n16k8.tf32"
    a = np.full(((m + 1) // 2, 16), np.nan)
    b = np.full((8, 16), np.nan)
    acc = np.full((m, 16), np.nan)
    for (mat, regs, op) in ((A, a, "A"), (B, b, "B"), (C, acc, "C")):
        for i in range(mat.shape[0]):
            for j in range(mat.shape[1]):
                (loc,) = mi.element_to_location("pvc", name, op, i, j)
                assert np.isnan(regs[loc.register, loc.lane])
                regs[loc.register, loc.lane] = mat[i, j]
    res = acc.copy()
    for n in range(16):
        for r in range(m):
            for k in range(8):
                res[r, n] += a[r // 2, k + 8 * (r % 2)] * b[k, n]
    np.testing.assert_allclose(res, A @ B + C, rtol=1e-12)


def test_dpas_examples_and_label():
    # PVC fp16: work-item w holds A[r][w]; B VNNI: word d of work-item n holds B[2d..2d+1][n]
    assert mi.element_to_location("pvc", "dpas.m8n16k16.f16", "A", 3, 11) == [(3, 11, (15, 0))]
    assert mi.element_to_location("pvc", "dpas.m8n16k16.f16", "B", 7, 5) == [(3, 5, (31, 16))]
    assert mi.element_to_location("xe-hpg", "dpas.m8n8k32.s8", "A", 2, 13) == [(2, 3, (15, 8))]
    assert mi.element_to_location("dg2", "dpas.m8n8k16.f16", "D", 6, 7) == [(6, 7, (31, 0))]
    assert any("implementation-defined" in n for n in mi.instruction("pvc", "dpas.m8n16k16.f16").notes)


# ------------------------------------------------------------------------------------------------
# modifiers


def test_cbsz_abid_broadcast():
    ins = "v_mfma_f32_16x16x1f32"   # 4 blocks, A block b in lanes 16b..16b+15
    for i in range(16):
        # cbsz=1, abid=1: blocks 0,1 read block 1; blocks 2,3 read block 3
        lanes = [mi.element_to_location("cdna2", ins, "A", i, 0, block=b, cbsz=1, abid=1)[0].lane for b in range(4)]
        assert lanes == [16 + i, 16 + i, 48 + i, 48 + i]
        # cbsz=2, abid=2: every block reads block 2
        lanes = [mi.element_to_location("cdna1", ins, "A", i, 0, block=b, cbsz=2, abid=2)[0].lane for b in range(4)]
        assert lanes == [32 + i] * 4
    # the broadcasting lanes feed several blocks, the others none; B is untouched
    hits = mi.location_to_elements("cdna2", ins, "A", 0, 16 + 4, cbsz=1, abid=1)
    assert sorted(e.block for e, _ in hits) == [0, 1]
    assert mi.location_to_element("cdna2", ins, "A", 0, 20, cbsz=1, abid=1) == (4, 0, 1)
    assert mi.location_to_element("cdna2", ins, "A", 0, 4, cbsz=1, abid=1) is None
    assert mi.element_to_location("cdna2", ins, "B", 0, 3, block=0, cbsz=1, abid=1) == [(0, 3, (31, 0))]
    # 16-block 4x4x4f16: cbsz=2, abid=1 -> block 1 feeds 0-3, block 5 feeds 4-7 (the seed's example)
    src = {b: mi.element_to_location("cdna3", "v_mfma_f32_4x4x4_16b_f16", "A", 0, 0, block=b, cbsz=2, abid=1)[0].lane // 4
           for b in range(16)}
    assert src == {b: (b // 4) * 4 + 1 for b in range(16)}


@pytest.mark.parametrize("blgp", range(1, 8))
def test_blgp_lane_groups(blgp):
    ins = "v_mfma_f32_16x16x4f32"   # B[k][j] read at lane j + 16k
    expect = {1: lambda L: L % 32, 2: lambda L: 32 + L % 32, 3: lambda L: (L + 16) % 64}.get(
        blgp, lambda L: 16 * (blgp - 4) + L % 16)
    for k in range(4):
        for j in range(16):
            L = j + 16 * k
            (loc,) = mi.element_to_location("cdna2", ins, "B", k, j, blgp=blgp)
            assert loc.lane == expect(L)
            assert loc.lane != L or blgp in (1, 2) or (blgp - 4) == k
            # A and D do not move
            assert mi.element_to_location("cdna2", ins, "A", j, k, blgp=blgp)[0].lane == L
    if blgp == 3:   # the seed: lane 0's data goes to lane 48, lane 16's to lane 0
        assert mi.location_to_element("cdna2", ins, "B", 0, 0, blgp=3) == (3, 0, 0)
        assert mi.location_to_element("cdna2", ins, "B", 0, 16, blgp=3) == (0, 0, 0)
    if blgp == 1:
        assert mi.location_to_element("cdna2", ins, "B", 0, 40, blgp=1) is None
        assert sorted(e for e, _ in mi.location_to_elements("cdna2", ins, "B", 0, 8, blgp=1)) == [(0, 8, 0), (2, 8, 0)]


@pytest.mark.parametrize("arch,name,kwargs,match", [
    ("cdna2", "v_mfma_f32_16x16x4f32", {"cbsz": 1}, "does not support cbsz"),
    ("cdna2", "v_mfma_f32_16x16x4f32", {"abid": 1}, "does not support abid"),
    ("cdna3", "v_mfma_f32_16x16x8_xf32", {"blgp": 2}, "does not support blgp"),
    ("cdna2", "v_mfma_f64_16x16x4f64", {"blgp": 1}, "does not support blgp"),
    ("sm80", "mma.sync.m16n8k16.f16", {"blgp": 1}, "does not support blgp"),
    ("cdna2", "v_mfma_f32_16x16x1f32", {"cbsz": 3}, "has 4"),
    ("cdna2", "v_mfma_f32_16x16x1f32", {"cbsz": 1, "abid": 2}, "abid=2"),
    ("cdna2", "v_mfma_f32_16x16x4f32", {"blgp": 8}, "0..7"),
])
def test_modifiers_rejected(arch, name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mi.element_to_location(arch, name, "A", 0, 0, **kwargs)
    with pytest.raises(ValueError, match=match):
        mi.layout_table(arch, name, "B", **kwargs)


# ------------------------------------------------------------------------------------------------
# facts, aliases, bad input


def test_instruction_facts():
    ins = mi.instruction("mi250x", "v_mfma_f32_32x32x8f16")
    assert (ins.m, ins.n, ins.k, ins.blocks, ins.cycles) == (32, 32, 8, 1, 64)
    assert ins.flops == 2 * 32 * 32 * 8
    assert ins.flops_per_unit_per_clock == ins.flops * 4 / 64 == 1024
    assert (ins.registers("A"), ins.registers("B"), ins.registers("D")) == (2, 2, 16)
    assert ins.modifiers == ("blgp",) and ins.coexec is True
    ins = mi.instruction("cdna1", "v_mfma_f32_32x32x1f32")
    assert ins.modifiers == ("cbsz", "abid", "blgp") and ins.registers("D") == 32 and ins.flops == 4096
    assert mi.instruction("gfx90a", "v_mfma_f64_16x16x4f64").registers("D") == 8
    assert mi.instruction("rx7900", "v_wmma_f32_16x16x16_f16").flops_per_unit_per_clock == 512
    assert mi.instruction("a100", "mma.sync.m16n8k16.f16").flops_per_unit_per_clock == 2048
    assert mi.instruction("cdna3", "v_smfmac_f32_16x16x32_f16").registers("A") == 2


@pytest.mark.parametrize("alias,canon", [
    ("gfx908", "cdna1"), ("MI100", "cdna1"), ("gfx90a", "cdna2"), ("mi250x", "cdna2"), ("mi210", "cdna2"),
    ("gfx942", "cdna3"), ("mi300x", "cdna3"), ("gfx940", "cdna3"), ("gfx1100", "rdna3"), ("gfx1200", "rdna4"),
    ("sm_80", "sm80"), ("a100", "sm80"), ("sm_90", "sm90"), ("H100", "sm90"), ("h200", "sm90"),
    ("pvc", "pvc"), ("xe-hpc", "pvc"), ("arc", "dg2"), ("xe-hpg", "dg2"),
])
def test_aliases(alias, canon):
    assert mi.resolve_arch(alias) == canon


def test_unknown_names_close_matches():
    with pytest.raises(ValueError, match="did you mean.*mi300x"):
        mi.resolve_arch("mi300xx")
    with pytest.raises(ValueError, match="did you mean.*gfx90a"):
        mi.resolve_arch("gfx90")
    with pytest.raises(ValueError, match="did you mean v_mfma_f32_16x16x4f32"):
        mi.instruction("cdna2", "v_mfma_f32_16x16x4f31")
    assert mi.instruction("cdna2", "v_mfma_f32_16x16x4_f32").name == "v_mfma_f32_16x16x4f32"  # the other spelling
    with pytest.raises(ValueError, match="unknown operand"):
        mi.layout_table("cdna2", "v_mfma_f32_16x16x4f32", "E")


def test_bad_indices_and_uncomputed_layouts():
    n = "v_mfma_f32_16x16x1f32"
    with pytest.raises(ValueError, match="outside"):
        mi.element_to_location("cdna2", n, "A", 16, 0)
    with pytest.raises(ValueError, match="outside"):
        mi.element_to_location("cdna2", n, "A", 0, 1)
    with pytest.raises(ValueError, match="block 4 is beyond"):
        mi.element_to_location("cdna2", n, "D", 0, 0, block=4)
    with pytest.raises(ValueError, match="lane 64"):
        mi.location_to_element("cdna2", n, "D", 0, 64)
    with pytest.raises(ValueError, match="register 16"):
        mi.location_to_element("cdna2", n, "D", 16, 0)
    with pytest.raises(ValueError, match="wave64 SWMMAC layouts are not computed"):
        mi.layout_table("rdna4", "v_swmmac_f32_16x16x32_f16_w64", "A")
    with pytest.raises(ValueError, match="outside"):
        mi.element_to_location("pvc", "dpas.m3n16k8.tf32", "A", 3, 0)
    with pytest.raises(ValueError, match="register 2"):
        mi.location_to_element("pvc", "dpas.m3n16k8.tf32", "A", 2, 0)


def test_data_shipped_in_package():
    assert mi.DATA_FILE.is_file() and mi.DATA_FILE.parent.name == "data"
    assert len(mi.list_instructions("cdna3")) == 46 and len(mi.list_instructions("rdna4")) == 22


# ------------------------------------------------------------------------------------------------
# CLI through a fresh Typer app


@pytest.fixture(scope="module")
def cli():
    return mi_invoker()


def test_cli_list_and_show(cli):
    r = cli("list", "mi250x")
    assert r.exit_code == 0 and "v_mfma_f32_16x16x4f32" in r.output and "cdna2" in r.output
    r = cli("list", "sm_90", "--json")
    assert r.exit_code == 0 and any(d["family"] == "wgmma" for d in json.loads(r.output))
    r = cli("show", "gfx942", "v_mfma_f32_32x32x2_f32")
    assert r.exit_code == 0 and "32x32x2" in r.output and "blgp" in r.output and "FLOPs/CU/clk" in r.output
    r = cli("show", "pvc", "dpas.m8n16k16.f16")
    assert r.exit_code == 0 and "implementation-defined" in r.output


def test_cli_layout_formats(cli):
    r = cli("layout", "cdna2", "v_mfma_f32_16x16x16f16", "--operand", "A", "--format", "json")
    assert r.exit_code == 0
    recs = [json.loads(line) for line in r.output.splitlines()]
    assert len(recs) == 16 * 16
    rec = next(x for x in recs if (x["row"], x["column"]) == (1, 6))
    assert rec["location"] == "v1{17}.[15:0]" and rec["lanes"] == [17] and rec["bits"] == [15, 0]
    assert {"row", "column", "block", "register", "lanes", "bits", "location"} <= set(rec)
    r = cli("layout", "cdna1", "v_mfma_f32_4x4x1f32", "-o", "D", "--format", "csv")
    assert r.exit_code == 0 and len(r.output.splitlines()) == 1 + 4 * 4 * 16
    r = cli("layout", "sm80", "mma.sync.m16n8k8.tf32", "--operand", "B", "--format", "markdown")
    assert r.exit_code == 0 and r.output.startswith("| element") and "T5:b1" in r.output
    r = cli("layout", "cdna2", "v_mfma_f32_16x16x1f32", "--operand", "A", "--cbsz", "2", "--abid", "3")
    assert r.exit_code == 0 and "A[0][0].B0" in r.output and "v0{48}" in r.output


def test_cli_where_which(cli):
    r = cli("where", "pvc", "dpas.m8n16k8.tf32", "--operand", "A", "--row", "3", "--col", "5")
    assert r.exit_code == 0 and "WI13:a1" in r.output
    r = cli("which", "pvc", "dpas.m1n16k8.tf32", "--operand", "A", "--register", "0", "--lane", "12")
    assert r.exit_code == 0 and "not read" in r.output
    r = cli("where", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "A", "--row", "3", "--col", "2")
    assert r.exit_code == 0 and "v0{35}" in r.output
    r = cli("where", "cdna2", "v_mfma_f32_16x16x1f32", "--operand", "A", "--row", "3", "--col", "0",
            "--block", "2", "--cbsz", "1", "--abid", "1")
    assert r.exit_code == 0 and "v0{51}" in r.output
    r = cli("which", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "D", "--register", "2", "--lane", "37")
    assert r.exit_code == 0 and "D[10][5]" in r.output
    r = cli("which", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "B", "--register", "0", "--lane", "40",
            "--blgp", "1")
    assert r.exit_code == 0 and "not read" in r.output


@pytest.mark.parametrize("args", [
    ("list", "mi3000"),
    ("show", "cdna3", "v_mfma_nope"),
    ("layout", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "A", "--cbsz", "1"),
    ("layout", "rdna4", "v_swmmac_f32_16x16x32_f16_w64", "--operand", "A"),
    ("where", "pvc", "dpas.m8n16k8.tf32", "--operand", "A", "--row", "0", "--col", "8"),
    ("where", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "A", "--row", "99", "--col", "0"),
    ("where", "cdna2", "v_mfma_f32_16x16x1f32", "--operand", "A", "--row", "0", "--col", "0", "--block", "9"),
    ("which", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "D", "--register", "9", "--lane", "0"),
    ("layout", "cdna2", "v_mfma_f32_16x16x4f32", "--operand", "E"),
])
def test_cli_bad_input(cli, args):
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and not isinstance(r.exception, ValueError)
    if args[-1] != "E":   # typer's own usage error for a bad enum choice
        assert len([ln for ln in r.output.splitlines() if ln.strip()]) == 1 and r.output.startswith("error:")


def test_llvm_spelling_from_a_disassembly_is_accepted():
    """`tilecraft inspect` prints LLVM's v_mfma_f32_32x32x8f16; `mi show` refused it before."""
    from tilecraft.analysis import matrix_instructions as mi_mod

    assert mi_mod.instruction("gfx942", "v_mfma_f32_32x32x8f16").name == "v_mfma_f32_32x32x8_f16"
    assert mi_mod.instruction("gfx90a", "v_mfma_f32_16x16x16_bf16_1k").name == "v_mfma_f32_16x16x16bf16_1k"


def test_wgmma_b_has_no_registers_and_signed_reads_are_marked():
    """`mi show` gave wgmma's B 16 registers while `mi where` said it has no register layout; `mi where` dropped
    the signed marker that `mi layout` shows."""
    assert mi.instruction("sm90", "wgmma.m64n256k16.f16").registers("B") == 0
    invoke = mi_invoker()
    res = invoke("where", "rdna3", "v_wmma_i32_16x16x16_iu8", "-o", "A", "--row", "0", "--col", "0", "--neg", "1")
    assert res.exit_code == 0 and "A[0][0] (signed)" in res.output, res.output
