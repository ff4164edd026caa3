#!/usr/bin/env bash
# Session 16 (issue 11 quantizer targets): step bench (mxrt bench grouped-quant). Its ncu steps matched kernels by a
# prefix regex and profiled the wrong launch for rowcol: they live on, by exact kernel name, in gpu_s17.sh.
source "$(dirname "$0")/gpu_common.sh" "${1:-bench}"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 benchmarks/prebuild.py quantize_mx_grouped_rowcol quantize_mx_dual_grouped quantize_mx_dual \
  quantize_mx_grouped --jobs 16 2>&1 | tail -1
if has bench; then
  echo "=== bench grouped-quant"
  timeout 240 python3 -m mxrt.cli bench grouped-quant --no-progress --json "$OUT/gq.json" 2>&1 | tail -30
fi
