"""Where a small ``gemm_mx`` / ``quantize_mx`` call spends its host time (issue 9, host overhead), on the GPU.

Prints (1) wall time per call of the pieces every call pays, measured alone: ``cupy.empty``, a prebuilt CuPy
``RawKernel`` launch with the sm90 GEMM's argument tuple, ``torch.matmul`` (the baseline), the whole
``gemm_mx`` / ``quantize_mx``; (2) the cProfile of ``--calls`` calls of each, top functions by own time.

Usage on the device: ``python3 benchmarks/profile_overhead.py [--shape 1x128x128] [--calls 2000]``
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import cupy

import mxrt


def per_call(fn, calls: int) -> float:
    fn()
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1x128x128")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    m, n, k = (int(v) for v in args.shape.split("x"))
    rng = cupy.random.default_rng(0)
    a32 = rng.standard_normal((m, k), dtype=cupy.float32)
    b32 = rng.standard_normal((n, k), dtype=cupy.float32)
    qa, qb = mxrt.quantize_mx(a32, "e4m3"), mxrt.quantize_mx(b32, "e4m3")
    cases = {
        "cupy.empty": lambda: cupy.empty((m, n), cupy.uint16),
        "gemm_mx": lambda: mxrt.gemm_mx(qa, qb),
        "gemm_mx split_k=4": lambda: mxrt.gemm_mx(qa, qb, split_k=4),
        "quantize_mx": lambda: mxrt.quantize_mx(a32, "e4m3"),
    }
    try:
        import torch

        ta, tb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda").bfloat16()
        cases["torch.matmul"] = lambda: torch.matmul(ta, tb.t())
    except Exception as e:
        print("no torch:", e)
    # a prebuilt launch of the kernel gemm_mx ran last (recorded by the runtime's debug session)
    with mxrt.runtime.debug() as ses:
        mxrt.gemm_mx(qa, qb)
    print("launches of one gemm_mx call:", ses.launches)
    for name, fn in cases.items():
        print(f"{name:24} {per_call(fn, args.calls) * 1e6:8.1f} us/call")
    for name in ("gemm_mx", "quantize_mx"):
        fn = cases[name]
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            fn()
        pr.disable()
        cupy.cuda.Device().synchronize()
        print(f"\n=== cProfile {name} x {args.calls} (tottime, top 28)")
        pstats.Stats(pr).sort_stats("tottime").print_stats(28)


if __name__ == "__main__":
    main()
