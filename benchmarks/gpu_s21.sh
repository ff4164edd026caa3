#!/usr/bin/env bash
# Session 21. Steps: moe (tests/test_gpu_moe_gemm.py: the sm_90a MoE path after the AMD dispatch), grouped
# (tests/test_gpu_grouped_gemm_sm90.py: the engine, with its call-plan test), bf16 (tests/test_gpu_grouped_wgrad_bf16.py:
# the bf16 route, with its call-plan test), host (benchmarks/engine_plan_host.py: eager engine / bf16-route calls,
# plans off / on), san (the bf16 route's smoke, every call twice, under the sanitizers), decode (the dense decode
# GPU files after the tuned table's weight-format key), groupedall (the other grouped GPU files: the torch route's
# plans after prepare_route's change, DeepGEMM's entry points, the generic grouped kernels).
source "$(dirname "$0")/gpu_common.sh" "${1:-moe grouped host}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has moe; then
  step "GPU tests: MoE decode"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | tail -3
fi
if has grouped; then
  step "GPU tests: the grouped engine (and its call plans)"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm_sm90.py -p no:cacheprovider 2>&1 | tail -5
fi
if has bf16; then
  step "GPU tests: the bf16 route (and its call plans)"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_grouped_wgrad_bf16.py -p no:cacheprovider 2>&1 | tail -5
fi
if has decode; then
  step "GPU tests: dense decode (sm90_decode, sm90_decode_wg)"
  timeout 500 python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py tests/test_gpu_gemm_decode_wg.py \
    -p no:cacheprovider 2>&1 | tail -5
fi
if has groupedall; then
  step "GPU tests: the torch route, the grouped files, DeepGEMM's recipe"
  timeout 560 python3 -m pytest -q -m gpu tests/test_gpu_grouped_torch.py tests/test_gpu_grouped_gemm.py \
    tests/test_gpu_deepgemm_hopper_recipe.py -p no:cacheprovider 2>&1 | tail -5
fi
if has host; then
  step "eager engine calls: plans off / on"
  timeout 200 python3 benchmarks/engine_plan_host.py ${HOST_ARGS:-}
fi
if has san; then
  step "sanitizers: the bf16 route's smoke (planned calls too)"; sanitize tests/support/gpu_wgrad_bf16_smoke.py
fi
