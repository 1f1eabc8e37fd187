#!/usr/bin/env bash
# The checks that stand between the GEMM's new cluster handshake (commit 1df53db, reverted until it has run on a GPU:
# hardware cluster barriers, a four-warp producer;
# compiled and checked in PTX on 2026-11-30 but not yet run on a GPU) and `TILECRAFT_GEMM_CLUSTER` defaulting to 1
# (docs/gemm.md, follow-up 31). One device call of about 5 minutes on an sm90 GPU; every step time-limited, so a hang
# costs its limit, not the session.
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
