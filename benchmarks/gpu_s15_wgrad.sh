#!/usr/bin/env bash
# Session 15 (issue 11): the bf16 wgrad route sm90_bf16 (mxrt/ops/grouped_wgrad_bf16.py, kernels_src/gemm/
# gemm_wgrad_bf16_sm90.hip). Steps (any order): prebuild, tests (its GPU file, then the auto wgrad tests of the grouped
# suite), smoke (memcheck / racecheck / synccheck of tests/support/gpu_wgrad_bf16_smoke.py), bench (bench_grouped_gemm
# --passes wgrad: float32 out on auto), bench_fwd (fwd / dgrad float32 out), bench_bf16 (bfloat16 wgrad on this
# route against the torch route). Logs under $OUT.
#   bash benchmarks/gpu_s15_wgrad.sh "prebuild tests bench"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests}"
step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has prebuild; then
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_wgrad_bf16_sm90 grouped_offsets dequantize_mx \
    gemm_mx_grouped_generic quantize_mx_grouped quantize_mx_grouped_rowcol ${PREBUILD_MORE:-} --jobs 16 2>&1 | tail -2
fi
if has tests; then
  step "pytest grouped wgrad bf16 route ${T_K:-}"
  timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu tests/test_gpu_grouped_wgrad_bf16.py ${T_K:+-k "$T_K"} -x \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_wgrad.txt" | tail -25
  step "pytest grouped suite, wgrad (auto)"
  timeout ${T_AUTO:-200} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm.py tests/test_gpu_grouped_torch.py \
    -k wgrad -p no:cacheprovider 2>&1 | tee "$OUT/pytest_auto.txt" | tail -8
fi
if has smoke; then
  step "wgrad bf16 smoke + compute-sanitizer"
  sanitize tests/support/gpu_wgrad_bf16_smoke.py
fi
if has bench; then
  for bn in ${WGRAD_BN:-0}; do  # tile widths (0: the default)
    step "bench wgrad float32 (auto: this route), BN $bn (0: default)"
    timeout ${T_BENCH:-200} python3 benchmarks/bench_grouped_gemm.py --passes wgrad --wgrad-out float32 --no-fp8 \
      --wgrad-bn $bn --budget-s ${BUDGET:-100} --timing ${TIMING:-events} \
      --json "$OUT/bench_wgrad_f32_$bn.json" 2>&1 \
      | tee "$OUT/bench_wgrad_f32_$bn.txt" | tail -34
  done
fi
if has bench_fwd; then
  step "bench fwd / dgrad float32 out (auto: this route)"
  timeout ${T_BENCH:-200} python3 benchmarks/bench_grouped_gemm.py --passes fwd,dgrad --fwd-out float32 --no-fp8 \
    --budget-s ${BUDGET:-100} --timing ${TIMING:-events} --json "$OUT/bench_fwd_f32.json" 2>&1 \
    | tee "$OUT/bench_fwd_f32.txt" | tail -34
fi
if has bench_bf16; then
  step "bench wgrad bfloat16 on this route (MXRT_GROUPED_GEMM_KERNEL=sm90_bf16)"
  timeout ${T_BENCH:-200} python3 benchmarks/bench_grouped_gemm.py --passes wgrad --kernel sm90_bf16 --no-fp8 \
    --budget-s ${BUDGET:-100} --json "$OUT/bench_wgrad_bf16.json" 2>&1 | tee "$OUT/bench_wgrad_bf16.txt" | tail -30
fi
