#!/usr/bin/env bash
# Device calls of session 11 (issue 11): the grouped GEMMs' torch route (exact dequantisation + torch._grouped_mm,
# mxrt/ops/grouped_gemm_torch.py). Steps (any order): prebuild, tests (the route's GPU tests, the grouped suites on
# auto and forced kernels), smoke (memcheck / racecheck / synccheck of the grouped smoke: the generic kernel's new
# gate argument), bench (bench_grouped_gemm.py: auto = the route, events timing; BENCH_ARGS appended), bench_ws
# (the grouped engine alone, fwd / dgrad, for the A/B in the same run). Logs under $OUT.
#   bash benchmarks/gpu_s11_torch_route.sh "prebuild tests smoke"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests}"
step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has prebuild; then
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_mx_grouped_generic gemm_mx_grouped_sm90_ws gemm_mx_grouped_sm90 \
    e2m1_to_e4m3 dequantize_mx --jobs 16 2>&1 | tail -4
fi
if has tests; then
  step "pytest the torch route"
  timeout ${T_ROUTE:-240} python3 -m pytest -q -m gpu tests/test_gpu_grouped_torch.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_route.txt" | tail -25
  step "pytest grouped (auto: the route for bf16 out)"
  timeout ${T_AUTO:-240} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm.py tests/test_torch_grouped.py \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_auto.txt" | tail -15
  step "pytest grouped engine + older Hopper kernel (forced: sm90)"
  timeout ${T_SM90:-240} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm_sm90.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_sm90.txt" | tail -8
fi
if has smoke; then
  step "grouped smoke + compute-sanitizer"
  timeout 60 python3 tests/support/gpu_grouped_gemm_smoke.py 2>&1 | tail -2
  for tool in memcheck racecheck synccheck; do
    extra=""; quick=""; [[ $tool == memcheck ]] && extra="--leak-check no"; [[ $tool == racecheck ]] && quick="--quick"
    timeout ${T_SAN:-150} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_grouped_gemm_smoke.py $quick \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' "$OUT/san_$tool.txt" | tail -2 | tr '\n' ' ')"
  done
  step "memcheck: the route's gate cases (dequant + torch._grouped_mm + gated fallback)"
  timeout ${T_SAN:-150} compute-sanitizer --tool memcheck --leak-check no python3 -m pytest -q -m gpu \
    tests/test_gpu_grouped_torch.py -k "inexact or device_lens or k_tails" -p no:cacheprovider > "$OUT/san_route.txt" 2>&1
  echo "route memcheck rc=$? $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/san_route.txt" | tail -2 | tr '\n' ' ')"
fi
if has bench; then
  step "bench_grouped_gemm auto (the torch route) ${BENCH_ARGS:-}"
  timeout ${T_BENCH:-330} python3 benchmarks/bench_grouped_gemm.py --json "$OUT/bench_route.json" ${BENCH_ARGS:-} 2>&1 \
    | grep -v "^  " | tail -60
fi
if has bench_ws; then
  step "bench_grouped_gemm --kernel sm90 (the engine) ${BENCH_WS_ARGS:-}"
  timeout ${T_BENCH_WS:-300} python3 benchmarks/bench_grouped_gemm.py --kernel sm90 --passes fwd,dgrad \
    --json "$OUT/bench_ws.json" ${BENCH_WS_ARGS:-} 2>&1 | grep -v "^  " | tail -40
fi
