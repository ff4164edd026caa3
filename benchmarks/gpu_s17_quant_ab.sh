#!/usr/bin/env bash
# Session 17: A/B of the quantizers across source trees (TREES, interleaved twice): `mxrt bench grouped-quant` and
# `mxrt bench quant`; then, on the working tree, the quantizers' GPU tests and the two quant smokes under the
# sanitizers (skip with SAN=0; GQ=0 / QUANT=0 skip a bench). Each tree's bench runs from inside the tree (`python -m` puts the cwd first).
source "$(dirname "$0")/gpu_common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
Q="quantize_mx_grouped_rowcol quantize_mx_dual_grouped quantize_mx_grouped quantize_mx_grouped_offsets quantize_mx_dual quantize_mx_rowwise"
for tree in ${TREES:-.}; do
  PYTHONPATH=$tree:$tree/tests timeout 200 python3 $tree/benchmarks/prebuild.py $Q --jobs 16 2>&1 | tail -1
done
for rep in 1 2; do
  for tree in ${TREES:-.}; do
    echo "=== tree $tree, round $rep"
    [[ ${GQ:-1} == 1 ]] && (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 -m mxrt.cli bench grouped-quant \
      --no-progress --json "$OUT/gq_$(basename $tree)_$rep.json" 2>&1 | grep -E "^\| (grouped|dual_grouped|d2d)")
    [[ ${QUANT:-1} == 1 ]] && (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 -m mxrt.cli bench quant \
      --no-progress --json "$OUT/q_$(basename $tree)_$rep.json" 2>&1 | grep -E "^\| " | grep -v -E "^\| (op|---)")
  done
done
if [[ ${TESTS:-1} == 1 ]]; then
  step "GPU tests of the quantizers (working tree)"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_grouped.py tests/test_gpu_quant.py -p no:cacheprovider 2>&1 | tail -3
fi
if [[ ${SAN:-1} == 1 ]]; then
  step "sanitizers: grouped smoke"; sanitize tests/support/gpu_grouped_smoke.py
  step "sanitizers: quant smoke"; sanitize tests/support/gpu_quant_smoke.py
fi
