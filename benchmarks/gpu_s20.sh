#!/usr/bin/env bash
# Session 20: quantize_mx_dual's SCALES_T transpose rewritten (128 x 128 tiles, 4 chunks per thread, 4 x 4 byte
# permutes, full-sector stores). Steps: diag (benchmarks/transpose_diag.py twice: the dual alone, with session 19's
# transpose (kernels_src/quant/transpose_u8_s19.hip, carried untracked) and with the new one, each transpose alone),
# ab (`mxrt bench quant --no-torch --dual-scales t,inplace`), rowcol (`mxrt bench grouped-quant` row+col rows with
# ROWCOL_SCALES_T on and off), tests (the quantizer, grouped-quantizer and graph-memory GPU files), san (the quant and
# grouped smokes under memcheck / racecheck / synccheck). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-diag ab rowcol tests san}"
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import cupy; print('NVRTC', cupy.cuda.nvrtc.getVersion(), 'cupy', cupy.__version__)"
timeout 200 python3 benchmarks/prebuild.py quantize_mx_dual transpose_u8 quantize_mx_rowwise quantize_mx_grouped \
  quantize_mx_grouped_rowcol quantize_mx_grouped_offsets quantize_mx_dual_grouped --jobs 16 2>&1 | tail -1
if has diag; then
  for rep in 1 2; do
    step "transpose diag, round $rep"; timeout 200 python3 benchmarks/transpose_diag.py ${DIAG_SHAPES:-}
  done
fi
if has ab; then
  step "bench quant"
  timeout 240 python3 -m mxrt.cli bench quant --no-progress --no-torch --dual-scales ${DSCALES:-t,inplace} ${QARGS:-} \
    --json "$OUT/q.json" 2>&1 | grep -E "^\| " | grep -v -E "^\| (op|---)"
fi
if has rowcol; then
  for on in 1 0; do
    step "bench grouped-quant, ROWCOL_SCALES_T $on"
    timeout 200 python3 -c "
import sys
from mxrt.ops import grouped
grouped.ROWCOL_SCALES_T = bool($on)
from mxrt.cli import main
sys.exit(main(['bench', 'grouped-quant', '--no-progress', '--json', '$OUT/gq_t${on}.json']))
" 2>&1 | grep -E "^\| (grouped row\+col|d2d)" | grep -v eager
  done
fi
if has tests; then
  step "GPU tests: plain and grouped quantizers, graph memory"
  timeout 400 python3 -m pytest -q -m gpu tests/test_gpu_quant.py tests/test_gpu_grouped.py \
    tests/test_gpu_graph_memory.py -p no:cacheprovider 2>&1 | tail -3
fi
if has san; then
  step "sanitizers: quant smoke"; sanitize tests/support/gpu_quant_smoke.py
  step "sanitizers: grouped smoke"; sanitize tests/support/gpu_grouped_smoke.py
fi
