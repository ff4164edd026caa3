#!/usr/bin/env bash
# Session 20: the MoE decode grid with the blocks of sorted slots as grid x (those past num_tokens_post_padded exit
# between the working CTAs instead of as a tail). Steps: ab (`benchmarks/bench_decode.py --moe --m ${MOE_M:-1,4,16,64}`
# on TREES, default "ab_h ." (ab_h: HEAD exported, untracked), interleaved, ROUNDS rounds), tests
# (tests/test_gpu_moe_gemm.py on the working tree), san (the MoE smoke under memcheck / racecheck / synccheck).
source "$(dirname "$0")/gpu_common.sh" "${1:-ab tests san}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has ab; then
  for rep in $(seq 1 ${ROUNDS:-2}); do
    for tree in ${TREES:-ab_h .}; do
      step "bench_decode --moe, tree $tree, round $rep"
      (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 240 python3 benchmarks/bench_decode.py --moe \
        --m ${MOE_M:-1,4,16,64} --fmts ${MOE_FMTS:-e4m3,e2m1} 2>&1 | grep -E "^\| " | grep -v -E "^\| (gemm|---)")
    done
  done
fi
if has tests; then
  step "GPU tests: MoE decode"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then
  step "sanitizers: MoE smoke"; sanitize tests/support/gpu_moe_gemm_smoke.py
fi
