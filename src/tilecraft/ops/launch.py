"""One kernel launch as data, shared by the ops' launchers (``ops.stencil``, ``ops.gemm``).

A launcher builds a list of :class:`KernelLaunch` (its ``launch_plan``) and runs it; the same list,
built on ``meta`` tensors, tells ``tilecraft inspect`` what to compile for a GPU that is not here
(each op's ``compile_signature`` turns the arguments into a Triton signature).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelLaunch"]


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
