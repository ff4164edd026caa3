#!/usr/bin/env bash
# Session 25 (issue 12: the sm_90a decode body's stage head, and its per-lane promotion choice). Steps:
#   old    the tests named by OLD_K (default: the one-row-leaves-the-window tests) on the HEAD export ab_h (carry), each
#          test id in its own process under a timeout (a hang shows as rc 124)
#   tests  the GPU files in TEST_FILES (default: dense decode + MoE) on this tree, test ids spread over PAR processes
#   san    the MoE smoke and the GEMM smoke (the dense decode cases among them) under the sanitizers
#   ab     bench_decode.py --moe on TREES (default "ab_h . ab_h ."), MoE rows only
#   dense  bench_decode.py (dense cells, DENSE_ARGS) on TREES
#   ncu    ncu of one dense decode cell (NCU_M x NCU_NK, NCU_FMT) on NCU_TREES (default "ab_h .")
#   sweep  dev_moe_sweep.py on SWEEP_ARGS
source "$(dirname "$0")/gpu_common.sh" "${1:-old tests}"
nvidia-smi --query-gpu=name --format=csv,noheader
# par_tests TREE TIMEOUT FILES... [-k EXPR]: every collected test id in its own pytest process (benchmarks/par_pytest.py),
# PAR at a time: the outcome counts and every id that did not pass (a hang shows as a time-out)
par_tests() {
  local tree=$1 to=$2; shift 2
  (cd "$tree" && PYTHONPATH=$PWD:$PWD/tests python3 "$OLDPWD/benchmarks/par_pytest.py" --par "${PAR:-12}" --timeout "$to" "$@")
}
if has old; then
  step "HEAD kernels (ab_h): ${OLD_K:-one_row_or_token}"
  par_tests ab_h ${T_OLD:-120} tests/test_gpu_gemm_decode.py tests/test_gpu_moe_gemm.py -k "${OLD_K:-one_row_or_token}"
fi
if has tests; then
  step "GPU tests on this tree: ${TEST_FILES:-tests/test_gpu_gemm_decode.py tests/test_gpu_moe_gemm.py}"
  par_tests . ${T_TEST:-300} ${TEST_FILES:-tests/test_gpu_gemm_decode.py tests/test_gpu_moe_gemm.py} ${TEST_K:+-k "$TEST_K"}
fi
if has san; then
  step "sanitizers: MoE smoke"; sanitize tests/support/gpu_moe_gemm_smoke.py
  step "sanitizers: GEMM smoke on sm90_decode"; sanitize tests/support/gpu_gemm_smoke.py --path sm90_decode
fi
if has ab; then  # bench_decode.py --moe on each tree of TREES, MoE rows only
  for tree in ${TREES:-ab_h . ab_h .}; do
    step "bench_decode --moe, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 benchmarks/bench_decode.py --moe \
      --m ${MOE_M:-1,4,16,64} --fmts ${MOE_FMTS:-e4m3,e2m1} 2>&1 | grep -E "^\| " | grep -v -E "^\| (gemm|---)")
  done
fi
if has dense; then  # bench_decode.py dense cells on each tree of TREES
  for tree in ${TREES:-ab_h . ab_h .}; do
    step "bench_decode ${DENSE_ARGS:-}, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 250 python3 benchmarks/bench_decode.py ${DENSE_ARGS:-} 2>&1 \
      | grep -E "^\| " | grep -v -E "^\| (model|---)")
  done
fi
if has ncu; then  # ncu of one dense decode cell (NCU_NK, NCU_M, NCU_FMT) per tree of NCU_TREES: the auto build
  for tree in ${NCU_TREES:-ab_h .}; do
    step "ncu, dense decode ${NCU_M:-1} x ${NCU_NK:-36864x7168} ${NCU_FMT:-e4m3}, tree $tree"
    (cd $tree && NK=${NCU_NK:-36864x7168} PYTHONPATH=$PWD:$PWD/tests timeout 200 ncu -k regex:gemm_mx_decode_sm90 -s 2 -c 1 \
      --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis python3 "$OLDPWD/benchmarks/ncu_decode.py" \
      ${NCU_M:-1} ${NCU_FMT:-e4m3} 2>&1 | grep -E "Duration|Throughput|Issue|Eligible|Active Warps|Registers|Block Limit|Waves|Stall|Achieved|Warp Cycles|Grid Size|Hit Rate" | head -40)
  done
fi
if has sweep; then  # dev_moe_sweep.py on SWEEP_ARGS
  step "MoE sweep: ${SWEEP_ARGS:-}"
  (export PYTHONPATH=$PWD:$PWD/tests:$PWD/benchmarks; timeout 300 python3 benchmarks/dev_moe_sweep.py ${SWEEP_ARGS:-} 2>&1 | tail -30)
fi
