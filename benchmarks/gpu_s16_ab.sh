#!/usr/bin/env bash
# Session 16: A/B of two source trees on one GPU, interleaved (A, B, A, B): bench_deepgemm_api.py with LAYOUTS.
#   AB_OLD=ab_6cab LAYOUTS=contiguous,k-grouped bash benchmarks/gpu_s16_ab.sh
source "$(dirname "$0")/gpu_common.sh"  # each tree's runs set their own PYTHONPATH
nvidia-smi --query-gpu=name --format=csv,noheader
for tree in "$AB_OLD" .; do
  PYTHONPATH=$tree:$tree/tests timeout 300 python3 $tree/benchmarks/prebuild.py gemm_mx_grouped_sm90_ws \
    gemm_wgrad_bf16_sm90 kgrouped_to_bf16 grouped_offsets --jobs 16 2>&1 | tail -1
done
for rep in 1 2; do
  for tree in "$AB_OLD" .; do
    echo "=== tree $tree, round $rep"
    PYTHONPATH=$tree:$tree/tests timeout 200 python3 benchmarks/bench_deepgemm_api.py --layouts "${LAYOUTS:-contiguous,k-grouped}" \
      --reps ${REPS:-5} --timing ${TIMING:-events} --recipe ${RECIPE:-f32} 2>&1 | grep -v "^device" | tee -a "$OUT/ab_$(basename $tree).txt"
  done
done
