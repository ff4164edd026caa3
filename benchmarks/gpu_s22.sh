#!/usr/bin/env bash
# Session 22: weights in aiter's 16x16 layout read in place (issue 12). Steps: wl (tests/test_gpu_gemm_weight_layout.py
# and the dense decode file), bench (bench_decode.py --weight-layout aiter16x16 on the issue cell or BENCH_ARGS: the
# shuffled call against the row-major weight on the same path, cuBLAS bf16), san (the weight-layout smoke under the
# sanitizers).
source "$(dirname "$0")/gpu_common.sh" "${1:-wl bench san}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has wl; then
  step "GPU tests: weights in the aiter 16x16 layout"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_gemm_weight_layout.py -p no:cacheprovider -x 2>&1 | tail -15
fi
if has decode; then
  step "GPU tests: dense decode"
  timeout 500 python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py -p no:cacheprovider 2>&1 | tail -5
fi
if has bench; then
  step "bench: shuffled weights vs row-major on the same path"
  timeout 400 python3 benchmarks/bench_decode.py ${BENCH_ARGS:---quick --m 1,4,16,64} --weight-layout aiter16x16 \
    --json "$OUT/wl_bench.json" 2>&1 | grep -v "^  \|^    " | tail -40
fi
if has san; then
  step "sanitizers: the weight-layout smoke"; sanitize tests/support/gpu_weight_layout_smoke.py
fi
