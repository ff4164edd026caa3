#!/usr/bin/env bash
# Session 17. Steps: tests (the GPU files the session-16 review mended, never rerun on a GPU), ncu (SOL, scheduler,
# stalls, pipes of one grouped-quantizer kernel, named exactly: WHICH rowcol|dual|plain), src (full set with
# source, top SASS lines by stall samples), bench (mxrt bench grouped-quant). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-tests ncu src}"
nvidia-smi --query-gpu=name --format=csv,noheader
kname() { case $1 in rowcol) echo quantize_mx_grouped_rowcol ;; dual) echo quantize_mx_dual_grouped ;;
  plain|plainbf) echo "quantize_mx_dual$" ;; esac; }
if has tests; then
  step "review-mended GPU files"
  timeout 400 python3 -m pytest -q -x tests/test_gpu_deepgemm_hopper_recipe.py tests/test_gpu_grouped_wgrad_bf16.py \
    tests/test_gpu_grouped_gemm_sm90.py 2>&1 | tail -4
fi
if has ncu || has src || has bench; then
  timeout 200 python3 benchmarks/prebuild.py quantize_mx_grouped_rowcol quantize_mx_dual_grouped quantize_mx_dual \
    quantize_mx_grouped --jobs 16 2>&1 | tail -1
fi
if has ncu; then
  for w in ${WHICH:-rowcol}; do
    step "ncu $w ($(kname $w))"
    timeout 120 ncu -k "regex:^$(kname $w)" -s 1 -c 1 --section SpeedOfLight --section SchedulerStats \
      --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
      --section MemoryWorkloadAnalysis \
      --metrics "regex:smsp__pcsamp_warps_issue_stalled_.*,smsp__inst_executed_pipe_.*.sum" \
      python3 benchmarks/ncu_grouped_quant.py $w 2048 > "$OUT/ncu_$w.txt" 2>&1
    grep -E "^  [a-z_]+\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Ipc|Registers Per|Achieved Occupancy|Theoretical Occ|Executed Instructions  |L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" \
      "$OUT/ncu_$w.txt" | head -24
    grep -E "pcsamp_warps_issue_stalled_[a-z_]+ " "$OUT/ncu_$w.txt" | grep -v not_issued | \
      awk '{gsub(",","",$3); print $3, $1}' | sort -n -r | head -8
    grep -E "smsp__inst_executed_pipe_[a-z_]+\.sum" "$OUT/ncu_$w.txt" | awk '{gsub(",","",$3); if ($3+0 > 0) print $3, $1}' \
      | sort -n -r | head -8
  done
fi
if has src; then
  for w in ${SRC_WHICH:-rowcol}; do
    step "ncu full + source: $w"
    timeout 200 ncu -k "regex:^$(kname $w)" -s 1 -c 1 --set full --import-source yes -f -o "$OUT/q_full_$w" \
      python3 benchmarks/ncu_grouped_quant.py $w 2048 > /dev/null 2>&1
    python3 benchmarks/ncu_source_top.py "$OUT/q_full_$w.ncu-rep" 24 2>&1 | cut -c1-150 | head -20
  done
fi
if has bench; then
  step "bench grouped-quant"
  timeout 240 python3 -m mxrt.cli bench grouped-quant --no-progress --json "$OUT/gq.json" 2>&1 | tail -30
fi
