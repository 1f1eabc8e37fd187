"""Named (hardware) barriers for Gluon's warp-specialised kernels, sm90.

Gluon (Triton 3.6) has mbarriers but no named barriers, and every ``mbarrier.arrive`` inside a
``warp_specialize`` partition compiles to a ``bar.sync`` of the partition's threads in front of one elected
arrive (Triton's shared-memory hazard analysis puts it before every arrive on a barrier arrived on before).
FlashAttention-3 hands the tensor cores between its consumer warpgroups with ``bar.sync`` / ``bar.arrive``
on numbered barriers instead. :func:`named_sync` and :func:`named_arrive` emit those instructions through
``gl.inline_asm_elementwise`` (one instruction per thread; the barrier id and the thread count are operands,
so they may be computed), kept in order with the wgmmas and TMA copies around them by their side effects.

PTX semantics (``barrier``): barrier ``bar_id`` (0-15) completes once ``count`` threads (a multiple of 32,
whole warps) have arrived; ``named_sync`` arrives and waits for completion, ``named_arrive`` arrives and goes
on. Every warp of the calling partition executes the call (convergent). Triton's warp specialisation uses the
low ids itself (0 for the default partition, one each for the workers: ids 0-3 are seen in the sm90 PTX of
this project's kernels), so the users here start at 4 and above. A barrier left with arrivals that no
``named_sync`` completes when the program ends (a last hand-off) is harmless.

This module imports nothing of tilecraft's (the layering rule).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def named_sync(bar_id, count):
    """``bar.sync bar_id, count``: arrive at named barrier ``bar_id`` and wait until ``count`` threads have."""
    gl.inline_asm_elementwise("bar.sync $1, $2;\n\tmov.u32 $0, 0;", "=r,r,r", [bar_id, count], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def named_arrive(bar_id, count):
    """``bar.arrive bar_id, count``: count this thread in at named barrier ``bar_id`` without waiting."""
    gl.inline_asm_elementwise("bar.arrive $1, $2;\n\tmov.u32 $0, 0;", "=r,r,r", [bar_id, count], dtype=gl.int32,
                              is_pure=False, pack=1)
