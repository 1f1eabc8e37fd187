"""Thread-block clusters for Gluon kernels, sm90: what Triton 3.6's Gluon does not expose.

Gluon (Triton 3.6) launches a kernel compiled for one CTA per program, and its TMA copies have no CTA
mask ("NYI: Support multicast" in ``libtriton``): two CTAs that read the same tile each fetch it from the
L2. cuBLAS runs its mid-size products on clusters of two CTAs whose shared operand tile is fetched once
and written into both CTAs' shared memory (``cp.async.bulk.tensor ... .multicast::cluster``). These
helpers emit the PTX for that through ``gl.inline_asm_elementwise``:

* :func:`check_cluster`: traps unless the kernel runs in clusters of ``n`` CTAs (a launch without the
  cluster attribute would otherwise address a partner that does not exist);
* :func:`remote_arrive`: one thread arrives on the mbarrier at the same shared-memory offset in
  another CTA of the cluster (``mapa`` + ``mbarrier.arrive.shared::cluster``);
* :func:`cluster_barrier`: the cluster-wide barrier (every thread of every CTA), which orders each CTA's
  mbarrier initialisation (with :func:`fence_mbarrier_init`) before any remote arrival or multicast;
* :func:`multicast_load_2d`: one lane of the calling warp issues a 2D TMA load whose box lands at the
  same offset in every CTA of ``mask`` and completes the mbarrier at the same offset in each.

Shared memory is addressed by hand: ``offset`` is a byte offset from the module's ``global_smem`` (the
base of every Gluon allocation), which the host reads from Triton's own shared-memory allocation pass
(:func:`tilecraft.ops.launch.cluster_smem_offsets`); the tensor map is named by its kernel parameter
(``<kernel>_param_<i>``, a ``__grid_constant__`` CUtensorMap, as Triton passes descriptors). The compile
tests check both against the PTX. The cluster launch itself is the host's
(:func:`tilecraft.ops.launch.run_kernel` with ``cluster``).

A remote arrival or multicast must not reach a partner's mbarrier before the partner has initialised it, and a
CTA must not exit while its partner may still arrive on its barriers: the caller puts :func:`cluster_barrier`
after the initialisation (and :func:`fence_mbarrier_init`) and before the exit.

This module imports nothing of tilecraft's (the layering rule).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def check_cluster(n: gl.constexpr):
    """Trap (an error on the host, not a hang or a wrong result) unless ``%cluster_nctarank`` is ``n``."""
    gl.inline_asm_elementwise(
        "{\n\t.reg .pred %cq;\n\t.reg .b32 %cn;\n\tmov.u32 %cn, %cluster_nctarank;\n\t"
        "setp.ne.u32 %cq, %cn, $1;\n\t@%cq trap;\n\tmov.u32 $0, 0;\n\t}",
        "=r,r", [n], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def cluster_barrier():
    """``barrier.cluster.arrive.release`` then ``barrier.cluster.wait.acquire`` (aligned): every calling thread
    waits until all non-exited threads of every CTA of the cluster have arrived. Every warp of the kernel must
    reach it, so in a warp-specialised kernel every partition calls it and no warp may sit idle (Gluon pads
    partitions to whole warpgroups with warps that never get here: declare those warps as partitions of their own
    that call it, as the GEMM's ``_cluster_member`` does)."""
    gl.inline_asm_elementwise("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                              "\n\tmov.u32 $0, 0;", "=r,r", [0], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def fence_mbarrier_init():
    """``fence.mbarrier_init.release.cluster``: this thread's mbarrier inits visible to the cluster."""
    gl.inline_asm_elementwise("fence.mbarrier_init.release.cluster;\n\tmov.u32 $0, 0;", "=r,r", [0],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def remote_arrive(offset, cta, pred):
    """Thread 0 of the CTA (``%tid.x`` 0), where ``pred`` is non-zero: one arrival on the mbarrier at byte
    ``offset`` from ``global_smem`` in CTA ``cta`` of the cluster (``mbarrier.arrive.shared::cluster``, the
    default release at CTA scope, as CUTLASS's ``ClusterBarrier::arrive(cta_id)``: an explicit
    ``.release.cluster``: see docs/gemm.md follow-up 31)."""
    gl.inline_asm_elementwise(
        "{\n\t.reg .pred %ra;\n\t.reg .b32 %rt, %rb;\n\tmov.u32 %rt, %tid.x;\n\tsetp.eq.u32 %ra, %rt, 0;\n\t"
        "setp.ne.and.u32 %ra, $3, 0, %ra;\n\tmov.u32 %rb, global_smem;\n\tadd.u32 %rb, %rb, $1;\n\t"
        "mapa.shared::cluster.u32 %rb, %rb, $2;\n\t"
        "@%ra mbarrier.arrive.shared::cluster.b64 _, [%rb];\n\tmov.u32 $0, 0;\n\t}",
        "=r,r,r,r", [offset, cta, pred], dtype=gl.int32, is_pure=False, pack=1)


@gluon.constexpr_function
def _multicast_asm(param):
    """PTX of :func:`multicast_load_2d` for the tensor map in kernel parameter ``param``."""
    return ("{\n\t.reg .pred %mp;\n\t.reg .b32 %ml, %md, %mb;\n\t.reg .b64 %mt;\n\t.reg .b16 %mm;\n\t"
            "mov.u32 %ml, %laneid;\n\tsetp.eq.u32 %mp, %ml, 0;\n\t"
            f"mov.b64 %mt, {param};\n\tcvta.param.u64 %mt, %mt;\n\t"
            "mov.u32 %md, global_smem;\n\tadd.u32 %mb, %md, $4;\n\tadd.u32 %md, %md, $1;\n\t"
            "cvt.u16.u32 %mm, $5;\n\t"
            "@%mp cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
            " [%md], [%mt, {$2, $3}], [%mb], %mm;\n\tmov.u32 $0, 0;\n\t}")


@gluon.jit
def multicast_load_2d(PARAM: gl.constexpr, dst_offset, inner, outer, bar_offset, mask):
    """Lane 0 of the calling warp (call it from a one-warp partition: every warp that calls it issues one copy;
    Triton may place that warp anywhere in the CTA): the 2D box of the tensor map in kernel parameter ``PARAM`` at
    coordinates (``inner``, ``outer``) (innermost first, as the PTX takes them) into shared memory at
    byte ``dst_offset`` from ``global_smem`` of every CTA in ``mask`` (bit i: CTA i of the cluster),
    each completing the mbarrier at byte ``bar_offset`` by the box's bytes."""
    gl.inline_asm_elementwise(_multicast_asm(PARAM), "=r,r,r,r,r,r", [dst_offset, inner, outer, bar_offset, mask],
                              dtype=gl.int32, is_pure=False, pack=1)
