# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""Host overhead of the public ops on small problems (device): wall time per call, no graph, vs torch.matmul,
plus a cProfile of gemm_mx. Diagnostic for issue 9's host-overhead target; `mxrt bench overhead` is the benchmark."""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import cupy
import numpy as np
import torch

import mxrt


def per_call_us(fn, n=300, warm=30):
    for _ in range(warm):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for m, n, k in ((1, 128, 128), (16, 7168, 4096)):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        qa, qb = mxrt.quantize_mx(cupy.asarray(x)), mxrt.quantize_mx(cupy.asarray(w))
        ta = torch.from_numpy(x).cuda().to(torch.bfloat16)
        tw = torch.from_numpy(w).cuda().to(torch.bfloat16)
        tqa, tqb = mxrt.quantize_mx(ta), mxrt.quantize_mx(tw)
        xc = cupy.asarray(x)
        t_mm = per_call_us(lambda ta=ta, tw=tw: torch.matmul(ta, tw.T))
        rows.append((f"torch.matmul bf16 {m}x{n}x{k}", t_mm, 1.0))
        for name, fn in (
            ("gemm_mx cupy", lambda: mxrt.gemm_mx(qa, qb)),
            ("gemm_mx cupy split_k=4", lambda: mxrt.gemm_mx(qa, qb, split_k=4)),
            ("gemm_mx torch", lambda: mxrt.gemm_mx(tqa, tqb)),
            ("quantize_mx cupy x", lambda: mxrt.quantize_mx(xc)),
            ("quantize_mx torch x", lambda: mxrt.quantize_mx(ta)),
        ):
            t = per_call_us(fn)
            rows.append((f"{name} {m}x{n}x{k}", t, t / t_mm))
    print(f"{'call':45s} {'us/call':>9s} {'/ torch.matmul':>15s}")
    for name, t, r in rows:
        print(f"{name:45s} {t:9.1f} {r:15.2f}")
    if "--profile" in sys.argv:
        x = rng.standard_normal((1, 128)).astype(np.float32)
        qa = mxrt.quantize_mx(cupy.asarray(x))
        for what, fn in (
            ("gemm_mx", lambda: mxrt.gemm_mx(qa, qa)),
            ("quantize_mx", lambda: mxrt.quantize_mx(cupy.asarray(x))),
        ):
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(500):
                fn()
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
            print(f"==== {what}: 500 calls, by tottime\n", s.getvalue()[:6000])


if __name__ == "__main__":
    main()
