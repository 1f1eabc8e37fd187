"""Programmatic dependent launch on the GPU (``tilecraft.kernels.pdl``): chains of dependent GEMMs,
each reading the output of the one before (read after write) while the caching allocator hands the
freed inputs' memory to later outputs (write after read), launched back to back and replayed from a
CUDA graph. Each chain must give the bits of the same chain launched without PDL
(``TILECRAFT_PDL=0``), and agree with float64.

    TILECRAFT_GPU_TESTS=1 PYTHONPATH=src python -m pytest -q tests/gpu/test_pdl_chains.py
"""
from __future__ import annotations

import os

import pytest
import torch

from tilecraft.ops import gemm as ops
from tilecraft.ops import launch as L
from tilecraft.tuning.gemm import FMA_HEURISTIC, GemmConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                                reason="programmatic dependent launch needs sm90+")

CASES = {  # name: (dtype, M, N = K, config)
    "pointer-small-m": (torch.bfloat16, 16, 1024, GemmConfig("pointer", 16, 32, 128, 1, 4, 6)),
    "pointer-split-k": (torch.bfloat16, 16, 1024, GemmConfig("pointer", 16, 64, 64, 1, 4, 4, split_k=4)),
    "gluon": (torch.bfloat16, 1000, 1000, GemmConfig("gluon", 64, 128, 64, 8, 4, 4)),
    "tma": (torch.bfloat16, 1024, 1024, GemmConfig("tma", 128, 128, 64, 8, 8, 3)),
    "fma": (torch.float32, 256, 1024, FMA_HEURISTIC),
    "fma-split-k": (torch.float32, 64, 1024, GemmConfig("fma", 64, 128, 32, num_warps=4, num_stages=3, warps_m=2,
                                                        split_k=4)),
}
STEPS = 8


def _chain(x, ws, cfg):
    for w in ws:
        spec = ops.validate(x, w)
        x = ops.compute(x, w, spec, cfg=cfg)  # the old x is freed here: its memory goes to a later output
    return x


def _pdl(mode: str):
    """"mid+pf4": PDL "mid" (the pointer kernel lets the next launch in its last 2 K blocks) with 4 K
    blocks of A and B prefetched into L2 before the wait."""
    pdl, _, pf = mode.partition("+pf")
    os.environ[L.PDL_ENV] = pdl
    os.environ[ops.PDL_AT_ENV] = "2"
    os.environ[ops.PDL_PREFETCH_ENV] = pf or "0"


@pytest.fixture(autouse=True)
def _restore_env():
    names = (L.PDL_ENV, ops.PDL_AT_ENV, ops.PDL_PREFETCH_ENV)
    old = {n: os.environ.get(n) for n in names}
    yield
    for n, v in old.items():
        if v is None:
            os.environ.pop(n, None)
        else:
            os.environ[n] = v


@pytest.mark.parametrize("mode", ["early", "late", "mid", "mid+pf4"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pdl_chain_gives_the_bits_of_plain_launches(name, mode):
    dtype, m, n, cfg = CASES[name]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(7)
    x0 = torch.randn(m, n, device=dev, generator=gen).to(dtype)
    ws = [(torch.randn(n, n, device=dev, generator=gen) / n ** 0.5).to(dtype) for _ in range(STEPS)]
    _pdl("0")
    assert not L.pdl_active(dev, "late")
    plain = _chain(x0, ws, cfg)
    _pdl(mode)
    assert L.pdl_mode(dev) == {"early": 1, "late": 2, "mid": 3}[mode.partition("+")[0]]  # forced for every plan
    plan = L.with_pdl(ops.launch_plan(x0, ws[0], torch.empty(m, n, dtype=plain.dtype, device=dev),
                                      ops.validate(x0, ws[0]), cfg), dev)
    assert any(k.options.get("launch_pdl") for k in plan)
    for _ in range(3):
        torch.testing.assert_close(_chain(x0, ws, cfg), plain, rtol=0, atol=0, equal_nan=True)
    # from a CUDA graph: the programmatic edges between the captured kernels
    _chain(x0, ws, cfg)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = _chain(x0, ws, cfg)
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(3):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, plain, rtol=0, atol=0, equal_nan=True)
    ref = x0.double()
    for w in ws:
        ref = (ref @ w.double()).to(dtype).double() if dtype != torch.float32 else ref @ w.double()
    err = ((plain.double() - ref).norm() / ref.norm()).item()
    assert err < (3e-2 if dtype != torch.float32 else 1e-5), err
