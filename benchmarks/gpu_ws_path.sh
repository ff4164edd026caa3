#!/usr/bin/env bash
# One device call (H100 / H200, < 10 minutes) that proves the sm90_ws GEMM path (the issue-10 engine as a GemmPath):
#   (a) the GPU tests of the path: tests/test_gpu_gemm.py, tests/test_gemm_sm90.py and tests/test_gemm_sm90_ws.py
#       with -k sm90_ws (the shared matrix forced to sm90_ws, the sm90 reference and graph-capture tests on
#       sm90_ws, the engine's own persistent-walk / K-tail / scale-layout / bitwise-rerun cases, the prepared-plan
#       cases that auto-select it);
#   (b) compute-sanitizer memcheck, racecheck, synccheck on the gemm smoke forced to sm90_ws (--path sm90_ws: the
#       smoke calls it serves, the others skipped, plus the 3-CTA persistent walk over every scale layout code);
#   (c) CUDA-graph capture on fresh buffers and bitwise reruns: part of (a) (test_graph_capture_on_fresh_buffers
#       [sm90_ws-*], test_fp4_every_out_dtype_and_bitwise_reruns, test_persistent_walk_layouts_and_k_tails);
#   (d) timing rows in one process: mxrt bench gemm at 8192^3 and the MoE shapes, MXFP8 and MXFP4, rows
#       "mxrt sm90_ws sk1", "mxrt sm90_wgmma sk1", cuBLAS bf16, deq+cuBLAS compiled (no Triton sweep); then grids
#       below one wave (128 / 32 / 64 tiles of 128 x 128), which auto_decline leaves to sm90_wgmma today, on both.
# Logs in $OUT (or ./gpu_out), 5 files: info.txt, pytest.txt, sanitizer.txt, bench.txt, bench_gemm.json.
# Usage on the device: bash benchmarks/gpu_ws_path.sh
source "$(dirname "$0")/gpu_common.sh"
DEADLINE=${DEADLINE:-555}  # seconds of this script; each step gets min(its own cap, what is left - 10)
step() { echo; echo "=== $* (t=${SECONDS}s)"; }
cap() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; ((left < $1)) && echo "$left" || echo "$1"; }

step "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c "import mxrt, cupy; from mxrt.runtime import get_arch; print(mxrt.__file__, cupy.__version__, get_arch())"
  git log --oneline -1 2>/dev/null; } 2>&1 | tee "$OUT/info.txt"

step "prebuild (the ws builds of the compile check, in parallel; then the tests load them)"
timeout "$(cap 120)" python3 benchmarks/prebuild.py gemm_mx_sm90_ws e2m1_to_e4m3 --jobs 16 2>&1 | tee -a "$OUT/info.txt" | tail -4

step "(a)+(c) pytest -m gpu -k sm90_ws"
timeout "$(cap 210)" python3 -m pytest -q -m gpu -k sm90_ws tests/test_gpu_gemm.py tests/test_gemm_sm90.py \
  tests/test_gemm_sm90_ws.py -o filterwarnings=default -p no:cacheprovider -rfE --durations=8 > "$OUT/pytest.txt" 2>&1
echo "rc=$?"; tail -22 "$OUT/pytest.txt"

step "(b) compute-sanitizer on the gemm smoke forced to sm90_ws"
for tool in memcheck racecheck synccheck; do
  extra=""; [[ $tool == memcheck ]] && extra="--leak-check no"
  [[ $tool == racecheck ]] && limit=110 || limit=70
  timeout "$(cap $limit)" compute-sanitizer --tool $tool $extra python3 tests/support/gpu_gemm_smoke.py \
    --path sm90_ws > /tmp/san.txt 2>&1
  rc=$?; { echo "### gpu_gemm_smoke.py --path sm90_ws $tool rc=$rc"; cat /tmp/san.txt; } >> "$OUT/sanitizer.txt"
  echo "$tool rc=$rc: $(grep -E 'gpu_gemm_smoke:' /tmp/san.txt | tail -1) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.txt | tail -1)"
done

step "(d) mxrt bench gemm: sm90_ws and sm90_wgmma beside cuBLAS bf16 and compiled dequant + cuBLAS"
timeout "$(cap 200)" python3 -m mxrt.cli bench gemm --shapes 8192x8192x8192,4096x4096x7168,4096x7168x2048,4096x5760x2880 \
  --paths sm90_ws,sm90_wgmma --no-triton --no-overhead --no-progress --budget-s 150 --json "$OUT/bench_gemm.json" \
  > "$OUT/bench.txt" 2>&1
echo "rc=$?"; grep -E "^\|" "$OUT/bench.txt" | tail -40
step "(d) below one wave, where auto_decline leaves the call to sm90_wgmma today (MXFP8; rows forced per path)"
timeout "$(cap 80)" python3 -m mxrt.cli bench gemm --shapes 1024x2048x7168,512x1024x2048,256x4096x1024 \
  --formats mxfp8 --paths sm90_ws,sm90_wgmma --only mxrt --no-overhead --no-progress --reps 5 --budget-s 60 \
  >> "$OUT/bench.txt" 2>&1
echo "rc=$?"; grep -E "^\|" "$OUT/bench.txt" | tail -12
step "done"
