"""Run the GPU tests in several pytest processes at once on one GPU machine.

Most of the GPU tests' time is compiling kernels on the CPU (the machine has 16 cores), so shards of
the collected test ids run side by side finish several times sooner than one process:

    TILECRAFT_GPU_TESTS=1 python benchmarks/gpu_tests_parallel.py --shards 6 --log-dir $OUT \\
        tests/gpu tests/wave/test_wave_gpu.py

Each shard writes ``gpu-tests-shardN.log``; the last lines say how many passed, failed and errored in
all, and the exit code is 0 only when every shard passed.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def collect(paths: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
                         capture_output=True, text=True, check=False)
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        sys.exit(f"no tests collected from {paths}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--log-dir", type=Path, default=Path("."))
    ap.add_argument("--timeout", type=float, default=None, help="seconds before the shards are stopped")
    args = ap.parse_args()
    if os.environ.get("TILECRAFT_GPU_TESTS") != "1":
        sys.exit("set TILECRAFT_GPU_TESTS=1 (and run on a GPU machine)")
    ids = collect(args.paths)
    shards = [ids[i::args.shards] for i in range(args.shards) if ids[i::args.shards]]
    args.log_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    procs = []
    for i, shard in enumerate(shards):
        log = open(args.log_dir / f"gpu-tests-shard{i}.log", "w")
        procs.append((subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *shard],
                                       stdout=log, stderr=subprocess.STDOUT), log))
    print(f"{len(ids)} tests in {len(shards)} shards", flush=True)
    failed = False
    for proc, log in procs:
        try:
            left = None if args.timeout is None else max(1.0, args.timeout - (time.time() - start))
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            failed = True
        log.close()
    totals: dict[str, int] = {}
    for i in range(len(shards)):
        text = (args.log_dir / f"gpu-tests-shard{i}.log").read_text()
        tail = text.strip().splitlines()[-1] if text.strip() else "(no output)"
        print(f"shard {i}: {tail}")
        for n, what in re.findall(r"(\d+) (passed|failed|errors?|skipped)", tail):
            totals[what] = totals.get(what, 0) + int(n)
    failed = failed or any(p.returncode != 0 for p, _ in procs)
    print(f"all shards: {totals} in {time.time() - start:.0f} s of {len(ids)} collected"
          + ("" if not failed else "  (NOT all passed)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
