"""A small grouped-quantization run for compute-sanitizer (memcheck and racecheck): empty and unbalanced groups,
odd k, the fused row+col kernel, inconsistent device lens (clamped, never out of bounds), per-group weights."""

from __future__ import annotations

import sys

import cupy
import numpy as np

import mxrt
from mxrt.ops import grouped


def _diff(a, b) -> int:
    return int((cupy.asnumpy(a) != np.asarray(b)).sum())


def main() -> int:
    rng = np.random.default_rng(0)
    bad = 0
    cases = [(0, 64, [0, 0, 0]), (77, 33, [77]), (300, 130, [100, 0, 3, 197]), (65, 4095, [1, 64])]
    # k % 16 == 0: the row+col kernel's s_col stored transposed (the launcher's k >= 2560 lifted for small shapes)
    grouped.ROWCOL_SCALES_T_MIN_K = 0
    cases += [(300, 160, [100, 0, 3, 197]), (700, 400, [0, 350, 350])]
    for total, k, lens in cases:
        lens = np.array(lens, np.int64)
        x = rng.standard_normal((total, k)).astype(np.float32)
        for fmt in ("e4m3", "e2m1"):
            for colwise in (False, True):
                got = mxrt.quantize_mx_grouped(cupy.asarray(x), cupy.asarray(lens), fmt, colwise=colwise)
                want = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=colwise, backend="numpy")
                bad += _diff(got.row.data, want.row.data) + _diff(got.row.scales, want.row.scales)
                bad += _diff(got.offs_pad_row, want.offs_pad_row)
                if colwise:
                    bad += _diff(got.col.data, want.col.data) + _diff(got.col.scales, want.col.scales)
    # inconsistent lens: memory-safe whatever they hold
    x = cupy.asarray(rng.standard_normal((100, 64)).astype(np.float16))
    for lens in ([10**9, -3, 50], [-(2**40), 0, 7], [1000, 1000, 1000]):
        mxrt.quantize_mx_grouped(x, cupy.asarray(np.array(lens, np.int64)), "e4m3", colwise=True)
    for shape in [(1, 1, 1), (3, 33, 70), (2, 64, 256)]:
        w = rng.standard_normal(shape).astype(np.float32)
        for b2 in (False, True):
            got = mxrt.quantize_mx_dual_grouped(cupy.asarray(w), "e4m3", block_2d=b2)
            want = mxrt.quantize_mx_dual_grouped(w, "e4m3", block_2d=b2, backend="numpy")
            for part in ("row", "col"):
                g, wt = getattr(got, part), getattr(want, part)
                bad += _diff(g.data, wt.data) + _diff(g.scales, wt.scales)
    cupy.cuda.runtime.deviceSynchronize()
    print("mismatches", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
