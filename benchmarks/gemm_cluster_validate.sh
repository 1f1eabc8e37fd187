#!/usr/bin/env bash
# The GPU checks of the GEMM's cluster handshake (hardware cluster barriers at start and exit, the producer one warp and
# Gluon's padding warps as partitions that meet the cluster; docs/gemm.md, follow-ups 31 and 32): the cluster GPU
# tests, the 1000^3 probe with and without the cluster, and Nsight Compute's kernel replay (which hung on the first
# handshake). Passed on an H200 on 2026-11-30 (e06c995, bfbbb13). One device call of about 1-2 minutes on an sm90 GPU;
# every step time-limited, so a hang costs its limit, not the session.
# Usage (device machine, repository root): OUT=<folder> bash benchmarks/gemm_cluster_validate.sh
set -u
out=${OUT:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
# 1. correctness: every cluster case against float64, bit-equal to the tile without the cluster, the trap test
TILECRAFT_GPU_TESTS=1 timeout 180 python -m pytest -q -x tests/gpu/test_gemm_gluon.py -k cluster \
  > "$out/gpu-tests-cluster.log" 2>&1
echo "1. cluster GPU tests rc $? (124: hung)"; tail -2 "$out/gpu-tests-cluster.log"
# 2. the speed with the four-warp producer: 1000^3 NT / TT with and without the cluster, alternating rounds
timeout 150 python benchmarks/gemm_cluster_probe.py --out "$out" --rounds 2 --cases short > "$out/gemm-cluster-probe.log" 2>&1
echo "2. probe rc $?"; grep -E " x[0-9]|host time|relative errors" "$out/gemm-cluster-probe.log"
# 3. the profiler's kernel replay, which hung on the earlier handshake (each run stops after 150 s)
if command -v ncu >/dev/null 2>&1; then
  bash benchmarks/gemm_ncu.sh cluster "$out"
fi
