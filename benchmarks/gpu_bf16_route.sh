#!/usr/bin/env bash
# One device call (H100 / H200, < 10 minutes) for the issue-10 bf16 route (gemm_mx_sm90_bf16):
#   (a) its development check (every fp8 pair and out dtype, window scales, NaN-scale blocks, subnormal codes,
#       tails, bitwise reruns) and timing beside sm90_ws, cuBLAS bf16 and compiled dequant + cuBLAS;
#   (b) ncu of one launch at 8192^3 (tensor pipe, issue, stalls, shared-memory wavefronts / conflicts);
#   (c) compute-sanitizer memcheck / racecheck / synccheck on the quick check (when CHECK_SAN=1).
# Logs in $OUT (or ./gpu_out). Usage on the device: bash benchmarks/gpu_bf16_route.sh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
DEADLINE=${DEADLINE:-560}
step() { echo; echo "=== $* (t=${SECONDS}s)"; }
cap() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; ((left < $1)) && echo "$left" || echo "$1"; }
step "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  git log --oneline -1 2>/dev/null; } 2>&1 | tee "$OUT/info.txt"
step "prebuild"
timeout "$(cap 100)" python3 benchmarks/prebuild.py gemm_mx_sm90_bf16 gemm_mx_sm90_ws --jobs 16 2>&1 | tail -3
step "(a) check + time"
timeout "$(cap 300)" python3 benchmarks/gemm_sm90_bf16_dev.py --sections ${SECTIONS:-check,time} --rings ${RINGS:-4} --regs ${REGS:-88,72} --diags "${DIAGS:-}" ${QUICK:-} \
  --json "$OUT/bf16_dev.json" > "$OUT/bf16_dev.txt" 2>&1
echo "rc=$?"; grep -E "check: |pass': False|Error|error" "$OUT/bf16_dev.txt" | head -20; sed -n '/== summary ==/,$p' "$OUT/bf16_dev.txt"
step "(b) ncu"
timeout "$(cap 150)" ncu -k regex:gemm_mx_sm90_bf16 -s 1 -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats \
  --section InstructionStats python3 benchmarks/ncu_bf16_8192.py > "$OUT/ncu.txt" 2>&1
echo "rc=$?"; grep -E "Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Bank|Wavefront|Registers|Eligible|Active Warps|SM Busy|Executed Ipc" "$OUT/ncu.txt" | head -60
if [[ ${CHECK_SAN:-0} == 1 ]]; then
  step "(c) sanitizers"
  for tool in memcheck racecheck synccheck; do
    timeout "$(cap 90)" compute-sanitizer --tool $tool python3 benchmarks/gemm_sm90_bf16_dev.py --sections check --quick \
      > /tmp/san.txt 2>&1; echo "$tool rc=$?: $(grep -E 'check: ' /tmp/san.txt | tail -1) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
  done
fi
step "done"
