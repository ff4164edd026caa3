"""mxrt's own host time per eager call of the grouped GEMMs' torch route, on the CPU (no GPU): the call walked
through tests/support/fake_cupy.py (fake arrays, builds, a C no-op as cuLaunchKernel) with the route's tensors on
CPU torch and ``torch._grouped_mm`` replaced by an empty result of torch's strides, plans off
(``MXRT_GROUPED_PLANS=0``) and on. What it leaves out: CuPy's allocator and copies, the driver's launches, torch's
CUDA allocator and ``torch._grouped_mm``'s own host time (``benchmarks/profile_route_host.py`` on a GPU has them).

    PYTHONPATH=$PWD:$PWD/tests python benchmarks/route_cpu_profile.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import fake_cupy

import mxrt


def _grouped_mm_shape_only(a, b, offs=None):
    """An uninitialised result of the shape and strides torch._grouped_mm gives (rows padded to 8 elements)."""
    n = b.shape[-1]
    ld = -(-n // 8) * 8
    if b.dim() == 3:
        return torch.empty_strided((a.shape[0], n), (ld, 1), dtype=torch.bfloat16)
    return torch.empty_strided((offs.shape[0], a.shape[0], n), (a.shape[0] * ld, ld, 1), dtype=torch.bfloat16)


def per_call(fn, calls: int, samples: int = 5) -> float:
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
    ap.add_argument("--profile", action="store_true", help="cProfile the forward with out, plans off and on")
    ap.add_argument("--calls", type=int, default=500)
    args = ap.parse_args()
    torch._grouped_mm = _grouped_mm_shape_only
    rng = np.random.default_rng(0)
    with fake_cupy.install(), fake_cupy.route_on_cpu():
        cp = sys.modules["cupy"]

        def d(q):
            return dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))

        lens = np.full(4, 16)
        m, n, k = int(lens.sum()), 32, 64
        qa = d(mxrt.quantize_mx(rng.standard_normal((m, k), dtype=np.float32), backend="numpy"))
        qb = d(mxrt.quantize_mx(rng.standard_normal((4, n, k), dtype=np.float32), axis=2, backend="numpy"))
        g = d(mxrt.quantize_mx_grouped(rng.standard_normal((m, n)), lens, colwise=True, backend="numpy").col)
        x = d(mxrt.quantize_mx_grouped(rng.standard_normal((m, k)), lens, colwise=True, backend="numpy").col)
        dl, y = cp.asarray(lens), cp.empty((m, n), np.uint16)
        rows = {
            "fwd, out=y": lambda: mxrt.grouped_gemm_mx(qa, qb, dl, out=y),
            "fwd, new result": lambda: mxrt.grouped_gemm_mx(qa, qb, dl),
            "wgrad bf16": lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dl, align=128, out_dtype="bfloat16"),
        }
        for name, fn in rows.items():
            us = {}
            for mode in ("0", "1"):
                os.environ["MXRT_GROUPED_PLANS"] = mode
                us[mode] = per_call(fn, args.calls) * 1e6
            print(f"{name:16} plans off {us['0']:7.1f} us/call, on {us['1']:7.1f} us/call (mxrt's Python; fake CuPy)")
        if args.profile:
            for mode in ("0", "1"):
                os.environ["MXRT_GROUPED_PLANS"] = mode
                fn = rows["fwd, out=y"]
                fn()
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(args.calls):
                    fn()
                pr.disable()
                print(f"--- cProfile fwd, out=y, MXRT_GROUPED_PLANS={mode}")
                pstats.Stats(pr).sort_stats("tottime").print_stats(18)
        os.environ.pop("MXRT_GROUPED_PLANS", None)


if __name__ == "__main__":
    main()
