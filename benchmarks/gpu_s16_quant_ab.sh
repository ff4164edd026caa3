#!/usr/bin/env bash
# Session 16: A/B/C of the grouped quantizers' persistent CTAs per SM (trees in TREES, interleaved twice):
# `mxrt bench grouped-quant`, then the grouped quantizers' GPU tests on the working tree.
source "$(dirname "$0")/gpu_common.sh"  # each tree's runs set their own PYTHONPATH
nvidia-smi --query-gpu=name --format=csv,noheader
for tree in ${TREES:-.}; do
  PYTHONPATH=$tree:$tree/tests timeout 200 python3 $tree/benchmarks/prebuild.py quantize_mx_grouped_rowcol \
    quantize_mx_dual_grouped quantize_mx_grouped quantize_mx_grouped_offsets --jobs 16 2>&1 | tail -1
done
for rep in 1 2; do
  for tree in ${TREES:-.}; do
    echo "=== tree $tree, round $rep"
    # `python -m` puts the working directory first on sys.path: run it from inside the tree
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 -m mxrt.cli bench grouped-quant --no-progress \
      --json "$OUT/gq_$(basename $tree)_$rep.json" 2>&1 | grep -E "^\| (grouped row\+col graph|dual_grouped|d2d)")
  done
done
echo "=== GPU tests of the grouped quantizers (working tree)"
PYTHONPATH=$PWD:$PWD/tests timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_grouped.py -p no:cacheprovider 2>&1 | tail -3
