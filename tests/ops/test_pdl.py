"""Programmatic dependent launch (``tilecraft.kernels.pdl``, ``tilecraft.ops.launch.with_pdl``) without a
GPU: the host policy, and the rule every PDL kernel keeps (``griddepcontrol.wait`` before any global
access), checked in the sm90 PTX of each GEMM kernel. On the GPU: tests/gpu/test_pdl_chains.py."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from tilecraft.analysis.compiled import _encode_constexpr
from tilecraft.ops import gemm as ops
from tilecraft.ops import launch as L
from tilecraft.tuning.gemm import GemmConfig

_PTX = r"""
import importlib, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource
from tilecraft.analysis.compiled import _decode_constexpr
mod, fn, sig, cx, opts = json.loads(sys.argv[1])
cx = {k: _decode_constexpr(v) for k, v in cx.items()}
kernel = getattr(importlib.import_module(mod), fn)
sig.update({k: "constexpr" for k in cx})
src = (GluonASTSource if type(kernel).__name__.startswith("Gluon") else ASTSource)(fn=kernel, signature=sig, constexprs=cx)
print(json.dumps(triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts).asm["ptx"]))
"""

# global memory reached by a thread (TMA and cp.async included), and kernel parameters
_GLOBAL = re.compile(r"\b(ld\.global|st\.global|cp\.async|red\.global|atom\.global|prefetch\.global)")


def _ptx(launch) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    sig = {n: v.split(":")[0] if not v.startswith("tensordesc") else v
           for n, v in ops.compile_signature(launch).items()}
    opts = {k: v for k, v in launch.options.items() if k in ("num_warps", "num_stages", "maxnreg")}
    cx = {k: _encode_constexpr(v) for k, v in launch.constexprs.items()}
    fn = getattr(launch.kernel, "fn", launch.kernel)
    req = json.dumps([fn.__module__, fn.__name__, sig, cx, opts])
    out = subprocess.run([sys.executable, "-c", _PTX, req], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _plan(dtype, m, n, k, cfg=None, layout="NN"):
    a = torch.empty(k, m, dtype=dtype, device="meta").t() if layout[0] == "T" else torch.empty(m, k, dtype=dtype,
                                                                                              device="meta")
    b = torch.empty(n, k, dtype=dtype, device="meta").t() if layout[1] == "T" else torch.empty(k, n, dtype=dtype,
                                                                                              device="meta")
    return ops.target_plan(a, b, "sm90", sms=132, cfg=cfg)[2]


CASES = {
    "pointer": (torch.bfloat16, 16, 4096, 4096, GemmConfig("pointer", 16, 32, 128, 1, 4, 6)),
    "pointer-splitk": (torch.bfloat16, 16, 4096, 4096, GemmConfig("pointer", 16, 64, 64, 1, 4, 4, split_k=4)),
    "gluon": (torch.bfloat16, 1000, 1000, 1000, GemmConfig("gluon", 64, 128, 64, 8, 4, 4)),
    "tma": (torch.bfloat16, 1024, 1024, 1024, GemmConfig("tma", 128, 128, 64, 8, 8, 3)),
    "fma": (torch.float32, 64, 4096, 4096, None),
}


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pdl_kernels_wait_before_any_global_access(name, mode, monkeypatch):
    """Each kernel of the plan that takes PDL compiles (sm90) to ``griddepcontrol.wait`` ahead of every
    global load, store, copy or prefetch; "early" (1) lets the next kernel launch right after the wait,
    "late" (2) after the main loop's loads (the persistent TMA kernel: at its exit, no instruction)."""
    dtype, m, n, k, cfg = CASES[name]
    plan = _plan(dtype, m, n, k, cfg)
    monkeypatch.setattr(L, "pdl_mode", lambda device, choice=None: mode)
    pdl = L.with_pdl(plan, torch.device("cuda"))
    taken = [x for x in pdl if x.constexprs.get("PDL")]
    assert taken, [x.kernel.__name__ for x in plan]
    assert all(x.options.get("launch_pdl") and x.constexprs["PDL"] == mode for x in taken)
    assert all("PDL" not in x.constexprs and "launch_pdl" not in x.options for x in plan)  # the input plan untouched
    for launch in taken:
        ptx = _ptx(launch)
        wait = ptx.find("griddepcontrol.wait")
        trigger = ptx.find("griddepcontrol.launch_dependents")
        assert wait >= 0, launch.kernel.__name__
        first = _GLOBAL.search(ptx)
        assert first is None or first.start() > wait, (launch.kernel.__name__, ptx[first.start() - 200:first.start() + 80])
        if mode == 1:
            assert wait < trigger < first.start()
        elif launch.kernel.__name__ == "matmul_tma_kernel":
            assert trigger < 0
        else:
            assert trigger > first.start(), launch.kernel.__name__


def test_pdl_mid_waits_before_every_load_and_triggers_in_the_loop(monkeypatch):
    """PDL "mid" on the small-M pointer kernel (sm90 PTX): the L2 prefetches of its first K blocks are the
    only global instructions ahead of ``griddepcontrol.wait`` (hints: nothing reaches registers), the
    predicated ``launch_dependents`` sits inside the K loop (between its loads), another after the loop
    for programs whose loop never reached it."""
    dtype, m, n, k, cfg = CASES["pointer"]
    plan = _plan(dtype, m, n, k, cfg)
    monkeypatch.setattr(L, "pdl_mode", lambda device, choice=None: 3)
    spec = ops.validate(torch.empty(m, k, dtype=dtype, device="meta"), torch.empty(k, n, dtype=dtype, device="meta"))
    at, steps = ops.pdl_steps(cfg, spec, 3)
    assert (at, steps) == (8, 2)  # 32 K blocks of 128: the trigger 8 blocks from the end
    launch = L.with_pdl(plan, torch.device("cuda"))[-1]
    launch = type(launch)(launch.kernel, launch.grid, launch.args, {**launch.constexprs, "PDL_AT": at, "PREFETCH": steps},
                          launch.options)
    ptx = _ptx(launch)
    wait = ptx.find("griddepcontrol.wait")
    before = [mm.group(0) for mm in _GLOBAL.finditer(ptx[:wait])]
    assert wait > 0 and before and set(before) == {"prefetch.global"}, before
    first_load = min(i for i in (ptx.find("ld.global"), ptx.find("cp.async")) if i >= 0)
    assert first_load > wait
    triggers = [mm.start() for mm in re.finditer(r"griddepcontrol\.launch_dependents", ptx)]
    assert len(triggers) == 2 and "@p griddepcontrol.launch_dependents" in ptx
    # the first inside the K loop: after the loop's header label, before the branch back to it
    header = [mm for mm in re.finditer(r"^(\$L__BB\d+_\d+):.*Loop Header", ptx, re.M) if mm.start() < triggers[0]]
    assert header, "no loop around the trigger"
    back = ptx.find(f"bra \t{header[-1].group(1)};", triggers[0])
    back = back if back >= 0 else ptx.find(f"bra {header[-1].group(1)};", triggers[0])
    assert back > triggers[0], "the trigger is not inside the K loop"
    loads = [mm.start() for mm in re.finditer(r"\b(ld\.global|cp\.async)", ptx)]
    assert any(header[-1].start() < i < back for i in loads)  # the loop that holds it is the K loop
    assert triggers[1] > back


def test_pdl_steps_rule(monkeypatch):
    """A quarter of the program's K blocks (rounded up; at least 6, at most half), 2 prefetched, under
    "mid" only; the environment
    overrides; the prefetch is capped at the ring depth and rounded down to a power of two."""
    f = torch.empty(16, 4096, dtype=torch.bfloat16, device="meta")
    spec = ops.validate(f, torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta"))
    assert ops.pdl_steps(GemmConfig("pointer", 32, 32, 256, 1, 4, 4), spec, 3) == (6, 2)  # 16 blocks
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6), spec, 3) == (8, 2)  # 32 blocks
    assert ops.pdl_steps(GemmConfig("pointer", 16, 16, 32, 1, 4, 6), spec, 3) == (32, 2)  # 128 blocks
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6), spec, 1) == (0, 0)
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6, split_k=4), spec, 3) == (4, 2)  # 8 blocks
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6, split_k=16), spec, 3) == (1, 2)
    monkeypatch.setenv(ops.PDL_AT_ENV, "5")
    monkeypatch.setenv(ops.PDL_PREFETCH_ENV, "7")
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6), spec, 3) == (5, 4)
    assert ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 3), spec, 1) == (5, 2)
    monkeypatch.setenv(ops.PDL_AT_ENV, "soon")
    with pytest.raises(ValueError, match="TILECRAFT_PDL_AT"):
        ops.pdl_steps(GemmConfig("pointer", 16, 32, 128, 1, 4, 6), spec, 3)


def test_with_pdl_leaves_kernels_without_the_constexpr(monkeypatch):
    monkeypatch.setattr(L, "pdl_mode", lambda device, choice=None: 2)
    plan = _plan(torch.bfloat16, 16, 4096, 4096, CASES["pointer-splitk"][4])
    names = [x.kernel.__name__ for x in plan]
    assert names == ["matmul_kernel", "splitk_reduce_kernel"]
    fake = L.KernelLaunch(object(), (1,), (), {"X": 1}, {"num_warps": 4})
    out = L.with_pdl(plan + [fake], torch.device("cuda"))
    assert out[-1] is fake


def test_pdl_policy(monkeypatch):
    """Off on the CPU, under the interpreter and with TILECRAFT_PDL=0 (the plan returned as it is); a
    value that is not a mode is refused."""
    plan = _plan(torch.bfloat16, 16, 4096, 4096, CASES["pointer"][4])
    assert not L.pdl_active(torch.device("cpu"))
    assert L.with_pdl(plan, torch.device("cpu")) is plan
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert L.pdl_mode(torch.device("cuda")) == 0
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(L, "device_capability", lambda index: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    for value, modes in (("0", (0, 0, 0, 0)), ("off", (0, 0, 0, 0)), ("early", (1, 1, 1, 1)), ("late", (2, 2, 2, 2)),
                         (" Late ", (2, 2, 2, 2)), ("mid", (3, 3, 3, 3)), ("auto", (0, 1, 2, 3)), ("1", (0, 1, 2, 3))):
        monkeypatch.setenv(L.PDL_ENV, value)
        assert tuple(L.pdl_mode(torch.device("cuda", 0), c) for c in (None, "early", "late", "mid")) == modes, value
    monkeypatch.delenv(L.PDL_ENV)
    assert L.pdl_mode(torch.device("cuda", 0), "early") == 1 and L.pdl_mode(torch.device("cuda", 0)) == 0
    with pytest.raises(ValueError, match="choice"):
        L.pdl_mode(torch.device("cuda", 0), "soon")
    monkeypatch.setattr(L, "device_capability", lambda index: (8, 0))
    assert L.pdl_mode(torch.device("cuda", 0), "late") == 0
    monkeypatch.setenv(L.PDL_ENV, "sometimes")
    with pytest.raises(ValueError, match="TILECRAFT_PDL"):
        L.pdl_mode(torch.device("cuda", 0))


@pytest.mark.parametrize("dtype,shape,cfg,choice", [
    (torch.bfloat16, (16, 4096, 4096), None, "early"),  # the small-M heuristic: 128 programs of 72 KB
    (torch.bfloat16, (64, 4096, 4096), None, "mid"),  # 64 programs of 192 KB: one per SM
    (torch.bfloat16, (16, 8192, 8192), None, "mid"),  # 128 programs of 160 KB
    (torch.bfloat16, (32, 4096, 4096), GemmConfig("pointer", 16, 32, 128, 1, 4, 6), "late"),  # 256 programs
    (torch.float32, (1, 4096, 4096), None, "early"),  # pointer split-K and its reduce
    (torch.bfloat16, (1000, 1000, 1000), None, "late"),  # Gluon 64x128
    (torch.float16, (1000, 1000, 1000), None, "late"),  # Gluon 64x128 (fp16 too, since follow-up 18)
    (torch.float32, (1000, 1000, 1000), None, "late"),  # FMA split 2 on 16-byte rows
    (torch.float32, (997, 1009, 1013), None, None),  # FMA on rows that are not
    (torch.bfloat16, (3000, 7000, 5000), None, None),  # the persistent TMA kernel
])
def test_pdl_choice_per_plan(dtype, shape, cfg, choice):
    a = torch.empty(shape[0], shape[2], dtype=dtype, device="meta")
    b = torch.empty(shape[2], shape[1], dtype=dtype, device="meta")
    spec, cfg, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=cfg)
    assert ops.pdl_choice(plan, spec, cfg, 132) == choice, cfg.short()



def test_pdl_plan_off_the_gpu():
    """``pdl_plan`` (what ``launch`` runs) is the plain plan on the CPU, and ``pdl_in_use`` says "off"."""
    f = torch.rand(16, 64)
    spec = ops.validate(f, f.t())
    cfg = GemmConfig("pointer", 16, 32, 32, 1, 4, 2)
    out = torch.empty(16, 16)
    plan = ops.pdl_plan(f, f.t(), out, spec, cfg)
    assert [k.kernel for k in plan] == [k.kernel for k in ops.launch_plan(f, f.t(), out, spec, cfg)]
    assert all("PDL" not in k.constexprs and "launch_pdl" not in k.options for k in plan)
    assert ops.pdl_in_use(f, f.t(), spec, cfg) == "off"
