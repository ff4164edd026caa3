"""A small run of moe_combine for compute-sanitizer (memcheck, racecheck): the vector and scalar paths, int32 / int64
src, a row stride, misaligned rows, k = 1 and 8, odd T, and src values outside [0, R) (never read: NaN rows)."""

from __future__ import annotations

import sys

import cupy
import ml_dtypes
import numpy as np

import mxrt
from mxrt.layouts import ep as ep_np

BF16 = np.dtype(ml_dtypes.bfloat16)


def main() -> int:
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(0)
    ftz = mxrt.runtime.get_arch().vendor == "nvidia"
    bad = 0
    cases = [(1, 1, 8), (37, 8, 64), (9, 3, 13), (5, 2, 1)] + ([] if quick else [(300, 8, 7168)])
    for t, k, n in cases:
        for idx in (np.int32, np.int64):
            r = 2 * t + 3
            y = (rng.standard_normal((r, n)) * 3).astype(BF16)
            src = rng.integers(0, r, (t, k)).astype(idx)
            w = rng.random((t, k)).astype(np.float32)
            want = ep_np.moe_combine(y, src, w, ftz=ftz).view(np.uint16)
            store = cupy.zeros(r * (n + 5) + 1, np.uint16)
            forms = {
                "contiguous": cupy.asarray(y.view(np.uint16)),
                "strided": store[: r * (n + 5)].reshape(r, n + 5)[:, :n],
                "misaligned": store[1:].reshape(r, n + 5)[:, :n] if r * (n + 5) else None,
            }
            for name, dy in forms.items():
                if dy is None:
                    continue
                if name != "contiguous":
                    dy[...] = cupy.asarray(y.view(np.uint16))
                got = mxrt.moe_combine(dy, cupy.asarray(src), cupy.asarray(w))
                miss = int((cupy.asnumpy(got) != want).sum())
                if miss:
                    print(f"T={t} k={k} n={n} {idx.__name__} {name}: {miss} mismatches")
                bad += miss
            oob = src.copy()
            oob[0, 0] = r  # outside [0, R): must not be read
            got = cupy.asnumpy(mxrt.moe_combine(cupy.asarray(y.view(np.uint16)), cupy.asarray(oob), cupy.asarray(w)))
            bad += int((got[0] != ep_np.BF16_NAN_BITS).sum())
    cupy.cuda.runtime.deviceSynchronize()
    print("mismatches", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
