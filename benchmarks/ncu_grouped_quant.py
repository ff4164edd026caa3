"""A few grouped-quantizer calls for `ncu -k regex:quantize_mx -s 2 -c 1` (issue 11 quantizer targets).

python3 benchmarks/ncu_grouped_quant.py rowcol|dual|plain|plainbf [k]
"""

import sys

import cupy

import mxrt

which = sys.argv[1] if len(sys.argv) > 1 else "rowcol"
k = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
rng = cupy.random.default_rng(0)
if which == "rowcol":
    x = rng.standard_normal((32768, k), dtype=cupy.float32).astype(cupy.float16)
    lens = cupy.full((8,), 32768 // 8, dtype=cupy.int32)
    for _ in range(4):
        mxrt.quantize_mx_grouped(x, lens, "e4m3", colwise=True)
elif which == "plainbf":  # quantize_mx_dual as `mxrt bench quant` times it: bf16 [8192, 8192]
    import torch  # CuPy has no bfloat16: a torch tensor through DLPack

    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(4):
        mxrt.quantize_mx_dual(w, "e4m3")
elif which == "plain":  # quantize_mx_dual of one [7168, k] weight-sized matrix
    w = rng.standard_normal((7168 * 4, k), dtype=cupy.float32).astype(cupy.float16)
    for _ in range(4):
        mxrt.quantize_mx_dual(w, "e4m3")
else:
    w = rng.standard_normal((8, 7168, k), dtype=cupy.float32).astype(cupy.float16)
    for _ in range(4):
        mxrt.quantize_mx_dual_grouped(w, "e4m3")
cupy.cuda.Device().synchronize()
