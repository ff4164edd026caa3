#!/usr/bin/env bash
# One device call that proves every GPU op of main: GPU tests, `mxrt check` on the GPU, compute-sanitizer
# (memcheck + racecheck) over the smoke scripts, the GEMM benchmark against its peers (and the bandwidth
# benchmarks with QUANT_BENCH=1). Logs go to $OUT (or ./gpu_out),
# six files at most (the device tool returns eight).
# Usage on the device: bash benchmarks/gpu_session.sh
source "$(dirname "$0")/gpu_common.sh"
step "device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m mxrt.cli info --compile 2>&1 | tee "$OUT/info.txt"
step "pytest -m gpu"
python3 -m pytest -q -m gpu tests/ -o filterwarnings=default -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -15
step "mxrt check (GPU)"
python3 -m mxrt.cli check --json "$OUT/check.json" > "$OUT/check.txt" 2>&1; echo "rc=$?"; tail -3 "$OUT/check.txt"
grep -c " gpu " "$OUT/check.txt" | sed 's/^/gpu rows: /'
step "compute-sanitizer"
for s in tests/support/gpu_*_smoke.py; do
  for tool in memcheck racecheck; do
    extra=""; quick=""; [[ $tool == memcheck ]] && extra="--leak-check no"; [[ $tool == racecheck ]] && quick="--quick"
    compute-sanitizer --tool $tool $extra python3 "$s" $quick > /tmp/san.txt 2>&1
    rc=$?; { echo "### $s $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
    echo "$s $tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
  done
done
step "benchmarks"
# GEMM vs its peers in the same run, then the host overhead (mxrt bench gemm; BENCH_GEMM_ARGS e.g. "--quick"), and
# the bandwidth suites of the quantizers and layouts when QUANT_BENCH=1 (tables in bench.txt).
plot=(); python3 -c "import matplotlib" 2>/dev/null && plot=(--plot "$OUT/bench_gemm.png")  # else: --from-json later
timeout 420 python3 -m mxrt.cli bench gemm --json "$OUT/bench_gemm.json" ${plot[@]+"${plot[@]}"} --no-progress ${BENCH_GEMM_ARGS:-} 2>&1 | tee -a "$OUT/bench.txt" | tail -80
if [[ ${QUANT_BENCH:-0} == 1 ]]; then
  for s in quant grouped-quant layouts; do
    echo "--- mxrt bench $s"; timeout 150 python3 -m mxrt.cli bench "$s" --no-progress 2>&1 | tee -a "$OUT/bench.txt" | tail -40
  done
fi
