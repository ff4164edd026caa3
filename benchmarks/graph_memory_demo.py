"""Does a CUDA-graph replay of gemm_mx write arrays allocated after its capture? (session 18: the before / after of
mxrt.runtime.graph_memory; runs on trees without it too.) python3 benchmarks/graph_memory_demo.py PATH [SPLIT_K]"""

import os
import sys

import cupy
from support.gemm_cases import check_result, operands, to_device

import mxrt

path = sys.argv[1] if len(sys.argv) > 1 else "sm90_cublas"
kw = {"split_k": int(sys.argv[2])} if len(sys.argv) > 2 else {}
os.environ["MXRT_GEMM_PATH"] = path
m, n, k = 256, 192, 512
_, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=5)
a, b = to_device(qa), to_device(qb)
stream = cupy.cuda.Stream(non_blocking=True)
with stream:
    out = cupy.empty((m, n), cupy.uint16)
    mxrt.gemm_mx(a, b, out=out, **kw)
    stream.synchronize()
    stream.begin_capture()
    mxrt.gemm_mx(a, b, out=out, **kw)
    graph = stream.end_capture()
    sizes = (m * k * 2, n * k * 2, 4, 3 * m * n * 4, m * n * 4)
    fillers = [cupy.full(s, 0x5A, cupy.uint8) for s in sizes for _ in (0, 1)]
    out.fill(0xFFFF)
    graph.launch(stream=stream)
    stream.synchronize()
bad = sum(not bool((f == 0x5A).all()) for f in fillers)
held = getattr(mxrt.runtime, "graph_memory_bytes", lambda: "n/a")()
ok = not check_result(out, qa, qb, "bfloat16")
print(f"{path} {kw}: fillers written by the replay {bad} of {len(fillers)}; result ok {ok}; held {held}")
