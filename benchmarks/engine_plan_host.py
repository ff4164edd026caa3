"""Host cost of eager grouped calls on the Hopper engine and the bf16 route, call plans off / on (session 21).

gpt-oss-20B Down (N = K = 2880) with B = 4 groups of M_g rows: ``fwd16`` the forward with fp16 out (the torch route
serves bf16 only, so fp16 runs the engine even with torch present), ``wgrad32`` the wgrad with its default float32
out (the bf16 route). Per case and mode, interleaved round by round (host speed drifts):
"host" = the enqueue time of --calls calls without a sync, "queued" = their wall time with one sync at the end,
"kernel" = the engine alone by CUDA events over the same calls; medians of --reps rounds, us per call.

    python benchmarks/engine_plan_host.py [--reps 5] [--calls 30] [--mg 256,2048] [--ops fwd16,wgrad32]
"""

from __future__ import annotations

import argparse
import os
import time

import cupy
import numpy as np

import mxrt
from mxrt.api import grouped_gemm as api

MODES = {"plans off": "0", "plans on": "1"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--mg", default="256,2048")
    ap.add_argument("--ops", default="fwd16,wgrad32")
    args = ap.parse_args()
    n = k = 2880
    g = 4
    print("| op | M_g | mode | host us/call | queued us/call | events us/call |")
    print("|---|---|---|---|---|---|")
    for op in args.ops.split(","):
        for mg in (int(v) for v in args.mg.split(",")):
            lens_h = np.full(g, mg, np.int64)
            lens = cupy.asarray(lens_h)
            if op == "fwd16":
                qx = mxrt.quantize_mx(cupy.random.standard_normal((g * mg, k), dtype=cupy.float32))
                qw = mxrt.quantize_mx(cupy.random.standard_normal((g, n, k), dtype=cupy.float32), axis=2)

                def call(qx=qx, qw=qw, lens=lens):
                    return mxrt.grouped_gemm_mx(qx, qw, lens, out_dtype="float16")
            else:
                dy = cupy.random.standard_normal((g * mg, n), dtype=cupy.float32)
                x = cupy.random.standard_normal((g * mg, k), dtype=cupy.float32)
                qg = mxrt.quantize_mx_grouped(dy, lens, colwise=True, col_align=32).col
                qxc = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32).col

                def call(qg=qg, qxc=qxc, lens=lens):
                    return mxrt.grouped_gemm_mx_wgrad(qg, qxc, lens)

            res: dict = {m: ([], [], []) for m in MODES}
            for _ in range(args.reps):
                for mode, env in MODES.items():
                    os.environ["MXRT_GROUPED_PLANS"] = env
                    api.clear_plans()
                    for _ in range(3):
                        call()
                    cupy.cuda.runtime.deviceSynchronize()
                    t0 = time.perf_counter()
                    for _ in range(args.calls):
                        call()
                    t1 = time.perf_counter()
                    cupy.cuda.runtime.deviceSynchronize()
                    t2 = time.perf_counter()
                    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
                    e0.record()
                    for _ in range(args.calls):
                        call()
                    e1.record()
                    e1.synchronize()
                    h, q, kern = res[mode]
                    h.append((t1 - t0) / args.calls * 1e6)
                    q.append((t2 - t0) / args.calls * 1e6)
                    kern.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / args.calls)
            for mode, (h, q, kern) in res.items():
                print(f"| {op} | {mg} | {mode} | {np.median(h):.1f} | {np.median(q):.1f} | {np.median(kern):.1f} |")


if __name__ == "__main__":
    main()
