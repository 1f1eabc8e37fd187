"""``ops.launch.ReplayCache``: an eager call whose tensors have the layouts of an earlier call's runs
that call's recorded launches again, without planning, and gets what planning would have given.
Outputs are poisoned (NaN) before every call, so an element a replay leaves unwritten fails."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tilecraft
from tilecraft.ops import attention as attn_ops
from tilecraft.ops import gemm as gemm_ops
from tilecraft.ops import launch
from tilecraft.ops.launch import REPLAY_ENV, ReplayCache, empty, run_kernel, run_op

pytestmark = pytest.mark.skipif(not gemm_ops.triton_on_cpu(), reason="needs TRITON_INTERPRET=1 (the kernels on CPU)")


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, sx, alpha, BLOCK: tl.constexpr, TWICE: tl.constexpr = False):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    r = alpha * tl.load(x_ptr + i * sx, mask=m) + tl.load(y_ptr + i, mask=m)
    if TWICE:
        r = r * 2
    tl.store(out_ptr + i, r, mask=m)


def _plan(x, y, out, scratch_maker=None):
    """Two launches: scratch = 3 x[1::2] + y (a view of a slot, a fresh scratch), out = 2 (scratch + y)
    (a defaulted constexpr given by keyword)."""
    n = y.numel()
    xv = x[1::2]
    scratch = (scratch_maker or empty)((n,), dtype=y.dtype, device=y.device)
    run_kernel(_axpy, (triton.cdiv(n, 32),), xv, y, scratch, n, xv.stride(0), 3.0, BLOCK=32)
    run_kernel(_axpy, (triton.cdiv(n, 32),), scratch, y, out, n, 1, 1.0, BLOCK=32, TWICE=True)


def _expected(x, y):
    return 2 * (3 * x[1::2] + y + y)


def _call(cache, x, y, key="k", scratch_maker=None):
    out = torch.full_like(y, float("nan"))
    slots = (x, y, out)
    if not cache.run(key, slots):
        with cache.record(key, slots):
            _plan(x, y, out, scratch_maker)
    return out


def test_replay_gives_the_planned_result_on_new_tensors():
    cache = ReplayCache()
    x, y = torch.randn(2 * 37), torch.randn(37)
    torch.testing.assert_close(_call(cache, x, y), _expected(x, y))
    assert cache._entries["k"] is launch._SEEN  # a key seen once is only noted
    torch.testing.assert_close(_call(cache, x, y), _expected(x, y))  # the second call records
    assert isinstance(cache._entries["k"], launch.Replay)
    for _ in range(3):  # new data, same layouts: the recorded launches, nothing planned
        x, y = torch.randn(2 * 37), torch.randn(37)
        out = torch.full_like(y, float("nan"))
        assert cache.run("k", (x, y, out))
        torch.testing.assert_close(out, _expected(x, y))


def test_a_view_is_rebuilt_on_the_new_slot():
    cache = ReplayCache()
    big = torch.randn(3, 2 * 29)
    x, y = big[1], torch.randn(29)  # a slot that is itself a view with an offset
    for _ in range(2):
        torch.testing.assert_close(_call(cache, x, y), _expected(x, y))
    big2 = torch.randn(3, 2 * 29)
    x2, y2 = big2[2], torch.randn(29)
    out = torch.full_like(y2, float("nan"))
    assert cache.run("k", (x2, y2, out))
    torch.testing.assert_close(out, _expected(x2, y2))


def test_a_zeroed_buffer_is_not_replayed():
    cache = ReplayCache()
    x, y = torch.randn(40), torch.randn(20)
    for _ in range(2):
        torch.testing.assert_close(_call(cache, x, y, scratch_maker=torch.zeros), _expected(x, y))
    assert "no slot" in cache.why("k")
    assert not cache.run("k", (x, y, torch.empty_like(y)))
    torch.testing.assert_close(_call(cache, x, y, scratch_maker=torch.zeros), _expected(x, y))  # planned again


def test_one_tensor_in_two_slots_is_not_recorded():
    cache = ReplayCache()
    x = torch.randn(40)
    y = x[:20]  # y's storage is x's: a view of it could come from either slot
    for _ in range(2):
        torch.testing.assert_close(_call(cache, x, y), _expected(x, y))
    assert cache._entries["k"] is launch._SEEN and cache.why("k") is None  # recorded by a later call
    x, y = torch.randn(40), torch.randn(20)
    _call(cache, x, y)
    assert isinstance(cache._entries["k"], launch.Replay)


def test_an_inner_recording_shows_its_launches_to_the_outer_one():
    outer, inner = ReplayCache(), ReplayCache()
    x, y = torch.randn(40), torch.randn(20)
    out = torch.full_like(y, float("nan"))
    for _ in range(2):
        with outer.record("o", (x, y, out)):
            with inner.record("i", (x, y, out)):
                _plan(x, y, out)
            run_kernel(_axpy, (1,), out, y, out, 20, 1, 1.0, BLOCK=32)
    assert len(inner._entries["i"].steps) == 2 and len(outer._entries["o"].steps) == 3
    x2, y2 = torch.randn(40), torch.randn(20)
    out2 = torch.full_like(y2, float("nan"))
    assert outer.run("o", (x2, y2, out2))
    torch.testing.assert_close(out2, _expected(x2, y2) + y2)


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.fixture
def poisoned_gemm(monkeypatch):
    real = gemm_ops._new_output
    monkeypatch.setattr(gemm_ops, "_new_output", lambda spec, device: real(spec, device).fill_(float("nan")))
    gemm_ops._REPLAYS.clear()
    yield
    gemm_ops._REPLAYS.clear()


@pytest.mark.parametrize("case", ["NN", "NT", "batched", "epilogue", "odd"])
def test_matmul_replays_its_launches(monkeypatch, poisoned_gemm, case):
    plans = _counting(monkeypatch, gemm_ops, "launch_plan")
    m, n, k = (1, 7, 33) if case == "odd" else (20, 24, 40)

    def operands():
        a = torch.randn(3, m, k) if case == "batched" else torch.randn(m, k)
        b = torch.randn(n, k).t() if case == "NT" else torch.randn(k, n)
        return a, b

    kw = {}
    results = []
    for _ in range(4):
        a, b = operands()
        if case == "epilogue":
            kw = {"c": torch.randn(m, n), "beta": 0.5, "alpha": 2.0, "bias": torch.randn(n), "activation": "relu"}
        y = tilecraft.matmul(a, b, **kw)
        ref = torch.matmul(a.double(), b.double())
        if case == "epilogue":
            ref = torch.relu(2.0 * ref + 0.5 * kw["c"].double() + kw["bias"].double())
        results.append(float((y.double() - ref).abs().max()))
    assert max(results) < 1e-3, results
    assert len(plans) == 2  # noted, recorded, replayed twice


def test_matmul_replay_can_be_switched_off_and_keys_on_the_settings(monkeypatch, poisoned_gemm):
    plans = _counting(monkeypatch, gemm_ops, "launch_plan")
    a, b = torch.randn(9, 16), torch.randn(16, 8)
    monkeypatch.setenv(REPLAY_ENV, "0")
    tilecraft.matmul(a, b)
    tilecraft.matmul(a, b)
    assert len(plans) == 2 and not gemm_ops._REPLAYS._entries
    monkeypatch.delenv(REPLAY_ENV)
    for _ in range(3):
        tilecraft.matmul(a, b)
    assert len(plans) == 4
    monkeypatch.setenv("TILECRAFT_PDL", "off")  # another setting the plan reads: planned afresh
    for _ in range(2):
        y = tilecraft.matmul(a, b)
    assert len(plans) == 6
    torch.testing.assert_close(y, a @ b)
    unaligned = torch.randn(9 * 16 + 1)[1:].view(9, 16)  # 4 bytes off 16: another key
    y = tilecraft.matmul(unaligned, b)
    assert len(plans) == 7
    torch.testing.assert_close(y, unaligned @ b)


@pytest.fixture
def poisoned_attention(monkeypatch):
    real = attn_ops._fwd_outputs

    def poisoned(q, p):
        out, lse = real(q, p)
        return out.fill_(float("nan")), lse.fill_(float("nan"))
    monkeypatch.setattr(attn_ops, "_fwd_outputs", poisoned)
    attn_ops._REPLAYS.clear()
    yield
    attn_ops._REPLAYS.clear()


@pytest.mark.parametrize("case", ["prefill", "causal_gqa", "decode"])
def test_attention_replays_its_launches(monkeypatch, poisoned_attention, case):
    launches = _counting(monkeypatch, attn_ops, "launch_decode" if case == "decode" else "launch_fwd")
    monkeypatch.setattr(attn_ops, "DECODE_MIN_KEYS", 256)
    h, h_kv, s_q, s_k = {"prefill": (2, 2, 17, 17), "causal_gqa": (4, 2, 20, 33), "decode": (4, 2, 1, 300)}[case]
    for _ in range(3):
        q = torch.randn(1, h, s_q, 16, dtype=torch.float16)
        k, v = (torch.randn(1, h_kv, s_k, 16, dtype=torch.float16) for _ in range(2))
        out, lse = tilecraft.attention(q, k, v, causal=case == "causal_gqa", return_lse=True)
        ref, ref_lse = tilecraft.reference.attention.attention_reference(
            q.double(), k.double(), v.double(), causal=case == "causal_gqa")
        assert (out.double() - ref).abs().max() < 2e-3
        assert (lse.double() - ref_lse).abs().max() < 1e-3
    assert len(launches) == 2


class _FakeCompiled:
    """Stands for Triton's CompiledKernel: ``compiled[grid](*args)`` with three grid extents and every
    parameter in the kernel's order, as ``triton.compiler.CompiledKernel.__getitem__``'s runner takes them."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        assert len(grid) == 3, grid
        return lambda *args: self.calls.append((grid, args))


class _FakeLauncher(_FakeCompiled):
    """Also Triton's ``CompiledKernel.run`` (its launcher): grid extents, stream, function, packed metadata, launch
    metadata and the two hooks, then every parameter."""

    function, packed_metadata = "fn", ("meta",)

    def run(self, *args):
        self.calls.append(("run", args))


def test_a_gpu_replay_calls_the_launcher_on_the_current_stream(monkeypatch):
    """On a CUDA device (index given) with Triton's launch hooks empty, a replay calls each compiled kernel's launcher
    itself with the stream looked up once (Triton's runner looks up the device and stream per launch); with a hook
    set it goes through ``compiled[grid]`` as before."""
    from triton import knobs
    from triton.runtime.jit import JITFunction

    def kern(x_ptr, n, BLOCK: tl.constexpr):
        pass

    fake = _FakeLauncher()
    x = torch.randn(8)
    replay = launch.Replay([(JITFunction(kern), (2,), (x, 8), {"BLOCK": 4}, fake)], (x,), [])
    monkeypatch.setattr(launch, "_RAW_STREAM", lambda index: 1000 + index)
    x2 = torch.randn(8)
    replay._run((x2,), 3)
    ((tag, args),) = fake.calls
    assert tag == "run" and args[:9] == (2, 1, 1, 1003, "fn", ("meta",), None, None, None)
    assert args[9] is x2 and args[10:] == (8, 4)
    fake.calls.clear()
    knobs.runtime.launch_enter_hook.add(print)
    try:
        replay._run((x2,), 3)
    finally:
        knobs.runtime.launch_enter_hook.remove(print)
    ((grid, args),) = fake.calls
    assert grid == (2, 1, 1) and args[0] is x2


def test_the_gpu_replay_passes_every_parameter_in_order_and_three_grid_extents():
    from triton.runtime.jit import JITFunction

    def kern(x_ptr, y_ptr, out_ptr, n, sx, alpha, BLOCK: tl.constexpr, TWICE: tl.constexpr = False):
        pass
    jit = JITFunction(kern)  # the compiled form's parameter list (the interpreter's function has none)
    x, y = torch.randn(40), torch.randn(20)
    out = torch.empty_like(y)
    fake = _FakeCompiled()
    scratch = torch.empty(20)
    launches = [(jit, (2,), (x[1::2], y, scratch, 20, 2), {"alpha": 3.0, "BLOCK": 32, "num_warps": 4}, fake),
                (jit, (2, 1), (scratch, y, out, 20, 1, 1.0), {"BLOCK": 32, "TWICE": True}, fake)]
    replay = launch.Replay(launches, (x, y, out), [scratch])
    x2, y2 = torch.randn(40), torch.randn(20)
    out2 = torch.empty_like(y2)
    replay.run((x2, y2, out2))
    (g1, a1), (g2, a2) = fake.calls
    assert g1 == (2, 1, 1) and g2 == (2, 1, 1)
    assert len(a1) == len(a2) == 8  # num_warps is an option, not a parameter
    assert torch.equal(a1[0], x2[1::2]) and a1[0].data_ptr() == x2[1::2].data_ptr() and a1[1] is y2
    assert a1[3:] == (20, 2, 3.0, 32, False)  # TWICE's default filled in
    fresh = a1[2]
    assert fresh is not scratch and fresh.shape == (20,) and a2[0] is fresh  # one fresh scratch for both
    assert a2[2] is out2 and a2[3:] == (20, 1, 1.0, 32, True)


def test_a_replay_keeps_no_tensor_of_the_recorded_call_alive():
    import gc
    import weakref

    cache = ReplayCache()
    x, y = torch.randn(40), torch.randn(20)
    _call(cache, x, y)
    out = _call(cache, x, y)
    refs = [weakref.ref(t) for t in (x, y, out)]
    del x, y, out
    gc.collect()
    assert all(r() is None for r in refs)
    assert isinstance(cache._entries["k"], launch.Replay)


def test_a_descriptor_is_rebuilt_on_the_new_base():
    from triton.tools.tensor_descriptor import TensorDescriptor

    class _Rec:
        def __getitem__(self, grid):
            return lambda *args: seen.append(args)
    seen = []
    from triton.runtime.jit import JITFunction

    def kern(desc, n, BLOCK: tl.constexpr):
        pass
    x = torch.randn(64, 32)
    d = TensorDescriptor.from_tensor(x, [16, 32])
    replay = launch.Replay([(JITFunction(kern), (1,), (d, 64), {"BLOCK": 16}, _Rec())], (x,), [])
    del d
    x2 = torch.randn(64, 32)
    replay.run((x2,))
    d2 = seen[0][0]
    assert type(d2) is TensorDescriptor and d2.base is x2 and list(d2.shape) == [64, 32]
    assert list(d2.block_shape) == [16, 32] and seen[0][1:] == (64, 16)


@pytest.mark.parametrize("order,dtype,given_out", [(2, torch.float64, False), (8, torch.float32, True)])
def test_laplacian_replays_its_launches(monkeypatch, order, dtype, given_out):
    from tilecraft.ops import stencil as stencil_ops
    from tilecraft.reference.stencil import laplacian_torch

    launches = _counting(monkeypatch, stencil_ops, "launch")
    for _ in range(3):
        u = torch.randn(13, 11, 20, dtype=dtype)
        out = torch.full_like(u, float("nan")) if given_out else None
        got = tilecraft.laplacian(u, order=order, spacing=(0.5, 1.0, 2.0), out=out)
        ref = laplacian_torch(u.double(), order, (0.5, 1.0, 2.0))
        r = order // 2
        inner = (slice(r, -r),) * 3
        torch.testing.assert_close(got[inner].double(), ref[inner], rtol=1e-5, atol=1e-5)
        if given_out:
            assert torch.isnan(got[:r]).all()  # the boundary is left untouched
    assert len(launches) == 2
    tilecraft.laplacian(u, order=order, spacing=(0.5, 1.0, 1.0), out=out)  # another spacing: planned again
    assert len(launches) == 3


def test_a_constant_tensor_and_its_descriptor_pass_as_they_are():
    from triton.runtime.jit import JITFunction
    from triton.tools.tensor_descriptor import TensorDescriptor

    seen = []

    class _Rec:
        def __getitem__(self, grid):
            return lambda *args: seen.append(args)

    def kern(x_ptr, w_ptr, w_desc, n):
        pass
    x = torch.randn(8)
    w = launch.constant(torch.randn(16, 16))
    d = TensorDescriptor.from_tensor(w, [16, 16])
    replay = launch.Replay([(JITFunction(kern), (1,), (x, w, d, 8), {}, _Rec())], (x,), [])
    x2 = torch.randn(8)
    replay.run((x2,))
    assert seen[0][0] is x2 and seen[0][1] is w and seen[0][2] is d and seen[0][3] == 8


@pytest.fixture
def poisoned_backward(monkeypatch):
    """dq, dk, dv and the delta scratch of the backward poisoned with NaN."""
    real_empty_like, real_empty = torch.empty_like, launch.empty

    def empty_like(t, *a, **kw):
        r = real_empty_like(t, *a, **kw)
        return r.fill_(float("nan")) if r.is_floating_point() else r

    def empty(*a, **kw):
        return real_empty(*a, **kw).fill_(float("nan"))
    monkeypatch.setattr(attn_ops.torch, "empty_like", empty_like)
    monkeypatch.setattr(attn_ops, "empty", empty)
    attn_ops._BWD_REPLAYS.clear()
    yield
    attn_ops._BWD_REPLAYS.clear()


@pytest.mark.parametrize("case", ["det", "atomic", "lse", "gqa_causal"])
def test_attention_backward_replays_its_launches(monkeypatch, poisoned_backward, case):
    """Planned twice, then replayed: the gradients of every call agree with float64 and, on the same
    inputs, with the planned call's bits (the delta's dlse term, the atomic path's zeroed fp32 dQ
    accumulator and its copy into dq are replayed steps)."""
    launches = _counting(monkeypatch, attn_ops, "launch_bwd")
    h, h_kv, s, causal = (4, 2, 21, True) if case == "gqa_causal" else (2, 2, 17, False)
    deterministic = case != "atomic"
    g = torch.Generator().manual_seed(11)
    first = None
    for i in range(4):
        q = torch.randn(1, h, s, 16, generator=g).to(torch.float16)
        k, v = (torch.randn(1, h_kv, s, 16, generator=g).to(torch.float16) for _ in range(2))
        do = torch.randn(1, h, s, 16, generator=g).to(torch.float16)
        dlse = torch.randn(1, h, s, generator=g) if case == "lse" else None
        if i == 3:  # the first call's inputs again: the replay gives the planned bits
            q, k, v, do, dlse = first[0]
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out, lse = tilecraft.attention(*leaves, causal=causal, return_lse=True, deterministic=deterministic)
        grads = torch.autograd.grad((out, lse) if dlse is not None else (out,), leaves,
                                    (do, dlse) if dlse is not None else (do,))
        ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
        ref_out, ref_lse = tilecraft.reference.attention.attention_reference(*ref_leaves, causal=causal)
        ref = torch.autograd.grad((ref_out, ref_lse) if dlse is not None else (ref_out,), ref_leaves,
                                  (do.double(), dlse.double()) if dlse is not None else (do.double(),))
        for a, r in zip(grads, ref):
            assert not torch.isnan(a).any()
            assert (a.double() - r).abs().max() < 2e-2 * max(1.0, r.abs().max().item())
        if i == 0:
            first = ((q, k, v, do, dlse), grads)
    assert len(launches) == 2
    assert all(torch.equal(a, b) for a, b in zip(grads, first[1]))


class CudaLauncher:
    """Stands for Triton 3.6's ``CudaLauncher`` (``CompiledKernel.run``): its ``launch`` wraps the generated C entry
    point in a closure over ``launcher``, ``tensordesc_indices`` and ``tensordesc_meta``
    (``wrap_handle_tensordesc``)."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self, indices, metas):
        self.calls = []
        launcher, tensordesc_indices, tensordesc_meta = self.record, set(indices), list(metas)

        def inner(*args):  # Triton's per-launch path, which the lean replay must not take
            raise AssertionError((launcher, tensordesc_indices, tensordesc_meta))
        self.launch = inner

    def record(self, *args):
        self.calls.append(args)

    def __call__(self, *args):
        raise AssertionError("the lean replay calls the C entry point, not the launcher")


class _LeanCompiled:
    function, packed_metadata = 77, ("meta",)

    def __init__(self, run):
        self.run = run


def test_a_lean_replay_passes_addresses_and_encodes_each_descriptor_once_per_address(monkeypatch):
    """The lean GPU replay (``launch._lean_step``): the C entry point gets the grid, the current stream, the launch
    flags and the packed metadata, then every parameter: a tensor as its address (a view's: the root's plus its
    offset), a TMA descriptor as the map encoded for its base's address followed by its shape and strides, and the
    constants. A map is encoded once per address and kept."""
    from triton.backends.nvidia import driver as nv
    from triton.runtime.jit import JITFunction
    from triton.tools.tensor_descriptor import TensorDescriptor

    encoded = []

    def fake_encode(desc, meta):
        encoded.append(desc.base.data_ptr())
        return [("map", desc.base.data_ptr(), meta), *desc.shape, *desc.strides]
    monkeypatch.setattr(nv, "make_tensordesc_arg", fake_encode)
    monkeypatch.setattr(launch, "_RAW_STREAM", lambda index: 1000 + index)

    def kern(x_ptr, a_desc, out_ptr, n, BLOCK: tl.constexpr):
        pass
    run = CudaLauncher([1], ["meta-a"])
    x, a, out = torch.randn(40), torch.randn(64, 32), torch.empty(20)
    launches = [(JITFunction(kern), (3,), (x[4:24], TensorDescriptor.from_tensor(a, [16, 32]), out, 20),
                 {"BLOCK": 32}, _LeanCompiled(run))]
    replay = launch.Replay(launches, (x, a, out), [])
    assert replay.lean is not None and encoded == [a.data_ptr()]
    x2, a2, out2 = torch.randn(40), torch.randn(64, 32), torch.empty(20)
    for _ in range(2):
        replay._run((x2, a2, out2), 2)
    assert encoded == [a.data_ptr(), a2.data_ptr()]  # the second replay kept the map
    assert len(run.calls) == 2
    for args in run.calls:
        assert args[:13] == (3, 1, 1, 1002, 77, False, True, None, None, ("meta",), None, None, None)
        assert args[13] == x2.data_ptr() + 4 * 4 and args[14] == ("map", a2.data_ptr(), "meta-a")
        assert args[15:] == (64, 32, 32, 1, out2.data_ptr(), 20, 32)
    monkeypatch.setattr(launch, "LEAN", False)
    with pytest.raises(AssertionError, match="the lean replay calls the C entry point"):
        replay._run((x2, a2, out2), 2)  # off: through CompiledKernel.run as before


def test_no_lean_replay_for_scratch_memory_or_a_decomposed_descriptor(monkeypatch):
    """Kernels whose launcher allocates scratch per launch, or takes a descriptor as pointer, shape and strides
    (tensordesc metadata None), replay through ``CompiledKernel.run``."""
    from triton.backends.nvidia import driver as nv
    from triton.runtime.jit import JITFunction
    from triton.tools.tensor_descriptor import TensorDescriptor

    def kern(a_desc, n):
        pass
    monkeypatch.setattr(nv, "make_tensordesc_arg", lambda desc, meta: [("map", meta), *desc.shape, *desc.strides])
    a = torch.randn(64, 32)
    scratch = CudaLauncher([0], ["meta"])
    scratch.global_scratch_size = 256
    for run in (CudaLauncher([0], [None]), scratch):
        launches = [(JITFunction(kern), (1,), (TensorDescriptor.from_tensor(a, [16, 32]), 64), {}, _LeanCompiled(run))]
        assert launch.Replay(launches, (a,), []).lean is None
    assert launch.Replay([(JITFunction(kern), (1,), (TensorDescriptor.from_tensor(a, [16, 32]), 64), {},
                           _LeanCompiled(CudaLauncher([0], ["meta"])))], (a,), []).lean is not None


@pytest.mark.parametrize("name", ["TILECRAFT_PDL", "TILECRAFT_PDL_AT", "TILECRAFT_GEMM_CLUSTER", "TILECRAFT_TUNE",
                                  "TILECRAFT_CACHE"])
def test_every_setting_a_gemm_plan_reads_is_in_its_replay_key(monkeypatch, name):
    """The key reads the settings from ``os.environ``'s own dictionary (``launch.environ_key``); a setting changed
    at run time (as ``monkeypatch.setenv`` and ``os.environ[...] =`` do) changes the key, so the call plans afresh."""
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    spec = gemm_ops.validate(a, b)
    monkeypatch.delenv(name, raising=False)
    before = gemm_ops.replay_key(a, b, spec)
    monkeypatch.setenv(name, "0")
    after = gemm_ops.replay_key(a, b, spec)
    assert after != before and gemm_ops.replay_key(a, b, spec) == after
    monkeypatch.delenv(name)
    assert gemm_ops.replay_key(a, b, spec) == before


def test_replay_setting_is_read_as_before(monkeypatch):
    for value, on in (("0", False), (" OFF ", False), ("no", False), ("1", True), ("", True)):
        monkeypatch.setenv(REPLAY_ENV, value)
        assert launch.replay_enabled() is on
    monkeypatch.delenv(REPLAY_ENV)
    assert launch.replay_enabled()


@pytest.mark.parametrize("copy", ["kmajor-rows", "kmajor-cols", "keep-layout", "tf32-split"])
def test_an_operand_copy_made_by_the_plan_replays(copy):
    """The GEMM plans' aligned copies of an operand (rows the TMA cannot read) and the 3xTF32 split write fresh
    buffers only through recorded steps (``launch.empty``, ``run_op``, ``run_kernel``), so a call that copies
    replays: the replay makes the copy of the new operand. The copy reaches a slot here through one more step."""
    cache = ReplayCache()

    def plan(t, out):
        if copy == "tf32-split":
            hi, lo, k = gemm_ops.tf32_split(t, -1, block=(16, 16))
            k.run()
            run_op(torch.Tensor.copy_, out, hi)
            run_op(torch.Tensor.add_, out, lo)
            return
        if copy == "kmajor-rows":
            got = gemm_ops.aligned_kmajor_copy(t, -1)
        elif copy == "kmajor-cols":
            got = gemm_ops.aligned_kmajor_copy(t, -2)
        else:
            got = gemm_ops.aligned_copy(t, -1)
        assert got.data_ptr() != t.data_ptr()
        run_op(torch.Tensor.copy_, out, got)

    for i in range(4):
        t = torch.randn(37, 29) if copy != "kmajor-cols" else torch.randn(29, 37).t()
        out = torch.full_like(t, float("nan"))
        slots = (t, out)
        if not cache.run("k", slots):
            with cache.record("k", slots):
                plan(t, out)
        assert type(cache._entries["k"]) is launch.Replay or i == 0, cache.why("k")
        tol = 1e-6 if copy == "tf32-split" else 0
        torch.testing.assert_close(out, t, rtol=tol, atol=tol)
