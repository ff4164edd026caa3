#!/usr/bin/env bash
# One device call on 2 GPUs (nvidia-h200-x2) for mxrt.ep with the fused combine (issue 13): GPU tests (the W = 2 NCCL
# test runs), compute-sanitizer over the moe_combine smoke, the combine alone vs the old torch expression and a
# device copy, the W = 2 torchrun check (--uneven) and the W = 2 DeepSeek-V3-shape benchmark. Logs under $OUT
# (5 files). Usage on the device, from the repository root:
#   bash benchmarks/gpu_ep_w2.sh            # every step; e.g. STEPS="tests combine" for a subset
# Budget (the device tool stops a command at 600 s): tests 200 s, sanitizers 2 x 50 s, combine 60 s, check 2 x 70 s,
# bench 150 s; every step is cut by `timeout` so the later ones still run.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
steps=" ${STEPS:-tests sanitizer combine check bench} "
step() { echo; echo "=== $* ($(date +%T))"; }
has() { [[ $steps == *" $1 "* ]]; }
step device
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
if has tests; then
  step "pytest -m gpu (moe_combine, ep incl. W = 2 NCCL, ep readme)"
  timeout ${T_TESTS:-200} python3 -m pytest -q -m gpu tests/test_gpu_moe_combine.py tests/test_ep.py \
    tests/test_ep_readme.py -p no:cacheprovider -rs 2>&1 | tee "$OUT/pytest.txt" | tail -15
fi
if has sanitizer; then
  step "compute-sanitizer memcheck + racecheck (tests/support/gpu_moe_combine_smoke.py --quick)"
  : > "$OUT/sanitizer.txt"
  for tool in memcheck racecheck; do
    extra=""; [[ $tool == memcheck ]] && extra="--leak-check no"
    timeout ${T_SAN:-50} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_moe_combine_smoke.py --quick \
      > /tmp/san.txt 2>&1
    rc=$?; { echo "### $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
    echo "$tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' /tmp/san.txt | tail -2 | tr '\n' ' ')"
  done
fi
if has combine; then
  step "combine alone on GPU 0: fused kernel vs old torch expression vs device copy (T 4096 / 16384, k 8, n 7168)"
  CUDA_VISIBLE_DEVICES=0 timeout ${T_COMBINE:-60} python3 benchmarks/bench_moe_combine.py --tokens 4096 16384 \
    --iters 20 2>&1 | tee "$OUT/combine_bench.txt"
fi
if has check; then
  step "torchrun W = 2 check (uneven: rank 0 holds no tokens)"
  for extra in "" "--uneven"; do
    timeout ${T_CHECK:-70} torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --tokens 768 --hidden 1024 \
      --inter 512 --experts 32 --topk 8 $extra 2>&1 | tee -a "$OUT/ep_check.txt" | grep -E "rank|check W=|Error" | tail -4
  done
fi
if has bench; then
  step "torchrun W = 2 bench (DeepSeek-V3 shapes: H 7168, I 2048, E 256 dispatch/combine, 32 experts in the layer)"
  timeout ${T_BENCH:-150} torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --bench --hidden 7168 --inter 2048 \
    --experts 256 --topk 8 --layer-experts 32 --bench-tokens ${BENCH_TOKENS:-4096 8192 16384} --iters 10 2>&1 | tee "$OUT/ep_bench.txt" \
    | grep -E "^bench|^layer|Error|error" | tail -20
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
fi
step done
ls "$OUT"
