#!/usr/bin/env bash
# Session 19: quantize_mx_dual's scale stores (SCALES_T, in place; the fold and cluster builds of calls 1-3 are on
# branches s19-dual-fold / s19-dual-cluster). Steps: ab (`mxrt bench quant --no-torch --dual-scales
# ${DSCALES:-t,inplace}` on the working tree, twice: each shape's default row, which is the
# launcher's choice, beside the stores forced, in one run; QARGS adds arguments), ncu (NCU_SCALES: the dual's duration,
# instructions, issue, warps and DRAM at 4096 x 7168 bf16 with each store), tests (the quantizer and graph-memory GPU
# files), san (the quant smoke under memcheck / racecheck / synccheck). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-ab tests san}"
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -c "import cupy; print('NVRTC', cupy.cuda.nvrtc.getVersion(), 'cupy', cupy.__version__)"
timeout 200 python3 benchmarks/prebuild.py quantize_mx_dual transpose_u8 quantize_mx_rowwise --jobs 16 2>&1 | tail -1
if has ab; then
  for rep in 1 2; do
    step "bench quant, round $rep"
    timeout 240 python3 -m mxrt.cli bench quant --no-progress --no-torch --dual-scales ${DSCALES:-t,inplace} ${QARGS:-} \
      --json "$OUT/q_$rep.json" 2>&1 | grep -E "^\| " | grep -v -E "^\| (op|---)"
  done
fi
if has ncu; then
  M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
  M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  M="$M,lts__t_sectors_op_write.sum,launch__registers_per_thread"
  for sc in ${NCU_SCALES:-t inplace}; do
    step "ncu quantize_mx_dual 4096 x 7168 bf16, scales $sc"
    timeout 120 ncu -k "regex:^quantize_mx_dual$" -s 1 -c 1 --metrics "$M" python3 -c "
import torch, mxrt
from mxrt.ops import quant as q
q.DUAL_SCALES = '$sc'
x = torch.randn(4096, 7168, device='cuda', dtype=torch.bfloat16)  # bf16 through DLPack, as the bench's rows
for _ in range(2): mxrt.quantize_mx_dual(x, 'e4m3')
torch.cuda.synchronize()" 2>&1 | grep -E "^\s+(gpu__|smsp__|sm__|dram__|lts__|launch__)"
  done
fi
if has tests; then
  step "GPU tests: quantizers, graph memory"
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_quant.py tests/test_gpu_graph_memory.py \
    -p no:cacheprovider 2>&1 | tail -4
fi
if has san; then
  step "sanitizers: quant smoke"; sanitize tests/support/gpu_quant_smoke.py
fi
