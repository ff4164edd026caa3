"""A few MoE decode calls (``mxrt.moe_gemm_mx``, DeepSeek-V3 gate_up or down with 64 local experts, top-8, block 16,
the bench's cells: benchmarks/bench_decode.py ``moe_cell``) for
`ncu -k regex:gemm_mx_decode_sm90_moe -s 2 -c 1` (issue 12: where MXFP4 MoE decode loses to MXFP8):
python3 benchmarks/ncu_moe_decode.py T [gate_up|down] [--fmt e2m1]"""

import sys

import cupy

sys.path.insert(0, "benchmarks")
from bench_decode import MOE_GEMMS, moe_cell, moe_weights

import mxrt

fmt = "e4m3"
if "--fmt" in sys.argv:
    i = sys.argv.index("--fmt")
    fmt = sys.argv[i + 1]
    del sys.argv[i : i + 2]
t = int(sys.argv[1]) if len(sys.argv) > 1 else 1
gemm = sys.argv[2] if len(sys.argv) > 2 else "gate_up"
n, k, gate = MOE_GEMMS[gemm]
w = moe_weights(64, n, k, fmt)
x, layout, kw, _, nbytes = moe_cell(w, t, 8, 16, gate)
for _ in range(4):
    mxrt.moe_gemm_mx(x, w, *layout, **kw)
cupy.cuda.Device().synchronize()
print(f"T {t} {gemm} {fmt}: {nbytes} bytes touched")
