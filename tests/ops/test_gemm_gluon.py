"""The sm90 Gluon GEMM without a GPU: it cross-compiles for sm90 to what it relies on (wgmma, TMA
loads and stores, setmaxnreg for the producer/consumer register split, no spills, shared memory
within the limit), and the dispatch never sends CPU tensors (or epilogues, other dtypes) to it.
Its numbers are checked on the GPU (tests/gpu/test_gemm_gluon.py, benchmarks/gemm_gluon.py): the
Triton interpreter cannot run Gluon."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import (
    SHARED_LIMIT,
    GemmConfig,
    Problem,
    heuristic,
    shape_key,
    shared_bytes,
)

I8 = GemmConfig("gluon", 128, 256, 128, 8, 8, 3)
TF = GemmConfig("gluon", 128, 128, 32, 8, 8, 3, flush=2)

_PTX = r"""
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
    ({}, True), ({"out_dtype": torch.float32}, False), ({"alpha": 2.0}, False), ({"activation": "relu"}, False),
    ({"bias": "int32"}, False), ({"n": 1002}, False),
])
def test_gluon_ok_rules(kw, ok):
    n = kw.pop("n", 1024)
    if "bias" in kw:
        kw["bias"] = torch.empty(n, dtype=torch.int32, device="meta")
    a = torch.empty(512, 768, dtype=torch.int8, device="meta")
    b = torch.empty(n, 768, dtype=torch.int8, device="meta").t()
    spec = ops.validate(a, b, **kw)
    assert ops.gluon_ok(a, b, spec) is ok
    assert ops.gluon_ok(a.unsqueeze(0), b, ops.validate(a.unsqueeze(0), b, **kw)) is False  # 3D: Triton kernels


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
