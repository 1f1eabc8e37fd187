#!/usr/bin/env bash
# Round 7 on the device machine in one call: the Gluon GPU tests (two pytest processes, bf16 and
# fp16) beside the round-7 checks, then the timing (attention_round7.py waits for the tests first).
#   bash benchmarks/attention_round7.sh OUT_DIR COMMIT [attention_round7.py options]
# ROUND=10 (with --set round10) names the logs for round 10; TEST_K narrows the tests (pytest -k).
set -u
out=$1
commit=$2
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src TILECRAFT_COMMIT=$commit PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
    if [ "$dt" = bf16 ]; then sel="not fp16"; else sel="fp16"; fi
    if [ -n "${TEST_K:-}" ]; then sel="($TEST_K) and $sel"; fi
    TILECRAFT_GPU_TESTS=1 timeout "${TEST_LIMIT:-100}" python -m pytest -q -p no:cacheprovider -k "$sel" \
        tests/gpu/test_attention_gluon.py > "$out/attention-gpu-tests-r${ROUND:-7}-$dt-$commit.log" 2>&1 &
    eval "tests_$dt=\$!"
done
# shellcheck disable=SC2154
(while kill -0 "$tests_bf16" 2>/dev/null || kill -0 "$tests_fp16" 2>/dev/null; do sleep 1; done) &
waiter=$!
timeout "${BENCH_LIMIT:-222}" python benchmarks/attention_round7.py "$out" --deadline "${DEADLINE:-190}" \
    --check-deadline "${CHECK_DEADLINE:-95}" --jobs "${JOBS:-6}" --wait-for "$waiter" "${@:3}" 2>&1 \
    | grep -v Warning | tee "$out/attention-round${ROUND:-7}-$commit.log" | tail -60
wait
for dt in bf16 fp16; do echo "gpu tests $dt:"; tail -3 "$out/attention-gpu-tests-r${ROUND:-7}-$dt-$commit.log"; done
