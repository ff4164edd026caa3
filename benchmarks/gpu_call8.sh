#!/usr/bin/env bash
# Session 8 device call 8: ncu of the shipped sm90_ws path (exact build) at 8192^3 MXFP8 bf16 (issue 10's evidence:
# tensor pipe, issue slots, shared-memory wavefronts, stall reasons), raw page to $OUT/ncu_ws.txt.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}; mkdir -p "$OUT"
python3 benchmarks/prebuild.py gemm_mx_sm90_ws --jobs 16 2>&1 | tail -1
timeout 300 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats --page raw \
  -k regex:gemm_mx_sm90_ws -s 1 -c 1 python3 benchmarks/ncu_gemm_8192.py > "$OUT/ncu_ws.txt" 2>&1
echo "ncu rc=$?"
grep -E "gpu__time_duration.sum|sm__pipe_tensor_op_gmma_cycles_active.avg.pct|sm__issue_active.avg.pct|sm__inst_executed_pipe_fma|l1tex__data_pipe_lsu_wavefronts_mem_shared.sum |l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum |smsp__average_warps_issue_stalled_(wait|long_scoreboard|short_scoreboard|barrier|gmma|math_pipe_throttle|selected|not_selected|mio_throttle|lg_throttle|dispatch_stall|membar|sleeping|branch_resolving|no_instruction)_per_issue_active|sm__pipe_fma_cycles_active.avg.pct|sm__throughput.avg.pct|smsp__cycles_active.avg " "$OUT/ncu_ws.txt" | head -40
