#!/usr/bin/env bash
# One device call (H100 / H200, < 10 minutes), session 10: the sm90_cublas GEMM path and the GPU dequantizer.
#   (a) pytest: tests/test_gpu_dequant.py, tests/test_gemm_cublas.py (gpu), the shared matrix of tests/test_gpu_gemm.py
#       forced to sm90_cublas and to generic (its kernel gained the gate argument);
#   (b) compute-sanitizer memcheck / racecheck / synccheck on the dequantizer tests and the path's gate tests;
#   (c) timing: benchmarks/cublas_path_dev.py (dequant vs copy, fp32 / bf16 out, crossover over m) and
#       `mxrt bench gemm` on the four main shapes (sm90_cublas beside sm90_ws, compiled dequant + cuBLAS, cuBLAS bf16).
# Logs in $OUT (or ./gpu_out). PART=tests|time|all (default all).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
PART=${PART:-all}
mkdir -p "$OUT"
DEADLINE=${DEADLINE:-570}
step() { echo; echo "=== $* (t=${SECONDS}s)"; }
cap() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; ((left < $1)) && echo "$left" || echo "$1"; }
step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee "$OUT/info.txt"
step "prebuild"
timeout "$(cap 150)" python3 benchmarks/prebuild.py dequantize_mx gemm_mx_generic gemm_mx_sm90_ws gemm_mx_sm90_bf16 \
  mx_gemm_window_check e2m1_to_e4m3 quantize_mx_rowwise preshuffle_scales --jobs 16 2>&1 | tail -3
if [[ $PART != time ]]; then
step "(a) pytest"
timeout "$(cap 200)" python3 -m pytest -q -m gpu tests/test_gpu_dequant.py tests/test_gemm_cublas.py \
  -o filterwarnings=default -p no:cacheprovider -rfE --durations=5 > "$OUT/pytest_a.txt" 2>&1
echo "rc=$?"; tail -20 "$OUT/pytest_a.txt"
timeout "$(cap 200)" python3 -m pytest -q -m gpu tests/test_gpu_gemm.py -k "sm90_cublas or generic" \
  -o filterwarnings=default -p no:cacheprovider -rfE --durations=5 > "$OUT/pytest_b.txt" 2>&1
echo "rc=$?"; tail -20 "$OUT/pytest_b.txt"
step "(b) sanitizers"
for tool in memcheck racecheck synccheck; do
  timeout "$(cap 80)" compute-sanitizer --tool $tool python3 -m pytest -q -m gpu tests/test_gpu_dequant.py \
    tests/test_gemm_cublas.py -k "tails and 7-33 or gate_word or (fallback and scale_low) or fp4_odd_k" \
    -p no:cacheprovider > /tmp/san.txt 2>&1
  rc=$?; { echo "### $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
  echo "$tool rc=$rc: $(grep -E 'passed|failed' /tmp/san.txt | tail -1) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
done
fi
if [[ $PART != tests ]]; then
step "(c) timing"
timeout "$(cap 150)" python3 benchmarks/cublas_path_dev.py 2>&1 | tee "$OUT/dev_time.txt"
timeout "$(cap 240)" python3 -m mxrt.cli bench gemm --shapes 8192x8192x8192,4096x4096x7168,4096x7168x2048,4096x5760x2880 \
  --paths sm90_cublas,sm90_ws --no-triton --no-overhead --json "$OUT/bench_gemm.json" > "$OUT/bench_gemm.txt" 2>&1
echo "rc=$?"; tail -40 "$OUT/bench_gemm.txt"
fi
step "done"
