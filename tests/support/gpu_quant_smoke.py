"""A small GPU quantization run for compute-sanitizer (memcheck): partial blocks, odd shapes, every format."""

from __future__ import annotations

import sys

import cupy
import numpy as np

import mxrt


def main() -> int:
    rng = np.random.default_rng(0)
    bad = 0
    for shape in [(1, 1), (7, 33), (33, 7), (5, 4095), (64, 256)]:
        x = rng.standard_normal(shape).astype(np.float32)
        xd = cupy.asarray(x)
        for fmt in ("e4m3", "e2m1", "e3m2"):
            got, want = mxrt.quantize_mx(xd, fmt), mxrt.quantize_mx(x, fmt, backend="numpy")
            bad += int((cupy.asnumpy(got.data) != want.data).sum())
            for b2 in (False, True):
                g, w = (
                    mxrt.quantize_mx_dual(xd, fmt, block_2d=b2),
                    mxrt.quantize_mx_dual(x, fmt, block_2d=b2, backend="numpy"),
                )
                bad += int(
                    (cupy.asnumpy(g.col.data) != w.col.data).sum() + (cupy.asnumpy(g.row.data) != w.row.data).sum()
                )
    cupy.cuda.runtime.deviceSynchronize()
    print("mismatches", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
