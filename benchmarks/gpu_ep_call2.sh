#!/usr/bin/env bash
# Session 8 device call 2 (nvidia-h200-x2): where the dispatch's fixed time goes (profile), top-8 bench rows.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
torchrun --standalone --nproc-per-node 2 benchmarks/ep_profile.py 4096 16384 2>&1 | grep -v "^W1125\|OMP_NUM\|\*\*\*\*" | tee "$OUT/profile.txt" | grep -E "^T=" 
timeout 200 torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --bench --hidden 7168 --experts 256 --topk 8 --bench-tokens 4096 16384 --iters 10 2>&1 | tee "$OUT/bench.txt" | grep -E "bench|Error|error"
