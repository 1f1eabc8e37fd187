"""Tests of the instruction census (tilecraft.analysis.compiled), tilecraft.analysis.inspect (the
ladder, user kernels, GEMM and attention as tilecraft launches them) and the
``tilecraft inspect`` command group (tilecraft.cli_inspect) on a fresh typer app.

The kernels are written to a temporary .py file, which also exercises compiling a user's kernel
given by file path. Compiles run in child processes without TRITON_INTERPRET; Triton's cache makes
repeated ones cheap.
"""
from __future__ import annotations

import json
import textwrap

import pytest
import typer
from typer.testing import CliRunner

from tilecraft.analysis.compiled import (
    census_amdgcn,
    census_ptx,
    census_sass,
    census_summary,
    check_function,
)
from tilecraft.analysis.inspect import (
    attention_jobs,
    error_summary,
    gemm_jobs,
    inspect_attention,
    inspect_function,
    inspect_gemm,
    inspect_stencil,
    parse_constexprs,
    parse_signature,
    parse_targets,
    render_json,
    render_markdown,
    render_text,
)
from tilecraft.cli_inspect import register

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def stream_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m, cache_modifier=".cs")


@triton.jit
def dot_tile(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    idx = r[:, None] * BLOCK + r[None, :]
    tl.store(c_ptr + idx, tl.dot(tl.load(a_ptr + idx), tl.load(b_ptr + idx)))
'''
COPY_SIG = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32:16"}
DOT16_SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16"}
DOT64_SIG = {"a_ptr": "*fp64:16", "b_ptr": "*fp64:16", "c_ptr": "*fp64:16"}


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("user_kernels") / "copy.py"  # 'copy' must not clash with the stdlib
    path.write_text(textwrap.dedent(KERNELS))
    return str(path)


@pytest.fixture(scope="module")
def copy_rows(kernel_file):
    return {r.target: r for r in inspect_function(kernel_file, "stream_copy", COPY_SIG, {"BLOCK": 1024},
                                                  ["sm90", "gfx942"])}


@pytest.fixture(scope="module")
def dot_rows(kernel_file):
    return {r.target: r for r in inspect_function(kernel_file, "dot_tile", DOT16_SIG, {"BLOCK": 64},
                                                  ["sm90", "sm80", "gfx942", "gfx90a"])}


# ---- census parsers on text ------------------------------------------------------------------------


def test_census_ptx_text() -> None:
    ptx = textwrap.dedent("""\
        @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
        ld.global.nc.v2.b64 { %rd5, %rd6 }, [ %rd2 + 0 ];   // 128 bits too
        ld.global.b32 %r9, [ %rd3 ];
        ld.global.cg.b32 %r10, [ %rd3 ];   // cached in L2 only
        @!%p2 st.global.cs.v2.b32 [ %rd3 + 0 ], { %r1, %r2 };
        st.global.L1::no_allocate.b16 [ %rd4 ], %rs1;
        ld.shared.v4.b32 { %r1, %r2, %r3, %r4 }, [ %r5 ];
        st.shared.b32 [ %r5 ], %r1;
        ldmatrix.sync.aligned.m8n8.x4.shared.b16 { %r1, %r2, %r3, %r4 }, [ %r6 ];
        cp.async.cg.shared.global [ %r7 + 0 ], [ %rd8 + 0 ], 16, %r9;
        cp.async.cg.shared.global [ %r7 + 0 ], [ %rd8 + 0 ], 0x10, %r9;
        cp.async.ca.shared.global [ %r7 + 0 ], [ %rd8 + 0 ], 0x4, %r9;
        cp.async.commit_group;
        mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %f1, %f2, %f3, %f4 }, { %r1 }, { %r2 }, { %f1 };
        wgmma.fence.sync.aligned;
        wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {...}, %rd1, %rd2, 1, 1, 1, 0, 1;
        wgmma.commit_group.sync.aligned;
        bar.sync 	0, 128;
        barrier.sync 	1;
        bar.arrive 9, 256;
        @%p3 mbarrier.arrive.shared::cta.b64 _, [%r1];
        """)
    c = census_ptx(ptx)
    assert c["bar_sync"] == 2 and c["bar_arrive"] == 1  # CTA / named barriers; the mbarrier is not one
    assert c["global_load_128b"] == 2 and c["global_load_32b"] == 2 and c["global_load_cg"] == 1
    assert c["global_store_64b"] == 1 and c["global_store_16b"] == 1 and c["global_store_nt"] == 2
    assert c["shared_load_128b"] == 1 and c["shared_store_32b"] == 1 and c["ldmatrix"] == 1
    assert c["cp_async_128b"] == 2 and c["cp_async_32b"] == 1  # sizes in decimal or hex (Triton: 0x10)
    assert c["matrix:mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] == 1
    assert c["matrix:wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"] == 1
    assert sum(k.startswith("matrix:") for k in c) == 2  # fence / commit_group are not matrix ops
    s = census_summary(c)
    assert (s["global_loads"], s["global_loads_128b"], s["nontemporal_stores"]) == (4, 2, 2)


def test_census_amdgcn_text() -> None:
    gcn = textwrap.dedent("""\
        \tglobal_load_dwordx4 v[0:3], v[0:1], off
        \tglobal_load_dwordx2 v[4:5], v[0:1], off offset:16
        \tbuffer_load_dword v6, v1, s[0:3], 0 offen
        \tglobal_store_dwordx4 v[4:5], v[0:3], off nt
        \tglobal_store_dwordx4 v[4:5], v[0:3], off glc slc
        \tglobal_store_short v[4:5], v7, off
        \tds_read_b128 v[8:11], v2
        \tds_read2_b64 v[8:11], v2 offset1:8
        \tds_write_b32 v2, v3 ; a comment with global_load_dword
        \tv_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]
        \tv_mfma_f64_16x16x4_f64 v[0:7], v[0:1], v[2:3], v[0:7]
        \tscratch_store_dword off, v1, s33
        ; NumVgprs: 12
        """)
    c = census_amdgcn(gcn)
    assert c["global_load_128b"] == 1 and c["global_load_64b"] == 1 and c["global_load_32b"] == 1
    assert c["buffer_load"] == 1
    assert c["global_store_128b"] == 2 and c["global_store_16b"] == 1 and c["global_store_nt"] == 2
    assert c["shared_load_128b"] == 2 and c["shared_store_32b"] == 1
    assert c["matrix:v_mfma_f32_32x32x8_f16"] == 1 and c["matrix:v_mfma_f64_16x16x4_f64"] == 1
    assert c["scratch_store"] == 1


def test_census_sass_text() -> None:
    sass = textwrap.dedent("""\
        /*0110*/              @!P0 LDG.E.128 R4, desc[UR4][R8.64] ;   /* 0x0000000408048981 */
        /*0120*/                   LDG.E.64 R6, desc[UR4][R8.64] ;    /* 0x0000000408048981 */
        /*0150*/              @!P0 STG.E.EF.128 desc[UR4][R2.64], R4 ; /* 0x0000000402008986 */
        /*0160*/                   LDS.128 R8, [R2] ;                 /* 0x0000000402008986 */
        /*0170*/                   LDSM.16.M88.4 R8, [R2] ;           /* 0x0000000402008986 */
        /*0350*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4].tnspB, RZ, !UPT ;   /* 0x40e0 */
        /*0360*/                   HMMA.16816.F32 R24, R4, R8, R24 ;  /* 0x40e0 */
        """)
    c = census_sass(sass)
    assert c["sass_global_load_128b"] == 1 and c["sass_global_load_64b"] == 1
    assert c["sass_global_store_128b"] == 1 and c["sass_global_store_nt"] == 1
    assert c["sass_shared_load_128b"] == 1 and c["sass:LDSM"] == 1
    assert c["sass:HGMMA.64x64x16.F32"] == 1 and c["sass:HMMA.16816.F32"] == 1


# ---- compiled kernels --------------------------------------------------------------------------------


def test_vectorised_streaming_copy(copy_rows) -> None:
    sm90, gfx = copy_rows["sm90"].resources, copy_rows["gfx942"].resources
    assert sm90.error is None and gfx.error is None, (sm90.error, gfx.error)
    # sm90: ld.global.v4.b32 / st.global.cs.v4.b32, and the same in the SASS (LDG.E.128, STG.E.EF.128)
    assert sm90.census["global_load_128b"] > 0 and sm90.census["global_store_128b"] > 0
    assert sm90.census["global_store_nt"] == sm90.census["global_store_128b"]
    assert sm90.census.get("sass_global_load_128b", 0) > 0  # SASS via the cuobjdump Triton ships
    assert sm90.census.get("sass_global_store_nt", 0) > 0
    # gfx942: global_load_dwordx4 / global_store_dwordx4 ... nt
    assert gfx.census["global_load_128b"] > 0 and gfx.census["global_store_nt"] > 0
    assert census_summary(gfx.census)["global_loads"] == gfx.census["global_load_128b"]


def test_dot_fp16_matrix_instructions(dot_rows) -> None:
    for row in dot_rows.values():
        assert row.error is None, row.error
    matrix = {t: census_summary(r.resources.census)["matrix"] for t, r in dot_rows.items()}
    assert any(k.startswith("wgmma.mma_async") and ".m64n" in k and "k16.f32.f16.f16" in k for k in matrix["sm90"])
    assert any(k.startswith("mma.sync.aligned.m16n8k16") and k.endswith("f32.f16.f16.f32") for k in matrix["sm80"])
    for t in ("gfx942", "gfx90a"):
        assert matrix[t] and all(k.startswith("v_mfma_f32_") and "f16" in k for k in matrix[t]), matrix[t]
    assert any(k.startswith("sass:HGMMA") for k in dot_rows["sm90"].resources.census)
    assert any(k.startswith("sass:HMMA.16816") for k in dot_rows["sm80"].resources.census)
    # the plain cross_compile fields still work, and as_dict carries the census
    d = dot_rows["gfx942"].resources.as_dict()
    assert d["census"] and d["agprs"] is not None and d["occupancy_unit"] == "waves/SIMD"


def test_renderers(dot_rows, copy_rows) -> None:
    from rich.console import Console

    rows = [*dot_rows.values(), *copy_rows.values()]
    console = Console(width=250, record=True)
    console.print(render_text(rows, "t"))
    text = console.export_text()
    assert "wgmma.mma_async.m64n" in text and "waves/SIMD" in text and "warps/SM" in text
    md = render_markdown(rows, "t")
    assert md.count("\n| ") == len(rows) + 1 and "v_mfma_f32" in md
    data = json.loads(render_json(rows, shape=[1, 2, 3]))
    assert data["shape"] == [1, 2, 3] and len(data["rows"]) == len(rows)
    assert data["rows"][0]["summary"]["matrix"]


def test_inspect_stencil_two_variants_two_targets() -> None:
    rows = inspect_stencil(["baseline", "nontemporal"], "fp64", 2, (64, 64, 64), ["sm90", "gfx942"])
    assert [(r.label.split()[0], r.target) for r in rows] == [
        ("baseline", "sm90"), ("baseline", "gfx942"), ("nontemporal", "sm90"), ("nontemporal", "gfx942")]
    for r in rows:
        assert r.error is None, r.error
        assert r.resources.registers and r.resources.census is not None
        nt = census_summary(r.resources.census)["nontemporal_stores"]
        assert (nt > 0) == r.label.startswith("nontemporal"), (r.label, r.target, r.resources.census)


def test_check_function_and_parsers(kernel_file) -> None:
    assert check_function(kernel_file, "stream_copy", COPY_SIG, {"BLOCK": 8}) == ["x_ptr", "y_ptr", "n", "BLOCK"]
    with pytest.raises(ValueError, match="no 'missing'"):
        check_function(kernel_file, "missing", COPY_SIG, {})
    with pytest.raises(ValueError, match="does not have"):
        check_function(kernel_file, "stream_copy", {**COPY_SIG, "zz": "i32"}, {"BLOCK": 8})
    assert parse_signature("x_ptr=*fp32:16, n=i32") == {"x_ptr": "*fp32:16", "n": "i32"}
    for bad in ("x_ptr", "x_ptr=*fp33", "x=i32,x=i32", "1x=i32"):
        with pytest.raises(ValueError):
            parse_signature(bad)
    assert parse_constexprs(["BLOCK=128,EVEN=True", "S=1.5"]) == {"BLOCK": 128, "EVEN": True, "S": 1.5}
    assert parse_targets("gfx942, sm90") == ["gfx942", "sm90"]
    with pytest.raises(ValueError, match="unknown target"):
        parse_targets("sm70")


# ---- the command line --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli():
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_cli_kernel_file(cli, kernel_file) -> None:
    r = cli("inspect", "kernel", kernel_file, "stream_copy", "--signature", "x_ptr=*fp32:16,y_ptr=*fp32:16,n=i32:16",
            "--constexpr", "BLOCK=1024", "--targets", "sm90,gfx942", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [row["target"] for row in data["rows"]] == ["sm90", "gfx942"]
    assert all(row["summary"]["nontemporal_stores"] > 0 for row in data["rows"])


def test_cli_stencil_markdown(cli) -> None:
    r = cli("inspect", "stencil", "--variants", "baseline,nontemporal", "--targets", "sm90,gfx942",
            "--shape", "64", "64", "64", "--format", "markdown")
    assert r.exit_code == 0, r.output
    assert r.output.count("| sm90 |") == 2 and r.output.count("| gfx942 |") == 2


def test_cli_compile_failure_is_a_row_and_exit_1(cli, kernel_file) -> None:
    # fp64 tl.dot: Triton 3.6 cannot lower it for gfx942; sm90 still compiles and is printed
    r = cli("inspect", "kernel", kernel_file, "dot_tile", "--signature", "a_ptr=*fp64:16,b_ptr=*fp64:16,c_ptr=*fp64:16",
            "--constexpr", "BLOCK=32", "--targets", "sm90,gfx942", "--format", "json")
    assert r.exit_code == 1, r.output
    rows = {row["target"]: row for row in json.loads(r.output)["rows"]}
    assert rows["sm90"]["error"] is None and rows["sm90"]["summary"]["matrix"]
    assert rows["gfx942"]["error"]


@pytest.mark.parametrize("args", [
    ["stencil", "--targets", "sm70"],
    ["stencil", "--variants", "bogus"],
    ["stencil", "--format", "xml"],
    ["stencil", "--dtype", "fp16"],
    ["kernel", "{file}", "stream_copy", "--signature", "x_ptr=*fp33"],
    ["kernel", "{file}", "stream_copy", "--signature", "x_ptr"],
    ["kernel", "{file}", "no_such_function", "--signature", "x_ptr=*fp32"],
    ["kernel", "{file}", "stream_copy", "--signature", "x_ptr=*fp32,y_ptr=*fp32,n=i32,zz=i32",
     "--constexpr", "BLOCK=8"],
    ["kernel", "{file}", "stream_copy", "--signature", "x_ptr=*fp32", "--constexpr", "BLOCK=8"],
    ["kernel", "/no/such/file.py", "f", "--signature", "x_ptr=*fp32"],
    ["kernel", "{file}", "stream_copy", "--signature", "x_ptr=*fp32", "--targets", "sm70"],
    ["gemm", "--dtype", "bf17"],
    ["gemm", "--layout", "NX"],
    ["gemm", "--targets", "sm90,sm70"],
    ["gemm", "--shape", "0", "8", "8"],
    ["gemm", "--shape", "8", "x", "8"],
    ["gemm", "--shape", "100000000000", "100000000000", "100000000000"],
    ["gemm", "--format", "xml"],
    ["attention", "--dtype", "fp32"],
    ["attention", "--head-dim", "300"],
    ["attention", "--heads", "16", "--kv-heads", "5"],
    ["attention", "--seqlen", "0"],
    ["attention", "--targets", "gfx1100"],
])
def test_cli_bad_input_exits_2(cli, kernel_file, args) -> None:
    r = cli("inspect", *[a.replace("{file}", kernel_file) for a in args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error:") and r.output.count("\n") == 1 and "Traceback" not in r.output


# ---- GEMM and attention as tilecraft would launch them --------------------------------------------


def test_inspect_gemm_sm90_wgmma_and_gfx942_mfma() -> None:
    rows = {r.target: r for r in inspect_gemm("bf16", (8192, 8192, 8192), "NN", ["sm90", "gfx942"])}
    sm90, gfx = rows["sm90"], rows["gfx942"]
    assert sm90.error is None and gfx.error is None, (sm90.error, gfx.error)
    # sm90: the warp-specialised Gluon kernel (measured faster there) with its 128x256 tile, wgmma,
    # no global loads (TMA)
    assert sm90.label.startswith("matmul_ws_kernel (gluon 128x256x64 w8 s4")
    s = census_summary(sm90.resources.census)
    assert any(k.startswith("wgmma.mma_async") and "bf16" in k for k in s["matrix"]) and s["global_loads"] == 0
    # gfx942: the pointer kernel with the CDNA config (256x256x32, 2 stages in 64 KB of LDS), MFMA
    assert gfx.label.startswith("matmul_kernel (pointer 256x256x32 w8 s2")
    assert any(k.startswith("v_mfma_f32_") and "bf16" in k for k in census_summary(gfx.resources.census)["matrix"])
    assert gfx.resources.shared_bytes <= 65536 and gfx.resources.occupancy_unit == "waves/SIMD"


def test_gemm_jobs_follow_the_target() -> None:
    """No compiling: the labels say which config each target gets; split-K adds its reduction."""
    jobs = gemm_jobs("fp32-accurate", (4096, 4096, 4096), "NT", ["sm90", "gfx90a"])
    # sm90: both operands split into tf32 hi/lo once, then the Gluon kernel's three products per K step
    assert [(t, label.split(" (")[0]) for label, t, _ in jobs] == [
        ("sm90", "tf32_split_kernel"), ("sm90", "tf32_split_kernel"), ("sm90", "matmul_ws_kernel"),
        ("gfx90a", "matmul_kernel")]
    from tilecraft.tuning.gemm import GemmConfig

    pinned = GemmConfig("tma", 128, 128, 64, group_m=8, num_warps=8, num_stages=3)
    jobs = gemm_jobs("bf16", (8192, 8192, 8192), "NN", ["sm90"], config=pinned)  # a pinned config wins
    assert [label.split(" (")[0] for label, _, _ in jobs] == ["matmul_tma_kernel"]
    jobs = gemm_jobs("bf16", (16, 256, 8192), "NN", ["sm80"])
    assert [label.split(" (")[0] for label, _, _ in jobs] == ["matmul_kernel", "splitk_reduce_kernel"]
    for args in (("bf17", (8, 8, 8), "NN"), ("bf16", (0, 8, 8), "NN"), ("bf16", (8, 8, 8), "NX")):
        with pytest.raises(ValueError):
            gemm_jobs(*args, ["sm90"])


def test_inspect_attention_sm80_mma() -> None:
    rows = inspect_attention(1, 4, 2, 1024, 64, True, "fp16", ["sm80"])
    assert [r.label.split(":")[0] for r in rows] == ["fwd", "bwd dK/dV", "bwd dQ"]
    for r in rows:
        assert r.error is None, r.error
        matrix = census_summary(r.resources.census)["matrix"]
        assert any(k.startswith("mma.sync.aligned.m16n8k16") and ".f16" in k for k in matrix), (r.label, matrix)


def test_attention_jobs_sm90_runs_the_forward_a_call_runs(monkeypatch) -> None:
    from tilecraft.ops import attention as ops

    assert (128, False) in ops.GLUON_FWD  # measured faster on the H200: the sm90 default
    labels = [label for label, _, _ in attention_jobs(4, 16, 16, 4096, 128, False, "bf16", ["sm90", "gfx942"])]
    assert labels[0].startswith("fwd Gluon: attention_fwd_gluon")
    assert labels[1].startswith("fwd TMA (fallback): attention_fwd_tma_kernel (128x128 w8 s3)")
    assert labels[2].startswith("fwd (fallback): attention_fwd_kernel")
    assert [lb.split(":")[0] for lb in labels[5:]] == ["fwd", "bwd dK/dV", "bwd dQ"]
    # without a Gluon default the TMA forward is the first one, the pointer forward its fallback
    monkeypatch.setattr(ops, "GLUON_FWD", {})
    labels = [label for label, _, _ in attention_jobs(4, 16, 16, 4096, 128, False, "bf16", ["sm90"])]
    assert labels[0].startswith("fwd TMA: attention_fwd_tma_kernel (128x128 w8 s3)")
    assert labels[1].startswith("fwd (fallback): attention_fwd_kernel")
    with pytest.raises(ValueError, match="must divide"):
        attention_jobs(1, 16, 5, 128, 64, False, "bf16", ["sm90"])


def test_error_summary_says_why_a_compile_failed() -> None:
    text = ("CompilationError: at 57:14:\n    acc = tl.dot(a, b)\n          ^\n"
            "input_precision must be one of ('ieee', 'bf16x3', 'bf16x6'). Got tf32\ncompiler output:\nnoise")
    assert error_summary(text) == ("CompilationError at 57:14: input_precision must be one of "
                                   "('ieee', 'bf16x3', 'bf16x6'). Got tf32")
    assert error_summary("the compiler process killed by SIGABRT\nLLVM ERROR") == \
        "the compiler process killed by SIGABRT"


def test_cli_gemm_compile_failure_is_a_row_and_exit_1(cli) -> None:
    # fp8 e4m3 has no sm80 form: Triton refuses it; the row says why, exit 1
    r = cli("inspect", "gemm", "--dtype", "fp8", "--shape", "256", "256", "256", "--targets", "sm80",
            "--format", "json")
    assert r.exit_code == 1, r.output
    (row,) = json.loads(r.output)["rows"]
    assert "fp8e4nv not supported" in row["error"] and row["summary"] is None


def test_cli_attention_markdown(cli) -> None:
    r = cli("inspect", "attention", "--head-dim", "64", "--seqlen", "1024", "--heads", "4", "--kv-heads", "2",
            "--causal", "--dtype", "fp16", "--targets", "sm80", "--format", "markdown")
    assert r.exit_code == 0, r.output
    assert r.output.count("| sm80 |") == 3 and "H4/2 S1024 D64 causal" in r.output
