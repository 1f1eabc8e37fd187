"""GEMM tuning: config spaces pruned by shared memory, the shape key, the tuning loop, the on-disk
cache and the TILECRAFT_TUNE switch (the timing itself needs a GPU; here it is a stand-in)."""
from __future__ import annotations

import torch

from tilecraft.ops import gemm as ops
from tilecraft.tuning import cache
from tilecraft.tuning.gemm import (
    SHARED_LIMIT,
    GemmConfig,
    Problem,
    config_space,
    fits,
    shape_key,
    shared_bytes,
    tune,
)


def _p(m=4096, n=4096, k=4096, dtype="bf16", arch="sm90"):
    return Problem(m, n, k, 1, dtype, None, arch, arch == "sm90", True, False)


def test_shared_memory_pruning():
    p = _p()
    big = GemmConfig("tma", 256, 256, 128, num_stages=4)
    assert shared_bytes(big, 2) > SHARED_LIMIT["sm90"] and not fits(big, p)
    assert shared_bytes(GemmConfig("tma", 128, 256, 64, num_stages=3, flatten=True), 2) == 4 * 384 * 64 * 2
    for arch in ("sm90", "sm80", "cdna"):
        space = config_space(_p(arch=arch))
        assert space and all(fits(c, _p(arch=arch)) for c in space)


def test_shape_key_buckets():
    assert shape_key(_p(5000, 4100, 4097)) == shape_key(_p(8000, 8192, 5000))
    assert shape_key(_p(1)) != shape_key(_p(2))  # small M is exact
    assert shape_key(_p(dtype="fp16")) != shape_key(_p())


def test_tune_picks_fastest_and_skips_failures():
    cands = [GemmConfig(block_m=m) for m in (16, 32, 64, 128)]
    times = {16: 3.0, 32: None, 64: 1.0, 128: 2.0}
    seen = []
    best, table = tune(_p(), cands, lambda c: times[c.block_m], lambda i, n, c: seen.append(i))
    assert best.block_m == 64 and len(table) == 4 and seen[-1] == 4


def test_cache_roundtrip_and_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    cache.clear_memory()
    path = cache.cache_file("gemm", "NVIDIA H200", {"torch": "2.11", "triton": "3.6.0"})
    assert path.parent == tmp_path / "tuning"
    cfg = GemmConfig("tma", 128, 256, 64, num_warps=8)
    cache.store(path, "k", {"config": cfg.as_dict()})
    cache.clear_memory()
    assert GemmConfig.from_dict(cache.load(path)["k"]["config"]) == cfg
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    assert not cache.tuning_enabled()
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    assert cache.tuning_enabled()
    cache.clear_memory()


def test_warmup_returns_the_config_matmul_runs(field):
    a, b = field((24, 40)).float(), field((40, 8)).float()
    cfg = ops.warmup(a, b, precision="tf32")
    assert cfg == ops.choose_config(a, b, ops.validate(a, b, precision="tf32"))
    assert ops.warmup(a[:0], b).kernel == "pointer"
    assert isinstance(cfg, GemmConfig)
    assert torch.isfinite(ops.matmul(a, b)).all()


def test_few_tiles_take_split_k_in_the_tma_kernel():
    """The measured few-tile rules (H200, gemm-llm-followup-296fd54): M = 128, N = K = 4096 runs
    64x128 tiles in 6 stages with K split in two inside the persistent TMA kernel (128 units on
    132 SMs); M = 128, N = 11008 has 86 tiles of 128x128 and stays unsplit (split-K lost there);
    big products stay unsplit, and the tuner's space holds split-K TMA candidates for few-tile
    shapes only."""
    from tilecraft.tuning.gemm import heuristic, tma_split

    cfg = heuristic(_p(128, 4096, 4096))
    assert (cfg.kernel, cfg.block_m, cfg.block_n, cfg.num_stages, cfg.split_k) == ("tma", 64, 128, 6, 2)
    cfg = heuristic(_p(128, 11008, 4096))
    assert (cfg.kernel, cfg.block_m, cfg.block_n, cfg.split_k) == ("tma", 128, 128, 1)
    assert tma_split(64, 64, 132) == 2 and tma_split(86, 64, 132) == 1 and tma_split(132, 64, 132) == 1
    assert tma_split(32, 12, 132) == 1  # fewer than 8 K steps per unit: no split
    assert heuristic(_p(8192, 8192, 8192)).split_k == 1
    assert any(c.kernel == "tma" and c.split_k > 1 for c in config_space(_p(128, 4096, 4096)))
    assert not any(c.split_k > 1 for c in config_space(_p(8192, 8192, 8192)))


def test_presplit_candidates_only_for_3xtf32():
    p = Problem(8192, 8192, 8192, 1, "fp32", "tf32x3", "sm90", True, True, True)
    pre = [c for c in config_space(p) if c.presplit]
    assert pre and all(c.kernel == "tma" and fits(c, p) for c in pre)
    assert shared_bytes(pre[0], 4) == 2 * shared_bytes(GemmConfig("tma", 128, 256, 32, num_stages=2), 4)
    assert "presplit" in pre[0].short()
    for q in (_p(), Problem(8192, 8192, 8192, 1, "fp32", "tf32", "sm90", True, True, True)):
        assert not any(c.presplit for c in config_space(q))


def test_tuning_sets_rotate_operands_that_fit_in_the_l2(field):
    """The tuner times calls cycling through copies of operands that fit twice in the L2 (so B is read
    from memory, as in a model), with the strides of the originals; large operands are not copied."""
    from tilecraft.ops.gemm import tuning_sets

    a, b = field((4, 64)), field((32, 64)).t()  # b is a transposed view
    sets = tuning_sets(a, b, None, l2_bytes=65536)
    assert len(sets) > 1 and sets[0][0] is a and sets[0][1] is b
    for sa, sb, sc in sets[1:]:
        assert torch.equal(sa, a) and torch.equal(sb, b) and sc is None
        assert sb.stride() == b.stride() and sb.data_ptr() != b.data_ptr()
    total = sum(t.numel() * t.element_size() for s in sets for t in s[:2])
    assert total >= 2 * 65536
    assert len(tuning_sets(a, b, None, l2_bytes=4096)) == 1  # already twice the L2
    c = field((4, 32))
    assert all(s[2] is not None and torch.equal(s[2], c) for s in tuning_sets(a, b, c, l2_bytes=65536))


def test_tuning_reports_each_candidate(field, monkeypatch, capsys):
    """``_tune`` (what compute, warmup and ``bench --tune`` run on a new shape) reports every
    candidate's time on stderr; a progress callback passed in replaces the report. No GPU here:
    the launch, the synchronisation and the graph timing are stand-ins."""
    cands = [GemmConfig(block_m=m) for m in (16, 32, 64)]
    times = {16: 2.0, 32: None, 64: 0.5}
    launched = []

    def fake_launch(a, b, out, spec, cfg, *args):
        if times[cfg.block_m] is None:
            raise RuntimeError("out of resources")
        launched.append(cfg)
        out.fill_(1.0)

    def fake_graph_time(fns, device):
        fns[0]()
        return times[launched[-1].block_m]

    monkeypatch.setattr(ops, "config_space", lambda p: cands)
    monkeypatch.setattr(ops, "launch", fake_launch)
    monkeypatch.setattr(ops, "_graph_time_ms", fake_graph_time)
    monkeypatch.setattr(ops, "device_l2_bytes", lambda device: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.delenv("TILECRAFT_QUIET", raising=False)
    a, b = field((8, 16)).float(), field((16, 8)).float()
    spec = ops.validate(a, b)
    p = ops.problem_of(a, b, spec)
    assert ops._tune(a, b, spec, p, None, None, None, None, None) == cands[2]
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "tuning " in ln and "/3 " in ln]
    assert lines == [f"tilecraft: tuning 1/3 {cands[0].short()}: 2 ms",
                     f"tilecraft: tuning 2/3 {cands[1].short()}: skipped",
                     f"tilecraft: tuning 3/3 {cands[2].short()}: 0.5 ms"]
    seen = []
    assert ops._tune(a, b, spec, p, None, None, None, None, lambda i, n, c: seen.append((i, n))) == cands[2]
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert "tuning 1/3" not in capsys.readouterr().err


def test_matrix_vector_tiles_are_tuning_candidates_at_m1():
    """M = 1 adds BLOCK_M 1 pointer tiles (no tl.dot) split along K; M = 2 and a short K do not."""
    gemv = [c for c in config_space(_p(1, 4096, 4096)) if c.block_m == 1]
    assert gemv and all(c.kernel == "pointer" and c.split_k > 1 for c in gemv)
    assert not any(c.block_m < 16 for c in config_space(_p(2, 4096, 4096)))
    assert not any(c.block_m < 16 for c in config_space(_p(1, 4096, 256)))
    assert any(c.block_m == 1 for c in config_space(Problem(1, 4096, 4096, 1, "fp32", "ieee", "sm90", True, True, True,
                                                            fma_ok=True)))


def test_small_m_tiles_outnumbering_the_sms_take_shallower_steps():
    """Small M (the pointer kernel's stream over B): 64-column tiles up to twice the SM count take 128-deep K
    steps, so two programs share an SM and all run in one wave (N = 11008 / 14336); one wave of tiles keeps
    256-deep steps (N = K = 8192), and so do tile counts the shallower ring would not fit in one wave either."""
    from tilecraft.tuning.gemm import heuristic

    def cfg(m, n, k, sms=132, dtype="bf16"):
        return heuristic(Problem(m, n, k, 1, dtype, None, "sm90", True, True, False, sms))

    for m in (1, 16, 32):
        bm = 16 if m <= 16 else 32
        for n in (11008, 14336):
            c = cfg(m, n, 4096)
            assert (c.kernel, c.block_m, c.block_n, c.block_k, c.num_stages, c.split_k) == ("pointer", bm, 64, 128, 4, 1)
            assert shared_bytes(c, 2) * 2 <= SHARED_LIMIT["sm90"]  # two programs an SM
        assert cfg(m, 8192, 8192).block_k == 256  # 128 tiles: one wave of one program an SM
        assert cfg(m, 32000, 4096).block_k == 256  # 500 tiles: more than two a SM
    assert cfg(64, 11008, 4096).block_m == 64  # 64 rows: a 128-deep ring of one program, unchanged
    assert cfg(1, 11008, 4096, sms=78).block_k == 256  # 172 tiles on 78 SMs: more than two a SM


def test_tf32_nt_takes_the_gluon_tile_from_eight_rounds():
    """tf32 with both operands K-major as they are (NT) takes the Gluon 128x256x32 tile with GROUP_M 16 from
    TF32_GLUON_ROUNDS rounds of tiles (8192^3: 16 rounds on 132 SMs), the TMA kernel below (4096^3: 2 rounds);
    TN (both MN-major: copies first) keeps the TMA kernel; NN and TT keep the register-operand rule. The tuner
    has the Gluon tile too."""
    from tilecraft.tuning.gemm import TF32_GLUON_ROUNDS, config_space, heuristic

    def prob(lay, s, sms=132):
        a = torch.empty(s, s, device="meta")
        b = torch.empty(s, s, device="meta")
        a, b = (a.t() if lay[0] == "T" else a), (b.t() if lay[1] == "T" else b)
        return ops.problem_of(a, b, ops.validate(a, b, precision="tf32"), arch="sm90", sms=sms)

    rule = GemmConfig("gluon", 128, 256, 32, group_m=16, num_warps=8, num_stages=3)
    assert heuristic(prob("NT", 8192)) == rule and rule in config_space(prob("NT", 8192))
    assert heuristic(prob("NT", 4096)).kernel == "tma"
    assert heuristic(prob("NT", 8192, sms=2048 // TF32_GLUON_ROUNDS + 1)).kernel == "tma"  # under 8 rounds
    assert heuristic(prob("NT", 8192, sms=2048 // TF32_GLUON_ROUNDS)) == rule
    assert heuristic(prob("TN", 8192)).kernel == "tma"
    for lay in ("NN", "TT"):
        assert heuristic(prob(lay, 8192)).mn_regs


def test_small_m_32_rows_nt_at_4096_take_an_eight_deep_ring():
    """M = 32 NT (both operands K-major) at N = K = 4096: 128-deep steps in 8 stages, no split; NN, TN and TT (not
    timed) keep 256-deep steps in 4; N = K = 8192 and the other row counts are unchanged."""
    from tilecraft.tuning.gemm import heuristic

    def cfg(m, nk, b_kmajor):
        return heuristic(Problem(m, nk, nk, 1, "bf16", None, "sm90", True, True, b_kmajor, 132))

    c = cfg(32, 4096, True)
    assert (c.block_m, c.block_n, c.block_k, c.num_stages, c.split_k) == (32, 32, 128, 8, 1)
    assert fits(c, Problem(32, 4096, 4096, 1, "bf16", None, "sm80", True, True, True, 108))
    for lay, want in (("NT", 8), ("TT", 4), ("NN", 4), ("TN", 4)):  # TT was not timed  # through the ops' own problem of the operands
        a = torch.empty(32, 4096, dtype=torch.bfloat16, device="meta")
        b = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
        a, b = (a.t().contiguous().t() if lay[0] == "T" else a), (b.t().contiguous().t() if lay[1] == "T" else b)
        assert heuristic(ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132)).num_stages == want, lay
    assert (cfg(32, 4096, False).block_k, cfg(32, 4096, False).num_stages) == (256, 4)
    assert cfg(32, 8192, True).block_k == 256
    assert cfg(16, 4096, True).num_stages == 6 and cfg(64, 4096, True).num_stages == 6


def test_small_m_32_rows_nt_with_one_wave_of_tiles_take_eight_warps():
    """M = 32 NT at N = K = 8192 (128 tiles of 64 columns on 132 SMs): 8 warps; TT, NN, M = 64 / 16 and N = K = 4096
    keep 4; more tiles than SMs (N = 11008) keep 4."""
    from tilecraft.tuning.gemm import heuristic

    def warps(m, nk, a_kmajor=True, b_kmajor=True, k=None):
        return heuristic(Problem(m, nk, k or nk, 1, "bf16", None, "sm90", True, a_kmajor, b_kmajor, 132)).num_warps

    assert warps(32, 8192) == 8
    c = heuristic(Problem(32, 8192, 8192, 1, "bf16", None, "sm90", True, True, True, 132))
    assert (c.kernel, c.block_m, c.block_n, c.block_k, c.num_stages, c.split_k) == ("pointer", 32, 64, 256, 4, 1)
    assert warps(32, 8192, a_kmajor=False) == 4 and warps(32, 8192, b_kmajor=False) == 4
    assert warps(64, 8192) == 4 and warps(16, 8192) == 4 and warps(1, 8192) == 4
    assert warps(32, 4096) == 4 and warps(32, 11008, k=4096) == 4


def _fake_gpu(monkeypatch, tmp_path):
    """choose_config as on an sm80 GPU (the on-disk cache consulted), on CPU tensors; the cache in tmp_path."""
    from tilecraft.hardware.device import software_versions

    monkeypatch.setenv("TILECRAFT_CACHE", str(tmp_path))
    cache.clear_memory()
    monkeypatch.setattr(ops, "_facts", lambda dev: ("sm80", 108, "FakeGPU", software_versions()))
    monkeypatch.setattr(ops, "_CHOSEN", {})
    monkeypatch.setattr(ops, "_PROBLEMS", {})
    a, b = torch.randn(40, 24), torch.randn(24, 56)
    spec = ops.validate(a, b)
    p = ops.problem_of(a, b, spec)
    path = cache.cache_file(f"gemm-v{ops.TUNER_VERSION}", "FakeGPU", software_versions())
    return a, b, spec, p, path


def test_tune_off_is_the_heuristic_even_with_a_tuned_entry_on_disk(monkeypatch, tmp_path):
    """TILECRAFT_TUNE=0 is "heuristics only" (issue 3, README): a cached winner was read before, so benches labelled
    heuristic could run tuned configs. The switch flipped within a process takes effect (the memo keys on it)."""
    from tilecraft.tuning.gemm import heuristic

    a, b, spec, p, path = _fake_gpu(monkeypatch, tmp_path)
    tuned = next(c for c in config_space(p) if c != heuristic(p))
    cache.store(path, shape_key(p), {"config": tuned.as_dict()})
    monkeypatch.setenv("TILECRAFT_TUNE", "0")
    assert ops.choose_config(a, b, spec) == heuristic(p)
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    assert ops.choose_config(a, b, spec) == tuned
    cache.clear_memory()


def test_bad_cache_entries_give_the_heuristic_not_a_crash(monkeypatch, tmp_path, capsys):
    from tilecraft.tuning.gemm import heuristic

    a, b, spec, p, path = _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    monkeypatch.setattr(ops, "_tune", lambda *args: None)  # the re-tune a bad entry leads to: nothing ran
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    good = next(c for c in config_space(p) if c != heuristic(p)).as_dict()
    for entry in ("garbage", {"date": "2026"}, {"config": {**good, "block_m": "16"}}, {"config": {**good, "kernel": "x"}},
                  {"config": {**good, "block_m": 48}}, {"config": {**good, "split_k": 0}},
                  {"config": GemmConfig("tma").as_dict()}):
        cache.store(path, shape_key(p), entry)
        monkeypatch.setattr(ops, "_CHOSEN", {})
        assert ops.choose_config(a, b, spec) == heuristic(p), entry
        assert "ignoring the tuning cache's entry" in capsys.readouterr().err
    cache.clear_memory()


def test_a_tuning_run_with_no_timed_winner_caches_nothing(monkeypatch, tmp_path, field):
    """Out of memory stops the tuning, and when no candidate was timed nothing is cached: the tuner returned
    candidate 0 before and it was stored as the winner."""
    from tilecraft.tuning.gemm import heuristic

    a, b, spec, p, path = _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv("TILECRAFT_TUNE", "1")
    monkeypatch.setenv("TILECRAFT_QUIET", "1")
    cands = [GemmConfig(block_m=m) for m in (16, 32, 64)]
    calls = []

    def oom_launch(*args):
        calls.append(args[4])
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(ops, "config_space", lambda p: cands)
    monkeypatch.setattr(ops, "launch", oom_launch)
    monkeypatch.setattr(ops, "device_l2_bytes", lambda device: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert ops._tune(a, b, spec, p, None, None, None, None, None) is None
    assert calls == [cands[0]]  # the first out-of-memory stops the run
    assert ops.choose_config(a, b, spec) == heuristic(p)
    cache.clear_memory()
    assert shape_key(p) not in cache.load(path)


def test_cliff_hunt_rules():
    """Rules from the cliff hunt (H200, 2026-12-01, benchmarks/cliff_hunt.py; the tuner's choices there, against
    torch in the same run): tf32 NN below two waves on the Gluon kernel's register operand (no copy of B a call),
    N of one 128-column tile on 128x128 tiles, no 128-byte row padding for K of one or two steps, fp64 under two
    waves of 64x128 tiles on 64x64x32."""
    from tilecraft.tuning.gemm import heuristic

    def prob(m, n, k, dtype=torch.bfloat16, lay="NN", **kw):
        a = torch.empty((k, m) if lay[0] == "T" else (m, k), dtype=dtype, device="meta")
        b = torch.empty((n, k) if lay[1] == "T" else (k, n), dtype=dtype, device="meta")
        a, b = (a.t() if lay[0] == "T" else a), (b.t() if lay[1] == "T" else b)
        return ops.problem_of(a, b, ops.validate(a, b, **kw), arch="sm90", sms=132)

    c = heuristic(prob(2048, 2048, 2048, torch.float32, precision="tf32"))
    assert (c.kernel, c.mn_regs, c.block_n, c.num_stages) == ("gluon", True, 256, 4)
    for m, n, k in ((1024, 1024, 1024), (256, 256, 16384), (8192, 64, 8192)):  # under half a wave of 128x256 tiles
        assert heuristic(prob(m, n, k, torch.float32, precision="tf32")).kernel == "tma", (m, n, k)
    assert heuristic(prob(2048, 2048, 2048, torch.float32, "NT", precision="tf32")).kernel == "tma"  # no copy there
    c = heuristic(prob(65536, 128, 128))
    assert (c.kernel, c.block_m, c.block_n, c.num_stages) == ("gluon", 128, 128, 5)
    assert heuristic(prob(65536, 256, 4096)).block_n == 256
    c = heuristic(prob(4096, 4096, 16))
    assert c.kernel == "gluon" and not c.pad_rows
    # a batch whose K (16) ends inside the Gluon tile's first K step with B MN-major: stacked on the Gluon kernel
    # (B through rank-3 boxes that stop at each entry's K, since 2026-12-01), so unpadded too
    a = torch.empty(4, 4096, 16, dtype=torch.bfloat16, device="meta")
    b = torch.empty(4, 16, 4096, dtype=torch.bfloat16, device="meta")
    c = heuristic(ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132))
    assert c.kernel == "gluon" and not c.pad_rows
    assert heuristic(prob(3000, 7000, 5000)).pad_rows  # long K still pads (3000^3 rows are not 128-byte aligned)
    # fp64: 32x32 tiles of two warps under a wave and a half of 64x64 tiles (gemm-fp64-probe, H200, 2026-12-01: 512^3
    # 0.858x cuBLAS against 0.548x on 64x64), 64x64 under two waves of 64x128, 64x128x16 above
    for s, want in ((512, (32, 32, 32, 2)), (768, (32, 32, 32, 2)), (1024, (64, 64, 32, 4)), (2048, (64, 128, 16, 4)),
                    (8192, (64, 128, 16, 4))):
        p = prob(s, s, s, torch.float64)
        c = heuristic(p)
        assert (c.block_m, c.block_n, c.block_k, c.num_warps) == want, s
        assert GemmConfig("pointer", 32, 32, 32, num_warps=2, num_stages=3) in config_space(p)
