#!/usr/bin/env bash
# Session 17 call 11: why the persistent quantize_mx_dual (tree ab_p, a diagnostic copy) lost to one CTA per tile.
# ab_p's launcher takes DUAL_WORKERS_PER_SM (0: one CTA per tile); `--dual-variants 0:MB` builds DUAL_MIN_BLOCKS=MB.
source "$(dirname "$0")/gpu_common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
S="--shapes 8192x8192,4096x7168 --no-progress"
run() { (cd "$1" && shift && PYTHONPATH=$PWD:$PWD/tests timeout 200 "$@" 2>&1 | grep -E "quantize_mx_dual" ); }
for rep in 1 2; do
  echo "=== HEAD (one CTA per tile, uncapped), round $rep"
  run . python3 -m mxrt.cli bench quant $S --dual-variants 0:4,0:3
  for w in 4 3 0; do
    echo "=== ab_p DUAL_WORKERS_PER_SM=$w (default build: cap 4; variants cap 4 / 3 / none), round $rep"
    DUAL_WORKERS_PER_SM=$w run ab_p python3 -m mxrt.cli bench quant $S --dual-variants 0:3,0:0
  done
done
for t in . ab_p; do
  echo "=== ncu $t"
  (cd $t && PYTHONPATH=$PWD:$PWD/tests timeout 200 ncu -k "regex:^quantize_mx_dual$" -s 1 -c 1 --set full \
    --import-source yes -f -o "$OUT/dual_$(basename $t)" python3 benchmarks/ncu_grouped_quant.py plainbf > /dev/null 2>&1)
  echo rc=$?
done
