#!/usr/bin/env bash
# The H200-only changes of 2026-11-28 (twelfth and thirteenth sessions), timed on another card (meant for an H100)
# in one device call of about 6 minutes (SECTION=stencil), and about 8 for the attention runs (SECTION=attention): each default against what it replaced, in the same run, every case
# checked against float64 (or the default's bits) before it is timed.
#   * fp32 order 8's ring with two elements a thread (73.4% against 69.8% of copy on an H200), and the order-8
#     rings' longer marches (ring_block_z: fp32 256, fp64 512 planes at 520^3);
#   * the plain wave step's ring on large boxes (ops.wave.ring_box), launched and from CUDA graphs;
#   * the CPML step at widths 12 / 20 / 10 with 128-byte rows;
#   * (2026-11-29) fp64 order 8's 512-plane marches with a CTA barrier every second plane (83.3-83.9% against
#     81.3-81.9% with mbarriers on an H200): `auto` against `ring-bz512`, the mbarrier ring it replaced; fp32 order 8's
#     one program per tile on 520^2 planes (74.3-74.7% against 73.5-74.1 on an H200, 75.3 against 66.5-67.5 on
#     1032 x 520^2): `auto` against `ring-bz256` / `ring-bz512`, what it took before.
# Usage (device machine, repository root): OUT=<folder> SECTION=stencil|attention|gemm bash benchmarks/h100_followups.sh
# (the two together pass the device's 10-minute limit on one call)
set -u
out=${OUT:-/tmp}
export PYTHONPATH=${PYTHONPATH:-src}
if [ "${SECTION:-stencil}" = stencil ]; then
timeout 150 python benchmarks/stencil_auto_ab.py --out "$out" --rounds 3 --tag=-followups-o8 --cases fp32-o8,fp64-o8 \
  --variants auto,ring-bz256-w16-v0-d3-s2,ring-w16-v0-d3-s2,ring > "$out/followups-o8.log" 2>&1
echo "stencil rc $?"
grep -E "==|%" "$out/followups-o8.log" | sed 's/ regs=\([0-9]*\).*spread=/ r\1 sp=/'
timeout 100 python benchmarks/stencil_auto_ab.py --out "$out" --rounds 3 --tag=-followups-f64o8 \
  --cases fp64-o8,fp64-o8-tall --variants auto,ring-bz512 > "$out/followups-f64o8.log" 2>&1
echo "fp64 o8 rc $?"
grep -E "==|%" "$out/followups-f64o8.log" | sed 's/ regs=\([0-9]*\).*spread=/ r\1 sp=/'
timeout 100 python benchmarks/stencil_auto_ab.py --out "$out" --rounds 3 --tag=-followups-f32o8-bz \
  --cases fp32-o8,fp32-o8-tall --variants auto,ring-bz256,ring-bz512 > "$out/followups-f32o8-bz.log" 2>&1
echo "fp32 o8 planes rc $?"
grep -E "==|%" "$out/followups-f32o8-bz.log" | sed 's/ regs=\([0-9]*\).*spread=/ r\1 sp=/'
timeout 200 python benchmarks/wave_ring_bz.py --ring-vs-zwin --graphs 0,1 --boundaries none --sizes 384,512,640 \
  --rounds 2 --out "$out" > "$out/followups-ring.log" 2>&1
echo "wave ring rc $?"
grep -E "^median" "$out/followups-ring.log"
timeout 150 python benchmarks/wave_pml_width.py --widths 12,20,10 --rounds 2 --out "$out" > "$out/followups-pml.log" 2>&1
echo "pml width rc $?"
tail -12 "$out/followups-pml.log"
fi
# (2026-11-30) attention forward: the named-barrier turns and slots (Round 20) and the lazy rescale by warp vote
# (Round 21) on the H100, each implementation timed after 0.3 s untimed (`--settle`): the public command over the
# issue's shapes, then the defaults against the same configs rescaling every key tile (`--set round21c`).
if [ "${SECTION:-stencil}" = attention ]; then
timeout 300 python -m tilecraft attention bench --direction fwd --rounds 5 \
  --out "$out/attention-bench-fwd-h100.json" > "$out/attention-bench-fwd-h100.log" 2>&1
echo "attention bench rc $?"
grep -E "│" "$out/attention-bench-fwd-h100.log" | cut -c1-120
timeout 250 python benchmarks/attention_round7.py "$out" --set round21c --shapes d128,d256,d128c,d256c,d64 --rounds 5 \
  --budget 0.4 --settle 0.3 --deadline 220 > "$out/attention-round21c-h100.log" 2>&1
echo "attention round21c rc $?"
grep -E "TFLOP" "$out/attention-round21c-h100.log" | sort -u
fi
# (2026-11-30, twenty-sixth session) the GEMM's clusters of two CTAs sharing B by multicast (cluster_m=2), measured
# on an H200 only: 1000^3 against the same tile without, every layout, then the odd suite through `matmul`'s dispatch.
if [ "${SECTION:-stencil}" = gemm ]; then
TILECRAFT_GPU_TESTS=1 timeout 150 python -m pytest -q tests/gpu/test_gemm_gluon.py -k cluster > "$out/gpu-tests-cluster-h100.log" 2>&1
echo "cluster GPU tests rc $?"; tail -2 "$out/gpu-tests-cluster-h100.log"
timeout 150 python benchmarks/gemm_cluster_probe.py --out "$out" --rounds 2 --cases short > "$out/gemm-cluster-probe-h100.log" 2>&1
echo "cluster probe rc $?"; grep -E " x[0-9]" "$out/gemm-cluster-probe-h100.log"
timeout 250 python -m tilecraft gemm bench --suite odd --dtype bf16,fp16 --layouts NN,NT,TN,TT \
  --out "$out/gemm-bench-odd-h100.json" > "$out/gemm-bench-odd-h100.log" 2>&1
echo "odd suite rc $?"; grep -E "│" "$out/gemm-bench-odd-h100.log" | cut -c1-100
fi
