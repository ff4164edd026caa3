"""Two gemm_mx calls at 8192^3 MXFP8, bf16 out: the target of `ncu -k regex:gemm_mx_sm90 -s 1 -c 1` (issue 10; gemm_mx picks sm90_ws there since session 8, sm90_wgmma with MXRT_GEMM_PATH)."""

import cupy

import mxrt

rng = cupy.random.default_rng(0)
a = mxrt.quantize_mx(rng.standard_normal((8192, 8192), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((8192, 8192), dtype=cupy.float32), "e4m3")
for _ in range(2):
    mxrt.gemm_mx(a, b)
cupy.cuda.Device().synchronize()
