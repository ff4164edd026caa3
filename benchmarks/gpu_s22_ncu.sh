#!/usr/bin/env bash
# Session 22: ncu of the wgmma decode kernel's aiter16x16 (WLB) builds against their row-major twins on the issue cell
# 7168 x 4096: e2m1 weights at M 16, e4m3 at M 64 (the cells where the shuffled builds lost 26% / 4%). Time, DRAM and
# L2 traffic, cp.async / TMA request counts, instructions and the main stall reasons per build.
source "$(dirname "$0")/gpu_common.sh" "ncu"
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,\
lts__t_sectors_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,dram__sectors_read.sum"
for cell in "16 e2m1" "64 e4m3"; do
  set -- $cell
  for w in "" "--w16"; do
    step "ncu wg M=$1 $2 ${w:-row-major}"
    timeout 120 ncu --csv -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --metrics "$M" \
      python3 benchmarks/ncu_decode_wg.py "$1" --fmt "$2" $w 2>/dev/null | python3 benchmarks/ncu_csv_metrics.py
  done
done
