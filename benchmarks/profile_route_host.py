"""Host cost of one eager call of the grouped GEMMs' torch route (session 11 call 4; session 12: the call plans):
gpt-oss-20B Down, B = 4, M = 2048, where the route was host-bound (0.34-0.61x ``torch._grouped_mm`` in call 10).
Each case runs with the call plans off (``MXRT_GROUPED_PLANS=0``: every call validated and dispatched afresh, the
session-11 route) and on (a repeated call signature runs its plan: mxrt/api/grouped_gemm.py), interleaved round by
round (host speed drifts between runs), and prints per call: the enqueue time of 30 calls without a sync ("host"),
the wall time of 30 calls back to back ("queued"), and with a sync after each ("synced"); medians of --reps rounds.
Then a cProfile of 30 calls of the first case, plans off and on (top functions by own time).

    python benchmarks/profile_route_host.py [--reps 5] [--calls 30] [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import cupy
import numpy as np

import mxrt

b, m, n, k = 4, 2048, 2880, 2880
MODES = {"plans off": "0", "plans on": "1"}


def cases() -> dict:
    lens = cupy.asarray(np.full(b, m, np.int64))
    x = cupy.random.standard_normal((b * m, k), dtype=cupy.float32)
    w = cupy.random.standard_normal((b, n, k), dtype=cupy.float32)
    dy = cupy.random.standard_normal((b * m, n), dtype=cupy.float32)
    qx, qw = mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)
    qg = mxrt.quantize_mx_grouped(dy, lens, colwise=True, col_align=32).col
    qxc = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32).col
    y = cupy.empty((b * m, n), cupy.uint16)
    dw = cupy.empty((b, n, k), cupy.uint16)
    return {
        "fwd, out=y": lambda: mxrt.grouped_gemm_mx(qx, qw, lens, out=y),
        "fwd, new result": lambda: mxrt.grouped_gemm_mx(qx, qw, lens),
        "wgrad bf16, out=dw": lambda: mxrt.grouped_gemm_mx_wgrad(qg, qxc, lens, out_dtype="bfloat16", out=dw),
    }


def measure(fn, calls: int) -> dict[str, float]:
    sync = cupy.cuda.Device().synchronize
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = time.perf_counter() - t0
    sync()
    queued = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
        sync()
    synced = time.perf_counter() - t0
    return {"host": host / calls * 1e6, "queued": queued / calls * 1e6, "synced": synced / calls * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    fns = cases()
    for env in MODES.values():  # warm both: builds, the plans, torch's allocator
        os.environ["MXRT_GROUPED_PLANS"] = env
        for fn in fns.values():
            for _ in range(3):
                fn()
    cupy.cuda.Device().synchronize()
    print(f"gpt-oss-20B Down B={b} M={m} (N = K = {n}), {args.calls} calls x {args.reps} rounds, us per call (median)")
    for name, fn in fns.items():
        rows = {mode: [] for mode in MODES}
        for _ in range(args.reps):
            for mode, env in MODES.items():
                os.environ["MXRT_GROUPED_PLANS"] = env
                rows[mode].append(measure(fn, args.calls))
        for mode, rs in rows.items():
            med = {key: float(np.median([r[key] for r in rs])) for key in rs[0]}
            print(f"  {name:20} {mode:9}  host {med['host']:6.0f}  queued {med['queued']:6.0f}  "
                  f"synced {med['synced']:6.0f}")  # fmt: skip
    if args.no_profile:
        return
    fn = next(iter(fns.values()))
    for mode, env in MODES.items():
        os.environ["MXRT_GROUPED_PLANS"] = env
        cupy.cuda.Device().synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            fn()
        pr.disable()
        cupy.cuda.Device().synchronize()
        print(f"--- cProfile, {mode}: {args.calls} calls of the first case")
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    os.environ.pop("MXRT_GROUPED_PLANS", None)


if __name__ == "__main__":
    main()
