"""Two gemm_mx calls at 8192^3 MXFP8, bf16 out: the ncu target of issue 10 (`-k regex:gemm_mx_sm90 -s 1 -c 1`).

gemm_mx picks `sm90_ws` there since session 8; `MXRT_GEMM_PATH=sm90_wgmma` profiles the older path."""

import cupy

import mxrt

rng = cupy.random.default_rng(0)
a = mxrt.quantize_mx(rng.standard_normal((8192, 8192), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((8192, 8192), dtype=cupy.float32), "e4m3")
for _ in range(2):
    mxrt.gemm_mx(a, b)
cupy.cuda.Device().synchronize()
