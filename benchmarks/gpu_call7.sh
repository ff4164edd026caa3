#!/usr/bin/env bash
# Session 8 device call 7 (nvidia-h200-x2): `mxrt check` on the GPU (incl. the new moe_combine rows) and the GPU test
# files this session's calls 1-6 did not run, on merged main.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
timeout 150 python3 -m mxrt.cli check > "$OUT/check.txt" 2>&1; echo "mxrt check rc=$?"; tail -3 "$OUT/check.txt"
timeout 330 python3 -m pytest -q -m gpu tests/test_gpu_grouped.py tests/test_gpu_grouped_gemm.py tests/test_gpu_interop.py \
  tests/test_gpu_moe.py tests/test_gpu_moe_gemm.py tests/test_gpu_quant.py -p no:cacheprovider -o filterwarnings=default \
  > "$OUT/pytest_rest.txt" 2>&1; echo "rc=$?"; tail -3 "$OUT/pytest_rest.txt"
