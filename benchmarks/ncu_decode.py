"""A few decode GEMM calls (M x 7168 x 4096, bf16 out) for `ncu -k regex:gemm_mx_decode -s 2 -c 1` (issue 12).

python3 benchmarks/ncu_decode.py M [e4m3|e2m1]
"""

import sys

import cupy

import mxrt

m = int(sys.argv[1]) if len(sys.argv) > 1 else 1
fmt = sys.argv[2] if len(sys.argv) > 2 else "e4m3"
rng = cupy.random.default_rng(0)
a = mxrt.quantize_mx(rng.standard_normal((m, 4096), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((7168, 4096), dtype=cupy.float32), fmt)
for _ in range(4):
    mxrt.gemm_mx(a, b)
cupy.cuda.Device().synchronize()
