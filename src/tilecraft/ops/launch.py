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

__all__ = ["KernelLaunch", "PDL_ENV", "pdl_active", "with_pdl"]

#: ``TILECRAFT_PDL=0`` launches every kernel without programmatic dependent launch.
PDL_ENV = "TILECRAFT_PDL"


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


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    import torch

    return torch.cuda.get_device_capability(index)


def pdl_active(device) -> bool:
    """Whether launches on ``device`` use programmatic dependent launch (:mod:`tilecraft.kernels.pdl`):
    CUDA GPUs of compute capability 9.0 and up, not under the interpreter, unless ``TILECRAFT_PDL=0``."""
    import torch

    if os.environ.get(PDL_ENV, "1") == "0" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    if device.type != "cuda" or torch.version.hip:
        return False
    return _capability(device.index if device.index is not None else torch.cuda.current_device()) >= (9, 0)


def with_pdl(plan: list[KernelLaunch], device) -> list[KernelLaunch]:
    """``plan`` with programmatic dependent launch where :func:`pdl_active`: every launch of a kernel
    that takes a ``PDL`` constexpr (and so waits for the kernel ahead before it touches memory) gets
    ``PDL=True`` and Triton's ``launch_pdl`` option; the others launch as before."""
    if not pdl_active(device):
        return plan
    return [dataclasses.replace(k, constexprs={**k.constexprs, "PDL": True},
                                options={**k.options, "launch_pdl": True})
            if "PDL" in getattr(k.kernel, "arg_names", ()) else k for k in plan]
