#!/usr/bin/env bash
# Session 8 device call 4 (nvidia-h200-x2): sm90_ws racecheck after the every-lane arrivals + a speed recheck, then
# benchmarks/gpu_ep_w2.sh (fused combine + the dispatch's gather-before-sync) with top-8 bench rows at T 4096 / 16384.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
echo "=== sm90_ws racecheck (gemm smoke forced to sm90_ws)"
python3 benchmarks/prebuild.py gemm_mx_sm90_ws e2m1_to_e4m3 moe_combine --jobs 16 2>&1 | tail -1
timeout 120 compute-sanitizer --tool racecheck python3 tests/support/gpu_gemm_smoke.py --path sm90_ws > "$OUT/ws_racecheck.txt" 2>&1
echo "racecheck rc=$? $(grep -E 'gpu_gemm_smoke:' "$OUT/ws_racecheck.txt" | tail -1) | $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/ws_racecheck.txt" | tail -1)"
echo "=== sm90_ws speed after the change"
timeout 90 python3 -m mxrt.cli bench gemm --shapes 8192x8192x8192,4096x7168x2048 --formats mxfp8 --paths sm90_ws,sm90_wgmma \
  --no-triton --no-overhead --no-progress --budget-s 60 2>&1 | grep -E "^\|" | grep -E "sm90|compiled"
BENCH_TOKENS="4096 16384" bash benchmarks/gpu_ep_w2.sh
