#!/usr/bin/env bash
# Session 9 device call: (a) sm90_decode's preshuffled scale layouts (issue 12): the new GPU cases and a racecheck on
# the layout staging; (b) the sm90_bf16 path's GPU tests after the call-4 test fixes (its own file and the shared
# matrix forced to it); (c) the decode / MoE-decode / shared GEMM regression files.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
DEADLINE=${DEADLINE:-570}
step() { echo; echo "=== $* (t=${SECONDS}s)"; }
cap() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; ((left < $1)) && echo "$left" || echo "$1"; }
step "prebuild"
timeout "$(cap 200)" python3 benchmarks/prebuild.py gemm_mx_decode_sm90 gemm_mx_sm90_bf16 mx_gemm_window_check \
  e2m1_to_e4m3 --jobs 16 2>&1 | tail -2
step "(a) decode layouts"
timeout "$(cap 200)" python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py -k layout -p no:cacheprovider -rfE \
  > "$OUT/decode_layouts.txt" 2>&1; echo "rc=$?"; tail -6 "$OUT/decode_layouts.txt"
timeout "$(cap 90)" compute-sanitizer --tool racecheck python3 -m pytest -q tests/test_gpu_gemm_decode.py \
  -k "token_and_weight_scale_layouts and aiter32x8" -p no:cacheprovider > /tmp/san.txt 2>&1
echo "racecheck rc=$?: $(grep -E 'passed|failed' /tmp/san.txt | tail -1) | $(grep -E 'RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
step "(b) sm90_bf16"
timeout "$(cap 150)" python3 -m pytest -q -m gpu tests/test_gemm_sm90_bf16.py tests/test_gpu_gemm.py -k sm90_bf16 \
  -p no:cacheprovider -rfE > "$OUT/bf16.txt" 2>&1; echo "rc=$?"; tail -6 "$OUT/bf16.txt"
step "(c) regression"
timeout "$(cap 200)" python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py tests/test_gpu_moe_gemm.py -k "not layout" \
  -p no:cacheprovider -rfE > "$OUT/regress.txt" 2>&1; echo "rc=$?"; tail -6 "$OUT/regress.txt"
step "done"
