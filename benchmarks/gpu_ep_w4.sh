#!/usr/bin/env bash
# One device call on 4 GPUs (nvidia-h200-x4 / nvidia-h100-x4) for mxrt.ep (issue 13): the W = 4 torchrun check (even and
# uneven: rank 0 holds no tokens) and the W = 4 DeepSeek-V3-shape dispatch / combine / layer benchmark, to measure
# how the MX dispatch scales past W = 2 (RESULTS session 8 has the W = 8 paper estimate). Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
W=${W:-4}
echo "=== device ($(date +%T))"
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -6
echo "=== torchrun W = $W check ($(date +%T))"
for extra in "" "--uneven"; do
  timeout ${T_CHECK:-90} torchrun --standalone --nproc-per-node $W -m mxrt.ep.launch --tokens 768 --hidden 1024 \
    --inter 512 --experts 32 --topk 8 $extra 2>&1 | tee -a "$OUT/ep_check.txt" | grep -E "check W=|Error" | tail -4
done
echo "=== torchrun W = $W bench ($(date +%T))"
timeout ${T_BENCH:-300} torchrun --standalone --nproc-per-node $W -m mxrt.ep.launch --bench --hidden 7168 --inter 2048 \
  --experts 256 --topk 8 --layer-experts 32 --bench-tokens ${BENCH_TOKENS:-4096 8192 16384} --iters 10 2>&1 \
  | tee "$OUT/ep_bench.txt" | grep -E "^bench|^layer|Error|error" | tail -24
echo "=== done ($(date +%T))"
