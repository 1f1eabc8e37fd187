"""One kernel launch as data, shared by the ops' launchers (``ops.stencil``, ``ops.gemm``).

A launcher builds a list of :class:`KernelLaunch` (its ``launch_plan``) and runs it; the same list,
built on ``meta`` tensors, tells ``tilecraft inspect`` what to compile for a GPU that is not here
(each op's ``compile_signature`` turns the arguments into a Triton signature).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

__all__ = ["KernelLaunch", "PDL_ENV", "PDL_MODES", "PLAIN_TENSORS", "REPLAY_ENV", "Replay", "ReplayCache",
           "clear_replays", "constant", "device_capability", "eager_direct", "empty", "environ_key", "environ_names",
           "gluon_descriptor", "kernel_parameters", "launch_values", "pdl_active", "pdl_env", "pdl_mode",
           "remember", "replay_enabled", "run_kernel", "run_op", "runtime_arg_names", "signature", "with_pdl",
           "zeros", "cluster_smem_offsets", "run_cluster_kernel"]

#: ``TILECRAFT_PDL``: "0" (or "off") launches every kernel without programmatic dependent launch;
#: "early" lets the next kernel launch as soon as every program of a kernel has started, "late" once
#: every program has passed its main loop (:mod:`tilecraft.kernels.pdl`), for every launch of a kernel
#: that can; "auto" (the default, also "1") takes what the op chose for its plan (``with_pdl``'s
#: ``choice``: where it was measured to pay, see docs/gemm.md follow-up 18); "mid" once every program is
#: in the last steps of its main loop (the pointer GEMM kernel; "late" for the others).
PDL_ENV = "TILECRAFT_PDL"
PDL_MODES = {"0": 0, "off": 0, "early": 1, "late": 2, "mid": 3, "auto": -1, "1": -1}


@functools.lru_cache(maxsize=256)
def _nvmma_layout(block: tuple[int, ...], dtype: torch.dtype):
    from triton.experimental.gluon import language as gl

    gdt = {torch.int8: gl.int8, torch.float32: gl.float32, torch.int32: gl.int32, torch.bfloat16: gl.bfloat16,
           torch.float16: gl.float16}[dtype]
    return gl.NVMMASharedLayout.get_default_for(list(block), gdt)


def gluon_descriptor(t: torch.Tensor, shape: list[int], strides: list[int], block: list[int]):
    """A Gluon TMA descriptor of ``t`` whose shared-memory layout is the default NVMMA layout of the box
    (``NVMMASharedLayout.get_default_for``), computed once per box and dtype: building it was a tenth of
    a GEMM call's host time (H200 machine, 2026-11-27, ``benchmarks/host_profile.py``)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    return TensorDescriptor(t, shape, strides, block, _nvmma_layout(tuple(block), t.dtype))


def has_storage(t: torch.Tensor) -> bool:
    """Whether ``t`` has memory to inspect (addresses, alignment, overlaps): False while torch.compile traces,
    for fake and meta tensors, and for torch.func's wrappers (vmap, grad), whose data pointer cannot be read."""
    if torch.compiler.is_compiling():
        return False
    if type(t) is torch.Tensor or type(t) is torch.nn.Parameter:  # no subclass: not fake (the eager calls' case)
        return t.device.type != "meta" and not torch._C._functorch.is_functorch_wrapped_tensor(t)
    return t.device.type != "meta" and not torch._subclasses.fake_tensor.is_fake(t)


#: The tensor types whose facts an op's remembered validation may key on (no subclass: not fake, not traced)
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def remember(memo: dict, key, value, limit: int = 4096):
    """``memo[key] = value``, the whole memo forgotten first when it holds ``limit`` entries; returns ``value``.
    For the ops' remembered validations (``_validated``: successful checks only, keyed by what they read)."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value


def refuse_forward_ad(op: str, *tensors: object) -> None:
    """``RuntimeError`` where forward-mode AD would reach ``op``: a dual tensor (``torch.autograd.forward_ad``) or
    ``torch.func.jvp``. tilecraft's ops have no forward-mode formula, and torch drops the tangent of a custom op
    without one: a jvp through them came back zero or None, silently. Cheap when neither is in use."""
    from torch.autograd import forward_ad

    if forward_ad._current_level >= 0:
        for t in tensors:
            if isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None:
                raise RuntimeError(f"{op} has no forward-mode derivative (forward_ad dual tensors): the tangent "
                                   "would be dropped; use reverse mode (backward / torch.autograd.grad)")
    if torch._C._are_functorch_transforms_active():
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        interp = retrieve_current_functorch_interpreter()
        if interp is not None and interp.key() == torch._C._functorch.TransformType.Jvp:
            raise RuntimeError(f"{op} has no forward-mode derivative (torch.func.jvp / jacfwd): the tangent would be "
                               "dropped; use torch.func.vjp / jacrev or backward")


def eager_direct(*tensors: object, autograd: bool = False) -> bool:
    """Whether a public op may run its body directly instead of through its ``torch.library``
    registration (``torch.ops.tilecraft.*``): a plain eager call, where the registered op's dispatch
    only adds host time (``tilecraft.laplacian`` on a 128^3 grid: 201 us per call through the op
    against 49 us for its body, H200 machine, 2026-11-27, ``benchmarks/host_profile.py`` and
    ``benchmarks/host_overhead.py``).

    False, so the call goes through the op as before, while torch.compile traces, while a
    torch-function or dispatch mode or a functorch transform is active (fake tensors, flop counters,
    vmap), while the autograd profiler records (the op shows by name in its traces), when a tensor is
    a subclass (``nn.Parameter`` counts as plain), or when autograd must record the call (grad mode
    on and a tensor requires grad) unless ``autograd``: the caller records it itself (an eager
    ``torch.autograd.Function`` around the op's body, whose dispatch costs less than the registered
    op's). ``None`` entries are skipped."""
    if torch.compiler.is_compiling() or torch.autograd.profiler._is_profiler_enabled:
        return False
    if (torch._C._is_torch_function_mode_enabled() or torch._C._are_functorch_transforms_active()
            or _get_current_dispatch_mode() is not None):
        return False
    grad = torch.is_grad_enabled() and not autograd
    for t in tensors:
        if t is None:
            continue
        if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
            return False
        if grad and t.requires_grad:
            return False
    return True


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch of a configuration: what ``launch`` runs, and what ``compile_signature``
    turns into a signature for compiling the same kernel for another GPU."""

    kernel: object  # the @triton.jit function
    grid: tuple[int, ...]
    args: tuple  # runtime arguments, in the kernel's order
    constexprs: dict
    options: dict
    #: CTAs per cluster (sm90, along grid x: the launch runs ``grid[0] * cluster`` CTAs); 1: no cluster
    cluster: int = 1
    #: with ``cluster``: the names of the kernel's shared-memory allocations whose byte offsets from
    #: ``global_smem`` (:func:`cluster_smem_offsets`) the last ``len(smem)`` runtime arguments take
    smem: tuple[str, ...] = ()

    def run(self):
        """Launch it; Triton's compiled kernel (``n_regs``, ``n_spills``, ``metadata``) on a GPU."""
        if self.cluster > 1:
            return run_cluster_kernel(self)
        return run_kernel(self.kernel, self.grid, *self.args, **self.constexprs, **self.options)


def runtime_arg_names(k: KernelLaunch) -> list[str]:
    """The names of ``k.kernel``'s runtime arguments (those ``k.args`` holds, in order): every
    parameter except the constexprs, whether the launch gives them or leaves them at their defaults."""
    import inspect

    fn = getattr(k.kernel, "fn", k.kernel)
    while hasattr(fn, "fn"):  # the interpreter and Gluon wrap the Python function
        fn = fn.fn
    params = inspect.signature(fn).parameters
    return [n for n in k.kernel.arg_names
            if n not in k.constexprs and "constexpr" not in str(params[n].annotation)]


@functools.cache
def device_capability(index: int) -> tuple[int, int]:
    """``torch.cuda.get_device_capability`` of CUDA device ``index``, asked once."""
    import torch

    return torch.cuda.get_device_capability(index)


def pdl_mode(device, choice: str | None = None) -> int:
    """The ``PDL`` constexpr for a launch on ``device`` (:mod:`tilecraft.kernels.pdl`): 0 (off) except on
    CUDA GPUs of compute capability 9.0 and up, not under the interpreter; there ``TILECRAFT_PDL``
    ("auto" unless set: the op's ``choice``, "early" 1, "late" 2 or None 0; ``ValueError`` for a
    value that is not one of :data:`PDL_MODES`).

    Why a choice per plan (H100, docs/gemm.md follow-up 18): a program of the next kernel that
    launched early waits on an SM in ``griddepcontrol.wait``, and that wait is not free. Beside a
    memory-bound small-M product of about one program per SM, "early" hides the whole launch (bf16
    16 x 4096 x 4096: 82.8% of copy off, 87.0% early, 84.4% late); beside the same product on 256
    programs it cost a quarter (71.3% -> 53.4%), and beside a compute-bound FMA product whose reduce
    pass waited, a third (fp32 1000^3: 0.93x cuBLAS off, 0.70x early, 0.94x late)."""
    import torch

    value = os.environ.get(PDL_ENV, "auto").strip().lower()
    if value not in PDL_MODES:
        raise ValueError(f"{PDL_ENV}={value!r}: use one of {', '.join(PDL_MODES)}")
    if choice not in (None, "early", "late", "mid"):
        raise ValueError(f"PDL choice {choice!r}: use 'early', 'late', 'mid' or None")
    if PDL_MODES[value] == 0 or os.environ.get("TRITON_INTERPRET") == "1":
        return 0
    if device.type != "cuda" or torch.version.hip:
        return 0
    if device_capability(device.index if device.index is not None else torch.cuda.current_device()) < (9, 0):
        return 0
    if PDL_MODES[value] < 0:
        return PDL_MODES[choice] if choice else 0
    return PDL_MODES[value]


def pdl_active(device, choice: str | None = "late") -> bool:
    """Whether a plan with this ``choice`` launches on ``device`` with programmatic dependent launch."""
    return pdl_mode(device, choice) != 0


def with_pdl(plan: list[KernelLaunch], device, choice: str | None = None) -> list[KernelLaunch]:
    """``plan`` with programmatic dependent launch where :func:`pdl_mode` says so (``choice``: the op's
    "early", "late" or None for this plan): every launch of a kernel that takes a ``PDL`` constexpr
    (and so waits for the kernel ahead before it touches memory) gets that mode and Triton's
    ``launch_pdl`` option; the others launch as before."""
    mode = pdl_mode(device, choice)
    if not mode:
        return plan
    return [dataclasses.replace(k, constexprs={**k.constexprs, "PDL": mode},
                                options={**k.options, "launch_pdl": True})
            if "PDL" in getattr(k.kernel, "arg_names", ()) else k for k in plan]


def launch_values(kernel, args: list, const: dict, n: int) -> list:
    """The compiled launcher's arguments: the ``n`` positional ones, then every later parameter of the kernel's
    signature from ``const``, or its default where the call left it out (a constexpr with a default)."""
    fn = getattr(kernel, "fn", kernel)
    values = list(args)
    for name, default in kernel_parameters(fn)[n:]:
        if name in const:
            values.append(const[name])
        elif default is not inspect.Parameter.empty:
            values.append(default)
        else:
            raise TypeError(f"{fn.__name__}: no value for {name!r}")
    return values


@functools.lru_cache(maxsize=None)
def kernel_parameters(fn) -> tuple[tuple[str, object], ...]:
    """(name, default) of a kernel's parameters, made once per kernel: ``inspect.signature`` costs about
    50 us of CPU (measured on this machine for ``wave_layer_kernel``), and the wave step's launches need it
    at every launch, some 12 a step (2026-11-28: uncached, ``simulate`` ran 2.0-2.1 ms a step on an H200
    against 1.37 ms for the step's GPU work)."""
    return tuple((prm.name, prm.default) for prm in inspect.signature(fn).parameters.values())


# ----------------------------------------------------------------------------------------------
# Replaying an eager call's launches (host time per call)
# ----------------------------------------------------------------------------------------------
#: ``TILECRAFT_REPLAY=0`` turns the replay of recorded launches off (every call plans its launches
#: afresh, as before 2026-11-29); anything else, or unset, leaves it on.
REPLAY_ENV = "TILECRAFT_REPLAY"
_TLS = threading.local()
_OP = object()  # the "grid" of a recorded host-side step (run_op)


#: ``os.environ``'s own dictionary on POSIX (encoded names and values), read directly by :func:`environ_key`:
#: ``os.environ.get`` encodes the name and decodes the value, 0.3-0.6 us a read, and an eager call's replay key
#: read six settings (CPU machine, 2026-12-01)
_ENVIRON = getattr(os.environ, "_data", None) if os.name == "posix" else None
if not isinstance(_ENVIRON, dict):
    _ENVIRON = None


def environ_names(*names: str) -> tuple:
    """``names`` as :func:`environ_key` takes them (made once, at import)."""
    return tuple(os.environ.encodekey(n) for n in names) if _ENVIRON is not None else names


def environ_key(names: tuple) -> tuple:
    """The raw values (None where unset) of the environment variables ``names`` (from :func:`environ_names`): a
    part of a replay key that changes whenever one of them does."""
    if _ENVIRON is not None:
        get = _ENVIRON.get
    else:
        get = os.environ.get
    return tuple([get(n) for n in names])


_REPLAY_NAME = environ_names(REPLAY_ENV)[0]
_REPLAY_OFF = {"0", "off", "false", "no"}


def replay_enabled() -> bool:
    value = (_ENVIRON.get(_REPLAY_NAME) if _ENVIRON is not None else os.environ.get(REPLAY_ENV))
    if value is None:
        return True
    if type(value) is bytes:
        value = os.environ.decodevalue(value)
    return value.strip().lower() not in _REPLAY_OFF


_PDL_NAMES = environ_names(PDL_ENV, "TILECRAFT_PDL_AT", "TILECRAFT_PDL_PREFETCH")


def pdl_env() -> tuple:
    """The environment a GEMM or attention launch plan reads (programmatic dependent launch): part of
    every replay key, so a changed setting plans afresh (raw values: :func:`environ_key`)."""
    return environ_key(_PDL_NAMES)


def signature(t: torch.Tensor | None) -> tuple | None:
    """What a launch plan may read of a tensor besides its data: shape, strides, dtype, device and the
    16-byte alignment of its first element (``None`` for ``None``)."""
    if t is None:
        return None
    return tuple(t.shape), t.stride(), t.dtype, t.device, t.data_ptr() % 16


def run_kernel(kernel, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)``: every launch of the ops goes through here, so that a
    :meth:`ReplayCache.record` in progress sees it."""
    compiled = kernel[grid](*args, **kwargs)
    rec = getattr(_TLS, "rec", None)
    if rec is not None:
        rec[0].append((kernel, grid, args, kwargs, compiled))
    return compiled


def cluster_smem_offsets(ttgir: str, target: tuple[int, int] = (90, 87)) -> dict[str, int]:
    """The byte offset from ``global_smem`` of every named shared-memory allocation (``%name =
    ttg.local_alloc``) of a compiled kernel, from its TTGIR (``compiled.asm["ttgir"]``) run through the
    passes of Triton's NVIDIA backend up to and including its shared-memory allocation pass, in
    ``make_llir``'s order (Triton 3.6): the offsets the compiled kernel itself uses. ``target``:
    (compute capability, PTX version) as the backend passes them. Used where a kernel addresses its
    own shared memory by hand (:mod:`tilecraft.kernels.cluster`)."""
    import re

    from triton._C.libtriton import ir, nvidia, passes

    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
        f.write(ttgir)
    try:
        mod = ir.parse_mlir_module(f.name, ctx)
    finally:
        os.unlink(f.name)
    pm = ir.pass_manager(ctx)
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm)
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, *target)
    pm.run(mod, "tilecraft_smem_offsets")
    found = re.findall(r"%(\w+) = ttg\.local_alloc \{allocation\.offset = (\d+) : i32", str(mod))
    return {name: int(off) for name, off in found}


_CLUSTER_READY: dict[int, tuple] = {}


def run_cluster_kernel(k: KernelLaunch):
    """Launch ``k`` in clusters of ``k.cluster`` CTAs along grid x. Triton 3.6 launches a kernel
    compiled for one CTA per program without a cluster, and sets a cluster only for ``num_ctas`` > 1,
    which changes what a Gluon program is (its tensors spread over the cluster's CTAs). So the kernel
    is compiled as usual (``warmup``), then its launch metadata is given the cluster size (Triton's
    launcher runs ``grid[0] * num_ctas`` CTAs with the cluster dimension set); the offsets of the
    allocations ``k.smem`` names are read from the compiled kernel (:func:`cluster_smem_offsets`) into
    the last runtime arguments. Once per compiled kernel; the kernel traps if it runs without the
    cluster (:func:`tilecraft.kernels.cluster.check_cluster`)."""
    kw = {**k.constexprs, **k.options}
    compiled = k.kernel.warmup(*k.args, grid=k.grid, **kw)
    ready = _CLUSTER_READY.get(id(compiled))
    if ready is None or ready[0] is not compiled:
        md = compiled.metadata
        if getattr(md, "num_ctas", 1) != 1:
            raise ValueError(f"{k.kernel.__name__}: a cluster launch of a kernel compiled with num_ctas={md.num_ctas}")
        if md.global_scratch_size or md.profile_scratch_size:  # the launcher sizes scratch by num_ctas
            raise ValueError(f"{k.kernel.__name__}: a cluster launch of a kernel with global scratch memory")
        offsets = cluster_smem_offsets(compiled.asm["ttgir"], (90, int(getattr(md, "ptx_version", None) or 87)))
        missing = [n for n in k.smem if n not in offsets]
        if missing:
            raise RuntimeError(f"{k.kernel.__name__}: no shared-memory offset for {', '.join(missing)} in its "
                               f"allocation ({sorted(offsets)}); this Triton lays out shared memory differently")
        packed = tuple(compiled.packed_metadata)
        compiled.packed_metadata = (packed[0], k.cluster, *packed[2:])
        ready = _CLUSTER_READY[id(compiled)] = (compiled, tuple(offsets[n] for n in k.smem))
    args = (*k.args[:len(k.args) - len(k.smem)], *ready[1])
    return run_kernel(k.kernel, k.grid, *args, **kw)


def run_op(fn, *args):
    """``fn(*args)`` for a host-side torch step between a plan's launches (an in-place ``sub_`` or
    ``copy_`` of its tensors): a :meth:`ReplayCache.record` in progress keeps it in order with the
    launches, and a replay calls ``fn`` again on the rebuilt arguments. ``fn`` must depend on
    nothing but its arguments (a torch function or method)."""
    result = fn(*args)
    rec = getattr(_TLS, "rec", None)
    if rec is not None:
        rec[0].append((fn, _OP, args, {}, None))
    return result


def _fresh(t: torch.Tensor) -> torch.Tensor:
    rec = getattr(_TLS, "rec", None)
    if rec is not None:
        rec[1].append(t)
    return t


def empty(shape, *, dtype: torch.dtype, device, stride=None) -> torch.Tensor:
    """``torch.empty``, for a launch plan's scratch that its kernels write before they read: a
    recorded call's replay allocates such a tensor afresh (any other tensor the plan makes, e.g. a
    cached buffer, keeps the call from being replayed). Only for buffers that the plan's launches
    (through :func:`run_kernel`, :func:`run_op`) write: whatever else writes them at planning time is
    not replayed. ``stride``: ``torch.empty_strided``'s."""
    if stride is not None:
        return _fresh(torch.empty_strided(shape, stride, dtype=dtype, device=device))
    return _fresh(torch.empty(shape, dtype=dtype, device=device))


def zeros(shape, *, dtype: torch.dtype, device) -> torch.Tensor:
    """``torch.zeros``, for a launch plan's scratch that its kernels accumulate into: a replay
    allocates it zeroed afresh (before the replay's first launch). The same rule as :func:`empty`."""
    t = torch.zeros(shape, dtype=dtype, device=device)
    t._tilecraft_replay_zeroed = True
    return _fresh(t)


def constant(t: torch.Tensor) -> torch.Tensor:
    """Marks ``t`` as a constant of the launch plans that pass it: a tensor the op makes once and never
    writes again (a cached table of weights), which a replay passes as it is. Its contents must follow
    from the replay key. Returns ``t``."""
    t._tilecraft_replay_constant = True
    return t


class _NotReplayable(Exception):
    """The recorded launches cannot be replayed; ``again``: only because of this call's tensors (two
    slots were one tensor), so a later call with the same key records afresh."""

    def __init__(self, why: str, again: bool = False):
        super().__init__(why)
        self.again = again


def _constant(x) -> bool:
    """An argument a replay passes as it was: numbers, strings, dtypes, Triton's constexprs and dtypes,
    tuples of those; not tensors, descriptors, containers or anything with a data pointer."""
    if isinstance(x, tuple):
        return all(_constant(e) for e in x)
    if isinstance(x, torch.Tensor):
        return getattr(x, "_tilecraft_replay_constant", False)
    if _is_descriptor(x):
        return _constant(x.base)
    return not (isinstance(x, (list, dict, set)) or hasattr(x, "data_ptr"))


def _is_descriptor(x) -> bool:
    return type(x).__name__ == "TensorDescriptor" and hasattr(x, "base")


class Replay:
    """The launches one call made, with the call's tensors as slots: run again on other tensors of
    the same :func:`signature` (and the same key, which must hold everything else the plan read),
    it launches the same kernels with the same grids and non-tensor arguments, without planning.

    Each argument is a constant, a slot (one of the call's tensors), a view of a slot (same
    storage: the same sizes, strides and offset from the slot's), a fresh :func:`empty` or
    :func:`zeros` tensor (or a view of one), or a TMA descriptor of one of those. A launch plan that
    passes anything else (a cached buffer, a copy of an operand, an unknown object) is not
    replayable. Host-side steps made through :func:`run_op` are replayed in their place. On a GPU the
    replay calls the compiled kernels Triton returned through their launcher (``CompiledKernel.run``, with
    the current stream looked up once a replay: what ``CompiledKernel[grid](*args)`` does per launch, 8 us of
    a launch's 35 on the H200 machine, 2026-12-01, ``benchmarks/host_breakdown.py``; that path while a
    launch hook of Triton's is set); no argument binding or specialisation, as the key fixes them. Where the
    launcher is Triton 3.6's ``CudaLauncher`` and allocates no scratch, the replay calls its C entry point with
    the arguments prepared when the launches were recorded (:func:`_lean_step`: tensors pass as addresses, TMA
    descriptors as maps kept per address; :data:`LEAN`). Under the interpreter it goes through ``kernel[grid]``
    with the new arguments."""

    __slots__ = ("device", "fresh", "steps", "lean")

    def __init__(self, launches: list, slots: tuple, fresh: list):
        roots = list(slots) + list(fresh)
        owners: dict[tuple, list[int]] = {}
        for i, t in enumerate(roots):
            if isinstance(t, torch.Tensor) and t.numel():
                owners.setdefault((t.device, t.untyped_storage().data_ptr()), []).append(i)
        self.fresh = [(tuple(t.shape), t.stride(), t.dtype, getattr(t, "_tilecraft_replay_zeroed", False))
                      for t in fresh]
        self.device = next((t.device for t in slots if isinstance(t, torch.Tensor)), None)

        def spec(x):  # None for a constant, else how to rebuild x from the roots
            if isinstance(x, torch.Tensor):
                if getattr(x, "_tilecraft_replay_constant", False):
                    return None
                hits = [i for i, r in enumerate(roots) if x is r]
                if len(hits) == 1:
                    return (_ROOT, hits[0])
                if hits:
                    raise _NotReplayable("one tensor in two slots", again=True)
                if x.numel() == 0:
                    raise _NotReplayable("an empty tensor that is no slot")
                own = owners.get((x.device, x.untyped_storage().data_ptr()), [])
                if len(own) > 1:
                    raise _NotReplayable("a view of storage that several slots share", again=True)
                if not own or roots[own[0]].dtype != x.dtype:
                    raise _NotReplayable(f"a tensor {tuple(x.shape)} {x.dtype} that is no slot, no view of one, "
                                         "and not fresh")
                r = roots[own[0]]
                return (_VIEW, own[0], tuple(x.shape), x.stride(), x.storage_offset() - r.storage_offset())
            if _is_descriptor(x):  # kept without its base: a replay holds no tensor of the recorded call
                base = spec(x.base)
                if base is None:  # a descriptor of a constant is a constant
                    return None
                return (_DESC, base, type(x), {k: v for k, v in vars(x).items() if k != "base"})
            if _constant(x):
                return None
            raise _NotReplayable(f"an argument of type {type(x).__name__}")

        def split(values):  # (the values with the constants in place, ((position, spec), ...) to fill)
            specs = [spec(v) for v in values]
            return ([v if sp is None else None for v, sp in zip(values, specs)],
                    tuple((i, sp) for i, sp in enumerate(specs) if sp is not None))

        steps = []
        lean = []  # the same launches for the compiled launchers' C entry point, or None (_lean_step)
        for kernel, grid, args, kwargs, compiled in launches:
            if grid is _OP:  # a host-side step (run_op)
                steps.append((kernel, None, *split(list(args)), _OP))
                if lean is not None:
                    lean.append((kernel, steps[-1][2], steps[-1][3], _OP))
                continue
            if callable(grid):
                raise _NotReplayable("a grid function")
            grid = tuple(grid)
            if compiled is not None:
                if hasattr(compiled, "_init_handles"):  # (done by its first launch: .function for its .run)
                    compiled._init_handles()
                grid = grid + (1,) * (3 - len(grid))  # Triton's compiled launcher takes three extents
                # every parameter in the kernel's order (constexprs too: Triton's launcher takes them all)
                try:
                    values = launch_values(kernel, args, kwargs, len(args))
                except TypeError as e:
                    raise _NotReplayable(str(e)) from None
                steps.append((compiled, grid, *split(values), None))
                if lean is not None:
                    lean.append(_lean_step(compiled, grid, values, steps[-1][3]))
                    if lean[-1] is None:
                        lean = None
            else:
                names = list(kwargs)
                steps.append((kernel, grid, *split(list(args) + [kwargs[k] for k in names]), (len(args), names)))
                lean = None
        self.steps = steps
        self.lean = lean

    def run(self, slots: tuple) -> None:
        dev = self.device
        if dev is not None and dev.type == "cuda":
            current = torch.cuda.current_device()
            index = dev.index if dev.index is not None else current
            if current != index:
                with torch.cuda.device(index):
                    return self._run(slots, index)
            return self._run(slots, index)
        return self._run(slots, None)

    def _run(self, slots: tuple, index: int | None) -> None:
        roots = list(slots)
        for shape, stride, dtype, zeroed in self.fresh:
            t = torch.empty_strided(shape, stride, dtype=dtype, device=self.device)
            roots.append(t.zero_() if zeroed else t)
        # the compiled kernels' launcher, on the current stream (Triton's runner looks both up per launch)
        stream = None
        if index is not None and _RAW_STREAM is not None and _no_launch_hooks():
            stream = _RAW_STREAM(index)
            if self.lean is not None and LEAN:
                return _run_lean(self.lean, roots, stream)
        for fn, grid, values, fills, kw in self.steps:
            values = values.copy()
            for i, sp in fills:
                values[i] = _rebuild(sp, roots)
            if kw is None:
                if stream is None:
                    fn[grid](*values)
                else:
                    fn.run(grid[0], grid[1], grid[2], stream, fn.function, fn.packed_metadata, None, None, None,
                           *values)
            elif kw is _OP:
                fn(*values)
            else:
                n, names = kw
                fn[grid](*values[:n], **dict(zip(names, values[n:])))


_ROOT, _VIEW, _DESC = 0, 1, 2

#: Whether a GPU replay calls the compiled launchers' C entry point with its arguments prepared
#: (:func:`_lean_step`); False: through ``CompiledKernel.run`` as before (for A/B timing).
LEAN = True
#: TMA descriptors (``CUtensorMap``) a lean step keeps per descriptor argument, by base address
_MAPS_KEPT = 64
_LEAN_OP = object()


def _raw_launcher(run) -> tuple | None:
    """(the C ``launch`` of Triton's generated launcher, {argument position: tensordesc metadata}) of a compiled
    kernel's launcher (``CompiledKernel.run``, Triton 3.6's ``CudaLauncher``), or None where it is another kind or
    allocates scratch memory per launch. Triton wraps the C entry point in a closure that turns every tensor
    descriptor into a ``CUtensorMap`` per launch (``make_tensordesc_arg``); the closure's cells give both."""
    if type(run).__name__ != "CudaLauncher" or getattr(run, "global_scratch_size", 1) or \
            getattr(run, "profile_scratch_size", 1) or not hasattr(run, "launch_pdl"):
        return None
    launch = run.launch
    if type(launch).__name__ == "builtin_function_or_method":
        return launch, {}
    code, cells = getattr(launch, "__code__", None), getattr(launch, "__closure__", None)
    if code is None or cells is None:
        return None
    free = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
    raw, indices, metas = free.get("launcher"), free.get("tensordesc_indices"), free.get("tensordesc_meta")
    if not callable(raw) or indices is None or metas is None or len(indices) != len(metas):
        return None
    return raw, dict(zip(sorted(indices), metas))


def _lean_step(compiled, grid: tuple, values: list, fills: tuple) -> tuple | None:
    """A compiled launch as the arguments of its launcher's C entry point, or None (then the replay goes through
    ``CompiledKernel.run``). Every argument the key fixes is prepared once: the grid, the launch flags, the
    constants and each TMA descriptor's shape and strides. Per replay only addresses change: a tensor argument
    passes as its address (an integer: the C launcher then skips ``data_ptr()`` and ``cuPointerGetAttribute``), a
    descriptor as the ``CUtensorMap`` of its base's address, encoded once per address (``fill_tma_descriptor``; a
    map is a function of the address and the fixed box, so a kept one is the one Triton would encode).
    Since 2026-12-01 (thirty-fifth session)."""
    try:
        from triton.backends.nvidia.driver import make_tensordesc_arg
    except ImportError:
        return None
    found = _raw_launcher(getattr(compiled, "run", None))
    if found is None:
        return None
    raw, metas = found
    spec_at = dict(fills)
    if set(metas) != {i for i, v in enumerate(values) if _is_descriptor(v)}:
        return None
    flat, fill = [], []
    for i, v in enumerate(values):
        sp = spec_at.get(i)
        if i in metas:
            if metas[i] is None:  # a descriptor Triton decomposes into pointer, shape and strides
                return None
            expanded = make_tensordesc_arg(v, metas[i])
            if sp is not None:
                base = sp[1]
                if base[0] not in (_ROOT, _VIEW):
                    return None
                maps = {_desc_address(v): expanded[0]}
                fill.append((len(flat), base, v.base.element_size(), (sp, metas[i], maps)))
                expanded[0] = None
            flat.extend(expanded)
        elif sp is not None:
            if sp[0] not in (_ROOT, _VIEW) or not isinstance(v, torch.Tensor):
                return None
            fill.append((len(flat), sp, v.element_size(), None))
            flat.append(None)
        else:
            flat.append(v)
    run = compiled.run
    head = [*grid, None, compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None, compiled,
            None, None, None]
    return raw, head + flat, tuple((len(head) + pos, sp, size, d) for pos, sp, size, d in fill), _LEAN_OP


def _desc_address(d) -> int:
    return d.base.data_ptr()


def _run_lean(steps: list, roots: list, stream: int) -> None:
    for fn, values, fills, kw in steps:
        if kw is _OP:
            values = values.copy()
            for i, sp in fills:
                values[i] = _rebuild(sp, roots)
            fn(*values)
            continue
        values = values.copy()
        values[3] = stream
        values[9] = values[9].packed_metadata  # the compiled kernel (a cluster launch edits its metadata)
        for pos, sp, size, desc in fills:
            root = roots[sp[1]]
            address = root.data_ptr() if sp[0] == _ROOT else root.data_ptr() + sp[4] * size
            if desc is None:
                values[pos] = address
                continue
            dsp, meta, maps = desc
            tmap = maps.get(address)
            if tmap is None:
                if len(maps) >= _MAPS_KEPT:
                    maps.clear()
                from triton.backends.nvidia.driver import make_tensordesc_arg

                tmap = maps[address] = make_tensordesc_arg(_rebuild(dsp, roots), meta)[0]
            values[pos] = tmap
        fn(*values)


#: the current CUDA stream's handle by device index, as Triton's runner looks it up (None: a CPU build of torch)
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _no_launch_hooks() -> bool:
    """Whether Triton's launch hooks (``triton.knobs.runtime.launch_enter_hook`` / ``launch_exit_hook``: a chain of
    hooks in Triton 3.6, which its profilers fill) are empty: a replay then calls the compiled kernels' launcher
    itself, with no launch metadata."""
    runtime = _KNOBS_RUNTIME or _knobs_runtime()
    return all(h is None or not getattr(h, "calls", True)
               for h in (runtime.launch_enter_hook, runtime.launch_exit_hook))


_KNOBS_RUNTIME = None


def _knobs_runtime():
    global _KNOBS_RUNTIME
    from triton import knobs

    _KNOBS_RUNTIME = knobs.runtime
    return _KNOBS_RUNTIME


def _rebuild(sp: tuple, roots: list):
    kind = sp[0]
    if kind == _ROOT:
        return roots[sp[1]]
    if kind == _VIEW:
        r = roots[sp[1]]
        return r.as_strided(sp[2], sp[3], r.storage_offset() + sp[4])
    d = object.__new__(sp[2])  # the recorded descriptor (checked when it was made) on the new base
    d.__dict__.update(sp[3])
    d.base = _rebuild(sp[1], roots)
    return d


class _Seen:
    """A key seen once: its second call records."""


_SEEN = _Seen()


class ReplayCache:
    """Recorded launches (:class:`Replay`) per call key, for one op. ``run(key, slots)`` replays the
    key's launches and says whether it did; ``record(key, slots)`` wraps a call's planning and
    launching: the first call of a key only notes the key, the second keeps what it launched, or why
    that cannot be replayed (:meth:`why`: the key is then planned every time, without recording
    again), and the third and later calls replay. The key must determine every decision the
    plan makes apart from the slots' data pointers: each op builds it from the slots'
    :func:`signature`, its validated problem and :func:`pdl_env`."""

    def __init__(self, maxsize: int = 1024):
        self.maxsize = maxsize
        self._entries: dict = {}  # key -> Replay, or the reason it cannot be replayed
        _CACHES.append(self)

    def run(self, key, slots: tuple) -> bool:
        entry = self._entries.get(key)
        if type(entry) is not Replay:
            return False
        entry.run(slots)
        return True

    def why(self, key) -> str | None:
        """Why ``key``'s launches are planned afresh on every call (None: replayed, or seen once or never)."""
        entry = self._entries.get(key)
        return entry if type(entry) is str else None

    @contextmanager
    def record(self, key, slots: tuple):
        entry = self._entries.get(key)
        if entry is None or type(entry) is str:  # first seen (a key seen once, e.g. a decode's growing
            if entry is None:                    # length, costs no recording), or known not to replay
                self._remember(key, _SEEN)
            yield
            return
        outer = getattr(_TLS, "rec", None)
        rec = _TLS.rec = ([], [])
        try:
            yield
        finally:
            _TLS.rec = outer
        if outer is not None:  # a recording inside another: the outer one sees these launches too
            outer[0].extend(rec[0])
            outer[1].extend(rec[1])
        try:
            entry = Replay(rec[0], slots, rec[1]) if rec[0] else "no launch"
        except _NotReplayable as e:
            if e.again:
                return
            entry = str(e)
        self._remember(key, entry)

    def _remember(self, key, entry) -> None:
        if len(self._entries) >= self.maxsize and key not in self._entries:
            self._entries.clear()
        self._entries[key] = entry

    def clear(self) -> None:
        self._entries.clear()


_CACHES: list[ReplayCache] = []


def clear_replays() -> None:
    """Forget every op's recorded launches. Needed only after changing what the planning reads
    that no key holds: a module's default configs or constants changed at run time (tests do)."""
    for cache in _CACHES:
        cache.clear()
