"""A few float32 grouped wgrads on the sm90_bf16 route for `ncu -k regex:gemm_wgrad_bf16_sm90 -s 1 -c 1` (session 15):
python3 benchmarks/ncu_wgrad_bf16.py [G M_per_group N K]  (balanced groups; default DeepSeek-V3 GateUp G 16, M 2048)"""

import os
import sys

import cupy
import numpy as np

import mxrt

os.environ["MXRT_GROUPED_GEMM_KERNEL"] = "sm90_bf16"
g, mg, n, k = (int(v) for v in sys.argv[1:5]) if len(sys.argv) > 4 else (16, 2048, 4096, 7168)
lens = np.full(g, mg)
rng = cupy.random.default_rng(0)
go = rng.standard_normal((g * mg, n), dtype=cupy.float32)
x = rng.standard_normal((g * mg, k), dtype=cupy.float32)
qg = mxrt.quantize_mx_grouped(go, cupy.asarray(lens), "e4m3", colwise=True).col
qx = mxrt.quantize_mx_grouped(x, cupy.asarray(lens), "e4m3", colwise=True).col
dl = cupy.asarray(lens)
for _ in range(3):
    mxrt.grouped_gemm_mx_wgrad(qg, qx, dl)
cupy.cuda.Device().synchronize()
