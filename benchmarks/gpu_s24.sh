#!/usr/bin/env bash
# Session 24 (issue 12, MXFP4 MoE decode at T 1 and on down). Steps: trace (dev_moe_trace.py: the CTA timeline of the
# MoE kernel, op against kernel alone, on TRACE_ARGS, log $OUT/trace.log), probe (probe_moe_dram.py: the DRAM rate of
# the kernel's access pattern), sweep (dev_moe_sweep.py on SWEEP_ARGS), moe (tests/test_gpu_moe_gemm.py), san (the MoE
# smoke under the sanitizers), sweep2 (a second sweep on SWEEP2_ARGS), base (dev_moe_sweep.py on BASE_ARGS in ab_h, a
# HEAD export passed in carry), ab (bench_decode.py --moe on TREES). Call 1 also timed a DEC_EARLY build (removed
# since: RESULTS.md session 24).
source "$(dirname "$0")/gpu_common.sh" "${1:-trace}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has trace; then
  step "trace: ${TRACE_ARGS:---t 1,16}"
  timeout 200 python3 benchmarks/dev_moe_trace.py ${TRACE_ARGS:---t 1,16} > "$OUT/trace.log" 2>&1
  tail -3 "$OUT/trace.log"
fi
if has probe; then
  step "probe: DRAM rate of the MoE access pattern"
  timeout 200 python3 benchmarks/probe_moe_dram.py 2>&1 | tail -6
fi
if has sweep; then
  step "MoE sweep: ${SWEEP_ARGS:-}"
  timeout 300 python3 benchmarks/dev_moe_sweep.py ${SWEEP_ARGS:-} 2>&1 | tail -40
fi
if has sweep2; then  # a second sweep (e.g. the same cells with --extra)
  step "MoE sweep 2: ${SWEEP2_ARGS:-}"
  timeout 300 python3 benchmarks/dev_moe_sweep.py ${SWEEP2_ARGS:-} 2>&1 | tail -40
fi
if has moe; then
  step "GPU tests: MoE decode"
  timeout 300 python3 -m pytest -q -rf -m gpu tests/test_gpu_moe_gemm.py -p no:cacheprovider 2>&1 | grep -E "^FAILED|passed|failed" | cut -c1-200 | tail -12
fi
if has san; then
  step "sanitizers: MoE smoke"; sanitize tests/support/gpu_moe_gemm_smoke.py
fi
if has base; then  # the shipped e2m1 MoE builds from the HEAD tree exported to ab_h (carry), same cells as the sweeps
  step "MoE sweep, tree ab_h: ${BASE_ARGS:-}"
  (cd ab_h && PYTHONPATH=$PWD:$PWD/tests timeout 300 python3 benchmarks/dev_moe_sweep.py ${BASE_ARGS:-} 2>&1 | tail -20)
fi
if has ab; then  # bench_decode.py --moe on each tree of TREES (default "ab_h . ab_h ."), MoE rows only
  for tree in ${TREES:-ab_h . ab_h .}; do
    step "bench_decode --moe, tree $tree"
    (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 200 python3 benchmarks/bench_decode.py --moe \
      --m ${MOE_M:-1,4,16,64} --fmts ${MOE_FMTS:-e4m3,e2m1} 2>&1 | grep -E "^\| " | grep -v -E "^\| (gemm|---)")
  done
fi
