"""CUDA-event timing shared by the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import cupy


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
