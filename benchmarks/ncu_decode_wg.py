"""A few wgmma decode GEMM calls (M x N x K, e4m3 tokens, MXFP8 or with ``--fmt e2m1`` MXFP4 weights, bf16 out) for
`ncu -k regex:gemm_mx_decode_sm90_wg -s 2 -c 1` (issue 12):
python3 benchmarks/ncu_decode_wg.py M [N K nc ns stages split [pw]] [--fmt e2m1] [--ctas C] [--lineinfo] [--w16]
(``--ctas C``: the stream-K grid of C CTAs, 0 the older grid; otherwise the path's own choice; ``--w16``: the weight
in aiter's 16x16 layout, ``b_weight_layout="aiter16x16"``, the WLB build)"""

import sys

import cupy

import mxrt
from mxrt.ops import gemm as gemm_op
from mxrt.ops import gemm_decode_wg
from mxrt.problems import gemm_problem

if "--lineinfo" in sys.argv:  # line info for ncu's source view
    sys.argv.remove("--lineinfo")
    from mxrt.runtime import compiler

    plain = compiler.compile_options
    compiler.compile_options = lambda arch, d: (*plain(arch, d), "-lineinfo")
fmt = "e4m3"
if "--fmt" in sys.argv:
    i = sys.argv.index("--fmt")
    fmt = sys.argv[i + 1]
    del sys.argv[i : i + 2]
w16 = "--w16" in sys.argv
if w16:
    sys.argv.remove("--w16")
ctas = None
if "--ctas" in sys.argv:
    i = sys.argv.index("--ctas")
    ctas = int(sys.argv[i + 1])
    del sys.argv[i : i + 2]
m = int(sys.argv[1]) if len(sys.argv) > 1 else 64
n, k = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (7168, 4096)
tune = {}
if len(sys.argv) > 7:
    tune = dict(nc=int(sys.argv[4]), ns=int(sys.argv[5]), stages=int(sys.argv[6]), split=int(sys.argv[7]))
    if len(sys.argv) > 8:
        tune["pw"] = int(sys.argv[8])
if ctas is not None:
    tune["ctas"] = ctas
rng = cupy.random.default_rng(0)
a = mxrt.quantize_mx(rng.standard_normal((m, k), dtype=cupy.float32), "e4m3")
b = mxrt.quantize_mx(rng.standard_normal((n, k), dtype=cupy.float32), fmt)
if w16:  # the same weight, shuffled on the host (preshuffle_weight is numpy)
    shuf = cupy.asarray(mxrt.preshuffle_weight(b.data.get()))
    dg = gemm_op.device_gemm(gemm_problem(a, (shuf, b.scales, fmt, k), b_weight_layout="aiter16x16"))
else:
    dg = gemm_op.device_gemm(gemm_problem(a, b))
for _ in range(4):
    gemm_decode_wg.run(dg, **tune)
cupy.cuda.Device().synchronize()
