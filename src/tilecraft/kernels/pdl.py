"""Programmatic dependent launch (PDL, sm90+): the device side.

A kernel launched with Triton's ``launch_pdl=True`` may start before the kernel ahead of it in the
stream has finished: its programs are placed on the SMs as the earlier kernel's programs leave (or
as soon as all of them have executed ``griddepcontrol.launch_dependents``), and each then waits in
``griddepcontrol.wait`` until the earlier kernel has completed and its writes are visible. What
this saves is the launch latency and the programs' start-up between two short kernels of a
stream or a CUDA graph (``docs/gemm.md``, follow-up 18).

Rule kept by every kernel that takes ``PDL``: :func:`pdl_start` (or :func:`pdl_start_gluon`) comes
before any global load or store, so reading what the earlier kernel wrote, or writing what it still
reads, always happens after the wait (only address arithmetic and L2 prefetches, below, may precede
it). Both instructions are no-ops in a kernel launched without the attribute. ``PDL`` is a constexpr:
0 off (always on the interpreter, which cannot run inline PTX, and on AMD); 1 "early", the next kernel
may launch as soon as every program of this one has started; 2 "late", only once every program has
passed :func:`pdl_trigger` after its main loop; 3 "mid", once every program has reached the last ``PDL_AT`` steps of its main
loop (:func:`pdl_trigger_if`, the pointer GEMM kernel; kernels without it trigger as "late"), so the
next kernel's programs are on the SMs, their first tiles prefetched into L2 (:func:`prefetch_rows_l2`),
while this one streams its last steps. The host side is :func:`tilecraft.ops.launch.with_pdl`.
:func:`prefetch_rows_l2` is a hint that brings nothing into registers or L1, and every write of the
kernel ahead lands in L2 (the point of coherence), so a line prefetched before the wait cannot be read
stale.

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
    if PDL == 1 or PDL == 2 or PDL == 3:
        gdc_wait()
    if PDL == 1:
        gdc_launch_dependents()


@triton.jit
def pdl_trigger_if(cond, PDL: tl.constexpr):
    """With ``PDL`` 3 ("mid"), inside a main loop: ``griddepcontrol.launch_dependents`` where ``cond``
    (a scalar) holds, predicated, so the loop stays one basic block (a second execution by a program is
    ignored by the hardware)."""
    if PDL == 3:
        tl.inline_asm_elementwise("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $1, 0;\n\t"
                                  "@p griddepcontrol.launch_dependents;\n\tmov.u32 $0, 0;\n\t}",
                                  "=r,r", [cond.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_rows_l2(ptr, r0, n_rows, c0, n_cols, stride_r, R: tl.constexpr, C: tl.constexpr):
    """``prefetch.global.L2`` of rows [r0, r0 + R) x columns [c0, c0 + C) of a matrix whose columns have
    unit stride, cut to ``n_rows`` x ``n_cols``: one address per 128 bytes of each row (addresses
    outside are replaced by ``ptr``). A hint only, nothing reaches registers or L1, so a kernel may
    issue it before :func:`pdl_start`. NVIDIA only (inline PTX): callers keep it behind ``PDL`` > 0."""
    STEP: tl.constexpr = 1024 // ptr.dtype.element_ty.primitive_bitwidth  # elements per 128 bytes
    NC: tl.constexpr = max(C // STEP, 1)
    rows = r0 + tl.arange(0, R)
    cols = c0 + tl.arange(0, NC) * STEP
    ok = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l",
                              [tl.where(ok, ptr + rows[:, None].to(tl.int64) * stride_r + cols[None, :], ptr)],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """With ``PDL`` 2 ("late"), placed after a kernel's main loop: let the next kernel launch now, so its
    programs wait on the SMs only through this kernel's last stores (a program waiting in
    ``griddepcontrol.wait`` beside a compute-bound main loop slows it: docs/gemm.md, follow-up 18).
    ``PDL`` 3 too: a program whose loop never reached its trigger steps triggers here."""
    if PDL == 2 or PDL == 3:
        gdc_launch_dependents()


@gluon.jit
def pdl_start_gluon(PDL: gl.constexpr):
    """:func:`pdl_start` for Gluon kernels (all warps, before ``warp_specialize``)."""
    if PDL == 1 or PDL == 2 or PDL == 3:
        gl.inline_asm_elementwise(_WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    if PDL == 1:
        gl.inline_asm_elementwise(_LAUNCH, "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def pdl_trigger_gluon(PDL: gl.constexpr):
    """:func:`pdl_trigger` for Gluon kernels."""
    if PDL == 2 or PDL == 3:
        gl.inline_asm_elementwise(_LAUNCH, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
