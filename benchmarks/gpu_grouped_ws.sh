#!/usr/bin/env bash
# Device call of issue 11's grouped engine (gemm_mx_grouped_sm90_ws): prebuild, its GPU tests, sanitizers over the
# grouped smoke, the #330 benchmark as an A/B of the engine against the older Hopper grouped kernel (fwd / dgrad).
# Logs under $OUT. Usage on the device (steps in any order; the first call: "prebuild tests"):
#   bash benchmarks/gpu_grouped_ws.sh "prebuild tests smoke bench"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests}"
step device; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if has prebuild; then  # 16 engine builds + the older kernel's 43 + the e2m1 expansion, 16 at a time
  step prebuild
  timeout 300 python3 benchmarks/prebuild.py gemm_mx_grouped_sm90_ws gemm_mx_grouped_sm90 e2m1_to_e4m3 --jobs 16 2>&1 \
    | tail -8
fi
if has tests; then
  step "pytest grouped engine + older Hopper kernel (forced: sm90)"
  timeout ${T_TESTS:-300} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm_sm90.py -p no:cacheprovider -x \
    2>&1 | tee "$OUT/pytest_sm90.txt" | tail -25
  step "pytest grouped (auto dispatch)"
  timeout ${T_AUTO:-240} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm.py -p no:cacheprovider -x 2>&1 \
    | tee "$OUT/pytest_auto.txt" | tail -15
fi
if has smoke; then
  step "smoke + compute-sanitizer (the engine runs lens / ids / masked, the older kernel the wgrad)"
  timeout 60 python3 tests/support/gpu_grouped_gemm_smoke.py 2>&1 | tail -2
  for tool in memcheck racecheck synccheck; do
    extra=""; quick=""; [[ $tool == memcheck ]] && extra="--leak-check no"; [[ $tool == racecheck ]] && quick="--quick"
    timeout ${T_SAN:-180} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_grouped_gemm_smoke.py $quick \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' "$OUT/san_$tool.txt" | tail -2 | tr '\n' ' ')"
  done
fi
if has bench; then  # A/B on the same machine: the engine, then the older kernel (fwd / dgrad; the wgrad is the same)
  for kernel in sm90_ws sm90_wgmma; do
    step "bench_grouped_gemm --kernel $kernel (${BENCH_ARGS:-})"
    timeout ${T_BENCH:-200} python3 benchmarks/bench_grouped_gemm.py --kernel $kernel --passes fwd,dgrad \
      --budget-s ${BUDGET:-150} --json "$OUT/bench_$kernel.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_$kernel.txt" \
      | grep -v "^  " | tail -40
  done
fi
step done
