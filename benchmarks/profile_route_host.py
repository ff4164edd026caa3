"""Host cost of one eager call of the grouped GEMMs' torch route (session 11 call 4): gpt-oss-20B Down, B = 4,
M = 2048 (the shape where the route ran at 0.22-0.39x in call 3). Prints the wall time per call with the GPU
kept busy vs idle, and a cProfile of 30 calls (top functions by own time).

    python benchmarks/profile_route_host.py
"""

from __future__ import annotations

import cProfile
import pstats
import time

import cupy
import numpy as np

import mxrt

b, m, n, k = 4, 2048, 2880, 2880
lens = cupy.asarray(np.full(b, m, np.int64))
x = cupy.random.standard_normal((b * m, k), dtype=cupy.float32)
w = cupy.random.standard_normal((b, n, k), dtype=cupy.float32)
qx, qw = mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)
y = cupy.empty((b * m, n), cupy.uint16)


def call():
    mxrt.grouped_gemm_mx(qx, qw, lens, out=y)


for _ in range(3):
    call()
cupy.cuda.Device().synchronize()
for label, sync_each in (("queued back to back", False), ("synchronised each call", True)):
    t0 = time.perf_counter()
    for _ in range(30):
        call()
        if sync_each:
            cupy.cuda.Device().synchronize()
    cupy.cuda.Device().synchronize()
    print(f"{label}: {(time.perf_counter() - t0) / 30 * 1e6:.0f} us per call")
t0 = time.perf_counter()
for _ in range(30):
    call()
print(f"host only (no sync, GPU queue filling): {(time.perf_counter() - t0) / 30 * 1e6:.0f} us per call")
cupy.cuda.Device().synchronize()
pr = cProfile.Profile()
pr.enable()
for _ in range(30):
    call()
pr.disable()
cupy.cuda.Device().synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
