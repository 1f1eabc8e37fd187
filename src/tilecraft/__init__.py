"""tilecraft: GPU kernels at the hardware limit, and the tools that show how close they are."""
from tilecraft.ops.attention import attention
from tilecraft.ops.gemm import matmul
from tilecraft.ops.stencil import laplacian

__version__ = "0.1.0"
__all__ = ["__version__", "attention", "laplacian", "matmul"]
