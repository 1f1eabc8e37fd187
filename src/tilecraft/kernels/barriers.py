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

:func:`slot_release` and :func:`slot_wait_free` are a TMA ring's two ends (a consumer done with a slot, the
producer about to refill it) with either kind of barrier: the slot's "empty" mbarrier, or, with ``THREADS`` > 0,
a named barrier per slot that the consumers' threads arrive at and the producer's warp completes (``THREADS``:
all of them). A consumer cannot arrive for a slot's next use before the producer's ``named_sync`` for it has
completed (the data comes after), so each barrier instance counts one use.

This module imports nothing of tilecraft's (the layering rule).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier


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


@gluon.jit
def slot_release(empty, s, bar_id, pred, THREADS: gl.constexpr):
    """A consumer is done with ring slot s (the wgmmas reading it retired): with ``pred``, an arrival on
    ``empty.index(s)`` (Gluon puts a ``bar.sync`` of the partition in front of it), or with ``THREADS`` > 0
    every calling thread's ``named_arrive(bar_id, THREADS)``."""
    if THREADS > 0:
        if pred:
            named_arrive(bar_id, THREADS)
    else:
        mbarrier.arrive(empty.index(s), pred=pred)


@gluon.jit
def slot_wait_free(empty, s, bar_id, n, THREADS: gl.constexpr):
    """The producer, before its n-th load (counted from 0 over the kernel) into ring slot s: wait until the
    consumers released the slot's previous load. The first STAGES loads find their slots free (a fresh
    mbarrier counts as having completed the phase before phase 0; the named barrier is not waited on)."""
    STAGES: gl.constexpr = empty.type.shape[0]
    if THREADS > 0:
        if n >= STAGES:
            named_sync(bar_id, THREADS)
    else:
        mbarrier.wait(empty.index(s), ((n // STAGES) & 1) ^ 1)
