"""The sm90 Gluon GEMM without a GPU: it cross-compiles for sm90 to what it relies on (wgmma, TMA
loads and stores, setmaxnreg for the producer/consumer register split, no spills, shared memory
within the limit), and the dispatch never sends CPU tensors (or epilogues, other dtypes) to it.
Its numbers are checked on the GPU (tests/gpu/test_gemm_gluon.py, benchmarks/gemm_gluon.py): the
Triton interpreter cannot run Gluon."""
from __future__ import annotations

import json
import math
from dataclasses import replace
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import (
    SHARED_LIMIT,
    GemmConfig,
    Problem,
    fits,
    heuristic,
    shape_key,
    shared_bytes,
)

I8 = GemmConfig("gluon", 128, 256, 128, 8, 8, 3)
TF = GemmConfig("gluon", 128, 128, 32, 8, 8, 3, flush=2)

# a subprocess's compile of the Gluon kernel for sm90 from (signature, constexprs, options) in argv[1]: ``k``, ``ptx``
_COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from tilecraft.kernels.gemm_gluon import matmul_ws_kernel
sig, cx, opts = json.loads(sys.argv[1])
sig.update({k: "constexpr" for k in cx})
k = triton.compile(GluonASTSource(fn=matmul_ws_kernel, signature=sig, constexprs=cx),
                   target=GPUTarget("cuda", 90, 32), options=opts)
ptx = k.asm["ptx"]
"""

_PTX = _COMPILE + r"""
print(json.dumps({"wgmma": re.findall(r"wgmma\.mma_async\.[\w.]+", ptx),
                  "tma_load": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)),
                  "tma_store": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared", ptx)),
                  "setmaxnreg": re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)}))
"""


def _plan(dtype, cfg, m=8192, n=8192, k=8192, layout="NT", **kw):
    a = torch.empty(m, k, dtype=dtype, device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                                device="meta")
    return ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, **kw)


def _ptx_facts(launch) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    sig = {n: v.split(":")[0] if not v.startswith("tensordesc") else v
           for n, v in ops.compile_signature(launch).items()}
    req = json.dumps([sig, launch.constexprs, launch.options])
    r = subprocess.run([sys.executable, "-c", _PTX, req], check=False, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dtype,cfg,precision,instr", [
    (torch.int8, I8, None, "m64n128k32.s32.s8.s8"),
    (torch.float32, TF, "fp32-accurate", "m64n128k8.f32.tf32.tf32"),
])
def test_gluon_kernel_cross_compiles_for_sm90(dtype, cfg, precision, instr):
    _, _, plan = _plan(dtype, cfg, precision=precision)
    launch = plan[-1]
    assert launch.kernel.__name__ == "matmul_ws_kernel"
    assert len(plan) == (3 if dtype == torch.float32 else 1)  # the 3xTF32 split launches first
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                        launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                        maxnreg=launch.options["maxnreg"], sass=False)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0
    assert res.shared_bytes <= SHARED_LIMIT["sm90"]
    assert abs(res.shared_bytes - shared_bytes(cfg, dtype.itemsize, dtype == torch.float32)) <= 2048  # the model the tuner prunes with
    facts = _ptx_facts(launch)
    steps = cfg.block_k // (32 if dtype == torch.int8 else 8)
    per_step = 2 * steps if dtype == torch.int8 else 3 * steps  # int8: two n128 halves; 3xTF32: three products
    assert facts["wgmma"] and all(w.endswith(instr) for w in facts["wgmma"])
    assert len(facts["wgmma"]) == per_step
    assert facts["tma_load"] == (4 if dtype == torch.float32 else 2)
    assert facts["tma_store"] >= 1
    regs = {(kind, int(n)) for kind, n in facts["setmaxnreg"]}
    assert ("dec", 24) in regs or ("dec", 40) in regs  # the producer gives registers back
    assert any(kind == "inc" and n >= 232 for kind, n in regs)  # the consumers take them


def test_cpu_tensors_never_reach_gluon():
    a = torch.randint(-128, 128, (256, 512), dtype=torch.int8)
    b = torch.randint(-128, 128, (512, 256), dtype=torch.int8)
    spec = ops.validate(a, b)
    assert not ops.gluon_ok(a, b, spec)
    p = ops.problem_of(a, b, spec)
    assert not p.gluon_ok and heuristic(p).kernel != "gluon"
    with pytest.raises(ValueError, match="Gluon"):
        ops.launch_plan(a, b, torch.empty(256, 256, dtype=torch.int32), spec, I8)
    f = torch.rand(256, 512)
    spec = ops.validate(f, f.t(), precision="fp32-accurate")
    assert not ops.gluon_ok(f, f.t(), spec)


@pytest.mark.parametrize("kw,ok", [
    ({}, True), ({"out_dtype": torch.float32}, False), ({"alpha": 2.0}, True), ({"activation": "relu"}, True),
    ({"bias": "int32"}, True), ({"c": "int32", "beta": -3}, True), ({"n": 1002}, False),
    ({"out_dtype": torch.bfloat16, "scale_a": "s"}, False),  # scales: the Triton kernels
])
def test_gluon_ok_rules(kw, ok):
    n = kw.pop("n", 1024)
    if "bias" in kw:
        kw["bias"] = torch.empty(n, dtype=torch.int32, device="meta")
    if "c" in kw:
        kw["c"] = torch.empty(512, n, dtype=torch.int32, device="meta")
    if "scale_a" in kw:
        kw["scale_a"] = torch.empty((), dtype=torch.float32, device="meta")
    a = torch.empty(512, 768, dtype=torch.int8, device="meta")
    b = torch.empty(n, 768, dtype=torch.int8, device="meta").t()
    spec = ops.validate(a, b, **kw)
    assert ops.gluon_ok(a, b, spec) is ok
    # a batch (of 1 here): the Gluon kernel's stacked batch, c included (tests/ops/test_gemm_gluon_batch.py)
    assert ops.gluon_ok(a.unsqueeze(0), b, ops.validate(a.unsqueeze(0), b, **kw)) is ok


def test_gluon_problem_key_and_config():
    a = torch.empty(8192, 8192, dtype=torch.int8, device="meta")
    b = torch.empty(8192, 8192, dtype=torch.int8, device="meta").t()
    spec = ops.validate(a, b)
    p = ops.problem_of(a, b, spec, arch="sm90", sms=132)
    assert p.gluon_ok and shape_key(p).endswith("/gluon")
    q = Problem(**{**p.__dict__, "gluon_ok": False})
    assert not shape_key(q).endswith("/gluon") and heuristic(q).kernel != "gluon"
    assert "flush4" in GemmConfig("gluon", flush=4).short()
    assert re.search("gluon", heuristic(p).short()) or heuristic(p).kernel == "tma"


# ---------------------------------------------------------------------------------------------
# fp16 / bf16 on the Gluon kernel
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout,perm", [("NN", 0), ("TT", 0), ("NN", 1), ("TT", 1), ("NN", 2), ("TT", 2)])
def test_gluon_tf32_mn_major_in_registers_cross_compiles(layout, perm):
    """tf32 NN (C^T = B^T A^T, the tile stored transposed) and TT: the MN-major operand goes
    through registers (ld.shared, then wgmma with A from registers), no copy, no spills. Two K
    steps per loop iteration plus an odd tail: 3 x BLOCK_K / 8 wgmmas in the SASS. (One A per
    iteration compiled to one register set that the next step's loads overwrote under the running
    wgmma: wrong results on the H200.) ``row_perm``: the same loads and wgmmas, the rows relabelled
    by layout only (the conversion to the wgmma operand layout is asserted trivial at compile time).
    ``row_perm=2``: rows r and r + 8 of the operand read as one pair, half as many (64-bit) loads, and
    NN's transposed store then writes pairs too (64-bit stores, as TT's)."""
    cfg = GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=perm)
    a = torch.empty(8192, 4096, device="meta").t() if layout[0] == "T" else torch.empty(4096, 8192, device="meta")
    b = torch.empty(2048, 8192, device="meta").t() if layout[1] == "T" else torch.empty(8192, 2048, device="meta")
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, precision="tf32")
    (launch,) = plan
    cx = launch.constexprs
    assert cx["A_REGS"] and not cx["A_KMAJOR"] and cx["B_KMAJOR"] and cx["TRANS_OUT"] == (layout == "NN")
    assert cx["ROW_PERM"] == perm
    if layout == "NN":  # the kernel's M is C's N
        assert launch.args[5:7] == (2048, 4096)
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch), cx,
                        "sm90", num_warps=launch.options["num_warps"], maxnreg=launch.options["maxnreg"], sass=True)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0 and res.shared_bytes <= SHARED_LIMIT["sm90"]
    assert res.census.get("sass:HGMMA.64x256x8.F32.TF32") == 3 * 32 // 8
    # each step's 64x32 A slice per warpgroup: 16 elements a thread
    if perm == 2:
        assert res.census.get("sass_shared_load_64b") == 3 * 8 and not res.census.get("sass_shared_load_32b")
        assert res.census.get("sass_shared_store_64b") == 64  # the 128x256 fp32 tile, two elements a store
    else:
        assert res.census.get("sass_shared_load_32b") == 3 * 16


def _plan16(cfg, layout, m=8192, n=8192, k=8192, dtype=torch.bfloat16, **kw):
    a = torch.empty(k, m, dtype=dtype, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dtype,
                                                                                                device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                                device="meta")
    if dtype == torch.float32:
        kw["precision"] = "tf32"
        if "bias" in kw:
            kw["bias"] = kw["bias"].float()
    return ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, **kw)


@pytest.mark.parametrize("cfg,layout,instr", [
    (GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "NN", "m64n256k16.f32.bf16.bf16"),
    (GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "TT", "m64n256k16.f32.bf16.bf16"),
    (GemmConfig("gluon", 64, 64, 64, 8, 4, 8), "NT", "m64n64k16.f32.bf16.bf16"),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 6, split_k=2), "NN", "m64n128k16.f32.bf16.bf16"),
])
def test_gluon_16bit_cross_compiles_for_sm90(cfg, layout, instr):
    m = 128 if cfg.split_k > 1 else 8192
    _, _, plan = _plan16(cfg, layout, m=m)
    names = [k.kernel.__name__ for k in plan]
    assert names == ["matmul_ws_kernel"] + (["splitk_reduce_kernel"] if cfg.split_k > 1 else [])
    launch = plan[0]
    assert launch.constexprs["A_KMAJOR"] == (layout[0] == "N") and launch.constexprs["B_KMAJOR"] == (layout[1] == "T")
    assert launch.constexprs["SPLIT_K"] == cfg.split_k
    sig = ops.compile_signature(launch)
    assert sig["M"] == sig["N"] == sig["K"] == "i32"  # unspecialised: one kernel for every shape
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", sig, launch.constexprs, "sm90",
                        num_warps=launch.options["num_warps"], maxnreg=launch.options["maxnreg"], sass=False)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0
    assert abs(res.shared_bytes - shared_bytes(cfg, 2)) <= 2048
    facts = _ptx_facts(launch)
    assert facts["wgmma"] and all(w.endswith(instr) for w in facts["wgmma"])
    assert len(facts["wgmma"]) == cfg.block_k // 16
    assert facts["tma_load"] >= 2 and facts["tma_store"] >= 1


@pytest.mark.parametrize("cfg,layout", [
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 4, block_n2=64), "NT"),
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=64), "NN"),
    (GemmConfig("gluon", 64, 64, 64, 8, 4, 6, block_n2=32), "TN"),
], ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
def test_gluon_wide_tiles_cross_compile_for_sm90(cfg, layout):
    """Tiles of block_n + block_n2 columns (a width Gluon's power-of-two tensors cannot hold): two
    wgmma shapes per K step, three TMA loads per stage (A and B's two column blocks), the tile counted
    in whole wide tiles, and shared memory as ``shared_bytes`` counts it."""
    m, n = 256, 11008
    _, _, plan = _plan16(cfg, layout, m=m, n=n, k=4096)
    launch = plan[-1]
    assert launch.kernel.__name__ == "matmul_ws_kernel" and launch.constexprs["BLOCK_N2"] == cfg.block_n2
    assert launch.grid == (ops.persistent_programs(cfg, -(-m // cfg.block_m) * -(-n // cfg.tile_n), 132),)
    b_lo = launch.args[3]  # the lo descriptor slot carries B's second column block
    assert list(b_lo.block_shape) == ([cfg.block_n2, cfg.block_k] if layout[1] == "T" else [cfg.block_k, cfg.block_n2])
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                        launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                        maxnreg=launch.options["maxnreg"], sass=False)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0
    assert abs(res.shared_bytes - shared_bytes(cfg, 2)) <= 2048 and res.shared_bytes <= SHARED_LIMIT["sm90"]
    facts = _ptx_facts(launch)
    shapes = sorted({re.search(r"m64n(\d+)k16", w).group(1) for w in facts["wgmma"]}, key=int)
    assert shapes == [str(cfg.block_n2), str(cfg.block_n)], facts["wgmma"]
    assert len(facts["wgmma"]) == 2 * cfg.block_k // 16
    assert facts["tma_load"] >= 3 and facts["tma_store"] >= 1


@pytest.mark.parametrize("cfg,layout", [(GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "NN"),
                                        (GemmConfig("gluon", 64, 128, 64, 8, 4, 4), "TT"),
                                        (GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=64), "NT")],
                         ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
def test_gluon_named_slots_cross_compile_for_sm90(cfg, layout):
    """``named_slots``: the consumer's slot releases become ``bar.arrive`` on named barriers (none with the
    mbarrier ring) and the producer's waits one ``bar.sync`` (the consumer's threads and its own warp)."""
    census = {}
    for named in (False, True):
        _, _, plan = _plan16(replace(cfg, named_slots=named), layout, m=1000, n=1000, k=1000)
        launch = plan[-1]
        assert launch.constexprs["NAMED_SLOTS"] is named
        res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                            launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                            maxnreg=launch.options["maxnreg"], sass=False)
        assert res.error is None and res.spills == 0, (res.error, res.spills)
        census[named] = res.census
    assert census[False].get("bar_arrive", 0) == 0
    assert census[True]["bar_arrive"] >= 2  # in the K loop and after it
    assert census[True]["bar_sync"] < census[False]["bar_sync"]  # no warpgroup bar.sync before each release


def test_gluon_named_slots_refused_where_not_built():
    base = GemmConfig("gluon", 128, 128, 32, 8, 8, 3, named_slots=True)
    a = torch.empty(256, 4096, dtype=torch.float32, device="meta")
    b = torch.empty(4096, 512, dtype=torch.float32, device="meta")
    for cfg, kw, match in ((replace(base, kernel="tma"), {}, "Gluon kernel"),
                           (replace(base, mn_regs=True), {"precision": "tf32"}, "no mn_regs"),
                           (base, {"precision": "fp32-accurate"}, "not 3xTF32"),
                           (replace(base, num_stages=13), {"precision": "tf32"}, "at most 12 stages")):
        with pytest.raises(ValueError, match=match):
            ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, **kw)
    assert "nb" in base.short()


def test_gluon_wide_tiles_with_fp32_results_fit_shared_memory():
    """fp32 results of a bf16 product need epilogue buffers twice as large: the wide tile drops to 4
    stages there (5 stages and one fp32 buffer: 237804 bytes, over the 232448 of an sm90 SM), and the
    tuning key tells such calls apart from bf16-out ones."""
    a = torch.empty(1024, 768, dtype=torch.bfloat16, device="meta")
    b = torch.empty(3072, 768, dtype=torch.bfloat16, device="meta").t()
    keys = []
    for out_dtype, stages in ((torch.bfloat16, 5), (torch.float32, 4)):
        spec, cfg, plan = ops.target_plan(a, b, "sm90", sms=132, out_dtype=out_dtype)
        assert (cfg.block_n2, cfg.num_stages) == (64, stages), cfg.short()
        p = ops.problem_of(a, b, spec, arch="sm90", sms=132)
        assert fits(cfg, p) and not fits(replace(cfg, num_stages=6), p)
        keys.append(shape_key(p))
        launch = plan[-1]
        res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                            launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                            maxnreg=launch.options["maxnreg"], sass=False)
        assert res.error is None and res.shared_bytes <= SHARED_LIMIT["sm90"], (res.error, res.shared_bytes)
    assert keys[0] != keys[1] and keys[1].endswith("/o4")


def test_gluon_wide_tiles_refused_where_not_built():
    """block_n2 is the Gluon kernel's, 16-bit, unsplit, no wider than block_n, a power of two of 32 or
    more: anything else is a ValueError before a launch."""
    wide = GemmConfig("gluon", 128, 128, 64, 8, 8, 4, block_n2=64)
    for cfg, dtype, match in ((replace(wide, kernel="tma"), torch.bfloat16, "Gluon kernel"),
                              (replace(wide, split_k=2), torch.bfloat16, "no split-K"),
                              (replace(wide, block_n2=256), torch.bfloat16, "32 <= block_n2 <= block_n"),
                              (replace(wide, block_n2=48), torch.bfloat16, "powers of two"),
                              (replace(wide, block_n2=16), torch.bfloat16, "32 <= block_n2 <= block_n"),
                              (replace(wide, block_k=128), torch.int8, "fp16/bf16")):
        a = torch.empty(256, 4096, dtype=dtype, device="meta")
        b = torch.empty(11008, 4096, dtype=dtype, device="meta").t()
        with pytest.raises(ValueError, match=match):
            ops.target_plan(a, b, "sm90", sms=132, cfg=cfg)
    assert wide.tile_n == 192 and "128+64" in wide.short()


@pytest.mark.parametrize("shape,layout,dtype,want", [
    ((8192, 8192, 8192), "NN", torch.bfloat16, "gluon 128x256x64 w8 s4"),
    ((8192, 8192, 8192), "TT", torch.bfloat16, "gluon 128x256x64 w8 s4"),
    ((8192, 8192, 8192), "TN", torch.bfloat16, "tma "),  # both MN-major: measured slower on Gluon
    ((8192, 8192, 8192), "NN", torch.float16, "tma "),  # fp16 NN measured slower on Gluon
    ((8192, 8192, 8192), "TN", torch.float16, "gluon 128x256x64 w8 s4"),
    ((4096, 4096, 4096), "NT", torch.float16, "gluon 128x256x64 w8 s4"),  # fp16 below 48 Mi outputs: every layout
    ((2048, 11008, 4096), "NN", torch.float16, "gluon 128x128x64 w8 s5"),
    ((4096, 4096, 512), "TN", torch.bfloat16, "gluon 128x256x64 w8 s4"),  # short K: every layout, both dtypes
    ((4096, 4096, 2048), "TN", torch.float16, "gluon 128x256x64 w8 s4"),
    ((4096, 11008, 512), "NN", torch.bfloat16, "gluon 128x256x64 w8 s4"),
    ((4096, 11008, 4096), "TN", torch.bfloat16, "gluon 128x256x64 w8 s4"),  # TN below 48 Mi outputs
    ((8192, 8192, 2048), "TN", torch.bfloat16, "gluon 128x256x64 w8 s4"),
    ((8192, 8192, 8192), "NN", torch.float32, "gluon 128x256x32 w8 s3 g16 regs pair"),  # tf32: B into registers
    ((8192, 8192, 8192), "TT", torch.float32, "gluon 128x256x32 w8 s3 g16 regs pair"),  # A into registers
    ((8192, 8192, 8192), "NT", torch.float32, "gluon 128x256x32 w8 s3 g16"),  # both K-major: from 8 rounds
    ((4096, 4096, 4096), "NT", torch.float32, "tma 128x256x32"),
    ((8192, 8192, 8192), "TN", torch.float32, "tma 128x256x32"),
    ((4096, 11008, 4096), "NN", torch.bfloat16, "tma 256x128"),
    ((4096, 4096, 4096), "NN", torch.bfloat16, "gluon 128x256x64"),
    ((128, 4096, 4096), "NN", torch.bfloat16, "gluon 64x64x64 w4 s8"),
    ((128, 11008, 4096), "NN", torch.bfloat16, "gluon 64x128+64x64 w4 s6"),  # 116 tiles of 64 x 192 (86 of 128 x 128)
    ((128, 14336, 4096), "NT", torch.bfloat16, "gluon 128x128x64 w8 s5"),  # 64 x 192: 150 tiles, two waves
    ((256, 11008, 4096), "NT", torch.bfloat16, "gluon 128x128+64x64 w8 s5"),  # 116 tiles of 128 x 192
    ((1024, 3072, 4096), "NT", torch.float16, "gluon 128x128+64x64 w8 s5"),  # fp16 prefill rows as bf16
    ((512, 11008, 4096), "NT", torch.float16, "gluon 128x128x64 w8 s5"),  # 192 fills no better than 128
    ((1024, 11008, 4096), "NT", torch.bfloat16, "gluon 128x256x64 w8 s4"),
    ((256, 4096, 4096), "NT", torch.float16, "tma 64x128x64 w4 s6"),  # Gluon 64x128 only at K <= 1024
    ((1000, 1000, 1000), "NN", torch.float16, "gluon 64x128x64 w4 s5 g8 c2"),  # clusters of two: five stages
    ((128, 4096, 11008), "NN", torch.bfloat16, "tma 64x128x64 w4 s6 g8 splitk2"),
    ((1000, 1000, 1000), "NN", torch.bfloat16, "gluon 64x128x64 w4 s5 g8 c2"),
    ((3000, 7000, 5000), "NN", torch.bfloat16, "tma 256x128x64 w8 s4 g8 pad"),  # rows padded to 128 bytes
    ((3000, 3000, 3000), "NN", torch.bfloat16, "gluon 128x256x64 w8 s4 g8"),  # the copies would not pay
    ((512, 11008, 4096), "NT", torch.bfloat16, "gluon 128x128x64 w8 s5"),  # 128x256 tiles: 1.3 waves
    ((2048, 4096, 4096), "NT", torch.bfloat16, "gluon 128x256x64 w8 s4"),  # below the big products, by waves
    ((256, 4096, 4096), "NT", torch.bfloat16, "tma 64x128x64 w4 s6"),  # 64x128 on Gluon only at short K
    ((256, 4096, 2048), "NT", torch.bfloat16, "tma 64x128x64 w4 s6"),
    ((1536, 4096, 4096), "NT", torch.bfloat16, "gluon 128x128x64 w8 s5"),
    ((997, 1009, 1013), "NN", torch.bfloat16, "tma "),  # unaligned: copies, not measured on Gluon
])
def test_gluon_16bit_dispatch(shape, layout, dtype, want):
    _, cfg, _ = _plan16(None, layout, *shape, dtype=dtype)
    assert cfg.short().startswith(want), cfg.short()
    if dtype == torch.float32:
        return
    m, n, k = shape
    a = torch.empty(m, k, dtype=dtype, device="meta")
    b = torch.empty(k, n, dtype=dtype, device="meta")
    assert ops.gluon_ok(a, b, ops.validate(a, b)) == (n * 2 % 16 == 0)  # output rows the TMA can store
    # the epilogue runs in the Gluon kernel (which configuration an epilogue call takes:
    # test_gluon_epilogue_dispatch)
    kw = {"bias": torch.empty(n, dtype=dtype, device="meta"), "activation": "gelu"}
    assert ops.gluon_ok(a, b, ops.validate(a, b, **kw)) == (n * 2 % 16 == 0)


def test_gluon_16bit_rules():
    a = torch.empty(256, 512, dtype=torch.bfloat16, device="meta")
    b = torch.empty(512, 1004, dtype=torch.bfloat16, device="meta")
    assert not ops.gluon_ok(a, b, ops.validate(a, b))  # 1004 bf16 = 2008-byte output rows
    assert ops.gluon_ok(a, b, ops.validate(a, b, out_dtype=torch.float32))  # 4016 bytes
    assert not ops.gluon_ok(a, b, ops.validate(a, b, alpha=2.0))  # the output rows, not alpha
    assert ops.gluon_ok(a, b, ops.validate(a, b, alpha=2.0, out_dtype=torch.float32))
    spec = ops.validate(a, b, out_dtype=torch.float32)
    assert spec.out_dtype == torch.float32


def test_gluon_split_k_pads_each_split_to_whole_tiles():
    """M = 200 in 128-row tiles: each split's partial rows are padded to 256, so the last tile of
    split 0 (rows 128..255) cannot overwrite split 1's rows; the reduce pass steps 256 rows."""
    a = torch.empty(200, 512, dtype=torch.bfloat16, device="meta")
    b = torch.empty(512, 1008, dtype=torch.bfloat16, device="meta")
    spec = ops.validate(a, b)
    plan = ops.launch_plan(a, b, torch.empty(200, 1008, dtype=torch.bfloat16, device="meta"), spec,
                           GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=2))
    gl, red = plan
    assert [k.kernel.__name__ for k in plan] == ["matmul_ws_kernel", "splitk_reduce_kernel"]
    assert gl.args[4].shape == [2 * 256, 1008]  # the c descriptor over the workspace
    assert red.args[0].shape == (2, 1, 256, 1008) and red.args[9] == 256 * 1008


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_aligned_copy_keeps_layout_and_pads(layout):
    g = torch.Generator().manual_seed(4)
    base = torch.rand(37, 1000, generator=g).to(torch.bfloat16)
    t = base if layout == "NN" else base.t().contiguous().t()
    got = ops.aligned_copy(t, -1)
    assert torch.equal(got, t)
    km = ops._kmajor(got, -1)
    assert km == ops._kmajor(t, -1)  # layout kept: no transpose
    assert ops._row_pitch_bytes(got, km, -1) % 128 == 0


def test_pad_rows_kernel_interpreter():
    from tilecraft.kernels import gemm as kg
    if not ops.triton_on_cpu():
        pytest.skip("the kernel runs here only in Triton's interpreter")
    g = torch.Generator().manual_seed(6)
    src = torch.rand(2, 19, 40, generator=g).to(torch.float16)
    dst = torch.full((2, 19, 64), float("nan"), dtype=torch.float16)
    kg.pad_rows_kernel[(2 * 2, 3)](src, dst, 19, 40 // 8, 2, src.stride(0) // 8, src.stride(1) // 8,
                                    dst.stride(0) // 8, dst.stride(1) // 8, VEC=8, BLOCK_R=16, BLOCK_C=16)
    assert torch.equal(dst[..., :40], src)
    assert torch.isnan(dst[..., 40:]).all()  # the padding is never written


_BANKS = r"""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilecraft.kernels.gemm_gluon import _row_mapped

@gluon.constexpr_function
def transposed(ll):
    t = lambda v: [v[1], v[0]]
    return gl.DistributedLinearLayout([t(v) for v in ll.reg_bases], [t(v) for v in ll.lane_bases],
                                      [t(v) for v in ll.warp_bases], [], [ll.shape[1], ll.shape[0]])

@gluon.jit
def probe(X, BM: gl.constexpr, NW: gl.constexpr):
    acc: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, 256, 8])
    ll: gl.constexpr = gl.to_linear_layout(gl.DotOperandLayout(operand_index=0, parent=acc, k_width=1), [BM, 32])
    smem: gl.constexpr = gl.shared_memory_descriptor_type(
        gl.float32, [32, BM], gl.NVMMASharedLayout.get_default_for([32, BM], gl.float32), [32, BM])
    gl.static_print("conflicts", gl.bank_conflicts(gl.distributed_type(gl.float32, [32, BM], transposed(ll)), smem),
                    gl.bank_conflicts(gl.distributed_type(gl.float32, [32, BM], _row_mapped(ll, 1)), smem),
                    gl.bank_conflicts(gl.distributed_type(gl.float32, [32, BM], _row_mapped(ll, 2)), smem))

for bm, nw in ((128, 8), (128, 4), (64, 4)):
    triton.compile(GluonASTSource(fn=probe, signature={"X": "*fp32", "BM": "constexpr", "NW": "constexpr"},
                                  constexprs={"BM": bm, "NW": nw}), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": nw})
"""


def test_gluon_row_perm_loads_free_of_bank_conflicts(tmp_path):
    """The tf32 register operand read from its 128-byte-swizzled MN-major tile: in tile order a
    warp's loads conflict 2-way (each 32-bit load takes two wavefronts); with ``row_perm``'s row
    relabelling (bits 2 and 4 swapped) none, for the 128- and 64-row tiles (Triton's own count).
    ``row_perm=2`` (rows r and r + 8 of the operand adjacent: one 64-bit load each pair): none either."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")  # the counts print while compiling, not from a cache
    script = tmp_path / "banks.py"  # @jit functions must live in a file
    script.write_text(_BANKS)
    r = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = [line.split()[1:] for line in r.stdout.splitlines() if line.startswith("conflicts")]
    assert counts == [["1", "0", "0"]] * 3, r.stdout


def test_gluon_split_k_fixup_cross_compiles_and_rules():
    """split-K 2 joined inside the Gluon kernel: one launch (no workspace pass, no reduce), one
    program per work unit (64 tiles of 1000^2 in 128 programs), the partial tile handed over by
    64-bit global stores and loads, no spills; refused where the units outnumber the SMs (a waiting
    half needs its partner running) or the split is not 2."""
    cfg = GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=2, fixup=True)
    a = torch.empty(1000, 1000, dtype=torch.bfloat16, device="meta")
    _, _, plan = ops.target_plan(a, a, "sm90", sms=132, cfg=cfg)
    (launch,) = plan
    assert launch.grid == (128,) and launch.constexprs["FIXUP"] and launch.constexprs["SPLIT_K"] == 2
    args = dict(zip(launch.kernel.arg_names, launch.args))
    assert args["ws_ptr"].numel() == 64 * 128 * 128 and args["flag_ptr"].dtype == torch.int32
    assert launch.args[-3:] == (0, 0, 0)  # the cluster's shared-memory offsets: unused
    assert (args["batch_len"], args["a_brows"], args["b_brows"]) == (0, 0, 0)  # no batch
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                        launch.constexprs, "sm90", num_warps=8, maxnreg=launch.options["maxnreg"], sass=True)
    assert res.error is None, res.error
    assert res.spills == 0 and res.shared_bytes <= SHARED_LIMIT["sm90"]
    # 128x128 fp32 over 256 threads: 32 two-element stores (one half) and loads (the other)
    assert res.census.get("sass_global_store_64b") == 32 and res.census.get("sass_global_load_64b") == 32
    big = torch.empty(2000, 2000, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match="one program per work unit"):
        ops.target_plan(big, big, "sm90", sms=132, cfg=cfg)
    with pytest.raises(ValueError, match="split_k must be 2"):
        ops.target_plan(a, a, "sm90", sms=132, cfg=GemmConfig("gluon", 128, 128, 64, 8, 8, 4, split_k=3, fixup=True))


# ---------------------------------------------------------------------------------------------
# the epilogue in the Gluon kernel
# ---------------------------------------------------------------------------------------------
def _epi_kwargs(dtype, n, which):
    od = {torch.int8: torch.int32, torch.float32: torch.float32}.get(dtype, dtype)
    kw = {}
    if "alpha" in which:
        kw["alpha"] = 3 if od == torch.int32 else 1.5
    if "c" in which:
        kw.update(c=torch.empty(8192, n, dtype=od, device="meta"), beta=-2 if od == torch.int32 else 0.5)
    if "bias" in which:
        kw["bias"] = torch.empty(n, dtype=od, device="meta")
    for act in ("relu", "gelu", "gelu_tanh", "silu"):
        if act in which.split("+"):
            kw["activation"] = act
    return kw


@pytest.mark.parametrize("dtype,cfg,layout,which,chunk", [
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "NN", "alpha+c+bias+gelu", 32),
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "TT", "c+gelu_tanh", 32),
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "NT", "alpha+c", 64),
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4), "NN", "bias+silu", 64),
    (torch.bfloat16, GemmConfig("gluon", 128, 128, 64, 8, 8, 5), "NN", "alpha+c+bias+gelu", 64),
    (torch.bfloat16, GemmConfig("gluon", 64, 128, 64, 8, 4, 4), "NN", "alpha+c+bias+gelu", 64),
    (torch.bfloat16, GemmConfig("gluon", 128, 128, 64, 8, 8, 4, block_n2=64), "NN", "alpha+c+bias+gelu", 64),
    (torch.bfloat16, GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=32), "NT", "bias+silu", 32),
    (torch.int8, GemmConfig("gluon", 128, 256, 128, 8, 8, 4), "NT", "alpha+c+bias+relu", 32),
    (torch.float32, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True), "NN", "alpha+c+bias+gelu", 32),
    (torch.float32, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, row_perm=2), "NN", "alpha+c+bias+gelu", 32),
    (torch.float32, GemmConfig("gluon", 128, 128, 32, 8, 8, 3, flush=4), "NT", "alpha+c+bias+silu", 64),
    # epi_prefetch: the producer warp (40 registers) prefetches C and bias into L2, also without spills
    (torch.bfloat16, GemmConfig("gluon", 128, 256, 64, 8, 8, 4, epi_prefetch=True), "NN", "alpha+c+bias+gelu", 32),
    (torch.int8, GemmConfig("gluon", 128, 256, 128, 8, 8, 4, epi_prefetch=True), "NT", "c", 64),
    (torch.float32, GemmConfig("gluon", 128, 256, 32, 8, 8, 3, mn_regs=True, epi_prefetch=True), "NN", "c+bias+gelu",
     32),
])
def test_gluon_epilogue_cross_compiles_without_spills(dtype, cfg, layout, which, chunk):
    """alpha, beta * C, bias and the activation inside the Gluon kernel (before each chunk's TMA
    store): no spills, no scratch, the tile stored in ``chunk``-column pieces (32 where a 256-wide
    tile reads C and adds a bias or an activation: 64-column chunks spilled 88 bytes), C read by
    global loads, and the call chooses the Gluon kernel where the plain product does."""
    m = n = k = 8192
    kw = _epi_kwargs(dtype, n, which)
    if dtype == torch.float32:
        kw["precision"] = "tf32" if cfg.mn_regs else "fp32-accurate"
    a = torch.empty(k, m, dtype=dtype, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dtype,
                                                                                                device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                                device="meta")
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, **kw)
    launch = plan[-1]
    cx = launch.constexprs
    assert launch.kernel.__name__ == "matmul_ws_kernel"
    assert cx["HAS_C"] == ("c" in kw) and cx["HAS_BIAS"] == ("bias" in kw) and cx["HAS_ALPHA"] == ("alpha" in kw)
    assert cx["ACTIVATION"] == ops._k.ACTIVATIONS[kw.get("activation")]
    assert cx["EPI_INT"] == (dtype == torch.int8)
    if cfg.mn_regs:  # NN as C^T: the bias runs along the kernel's rows, C's strides swapped
        assert cx["TRANS_OUT"] and launch.args[11:13] == (1, 8192)
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch), cx,
                        "sm90", num_warps=launch.options["num_warps"], maxnreg=launch.options["maxnreg"], sass=True)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0 and res.shared_bytes <= SHARED_LIMIT["sm90"]
    assert res.census.get("sass:UTMASTG") == cfg.tile_n // chunk, res.census
    loads = sum(v for key, v in res.census.items() if key.startswith("global_load"))
    assert (loads > 0) == ("c" in kw or "bias" in kw)
    assert cx["EPI_PREFETCH"] == (cfg.epi_prefetch and ("c" in kw or "bias" in kw))
    if "c" in kw and not cfg.mn_regs:  # a thread's column pair in one load (N is even there)
        width = 16 * (2 if dtype == torch.bfloat16 else 4)
        assert res.census.get(f"global_load_{width}b", 0) > 0 and not res.census.get("global_load_16b"), res.census
    q = ops.problem_of(a, b, ops.validate(a, b, **kw), arch="sm90", sms=132)
    assert q.gluon_ok


@pytest.mark.parametrize("shape,layout,dtype,epi,want", [
    ((8192, 8192, 8192), "NN", torch.bfloat16, "bias+gelu", "gluon 128x256x64 w8 s4 g8"),  # prefetch tied
    ((8192, 8192, 8192), "NN", torch.bfloat16, "gelu", "gluon 128x256x64 w8 s4 g8"),
    ((8192, 8192, 8192), "NN", torch.bfloat16, "c", "tma 128x256x64 w8 s3"),  # C: no faster on Gluon
    ((4096, 11008, 4096), "NN", torch.bfloat16, "bias+silu", "gluon 128x256x64 w8 s4 g8 epf"),
    ((4096, 11008, 4096), "NN", torch.bfloat16, "", "tma 256x128"),  # the plain product stays
    ((128, 11008, 4096), "NN", torch.bfloat16, "bias+gelu", "gluon 64x128+64x64 w4 s6 g8"),  # epf: no gain there
    ((1000, 1000, 1000), "NN", torch.bfloat16, "bias+gelu", "gluon 64x128x64 w4 s5 g8 c2"),
    ((8192, 8192, 8192), "TN", torch.float16, "bias", "tma "),  # fp16 with an epilogue: not measured
    ((4096, 4096, 512), "TN", torch.bfloat16, "c", "tma 128x256x64 w8 s3 g8 flat"),  # short K off Gluon
    ((4096, 4096, 1024), "NN", torch.float16, "alpha+c", "tma 128x256x64 w8 s3 g8 flat"),  # fp16 reading C
    ((4096, 4096, 2048), "NN", torch.float16, "c", "tma 256x128x64 w8 s4"),
    ((2048, 4096, 4096), "NT", torch.float16, "bias+gelu", "gluon 128x256x64 w8 s4"),  # fp16 bias: bf16's choice
    ((512, 4096, 4096), "NT", torch.float16, "bias+gelu", "gluon 128x128x64 w8 s5 g8 epf"),
    ((8192, 8192, 8192), "NT", torch.int8, "c+bias+relu", "gluon 128x256x128 w8 s4"),
    ((8192, 8192, 8192), "NN", torch.float32, "c", "gluon 128x256x32 w8 s3 g16 regs pair"),  # tf32
    ((8192, 8192, 8192), "NN", torch.float32, "bias+gelu", "gluon 128x256x32 w8 s3 g16 regs pair"),
])
def test_gluon_epilogue_dispatch(shape, layout, dtype, epi, want):
    """Epilogue calls take the Gluon kernel where it measured faster than the TMA kernel's
    epilogue (tuning.gemm._epilogue_on_gluon), ``epi_prefetch`` for a bf16 bias."""
    m, n, k = shape
    kw = _epi_kwargs(dtype, n, epi)
    if "c" in kw:
        kw["c"] = torch.empty(m, n, dtype=kw["c"].dtype, device="meta")
    if dtype == torch.float32:
        kw["precision"] = "tf32"
    a = torch.empty(k, m, dtype=dtype, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dtype,
                                                                                                device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                                device="meta")
    spec, cfg, _ = ops.target_plan(a, b, "sm90", sms=132, **kw)
    assert cfg.short().startswith(want) and cfg.epi_prefetch == want.endswith("epf"), cfg.short()
    p = ops.problem_of(a, b, spec, arch="sm90", sms=132)
    assert p.epilogue == ("c" if "c" in kw else "bias" if "bias" in kw else "light" if kw.get("activation") else "")
    assert shape_key(p).endswith(f"/epi-{p.epilogue}") if p.epilogue else "/epi-" not in shape_key(p)


_CLUSTER_PTX = _COMPILE + r"""
from tilecraft.ops.launch import cluster_smem_offsets
off = cluster_smem_offsets(k.asm["ttgir"])
# the mbarrier inits: "add.s32 %rA, %rBase, OFFSET" then "mbarrier.init.shared::cta.b64 [%rA], COUNT"
adds = dict(re.findall(r"add\.s32\s+(%r\d+), %r\d+, (\d+);", ptx))
inits = [(int(adds[r]), int(c)) for r, c in re.findall(r"mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\], (\d+);", ptx)
         if r in adds]
print(json.dumps({"offsets": off, "inits": inits, "shared": k.metadata.shared,
                  "multicast": len(re.findall(r"\.multicast::cluster", ptx)),
                  "tma_load": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes \[", ptx)),
                  "mapa": len(re.findall(r"mapa\.shared::cluster", ptx)),
                  "nctarank": "%cluster_nctarank" in ptx,
                  "param10": bool(re.search(r"\.param \.align 64 \.b8 matmul_ws_kernel_param_10\[128\]", ptx)),
                  "param10_used": len(re.findall(r"mov\.b64 %mt, matmul_ws_kernel_param_10;", ptx)),
                  "cluster_barriers": len(re.findall(r"barrier\.cluster\.arrive\.release\.aligned;\s*barrier\.cluster\.wait\.acquire\.aligned;", ptx)),
                  "fence_init": len(re.findall(r"fence\.mbarrier_init\.release\.cluster", ptx)),
                  "threads": int(re.search(r"\.reqntid (\d+)", ptx).group(1)),
                  "multicast_pred_lane": "mov.u32 %ml, %laneid;" in ptx,
                  "partition_bars": sorted(set(re.findall(r"bar\.sync\s+(\d+), (\d+);", ptx))),
                  "spills": k.n_spills if hasattr(k, "n_spills") else None}))
"""


@pytest.mark.parametrize("cfg,layout,shape,boxes", [
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=2), "NN", (1000, 1000, 1000), 1),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=2), "TT", (1000, 1000, 1000), 1),
    (GemmConfig("gluon", 128, 256, 64, 8, 8, 4, cluster_m=2), "NN", (8192, 8192, 8192), 2),
    (GemmConfig("gluon", 128, 256, 64, 8, 8, 4, cluster_m=2), "NT", (8192, 8192, 8192), 1),
], ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
def test_gluon_cluster_cross_compiles(cfg, layout, shape, boxes):
    """``cluster_m`` 2: the plan asks for clusters of two (grid in clusters, the four allocations whose
    offsets the kernel takes); the sm90 PTX multicasts B's half in ``boxes`` 128-byte boxes through the
    descriptor in parameter 10 (a CUtensorMap parameter), loads A by TMA as before, maps the partner's
    barriers, checks the cluster size; and the offsets Triton's allocation pass gives (what the launch
    passes) are the ones the compiled kernel initialises its mbarriers at: ready with 1 arrival, empty
    with 2 (both CTAs' consumers); every warp meets at the cluster barriers (start and exit, after the inits'
    fence) in all four partitions: the consumers, the one-warp producer and the two partitions (one warp and two)
    that stand in for Gluon's idle padding warps; the producer stays one warp (no partition barrier of its own in
    the loop) and issues the multicast from lane 0."""
    dtype = torch.bfloat16
    _, _, plan = _plan16(cfg, layout, *shape, dtype=dtype)
    launch = plan[-1]
    m, n = shape[:2]
    clusters = math.ceil(math.ceil(m / cfg.block_m) / 2) * math.ceil(n / cfg.block_n)
    assert launch.cluster == 2 and launch.grid == (min(66, clusters),)
    assert launch.smem == ("b_bufs", "ready", "empty") and launch.args[-3:] == (-1, -1, -1)
    assert launch.constexprs["CLUSTER_M"] == 2
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                        launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                        maxnreg=launch.options["maxnreg"], sass=False)
    assert res.error is None and res.spills == 0 and res.scratch_bytes == 0
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    sig = {nm: v.split(":")[0] if not v.startswith("tensordesc") else v
           for nm, v in ops.compile_signature(launch).items()}
    r = subprocess.run([sys.executable, "-c", _CLUSTER_PTX, json.dumps([sig, launch.constexprs, launch.options])],
                       check=False, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    assert facts["multicast"] == boxes and facts["param10"] and facts["param10_used"] == boxes
    assert facts["tma_load"] == 1  # A alone through Gluon's own TMA copy
    assert facts["mapa"] >= 2 and facts["nctarank"]  # the partner's empty barriers (in the loop, after it)
    off = facts["offsets"]
    stages = cfg.num_stages
    inits = dict(facts["inits"])
    assert all(inits.get(off["ready"] + 8 * s) == 1 and inits.get(off["empty"] + 8 * s) == 2 for s in range(stages))
    # every warp of both CTAs meets twice (start and exit) in each of the four partitions; no idle warps
    assert facts["cluster_barriers"] == 8 and facts["fence_init"] >= 1
    assert facts["threads"] == 32 * (cfg.num_warps + 4)
    assert facts["multicast_pred_lane"]
    # only the consumers' own barrier (id 0, their warps); a four-warp producer would add one in its loop
    assert facts["partition_bars"] == [["0", str(32 * cfg.num_warps)]]
    assert off["b_bufs"] + stages * cfg.block_n * cfg.block_k * 2 <= facts["shared"] <= SHARED_LIMIT["sm90"]


@pytest.mark.parametrize("cfg,dtype,layout,why", [
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, cluster_m=3), torch.bfloat16, "NN", "cluster_m 1 or 2"),
    (GemmConfig("tma", 64, 128, 64, 8, 4, 4, cluster_m=2), torch.bfloat16, "NN", "the Gluon kernel"),
    (GemmConfig("gluon", 128, 256, 128, 8, 8, 3, cluster_m=2), torch.int8, "NT", "fp16/bf16"),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, split_k=2, cluster_m=2), torch.bfloat16, "NN", "no split-K"),
    (GemmConfig("gluon", 128, 128, 64, 8, 8, 5, block_n2=64, cluster_m=2), torch.bfloat16, "NT", "no block_n2"),
    (GemmConfig("gluon", 64, 128, 64, 8, 4, 4, named_slots=True, cluster_m=2), torch.bfloat16, "NN", "no named_slots"),
    (GemmConfig("gluon", 64, 128, 128, 8, 4, 3, cluster_m=2), torch.bfloat16, "NT", "boxes of 128-byte rows"),
    (GemmConfig("gluon", 64, 64, 64, 8, 4, 4, cluster_m=2), torch.bfloat16, "NN", "boxes of 128-byte rows"),
])
def test_gluon_cluster_refusals(cfg, dtype, layout, why):
    """What ``cluster_m`` 2 cannot take is a ValueError before any launch, saying why."""
    with pytest.raises(ValueError, match=why):
        _plan16(cfg, layout, 1024, 1024, 1024, dtype=dtype)


@pytest.mark.parametrize("shape,layout,dtype,cluster", [
    ((1000, 1000, 1000), "NN", torch.bfloat16, 2), ((1000, 1000, 1000), "TT", torch.bfloat16, 2),
    ((1000, 1000, 1000), "NT", torch.float16, 2), ((1000, 1000, 512), "TN", torch.bfloat16, 2),
    ((600, 1000, 1000), "NN", torch.bfloat16, 2),
    ((1000, 1000, 4096), "NN", torch.bfloat16, 0),  # long K: not the Gluon 64x128 tile
])
def test_gluon_cluster_dispatch(shape, layout, dtype, cluster, monkeypatch):
    """By default (``TILECRAFT_GEMM_CLUSTER`` unset) the short-K Gluon 64x128 tile runs in clusters of two (B
    shared by multicast; docs/gemm.md, follow-up 31). Its branch takes products with fewer 128x128 tiles than
    half the SMs, which is the pair count, so the pairs always fit one wave there. ``cluster`` 0: another config.
    With the switch at 0 the same tile runs without the cluster."""
    monkeypatch.delenv(ops.CLUSTER_ENV, raising=False)
    m, n, k = shape
    a = torch.empty(k, m, dtype=dtype, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dtype,
                                                                                                device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                                device="meta")
    _, cfg, plan = ops.target_plan(a, b, "sm90", sms=132)
    if cluster == 0:
        assert cfg.cluster_m == 1 and not cfg.short().startswith("gluon 64x128x64 w4 s"), cfg.short()
        return
    # with the cluster five stages (the CTA's one tile gets more of its K in flight), four without
    assert cfg.short().startswith("gluon 64x128x64 w4 s5") and cfg.cluster_m == cluster, cfg.short()
    assert plan[-1].cluster == cluster
    monkeypatch.setenv(ops.CLUSTER_ENV, "0")
    _, cfg, plan = ops.target_plan(a, b, "sm90", sms=132)
    assert cfg.cluster_m == 1 and plan[-1].cluster == 1 and cfg.short().startswith("gluon 64x128x64 w4 s4")


def test_cluster_switch(monkeypatch):
    """``TILECRAFT_GEMM_CLUSTER``: on by default ("1": the heuristic and the tuner's space take
    ``cluster_m``); "0" keeps them out of both; off, ``matmul``'s choice drops it even for a problem chosen (memoised) or tuned
    before; it is part of the eager replay key; anything but 0 or 1 is a ValueError."""
    from tilecraft.tuning.gemm import config_space

    monkeypatch.delenv(ops.CLUSTER_ENV, raising=False)
    assert ops.clusters_enabled()
    monkeypatch.setenv(ops.CLUSTER_ENV, "0")
    assert not ops.clusters_enabled()
    a = torch.empty(1000, 1000, dtype=torch.bfloat16, device="meta")
    p = ops.problem_of(a, a, ops.validate(a, a), arch="sm90", sms=132)
    assert heuristic(p).cluster_m == 1 and not any(c.cluster_m > 1 for c in config_space(p))
    monkeypatch.setenv(ops.CLUSTER_ENV, "1")
    assert ops.clusters_enabled() and heuristic(p).cluster_m == 2
    assert any(c.cluster_m > 1 for c in config_space(p))
    chosen = heuristic(p)
    monkeypatch.setenv(ops.CLUSTER_ENV, "0")
    # a problem whose choice (the cluster tile) was made and memoised while the switch was on
    monkeypatch.setitem(ops._CHOSEN, (p, "meta", ops._cache.tuning_enabled()), chosen)
    monkeypatch.setattr(ops, "problem_of", lambda *_a, **_k: p)
    monkeypatch.setattr(ops, "_PROBLEMS", {})
    cfg = ops.choose_config(a, a, ops.validate(a, a))
    assert cfg.cluster_m == 1 and cfg.short().startswith("gluon 64x128x64 w4 s4")
    monkeypatch.setenv(ops.CLUSTER_ENV, "1")
    assert ops.choose_config(a, a, ops.validate(a, a)).cluster_m == 2
    monkeypatch.setenv(ops.CLUSTER_ENV, "yes")
    with pytest.raises(ValueError, match="TILECRAFT_GEMM_CLUSTER"):
        ops.clusters_enabled()


def test_programs_sets_the_persistent_grid():
    """The persistent kernels' grid: ``programs`` when set (at most the SMs and the work units); else one program per
    SM, trimmed to even rounds from sixteen rounds on (2048 tiles of 8192^3: 16 rounds of 128 programs instead of 15.5
    of 132); ``programs`` is refused where it has no meaning."""
    a = torch.empty(8192, 8192, device="meta")
    base = GemmConfig("gluon", 128, 256, 32, 16, 8, 3, mn_regs=True, row_perm=2)
    for cfg, grid in ((base, 128), (replace(base, programs=132), 132), (replace(base, programs=200), 132),
                      (replace(base, programs=100), 100), (GemmConfig("tma", 128, 256, 32, 8, 8, 3), 128),
                      (GemmConfig("tma", 128, 256, 32, 8, 8, 3, programs=132), 132)):
        _, _, plan = ops.target_plan(a, a.t() if cfg.kernel == "tma" else a, "sm90", sms=132, cfg=cfg,
                                     precision="tf32")
        assert plan[-1].grid == (grid,), cfg.short()
    assert replace(base, programs=128).short().endswith(" p128")
    with pytest.raises(ValueError, match="persistent kernel"):
        ops.target_plan(a, a, "sm90", sms=132, cfg=GemmConfig("pointer", 64, 64, 32, 8, 4, 3, programs=64),
                        precision="tf32")
    with pytest.raises(ValueError, match="positive"):
        ops.target_plan(a, a, "sm90", sms=132, cfg=replace(base, programs=-1), precision="tf32")


@pytest.mark.parametrize("units,grid", [(1, 1), (100, 100), (132, 132), (133, 132), (400, 132), (1376, 132),
                                        (1980, 132), (1981, 124), (2048, 128), (2112, 132), (4000, 130)])
def test_persistent_programs_even_rounds(units, grid):
    """Fewest programs with the same round count from sixteen rounds on; below, one per SM (or per unit)."""
    cfg = GemmConfig("gluon", 128, 256, 64, 8, 8, 4)
    got = ops.persistent_programs(cfg, units, 132)
    assert got == grid
    assert math.ceil(units / got) == math.ceil(units / 132)  # never more rounds than a program per SM



@settings(max_examples=300, deadline=None)
@given(units=st.integers(1, 200_000), sms=st.integers(1, 304), programs=st.integers(0, 400))
def test_persistent_programs_properties(units, sms, programs):
    """For any work: at least one program, never more than the SMs or the units, and (unpinned) never more
    rounds than one program per SM would take."""
    cfg = GemmConfig("tma", 128, 256, 64, 8, 8, 3, programs=programs)
    got = ops.persistent_programs(cfg, units, sms)
    assert 1 <= got <= min(sms, units)
    if not programs:
        assert math.ceil(units / got) == math.ceil(units / min(sms, units))


def test_row_perm_refused_where_it_has_no_meaning():
    """``row_perm`` is 0, 1 or 2, and only with ``mn_regs`` on the Gluon kernel: anything else a ValueError before any
    compile (a mode outside the table would otherwise fail inside the compiler)."""
    a = torch.empty(8192, 8192, device="meta")
    base = GemmConfig("gluon", 128, 256, 32, 16, 8, 3, mn_regs=True, row_perm=2)
    ops.target_plan(a, a, "sm90", sms=132, cfg=base, precision="tf32")
    for cfg, match in ((replace(base, row_perm=3), "0, 1 or 2"), (replace(base, mn_regs=False), "mn_regs"),
                       (replace(base, kernel="tma"), "Gluon kernel")):
        with pytest.raises(ValueError, match=match):
            ops.target_plan(a, a, "sm90", sms=132, cfg=cfg, precision="tf32")
