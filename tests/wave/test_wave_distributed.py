"""Slab decomposition along axis 0 on CPU processes with gloo: records bit-identical to one process."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecraft import wave
from tilecraft.ops.wave import CpmlConfig
from tilecraft.wave.distributed import simulate_spawned
from tilecraft.wave.solver import split_planes


def _case(shape):
    nd = len(shape)
    v = torch.rand(shape, dtype=torch.float32, generator=torch.Generator().manual_seed(1)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[150.0] + [100.0] * (nd - 1)], f0=20.0)
    rec = wave.Receivers([[10.0 * i] + [100.0] * (nd - 1) for i in range(0, shape[0], 3)])
    return model, src, rec


@pytest.mark.parametrize("shape,ranks,kw", [
    ((40, 31), 2, {"order": 4, "boundary": "pml", "pml_width": 6, "free_surface": True}),
    ((30, 21, 23), 3, {"order": 4, "boundary": "pml", "pml_width": 5}),
    ((30, 25), 2, {"order": 8, "boundary": "sponge", "pml_width": 6}),
])
def test_slabs_are_bit_identical_to_one_process(shape, ranks, kw):
    model, src, rec = _case(shape)
    nt = 60 if len(shape) == 2 else 25
    one = wave.simulate(model, src, rec, nt, backend="torch", snapshots=[nt - 1], **kw)
    many = simulate_spawned(model, src, rec, nt, ranks=ranks, backend="torch", snapshots=[nt - 1], **kw)
    assert float(one.record.abs().max()) > 0
    assert many.info["ranks"] == ranks and one.info["ranks"] == 1
    assert torch.equal(one.record, many.record)
    assert torch.equal(one.snapshots[0][1], many.snapshots[0][1])


def test_too_many_ranks_is_an_error_before_spawning():
    model, src, rec = _case((20, 21))
    with pytest.raises(ValueError, match="narrower than the stencil radius"):
        simulate_spawned(model, src, rec, 5, ranks=20, order=8, boundary="none")


@pytest.mark.parametrize("shape,kw", [
    ((40, 31), {"order": 4, "boundary": "pml", "pml_width": 6, "free_surface": True}),
    ((18, 11, 13), {"order": 2, "boundary": "pml", "pml_width": 3}),
    ((40, 31), {"order": 4, "boundary": "pml", "pml_width": 6, "pml_config": CpmlConfig(8, 32, 16, 1, fused=False)}),
    ((40, 31), {"order": 4, "boundary": "pml", "pml_width": 6,
                "pml_config": CpmlConfig(8, 32, 16, 1, two_phase=True, by_axes=True)}),
    ((40, 31), {"order": 4, "boundary": "pml", "pml_width": 6, "free_surface": True,
                "pml_config": CpmlConfig(8, 32, 16, 1, march=True, narrow=(8, 16, 1))}),
    ((18, 11, 13), {"order": 2, "boundary": "pml", "pml_width": 3,
                    "pml_config": CpmlConfig(4, 16, 3, 1, march=True, narrow=(4, 16, 1))}),
    ((18, 11, 13), {"order": 2, "boundary": "pml", "pml_width": 3,
                    "pml_config": CpmlConfig(4, 16, 3, 1, march=True, narrow=(4, 16, 1),
                                             psi_tiles=((4, 16, 3, 1), (2, 16, 5, 1), (4, 16, 2, 1)), interior_first=True)}),
])
def test_triton_cpml_slabs_are_bit_identical(shape, kw):
    """The Triton step with the CPML (interpreter; 2R halos, psi_z's halos exchanged or recomputed)
    on 2 ranks gives the one-process record bit for bit, and the torch backend's to rounding: the
    folded recompute variant (the interpreter's default), the unfused launches, the two-phase
    variant and the layers' z-march."""
    if not torch.cuda.is_available():
        pytest.importorskip("triton")
        import os
        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("the Triton backend on the CPU needs TRITON_INTERPRET=1")
    model, src, rec = _case(shape)
    nt = 20 if len(shape) == 2 else 5
    one = wave.simulate(model, src, rec, nt, backend="triton", **kw)
    many = simulate_spawned(model, src, rec, nt, ranks=2, backend="triton", **kw)
    ref = wave.simulate(model, src, rec, nt, backend="torch", **{k: v for k, v in kw.items() if k != "pml_config"})
    assert float(one.record.abs().max()) > 0 and many.info["ranks"] == 2
    assert torch.equal(one.record, many.record)
    assert float((one.record - ref.record).abs().max()) <= 1e-5 * float(ref.record.abs().max())


@settings(max_examples=300, deadline=None)
@given(own=st.integers(1, 40), hw=st.integers(1, 16), world=st.integers(1, 5), data=st.data())
def test_split_planes_covers_the_slab_once_and_waits_only_for_real_neighbours(own, hw, world, data):
    """``split_planes``: interior and edges are disjoint and cover [hw, own + hw); an edge holds only
    planes within hw of a side that has a neighbour; every plane within hw of such a side is in an
    edge (it reads that neighbour's halo); one rank: everything is interior."""
    rank = data.draw(st.integers(0, world - 1))
    interior, edges = split_planes(own, hw, rank, world)
    pieces = ([interior] if interior else []) + edges
    planes = [z for a, b in pieces for z in range(a, b)]
    assert sorted(planes) == list(range(hw, own + hw))  # each once
    in_edges = {z for a, b in edges for z in range(a, b)}
    needs = {z for z in range(hw, own + hw) if (rank > 0 and z < 2 * hw) or (rank < world - 1 and z >= own)}
    assert in_edges == needs
    assert len(edges) <= (rank > 0) + (rank < world - 1)
    if world == 1:
        assert interior == (hw, own + hw) and not edges
