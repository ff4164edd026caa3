"""Achieved bandwidth of the GPU quantizers against a device-to-device copy in the same run (not a test).

Bytes counted: input read once + codes and scales written once. ``python benchmarks/bench_quant.py``.
"""

from __future__ import annotations

import argparse

import cupy
import numpy as np

import mxrt


def timed(fn, iters: int = 20) -> float:
    """Mean seconds per call over ``iters`` after 3 warm-ups, timed with CUDA events on the current stream."""
    for _ in range(3):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3 / iters


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--fmt", default="e4m3")
    args = p.parse_args()
    m, k = args.m, args.k
    x = cupy.asarray(np.random.default_rng(0).standard_normal((m, k)).astype(np.float16))  # 2-byte input
    src = cupy.empty(m * k * 2, cupy.uint8)
    dst = cupy.empty_like(src)
    t_copy = timed(lambda: dst.__setitem__(slice(None), src))
    copy_bw = 2 * src.nbytes / t_copy
    code_bytes = m * k if args.fmt != "e2m1" else m * k // 2
    rows = [("d2d copy", t_copy, 2 * src.nbytes)]
    t_row = timed(lambda: mxrt.quantize_mx(x, args.fmt))
    rows.append(("quantize_mx", t_row, 2 * m * k + code_bytes + m * k // 32))
    t_dual = timed(lambda: mxrt.quantize_mx_dual(x, args.fmt))
    rows.append(("quantize_mx_dual", t_dual, 2 * m * k + 2 * code_bytes + 2 * m * k // 32))
    print(f"device {mxrt.runtime.get_arch().name}, fp16 [{m}, {k}] -> {args.fmt}")
    for name, t, nbytes in rows:
        bw = nbytes / t
        print(f"{name:18s} {t * 1e6:9.1f} us  {bw / 1e12:6.2f} TB/s  {100 * bw / copy_bw:5.1f}% of copy")


if __name__ == "__main__":
    main()
