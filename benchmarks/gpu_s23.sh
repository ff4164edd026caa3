#!/usr/bin/env bash
# Session 23: e2m1 weights as f16 operands in the sm_90a decode body (no ptxas fp8 unpack / FADD) and the MoE gather's
# sources kept in registers. Steps: ab (bench_decode.py --moe, then the dense TP-1 e2m1 cells, on TREES, default
# "ab_h . ab_h ." (ab_h: HEAD exported, untracked, passed in carry)), moe (tests/test_gpu_moe_gemm.py), dense (the dense
# decode and weight-layout GPU files, e2m1 cases), san (the MoE and weight-layout smokes under the sanitizers), sweep
# (dev_moe_sweep.py on SWEEP_ARGS, working tree).
source "$(dirname "$0")/gpu_common.sh" "${1:-ab moe}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has ab; then
  for tree in ${TREES:-ab_h . ab_h .}; do
    step "bench_decode --moe, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 benchmarks/bench_decode.py --moe \
      --m ${MOE_M:-1,4,16,64} --fmts ${MOE_FMTS:-e4m3,e2m1} 2>&1 | grep -E "^\| " | grep -v -E "^\| (gemm|---)")
    step "bench_decode dense e2m1, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 150 python3 benchmarks/bench_decode.py --tp 1 \
      --m ${DENSE_M:-1,8,16} --fmts e2m1 --no-peers 2>&1 | grep -E "^\| " | grep -v -E "^\| (model|---)" \
      | awk -F'|' '{print $2,$3,$5,$6,$9,$10}')
  done
fi
if has moe; then
  step "GPU tests: MoE decode"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | tail -3
fi
if has dense; then
  step "GPU tests: dense decode and weight layout, e2m1"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py tests/test_gpu_gemm_weight_layout.py \
    -k "e2m1" -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then
  step "sanitizers: MoE smoke"; sanitize tests/support/gpu_moe_gemm_smoke.py
  step "sanitizers: weight-layout smoke"; sanitize tests/support/gpu_weight_layout_smoke.py
fi
if has sweep; then
  step "MoE sweep: ${SWEEP_ARGS:-}"
  timeout 300 python3 benchmarks/dev_moe_sweep.py ${SWEEP_ARGS:-} 2>&1 | tail -40
fi
