#!/usr/bin/env bash
# Session 18. Steps: ab (TREES, interleaved twice: `mxrt bench quant`, each tree from inside itself), ncu (per tree:
# duration, instructions, issue and occupancy of `quantize_mx_dual` on bf16 8192^2, benchmarks/ncu_grouped_quant.py
# plainbf), tests (the quantizer GPU files on the working tree), san (the quant and grouped smokes under
# memcheck / racecheck / synccheck). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-ab ncu}"
nvidia-smi --query-gpu=name --format=csv,noheader
Q="quantize_mx_dual quantize_mx_rowwise quantize_mx_grouped_rowcol quantize_mx_grouped_offsets"
for tree in ${TREES:-.}; do
  PYTHONPATH=$tree:$tree/tests timeout 200 python3 $tree/benchmarks/prebuild.py $Q --jobs 16 2>&1 | tail -1
done
if has ab; then
  for rep in 1 2; do
    for tree in ${TREES:-.}; do
      step "tree $tree, round $rep"
      (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 -m mxrt.cli bench quant --no-progress ${QARGS:-} \
        --json "$OUT/q_$(basename $tree)_$rep.json" 2>&1 | grep -E "^\| " | grep -v -E "^\| (op|---)")
    done
  done
fi
if has ncu; then
  M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
  M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  M="$M,launch__registers_per_thread,launch__occupancy_limit_registers"
  for tree in ${TREES:-.}; do
    step "ncu plainbf, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 120 ncu -k "regex:^quantize_mx_dual$" -s 1 -c 1 --metrics "$M" \
      python3 benchmarks/ncu_grouped_quant.py plainbf 2>&1 | grep -E "^\s+(gpu__|smsp__|sm__|dram__|launch__)")
  done
fi
if has tests; then
  step "GPU tests of the quantizers (working tree)"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_grouped.py tests/test_gpu_quant.py -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then
  step "sanitizers: grouped smoke"; sanitize tests/support/gpu_grouped_smoke.py
  step "sanitizers: quant smoke"; sanitize tests/support/gpu_quant_smoke.py
fi
