#!/usr/bin/env bash
# Device calls of session 12 (issue 12): the wgmma decode path sm90_decode_wg (kernels_src/gemm/
# gemm_mx_decode_sm90_wg.hip). Steps (any order): prebuild, review (session 11's unrun review changes: interop and
# the grouped torch route), tests (the new path's GPU tests, then sm90_decode's), smoke (memcheck / racecheck /
# synccheck of tests/support/gpu_decode_wg_smoke.py), sweep (bench_decode.py --wg-sweep SWEEP), bench (bench_decode.py
# table, BENCH_ARGS appended), ab (session 14: a same-machine A/B, see the step). Logs under $OUT.
#   bash benchmarks/gpu_s12_decode_wg.sh "prebuild tests sweep"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests}"
step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has prebuild; then
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_mx_decode_sm90_wg gemm_mx_decode_sm90 gemm_mx_splitk_reduce \
    ${PREBUILD_MORE:-} --jobs 16 2>&1 | tail -3
fi
if has review; then
  step "pytest interop + grouped torch route (session 11 review changes)"
  timeout ${T_REVIEW:-200} python3 -m pytest -q -m gpu tests/test_gpu_interop.py tests/test_gpu_grouped_torch.py \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_review.txt" | tail -8
fi
if has tests; then
  step "pytest sm90_decode_wg ${T_K:-}"
  timeout ${T_WG:-240} python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode_wg.py ${T_K:+-k "$T_K"} -x \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_wg.txt" | tail -25
fi
if has ab; then
  # same-machine A/B: new / old / new; old = the kernel files in AB_OLD (an untracked copy of an older kernels_src) or,
  # with AB_OLD_ARGS, these bench arguments instead (e.g. --sk off); AB_NEW_ARGS: the new runs' extra arguments
  AB_ARGS=${AB_ARGS:---m 16,32,64 --tp 1,8 --fmts e2m1}
  for side in new old new2; do
    step "ab $side: bench_decode $AB_ARGS"
    src=$PWD/kernels_src; more=${AB_NEW_ARGS:-}
    [[ $side == old && -z ${AB_OLD_ARGS:-} ]] && src=${AB_OLD:-$PWD/ab_old/kernels_src}
    [[ $side == old ]] && more=${AB_OLD_ARGS:-}
    MXRT_KERNELS_SRC=$src timeout ${T_AB:-150} python3 benchmarks/bench_decode.py $AB_ARGS $more --budget-s 120 \
      --json "$OUT/ab_$side.json" > "$OUT/ab_$side.txt" 2>&1
    echo "rc=$?"; grep -E "^wall|budget" "$OUT/ab_$side.txt" | tail -2
  done
  python3 benchmarks/ab_compare.py "$OUT/ab_new.json" "$OUT/ab_old.json" "$OUT/ab_new2.json" 2>&1 | tee "$OUT/ab.txt"
fi
if has tests_decode; then
  step "pytest sm90_decode + decode table"
  timeout ${T_DEC:-240} python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode.py tests/test_decode_table.py \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_decode.txt" | tail -8
fi
if has smoke; then
  step "decode_wg smoke + compute-sanitizer"
  timeout 60 python3 tests/support/gpu_decode_wg_smoke.py 2>&1 | tail -3
  for tool in memcheck racecheck synccheck; do
    extra=""; quick=""; [[ $tool == memcheck ]] && extra="--leak-check no"; [[ $tool == racecheck ]] && quick="--quick"
    timeout ${T_SAN:-150} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_decode_wg_smoke.py $quick \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' "$OUT/san_$tool.txt" | tail -2 | tr '\n' ' ')"
  done
fi
if has sweep; then
  step "bench_decode --wg-sweep ${SWEEP:-} ${SWEEP_FMTS:+--fmts $SWEEP_FMTS}"
  timeout ${T_SWEEP:-300} python3 benchmarks/bench_decode.py --wg-sweep "${SWEEP:-32x7168x4096,64x7168x4096}" \
    ${SWEEP_FMTS:+--fmts $SWEEP_FMTS} 2>&1 | tee "$OUT/sweep.txt" | grep -v "^    " | tail -80
fi
if has bench; then
  step "bench_decode ${BENCH_ARGS:-}"
  timeout ${T_BENCH:-400} python3 benchmarks/bench_decode.py --json "$OUT/bench_decode.json" ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench.txt" | grep -v "^    " | tail -70
fi
if has ncu; then
  # NCU_CASES: "M:N:K:nc:ns:stages:split ..." (the builds the sweep ranked)
  for c in ${NCU_CASES:-64:7168:4096:2:1:8:1 64:7168:4096:2:2:6:2}; do
    IFS=: read -r m n k nc ns st sp <<< "$c"
    step "ncu $c"
    timeout ${T_NCU:-120} ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy \
      --section LaunchStats --metrics "regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,dram__bytes_read.sum,lts__t_bytes.sum" python3 benchmarks/ncu_decode_wg.py $m $n $k $nc $ns $st $sp > "$OUT/ncu_${m}_${nc}_${ns}_${st}_${sp}.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Issue Slots Busy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Stall|Registers Per|Achieved Occupancy|Waves Per SM|Mem Busy|Max Bandwidth|L2 Hit|dram__bytes|lts__t_bytes" \
      "$OUT/ncu_${m}_${nc}_${ns}_${st}_${sp}.txt" | head -40
    grep -E "stalled" "$OUT/ncu_${m}_${nc}_${ns}_${st}_${sp}.txt" | awk '$NF+0 > 3' | head -12
  done
fi
if has race; then
  step "racecheck with line info"
  timeout ${T_SAN:-150} compute-sanitizer --tool racecheck --racecheck-report hazard --show-backtrace device \
    python3 tests/support/gpu_decode_wg_smoke.py --quick --lineinfo > "$OUT/san_race_lines.txt" 2>&1
  echo "rc=$?"; grep -E "Race reported|Write access|Read access|at .*gemm_mx_decode_sm90_wg.hip:[0-9]+|\.hip:[0-9]+" "$OUT/san_race_lines.txt" | head -40
fi
if has ncu_src; then
  # NCU_SRC: one "M:N:K:nc:ns:stages:split" case, full set with source: the top SASS lines by stall samples
  IFS=: read -r m n k nc ns st sp <<< "${NCU_SRC:-64:7168:4096:2:1:8:1}"
  step "ncu --set full ${NCU_SRC:-}"
  timeout ${T_NCU:-180} ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --set full --import-source yes -f \
    -o "$OUT/wg_full" python3 benchmarks/ncu_decode_wg.py $m $n $k $nc $ns $st $sp ${NCU_ARGS:-} --lineinfo \
    > "$OUT/ncu_full_log.txt" 2>&1
  echo "ncu rc=$?"; tail -2 "$OUT/ncu_full_log.txt"
  python3 benchmarks/ncu_source_top.py "$OUT/wg_full.ncu-rep" 45 2>&1 | tee "$OUT/ncu_src_top.txt" | head -50
fi
if has diag; then
  step "the kernel's parts (DWG_DIAG builds) ${DIAG_SHAPES:-}"
  timeout ${T_DIAG:-200} python3 benchmarks/dev_decode_wg_diag.py "${DIAG_SHAPES:-16x7168x4096,64x7168x4096}" ${DIAG_CFG:-} 2>&1 \
    | tee "$OUT/diag.txt" | tail -20
fi
if has ncu_diag; then
  # the DWG_DIAG build NCU_DIAG (default 1: the pipeline alone) of DIAG_SHAPES' first shape: ncu full set + source view
  step "ncu --set full, DWG_DIAG ${NCU_DIAG:-1}"
  timeout ${T_NCU:-180} ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1 --set full --import-source yes -f \
    -o "$OUT/wg_diag" python3 benchmarks/dev_decode_wg_diag.py "${DIAG_SHAPES:-64x7168x4096}" ${DIAG_CFG:-2 1 8} \
    --once ${NCU_DIAG:-1} --lineinfo > "$OUT/ncu_diag_log.txt" 2>&1
  echo "ncu rc=$?"; tail -2 "$OUT/ncu_diag_log.txt"
  python3 benchmarks/ncu_source_top.py "$OUT/wg_diag.ncu-rep" 40 2>&1 | tee "$OUT/ncu_diag_top.txt" | cut -c1-160 | head -45
  ncu --import "$OUT/wg_diag.ncu-rep" --page details 2>&1 | grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Issue Slots|Warp Cycles Per Issued|No Eligible|lts__t|Memory Throughput" | head -12
fi
