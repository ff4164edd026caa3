#!/usr/bin/env bash
# Session 19: the row+col grouped quantizer's s_col stored transposed (flag SCALES_T) + transpose_u8. Steps: ab
# (`mxrt bench grouped-quant` with mxrt.ops.grouped.ROWCOL_SCALES_T on and off, interleaved, two rounds; graph rows),
# tests (the grouped and plain quantizer GPU files), san (the grouped smoke under memcheck / racecheck / synccheck).
source "$(dirname "$0")/gpu_common.sh" "${1:-ab tests san}"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 benchmarks/prebuild.py quantize_mx_grouped quantize_mx_grouped_rowcol quantize_mx_grouped_offsets \
  quantize_mx_dual_grouped transpose_u8 --jobs 16 2>&1 | tail -1
if has ab; then
  for rep in 1 2; do
    for on in 1 0; do
      step "bench grouped-quant, ROWCOL_SCALES_T $on, round $rep"
      timeout 200 python3 -c "
import sys
from mxrt.ops import grouped
grouped.ROWCOL_SCALES_T = bool($on)
from mxrt.cli import main
sys.exit(main(['bench', 'grouped-quant', '--no-progress', '--json', '$OUT/gq_t${on}_$rep.json']))
" 2>&1 | grep -E "^\| (grouped row\+col|d2d)" | grep -v eager
    done
  done
fi
if has tests; then
  step "GPU tests: grouped and plain quantizers"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_grouped.py tests/test_gpu_quant.py -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then
  step "sanitizers: grouped smoke"; sanitize tests/support/gpu_grouped_smoke.py
fi
