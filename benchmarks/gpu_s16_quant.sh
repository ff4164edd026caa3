#!/usr/bin/env bash
# Session 16 (issue 11 quantizer targets): where the grouped / dual quantizers spend their time. Steps: bench (mxrt
# bench grouped-quant + quant), ncu (SOL, scheduler, instruction mix of rowcol / dual / plain), src (full set with
# source for rowcol, top SASS lines by stall samples). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-bench ncu}"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 benchmarks/prebuild.py quantize_mx_grouped_rowcol quantize_mx_dual_grouped quantize_mx_dual \
  quantize_mx_grouped --jobs 16 2>&1 | tail -1
if has bench; then
  echo "=== bench grouped-quant"
  timeout 240 python3 -m mxrt.cli bench grouped-quant --no-progress --json "$OUT/gq.json" 2>&1 | tail -30
fi
if has ncu; then
  for w in ${WHICH:-rowcol dual plain}; do
    echo "=== ncu $w"
    timeout 120 ncu -k regex:quantize_mx -s 2 -c 1 --section SpeedOfLight --section SchedulerStats \
      --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
      --metrics "regex:smsp__pcsamp_warps_issue_stalled_.*,smsp__inst_executed_pipe_.*.sum" \
      python3 benchmarks/ncu_grouped_quant.py $w 2048 > "$OUT/ncu_$w.txt" 2>&1
    grep -E "^  [a-z_]+\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Ipc|Registers Per|Achieved Occupancy|Theoretical Occ" \
      "$OUT/ncu_$w.txt" | head -16
    grep -E "pcsamp_warps_issue_stalled_[a-z_]+ " "$OUT/ncu_$w.txt" | grep -v not_issued | \
      awk '{gsub(",","",$3); print $3, $1}' | sort -n -r | head -6
    grep -E "smsp__inst_executed_pipe_[a-z_]+\.sum" "$OUT/ncu_$w.txt" | awk '{gsub(",","",$3); if ($3+0 > 0) print $3, $1}' \
      | sort -n -r | head -8
  done
fi
if has src; then
  echo "=== ncu full + source: ${SRC_WHICH:-rowcol}"
  timeout 200 ncu -k regex:quantize_mx -s 2 -c 1 --set full --import-source yes -f -o "$OUT/q_full" \
    python3 benchmarks/ncu_grouped_quant.py ${SRC_WHICH:-rowcol} 2048 > /dev/null 2>&1
  python3 benchmarks/ncu_source_top.py "$OUT/q_full.ncu-rep" 40 2>&1 | cut -c1-170 | head -45
fi
