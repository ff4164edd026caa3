#!/usr/bin/env bash
# Device calls of the sm90 grouped GEMM work (session 6): prebuild, GPU tests, sanitizers over the grouped smoke,
# the #330 benchmark, a dense 8192^3 timing after the tile factoring. Logs under $OUT. Usage on the device:
#   bash benchmarks/gpu_sm90_grouped.sh "prebuild tests smoke bench dense"
source "$(dirname "$0")/gpu_common.sh" "${1:-prebuild tests smoke bench}"
step device; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if has prebuild; then
  step prebuild; timeout 240 python3 benchmarks/prebuild.py gemm_mx_grouped_sm90 ${PREBUILD_MORE:-} --jobs 16 2>&1 | tail -8
fi
if has tests; then
  step "pytest sm90 grouped"
  timeout ${T_TESTS:-240} python3 -m pytest -q -m gpu tests/test_gpu_grouped_gemm_sm90.py tests/test_gpu_grouped_gemm.py \
    -p no:cacheprovider -x 2>&1 | tee "$OUT/pytest.txt" | tail -25
fi
if has dense_tests; then
  step "pytest dense sm90 path"
  timeout ${T_DENSE:-150} python3 -m pytest -q -m gpu tests/test_gpu_gemm.py -k sm90 -p no:cacheprovider -x 2>&1 \
    | tee "$OUT/pytest_dense.txt" | tail -8
fi
if has smoke; then
  step "smoke + compute-sanitizer"
  timeout 60 python3 tests/support/gpu_grouped_gemm_smoke.py 2>&1 | tail -2
  for tool in memcheck racecheck; do
    extra=""; quick=""; [[ $tool == memcheck ]] && extra="--leak-check no"; [[ $tool == racecheck ]] && quick="--quick"
    timeout ${T_SAN:-150} compute-sanitizer --tool $tool $extra python3 tests/support/gpu_grouped_gemm_smoke.py $quick \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|mismatches' "$OUT/san_$tool.txt" | tail -2 | tr '\n' ' ')"
  done
fi
if has dense; then
  step "dense gemm_mx 8192^3 bf16 (sm90_wgmma, CUDA events)"
  timeout 90 python3 - <<'PY' 2>&1 | tail -3
import cupy, numpy as np, mxrt
m = n = k = 8192
x = cupy.random.standard_normal((m, k), dtype=cupy.float32); w = cupy.random.standard_normal((n, k), dtype=cupy.float32)
qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(w)
out = cupy.empty((m, n), cupy.uint16)
for _ in range(3): mxrt.gemm_mx(qa, qb, out=out)
ts = []
for _ in range(10):
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event(); e0.record(); mxrt.gemm_mx(qa, qb, out=out); e1.record(); e1.synchronize()
    ts.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e-3)
t = float(np.median(ts)); print(f"dense 8192^3 bf16: {t*1e3:.3f} ms = {2*m*n*k/t/1e12:.0f} TFLOP/s")
PY
fi
if has bench; then
  step "bench_grouped_gemm (${BENCH_ARGS:-})"
  timeout ${T_BENCH:-200} python3 benchmarks/bench_grouped_gemm.py --json "$OUT/bench_grouped.json" ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench.txt" | grep -v "^  " | tail -75
fi
step done
