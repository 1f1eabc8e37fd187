"""Why the stream-K kernel is slow (bisection, one GPU run): the stripped-down probe kernel
(``gemm_streamk_probe_kernels.probe``: VAR 0 no per-tile flush, 1 a flush that stores, 2 the
owner arithmetic, 5 the per-thread counters) against the library's stream-K kernel and the
heuristic, bf16 M = 16, N = K = 4096, 16x32x128 tiles, 4 warps; CUDA-graph timing over rotated B."""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_streamk_probe_kernels import probe  # noqa: E402

from tilecraft.ops import gemm as ops  # noqa: E402
from tilecraft.tuning.gemm import GemmConfig  # noqa: E402


def timeit(fns, reps=20):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for f in fns:
            f()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            for _ in range(reps):
                for f in fns:
                    f()
    ts = []
    for _ in range(7):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) / (reps * len(fns)))
    return sorted(ts)[3] * 1e3


def main():
    M, N, K = 16, 4096, 4096
    dev = "cuda"
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    bs = [torch.randn(K, N, device=dev, dtype=torch.bfloat16) for _ in range(8)]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = 2 * N * K
    out = torch.empty(M, N, device=dev, dtype=torch.float32)
    ws = torch.zeros(4 * 128 * 16 * 32 * 4, device=dev)
    cnt = torch.zeros(1024, device=dev, dtype=torch.int32)
    BK, BN = 128, 32
    KB = K // BK
    units = (N // BN) * KB
    for var in (0, 1, 2, 5):
        for stages in (4, 6):
            fns = [lambda b=b: probe[(sms,)](a, b, out, ws, cnt, N, KB, units, K, N, BM=16, BN=BN, BK=BK, VAR=var,
                                             num_warps=4, num_stages=stages) for b in bs]
            us = timeit(fns)
            print(f"probe VAR {var} s{stages}: {us:7.2f} us  {nbytes / us / 1e6:6.3f} TB/s", flush=True)
    for cfg in (GemmConfig("pointer", 16, 32, 128, group_m=1, num_warps=4, num_stages=6),
                GemmConfig("pointer", 16, 32, 128, group_m=1, num_warps=4, num_stages=6, streamk=True)):
        spec = ops.validate(a, bs[0])
        o = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
        fns = [lambda b=b: ops.launch(a, b, o, spec, cfg) for b in bs]
        us = timeit(fns)
        print(f"{cfg.short():48s}: {us:7.2f} us  {nbytes / us / 1e6:6.3f} TB/s", flush=True)


if __name__ == "__main__":
    t = time.time()
    main()
    print(f"{time.time() - t:.0f} s")
