"""Two bf16-route launches at 8192^3 MXFP8, bf16 out: the ncu target (`-k regex:gemm_mx_sm90_bf16 -s 1 -c 1`)."""

import sys

import cupy
import numpy as np

import mxrt
from mxrt.ops import gemm_sm90_bf16
from mxrt.ops.gemm_paths import DeviceGemm
from mxrt.runtime import get_arch

sys.path.insert(0, "benchmarks")
from gemm_sm90_bf16_dev import problem

rng = cupy.random.default_rng(0)
m = n = k = 8192
a = mxrt.quantize_mx(rng.standard_normal((m, k), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), "e4m3")
out = cupy.empty((m, n), cupy.uint16)
dg = DeviceGemm(problem(m, n, k, "e4m3", "e4m3", "bfloat16"), a.data, b.data, a.scales, b.scales, out, get_arch())
for _ in range(2):
    gemm_sm90_bf16.run(dg)
cupy.cuda.Device().synchronize()
print("ok", np.isfinite(cupy.asnumpy(out[:4, :4]).astype(np.float32)).all())
