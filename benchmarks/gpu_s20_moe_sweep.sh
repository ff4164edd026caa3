#!/usr/bin/env bash
# Session 20: the MoE decode builds (kw, stages, rt) on the bench's cells (benchmarks/dev_moe_sweep.py; SWEEP_ARGS),
# then tests/test_gpu_moe_gemm.py (TESTS=0 skips it) and the MoE smoke under the sanitizers (SAN=1).
source "$(dirname "$0")/gpu_common.sh" "${1:-sweep tests}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has sweep; then step "MoE builds sweep"; timeout 400 python3 benchmarks/dev_moe_sweep.py ${SWEEP_ARGS:-}; fi
if has tests; then
  step "GPU tests: MoE decode"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then step "sanitizers: MoE smoke"; sanitize tests/support/gpu_moe_gemm_smoke.py; fi
