#!/usr/bin/env bash
# Session 8 device call 5 (nvidia-h200-x2): where the new dispatch's time goes (traces), the moe_combine GPU tests again.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
python3 -m pytest -q -m gpu tests/test_gpu_moe_combine.py tests/test_ep.py -p no:cacheprovider 2>&1 | tail -2
EP_TRACE_DIR=$OUT torchrun --standalone --nproc-per-node 2 benchmarks/ep_profile.py 16384 2>&1 | grep -v "^W1125\|OMP_NUM\|\*\*\*\*" > "$OUT/profile.txt"
grep -E "^T=" "$OUT/profile.txt"; ls -la "$OUT"
