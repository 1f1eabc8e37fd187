"""Stencil tuning (``variant="auto"``): the candidates and the cache key (``tilecraft.tuning.stencil``),
and the tuner in ``tilecraft.ops.stencil`` (cache, ``TILECRAFT_TUNE``, capture refusal, skipped
candidates, scratch outputs).

No GPU here: the ``sim`` fixture lets the tuner run on CPU tensors as it would on a GPU (the gate
``_tunes_on`` says yes, the device facts are a stand-in, ``graph_time_ms`` returns fake times per
configuration), while every candidate really runs through the Triton interpreter and is checked
against the heuristic's result as on a GPU."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from tilecraft.ops import stencil as ops
from tilecraft.ops.stencil import StencilConfig
from tilecraft.reference.stencil import laplacian_reference
from tilecraft.tuning import cache
from tilecraft.tuning import stencil as ts
from tilecraft.tuning.measure import DeviceFacts

L2 = 50 * 2**20
TILING = ops.ladder_config("tiling", torch.float64, 2)


def _vec(dtype: torch.dtype) -> int:
    return 16 // (torch.finfo(dtype).bits // 8)


def _grid(shape, dtype, aligned: bool, flat: bool, device="cpu"):
    """(u, out) with these facts, built independently of ``ts.model_tensors``: contiguous grids (flat),
    or views of wider rows (by one 16-byte vector: aligned; by one element: not)."""
    nz, ny, nx = shape
    if flat:
        u, out = (torch.empty(shape, dtype=dtype, device=device) for _ in range(2))
    else:
        pad = _vec(dtype) if aligned else 1
        u, out = (torch.empty((nz, ny, nx + pad), dtype=dtype, device=device)[..., :nx] for _ in range(2))
    assert ops.vector_aligned(u, out) == aligned and (ops.flat_ok(u, out) is None) == flat, (shape, aligned, flat)
    return u, out


def _facts(shape, dtype):
    """The (aligned, flat) fact pairs a grid of this shape can have."""
    aligned_nx = shape[2] % _vec(dtype) == 0
    return [(True, True), (True, False)] if aligned_nx else [(False, True), (False, False)]


ORDERS = list(range(2, 17, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("order", ORDERS)
def test_candidates_are_valid_for_the_grid(order, dtype):
    """For every order, dtype and layout: the heuristic first, no duplicates, and every candidate passes
    the launch checks on real tensors with those facts (meta tensors for grids too large for the CPU)."""
    r = order // 2
    tiny = (2 * r + 1,) * 3
    shapes = [tiny, (2 * r + 1, 2 * r + 2, 8), (2 * r + 5, 2 * r + 9, 70), (2 * r + 5, 2 * r + 9, 67),
              (40, 2048, 2048), (515, 515, 515), (2 * r + 1, 2 * r + 1, 4 * 64 + 4)]
    for shape in shapes:
        big = shape[0] * shape[1] * shape[2] > 2**22
        for aligned, flat in _facts(shape, dtype):
            cands = ts.candidates(dtype, order, shape, L2, aligned, flat)
            assert cands[0] == ops.auto_config(dtype, order, shape, L2, aligned, flat)
            assert len(set(cands)) == len(cands)
            assert len(cands) >= 3 or min(shape) <= 2 * r + 2, (shape, cands)
            assert len(cands) <= 7
            u, out = _grid(shape, dtype, aligned, flat, device="meta" if big else "cpu")
            for cfg in cands:
                assert ops.launch_error(u, out, order, cfg) is None, (shape, aligned, flat, cfg)
            kernels = {c.kernel for c in cands}
            if not aligned:
                assert "zwin" not in kernels, "the register window needs 16-byte rows"
            if not flat:
                assert "flat" not in kernels
            if aligned and shape[2] >= 64 and 2 <= r <= 4:
                assert "zwin" in kernels
            if r > 4:
                assert "zwin" not in kernels, "unrolled by 2R: minutes of compilation"


def test_candidates_leave_out_what_cannot_launch():
    """Launch checks that depend on the grid: rows shorter than the register window's tile, and planes
    with more row tiles than a 3D grid's y dimension takes (the plane kernels without banding)."""
    short_rows = ts.candidates(torch.float64, 4, (40, 40, 16), L2, True, True)
    assert all(c.kernel != "zwin" for c in short_rows)
    assert any(c.kernel == "zwin" for c in ts.candidates(torch.float64, 4, (40, 40, 32), L2, True, True))
    tall = (5, 600_001, 5)  # 600k rows: 75k tiles of 8 rows, past 65535
    cands = ts.candidates(torch.float64, 2, tall, L2, False, False)
    assert cands and all(c.kernel != "plane" or c.grid_order == 1 for c in cands), cands
    assert ops.ladder_config("tiling", torch.float64, 2) not in cands


@pytest.mark.parametrize("dtype,order,shape,aligned", [
    (torch.float64, 2, (9, 11, 16), True), (torch.float32, 2, (9, 11, 19), False),
    (torch.float64, 4, (13, 14, 34), True), (torch.float32, 8, (19, 20, 64), True),
    (torch.float64, 6, (15, 17, 21), False), (torch.float32, 16, (19, 19, 64), True)])
def test_every_candidate_computes_the_laplacian(dtype, order, shape, aligned, field, poisoned_like):
    """Each candidate, run in the interpreter into a NaN-poisoned output, matches float64."""
    u0 = field(shape, dtype)
    for flat in (True, False):
        u, out = _grid(shape, dtype, aligned, flat)
        u.copy_(u0)
        ref = laplacian_reference(u0.double(), order, (0.9, 1.0, 1.1))
        r = order // 2
        for cfg in ts.candidates(dtype, order, shape, L2, aligned, flat):
            out.copy_(poisoned_like(out))
            ops.launch(u, out, order, (0.9, 1.0, 1.1), cfg)
            got = out[r:-r, r:-r, r:-r].double()
            err = ((got - ref).norm() / ref.norm()).item()
            assert err <= (1e-5 if dtype == torch.float32 else 1e-12), (cfg, err)
            boundary = out.clone()
            boundary[r:-r, r:-r, r:-r] = float("nan")
            assert torch.isnan(boundary).all(), cfg


def test_model_tensors_refuse_inconsistent_facts():
    with pytest.raises(ValueError, match="multiple of 2"):
        ts.model_tensors(torch.float64, (5, 5, 7), True, True)


def test_shape_key_buckets():
    def key(shape, dtype=torch.float64, order=2, aligned=True, flat=True, arch="sm90", l2=L2):
        return ts.shape_key(dtype, order, shape, aligned, flat, arch,
                            ops.auto_config(dtype, order, shape, l2, aligned, flat))
    assert key((100, 500, 512)) == key((120, 510, 500))  # planes in (2^17, 2^18], nz in (64, 128]
    assert key((100, 500, 512)) != key((100, 520, 512))  # plane past 2^18
    assert key((100, 500, 512)) != key((200, 500, 512))  # nz past 128
    assert key((100, 500, 512)) != key((100, 500, 512), dtype=torch.float32)
    assert key((100, 500, 512)) != key((100, 500, 512), order=4)
    assert key((100, 500, 512)) != key((100, 500, 512), flat=False)
    assert key((100, 500, 512)) != key((100, 500, 512), arch="sm80")
    assert key((100, 501, 513), aligned=False) != key((100, 500, 512))
    # fp32 order 4: planes of (2^19, 2^20] points on either side of the L2 limit of the short march
    # (8 + 4 planes in half of 50 MiB: 546133 points) get entries of their own
    short, long = (64, 730, 730), (64, 800, 800)
    assert ops.auto_config(torch.float32, 4, short, L2).unroll_z and not ops.auto_config(torch.float32, 4, long, L2).unroll_z
    assert key(short, torch.float32, 4) != key(long, torch.float32, 4)
    assert key(short, torch.float32, 4).split("/h:")[0] == key(long, torch.float32, 4).split("/h:")[0]


# ----------------------------------------------------------------------------------------------
# the tuner, simulated on the CPU
# ----------------------------------------------------------------------------------------------
class Sim:
    """What the ``sim`` fixture set up: ``times`` (ms per config; 5.0 where missing), ``launches``
    (every launch: (config, u, out)), ``timed`` (the configs graph_time_ms was asked to time) and
    ``faults`` (config -> a function run on the output after the real launch, or an exception to raise)."""

    def __init__(self):
        self.times: dict[StencilConfig, float] = {}
        self.launches: list[tuple] = []
        self.timed: list[StencilConfig] = []
        self.timed_fns: list[list] = []
        self.faults: dict = {}


@pytest.fixture
def sim(monkeypatch, tmp_path):
    s = Sim()
    real_launch = ops.launch

    def launch(u, out, order, spacing, cfg):
        s.launches.append((cfg, u, out))
        fault = s.faults.get(cfg)
        if isinstance(fault, Exception):
            raise fault
        res = real_launch(u, out, order, spacing, cfg)
        if fault is not None:
            fault(out)
        return res

    def graph_time_ms(fns, device):
        s.timed.append(s.launches[-1][0])  # the candidate just checked
        s.timed_fns.append(fns)
        return s.times.get(s.launches[-1][0], 5.0)

    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    monkeypatch.delenv("TILECRAFT_QUIET", raising=False)
    monkeypatch.setattr(ops, "launch", launch)
    monkeypatch.setattr(ops, "graph_time_ms", graph_time_ms)
    monkeypatch.setattr(ops, "_tunes_on", lambda u: True)
    monkeypatch.setattr(ops, "device_facts", lambda device: DeviceFacts("sm90", "Fake GPU", {"torch": "t", "triton": "x"}))
    cache.clear_memory()
    ops.clear_choices()
    yield s
    cache.clear_memory()
    ops.clear_choices()


def _cache_entries(tmp_path) -> dict:
    files = list((tmp_path / "tuning").glob("stencil-*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


SHAPE = (9, 10, 16)  # fp64, order 2: aligned, contiguous


def _check(u, out, order=2):
    r = order // 2
    ref = laplacian_reference(u.double(), order)
    assert torch.allclose(out[r:-r, r:-r, r:-r].double(), ref, rtol=1e-10, atol=1e-10)


def test_tuner_picks_the_fastest_and_caches_it(sim, field, tmp_path, capsys):
    u = field(SHAPE)
    heuristic = ops.auto_config(torch.float64, 2, SHAPE, L2, True, True)
    cands = ts.candidates(torch.float64, 2, SHAPE, L2, True, True)
    sim.times = {heuristic: 3.0, TILING: 1.0}
    out = ops.laplacian(u, order=2)
    _check(u, out)
    assert sim.timed == cands, "every candidate timed once, the heuristic first"
    assert sim.launches[-1][0] == TILING and sim.launches[-1][2] is out, "the winner ran into the result"
    choice = ops.choose_config(u, out, 2)
    assert choice.config == TILING and choice.source == "tuned"
    entries = _cache_entries(tmp_path)
    assert list(entries) == [choice.key]
    entry = entries[choice.key]
    assert StencilConfig.from_dict(entry["config"]) == TILING and entry["ms"] == 1.0
    assert StencilConfig.from_dict(entry["heuristic"]) == heuristic and entry["heuristic_ms"] == 3.0
    assert [row["ms"] for row in entry["candidates"]] == [sim.times.get(c, 5.0) for c in cands]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"tilecraft: tuning stencil {choice.key}: {len(cands)} configs (cached afterwards; TILECRAFT_TUNE=0 skips)"
    assert f"tilecraft: tuning 2/{len(cands)} {TILING.short()}: 1 ms" in err
    assert err[-1].startswith(f"tilecraft: tuned stencil {choice.key}: {TILING.short()} (1 ms; heuristic 3 ms)")


@pytest.mark.parametrize("other,kept", [(0.995, True), (0.985, False)])
def test_the_heuristic_is_kept_unless_beaten_by_the_margin(sim, field, capsys, other, kept):
    """A candidate under 1% faster than the heuristic is noise on a GPU: the heuristic stays."""
    u = field(SHAPE)
    heuristic = ops.auto_config(torch.float64, 2, SHAPE, L2, True, True)
    sim.times = {heuristic: 1.0, TILING: other}
    out = ops.laplacian(u, order=2)
    choice = ops.choose_config(u, out, 2)
    assert choice.config == (heuristic if kept else TILING)
    assert choice.entry["ms"] == (1.0 if kept else other) and choice.entry["heuristic_ms"] == 1.0
    assert ("kept: no candidate faster by more than 1%" in capsys.readouterr().err) == kept


def test_second_call_uses_the_cache_without_timing(sim, field, tmp_path):
    u = field(SHAPE)
    sim.times = {TILING: 1.0}
    ops.laplacian(u, order=2)
    n_timed = len(sim.timed)
    ops.laplacian(field(SHAPE), order=2)  # same process: remembered
    assert len(sim.timed) == n_timed
    cache.clear_memory()
    ops.clear_choices()  # as a new process: from the file
    sim.launches.clear()
    v = field((10, 12, 16))  # another grid of the same bucket (planes of 129-256 points, nz 9-16)
    out = ops.laplacian(v, order=2)
    _check(v, out)
    assert len(sim.timed) == n_timed
    assert [c for c, _, _ in sim.launches] == [TILING]
    assert ops.choose_config(v, out, 2).source == "cache"


def test_tune_off_gives_the_heuristic_and_reads_the_cache(sim, field, monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    u = field(SHAPE)
    out = ops.laplacian(u, order=2)
    _check(u, out)
    heuristic = ops.auto_config(torch.float64, 2, SHAPE, L2, True, True)
    choice = ops.choose_config(u, out, 2)
    assert (choice.config, choice.source) == (heuristic, "heuristic") and choice.key is not None
    assert sim.timed == [] and not (tmp_path / "tuning").exists()
    cache.store(cache.cache_file(ops.CACHE_OP, "Fake GPU", {"torch": "t", "triton": "x"}), choice.key,
                {"config": TILING.as_dict()})
    ops.clear_choices()
    assert ops.choose_config(u, out, 2) == ops.Choice(TILING, "cache", choice.key, {"config": TILING.as_dict()})
    assert sim.timed == []


def test_a_candidate_that_raises_or_disagrees_is_skipped(sim, field, tmp_path, capsys):
    u = field(SHAPE)
    cands = ts.candidates(torch.float64, 2, SHAPE, L2, True, True)
    broken, off, spill = cands[1], cands[2], cands[3]

    def scale(out):
        out[1:-1, 1:-1, 1:-1] *= 1 + 1e-9  # relative error 1e-9 > 1e-12

    def write_boundary(out):
        out[0, 0, 0] = 0.0

    sim.faults = {broken: RuntimeError("out of resources: shared memory\nmore"), off: scale, spill: write_boundary}
    sim.times = {broken: 0.1, off: 0.2, spill: 0.3, cands[4]: 1.0}
    out = ops.laplacian(u, order=2)
    _check(u, out)
    assert sim.timed == [cands[0], *cands[4:]]
    choice = ops.choose_config(u, out, 2)
    assert choice.config == cands[4]
    rows = _cache_entries(tmp_path)[choice.key]["candidates"]
    assert [row["ms"] for row in rows] == [5.0, None, None, None, 1.0] + [5.0] * (len(cands) - 5)
    err = capsys.readouterr().err
    assert f"{broken.short()}: skipped (RuntimeError: out of resources: shared memory)" in err
    assert f"{off.short()}: skipped (relative error 1.0e-09 against the heuristic's result (> 1e-12))" in err
    assert f"{spill.short()}: skipped (unwritten interior points or a written boundary)" in err


def test_fp32_tolerance(sim, field):
    shape = (9, 10, 16)
    u = field(shape, torch.float32)
    cands = ts.candidates(torch.float32, 2, shape, L2, True, True)

    def nudge(factor):
        def f(out):
            out[1:-1, 1:-1, 1:-1] *= factor
        return f
    sim.faults = {cands[1]: nudge(1 + 2e-5), cands[2]: nudge(1 + 1e-6)}
    sim.times = {cands[1]: 0.1, cands[2]: 0.2}
    out = ops.laplacian(u, order=2)
    assert ops.choose_config(u, out, 2).config == cands[2], "1e-6 is within fp32's 1e-5, 2e-5 is not"


def test_a_failing_heuristic_raises(sim, field):
    heuristic = ops.auto_config(torch.float64, 2, SHAPE, L2, True, True)
    sim.faults = {heuristic: RuntimeError("broken heuristic")}
    with pytest.raises(RuntimeError, match="broken heuristic"):
        ops.laplacian(field(SHAPE), order=2)


def test_tuning_never_writes_the_callers_out(sim, field, poisoned_like):
    """Candidates run into scratch outputs laid out as ``out`` (strides, alignment); ``out`` is written
    once, by the winner, and its boundary is left alone."""
    u = field(SHAPE)
    base = poisoned_like(torch.empty((9, 10, 20), dtype=torch.float64))
    out = base[:, :, 2:18]  # padded rows, 16-byte aligned
    sim.times = {TILING: 1.0}
    ops.laplacian(u, order=2, out=out)
    into = [o for _, _, o in sim.launches]
    assert [o.data_ptr() == out.data_ptr() for o in into].count(True) == 1 and into[-1] is out
    for o in into[:-1]:
        assert o.stride() == out.stride() and o.data_ptr() % 128 == out.data_ptr() % 128
        assert o.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    _check(u, out)
    assert torch.isnan(base[0]).all() and torch.isnan(base[:, :, :2]).all()


def test_timing_rotates_input_copies_under_twice_the_l2(sim, field, monkeypatch):
    u = field(SHAPE)
    ops.laplacian(u, order=2)
    fns = sim.timed_fns[0]
    assert len(fns) > 1, "a grid far under the L2: copies in turn"
    sim.launches.clear()
    for fn in fns:
        fn()
    us = [a for _, a, _ in sim.launches]
    assert len({a.data_ptr() for a in us}) == len(fns) and all(a.stride() == u.stride() for a in us)
    assert not any(a.data_ptr() == u.data_ptr() for a in us), "the caller's grid is not read"
    assert all(c == sim.timed[0] for c, _, _ in sim.launches)
    monkeypatch.setattr(ops, "_l2_bytes", lambda device: 1024)  # the grid is now over twice the L2
    ops.clear_choices()
    cache.clear_memory()
    sim.timed_fns.clear()
    ops.laplacian(field((9, 10, 32)), order=2)
    assert all(len(f) == 1 for f in sim.timed_fns)


def test_capture_refuses_to_tune_and_warmup_prepares(sim, field, monkeypatch):
    """Refused before any candidate's plan is made: a plan may make tensors (a copy to the GPU), which a capture
    refuses with an error that does not say what to do (seen on the H200 machine, 2026-12-01)."""
    u = field(SHAPE)
    real_error = ops.launch_error

    def launch_error(*args):
        if args[0].device.type != "meta":  # meta tensors (the candidates' model grids) make nothing
            assert not ops._capturing(args[0]), "a candidate's plan made during capture"
        return real_error(*args)
    monkeypatch.setattr(ops, "launch_error", launch_error)
    monkeypatch.setattr(ops, "_capturing", lambda t: True)
    with pytest.raises(RuntimeError) as info:
        ops.laplacian(u, order=2)
    msg = str(info.value)
    assert "during CUDA-graph capture" in msg and "TILECRAFT_TUNE=0" in msg
    assert "tilecraft.ops.stencil.warmup(u, order=..., spacing=..., out=None)" in msg
    assert sim.timed == []
    monkeypatch.setattr(ops, "_capturing", lambda t: False)
    sim.times = {TILING: 1.0}
    assert ops.warmup(u, order=2, spacing=0.5) == TILING
    monkeypatch.setattr(ops, "_capturing", lambda t: True)
    n = len(sim.timed)
    out = ops.laplacian(u, order=2)  # as inside capture: cached, no tuning
    assert len(sim.timed) == n and sim.launches[-1][0] == TILING
    _check(u, out)
    monkeypatch.setenv("TILECRAFT_TUNE", "0")  # the other way out: no tuning at all
    v = field((9, 10, 64))  # a bucket not tuned yet
    out = ops.laplacian(v, order=2)
    assert len(sim.timed) == n and ops.choose_config(v, out, 2).source == "heuristic"
    _check(v, out)


def test_quiet(sim, field, monkeypatch, capsys):
    monkeypatch.setenv("TILECRAFT_QUIET", "1")
    ops.laplacian(field(SHAPE), order=2)
    assert sim.timed and capsys.readouterr().err == ""


def test_a_cached_config_that_cannot_run_here_gives_the_heuristic(sim, field, capsys):
    """A bucket's entry comes from another grid; one that cannot launch on this grid is not run."""
    shape = (9, 10, 15)  # fp64 rows of 120 bytes: unaligned (rows of 8-byte vectors only: ``half_aligned``)
    u = field(shape)
    heuristic = ops.auto_config(torch.float64, 2, shape, L2, False, True)
    assert ops.half_aligned(u, u)
    key = ts.shape_key(torch.float64, 2, shape, False, True, "sm90", heuristic, True)
    window = ops.window_march(torch.float64, 2)
    cache.store(cache.cache_file(ops.CACHE_OP, "Fake GPU", {"torch": "t", "triton": "x"}), key,
                {"config": window.as_dict()})
    out = ops.laplacian(u, order=2)
    _check(u, out)
    choice = ops.choose_config(u, out, 2)
    assert (choice.config, choice.source) == (heuristic, "heuristic") and sim.timed == []
    assert "cannot run on (9, 10, 15)" in capsys.readouterr().err


def test_no_tuning_on_the_cpu_or_in_the_interpreter(field, monkeypatch, tmp_path):
    """Without the simulation: CPU tensors (interpreted kernels) run the heuristic, nothing is timed
    or cached."""
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    monkeypatch.setattr(ops, "graph_time_ms", lambda *a: pytest.fail("timed on the CPU"))
    ops.clear_choices()
    u = field(SHAPE)
    out = ops.laplacian(u, order=2)
    choice = ops.choose_config(u, out, 2)
    assert choice == ops.Choice(ops.auto_config(torch.float64, 2, SHAPE, L2, True, True), "heuristic")
    assert not (tmp_path / "tuning").exists()
    assert ops.warmup(u, order=2) == choice.config
    assert not ops._tunes_on(u)
    ops.clear_choices()


def test_short_labels_tell_configs_apart():
    cands = {c for dt in (torch.float32, torch.float64) for o in ORDERS for a, f in ((True, True), (False, True))
             for c in ts.candidates(dt, o, (64, 256, 256 + (0 if a else 1)), L2, a, f)}
    assert len(cands) > 20 and len({c.short() for c in cands}) == len(cands)
    assert replace(TILING, maxnreg=64).short() != TILING.short()
    assert StencilConfig.from_dict({**TILING.as_dict(), "unknown": 1}) == TILING


@pytest.mark.parametrize("bad,exc", [
    (lambda: torch.zeros(8, 9, 10, dtype=torch.float16), TypeError),  # dtype
    (lambda: torch.zeros(9, 10), ValueError),  # not 3D
    (lambda: torch.zeros(2, 9, 10), ValueError),  # an extent under 2R + 1
    (lambda: torch.zeros(9, 10, 20)[:, :, ::2], ValueError),  # x not contiguous
])
def test_warmup_rejects_bad_grids_before_launching(bad, exc):
    """warmup validates as laplacian does: a clear error, nothing tuned or launched."""
    with pytest.raises(exc):
        ops.warmup(bad(), order=2)
