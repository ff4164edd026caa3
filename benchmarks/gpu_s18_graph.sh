#!/usr/bin/env bash
# Session 18: graph memory. demo (benchmarks/graph_memory_demo.py in each of TREES: does a replay write arrays
# allocated after the capture), host (eager host time of a small gemm_mx call per tree, legacy and side stream),
# tests (tests/test_gpu_graph_memory.py and every GPU test whose name says graph or capture). Logs under $OUT.
source "$(dirname "$0")/gpu_common.sh" "${1:-demo host tests}"
nvidia-smi --query-gpu=name --format=csv,noheader
if has demo; then
  for tree in ${TREES:-.}; do
    step "demo, tree $tree"
    for args in "sm90_cublas" "generic 3"; do
      (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 120 python3 benchmarks/graph_memory_demo.py $args 2>&1 | tail -1)
    done
  done
fi
if has host; then
  for rep in 1 2; do
    for tree in ${TREES:-.}; do
      (cd $tree && PYTHONPATH=$PWD:$PWD/tests timeout 120 python3 - "$tree" <<'PY'
import sys, time, cupy, mxrt
from support.gemm_cases import operands, to_device
_, _, qa, qb = operands(1, 256, 256, "e4m3", "e4m3", seed=1)
a, b = to_device(qa), to_device(qb)
out = cupy.empty((1, 256), cupy.uint16)
res = []
for name, s in (("legacy", cupy.cuda.Stream.null), ("side", cupy.cuda.Stream(non_blocking=True))):
    with s:
        for _ in range(200):
            mxrt.gemm_mx(a, b, out=out)
        s.synchronize()
        t = time.perf_counter()
        for _ in range(3000):
            mxrt.gemm_mx(a, b, out=out)
        s.synchronize()
        res.append(f"{name} {(time.perf_counter() - t) / 3000 * 1e6:.1f} us/call")
print(f"host, tree {sys.argv[1]}: " + ", ".join(res))
PY
)
    done
  done
fi
if has tests; then
  step "GPU tests: graph memory, and every graph / capture test"
  timeout 420 python3 -m pytest -q -m gpu tests/test_gpu_graph_memory.py tests/test_gpu_*.py -k "graph or capture" \
    -p no:cacheprovider 2>&1 | tail -4
fi
