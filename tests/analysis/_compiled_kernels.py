"""Tiny @triton.jit kernels for tests/analysis/test_compiled.py.

Imported by module name (``_compiled_kernels``) in the compiler process that
``tilecraft.analysis.compiled.cross_compile`` starts, which inherits the test process's import path
(pytest puts this folder on it). Under TRITON_INTERPRET=1 (the test suite's setting) importing this
module in the test process itself is harmless: nothing here is launched there.
"""
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = 2 x, elementwise: a trivial kernel (few registers, no spills, no shared memory)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@triton.jit
def softmax_row(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """A softmax-like row kernel whose BLOCK values per program stay live across two reductions:
    with a large BLOCK, few warps and a low ``maxnreg`` it must spill."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    s = tl.sum(x * x, axis=0)
    m = tl.max(x, axis=0)
    y = tl.exp(x - m) / s
    tl.store(y_ptr + offs, y + tl.sum(y, axis=0))


@triton.jit
def dot_fp64(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    """C = A @ B for one BLOCK x BLOCK fp64 tile. Triton 3.6 cannot lower it for gfx942 (an
    assertion in the MFMA lowering); it compiles for sm90 and gfx90a."""
    r = tl.arange(0, BLOCK)
    idx = r[:, None] * BLOCK + r[None, :]
    c = tl.dot(tl.load(a_ptr + idx), tl.load(b_ptr + idx))
    tl.store(c_ptr + idx, c)


@triton.jit
def cast(x_ptr, y_ptr, BLOCK: tl.constexpr, DTYPE: tl.constexpr):
    """y = x converted to the constexpr dtype DTYPE (a triton.language dtype crosses to the
    compiler process as its name)."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(DTYPE))


try:  # Gluon (Triton's explicit-layout dialect) ships with triton >= 3.4
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # pragma: no cover - older triton
    gluon = None

if gluon is not None:
    @gluon.jit
    def gluon_smem_shift(x_ptr, y_ptr, BLOCK: gl.constexpr):
        """y = the second half of x, read back through a shared-memory tile: a @gluon.jit kernel with
        an explicit layout and a shared-memory allocation (shared_bytes > 0). Gluon's slices of shared
        memory must start at a multiple of their length, hence half-tiles, not shifted windows."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, BLOCK, layout=layout)
        smem = gl.allocate_shared_memory(gl.float32, [2 * BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        smem.slice(0, BLOCK).store(gl.load(x_ptr + offs))
        gl.thread_barrier()
        half: gl.constexpr = BLOCK // 2
        y = smem.slice(half, half).load(gl.BlockedLayout([1], [32], [4], [0]))
        gl.store(y_ptr + gl.arange(0, half, layout=gl.BlockedLayout([1], [32], [4], [0])), y)
