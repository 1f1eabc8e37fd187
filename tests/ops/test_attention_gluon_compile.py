"""The Gluon forward (``kernels.attention_gluon``) cross-compiled for sm90 on a machine without a GPU.

The Triton interpreter cannot run Gluon, so CI checks the kernel by compiling it: the PTX must hold
the asynchronous warpgroup products (``wgmma.mma_async``) and the TMA copies
(``cp.async.bulk.tensor``) the design relies on, the SASS ``HGMMA``, with no spills and within
sm90's 227 KB of shared memory. Its numerical check runs on the GPU (tests/gpu/test_attention_gluon.py
and ``benchmarks/attention_tune.py gluoncheck``). Also: CPU tensors never reach it.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tilecraft.bench import attention as ba
from tilecraft.ops import attention as ops

pytest.importorskip("triton.experimental.gluon")
SM90_SHARED_BYTES = 232448


@pytest.mark.parametrize("d,causal,overlap,poly", [(128, True, True, 0), (64, False, True, 0), (256, True, True, 0),
                                                   (128, False, False, 0), (64, False, False, 1)])
def test_gluon_forward_compiles_to_wgmma_and_tma(d, causal, overlap, poly):
    # the one-partition kernel (the D = 64 defaults' tiles until round 16)
    cfg = ops.FwdConfig(128, 64 if d == 256 else 128, 8, 2, tma=True, gluon=True, overlap=overlap, poly=poly)
    res = ba.gluon_compile_report(ba.Shape(2, 16, 4, 4096, 4096, d, causal), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    census = res["census"]
    wgmma = sum(n for key, n in census.items() if key.startswith("matrix:wgmma.mma_async"))
    # two products per key tile, each split into k16 steps: D/16 for Q K^T, BLOCK_N/16 for P V,
    # issued once in the loop (and in the prologue/epilogue with the overlap)
    per_tile = d // 16 + cfg.block_n // 16
    assert wgmma >= per_tile
    assert not any(key.startswith("matrix:mma.") for key in census), "no mma.sync fallback"
    assert census.get("tma", 0) >= 4  # Q, K, V loads and the O store
    assert census.get("sass:UTMALDG", 0) >= 3 and census.get("sass:UTMASTG", 0) == 1
    assert sum(n for key, n in census.items() if key.startswith("sass:HGMMA")) == wgmma
    assert res["spills"] == 0
    assert 0 < res["shared_bytes"] <= SM90_SHARED_BYTES
    assert res["num_warps"] == 8


@pytest.mark.parametrize("key", sorted(ops.GLUON_FWD), ids=lambda k: f"D{k[0]}{'c' if k[1] else ''}")
def test_every_sm90_forward_default_compiles(key):
    """Each ``GLUON_FWD`` default (what ``tilecraft.attention`` runs forward on sm90) cross-compiles: wgmma
    and TMA, no spills, within sm90's shared memory (D = 64 since round 16: three consumer warpgroups,
    persistent)."""
    d, causal = key
    cfg = ops.GLUON_FWD[key]
    res = ba.gluon_compile_report(ba.Shape(2, 16, 4, 4096, 4096, d, causal), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    census = res["census"]
    assert sum(n for k, n in census.items() if k.startswith("sass:HGMMA")) > 0
    assert census.get("sass:UTMALDG", 0) >= 3
    # no spills, except a few words in the paired causal defaults (two tiles' bookkeeping live: D = 64 causal,
    # capped at 128 registers so two programs share an SM, 72 bytes; D = 256 causal 68 bytes; both measured
    # faster than their unpaired twins, docs/attention.md round 11)
    assert res["spills"] <= (128 if cfg.paired else 0), res["spills"]
    assert 0 < res["shared_bytes"] <= SM90_SHARED_BYTES


@pytest.mark.parametrize("key", [(128, False), (64, False)], ids=["D128", "D64-3consumers"])
def test_named_barrier_turns_compile(key):
    """``pingpong=2``: the consumers' turns as named barriers (``bar.sync`` / ``bar.arrive`` of 256 threads,
    one id per consumer) in place of the turn mbarriers; the mbarrier turns have no ``bar.arrive``."""
    d, causal = key
    shape = ba.Shape(2, 16, 4, 4096, 4096, d, causal)
    base = ops.GLUON_FWD[key]
    named = ba.gluon_compile_report(shape, torch.bfloat16, replace(base, pingpong=2, named_slots=False))
    plain = ba.gluon_compile_report(shape, torch.bfloat16, replace(base, pingpong=True, named_slots=False))
    assert named["error"] is None and plain["error"] is None, (named["error"], plain["error"])
    assert named["spills"] == 0
    # each consumer: a pass per turn in the prologue, the loop and the last P V, plus the first turn's grant
    assert named["census"].get("bar_arrive", 0) >= 3 * base.consumers + 1
    assert plain["census"].get("bar_arrive", 0) == 0
    # and the ring's slots: the K and V releases of each consumer's prologue, loop and last P V on top
    slots = ba.gluon_compile_report(shape, torch.bfloat16, replace(base, pingpong=2, named_slots=True))
    assert slots["error"] is None and slots["spills"] == 0
    assert slots["census"]["bar_arrive"] >= named["census"]["bar_arrive"] + 4 * base.consumers


@pytest.mark.parametrize("key", [(128, False), (256, False), (256, True), (64, False)],
                         ids=["D128", "D256", "D256-causal", "D64-3consumers"])
def test_lazy_rescale_compiles_to_a_warp_vote_and_no_new_barrier(key):
    """``lazy``: each consumer's O rescale behind a warp vote and a branch (``kernels.attention_gluon._rescale``),
    no ``bar.sync`` added (the decision is each warp's own), no spills added (D256 causal, paired, has 12
    of its own)."""
    d, causal = key
    shape = ba.Shape(2, 16, 4, 4096, 4096, d, causal)
    base = ops.GLUON_FWD[key]
    assert base.lazy, "every sm90 ws default rescales lazily (round 21)"
    lazy = ba.gluon_compile_report(shape, torch.bfloat16, base)
    plain = ba.gluon_compile_report(shape, torch.bfloat16, replace(base, lazy=False))
    assert lazy["error"] is None and plain["error"] is None, (lazy["error"], plain["error"])
    assert lazy["spills"] <= plain["spills"] <= (12 if base.paired else 0)
    assert lazy["census"].get("vote", 0) >= base.consumers and plain["census"].get("vote", 0) == 0
    assert lazy["census"]["bar_sync"] == plain["census"]["bar_sync"]


def test_lazy_needs_a_gluon_kernel():
    with pytest.raises(ValueError, match="lazy"):
        ops.FwdConfig(128, 64, 8, 2, lazy=True)
    with pytest.raises(ValueError, match="lazy"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, lazy=True)
    assert ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, lazy=True).lazy  # the one-partition kernel too


def test_pingpong_values():
    with pytest.raises(ValueError, match="pingpong"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, pingpong=3)
    assert ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, pingpong=2).pingpong == 2
    with pytest.raises(ValueError, match="named_slots"):
        ops.FwdConfig(128, 128, 8, 3, tma=True, gluon=True, ws=True, named_slots=True)  # ids for 2 stages
    with pytest.raises(ValueError, match="named_slots"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, named_slots=True)  # not the one-partition kernel


def test_cpu_tensors_never_reach_the_gluon_kernel(monkeypatch):
    """A Gluon config on CPU tensors runs the Triton path (the interpreter or the reference)."""
    def boom(*args, **kwargs):
        raise AssertionError("the Gluon kernel was launched for CPU tensors")
    monkeypatch.setattr(ops, "launch_fwd_gluon", boom)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 64, generator=gen).to(torch.float16) for _ in range(3))
    p = ops.validate(q, k, v, causal=True, scale=None, layout="bhsd")
    assert not ops.gluon_ok(p, q, k, v, q)
    assert ops.default_fwd_config(64, q.device) == ops.INTERPRETER_FWD
    if ops.triton_on_cpu():
        out = torch.full_like(q, float("nan"))
        lse = torch.full((1, 2, 40), float("nan"))
        ops.launch_fwd(q, k, v, out, lse, None, None, p, ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True))
        from tilecraft.reference.attention import attention_reference
        ref_o, _ = attention_reference(q, k, v, causal=True)
        assert ((out.double() - ref_o).norm() / ref_o.norm()).item() < 2e-3
    monkeypatch.setitem(ops.GLUON_FWD, (64, True), ops.FwdConfig(128, 128, 8, 3, tma=True, gluon=True))
    import tilecraft
    out = tilecraft.attention(q, k, v, causal=True)  # the public path on CPU
    assert not torch.isnan(out).any()


def test_gluon_config_rules():
    with pytest.raises(ValueError):
        ops.FwdConfig(64, 128, 8, 2, tma=True, gluon=True)
    with pytest.raises(ValueError):
        ops.FwdConfig(128, 128, 4, 2, tma=True, gluon=True)
    # the sm90 choice only where GLUON_FWD has the head dimension; other GPUs keep Triton's tiles
    dev = torch.device("cuda")
    assert not ops.default_fwd_config(96, dev, hopper=True).gluon
    assert not ops.default_fwd_config(128, dev, hopper=False).gluon
    assert ops.triton_fwd_config(128, dev, hopper=True) == ops.FwdConfig(128, 128, 8, 3, tma=True)
    with pytest.raises(ValueError, match="ws"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, ws=True)  # the warp-specialised kernel is a Gluon one
    with pytest.raises(ValueError, match="persistent only with ws"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, persistent=True)
    with pytest.raises(ValueError, match="poly"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, poly=1)  # the FMA-unit exp2 is in the Gluon kernels only
    # the sm90 defaults: the warp-specialised kernel where it measured faster (D128, D256, D64 non-causal), the
    # one-partition Gluon kernel at D64 causal (128 registers so two programs share an SM; since round 17 its
    # tiles heaviest first in groups of heads sized from the L2); the other causal calls pair their query tiles
    for d, causal in ((128, False), (128, True), (256, False), (256, True)):
        cfg = ops.default_fwd_config(d, dev, hopper=True, causal=causal)
        assert cfg.ws and cfg.paired == causal
    d64 = ops.default_fwd_config(64, dev, hopper=True)  # round 16: three consumer warpgroups, persistent
    assert d64.ws and d64.consumers == 3 and d64.persistent and d64.block_m == 192
    d64c = ops.default_fwd_config(64, dev, hopper=True, causal=True)
    assert d64c.gluon and not d64c.ws and not d64c.paired and d64c.maxnreg == 128 and d64c.order == ops.ORDER_AUTO
    # round 10: early rescale / conversion and tree reductions at D128, trees at D256 (measured faster)
    for d, causal in ((128, False), (128, True)):
        cfg = ops.default_fwd_config(d, dev, hopper=True, causal=causal)
        assert cfg.early and cfg.tree
    assert all(ops.default_fwd_config(256, dev, hopper=True, causal=c).tree for c in (False, True))
    # three consumer warpgroups: 192-row tiles over 12 consumer warps, ws only
    three = ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, overlap=False, ws=True, consumers=3)
    assert ops.ws_registers(three) == (ops.WS3_CONSUMER_REGS, ops.WS_LOADER_REGS, ops.WS3_MAXNREG)
    with pytest.raises(ValueError):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, consumers=3)
    with pytest.raises(ValueError):
        ops.FwdConfig(192, 128, 12, 2, tma=True, gluon=True, consumers=3)  # not ws
    with pytest.raises(ValueError):
        ops.FwdConfig(256, 128, 16, 2, tma=True, gluon=True, ws=True, consumers=4)
    with pytest.raises(ValueError, match="early"):
        ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, early=True)  # the ws kernel's option


_WS_PTX = r"""
import json, re, sys
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from tilecraft.bench import attention as ba
from tilecraft.kernels import attention_gluon
from tilecraft.ops import attention as ops
d, causal, n, stages, overlap, pingpong, persistent, poly, consumers, early, tree = json.loads(sys.argv[1])
cfg = ops.FwdConfig(64 * consumers, n, 4 * consumers, stages, tma=True, gluon=True, overlap=overlap, ws=True,
                    pingpong=pingpong, persistent=persistent, poly=poly, consumers=consumers, early=early, tree=tree)
k = ba.gluon_kernel_signature(ba.Shape(2, 16, 4, 4096, 4096, d, causal), torch.bfloat16, cfg)
sig = {name: t if t.startswith("tensordesc") else t.split(":")[0] for name, t in k["signature"].items()}
sig.update(dict.fromkeys(k["constexprs"], "constexpr"))
src = GluonASTSource(fn=getattr(attention_gluon, k["kernel"]), signature=sig, constexprs=k["constexprs"])
ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": k["num_warps"], "maxnreg": k["maxnreg"]}).asm["ptx"]
print(json.dumps({"setmaxnreg": re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx),
                  "maxnreg": re.findall(r"\.maxnreg\s+(\d+)", ptx),
                  "tma_load": len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global", ptx)),
                  "tma_store": len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.global\.shared", ptx)),
                  "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
                  "cta_barrier": len(re.findall(r"bar\.sync\s+0;|barrier\.sync\.aligned\s+0;", ptx))}))
"""


@pytest.mark.parametrize("d,causal,n,stages,overlap,pingpong,persistent,poly,consumers,early,tree", [
    (128, False, 128, 2, False, True, False, 0, 2, False, False), (128, True, 128, 2, True, True, False, 0, 2, False, False),
    (64, True, 128, 3, False, False, False, 0, 2, False, False), (256, False, 64, 2, False, True, False, 0, 2, False, False),
    (128, True, 128, 2, False, True, True, 1, 2, False, False), (256, False, 64, 2, False, True, True, 0, 2, False, False),
    # round 10: the early conversion / rescale and tree reductions (the D128 and D256 defaults), three consumers
    (128, False, 128, 2, False, True, False, 0, 2, True, True), (128, True, 128, 2, True, True, False, 0, 2, True, True),
    (256, True, 64, 2, True, True, False, 0, 2, False, True), (64, True, 128, 2, False, True, False, 0, 3, False, False),
    (64, False, 64, 3, False, True, False, 0, 3, True, True)])
def test_gluon_ws_forward_compiles_to_setmaxnreg_wgmma_and_tma(d, causal, n, stages, overlap, pingpong, persistent,
                                                               poly, consumers, early, tree):
    """The warp-specialised forward: 12 warps (two 4-warp consumers, a 1-warp loader, padding),
    the register split by ``setmaxnreg`` (consumers up to 240, the loader down to 24), the TMA loads
    in the loader and the O stores in each consumer, wgmma in both consumers, no spills; also
    persistent (one program per SM walking the tiles, O in its own buffer where it fits: D128),
    with the FMA-unit exp2, with round 10's early rescale and tree reductions, and with three
    consumers (16 warps, 160 registers each, 128 at entry)."""
    import json
    import os
    import subprocess
    import sys

    cfg = ops.FwdConfig(64 * consumers, n, 4 * consumers, stages, tma=True, gluon=True, overlap=overlap, ws=True,
                        pingpong=pingpong, persistent=persistent, poly=poly, consumers=consumers, early=early,
                        tree=tree)
    res = ba.gluon_compile_report(ba.Shape(2, 16, 4, 4096, 4096, d, causal), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    assert res["spills"] == 0 and res["scratch_bytes"] == 0
    assert 0 < res["shared_bytes"] <= SM90_SHARED_BYTES
    assert res["num_warps"] == 4 * (consumers + 1)
    hgmma = sum(v for key, v in res["census"].items() if key.startswith("sass:HGMMA"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _WS_PTX,
                        json.dumps([d, causal, n, stages, overlap, pingpong, persistent, poly, consumers, early,
                                    tree])],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    regs = {(kind, int(v)) for kind, v in facts["setmaxnreg"]}
    consumer_regs, loader_regs, maxnreg = ops.ws_registers(cfg)
    assert ("dec", loader_regs) in regs, regs
    assert ("inc", consumer_regs) in regs or ("dec", consumer_regs) in regs, regs
    assert facts["maxnreg"] == [str(maxnreg)]
    # per consumer: Q K^T (D/16 k-steps) in the first turn and in the loop, P V (BLOCK_N/16) in the loop and the last turn
    per_consumer = 2 * (d // 16) + 2 * (n // 16)
    assert facts["wgmma"] == consumers * per_consumer == hgmma
    assert facts["tma_load"] >= 3 and facts["tma_store"] == consumers  # Q, K, V in the loader; O in each consumer
    assert facts["cta_barrier"] == 0, "no CTA-wide barrier: the partitions meet only at mbarriers"


def test_persistent_grid_and_separate_o_buffer():
    """One program per tile, or at most one per SM when persistent; O gets its own shared buffer
    only where Q, O and the K/V ring fit sm90's 227 KB together."""
    ws = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True)
    pers = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, ws=True, persistent=True)
    q = torch.empty(2, 16, 1000, 128, dtype=torch.bfloat16)
    p = ops.validate(q, q[:, :4], q[:, :4], causal=True, scale=None, layout="bhsd")
    cpu = torch.device("cpu")  # ops._sm_count gives 4 "SMs" off the GPU
    assert ops.ws_grid(p, ws, cpu) == 8 * 32 and ops.ws_grid(p, pers, cpu) == 4
    assert ops.ws_separate_o(pers, 128) and not ops.ws_separate_o(ws, 128)
    assert ops.ws_separate_o(ops.FwdConfig(128, 128, 8, 3, tma=True, gluon=True, ws=True, persistent=True), 64)
    # D256: Q (64 KB) + the 128 x 64 ring of 2 stages (128 KB) leave no room for O (64 KB)
    assert not ops.ws_separate_o(ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, ws=True, persistent=True), 256)


def test_fma_exp2_constants():
    """``_exp2_fma``'s arithmetic replayed in float32 with the kernel's constants: relative error
    below 1.1e-4 over the softmax's range, exact powers of two at integers, exactly 0 at and below
    -127 (and for -inf: masked logits must give p = 0, or an all-masked row would not stay 0)."""
    np = pytest.importorskip("numpy")
    from tilecraft.kernels.attention_gluon import EXP2_POLY, ROUND_MAGIC

    c1, c2, c3 = (np.float32(c) for c in EXP2_POLY)
    magic = np.float32(ROUND_MAGIC)

    def exp2_fma(x):
        x = np.maximum(np.asarray(x, np.float32), np.float32(-127.0))
        t = x + magic
        f = x - (t - magic)
        p = ((f * c3 + c2) * f + c1) * f + np.float32(1.0)
        bits = p.view(np.int32) + (t.view(np.int32) << np.int32(23))
        return bits.view(np.float32)

    with np.errstate(over="ignore"):
        x = np.linspace(-125.9, 0.0, 400_003, dtype=np.float32)
        rel = np.abs(exp2_fma(x).astype(np.float64) / np.exp2(x.astype(np.float64)) - 1)
        assert rel.max() < 1.1e-4
        ints = np.arange(-126, 1, dtype=np.float32)
        assert np.array_equal(exp2_fma(ints), np.exp2(ints))
        assert np.all(exp2_fma(np.array([-127.0, -200.0, -1e30, -np.inf], np.float32)) == 0)


@pytest.mark.parametrize("cfg", [ops.FwdConfig(128, 64, 8, 3, tma=True, gluon=True, overlap=False, paired=True),
                                 ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, maxnreg=128)],
                         ids=["paired-128x64-s3", "128x128-maxnreg128"])
def test_gluon_paired_and_capped_forward_compiles_for_two_programs_per_sm(cfg):
    """Paired causal tiles unroll the two tiles (the rings' second pass, a second Q load and O store);
    a 128-register cap brings D64 causal 128x128 (132 registers uncapped) to two programs per SM."""
    res = ba.gluon_compile_report(ba.Shape(8, 16, 16, 2048, 2048, 64, True), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    assert res["spills"] == 0 and res["registers"] <= 128
    assert res["occupancy"] == 16  # warps per SM: two 8-warp programs
    loads = res["census"].get("sass:UTMALDG", 0)
    assert res["census"].get("sass:UTMASTG", 0) == (2 if cfg.paired else 1)
    assert loads >= (6 if cfg.paired else 3)


@pytest.mark.parametrize("d,n", [(128, 128), (256, 64)])
def test_gluon_ws_paired_compiles(d, n):
    """The warp-specialised kernel with paired causal tiles walks its two tiles through the persistent
    loop's machinery (ring count and turns carried on); no spills, within sm90's shared memory."""
    # D256 with the overlap spills in a loop over tiles (84 bytes; persistent: 120), so the plain order there
    cfg = ops.FwdConfig(128, n, 8, 2, tma=True, gluon=True, overlap=d == 128, ws=True, early=d == 128, tree=True,
                        paired=True)
    res = ba.gluon_compile_report(ba.Shape(4, 16, 16, 4096, 4096, d, True), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    assert res["spills"] == 0
    assert 0 < res["shared_bytes"] <= SM90_SHARED_BYTES


@pytest.mark.parametrize("cfg", [
    ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, maxnreg=128, order=16),
    ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True, tree=True, order=8),
    ops.FwdConfig(128, 64, 8, 2, tma=True, gluon=True, overlap=True, ws=True, tree=True, order=4),
    ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=True, ws=True, early=True, tree=True, persistent=True,
                  order=8),
], ids=["one-partition-d64", "ws-d128", "ws-d256", "ws-persistent-d128"])
def test_gluon_grouped_heavy_first_order_compiles(cfg):
    """``order`` (the causal tiles launched heaviest first inside groups of heads) changes only the
    program -> tile mapping: the kernels compile as their ``order = 0`` twins do (no spills, the same
    registers at D64 capped for two programs per SM). Its numbers: tests/gpu/test_attention_gluon.py."""
    d = 64 if cfg.maxnreg else 256 if cfg.block_n == 64 else 128
    shape = ba.Shape(8, 16, 16, 2048, 2048, d, True)
    assert ba.gluon_kernel_signature(shape, torch.bfloat16, cfg)["constexprs"]["ORDER"] == cfg.order
    res = ba.gluon_compile_report(shape, torch.bfloat16, cfg)
    twin = ba.gluon_compile_report(shape, torch.bfloat16, replace(cfg, order=0))
    assert res["error"] is None and twin["error"] is None, (res["error"], twin["error"])
    assert res["spills"] == twin["spills"] == 0
    assert res["shared_bytes"] == twin["shared_bytes"] <= SM90_SHARED_BYTES
    if cfg.maxnreg:
        assert res["registers"] <= 128 and res["occupancy"] == 16


@pytest.mark.parametrize("kwargs,match", [
    (dict(order=-2), "order must be"), (dict(order=True), "order must be"),
    (dict(order=8, paired=True), "without paired"), (dict(order=8, gluon=False, tma=False), "without paired"),
])
def test_order_refuses_bad_values(kwargs, match):
    base = dict(tma=True, gluon=True, overlap=False)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ops.FwdConfig(128, 128, 8, 2, **base)


def test_causal_group_fits_a_third_of_the_l2():
    """The automatic group (``ORDER_AUTO``): the largest power of two whose K/V fits a third of the L2."""
    l2 = 50 * 2**20
    assert ops.causal_group(128, 1, 2048, 64, l2) == 32  # round 17's D64 causal: 32 heads, 16 MiB
    assert ops.causal_group(128, 1, 8192, 64, l2) == 8
    assert ops.causal_group(128, 4, 8192, 64, l2) == 32  # four query heads share each K/V head
    assert ops.causal_group(6, 1, 128, 64, l2) == 4  # at most B * H (a power of two)
    assert ops.causal_group(1, 1, 128, 64, l2) == 1
    assert ops.causal_group(64, 1, 2**20, 128, l2) == 1  # one head's K/V larger than the L2: groups of one
    auto = ops.FwdConfig(128, 128, 8, 2, tma=True, gluon=True, overlap=False, order=ops.ORDER_AUTO)
    assert ops.order_constexpr(auto, True, 128, 1, 2048, 64, l2) == 32
    assert ops.order_constexpr(auto, False, 128, 1, 2048, 64, l2) == 0  # non-causal tiles keep their order
    assert ops.order_constexpr(replace(auto, order=5), True, 128, 1, 2048, 64, l2) == 5
    with pytest.raises(ValueError, match="order must be"):
        replace(auto, order=-2)
