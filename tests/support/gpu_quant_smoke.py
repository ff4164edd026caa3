"""A small GPU quantization run for compute-sanitizer (memcheck, racecheck): partial blocks and tiles, odd
shapes, the FLAT and per-block rowwise paths, dual 1-D / 2-D, every fused scale layout, fp32 / fp16 / bf16."""

from __future__ import annotations

import sys

import cupy
import ml_dtypes
import numpy as np

import mxrt

LAYOUTS = (None, "aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0")


def _host(a) -> np.ndarray:
    return cupy.asnumpy(a) if not isinstance(a, np.ndarray) else a


def _mismatches(got: mxrt.MXArray, want: mxrt.MXArray) -> int:
    return int((_host(got.data) != want.data).sum() + (_host(got.scales) != np.asarray(want.scales)).sum())


def main(quick: bool) -> int:
    """quick (for racecheck, which is slow): fewer shapes, dtypes and layouts."""
    rng = np.random.default_rng(0)
    bad = 0
    shapes = [(70, 160), (33, 7)] if quick else [(1, 1), (7, 33), (33, 7), (5, 4095), (64, 256), (70, 160), (130, 2880)]
    dtypes = (np.float32, np.float16) if quick else (np.float32, np.float16, ml_dtypes.bfloat16)
    for shape in shapes:
        for dtype in dtypes:
            x = rng.standard_normal(shape).astype(dtype)
            xin = cupy.asarray(x) if dtype != ml_dtypes.bfloat16 else x  # bf16 travels through numpy in/out
            for fmt in ("e4m3", "e2m1") if quick else ("e4m3", "e2m1", "e3m2"):
                layouts = (None, "deepgemm_ue8m0") if quick else (LAYOUTS if fmt != "e3m2" else (None,))
                for layout in layouts:
                    got = mxrt.quantize_mx(xin, fmt, scale_layout=layout, backend="gpu")
                    bad += _mismatches(got, mxrt.quantize_mx(x, fmt, scale_layout=layout, backend="numpy"))
                    for b2 in (False, True):
                        g = mxrt.quantize_mx_dual(xin, fmt, block_2d=b2, scale_layout=layout, backend="gpu")
                        w = mxrt.quantize_mx_dual(x, fmt, block_2d=b2, scale_layout=layout, backend="numpy")
                        bad += _mismatches(g.row, w.row) + _mismatches(g.col, w.col)
    # quantize_mx_dual's SCALES_T path at its size (2^24 elements): the transposed scales, then transpose_u8 as a
    # programmatic dependent launch
    x = rng.standard_normal((4096, 4096)).astype(np.float16)
    g = mxrt.quantize_mx_dual(cupy.asarray(x), "e4m3", backend="gpu")
    w = mxrt.quantize_mx_dual(x, "e4m3", backend="numpy")
    bad += _mismatches(g.row, w.row) + _mismatches(g.col, w.col)
    cupy.cuda.runtime.deviceSynchronize()
    print("mismatches", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv))
