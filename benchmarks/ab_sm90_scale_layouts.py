"""Preshuffled scales on the Hopper GEMM: ``gemm_mx`` with row-major scales against each preshuffled layout on both
operands (``sm90_wgmma`` reads them in place), and against what those layouts ran on before (the ``generic`` path,
forced), same run, CUDA-graph replays (mxrt.bench.core), median of --reps. MXFP8, bf16 out.

    python benchmarks/ab_sm90_scale_layouts.py [--reps 5] [--generic]
"""

from __future__ import annotations

# ruff: noqa: B023  (the timed lambdas run inside the loop iteration that defines them)
import argparse
import os
import sys

import cupy
import numpy as np

import mxrt
from mxrt.bench import core

SHAPES = [(8192, 8192, 8192), (4096, 7168, 2048), (16, 7168, 4096)]
FORMS = (None, "aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--generic", action="store_true", help="also time one layout on the generic path (slow)")
    args = ap.parse_args(argv)
    quiet = lambda *_a, **_k: None  # noqa: E731
    print("| shape | scales | path | us | TFLOP/s | vs row-major |")
    print("|---|---|---|---:|---:|---:|")
    for m, n, k in SHAPES:
        xa = cupy.random.standard_normal((m, k), dtype=cupy.float32)
        xb = cupy.random.standard_normal((n, k), dtype=cupy.float32)
        out = cupy.empty((m, n), cupy.uint16)
        flops = 2 * m * n * k
        base = None
        rows = [(f, "auto") for f in FORMS] + ([("aiter32x8", "generic")] if args.generic else [])
        for form, path in rows:
            qa = mxrt.quantize_mx(xa, "e4m3", scale_layout=form)
            qb = mxrt.quantize_mx(xb, "e4m3", scale_layout=form)
            if path == "generic":
                os.environ["MXRT_GEMM_PATH"] = "generic"
            try:
                ref = mxrt.gemm_mx(qa, qb, out_dtype="bfloat16").get().view(np.uint16)
                t, _ = core.time_cupy([lambda: mxrt.gemm_mx(qa, qb, out=out)], args.reps, log=quiet)
            finally:
                os.environ.pop("MXRT_GEMM_PATH", None)
            if base is None:
                base, want = t, ref
            same = "bitwise = row-major" if np.array_equal(ref, want) else "DIFFERS from row-major"
            print(
                f"| {m}x{n}x{k} | {form or 'row-major'} | {path} | {t * 1e6:.1f} | {flops / t / 1e12:.0f} "
                f"| {base / t:.2f}x ({same}) |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
