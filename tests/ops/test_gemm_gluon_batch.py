"""Batched products on the sm90 Gluon GEMM without a GPU: the batch is stacked along the output's rows in
one launch (``STACK``), each operand one 2D TMA view of its entries one after another (or one broadcast
matrix). What the launcher plans (descriptor extents, rows an entry, the stacked M or N), what it refuses
(a tile that would straddle two entries, a partial K tile of an MN-major operand, split-K, c, batches whose
entries are not one after another), what the heuristic then runs, and that the stacked kernel cross-compiles
for sm90 without spills. Its numbers are checked on the GPU (tests/gpu/test_gemm_gluon_batch_gpu.py)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import gemm as ops
from tilecraft.tuning.gemm import GemmConfig, config_space, gluon_batch_fit, gluon_batch_rows, heuristic

BF = torch.bfloat16
G256 = GemmConfig("gluon", 128, 256, 64, 8, 8, 4)
REGS = GemmConfig("gluon", 128, 256, 32, 8, 8, 4, mn_regs=True, row_perm=2)


def _meta(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _main(plan):
    (launch,) = [k for k in plan if k.kernel.__name__ == "matmul_ws_kernel"]
    return launch, dict(zip(launch.kernel.arg_names, launch.args))


def test_bf16_batch_stacks_along_m():
    a, b = _meta(8, 512, 1024), _meta(8, 1024, 768)  # NN: B MN-major, (K, N) rows per entry
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=G256)
    launch, args = _main(plan)
    assert launch.constexprs["STACK"] == 1
    assert (args["M"], args["N"], args["K"]) == (8 * 512, 768, 1024)
    assert (args["batch_len"], args["a_brows"], args["b_brows"]) == (512, 512, 1024)
    # A K-major: one 2D view of the batch; B MN-major (K rows an entry): rank-3 boxes that stop at each entry's K
    assert list(args["a_desc"].shape) == [8 * 512, 1024] and list(args["b_desc"].shape) == [8, 1024, 768]
    assert list(args["b_desc"].block_shape) == [1, 64, 256]
    # the output through a rank-3 descriptor (it clips each entry's rows), boxes of one entry
    assert list(args["c_desc"].shape) == [8, 512, 768] and list(args["c_desc"].block_shape)[:2] == [1, 128]
    assert launch.grid == (8 * 4 * 3,)  # one program a tile: 4 x 3 tiles an entry


@pytest.mark.parametrize("m,swap,want", [(500, False, 512), (1, False, 128), (129, False, 256), (500, True, 512),
                                         (257, True, 512)])
def test_entries_that_end_inside_a_tile_are_padded_to_whole_tiles(m, swap, want):
    """M not a whole number of tiles: each entry takes whole tiles of the stacked launch (the rows past M read the
    next entry's rows or the TMA's zeros), and the rank-3 output clips them."""
    if swap:  # tf32 NN: the C^T form, stacked along the kernel's N (tiles of 256)
        a, b = _meta(4, m, 512, dtype=torch.float32), _meta(4, 512, 768, dtype=torch.float32)
        _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=REGS, precision="tf32")
    else:
        a, b = _meta(4, m, 1024), _meta(4, 1024, 768)
        _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=G256)
    launch, args = _main(plan)
    assert launch.constexprs["STACK"] == (2 if swap else 1)
    assert gluon_batch_rows(m, REGS if swap else G256, swap=swap) == want
    assert args["batch_len"] == want and args["N" if swap else "M"] == 4 * want
    assert args["b_brows" if swap else "a_brows"] == m  # the operand's own rows an entry
    assert list(args["c_desc"].shape) == [4, m, 768]


@pytest.mark.parametrize("which", ["a", "b"])
def test_a_broadcast_operand_is_one_matrix(which):
    a = _meta(512, 1024) if which == "a" else _meta(16, 512, 1024)
    b = _meta(1024, 768) if which == "b" else _meta(16, 1024, 768)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=G256)
    _, args = _main(plan)
    assert args["M"] == 16 * 512
    assert (args["a_brows"], args["b_brows"]) == ((0, 1024) if which == "a" else (512, 0))
    desc = args["a_desc"] if which == "a" else args["b_desc"]
    assert list(desc.shape) == ([512, 1024] if which == "a" else [1024, 768])
    # an expanded batch (stride 0) is the same broadcast
    a3 = a.expand(16, 512, 1024) if which == "a" else a
    b3 = b.expand(16, 1024, 768) if which == "b" else b
    _, _, plan = ops.target_plan(a3, b3, "sm90", sms=132, cfg=G256)
    assert _main(plan)[1]["a_brows" if which == "a" else "b_brows"] == 0


def test_tf32_nn_batch_stacks_along_the_c_transpose_n():
    """tf32 NN runs as C^T = B^T A^T with B^T read into registers: the kernel's N is the output's rows, so
    the batch is stacked there (``STACK`` 2) and the transposed stores land at the stacked rows."""
    a, b = _meta(8, 1024, 512, dtype=torch.float32), _meta(8, 512, 768, dtype=torch.float32)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=REGS, precision="tf32")
    launch, args = _main(plan)
    cx = launch.constexprs
    assert cx["STACK"] == 2 and cx["A_REGS"] and cx["TRANS_OUT"]
    assert (args["M"], args["N"], args["batch_len"]) == (768, 8 * 1024, 1024)
    assert (args["a_brows"], args["b_brows"]) == (512, 1024)  # B (K, N) rows and A (M, K) rows an entry
    assert list(args["a_desc"].shape) == [8, 512, 768] and list(args["c_desc"].shape) == [8, 1024, 768]
    assert list(args["c_desc"].block_shape) == [1, 64, 128]  # boxes of (1, EPI_N output rows, BLOCK_M columns)


@pytest.mark.parametrize("m,k,layout,cfg,why", [
    (512, 512, "NT", GemmConfig("gluon", 64, 128, 64, 8, 4, 6, split_k=2), "no split-K"),
    (512, 1000, "NN", GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2), "K \\(1000\\) a multiple of block_k"),
])
def test_configs_that_would_straddle_entries_are_refused(m, k, layout, cfg, why):
    a = _meta(4, k, m).mT if layout[0] == "T" else _meta(4, m, k)
    b = _meta(4, 256, k).mT if layout[1] == "T" else _meta(4, k, 256)
    with pytest.raises(ValueError, match=why):
        ops.target_plan(a, b, "sm90", sms=132, cfg=cfg)


@pytest.mark.parametrize("layout", ["NN", "TN", "TT"])
@pytest.mark.parametrize("m", [512, 500])
def test_k_of_partial_steps_with_an_mn_major_operand_reads_rank3_boxes(layout, m):
    """An operand read MN-major has K rows an entry: a 2D box over the flattened batch would read the next entry's
    first rows into the last partial K step (a NaN there would reach this entry's result through 0 x NaN). Its
    rank-3 descriptor's boxes stop at the entry's K (zeros past it); K-major operands stay 2D views."""
    k = 1000
    a = _meta(4, k, m).mT if layout[0] == "T" else _meta(4, m, k)
    b = _meta(4, 256, k).mT if layout[1] == "T" else _meta(4, k, 256)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=G256)
    launch, args = _main(plan)
    assert launch.constexprs["STACK"] == 1
    for name, mn in (("a_desc", layout[0] == "T"), ("b_desc", layout[1] == "N")):
        desc = args[name]
        assert len(desc.shape) == (3 if mn else 2), (name, desc.shape)
        if mn:
            assert list(desc.shape) == [4, k, m if name == "a_desc" else 256] and desc.block_shape[:2] == [1, 64]


def test_k_of_partial_tiles_is_fine_when_both_operands_are_k_major():
    a, b = _meta(4, 512, 1000), _meta(4, 256, 1000).mT  # NT: K is each row's own extent (the TMA zero-fills)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=G256)
    assert _main(plan)[0].constexprs["STACK"] == 1


def test_what_the_gluon_kernel_refuses_with_a_batch():
    a, b = _meta(4, 512, 512), _meta(4, 512, 512)
    spec = ops.validate(a, b)
    assert ops.gluon_ok(a, b, spec)
    c = _meta(4, 512, 512)
    assert ops.gluon_ok(a, b, ops.validate(a, b, c=c, beta=1.0))  # c: read per entry in the epilogue (since 2026-12-01)
    f = _meta(4, 512, 512, dtype=torch.float32)
    assert not ops.gluon_ok(f, f, ops.validate(f, f, precision="fp32-accurate"))  # 3xTF32: not with a batch
    assert ops.gluon_ok(f, f, ops.validate(f, f, precision="tf32"))
    # every other entry of a batch: not one 2D view
    every_other = _meta(8, 512, 512)[::2]
    assert ops.gluon_batch_refusal(every_other, b, spec) is not None
    assert not ops.gluon_ok(every_other, b, ops.validate(every_other, b))
    p = ops.problem_of(every_other, b, ops.validate(every_other, b), arch="sm90", sms=132)
    assert heuristic(p).kernel != "gluon"
    with pytest.raises(ValueError, match="Gluon"):
        ops.target_plan(every_other, b, "sm90", sms=132, cfg=G256)


@pytest.mark.parametrize("m,n,k,layout", [(512, 512, 512, "NN"), (1024, 1024, 64, "NN"), (2048, 2048, 2048, "NT"),
                                          (500, 512, 512, "NN"), (512, 512, 1000, "NN"), (128, 128, 128, "NN"),
                                          (96, 512, 512, "NT"), (129, 264, 96, "TT"), (1023, 136, 1000, "TT")])
@pytest.mark.parametrize("batch", [4, 64])
def test_the_heuristic_only_picks_configs_that_stack(m, n, k, layout, batch):
    """The heuristic's choice and the config space's Gluon tiles, including A read MN-major from rows the TMA cannot
    read (TT, M = 129 or 1023): the TMA plan copies it K-major, the Gluon kernel's copy keeps it MN-major, so K
    must be whole K steps there."""
    a = _meta(batch, k, m).mT if layout[0] == "T" else _meta(batch, m, k)
    b = _meta(batch, n, k).mT if layout[1] == "T" else _meta(batch, k, n)
    spec = ops.validate(a, b)
    p = ops.problem_of(a, b, spec, arch="sm90", sms=132)
    cfg = heuristic(p)
    if cfg.kernel == "gluon":
        assert gluon_batch_fit(m, k, cfg, mn_major=layout[1] == "N") is None
    ops.target_plan(a, b, "sm90", sms=132)  # plans (raises on a config it cannot run)
    for c in config_space(p):  # and so does every Gluon config the tuner would time
        if c.kernel == "gluon":
            ops.target_plan(a, b, "sm90", sms=132, cfg=c)


def test_tf32_nn_batch_takes_the_register_operand():
    a, b = _meta(8, 1024, 1024, dtype=torch.float32), _meta(8, 1024, 1024, dtype=torch.float32)
    p = ops.problem_of(a, b, ops.validate(a, b, precision="tf32"), arch="sm90", sms=132)
    cfg = heuristic(p)
    assert cfg.kernel == "gluon" and cfg.mn_regs
    # a 2D call of one entry keeps the TMA kernel's copy (16 + 16 tiles of 128x256: under half a wave)
    a2, b2 = a[0], b[0]
    p2 = ops.problem_of(a2, b2, ops.validate(a2, b2, precision="tf32"), arch="sm90", sms=132)
    assert heuristic(p2).kernel != "gluon"


@pytest.mark.parametrize("layout,dtype,cfg", [
    ("NN", BF, G256), ("TT", BF, GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2)),
    ("NN", torch.float32, REGS), ("NT", torch.int8, GemmConfig("gluon", 128, 256, 128, 8, 8, 3)),
], ids=lambda x: x.short() if isinstance(x, GemmConfig) else str(x))
@pytest.mark.parametrize("m,k", [(512, 1024), (500, 1000)])  # whole tiles; padded entries and rank-3 operand boxes
def test_stacked_kernel_cross_compiles_without_spills(layout, dtype, cfg, m, k):
    if cfg.cluster_m > 1 and k % cfg.block_k:
        pytest.skip("a 2-CTA cluster with B read MN-major keeps K whole (gluon_batch_fit)")
    a = _meta(4, k, m, dtype=dtype).mT if layout[0] == "T" else _meta(4, m, k, dtype=dtype)
    b = _meta(4, 768, k, dtype=dtype).mT if layout[1] == "T" else _meta(4, k, 768, dtype=dtype)
    kw = {"precision": "tf32"} if dtype == torch.float32 else {}
    if dtype == torch.int8:
        kw["out_dtype"] = torch.int32
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=cfg, **kw)
    launch, _ = _main(plan)
    assert launch.constexprs["STACK"] in (1, 2)
    res = cross_compile("tilecraft.kernels.gemm_gluon", "matmul_ws_kernel", ops.compile_signature(launch),
                        launch.constexprs, "sm90", num_warps=launch.options["num_warps"],
                        maxnreg=launch.options["maxnreg"], sass=False)
    assert res.error is None, res.error
    assert res.spills == 0 and res.scratch_bytes == 0


def test_cluster_launch_keeps_its_shared_memory_offsets_last():
    """``run_cluster_kernel`` fills the last ``len(smem)`` arguments with the allocations' offsets: the batch's
    arguments come before them (after them, a batched cluster launch read its offsets as rows: misaligned
    address on the H200)."""
    a, b = _meta(64, 128, 128), _meta(64, 128, 128)
    cfg = GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=cfg)
    launch, args = _main(plan)
    assert launch.smem and launch.args[-len(launch.smem):] == (-1,) * len(launch.smem)
    names = list(launch.kernel.arg_names)
    assert names[len(launch.args) - 3:len(launch.args)] == ["smem_b", "smem_ready", "smem_empty"]
    assert (args["batch_len"], args["a_brows"], args["b_brows"]) == (128, 128, 128)


@pytest.mark.parametrize("batch,m,n,k,want", [
    (64, 128, 128, 128, GemmConfig("gluon", 64, 128, 64, 8, 4, 4)),  # short K: 64x128 tiles, no cluster
    (32, 128, 256, 128, GemmConfig("gluon", 64, 128, 64, 8, 4, 4)),
    (16, 256, 256, 256, GemmConfig("gluon", 64, 128, 64, 8, 4, 4)),
    (8, 512, 512, 512, "gluon"), (8, 512, 512, 1024, "gluon"), (32, 256, 256, 512, "gluon"),
    (32, 256, 256, 1024, GemmConfig("tma", 128, 128, 64, 8, 8, 4)),  # one wave of 128x128 tiles, long K
    (8, 512, 512, 2048, GemmConfig("tma", 128, 128, 64, 8, 8, 4)),
])
def test_batched_tiles_follow_the_probe(batch, m, n, k, want):
    """The heuristic's batched bf16 choices where the probe (benchmarks/gemm_batch_probe.py, H200, 2026-12-01)
    timed them: 64x128 tiles without a cluster at short K, the TMA kernel for one wave of 128x128 tiles with long K,
    the Gluon kernel's stacked batch otherwise."""
    a, b = _meta(batch, m, k), _meta(batch, k, n)
    cfg = heuristic(ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132))
    assert cfg.kernel == want if isinstance(want, str) else cfg == want, cfg.short()



def test_2d_products_keep_the_cluster():
    a = _meta(1000, 1000)
    assert heuristic(ops.problem_of(a, a, ops.validate(a, a), arch="sm90", sms=132)).cluster_m == 2



def test_a_strided_batched_output_is_refused_clearly():
    a, b = _meta(4, 256, 256), _meta(4, 256, 256)
    spec = ops.validate(a, b)
    out = _meta(4, 256, 256).mT  # the transpose of a contiguous output
    with pytest.raises(ValueError, match="contiguous output"):
        ops.launch_plan(a, b, out, spec, G256)


def test_batches_that_stack_differently_do_not_share_a_cache_entry():
    """K = 1000 and 1024 fall in one K bucket: their batched keys differ by what divides K, and a cached Gluon tile
    that cannot stack the batch (a 2-CTA cluster with B read MN-major: K must be whole K steps) is not run (the
    heuristic instead, with a line on stderr). Other tiles stack both (rank-3 boxes), and M = 500 and 512 stack
    alike (entries padded to whole tiles)."""
    from tilecraft.tuning.gemm import shape_key
    c2 = GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2)
    a0, a4, b0, b4 = _meta(8, 512, 1000), _meta(8, 512, 1024), _meta(8, 1000, 512), _meta(8, 1024, 512)
    p0 = ops.problem_of(a0, b0, ops.validate(a0, b0), arch="sm90", sms=132)
    p4 = ops.problem_of(a4, b4, ops.validate(a4, b4), arch="sm90", sms=132)
    assert shape_key(p0) != shape_key(p4)
    assert ops._cached_config({"config": c2.as_dict()}, p0, "k") is None
    assert ops._cached_config({"config": c2.as_dict()}, p4, "k") == c2
    for p in (p0, p4):
        assert G256 in config_space(p) and ops._cached_config({"config": G256.as_dict()}, p, "k") == G256
    a5 = _meta(8, 500, 1024)
    p5 = ops.problem_of(a5, b4, ops.validate(a5, b4), arch="sm90", sms=132)
    assert G256 in config_space(p5) and ops._cached_config({"config": G256.as_dict()}, p5, "k") == G256
    p2d = ops.problem_of(a4[0], b4[0], ops.validate(a4[0], b4[0]), arch="sm90", sms=132)
    assert "/st" not in shape_key(p2d)  # 2D keys unchanged


def test_tf32_nn_batches_of_short_entries_take_the_128_wide_register_tile():
    """The C^T form stacks along the tile's N: entries of 77 rows padded to 256 take the 128-wide tile (128 rows)."""
    f = torch.float32
    for m, want in ((77, 128), (500, 256), (1000, 256)):
        a, b = _meta(32, m, 768, dtype=f), _meta(32, 768, 768, dtype=f)
        cfg = heuristic(ops.problem_of(a, b, ops.validate(a, b, precision="tf32"), arch="sm90", sms=132))
        assert cfg.kernel == "gluon" and cfg.mn_regs and cfg.tile_n == want, (m, cfg.short())


@pytest.mark.parametrize("m", [1000, 512, 77])
def test_a_batch_of_one_is_one_2d_product(m):
    """3D operands with a batch of 1: one 2D product on the Gluon kernel (no stacking, so no whole-tile rule: M = 1000
    on the 2-CTA cluster's 64x128 tiles planned and raised before this was caught, 2026-12-01)."""
    for a, b in ((_meta(1, m, 512), _meta(512, 1024)), (_meta(1, m, 512), _meta(1, 512, 1024)),
                 (_meta(m, 512), _meta(1, 512, 1024))):
        _, cfg, plan = ops.target_plan(a, b, "sm90", sms=132)
        if cfg.kernel == "gluon":
            launch, args = _main(plan)
            assert launch.constexprs["STACK"] == 0 and args["batch_len"] == 0 and args["M"] == m


@pytest.mark.parametrize("layout", ["TN", "NN", "TT"])
def test_a_cluster_keeps_2d_operand_descriptors(layout):
    """With a 2-CTA cluster the B half's multicast names its descriptor by kernel parameter number (five a 2D
    descriptor): a rank-3 A before it moved that number (H200: misaligned address, 2026-12-01). So a clustered batch
    reads its operands through 2D views (K whole steps there: gluon_batch_fit)."""
    a = _meta(4, 1024, 512).mT if layout[0] == "T" else _meta(4, 512, 1024)
    b = _meta(4, 768, 1024).mT if layout[1] == "T" else _meta(4, 1024, 768)
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=GemmConfig("gluon", 64, 128, 64, 8, 4, 5, cluster_m=2))
    launch, args = _main(plan)
    assert launch.constexprs["STACK"] == 1 and launch.cluster == 2
    assert all(len(args[n].shape) == 2 for n in ("a_desc", "b_desc", "a_lo_desc", "b_lo_desc"))
    assert len(args["c_desc"].shape) == 3


def test_batch_rules_from_the_ragged_probe():
    """bf16 batches in the 64x128 class with K > 256 keep the TMA kernel (16 x 256^2 x 1000: 1.012x against 0.927x
    stacked); tf32 batches with an MN-major operand under half a wave of 128x256 tiles take 128x128 register tiles
    (8 x 512^2 x 1000 NN 1.154x, 16 x 200 x 256 x 100 TT 1.077x, against 0.444x / 0.706x on the TMA kernel)."""
    a, b = _meta(16, 256, 1000), _meta(16, 1000, 256)
    p = ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132)
    assert heuristic(p).kernel == "tma"
    a, b = _meta(16, 256, 256), _meta(16, 256, 256)  # short K: stacked (the rule of 2026-12-01, thirty-third session)
    assert heuristic(ops.problem_of(a, b, ops.validate(a, b), arch="sm90", sms=132)).kernel == "gluon"
    f = torch.float32
    for a, b in ((_meta(8, 512, 1000, dtype=f), _meta(8, 1000, 512, dtype=f)),
                 (_meta(16, 100, 200, dtype=f).mT, _meta(16, 256, 100, dtype=f).mT)):
        cfg = heuristic(ops.problem_of(a, b, ops.validate(a, b, precision="tf32"), arch="sm90", sms=132))
        assert (cfg.kernel, cfg.mn_regs, cfg.tile_n, cfg.num_stages) == ("gluon", True, 128, 5), cfg.short()


@pytest.mark.parametrize("c_shape,stride_cb", [((4, 500, 768), 500 * 768), ((500, 768), 0)])
@pytest.mark.parametrize("swap", [False, True])
def test_a_stacked_batch_reads_c_per_entry(c_shape, stride_cb, swap):
    """beta * C on a stacked batch: C stays (batch, M, N) (one matrix for every entry: stride 0) and the epilogue
    finds each entry's rows (``stride_cb``, masked at ``c_rows``); in the C^T form its strides swap."""
    dt = torch.float32 if swap else BF
    a, b, c = _meta(4, 500, 1024, dtype=dt), _meta(4, 1024, 768, dtype=dt), _meta(*c_shape, dtype=dt)
    kw = {"precision": "tf32"} if swap else {}
    _, _, plan = ops.target_plan(a, b, "sm90", sms=132, cfg=REGS if swap else G256, c=c, beta=0.5, **kw)
    launch, args = _main(plan)
    assert launch.constexprs["HAS_C"] and launch.constexprs["STACK"] == (2 if swap else 1)
    assert (args["stride_cb"], args["c_rows"], args["batch_len"]) == (stride_cb, 500, 512)
    assert (args["stride_cr"], args["stride_cc"]) == ((1, 768) if swap else (768, 1))
