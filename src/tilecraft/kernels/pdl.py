"""Programmatic dependent launch (PDL, sm90+): the device side.

A kernel launched with Triton's ``launch_pdl=True`` may start before the kernel ahead of it in the
stream has finished: its programs are placed on the SMs as the earlier kernel's programs leave (or
as soon as all of them have executed ``griddepcontrol.launch_dependents``), and each then waits in
``griddepcontrol.wait`` until the earlier kernel has completed and its writes are visible. What
this saves is the launch latency and the programs' start-up between two short kernels of a
stream or a CUDA graph (``docs/gemm.md``, follow-up 18).

Rule kept by every kernel that takes ``PDL``: :func:`pdl_start` (or :func:`pdl_start_gluon`) is its
first statement, before any global load or store, so reading what the earlier kernel wrote, or
writing what it still reads, always happens after the wait. Both instructions are no-ops in a
kernel launched without the attribute. ``PDL`` is a constexpr: 0 off (always on the interpreter,
which cannot run inline PTX, and on AMD); 1 "early", the next kernel may launch as soon as every
program of this one has started; 2 "late", only once every program has passed :func:`pdl_trigger`
after its main loop. The host side is :func:`tilecraft.ops.launch.with_pdl`.

This module imports nothing of tilecraft's (the layering rule).
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

_WAIT = gl.constexpr("griddepcontrol.wait; // dummy $0")
_LAUNCH = gl.constexpr("griddepcontrol.launch_dependents; // dummy $0")


@triton.jit
def pdl_start(PDL: tl.constexpr):
    """First statement of a PDL kernel: wait for the kernel ahead in the stream (its writes visible);
    with ``PDL`` 1 ("early") also let the next kernel launch now. ``PDL`` 0: nothing."""
    if PDL == 1 or PDL == 2:
        gdc_wait()
    if PDL == 1:
        gdc_launch_dependents()


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """With ``PDL`` 2 ("late"), placed after a kernel's main loop: let the next kernel launch now, so its
    programs wait on the SMs only through this kernel's last stores (a program waiting in
    ``griddepcontrol.wait`` beside a compute-bound main loop slows it: docs/gemm.md, follow-up 18)."""
    if PDL == 2:
        gdc_launch_dependents()


@gluon.jit
def pdl_start_gluon(PDL: gl.constexpr):
    """:func:`pdl_start` for Gluon kernels (all warps, before ``warp_specialize``)."""
    if PDL == 1 or PDL == 2:
        gl.inline_asm_elementwise(_WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    if PDL == 1:
        gl.inline_asm_elementwise(_LAUNCH, "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def pdl_trigger_gluon(PDL: gl.constexpr):
    """:func:`pdl_trigger` for Gluon kernels."""
    if PDL == 2:
        gl.inline_asm_elementwise(_LAUNCH, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
