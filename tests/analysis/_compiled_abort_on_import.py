"""Test-only hook for tests/analysis/test_compiled.py: importing this module aborts the
interpreter with SIGABRT, as an LLVM assertion inside Triton's compiler does. ``cross_compile``
imports the kernel's module in its compiler process, so naming this module there exercises the
path where the compiler process dies; the test process must get ``KernelResources(error=...)``.

Never import it anywhere else.
"""
import os

os.abort()
