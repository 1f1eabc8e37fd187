"""One kernel launch as data, shared by the ops' launchers (``ops.stencil``, ``ops.gemm``).

A launcher builds a list of :class:`KernelLaunch` (its ``launch_plan``) and runs it; the same list,
built on ``meta`` tensors, tells ``tilecraft inspect`` what to compile for a GPU that is not here
(each op's ``compile_signature`` turns the arguments into a Triton signature).
"""
from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

__all__ = ["KernelLaunch", "PDL_ENV", "PDL_MODES", "eager_direct", "gluon_descriptor", "pdl_active", "pdl_mode",
           "runtime_arg_names", "with_pdl"]

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


def eager_direct(*tensors: object) -> bool:
    """Whether a public op may run its body directly instead of through its ``torch.library``
    registration (``torch.ops.tilecraft.*``): a plain eager call, where the registered op's dispatch
    only adds host time (``tilecraft.laplacian`` on a 128^3 grid: 201 us per call through the op
    against 49 us for its body, H200 machine, 2026-11-27, ``benchmarks/host_profile.py`` and
    ``benchmarks/host_overhead.py``).

    False, so the call goes through the op as before, while torch.compile traces, while a
    torch-function or dispatch mode or a functorch transform is active (fake tensors, flop counters,
    vmap), while the autograd profiler records (the op shows by name in its traces), when a tensor is
    a subclass (``nn.Parameter`` counts as plain), or when autograd must record the call (grad mode
    on and a tensor requires grad). ``None`` entries are skipped."""
    if torch.compiler.is_compiling() or torch.autograd.profiler._is_profiler_enabled:
        return False
    if (torch._C._is_torch_function_mode_enabled() or torch._C._are_functorch_transforms_active()
            or _get_current_dispatch_mode() is not None):
        return False
    grad = torch.is_grad_enabled()
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

    def run(self):
        """Launch it; Triton's compiled kernel (``n_regs``, ``n_spills``, ``metadata``) on a GPU."""
        return self.kernel[self.grid](*self.args, **self.constexprs, **self.options)


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
def _capability(index: int) -> tuple[int, int]:
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
    if _capability(device.index if device.index is not None else torch.cuda.current_device()) < (9, 0):
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
