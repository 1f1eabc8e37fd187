"""The Gluon split-KV decode kernel (``attention_decode_gluon_kernel``) cross-compiled for sm90 here,
and the dispatch rules around it (CPU tensors never reach it).

The interpreter cannot run Gluon; the numerical check is tests/gpu/test_attention_decode_gluon.py.
"""
from __future__ import annotations

import pytest
import torch

from tilecraft.bench import attention as ba
from tilecraft.ops import attention as ops

pytest.importorskip("triton.experimental.gluon")
SM90_SHARED_BYTES = 232448
D = ops.DecodeConfig


@pytest.mark.parametrize("cfg,causal", [(D(64, 4, 3, gluon=True), False), (D(32, 4, 4, gluon=True, overlap=True), True)],
                         ids=["64s3", "32s4-overlap-causal"])
def test_gluon_decode_compiles_to_wgmma_and_tma(cfg, causal):
    res = ba.gluon_decode_compile_report(ba.Shape(8, 32, 8, 16, 8192, 128, causal), torch.bfloat16, cfg)
    assert res["error"] is None, res["error"]
    census = res["census"]
    hgmma = {k: n for k, n in census.items() if k.startswith("sass:HGMMA")}
    # Q K^T: D/16 = 8 steps of m64 n=BLOCK_N; P V: BLOCK_N/16 steps of m64n128 (twice with the overlap:
    # inside the loop and in the epilogue)
    reps = 2 if cfg.overlap else 1
    assert hgmma.get(f"sass:HGMMA.64x{cfg.block_n}x16.F32.BF16", 0) == 8 * reps
    assert hgmma.get("sass:HGMMA.64x128x16.F32.BF16", 0) == cfg.block_n // 16 * reps
    assert not any(k.startswith("matrix:mma.") for k in census), "no mma.sync fallback"
    assert census.get("sass:UTMALDG", 0) >= 4  # K and V: the prologue's and the refills
    assert res["spills"] == 0
    # Q (64 x D) and the K/V ring: two programs per SM at 3 stages of 64 keys
    assert 0 < res["shared_bytes"] <= SM90_SHARED_BYTES
    assert res["num_warps"] == 4


def test_gluon_decode_config_rules_and_cpu_dispatch(monkeypatch):
    with pytest.raises(ValueError, match="one warpgroup"):
        D(64, 8, 3, gluon=True)
    with pytest.raises(ValueError, match="overlap"):
        D(64, 4, 3, overlap=True)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 3, 64, generator=gen).to(torch.float16)
    k, v = (torch.randn(1, 2, 1100, 64, generator=gen).to(torch.float16) for _ in range(2))
    p = ops.validate(q, k, v, causal=False, scale=None, layout="bhsd")
    assert ops.uses_decode(p)
    monkeypatch.setitem(ops.SM90_DECODE, 64, (D(64, 4, 4, programs_per_sm=1), D(64, 4, 3, gluon=True)))
    # CPU tensors: the Triton (interpreter) config even where SM90_DECODE has one
    assert ops.decode_config(p, q, k, v) == ops.INTERPRETER_DECODE
    out = torch.full_like(q, float("nan"))
    lse = torch.full((1, 4, 3), float("nan"))
    with pytest.raises(ValueError, match="Gluon decode"):
        ops.launch_decode(q, k, v, out, lse, p, D(64, 4, 3, gluon=True))  # an explicit Gluon config: no silent path
    import tilecraft
    from tilecraft.reference.attention import attention_reference
    out = tilecraft.attention(q, k, v)  # the public path on CPU, SM90_DECODE set
    ref, _ = attention_reference(q, k, v)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 2e-3


def test_sm90_decode_choice_by_rows():
    """Full group tiles (G x S_q >= 64 rows) take one program per SM with a 4-stage ring (Triton, the
    chunks merged in the decode kernel);
    fewer rows the Gluon kernel with the overlap; head dims not measured: none (the Triton default)."""
    full = ops.sm90_decode_choice(128, 64)
    assert full == ops.sm90_decode_choice(128, 128) and not full.gluon and full.programs_per_sm == 1
    assert full.num_stages == 4 and full.block_n == 64 and full.fuse and not ops.sm90_decode_choice(128, 4).fuse
    few = ops.sm90_decode_choice(128, 4)
    assert few.gluon and few.overlap and ops.sm90_decode_choice(128, 63) == few
    assert ops.sm90_decode_choice(96, 64) is None
    # the measured shape, B8 H32/8 S16x8192 on 132 SMs: 64 programs -> 2 chunks of 4096 keys (one wave of 128)
    q = torch.empty(8, 32, 16, 128, dtype=torch.float16, device="meta")
    k = torch.empty(8, 8, 8192, 128, dtype=torch.float16, device="meta")
    p = ops.validate(q, k, k, causal=False, scale=None, layout="bhsd")
    from unittest import mock
    with mock.patch.object(ops, "_sm_count", return_value=132):
        assert ops.decode_splits(p, full, torch.device("cuda"))[:2] == (2, 4096)
        assert ops.decode_splits(p, ops.DecodeConfig(64, 4, 3), torch.device("cuda"))[:2] == (4, 2048)
