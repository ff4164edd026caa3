#!/usr/bin/env bash
# Device calls of session 14 (issue 12): the e2m1 staging ring of sm90_decode_wg (PF slots per producer warp).
# Steps (any order): prebuild, tests (the wgmma decode GPU tests), ab (bench_decode.py MXFP4 rows new / old / new on
# one machine; old = the kernel files in $AB_OLD, an untracked copy of the previous kernels_src, or with AB_OLD_ARGS
# those bench arguments instead, e.g. --sk off; AB_NEW_ARGS: the new runs' extra arguments), smoke (memcheck /
# racecheck / synccheck of tests/support/gpu_decode_wg_smoke.py), sweep (bench_decode.py --wg-sweep SWEEP), bench
# (bench_decode.py, BENCH_ARGS), suites (more pytest files: SUITES). Logs under $OUT.
#   bash benchmarks/gpu_s14.sh "prebuild tests ab"
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:$PWD/tests PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
steps=" ${1:-prebuild tests} "
step() { echo; echo "=== $* ($(date +%T))"; }
has() { [[ $steps == *" $1 "* ]]; }
step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has prebuild; then
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_mx_decode_sm90_wg gemm_mx_decode_sm90 gemm_mx_splitk_reduce \
    ${PREBUILD_MORE:-} --jobs 16 2>&1 | tail -3
fi
if has tests; then
  step "pytest sm90_decode_wg ${T_K:-}"
  timeout ${T_WG:-300} python3 -m pytest -q -m gpu tests/test_gpu_gemm_decode_wg.py ${T_K:+-k "$T_K"} -x \
    -p no:cacheprovider 2>&1 | tee "$OUT/pytest_wg.txt" | tail -15
fi
if has ab; then
  AB_ARGS=${AB_ARGS:---m 16,32,64 --tp 1,8 --fmts e2m1}
  for side in new old new2; do
    step "ab $side: bench_decode $AB_ARGS"
    src=$PWD/kernels_src; more=""
    [[ $side == old && -z ${AB_OLD_ARGS:-} ]] && src=${AB_OLD:-$PWD/ab_old/kernels_src}
    [[ $side == old ]] && more=${AB_OLD_ARGS:-}
    [[ $side != old ]] && more=${AB_NEW_ARGS:-}
    MXRT_KERNELS_SRC=$src timeout ${T_AB:-150} python3 benchmarks/bench_decode.py $AB_ARGS $more --budget-s 120 \
      --json "$OUT/ab_$side.json" > "$OUT/ab_$side.txt" 2>&1
    echo "rc=$?"; grep -E "^wall|budget" "$OUT/ab_$side.txt" | tail -2
  done
  python3 benchmarks/ab_compare.py "$OUT/ab_new.json" "$OUT/ab_old.json" "$OUT/ab_new2.json" 2>&1 | tee "$OUT/ab.txt"
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
  step "bench_decode --wg-sweep ${SWEEP:-} --fmts ${SWEEP_FMTS:-e2m1}"
  timeout ${T_SWEEP:-300} python3 benchmarks/bench_decode.py --wg-sweep "${SWEEP:-16x7168x4096,64x7168x4096}" \
    --fmts ${SWEEP_FMTS:-e2m1} 2>&1 | tee "$OUT/sweep.txt" | grep -v "^    " | tail -80
fi
if has bench; then
  step "bench_decode ${BENCH_ARGS:-}"
  timeout ${T_BENCH:-400} python3 benchmarks/bench_decode.py --json "$OUT/bench_decode.json" ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench.txt" | grep -v "^    " | tail -70
fi
if has suites; then
  step "pytest ${SUITES:-}"
  timeout ${T_SUITES:-400} python3 -m pytest -q -m gpu ${SUITES:-} -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest_suites.txt" | tail -10
fi
