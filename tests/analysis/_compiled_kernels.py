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
