#!/usr/bin/env bash
# Session 8 device call 6 (nvidia-h200-x2): the packed dispatch (W = 2 tests, check, top-8 bench), then the wider
# GEMM GPU suites on merged main (every path of test_gpu_gemm, grouped sm90, decode) within the call's limit.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
python3 benchmarks/prebuild.py gemm_mx_sm90_ws gemm_mx_sm90 gemm_mx_grouped_sm90 gemm_mx_decode_sm90 e2m1_to_e4m3 moe_combine --jobs 16 2>&1 | tail -1
BENCH_TOKENS="4096 16384" STEPS="tests check bench" bash benchmarks/gpu_ep_w2.sh 2>&1 | grep -E "passed|failed|PASS|FAIL|^bench|^layer|Error"
echo "=== GEMM GPU suites"
timeout 330 python3 -m pytest -q -m gpu tests/test_gpu_gemm.py tests/test_gemm_sm90.py tests/test_gemm_sm90_ws.py \
  tests/test_gpu_grouped_gemm_sm90.py tests/test_gpu_gemm_decode.py -p no:cacheprovider -o filterwarnings=default \
  > "$OUT/pytest_gemm.txt" 2>&1; echo "rc=$?"; tail -4 "$OUT/pytest_gemm.txt"
