"""The GPU run itself works: the stencil kernel compiled for the device agrees with float64."""
from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.reference.stencil import laplacian_reference


def test_laplacian_on_the_gpu_matches_float64() -> None:
    gen = torch.Generator().manual_seed(20261121)
    u = torch.rand((37, 41, 45), dtype=torch.float64, generator=gen) * 2 - 1
    out = torch.full_like(u, float("nan"), device="cuda")
    tilecraft.laplacian(u.cuda(), order=4, out=out)
    ref = laplacian_reference(u, order=4)
    r = 2
    inner = (slice(r, -r),) * 3
    torch.testing.assert_close(out.cpu()[inner], ref, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("order,shape", [(2, (37, 41, 45)), (8, (26, 45, 136)), (8, (30, 70, 200)),
                                         (4, (21, 33, 64)), (16, (40, 41, 72))])
def test_auto_on_the_gpu_matches_float64(order, shape, dtype, monkeypatch, tmp_path) -> None:
    """``auto``'s heuristic kernel for each case as compiled for the device (for aligned order 8 on sm90
    the cp.async-ring march, elsewhere the register-window z-march with its L1 prefetch: both only run on
    a GPU), into a NaN-poisoned
    ``out``: the interior against float64, the boundary untouched. Tuning is off here (an empty cache,
    ``TILECRAFT_TUNE=0``), so the heuristic's kernels are the ones checked; the tuned ``auto``:
    test_stencil_tuning_gpu.py."""
    from tilecraft.ops import stencil as ops

    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    ops.clear_choices()

    gen = torch.Generator().manual_seed(20261125 + order)
    u = (torch.rand(shape, dtype=torch.float64, generator=gen) * 2 - 1).to(dtype)
    out = torch.full(shape, float("nan"), dtype=dtype, device="cuda")
    uc = u.cuda()
    tilecraft.laplacian(uc, order=order, out=out)
    r = order // 2
    inner = (slice(r, -r),) * 3
    got = out.cpu()
    ref = laplacian_reference(u.double(), order=order)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert not torch.isnan(got[inner]).any()
    assert (got[inner].double() - ref).abs().max().item() <= tol * ref.abs().max().item()
    boundary = torch.ones(shape, dtype=torch.bool)
    boundary[inner] = False
    assert torch.isnan(got[boundary]).all()
    cfg = ops.choose_config(uc, out, order).config
    # the heuristic on the grid's facts, as choose_config asks it (8-byte rows: odd fp64 nx takes the 8-byte ring)
    facts = (torch.cuda.get_device_properties(0).L2_cache_size, ops.vector_aligned(uc, out),
             ops.flat_ok(uc, out) is None)
    expected = ops.auto_config(dtype, order, shape, *facts, ops.smem_device(uc), ops.half_aligned(uc, out))
    if expected.kernel == "smem" and ops.smem_ok(uc, out, order, expected) is not None:
        expected = ops.auto_config(dtype, order, shape, *facts)
    assert cfg == expected
    if order == 8:
        assert cfg.kernel == ("smem" if ops.smem_device(uc) else "zwin"), cfg
    ops.clear_choices()
