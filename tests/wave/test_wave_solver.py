"""simulate(): inputs, errors before any step, the CFL limit, sources/receivers, backends agree."""
from __future__ import annotations

import math

import pytest
import torch

from tilecraft import wave
from tilecraft.ops import wave as ops
from tilecraft.wave.solver import stable_dt, stencil_symbol_max
from tilecraft.wave.source import point_weights


def _setup(shape=(30, 40), v=1500.0, h=10.0, dtype=torch.float64):
    nd = len(shape)
    model = wave.Model.constant(shape, v, spacing=h, dtype=dtype)
    src = wave.Source([[150.0] + [200.0] * (nd - 1)], f0=20.0)
    rec = wave.Receivers([[100.0] + [50.0 + 40.0 * i] * (nd - 1) for i in range(5)])
    return model, src, rec


# ---------------------------------------------------------------------------------------------
# errors, all before any step runs
# ---------------------------------------------------------------------------------------------
def test_unstable_dt_is_an_error():
    model, src, rec = _setup()
    dt_max = stable_dt(model.vmax, model.spacing, 8)
    with pytest.raises(ValueError, match="unstable.*CFL"):
        wave.simulate(model, src, rec, 10, dt=dt_max * 1.001, backend="torch")
    res = wave.simulate(model, src, rec, 3, dt=dt_max, backend="torch")
    assert res.dt == dt_max and res.info["courant"] == 1.0


def test_model_errors():
    with pytest.raises(ValueError, match="> 0"):
        wave.Model(torch.tensor([[1500.0, 0.0], [1.0, 1.0]]), 10.0)
    with pytest.raises(ValueError, match="> 0"):
        wave.Model.constant((5, 5), -1.0)
    with pytest.raises(ValueError, match="non-finite"):
        wave.Model(torch.tensor([[1500.0, math.nan], [1.0, 1.0]]), 10.0)
    with pytest.raises(TypeError, match="spacing"):
        wave.Model.constant((5, 5, 5), 1500.0, spacing=(10.0, 10.0))
    with pytest.raises(ValueError, match="2D .* or 3D"):
        wave.Model(torch.ones(5), 10.0)
    with pytest.raises(TypeError, match="dtype"):
        wave.Model(torch.ones(5, 5, dtype=torch.float16), 10.0)
    with pytest.raises(ValueError, match="one more velocity"):
        wave.Model.layered((10, 10), [1500.0, 2000.0], [10.0, 20.0])
    with pytest.raises(ValueError, match="empty"):
        wave.Model(torch.zeros(0, 5), 10.0)
    with pytest.raises(ValueError, match="does not fit"):
        wave.Model.constant((5, 5), 1e300)
    with pytest.raises(ValueError, match="out of range"):
        wave.Model.constant((5, 5), 1500.0, spacing=1e-300)
    with pytest.raises(ValueError, match="n must be a positive"):
        wave.Receivers.line((0.0, 0.0), (10.0, 10.0), -1)
    with pytest.raises(ValueError, match="same length"):
        wave.Receivers.line((0.0, 0.0), (10.0, 10.0, 1.0), 3)
    with pytest.raises(ValueError, match="vmax"):
        stable_dt(0.0, (10.0, 10.0), 4)
    with pytest.raises(ValueError, match="spacing"):
        stable_dt(1500.0, (0.0, 10.0), 4)
    np = pytest.importorskip("numpy")
    assert wave.Model.constant((5, 5), 1500.0, spacing=np.float32(10.0)).spacing == (10.0, 10.0)
    assert wave.Source([[10.0, 10.0]], f0=np.float32(12.0)).f0 == 12.0


def test_source_receiver_outside_and_shape_errors():
    model, src, rec = _setup()
    with pytest.raises(ValueError, match="source at .* outside the model"):
        wave.simulate(model, wave.Source([[150.0, 390.1]]), rec, 5, backend="torch")
    with pytest.raises(ValueError, match="receiver at .* outside the model"):
        wave.simulate(model, src, wave.Receivers([[-1.0, 10.0]]), 5, backend="torch")
    with pytest.raises(ValueError, match="3 coordinates, the model is 2D"):
        wave.simulate(model, wave.Source([[1.0, 1.0, 1.0]]), rec, 5, backend="torch")
    with pytest.raises(ValueError, match="free surface"):
        wave.simulate(model, wave.Source([[12.0, 200.0]], interpolation="sinc"), rec, 5, free_surface=True,
                      backend="torch")


def test_argument_errors():
    model, src, rec = _setup()
    for kwargs, match in [({"order": 5}, "order"), ({"order": 18}, "order"), ({"boundary": "abc"}, "boundary"),
                          ({"pml_width": -1}, "pml_width"), ({"dt": -1.0}, "dt"), ({"snapshots": 0}, "snapshots"),
                          ({"snapshots": [99]}, "snapshot"), ({"backend": "gpu"}, "backend")]:
        with pytest.raises(ValueError, match=match):
            wave.simulate(model, src, rec, 10, **kwargs)
    with pytest.raises(ValueError, match="nt"):
        wave.simulate(model, src, rec, 0)
    with pytest.raises(TypeError, match="Model"):
        wave.simulate(model.velocity, src, rec, 3)
    for kwargs, err, match in [({"device": "meta"}, ValueError, "CPU are supported"),
                               ({"device": "junk"}, ValueError, "not a device"),
                               ({"device": 3.5}, TypeError, "device"),
                               ({"courant": "0.5"}, TypeError, "courant"),
                               ({"snapshots": True}, TypeError, "snapshots"),
                               ({"snapshots": [1.7]}, TypeError, "integers"),
                               ({"snapshots": "1"}, TypeError, "snapshots")]:
        with pytest.raises(err, match=match):
            wave.simulate(model, src, rec, 10, backend="torch", **kwargs)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            wave.simulate(model, src, rec, 10, device="cuda")


def test_more_ranks_than_slabs_is_an_error():
    assert wave.partition(10, 2, 4) == [(0, 5), (5, 10)]
    with pytest.raises(ValueError, match="narrower than the stencil radius R=4.*at most 2 ranks"):
        wave.partition(10, 3, 4)
    with pytest.raises(ValueError, match="narrower"):
        wave.partition(8, 2, 4, free_surface=True)


# ---------------------------------------------------------------------------------------------
# the CFL limit is the real stability limit
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", [2, 8])
def test_cfl_limit_is_sharp(order):
    """Random start, rigid walls: 2% under the limit stays bounded, 2% over it blows up."""
    assert stencil_symbol_max(2) == pytest.approx(4.0)
    shape, h, v = (40, 41), (10.0, 7.0), 2000.0
    dt_max = stable_dt(v, h, order)
    gen = torch.Generator().manual_seed(3)
    for factor, grows in ((0.98, False), (1.02, True)):
        p = torch.rand(shape, dtype=torch.float64, generator=gen) - 0.5
        pp = p.clone()
        m = torch.full(shape, (v * factor * dt_max) ** 2, dtype=torch.float64)
        for _ in range(600):
            nxt = ops.wave_step(p, pp, m, order=order, spacing=h, backend="torch")
            p, pp = nxt, p
        assert (float(p.abs().max()) > 1e3) == grows, (factor, float(p.abs().max()))


# ---------------------------------------------------------------------------------------------
# sources, receivers, models
# ---------------------------------------------------------------------------------------------
def test_ricker_and_interpolation_weights():
    t = torch.linspace(0, 0.2, 2001, dtype=torch.float64)
    w = wave.ricker(t, 15.0)
    assert float(t[w.argmax()]) == pytest.approx(1.5 / 15.0, abs=1e-4) and float(w.max()) == pytest.approx(1.0)
    pos = torch.tensor([[12.5, 33.0]], dtype=torch.float64)
    (pts, ws), = point_weights(pos, (10, 10), (10.0, 10.0), "trilinear", "source")
    got = dict(zip(pts, ws))
    want = {(1, 3): 0.75 * 0.7, (1, 4): 0.75 * 0.3, (2, 3): 0.25 * 0.7, (2, 4): 0.25 * 0.3}
    assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-12 for k in want)
    (pts, ws), = point_weights(pos, (20, 20), (10.0, 10.0), "sinc", "source")
    assert sum(ws) == pytest.approx(1.0, abs=0.02) and len(pts) == 64
    (pts, ws), = point_weights(torch.tensor([[50.0, 50.0]]), (20, 20), (10.0, 10.0), "sinc", "source")
    assert pts == [(5, 5)] and ws == [1.0]  # on a grid point, the windowed sinc is a delta


def test_layered_model():
    m = wave.Model.layered((10, 3, 4), [1500.0, 2500.0, 3000.0], [25.0, 60.0], spacing=10.0)
    col = m.velocity[:, 0, 0].tolist()
    assert col == [1500.0] * 3 + [2500.0] * 3 + [3000.0] * 4  # a point on an interface is below it
    assert m.velocity.shape == (10, 3, 4) and m.vmax == 3000.0


def test_on_grid_sinc_equals_trilinear_and_linearity():
    model, src, rec = _setup()
    a = wave.simulate(model, src, rec, 40, backend="torch")
    b = wave.simulate(model, wave.Source(src.positions, f0=20.0, interpolation="sinc"),
                      wave.Receivers(rec.positions, "sinc"), 40, backend="torch")
    assert torch.equal(a.record, b.record)
    two = wave.simulate(model, [src, wave.Source(src.positions, f0=20.0, amplitude=2.0)], rec, 40, backend="torch")
    assert torch.allclose(two.record, 3 * a.record, rtol=1e-12, atol=1e-20)
    assert a.record.abs().max() > 0 and a.record.shape == (40, 5)


# ---------------------------------------------------------------------------------------------
# the Triton step (interpreter) gives the torch path's record
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,boundary,free_surface,nt", [
    ((20, 25), "pml", True, 25),
    ((20, 25), "sponge", False, 25),
    ((11, 10, 13), "pml", False, 3),
])
def test_triton_backend_matches_torch(shape, boundary, free_surface, nt):
    nd = len(shape)
    v = torch.rand(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[55.0] + [52.0] * (nd - 1)], f0=30.0)
    rec = wave.Receivers([[10.0 * i] + [60.0] * (nd - 1) for i in range(0, shape[0], 3)])
    kw = {"order": 4, "boundary": boundary, "pml_width": 4, "free_surface": free_surface, "snapshots": [nt - 1]}
    a = wave.simulate(model, src, rec, nt, backend="torch", **kw)
    b = wave.simulate(model, src, rec, nt, backend="triton", **kw)
    assert a.backend == "torch" and b.backend == "triton"
    assert float(a.record.abs().max()) > 0
    assert float((a.record - b.record).abs().max() / a.record.abs().max()) < 1e-12
    assert torch.allclose(a.snapshots[0][1], b.snapshots[0][1], rtol=0, atol=1e-12 * float(a.snapshots[0][1].abs().max()))
    if free_surface:
        assert float(b.snapshots[0][1][0].abs().max()) == 0.0  # the surface plane is p = 0


@pytest.mark.parametrize("three", [False, True])
def test_captured_states_follow_the_loop_rotation(three):
    """The arrays each CUDA graph capture k is recorded with (``step_arrays``: k steps after the capture's
    state) are those ``simulate``'s loop uses at that step (``next_arrays``), over two periods."""
    from tilecraft.wave.solver import next_arrays, step_arrays

    p, pp, spare = "a", "b", ("c" if three else None)
    for k in range(12):
        out = pp if spare is None else spare
        assert step_arrays(k, "a", "b", "c" if three else None) == (p, pp, out), k
        p, pp, spare = next_arrays(p, pp, spare)
    assert (p, pp) == ("a", "b")  # the period divides 12


@pytest.mark.parametrize("backend,boundary,free_surface", [("triton", "pml", True), ("torch", "sponge", False),
                                                          ("triton", "none", False)])
def test_out_of_place_steps_give_the_in_place_record(backend, boundary, free_surface):
    """``in_place=False`` (p_next into a third array, the three rotated; the default where it can) gives the
    record and snapshots of ``in_place=True`` (p_next over p_prev) bit for bit, over enough steps for the three
    arrays to rotate several times; ``info["in_place"]`` says which ran; a switch that is not a bool or None is a
    TypeError."""
    v = torch.rand((12, 9, 10), dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[55.0, 42.0, 47.0]], f0=30.0)
    rec = wave.Receivers([[10.0 * i, 40.0, 50.0] for i in range(0, 12, 3)])
    kw = {"order": 4, "boundary": boundary, "pml_width": 3, "free_surface": free_surface, "snapshots": [3, 7],
          "backend": backend}
    res = [wave.simulate(model, src, rec, 8, in_place=mode, **kw) for mode in (True, False, None)]
    assert [r.info["in_place"] for r in res] == [True, False, False]
    assert float(res[0].record.abs().max()) > 0
    for r in res[1:]:
        assert torch.equal(r.record, res[0].record)
        assert all(torch.equal(x[1], y[1]) for x, y in zip(r.snapshots, res[0].snapshots))
    with pytest.raises(TypeError, match="in_place"):
        wave.simulate(model, src, rec, 2, in_place=1, **kw)


def test_slab_padding_and_device_argument():
    v = torch.rand(9, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) + 1
    layout = wave.Layout((9, 7, 8), 4, 3, free_surface=True)
    full = layout.pad_model(v)
    assert full.shape == layout.shape and torch.equal(full[2:2 + 9, 5:5 + 7, 5:5 + 8], v)
    for a, b in ((0, 4), (3, 11), (10, full.shape[0])):
        assert torch.equal(layout.pad_model(v, a, b), full[a:b])
    model, src, rec = _setup()
    a = wave.simulate(model, src, rec, 20, backend="torch")
    b = wave.simulate(model, src, rec, 20, backend="torch", device="cpu")
    assert torch.equal(a.record, b.record)


def test_cpml_memory_variables_cover_only_the_layers():
    from tilecraft.wave.solver import cpml_axis

    layout = wave.Layout((100, 90, 80), 8, 10, free_surface=False)  # R = 4, W = 10: arrays 128 x 118 x 108
    shape = layout.shape
    cpu = torch.float32

    def ax(axis, split=False, z0=4, z1=shape[0] - 4, off=0, lshape=shape):
        n = lshape[axis]
        return cpml_axis(layout, axis, 10.0, torch.zeros(n, dtype=cpu), torch.ones(n, dtype=cpu), z0, z1, off,
                         lshape, split)

    z = ax(0, split=True)
    assert z.zeta.shape == (1,) + shape and len(z.psi) == 2  # axis 0 split: the rank's slab (halos exchanged)
    for axis in (0, 1, 2):
        mv = ax(axis)
        if axis < 2:
            assert mv.zeta.shape[0] == 2 and mv.extent == 10 + 3 * 4  # W + 3R per layer
            assert [o for _, _, o in mv.regions] == [0, shape[axis] - 22]
        else:  # x stores start and end on whole vectors (4 points): 22 -> 24, origin 86 -> 84
            assert mv.zeta.shape[0] == 2 and mv.extent == 24
            assert [o for _, _, o in mv.regions] == [0, shape[axis] - 24]
        assert [(w0, w1) for w0, w1, _ in mv.regions] == [(4, 18), (shape[axis] - 18, shape[axis] - 4)]
        assert all(o <= w0 - 4 and w1 + 4 <= o + mv.extent for w0, w1, o in mv.regions)
        assert mv.psi[0].shape == mv.psi[1].shape == mv.zeta.shape and mv.psi[0] is not mv.psi[1]
    # a middle rank's slab with no layer: nothing, unless split (it keeps a store so the exchange pairs up)
    assert ax(0, z0=40, z1=60, off=32, lshape=(36,) + shape[1:]) is None
    mid = ax(0, split=True, z0=40, z1=60, off=32, lshape=(36,) + shape[1:])
    assert mid.regions == () and mid.zeta.shape == (1, 36) + shape[1:]


@pytest.mark.parametrize("nx", [17, 18, 19, 20])
def test_layout_rows_are_16_byte_aligned(nx):
    layout = wave.Layout((9, 11, nx), 8, 5, free_surface=False)
    lo, hi = layout.updated
    assert layout.shape[-1] % 4 == 0  # rows start on 16-byte boundaries: the step's loads stay 128-bit
    assert hi[-1] - lo[-1] == nx + 2 * 5  # the model and both layers are updated, the padding is not
    assert layout.depth(2)[hi[-1] - 1] == 1.0 and layout.depth(2)[hi[-1]] == 0.0


def test_cuda_graphs_switch_says_why_not():
    """``simulate``'s CUDA graphs run only with the CPML on CUDA GPUs (Triton, 3+ steps), by default
    (None) with several ranks, and on one rank on grids of at most ``GRAPH_AUTO_POINTS`` points over at least
    ``GRAPH_AUTO_STEPS`` steps (without the CPML ``GRAPH_AUTO_POINTS_PLAIN`` and ``GRAPH_AUTO_STEPS_PLAIN``); elsewhere ``info["cuda_graphs"]`` says why not (and the switch
    turns them off); a switch that is not a bool or None is a TypeError before anything runs;
    capture on a CPU device is refused with its reason, nothing run."""
    from tilecraft.ops.wave import capture_steps
    from tilecraft.wave import solver
    from tilecraft.wave.solver import _graph_plan

    model, src, rec = _setup()
    res = wave.simulate(model, src, rec, 4, backend="torch", cuda_graphs=True)
    assert res.info["cuda_graphs"] == "not used: backend torch"
    assert wave.simulate(model, src, rec, 4, backend="torch").info["cuda_graphs"] == "not used: backend torch"
    assert wave.simulate(model, src, rec, 4, backend="torch", cuda_graphs=False).info["cuda_graphs"] == \
        "off: cuda_graphs=False"
    with pytest.raises(TypeError, match="cuda_graphs must be True, False or None"):
        wave.simulate(model, src, rec, 4, backend="torch", cuda_graphs="yes")
    cuda = torch.device("cuda", 0)
    assert _graph_plan(True, [object()], "triton", cuda, 3, 1) == "on"
    assert _graph_plan(None, [object()], "triton", cuda, 3, 2) == "on"
    assert _graph_plan(None, [object()], "triton", cuda, 3, 1).startswith("off: one rank, 3 steps")
    # one rank, by default: graphs on small grids over long runs, where the launches set the pace
    small, big = solver.GRAPH_AUTO_POINTS, solver.GRAPH_AUTO_POINTS + 1
    assert _graph_plan(None, [object()], "triton", cuda, solver.GRAPH_AUTO_STEPS, 1, small) == "on"
    assert _graph_plan(None, [object()], "triton", cuda, 1000, 1, big).startswith("off: one rank, 100 M points")
    assert _graph_plan(None, [object()], "triton", cuda, solver.GRAPH_AUTO_STEPS - 1, 1, small).startswith(
        "off: one rank, 31 steps")
    # one rank: the graphs hold the whole step, with or without the CPML (by default with it only); several
    # ranks: with it only
    plain = solver.GRAPH_AUTO_POINTS_PLAIN
    assert _graph_plan(None, [], "triton", cuda, solver.GRAPH_AUTO_STEPS_PLAIN, 1, plain) == "on"
    assert _graph_plan(None, [], "triton", cuda, 100, 1, plain).startswith("off: one rank without the CPML, 100 steps")
    assert _graph_plan(None, [], "triton", cuda, 1000, 1, plain + 1).startswith(
        "off: one rank without the CPML, 8 M points")
    assert _graph_plan(None, [], "triton", cuda, 100, 2, small) == "not used: no CPML"
    assert _graph_plan(True, [object()], "triton", cuda, 3, 1, big) == "on"
    assert _graph_plan(None, [object()], "triton", cuda, 3, 2, big) == "on"
    assert _graph_plan(False, [object()], "triton", cuda, 3, 2) == "off: cuda_graphs=False"
    assert _graph_plan(True, [], "triton", cuda, 3, 1) == "on"
    assert _graph_plan(True, [], "triton", cuda, 3, 2) == "not used: no CPML"
    assert _graph_plan(None, [object()], "torch", cuda, 3, 2) == "not used: backend torch"
    assert _graph_plan(True, [object()], "triton", torch.device("cpu"), 3, 1) == "not used: device cpu"
    assert _graph_plan(True, [object()], "triton", cuda, 2, 1) == "not used: fewer than 3 steps"
    calls = []
    assert capture_steps(calls.append, 2, torch.device("cpu")).startswith("CUDA graphs need a CUDA device")
    assert calls == []


@pytest.mark.parametrize("boundary", ["pml", "sponge"])
def test_step_config_is_used_and_keeps_the_bits(boundary, monkeypatch):
    """``simulate(step_config=...)`` reaches every step launch (a spy on ``_launch_step``) and, with other
    tiles than the default, gives the same record: a point's arithmetic does not depend on its tile. A
    wrong type is a TypeError before any step."""
    shape = (11, 10, 13)
    v = torch.rand(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 1000 + 1500
    model = wave.Model(v, 10.0)
    src = wave.Source([[55.0, 52.0, 52.0]], f0=30.0)
    rec = wave.Receivers([[10.0 * i, 60.0, 60.0] for i in range(0, shape[0], 3)])
    kw = {"order": 4, "boundary": boundary, "pml_width": 4}
    cfg = ops.WaveConfig(block_y=2, block_x=8, block_z=3, num_warps=1)
    seen = []
    real = ops._launch_step

    def spy(*args, **kwargs):
        seen.append(args[9])  # the WaveConfig it launches with
        return real(*args, **kwargs)

    a = wave.simulate(model, src, rec, 3, backend="triton", **kw)
    monkeypatch.setattr(ops, "_launch_step", spy)
    b = wave.simulate(model, src, rec, 3, backend="triton", step_config=cfg, **kw)
    assert seen and all(c == cfg for c in seen)
    assert float(a.record.abs().max()) > 0 and torch.equal(a.record, b.record)
    with pytest.raises(TypeError, match="step_config"):
        wave.simulate(model, src, rec, 3, backend="triton", step_config={"block_y": 2}, **kw)
    with pytest.raises(TypeError, match="pml_config"):
        wave.simulate(model, src, rec, 3, backend="triton", pml_config=cfg, **kw)
