#!/usr/bin/env bash
# One device call (H100 / H200, < 10 minutes) that proves the sm90_bf16 GEMM path (the issue-10 bf16 route):
#   (a) its GPU tests: tests/test_gemm_sm90_bf16.py (window data, the window check's exact fallback, layouts,
#       auto-selection + CUDA-graph capture) and the shared matrix of tests/test_gpu_gemm.py forced to sm90_bf16;
#   (b) compute-sanitizer memcheck / racecheck / synccheck on the development check (--quick) and memcheck on the
#       fallback tests;
#   (c) timing: the development script's rows (fp32 / bf16 out beside sm90_ws, generic fp32, cuBLAS bf16 and
#       compiled dequantize + cuBLAS).
# Logs in $OUT (or ./gpu_out). Usage on the device: bash benchmarks/gpu_bf16_path.sh
source "$(dirname "$0")/gpu_common.sh"
DEADLINE=${DEADLINE:-570}
step() { echo; echo "=== $* (t=${SECONDS}s)"; }
cap() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; ((left < $1)) && echo "$left" || echo "$1"; }
step "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  git log --oneline -1 2>/dev/null; } 2>&1 | tee "$OUT/info.txt"
step "prebuild"
timeout "$(cap 120)" python3 benchmarks/prebuild.py gemm_mx_sm90_bf16 mx_gemm_window_check e2m1_to_e4m3 gemm_mx_generic \
  --jobs 16 2>&1 | tail -2
step "(a) pytest"
timeout "$(cap 240)" python3 -m pytest -q -m gpu tests/test_gemm_sm90_bf16.py tests/test_gpu_gemm.py -k sm90_bf16 \
  -o filterwarnings=default -p no:cacheprovider -rfE --durations=6 > "$OUT/pytest.txt" 2>&1
echo "rc=$?"; tail -25 "$OUT/pytest.txt"
step "(b) sanitizers"
for tool in memcheck racecheck synccheck; do
  timeout "$(cap 70)" compute-sanitizer --tool $tool python3 benchmarks/gemm_sm90_bf16_dev.py --sections check --quick \
    --rings 4 > /tmp/san.txt 2>&1
  rc=$?; { echo "### dev check $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
  echo "$tool rc=$rc: $(grep -E 'check: ' /tmp/san.txt | tail -1) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
done
timeout "$(cap 90)" compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu tests/test_gemm_sm90_bf16.py \
  -k "fallback and float32" -p no:cacheprovider > /tmp/san.txt 2>&1
rc=$?; { echo "### fallback memcheck rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
echo "fallback memcheck rc=$rc: $(grep -E 'passed|failed' /tmp/san.txt | tail -1) | $(grep -E 'ERROR SUMMARY' /tmp/san.txt | tail -1)"
step "(c) timing"
timeout "$(cap 200)" python3 benchmarks/gemm_sm90_bf16_dev.py --sections time --rings 4 --regs 72 \
  --json "$OUT/bf16_time.json" > "$OUT/bf16_time.txt" 2>&1
echo "rc=$?"; sed -n '/== summary ==/,$p' "$OUT/bf16_time.txt"
step "done"
