"""The cp.async-ring march (``kernel="smem"``, ``kernels.stencil_smem``) without a GPU: its launch checks,
``auto``'s and the tuner's choice of it on sm90, and the kernel cross-compiled for sm90 (no spills, its
copies are ``cp.async``, its neighbours 128-bit shared loads, the only other shared-memory access is the
one store that keeps Gluon's allocation). The interpreter cannot run Gluon or inline PTX; the GPU tests
(tests/gpu/test_stencil_smem.py) check its values against float64."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tilecraft.analysis.compiled import cross_compile
from tilecraft.ops import stencil as ops
from tilecraft.tuning import stencil as ts

L2 = 50 * 2**20


def _meta(shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize("dtype,order", [(torch.float32, 8), (torch.float64, 8), (torch.float64, 4), (torch.float32, 4),
                                         (torch.float32, 6), (torch.float64, 6)])
def test_auto_takes_the_ring_on_sm90_only(dtype, order):
    shape = (520, 520, 520)
    cfg = ops.auto_config(dtype, order, shape, L2, True, True, smem=True)
    assert cfg.kernel == "smem" and cfg == ops.smem_march(dtype, order // 2, shape)
    assert cfg.block_z == {8: 512}.get(order, 64)  # ring_block_z (fp32: one program per tile; fp64: 256 programs)
    assert ops.smem_ok(_meta(shape, dtype), _meta(shape, dtype), order, cfg) is None
    assert ops.auto_config(dtype, order, shape, L2, True, True).kernel != "smem"  # not sm90 (or the CPU)
    # rows not of 8-byte vectors: fp32 takes the 4-byte ring (``word_ring``), fp64 none
    unaligned = ops.auto_config(dtype, order, shape, L2, False, False, smem=True)
    assert unaligned == ops.word_ring(order // 2) if dtype == torch.float32 else unaligned.kernel != "smem"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("order", [10, 12, 14, 16])
def test_auto_takes_the_ring_at_high_orders(dtype, order):
    """Orders 10-16 on sm90 (2026-12-01): the ring (43-59% of copy at 512^3 on an H200) instead of the z-march with
    z through L1 (20-25%), on large planes and small; fp32 orders 10 and 12 in 32 x 64 tiles of 16 warps on planes of
    512^2 and more, the rest in 16-row tiles of 8 warps, mbarriers, 16-byte vectors; the tuner times the rest too."""
    for shape in [(512 + order, 512 + order, 528), (64 + order, 100, 132)]:
        cfg = ops.auto_config(dtype, order, shape, L2, True, True, smem=True)
        assert cfg.kernel == "smem" and cfg == ops.smem_march(dtype, order // 2, shape) and cfg.num_stages == 2
        assert ops.smem_ok(_meta(shape, dtype), _meta(shape, dtype), order, cfg) is None
        big = shape[1] * shape[2] >= 512 * 512
        assert cfg.num_warps == (16 if dtype == torch.float32 and order in (10, 12) and big else 8)
        assert ops.auto_config(dtype, order, shape, L2, True, True).kernel != "smem"  # not on sm90
        cands = ts.candidates(dtype, order, shape, L2, True, True, smem=True)
        assert cands[0] == cfg and ops.l1_march(dtype, order // 2) in cands


def test_auto_keeps_the_other_orders():
    for dtype, order, shape in [(torch.float32, 2, (512,) * 3), (torch.float64, 2, (512,) * 3),  # order 2: slower
                                (torch.float32, 4, (64, 200, 200)), (torch.float32, 6, (64, 200, 200)),
                                (torch.float64, 6, (64, 200, 200)),  # planes under 256^2: not measured
                                (torch.float64, 4, (64, 300, 300))]:  # fp64 order 4 under 512^2: unchanged
        assert ops.auto_config(dtype, order, shape, L2, True, True, smem=True) == \
            ops.auto_config(dtype, order, shape, L2, True, True)


def test_tuner_times_the_ring_and_the_register_window():
    cands = ts.candidates(torch.float32, 8, (520, 520, 520), L2, True, True, smem=True)
    assert cands[0] == ops.smem_march(torch.float32, 4, (520, 520, 520)) and cands[0].block_z == 512
    assert ops.smem_march(torch.float32, 4) in cands  # the same ring with 64 planes per program
    assert cands[0].vec == 2 and ops.ring16(torch.float32, 4) in cands  # and the 16-byte ring
    assert ops.ring16(torch.float32, 4).vec == 0 and ops.ring16(torch.float64, 4) == ops.smem_march(torch.float64, 4)
    kinds = [c.kernel for c in cands]
    assert kinds.count("smem") == 6 and "zwin" in kinds
    o4 = ts.candidates(torch.float32, 4, (516, 516, 516), L2, True, True, smem=True)
    assert o4[0] == ops.smem_march(torch.float32, 2) and o4[0].block_x == 128
    assert ops.auto_config(torch.float32, 4, (516,) * 3, L2, True, True) in o4  # the heuristic without smem
    assert all(c.kernel != "smem" for c in ts.candidates(torch.float32, 8, (520, 520, 520), L2, True, True))


def test_ring_planes_per_program():
    """``ring_block_z``: order 8 lengthens the marches where the modelled schedule ends sooner and every SM gets a
    program (fp32's 8-byte ring: 90% of the SMs, up to 2048 planes); other orders, tiny grids and grids with fewer
    programs than that keep 64 planes."""
    f32, f64 = torch.float32, torch.float64
    assert ops.smem_march(f64, 4, (520, 520, 520)).block_z == 512  # 256 programs
    assert ops.smem_march(f64, 4, (1032, 520, 520)).block_z == 512  # fp64: at most 512, every SM a program
    assert ops.smem_march(f64, 4, (520, 264, 264)).block_z == 128  # 64 tiles of 32 x 32, 4 chunks: 256 programs
    # fp32 order 8 (32 x 64 tiles): 520^2 planes give 128 tiles, each one program through every plane
    assert ops.smem_march(f32, 4, (520, 520, 520)).block_z == 512
    assert ops.smem_march(f32, 4, (1032, 520, 520)).block_z == 1024
    assert ops.smem_march(f32, 4, (2056, 520, 520)).block_z == 2048
    assert ops.smem_march(f32, 4, (264, 520, 520)).block_z == 256
    assert ops.smem_march(f32, 4, (520, 264, 264)).block_z == 128  # 32 tiles: 4 chunks make 128 programs
    assert ops.smem_march(f32, 4, (776, 776, 776)).block_z == 512  # 288 tiles: the model, not one chunk
    assert ops.smem_march(f32, 4, (136, 1032, 1032)).block_z == 128  # one chunk of the 128 interior planes
    assert ops.smem_march(f32, 4, (64, 64, 64)).block_z == 64
    assert ops.smem_march(f32, 4, (520, 136, 136)).block_z == 64  # 8 tiles: longer marches leave SMs idle
    for dtype, r in ((f32, 3), (f64, 3), (f32, 2), (f64, 2), (f32, 1)):
        assert ops.smem_march(dtype, r, (520, 520, 520)).block_z == 64
    # the model: two chunks of 512 and 2 planes take two waves of long programs where 64-plane chunks fill them
    assert ops._ring_makespan(153, 514, 512, 12, 132) > ops._ring_makespan(153, 514, 64, 12, 132)
    assert ops._ring_makespan(256, 512, 512, 12, 132) < ops._ring_makespan(256, 512, 64, 12, 132)


def test_refusals_name_the_reason():
    cfg = ops.smem_march(torch.float32, 4)
    u = _meta((40, 40, 80))
    assert "NVIDIA" in ops.smem_ok(torch.zeros(40, 40, 80), torch.zeros(40, 40, 80), 8, cfg)
    assert "vec=1, got vec 2" in ops.smem_ok(_meta((40, 40, 81)), _meta((40, 40, 81)), 8, cfg)  # 4-byte rows
    # rows of 8-byte vectors: the ring's 8-byte copies, where a thread computes an 8-byte vector (cfg: vec=2)
    assert ops.smem_ok(_meta((40, 40, 82)), _meta((40, 40, 82)), 8, cfg) is None
    assert "8 bytes" in ops.smem_ok(_meta((40, 40, 82)), _meta((40, 40, 82)), 8, ops.ring16(torch.float32, 4))
    assert ops.smem_ok(u, u, 2, cfg) is None  # R = 1: a halo vector a side, the edge vectors stored by component
    assert ops.smem_ok(u, u, 16, cfg) is None  # R = 8: 25 weight parameters (orders 10-16 since 2026-12-01)
    assert "R = 1..4" in ops.smem_ok(u, u, 10, cfg, wave=True)  # the wave step's ring takes 4 a side
    assert "block_y" in ops.smem_ok(u, u, 8, replace(cfg, block_y=16))
    assert "power of two" in ops.smem_ok(u, u, 8, replace(cfg, block_x=48))
    assert "shared memory" in ops.smem_ok(u, u, 8, replace(cfg, prefetch=12, num_stages=8))
    with pytest.raises(ValueError, match="block_y"):
        ops.launch_plan(u, u, 8, (1.0, 1.0, 1.0), replace(cfg, block_y=8))


def test_fp64_weights_are_fp64_parameters():
    u = _meta((520, 520, 520), torch.float64)
    k = ops.launch_plan(u, u, 8, (1.0, 1.0, 1.0), ops.smem_march(torch.float64, 4))[0]
    sig = ops.compile_signature(k)
    assert all(sig[n] == "fp64" for n in ("wc", "wz1", "wy4", "wx4"))
    k32 = ops.launch_plan(_meta((520,) * 3), _meta((520,) * 3), 8, (1.0, 1.0, 1.0), ops.smem_march(torch.float32, 4))[0]
    assert ops.compile_signature(k32)["wc"] == "fp32"


def test_sm80_takes_the_barrier_ring_only(monkeypatch):
    """``mbarrier.try_wait`` is sm90: on an sm80 GPU the mbarrier ring (``num_stages`` > 0) is refused with the
    reason, the CTA-barrier ring (``num_stages=0``) is not; and the latter compiles for sm80."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))

    class FakeCuda:  # what smem_ok reads of a tensor: its device and its memory
        device = torch.device("cuda", 0)
        shape = (520, 520, 520)

        def element_size(self):
            return 4

        def stride(self, d=None):
            return (520 * 520, 520, 1) if d is None else (520 * 520, 520, 1)[d]

        def data_ptr(self):
            return 0

    u = FakeCuda()
    ring = ops.ring16(torch.float32, 4)  # mbarriers
    assert "sm90" in ops.smem_ok(u, u, 8, ring) and "num_stages=0" in ops.smem_ok(u, u, 8, ring)
    assert ops.smem_ok(u, u, 8, ops.smem_march(torch.float32, 4)) is None  # fp32 order 8's: a CTA barrier a plane
    assert ops.smem_ok(u, u, 8, replace(ring, num_stages=0)) is None
    cfg = replace(ring, num_stages=0)
    m = _meta((520, 520, 520))
    k = ops.launch_plan(m, m, 8, (1.0, 1.0, 1.0), cfg)[0]
    res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k), k.constexprs,
                        "sm80", num_warps=cfg.num_warps)
    assert res.error is None and res.spills == 0, (res.error, res.spills)


@pytest.mark.parametrize("dtype,order", [(torch.float32, 8), (torch.float64, 8), (torch.float64, 4), (torch.float32, 4),
                                         (torch.float32, 6), (torch.float64, 6), (torch.float64, 2),
                                         (torch.float32, 10), (torch.float32, 16), (torch.float64, 10),
                                         (torch.float64, 14)])
def test_ring_cross_compiles_for_sm90(dtype, order):
    shape = (520, 520, 520)
    cfg = ops.smem_march(dtype, order // 2)
    k = ops.launch_plan(_meta(shape, dtype), _meta(shape, dtype), order, (1.0, 1.0, 1.0), cfg)[0]
    res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    # R not a whole number of vectors (orders 2 and 6, fp32 order 4): the edge vectors' stores by component
    partial = (order // 2) % (128 // torch.finfo(dtype).bits) != 0
    # a thread's vector: 16 bytes, or 8 where it computes two fp32 elements (fp32 order 8: ``vec=2``)
    whole = 64 if cfg.vec == 2 and dtype == torch.float32 else 128
    narrow = ("sass_global_store_32b",) + (("sass_global_store_64b",) if whole == 128 else ())
    assert (sum(res.census.get(n, 0) for n in narrow) > 0) == partial
    assert res.spills == 0 and res.registers <= 128 * 16 // cfg.num_warps, (res.registers, res.spills)  # one CTA
    c = res.census
    assert c.get("sass:LDGSTS", 0) > 0, "the planes are copied with cp.async"
    assert c.get(f"sass_shared_load_{whole}b", 0) >= 11, "the neighbours are whole-vector shared loads"
    assert c.get(f"sass_global_store_{whole}b", 0) > 0
    # the ring is addressed by hand from global_smem: nothing else may use shared memory but the one store
    # that keeps Gluon's allocation
    assert c.get("stmatrix", 0) + c.get("shared_store", 0) <= 1


def test_wave_ring_has_no_global_load_and_fits():
    """The wave step's ring interior (``ops.wave.smem_config``, ``wave_smem_kernel``): p_prev and m travel in the
    ring's slots with the plane (``cp.async``) and p's centre comes from a register delay line, so the march has
    no global load at all; the slots with the tile's p_prev and m fit the shared memory (one CTA of 16 warps) and
    nothing spills. Its values: tests/wave/test_wave_gpu.py (zwin's bits, on a GPU)."""
    from tilecraft.kernels import stencil_smem as _s
    from tilecraft.ops import wave as ow

    cfg = ow.smem_config()
    probe = ops.StencilConfig("smem", block_y=cfg.block_y, block_x=cfg.block_x, num_warps=cfg.num_warps,
                              block_z=cfg.block_z, prefetch=cfg.ahead, num_stages=cfg.slack)
    ring = ops.smem_ring_elements(probe, 4, 4, wave=True)
    assert ring * 4 <= 128 * 1024 < ops.smem_ring_elements(replace(probe, prefetch=3, num_stages=2), 4, 4, wave=True) * 4
    m = _meta((520, 520, 520))
    assert ops.smem_ok(m, m, 8, probe, wave=True) is None
    assert "shared memory" in ops.smem_ok(m, m, 8, replace(probe, prefetch=3, num_stages=2), wave=True)
    sig = {}
    for n in _s.wave_smem_kernel.arg_names:
        if n.endswith("_ptr"):
            sig[n] = "*fp32:16"
        elif n.startswith("w"):
            sig[n] = "fp32"
        elif n not in ("R", "BY", "BXV", "BZ", "VEC", "D", "NW", "RING", "S", "MBAR", "PF"):
            sig[n] = "i32"
    consts = dict(R=4, BY=cfg.block_y, BXV=cfg.block_x // 4, BZ=cfg.block_z, VEC=4, D=cfg.ahead, NW=cfg.num_warps,
                  RING=ring, S=ops.smem_slots(probe), MBAR=cfg.slack > 0, PF=0)
    res = cross_compile("tilecraft.kernels.stencil_smem", "wave_smem_kernel", sig, consts, "sm90",
                        num_warps=cfg.num_warps)
    assert res.error is None, res.error
    assert res.spills == 0 and res.registers <= 128, (res.registers, res.spills)
    c = res.census
    assert not any(k.startswith("sass_global_load") and v for k, v in c.items()), c
    assert c.get("sass:LDGSTS", 0) > 0 and c.get("sass_global_store_128b", 0) > 0


@pytest.mark.parametrize("order,cfg", [
    (8, replace(ops.smem_march(torch.float32, 4), vec=2, num_warps=32)),
    (8, replace(ops.smem_march(torch.float32, 4), vec=2, num_warps=16, block_y=16)),
    (6, replace(ops.smem_march(torch.float32, 3), vec=2, num_warps=32)),
    (2, replace(ops.smem_march(torch.float32, 1), vec=2, num_warps=16, block_y=16)),
])
def test_two_elements_a_thread_halve_the_registers(order, cfg):
    """``vec=2`` (fp32): each thread computes an 8-byte vector (64-bit shared loads and stores), so a tile takes
    twice the threads and each needs about half the registers: at most 64, so a CTA of 32 warps (or two of 16)
    fits an SM. The copies stay 16-byte ``cp.async``."""
    shape = (520, 520, 520)
    m = _meta(shape)
    assert ops.smem_ok(m, m, order, cfg) is None
    k = ops.launch_plan(m, m, order, (1.0, 1.0, 1.0), cfg)[0]
    assert k.constexprs["CV"] == 2
    res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    assert res.spills == 0 and res.registers <= 64, (res.registers, res.spills)
    c = res.census
    assert c.get("sass_shared_load_64b", 0) > 0 and not c.get("sass_shared_load_128b", 0)
    assert c.get("sass:LDGSTS", 0) > 0 and c.get("sass_global_store_64b", 0) > 0


def test_two_elements_a_thread_refusals():
    cfg = replace(ops.smem_march(torch.float32, 4), vec=2, num_warps=32)
    m = _meta((520, 520, 520))
    assert "block_y" in ops.smem_ok(m, m, 8, replace(cfg, num_warps=16))
    assert "32 warps" in ops.smem_ok(m, m, 8, replace(cfg, num_warps=64, block_y=64))
    m64 = _meta((520, 520, 520), torch.float64)
    assert "8-byte" in ops.smem_ok(m64, m64, 8, replace(ops.smem_march(torch.float64, 4), vec=4))
    assert "8-byte" in ops.smem_ok(m, m, 8, replace(cfg, vec=1))
    # 64 threads a row: one element per thread needs at most 32 (a warp) a row
    assert "32 threads a tile row" in ops.smem_ok(m, m, 4, replace(ops.smem_march(torch.float32, 2), vec=2, num_warps=16))
    assert "v2" in cfg.short()


def test_planes_per_barrier():
    """``planes_per_barrier`` (the CTA-barrier ring): prefetch + PB slots, one ``bar.sync`` per PB planes in the
    march's trips, refused with mbarriers, for the wave step, beyond the planes ahead, or where the slots are not a
    multiple of PB. Its values: tests/gpu/test_stencil_smem.py."""
    base = ops.smem_march(torch.float32, 4, (520, 520, 520))
    m = _meta((520, 520, 520))
    bars = {}
    for pb, ahead in ((1, 5), (2, 6), (4, 4)):
        cfg = replace(base, prefetch=ahead, planes_per_barrier=pb)
        assert ops.smem_ok(m, m, 8, cfg) is None
        assert ops.smem_slots(cfg) == ahead + pb
        k = ops.launch_plan(m, m, 8, (1.0, 1.0, 1.0), cfg)[0]
        assert k.constexprs["PB"] == pb and k.constexprs["S"] == ahead + pb
        res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k),
                            k.constexprs, "sm90", num_warps=cfg.num_warps)
        assert res.error is None and res.spills == 0, (res.error, res.spills)
        bars[pb] = res.census["sass:BAR"]  # the unrolled trip's, the remainder loop's one, the prologue's
    assert bars[1] - 6 == bars[2] - 4 == bars[4] - 2, bars  # a trip of 6 / 8 / 8 planes: 6 / 4 / 2 barriers
    assert "pb2" in replace(base, prefetch=6, planes_per_barrier=2).short()
    for bad in (replace(base, prefetch=5, planes_per_barrier=2), replace(base, prefetch=2, planes_per_barrier=4),
                replace(base, prefetch=4, planes_per_barrier=2, num_stages=2)):
        assert "planes_per_barrier" in ops.smem_ok(m, m, 8, bad)
    for bad in (2.0, True, "2"):
        assert "must be an int" in ops.smem_ok(m, m, 8, replace(base, prefetch=6, planes_per_barrier=bad))
    assert "ring of 16 planes" in ops.smem_ok(m, m, 8, replace(base, prefetch=12, planes_per_barrier=4))


def test_store_ptx():
    """The ring's stores (``kernels.stencil_smem._store_ptx``): a predicated vector store, and with a bit mask the
    vector at once when every bit is set, else element by element (the PTX the kernels carried as literals before
    2026-11-29, for which the GPU tests passed; the generated code was compared equal, debug info aside)."""
    from tilecraft.kernels.stencil_smem import _store_ptx

    assert _store_ptx("f32", 4, False) == (
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.cs.v4.f32 [$1], {$3, $4, $5, $6}; mov.u32 $0, 0; }",
        "=r,l,r,f,f,f,f")
    assert _store_ptx("f64", 2, True) == (
        "{ .reg .pred f, q; .reg .b32 t; setp.eq.b32 f, $2, 3; @f st.global.cs.v2.f64 [$1], {$3, $4}; "
        "and.b32 t, $2, 1; setp.ne.and.b32 q, t, 0, !f; @q st.global.cs.f64 [$1], $3; "
        "and.b32 t, $2, 2; setp.ne.and.b32 q, t, 0, !f; @q st.global.cs.f64 [$1+8], $4; mov.u32 $0, 0; }",
        "=r,l,r,d,d")
    ptx, cons = _store_ptx("f32", 4, True)
    assert "setp.eq.b32 f, $2, 15;" in ptx and "@q st.global.cs.f32 [$1+12], $6;" in ptx and cons.endswith("f,f,f,f")
    assert _store_ptx("f64", 1, True)[0] == _store_ptx("f64", 1, False)[0] == (
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p st.global.cs.f64 [$1], $3; mov.u32 $0, 0; }")


def test_fp64_order8_long_marches_meet_a_barrier_every_second_plane():
    """``smem_march`` (fp64 order 8) where ``ring_block_z`` gives 512 planes: a CTA barrier every second plane, 6
    ahead, no mbarriers (8 slots, 128 KB); shorter marches keep the mbarrier ring, which the tuner also times
    beside the long marches' form."""
    from tilecraft.tuning import stencil as ts

    long = ops.smem_march(torch.float64, 4, (520, 520, 520))
    assert (long.block_z, long.planes_per_barrier, long.prefetch, long.num_stages) == (512, 2, 6, 0)
    assert ops.smem_slots(long) == 8
    m = _meta((520, 520, 520), torch.float64)
    assert ops.smem_ok(m, m, 8, long) is None
    short = ops.smem_march(torch.float64, 4, (264, 520, 520))
    assert short.block_z == 256 and short.planes_per_barrier == 1 and short.num_stages == 2
    assert ops.smem_march(torch.float32, 4, (520, 520, 520)).planes_per_barrier == 1
    cands = ts.candidates(torch.float64, 8, (520, 520, 520), 60 * 2**20, True, True, smem=True)
    assert cands[0] == long
    assert replace(long, num_stages=2, prefetch=5, planes_per_barrier=1) in cands


def _half(shape, dtype=torch.float32, pad=0):
    nz, ny, nx = shape
    row = nx + pad
    return torch.empty_strided(shape, (ny * row, row, 1), dtype=dtype, device="meta")


def test_half_aligned_rows_take_the_8_byte_ring():
    """Rows of whole 8-byte vectors that are not 16-byte ones (fp32 nx = 2 mod 4, fp64 odd nx): ``half_aligned``, and
    the ring with 8-byte copies where a thread computes an 8-byte vector (2026-12-01)."""
    u = _half((40, 40, 514))
    assert ops.half_aligned(u, u) and not ops.vector_aligned(u, u)
    assert not ops.half_aligned(_half((40, 40, 516)), _half((40, 40, 516)))  # 16-byte rows: aligned
    assert not ops.half_aligned(_half((40, 40, 515)), _half((40, 40, 515)))  # odd fp32 rows: neither
    assert ops.half_aligned(_half((40, 40, 513), torch.float64), _half((40, 40, 513), torch.float64))
    assert ops.half_aligned(_half((40, 40, 512), pad=2), _half((40, 40, 512), pad=2))  # a stride of 2 mod 4
    for dtype, nx in [(torch.float32, 514), (torch.float64, 515)]:
        for order in (2, 4, 6, 8, 10, 12, 14, 16):
            shape = (64 + order, 80, nx)
            cfg = ops.auto_config(dtype, order, shape, L2, False, True, smem=True, half_aligned=True)
            assert cfg == ops.half_ring(dtype, order // 2, shape) and cfg.kernel == "smem"
            assert cfg.vec * torch.finfo(dtype).bits // 8 == 8
            m = _half(shape, dtype)
            assert ops.smem_ok(m, m, order, cfg) is None and ops.launch_error(m, m, order, cfg) is None
            assert ops.auto_config(dtype, order, shape, L2, False, True, half_aligned=True).kernel != "smem"  # not sm90
            cands = ts.candidates(dtype, order, shape, L2, False, True, smem=True, half_aligned=True)
            assert cands[0] == cfg and len(cands) >= 4 and ops.auto_config(dtype, order, shape, L2, False, True) in cands
    sixteen = ops.smem_march(torch.float32, 3)  # a 16-byte vector a thread: not on 8-byte rows
    assert "8 bytes" in ops.smem_ok(u, u, 6, sixteen)
    odd = _half((40, 40, 515))
    assert "vec=1, got vec 2" in ops.smem_ok(odd, odd, 2, ops.half_ring(torch.float32, 1))
    assert "16 bytes" in ops.smem_ok(u, u, 8, replace(ops.half_ring(torch.float32, 4)), wave=True)
    assert ts.shape_key(torch.float32, 2, (40, 40, 514), False, True, "sm90", ops.half_ring(torch.float32, 1),
                        True).split("/")[4] == "half-flat"


@pytest.mark.parametrize("dtype,order,nx", [(torch.float32, 2, 514), (torch.float32, 8, 522), (torch.float32, 14, 526),
                                            (torch.float64, 4, 517), (torch.float64, 12, 525)])
def test_8_byte_ring_cross_compiles_for_sm90(dtype, order, nx):
    shape = (64 + order, 100, nx)
    cfg = ops.half_ring(dtype, order // 2, shape)
    m = _half(shape, dtype)
    k = ops.launch_plan(m, m, order, (1.0, 1.0, 1.0), cfg)[0]
    assert k.constexprs["VEC"] == 8 // (torch.finfo(dtype).bits // 8) and k.constexprs["CV"] == 0
    res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    assert res.spills == 0 and res.registers <= 128 * 16 // cfg.num_warps, (res.registers, res.spills)
    c = res.census
    assert c.get("sass:LDGSTS", 0) > 0 and c.get("sass_shared_load_64b", 0) > 0
    assert c.get("sass_global_store_64b", 0) > 0 and c.get("sass_global_store_128b", 0) == 0


def test_odd_fp32_rows_take_the_4_byte_ring():
    """fp32 rows that are not whole 8-byte vectors (odd nx or an odd stride): ``word_ring``, 4-byte copies and one
    element a thread in 32-column tiles (2026-12-01), the heuristic on sm90 since its GPU tests passed (thirty-third
    session), the paths it replaced among the tuner's candidates; 8-byte vectors a thread are refused there, the wave
    step never takes it."""
    u = _half((40, 40, 515))
    assert not ops.half_aligned(u, u) and not ops.vector_aligned(u, u)
    for order in (2, 4, 6, 8, 10, 12, 14, 16):
        shape = (64 + order, 80, 513 + order)
        cfg = ops.word_ring(order // 2)
        assert (cfg.vec, cfg.block_x) == (1, 32)
        m = _half(shape)
        assert ops.smem_ok(m, m, order, cfg) is None and ops.launch_plan(m, m, order, (1.0,) * 3, cfg)[0].constexprs["VEC"] == 1
        heuristic = ops.auto_config(torch.float32, order, shape, L2, False, True, smem=True)
        assert heuristic == cfg
        cands = ts.candidates(torch.float32, order, shape, L2, False, True, smem=True)
        assert cands[0] == heuristic and sum(c.kernel == "smem" for c in cands) >= 3
        assert ops.auto_config(torch.float32, order, shape, L2, False, True) in cands  # the path before
        assert all(c.kernel != "smem" for c in ts.candidates(torch.float32, order, shape, L2, False, True))
    assert "vec=1, got vec 2" in ops.smem_ok(u, u, 8, ops.half_ring(torch.float32, 4))  # vec=2 on odd rows
    assert "16 bytes" in ops.smem_ok(u, u, 8, ops.word_ring(4), wave=True)
    assert ops.smem_ok(_half((40, 40, 514)), _half((40, 40, 514)), 8, ops.word_ring(4)) is not None  # 8-byte rows: vec 2


@pytest.mark.parametrize("order", [2, 12, 16])
def test_4_byte_ring_cross_compiles_for_sm90(order):
    shape = (64 + order, 100, 513 + order)
    cfg = ops.word_ring(order // 2)
    m = _half(shape)
    k = ops.launch_plan(m, m, order, (1.0, 1.0, 1.0), cfg)[0]
    res = cross_compile("tilecraft.kernels.stencil_smem", k.kernel.__name__, ops.compile_signature(k), k.constexprs,
                        "sm90", num_warps=cfg.num_warps)
    assert res.error is None, res.error
    assert res.spills == 0, res.spills  # (orders 6 and 8 spill 16-24 bytes at 64 registers: measured so, 40% of copy)
    c = res.census
    assert c.get("sass:LDGSTS", 0) > 0 and c.get("sass_global_store_32b", 0) > 0
    assert c.get("sass_global_store_64b", 0) == c.get("sass_global_store_128b", 0) == 0


@pytest.mark.parametrize("dtype,nx,pad,offset", [(torch.float64, 512, 1, 0), (torch.float32, 512, 2, 0),
                                                 (torch.float64, 512, 0, 1), (torch.float32, 512, 0, 2)])
def test_8_byte_rows_from_a_stride_or_the_pointer(dtype, nx, pad, offset):
    """Rows of 8-byte vectors whose nx is a whole number of 16-byte vectors (a stride or the pointer breaks the 16
    bytes): the tuner's model tensors keep the class and every candidate launches on such tensors (a bug hunt found
    ``model_tensors`` raising there, 2026-12-01)."""
    ny, nz = 40, 40
    row = nx + pad
    base = torch.empty(nz * ny * row + offset, dtype=dtype, device="meta")
    u = base[offset:].as_strided((nz, ny, nx), (ny * row, row, 1))
    # meta tensors' pointers read 0: the offset reaches the pointer only through the storage offset
    if offset:
        assert u.storage_offset() == offset
    m_u, _ = ts.model_tensors(dtype, (nz, ny, nx), False, False, True)
    assert ops.half_aligned(m_u, m_u) and not ops.vector_aligned(m_u, m_u)
    for order in (2, 8, 16):
        cands = ts.candidates(dtype, order, (nz, ny, nx), L2, False, False, smem=True, half_aligned=True)
        assert cands[0] == ops.half_ring(dtype, order // 2, (nz, ny, nx))
        assert all(ops.launch_error(m_u, m_u, order, c) is None for c in cands)
