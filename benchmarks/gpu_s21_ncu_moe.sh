#!/usr/bin/env bash
# Session 21: ncu of the MoE decode kernel, MXFP8 against MXFP4 weights (gate_up and down at T = 1 and 16): executed
# instructions, issue-slot use, warps active, DRAM throughput, duration (where MXFP4 MoE decode loses its bandwidth).
# Step src: `--set full --import-source yes` reports of gate_up T 1 per weight format ($OUT/moe_src_FMT.ncu-rep) for
# benchmarks/ncu_pc_counts.py (per-PC executed counts, offline).
source "$(dirname "$0")/gpu_common.sh" "${1:-ncu}"
M="gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_read.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
M="$M,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"
M="$M,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
M="$M,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"
M="$M,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"
if has src; then
  for fmt in e4m3 e2m1; do
    step "ncu --set full: MoE gate_up T 1 $fmt"
    timeout 200 ncu -k regex:gemm_mx_decode_sm90_moe -s 2 -c 1 --set full --import-source yes -o "$OUT/moe_src_$fmt" \
      python3 benchmarks/ncu_moe_decode.py 1 gate_up --fmt $fmt 2>&1 | tail -2
  done
fi
has ncu || exit 0
for gemm in gate_up down; do
  for t in 1 16; do
    for fmt in e4m3 e2m1; do
      step "ncu MoE $gemm T $t $fmt"
      timeout 120 ncu -k regex:gemm_mx_decode_sm90_moe -s 2 -c 1 --metrics "$M" --csv \
        python3 benchmarks/ncu_moe_decode.py $t $gemm --fmt $fmt 2>&1 | tee "$OUT/ncu_${gemm}_${t}_${fmt}.csv" | \
        python3 benchmarks/ncu_csv_metrics.py
    done
  done
done
