#!/usr/bin/env bash
# Device call of session 12 (issue 11): the grouped torch route's call plans (mxrt/api/grouped_gemm.py) and the
# second peer torch._scaled_grouped_mm (fp8 rowwise) in bench_grouped_gemm.py. ~4 min on an H200 (fresh machine).
# Steps (any order; default all): prebuild, tests (the route's GPU tests with the new test_plan_* cases, the grouped
# suite on auto, the CPU plan tests), profile (host us per eager call, MXRT_GROUPED_PLANS=0 vs 1 interleaved),
# bench_ab (gpt-oss B = 4 rows with plans off, bf16 peer only: the "before" ratios on this machine), bench (all
# shapes within BENCH_BUDGET s, plans on, both peers). Logs under $OUT.
#   bash benchmarks/gpu_s12_grouped_host.sh "prebuild tests profile bench_ab bench"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests profile bench_ab bench}"
step device
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
if has prebuild; then
  step prebuild
  timeout ${T_PREBUILD:-150} python3 benchmarks/prebuild.py gemm_mx_grouped_generic gemm_mx_grouped_sm90_ws \
    gemm_mx_grouped_sm90 dequantize_mx grouped_offsets e2m1_to_e4m3 quantize_mx_rowwise quantize_mx_grouped \
    quantize_mx_grouped_offsets quantize_mx_dual_grouped --jobs 16 2>&1 | tail -4
fi
if has tests; then
  step "pytest the torch route + its call plans (test_plan_*)"
  timeout ${T_ROUTE:-150} python3 -m pytest -q -m gpu tests/test_gpu_grouped_torch.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_route.txt" | tail -25
  step "pytest grouped (auto: the route for bf16 out, plans on) + CPU plan tests"
  timeout ${T_AUTO:-120} python3 -m pytest -q tests/test_gpu_grouped_gemm.py tests/test_grouped_plans.py \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_auto.txt" | tail -12
fi
if has profile; then
  step "profile_route_host: plans off vs on"
  timeout ${T_PROFILE:-90} python3 benchmarks/profile_route_host.py 2>&1 | tee "$OUT/profile_route_host.txt" \
    | grep -v "^ *$" | head -75
fi
if has bench_ab; then
  step "bench_grouped_gemm gpt-oss B=4, MXRT_GROUPED_PLANS=0 (before), bf16 peer only"
  MXRT_GROUPED_PLANS=0 timeout ${T_BENCH_AB:-60} python3 benchmarks/bench_grouped_gemm.py --shapes gpt-oss \
    --budget-s ${BENCH_AB_BUDGET:-15} --no-fp8 --json "$OUT/bench_plans_off.json" 2>&1 | grep -v "^  " | tail -20
fi
if has bench; then
  step "bench_grouped_gemm (plans on, bf16 + fp8 rowwise peers) ${BENCH_ARGS:-}"
  timeout ${T_BENCH:-130} python3 benchmarks/bench_grouped_gemm.py --budget-s ${BENCH_BUDGET:-80} \
    --json "$OUT/bench_route_fp8.json" ${BENCH_ARGS:-} 2>&1 | grep -v "^  [A-Za-z]" | tail -80
fi
