#!/usr/bin/env bash
# Session 12, issue 13: one device call on 2 GPUs (nvidia-h200-x2) for mxrt.ep.dispatch's fused layout (the EP
# layout kernels kernels_src/moe/ep_*.hip, the counts' exchange on a side stream) against the torch layout it
# replaces (MXRT_EP_DISPATCH=torch, the session-11 path). Steps (STEPS="..." picks a subset, in this order):
#   prebuild  the EP kernels, moe_combine, the rowwise quantizer and the torch route's dequantizer / group ends into
#             CuPy's cache (117 builds in parallel, ~20 s; the layer tests' grouped fallback builds on first use)
#   tests     pytest -m gpu test_ep (incl. both layouts bitwise on one GPU, the sync count per layout, the W = 2
#             torchrun check with --layout torch fused mixed, even and uneven), test_ep_readme,
#             test_gpu_moe_combine; and the CPU-side test_ep_kernels (the kernels on the host emulator)
#   sanitizer compute-sanitizer memcheck + racecheck of tests/support/gpu_ep_smoke.py --quick (no NCCL)
#   bench     torchrun W = 2 DeepSeek-V3 shapes (H 7168, top-8, E 256), T = 4096 / 8192 / 16384: dispatch and
#             combine, MXFP8 vs bf16 tokens, torch and fused layouts interleaved per T (LAYER=1 adds the layer bench
#             with 32 experts, I 2048, on the fused layout: ~+60 s)
#   profile   benchmarks/ep_profile.py 16384 on the fused layout: per-rank chrome traces under $OUT
# Logs under $OUT. Budget ~4 min (the device tool stops a command at 600 s); every step is cut by `timeout`.
# Usage on the device, from the repository root:   bash benchmarks/gpu_s12_ep.sh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 MXRT_KERNELS_SRC=$PWD/kernels_src
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
steps=" ${STEPS:-prebuild tests sanitizer bench profile} "
step() { echo; echo "=== $* ($(date +%T))"; }
has() { [[ $steps == *" $1 "* ]]; }
step device
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
git log --oneline -1 2>/dev/null
if has prebuild; then
  step "prebuild (EP kernels, moe_combine, quantize_mx_rowwise, dequantize_mx, grouped_offsets)"
  timeout ${T_PREBUILD:-60} python3 benchmarks/prebuild.py ep_route_count ep_route_scatter ep_recv_map ep_gather_rows \
    moe_combine quantize_mx_rowwise dequantize_mx grouped_offsets --jobs 16 2>&1 | tee "$OUT/prebuild.txt" | tail -4
fi
if has tests; then
  step "pytest -m gpu test_ep test_ep_readme test_gpu_moe_combine; CPU test_ep_kernels"
  timeout ${T_TESTS:-180} python3 -m pytest -q -m gpu tests/test_ep.py tests/test_ep_readme.py \
    tests/test_gpu_moe_combine.py -p no:cacheprovider -rs 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -12
  timeout ${T_KTESTS:-60} python3 -m pytest -q tests/test_ep_kernels.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_kernels.txt" | tail -3
fi
if has sanitizer; then
  step "compute-sanitizer memcheck + racecheck (tests/support/gpu_ep_smoke.py --quick)"
  : > "$OUT/sanitizer.txt"
  for tool in memcheck racecheck; do
    extra=""; [[ $tool == memcheck ]] && extra="--leak-check no"
    timeout ${T_SAN:-45} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_ep_smoke.py --quick \
      > /tmp/san.txt 2>&1
    rc=$?; { echo "### $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
    echo "$tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' /tmp/san.txt | tail -2 | tr '\n' ' ')"
  done
fi
if has bench; then
  step "torchrun W = 2 bench, layouts torch and fused interleaved (H 7168, top-8, E 256)"
  layer=""; [[ ${LAYER:-0} == 1 ]] && layer="--layer-experts 32"
  timeout ${T_BENCH:-90} torchrun --standalone --nproc-per-node 2 -m mxrt.ep.launch --bench --hidden 7168 --inter 2048 \
    --experts 256 --topk 8 $layer --bench-tokens ${BENCH_TOKENS:-4096 8192 16384} --iters ${ITERS:-20} \
    --layout torch fused 2>&1 | tee "$OUT/ep_bench.txt" | grep -E "^bench|^layer|Error|error" | tail -30
fi
if has profile; then
  step "ep_profile.py 16384, fused layout: host / device tail, per-op table, chrome traces per rank"
  MXRT_EP_DISPATCH=fused EP_TRACE_DIR=$OUT timeout ${T_PROFILE:-60} torchrun --standalone --nproc-per-node 2 \
    benchmarks/ep_profile.py 16384 2>&1 | tee "$OUT/ep_profile.txt" | grep -E "^T=|Error|error" | tail -6
  ls -la "$OUT"/trace_* 2>/dev/null | head -4
fi
step done
ls "$OUT"
