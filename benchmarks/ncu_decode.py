"""A few decode GEMM calls (M x 7168 x 4096, bf16 out; NK=NxK in the environment for another cell) for
`ncu -k regex:gemm_mx_decode -s 2 -c 1` (issue 12).

python3 benchmarks/ncu_decode.py M [e4m3|e2m1] [kw stages]
"""

import os
import sys

import cupy

import mxrt
from mxrt.ops import gemm as gemm_op
from mxrt.ops import gemm_decode
from mxrt.problems import gemm_problem

m = int(sys.argv[1]) if len(sys.argv) > 1 else 1
fmt = sys.argv[2] if len(sys.argv) > 2 else "e4m3"
tune = dict(kw=int(sys.argv[3]), stages=int(sys.argv[4])) if len(sys.argv) > 4 else {}
n, k = (int(v) for v in os.environ.get("NK", "7168x4096").split("x"))
rng = cupy.random.default_rng(0)
a = mxrt.quantize_mx(rng.standard_normal((m, k), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), fmt)
dg = gemm_op.device_gemm(gemm_problem(a, b))
for _ in range(4):
    gemm_decode.run(dg, **tune)
cupy.cuda.Device().synchronize()
