"""Host time of mxrt's own Python per small call, on the CPU (no GPU, no CuPy): the dispatch of ``gemm_mx`` and
``quantize_mx`` walked through tests/support/fake_cupy.py (fake arrays, fake builds, a C no-op as
cuLaunchKernel). What this measures is what mxrt adds on top of CuPy and the driver; CuPy's allocator and the
driver's launch are not in it (``mxrt bench overhead`` on a GPU has them).

    PYTHONPATH=$PWD:$PWD/tests python benchmarks/overhead_cpu_profile.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import fake_cupy

import mxrt

SHAPES = [(1, 128, 128), (1, 7168, 4096), (4, 7168, 4096)]


def per_call(fn, calls: int = 2000, samples: int = 7) -> float:
    fn()
    best = []
    for _ in range(samples):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter() - t) / calls)
    return float(np.min(best))  # the CPU this runs on is shared: the least disturbed sample


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", action="store_true", help="cProfile the 1x128x128 gemm_mx and quantize_mx calls")
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with fake_cupy.install() as state:
        cp = sys.modules["cupy"]
        for m, n, k in SHAPES:
            a32 = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
            b32 = rng.standard_normal((n, k), dtype=np.float32)
            qa = mxrt.quantize_mx(a32, "e4m3", backend="gpu")
            hb = mxrt.quantize_mx(b32, "e4m3", backend="numpy")
            qb = mxrt.MXArray(cp.asarray(hb.data), cp.asarray(hb.scales), "e4m3", 32, 1, (n, k), "rceil")
            rows = [
                ("gemm_mx", lambda qa=qa, qb=qb: mxrt.gemm_mx(qa, qb)),
                ("gemm_mx split_k=4", lambda qa=qa, qb=qb: mxrt.gemm_mx(qa, qb, split_k=4)),
                ("quantize_mx", lambda a=a32: mxrt.quantize_mx(a, "e4m3", backend="gpu")),
            ]
            for name, fn in rows:
                us = per_call(fn, args.calls) * 1e6
                print(f"{m}x{n}x{k:<6} {name:20} {us:7.2f} us/call (mxrt's Python; fake CuPy / driver)")
            if args.profile and (m, n, k) == SHAPES[0]:
                for name, fn in rows[::2]:
                    pr = cProfile.Profile()
                    pr.enable()
                    for _ in range(args.calls):
                        fn()
                    pr.disable()
                    print(f"--- cProfile {name}")
                    pstats.Stats(pr).sort_stats("tottime").print_stats(18)
        print(f"builds: {len(state['builds'])}")


if __name__ == "__main__":
    main()
