#!/usr/bin/env bash
# Session 10 device call 3 (one H200, < 10 min): the dequantizer with CH = 8 / 16 (timing + ncu), fp16 out and the
# new automatic policy of sm90_cublas (tests), the crossover with m = 384.
source "$(dirname "$0")/gpu_common.sh"
echo "=== prebuild"; python3 benchmarks/prebuild.py dequantize_mx gemm_mx_generic gemm_mx_splitk_reduce gemm_mx_sm90_ws \
  gemm_mx_sm90_bf16 mx_gemm_window_check e2m1_to_e4m3 quantize_mx_rowwise preshuffle_scales --jobs 16 2>&1 | tail -2
echo "=== pytest"
timeout 240 python3 -m pytest -q -m gpu tests/test_gpu_dequant.py tests/test_gemm_cublas.py tests/test_gemm_sm90_bf16.py \
  -p no:cacheprovider -rfE > "$OUT/pytest_a.txt" 2>&1; echo "rc=$?"; tail -4 "$OUT/pytest_a.txt"
timeout 200 python3 -m pytest -q -m gpu tests/test_gpu_gemm.py -k "sm90_cublas or prepared or launch_plans or graph" \
  -p no:cacheprovider -rfE > "$OUT/pytest_b.txt" 2>&1; echo "rc=$?"; tail -4 "$OUT/pytest_b.txt"
echo "=== memcheck (fp16 out, gate)"
timeout 90 compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu tests/test_gemm_cublas.py -k "f16 or float16" \
  -p no:cacheprovider > /tmp/san.txt 2>&1; echo "rc=$? $(grep -E 'passed|failed' /tmp/san.txt | tail -1) | $(grep 'ERROR SUMMARY' /tmp/san.txt)"
echo "=== timing"
timeout 150 python3 benchmarks/cublas_path_dev.py --sections dequant,crossover 2>&1 | tee "$OUT/dev_time.txt"
echo "=== ncu"
timeout 120 ncu --kernel-name dequantize_mx --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section Occupancy python3 benchmarks/cublas_path_dev.py --sections dequant_once \
  > "$OUT/ncu_dequant.txt" 2>&1; echo "rc=$?"
grep -E "dequantize_mx|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Stall|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Compute \(SM\)" "$OUT/ncu_dequant.txt" | head -40
