#!/usr/bin/env bash
# Closing device calls on merged main (sessions 9-12): PART=1 the GEMM GPU suites (every dense path incl. sm90_bf16 /
# sm90_ws / decode, the grouped GEMMs), PART=2 the other GPU test files and the GPU `mxrt check`; FILES: a list of
# test files instead (CHECK=1: the GPU `mxrt check` after them).
source "$(dirname "$0")/gpu_common.sh"
echo "=== prebuild ($(date +%T))"
timeout 200 python3 benchmarks/prebuild.py ${PREBUILD:-gemm_mx_generic gemm_mx_sm90 gemm_mx_sm90_ws gemm_mx_sm90_bf16 \
  mx_gemm_window_check e2m1_to_e4m3 gemm_mx_decode_sm90 gemm_mx_grouped_sm90 gemm_mx_grouped_sm90_ws \
  gemm_mx_grouped_generic gemm_mx_splitk_reduce dequantize_mx grouped_offsets gemm_mx_decode_sm90_wg \
  ep_route_count ep_route_scatter ep_recv_map ep_gather_rows gemm_wgrad_bf16_sm90 kgrouped_to_bf16 \
  quantize_mx_grouped_rowcol quantize_mx_dual_grouped} --jobs 16 2>&1 | tail -2
if [[ -n ${FILES:-} ]]; then
  :  # the caller's list
elif [[ ${PART:-1} == 1 ]]; then
  FILES="tests/test_gpu_gemm.py tests/test_gemm_sm90.py tests/test_gemm_sm90_ws.py tests/test_gemm_sm90_bf16.py tests/test_gemm_cublas.py \
    tests/test_gpu_grouped_gemm_sm90.py tests/test_gpu_grouped_gemm.py tests/test_gpu_gemm_decode.py \
    tests/test_gpu_gemm_decode_wg.py"
else
  FILES="tests/test_gpu_grouped.py tests/test_gpu_interop.py tests/test_gpu_moe.py tests/test_gpu_moe_gemm.py \
    tests/test_gpu_quant.py tests/test_gpu_dequant.py tests/test_gpu_layouts.py tests/test_gpu_moe_combine.py tests/test_ep.py tests/test_ep_readme.py \
    tests/test_gpu_grouped_torch.py tests/test_torch_grouped.py tests/test_decode_table.py tests/test_grouped_plans.py \
    tests/test_gpu_grouped_wgrad_bf16.py tests/test_gpu_deepgemm_hopper_recipe.py"
fi
echo "=== pytest -m gpu PART=${PART:-1} ($(date +%T))"
timeout ${T_TESTS:-420} python3 -m pytest -q -m gpu $FILES -o filterwarnings=default -p no:cacheprovider -rfE \
  > "$OUT/pytest.txt" 2>&1; echo "rc=$?"; tail -8 "$OUT/pytest.txt"
if [[ ${PART:-1} == 2 || -n ${CHECK:-} ]]; then
  echo "=== mxrt check (GPU) ($(date +%T))"
  timeout 150 python3 -m mxrt.cli check 2>&1 | tail -4
fi
if [[ -n ${BENCH_DECODE:-} ]]; then
  echo "=== bench_decode $BENCH_DECODE ($(date +%T))"
  timeout ${T_BENCH:-300} python3 benchmarks/bench_decode.py $BENCH_DECODE --json "$OUT/bench_decode.json" \
    --plot "$OUT/decode_bandwidth.png" > "$OUT/bench_decode.txt" 2>&1; echo "rc=$?"
  grep -E "^\| |wall" "$OUT/bench_decode.txt" | tail -100
fi
echo "=== done ($(date +%T))"
