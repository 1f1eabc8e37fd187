"""Slab decomposition along axis 0 on CPU processes with gloo: records bit-identical to one process."""
from __future__ import annotations

import pytest
import torch

from tilecraft import wave
from tilecraft.wave.distributed import simulate_spawned


def _case(shape):
    nd = len(shape)
    v = torch.rand(shape, dtype=torch.float32, generator=torch.Generator().manual_seed(1)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[150.0] + [100.0] * (nd - 1)], f0=20.0)
    rec = wave.Receivers([[10.0 * i] + [120.0] * (nd - 1) for i in range(0, shape[0], 3)])
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
