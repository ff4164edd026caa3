#!/usr/bin/env bash
# Session 16 (issue 11): DeepGEMM's Hopper recipe (float32 scales) on the grouped engine (SCALE_F32 builds of
# kernels_src/gemm/gemm_mx_grouped_sm90_ws.hip) and the k-grouped wgrad on the sm90_bf16 route. Steps (any order):
# prebuild, tests (the recipe's GPU file, the grouped suite's DeepGEMM tests on auto, the route's file), smoke (memcheck / racecheck / synccheck of
# tests/support/gpu_deepgemm_f32_smoke.py), bench (benchmarks/bench_deepgemm_api.py on auto), bench_generic (its first
# shapes on the generic kernel these calls ran on before). Logs under $OUT.
#   bash benchmarks/gpu_s16.sh "prebuild tests smoke bench"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests}"
step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has prebuild; then
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_mx_grouped_sm90_ws gemm_mx_grouped_generic gemm_wgrad_bf16_sm90 \
    kgrouped_to_bf16 grouped_offsets dequantize_mx ${PREBUILD_MORE:-} \
    --jobs 16 2>&1 | tail -2
fi
if has tests; then
  step "pytest DeepGEMM Hopper recipe on the engine"
  timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu tests/test_gpu_deepgemm_hopper_recipe.py -x \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_recipe.txt" | tail -25
  step "pytest grouped suite, DeepGEMM calls (auto)"
  timeout ${T_AUTO:-200} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm.py tests/test_gpu_grouped_gemm_sm90.py \
    -k "deepgemm or masked or indices" -p no:cacheprovider 2>&1 | tee "$OUT/pytest_auto.txt" | tail -8
  step "pytest the bf16 route's own file"
  timeout ${T_ROUTE:-200} python3 -m pytest -q -m gpu tests/test_gpu_grouped_wgrad_bf16.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_route.txt" | tail -8
fi
if has smoke; then
  step "DeepGEMM f32 smoke + compute-sanitizer"
  sanitize tests/support/gpu_deepgemm_f32_smoke.py
fi
if has bench; then
  step "bench DeepGEMM API, Hopper recipe (auto)"
  timeout ${T_BENCH:-200} python3 benchmarks/bench_deepgemm_api.py --json "$OUT/bench_deepgemm.json" 2>&1 \
    | tee "$OUT/bench_deepgemm.txt" | tail -12
fi
if has bench_graph; then
  step "bench DeepGEMM API, CUDA-graph replays both sides (kernel time)"
  timeout ${T_BENCH:-240} python3 benchmarks/bench_deepgemm_api.py --timing graph --json "$OUT/bench_deepgemm_graph.json" \
    2>&1 | tee "$OUT/bench_deepgemm_graph.txt" | tail -14
fi
if has ncu_kg; then
  step "ncu: the k-grouped MODE 2 kernel on the first k-grouped shape"
  timeout 200 ncu -k regex:gemm_wgrad_bf16_sm90 -s 3 -c 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats \
    --metrics "regex:smsp__pcsamp_warps_issue_stalled_.*,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" \
    python3 benchmarks/bench_deepgemm_api.py --layouts k-grouped --quick --reps 1 > "$OUT/ncu_kg.txt" 2>&1
  grep -E "Duration|Compute \(SM\)|Memory Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers|hmma_cycles" \
    "$OUT/ncu_kg.txt" | head -14
  grep -E "pcsamp_warps_issue_stalled" "$OUT/ncu_kg.txt" | awk '$NF+0 > 500' | sort -k3 -n -r | head -10
fi
if has bench_generic; then
  step "bench DeepGEMM API on the generic kernel (--quick)"
  timeout ${T_BENCH:-200} python3 benchmarks/bench_deepgemm_api.py --kernel generic --quick --reps 2 2>&1 | tail -5
fi
