#!/usr/bin/env bash
# Session 14, call 6: ncu of sm90_decode_wg on one cell, stream-K grid against the older grid (CASE "M N K", FMT).
source "$(dirname "$0")/gpu_common.sh"
timeout 200 python3 benchmarks/prebuild.py gemm_mx_decode_sm90_wg --jobs 16 2>&1 | tail -1
for ctas in ${CTAS:-132 0}; do
  echo "=== ncu ${CASE:-64 8192 8192} ${FMT:-e4m3} ctas $ctas"
  timeout 150 ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    --metrics "regex:smsp__pcsamp_warps_issue_stalled_.*,dram__bytes_read.sum" \
    python3 benchmarks/ncu_decode_wg.py ${CASE:-64 8192 8192} --fmt ${FMT:-e4m3} --ctas $ctas > "$OUT/ncu_$ctas.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Grid Size|dram__bytes" \
    "$OUT/ncu_$ctas.txt" | head -14
  grep -E "pcsamp_warps_issue_stalled" "$OUT/ncu_$ctas.txt" | awk '$NF+0 > 200' | sort -k3 -n -r | head -12
done
