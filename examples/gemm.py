"""tilecraft.matmul: a fused GEMM in several precisions, checked against float64.

    TRITON_INTERPRET=1 PYTHONPATH=src python examples/gemm.py    # CPU: the Triton kernels interpreted
    PYTHONPATH=src python examples/gemm.py                       # GPU: also times ours against torch

Prints one line per case: the relative error against the float64 reference, and on a GPU the
speed of ours and of the torch call in TFLOP/s.
"""
from __future__ import annotations

import torch

import tilecraft
from tilecraft.reference.gemm import matmul_reference, relative_error

gpu = torch.cuda.is_available()
dev = "cuda" if gpu else "cpu"
n = 4096 if gpu else 48
g = torch.Generator(device=dev).manual_seed(0)


def rand(*shape, dtype=torch.float32):
    return (torch.rand(*shape, device=dev, generator=g) * 2 - 1).to(dtype)


def timed(fn) -> float:
    """Median ms of fn on a GPU (events); 0 on the CPU, where times mean nothing."""
    if not gpu:
        fn()
        return 0.0
    import triton.testing
    return triton.testing.do_bench(fn, return_mode="median")


def report(name, out, ref, ours_ms=0.0, torch_ms=0.0, flops=2 * n**3):
    line = f"{name:40s} relative error {relative_error(out, ref):.1e}"
    if gpu:
        line += f"   ours {flops / ours_ms / 1e9:7.1f} TFLOP/s, torch {flops / torch_ms / 1e9:7.1f}"
    print(line)


# bf16 with a fused epilogue: gelu(a @ b.T + bias), B given transposed (a view, no copy)
a, w, bias = rand(n, n, dtype=torch.bfloat16), rand(n, n, dtype=torch.bfloat16), rand(n, dtype=torch.bfloat16)
out = tilecraft.matmul(a, w.t(), bias=bias, activation="gelu")
ref = matmul_reference(a, w.t(), out_dtype=torch.float64, bias=bias, activation="gelu")
report("bf16 gelu(a @ w.T + bias)", out, ref,
       timed(lambda: tilecraft.matmul(a, w.t(), bias=bias, activation="gelu")),
       timed(lambda: torch.nn.functional.gelu(torch.addmm(bias, a, w.t()))))

# fp32 three ways: FMA, TF32 tensor cores, and 3xTF32 (fp32-accurate on tensor cores)
x, y = rand(n, n), rand(n, n)
ref = matmul_reference(x, y, out_dtype=torch.float64)
for precision in ("ieee", "tf32", "fp32-accurate"):
    out = tilecraft.matmul(x, y, precision=precision)
    report(f"fp32 precision={precision}", out, ref, timed(lambda p=precision: tilecraft.matmul(x, y, precision=p)),
           timed(lambda: torch.matmul(x, y)))

# int8 -> int32, exact
i8a = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8, generator=g)
i8b = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8, generator=g)
out = tilecraft.matmul(i8a, i8b.t().contiguous().t())
print(f"{'int8 -> int32':40s} exact: {torch.equal(out.long(), matmul_reference(i8a, i8b, out_dtype=torch.int64))}")

# fp8 e4m3 with per-row and per-column scales, bf16 out
fa, fb = rand(n, n, dtype=torch.float8_e4m3fn), rand(n, n, dtype=torch.float8_e4m3fn).t()
sa, sb = rand(n, 1).abs() + 0.5, rand(1, n).abs() + 0.5
out = tilecraft.matmul(fa, fb, scale_a=sa, scale_b=sb)
report("fp8 e4m3, row/column scales", out, matmul_reference(fa, fb, out_dtype=torch.float64, scale_a=sa, scale_b=sb))
