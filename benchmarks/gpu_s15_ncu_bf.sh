#!/usr/bin/env bash
# Session 15: ncu of the wgmma decode kernel's bf16 route against its fp8 route on one cell (CASE "M N K", FMT),
# warp-state and pipe sections for both, then the bf16 build's top SASS lines by stall samples. Logs under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
read -r m n k <<< "${CASE:-64 8192 8192}"
fmt=${FMT:-e4m3}
echo "=== prebuild ($(date +%T))"
timeout 200 python3 benchmarks/prebuild.py gemm_mx_decode_sm90_wg decode_tokens_bf16 --jobs 16 2>&1 | tail -1
for bf in 0 1; do
  echo "=== ncu bf=$bf $m x $n x $k $fmt ($(date +%T))"
  timeout ${T_NCU:-120} ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --metrics "regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum" \
    python3 benchmarks/ncu_decode_wg.py $m $n $k --fmt $fmt --bf $bf > "$OUT/ncu_bf$bf.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|inst_executed|tensor_op|dram__bytes" "$OUT/ncu_bf$bf.txt" | head -20
  grep -E "stalled" "$OUT/ncu_bf$bf.txt" | awk '$NF+0 > 2' | head -12
done
if [[ ${SRC:-1} == 1 ]]; then
  echo "=== ncu --set full, bf=1 ($(date +%T))"
  timeout ${T_SRC:-200} ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --set full --import-source yes -f -o "$OUT/bf_full" \
    python3 benchmarks/ncu_decode_wg.py $m $n $k --fmt $fmt --bf 1 --lineinfo > "$OUT/ncu_full_log.txt" 2>&1
  echo "ncu rc=$?"; tail -2 "$OUT/ncu_full_log.txt"
  python3 benchmarks/ncu_source_top.py "$OUT/bf_full.ncu-rep" 40 2>&1 | tee "$OUT/ncu_src_top.txt" | head -45
fi
