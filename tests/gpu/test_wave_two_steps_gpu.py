"""Two plain time steps a pass (``ops.wave.two_steps_into``) compiled for the GPU: against two float64 torch steps on
odd grids and inner boxes, with many programs whose extended tiles overlap (their p1 stores race with the same bits),
and the same bits on every run."""
from __future__ import annotations

import math

import pytest
import torch

from tilecraft.ops import wave as ops
from tilecraft.ops.wave import WaveConfig
from tilecraft.reference.wave import wave_step_torch

TOL = {torch.float32: 3e-6, torch.float64: 1e-13}


@pytest.mark.parametrize("dtype,order,shape,box,cfg", [
    (torch.float32, 8, (77, 93, 136), None, None),
    (torch.float32, 8, (70, 81, 200), ((9, 11, 16), (60, 70, 184)), None),
    (torch.float32, 8, (45, 61, 104), None, WaveConfig(16, 64, 7, 8)),
    (torch.float32, 16, (41, 47, 96), None, None),
    (torch.float64, 8, (53, 67, 90), None, None),
    (torch.float64, 4, (37, 43, 66), ((5, 3, 4), (30, 40, 60)), WaveConfig(16, 16, 5, 4)),
])
def test_two_steps_on_the_gpu(dtype, order, shape, box, cfg):
    r = order // 2
    lo, hi = box or ((r,) * 3, tuple(n - r for n in shape))
    gen = torch.Generator(device="cuda").manual_seed(hash((dtype, order, shape)) % 2**31)
    pp, p, caller = (torch.rand(shape, generator=gen, device="cuda", dtype=dtype) - 0.5 for _ in range(3))
    m = torch.rand(shape, generator=gen, device="cuda", dtype=dtype) * 0.05 + 0.02
    spacing = (1.0, 0.9, 1.1)
    inside = torch.zeros(shape, dtype=torch.bool, device="cuda")
    inside[tuple(slice(a, b) for a, b in zip(lo, hi))] = True
    ref1 = caller.double().clone()
    wave_step_torch(p.double(), pp.double(), m.double(), ref1, order, spacing, lo, hi)
    ref2 = torch.full(shape, math.nan, dtype=torch.float64, device="cuda")
    wave_step_torch(ref1, p.double(), m.double(), ref2, order, spacing, lo, hi)
    runs = []
    for _ in range(3):
        p1 = torch.where(inside, torch.full_like(caller, math.nan), caller)
        p2 = torch.full(shape, math.nan, dtype=dtype, device="cuda")
        ops.two_steps_into(pp, p, m, p1, p2, order, spacing, lo, hi, cfg)
        torch.cuda.synchronize()
        for got, ref in ((p1, ref1), (p2, ref2)):
            assert not torch.isnan(got[inside]).any()
            assert float((got[inside].double() - ref[inside]).abs().max() / ref[inside].abs().max()) < TOL[dtype]
        assert torch.equal(p1[~inside], caller[~inside]) and torch.isnan(p2[~inside]).all()
        runs.append((p1, p2))
    for p1, p2 in runs[1:]:
        assert torch.equal(p1, runs[0][0]) and torch.equal(p2[inside], runs[0][1][inside])  # (NaN outside)
