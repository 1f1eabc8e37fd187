"""``variant="auto"`` tunes itself on the GPU: the first call on a 128x160x192 grid times the candidates
(``tilecraft.tuning.stencil.candidates``) with CUDA graphs, caches the fastest, and its result, written
into a NaN-poisoned ``out``, matches the float64 reference with the boundary untouched; a new process
(the in-memory state cleared) reads the cache and times nothing; CUDA-graph capture refuses to tune
and works after ``warmup``."""
from __future__ import annotations

import json

import pytest
import torch

import tilecraft
from tilecraft.ops import stencil as ops
from tilecraft.reference.stencil import laplacian_reference
from tilecraft.tuning import cache

SHAPE = (128, 160, 192)
SPACING = (0.7, 1.1, 0.9)


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    monkeypatch.delenv("TILECRAFT_QUIET", raising=False)
    cache.clear_memory()
    ops.clear_choices()
    yield tmp_path
    cache.clear_memory()
    ops.clear_choices()


def _field(dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(SHAPE, dtype=torch.float64, generator=gen) * 2 - 1).to(dtype).cuda()


def _assert_matches_float64(u: torch.Tensor, out: torch.Tensor, order: int) -> None:
    r = order // 2
    inner = (slice(r, -r),) * 3
    got = out.cpu()
    ref = laplacian_reference(u.cpu().double(), order, SPACING)
    assert not torch.isnan(got[inner]).any(), "unwritten interior points"
    err = ((got[inner].double() - ref).norm() / ref.norm()).item()
    assert err <= (1e-5 if u.dtype == torch.float32 else 1e-12), err
    boundary = torch.ones(SHAPE, dtype=torch.bool)
    boundary[inner] = False
    assert torch.isnan(got[boundary]).all(), "boundary written"


@pytest.mark.parametrize("dtype,order", [(torch.float64, 2), (torch.float32, 2), (torch.float64, 4),
                                         (torch.float32, 8), (torch.float64, 16)],
                         ids=["fp64-o2", "fp32-o2", "fp64-o4", "fp32-o8", "fp64-o16"])
def test_auto_tunes_caches_and_matches_float64(dtype, order, fresh_cache, monkeypatch, capsys):
    u = _field(dtype, 20261127 + order)
    out = torch.full(SHAPE, float("nan"), dtype=dtype, device="cuda")
    tilecraft.laplacian(u, order=order, spacing=SPACING, out=out)
    _assert_matches_float64(u, out, order)
    choice = ops.choose_config(u, out, order)
    assert choice.source == "tuned", choice
    rows = choice.entry["candidates"]
    assert len(rows) >= 3 and all(row["ms"] is not None and row["ms"] > 0 for row in rows), rows
    fastest, ms = min(row["ms"] for row in rows), choice.entry["ms"]
    assert ms == fastest or (ms == choice.entry["heuristic_ms"] and fastest > (1 - ops.TUNE_MARGIN) * ms)
    files = list((fresh_cache / "tuning").glob("stencil-*.json"))
    assert len(files) == 1 and choice.key in json.loads(files[0].read_text())
    err = capsys.readouterr().err
    assert f"tilecraft: tuning stencil {choice.key}: {len(rows)} configs" in err and "skipped" not in err

    # as a new process: the cache file gives the same config, nothing is timed
    cache.clear_memory()
    ops.clear_choices()
    monkeypatch.setattr(ops, "graph_time_ms", lambda *a, **k: pytest.fail("timed again"))
    again = torch.full_like(out, float("nan"))
    tilecraft.laplacian(u, order=order, spacing=SPACING, out=again)
    torch.cuda.synchronize()
    assert torch.equal(again.nan_to_num(7.0), out.nan_to_num(7.0))
    cached = ops.choose_config(u, again, order)
    assert cached.source == "cache" and cached.config == choice.config


def test_capture_refuses_to_tune_and_warmup_prepares(fresh_cache):
    u = _field(torch.float64, 5)
    out = torch.full(SHAPE, float("nan"), dtype=torch.float64, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"tilecraft\.ops\.stencil\.warmup\(u, order=\.\.\., spacing=\.\.\., out=None\)"):
        with torch.cuda.graph(graph):
            tilecraft.laplacian(u, order=2, spacing=SPACING, out=out)
    cfg = ops.warmup(u, order=2, spacing=SPACING, out=out)
    assert cfg == ops.choose_config(u, out, 2).config
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tilecraft.laplacian(u, order=2, spacing=SPACING, out=out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _assert_matches_float64(u, out, 2)
