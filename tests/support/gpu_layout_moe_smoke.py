"""A small run of the layout and MoE kernels for compute-sanitizer (memcheck, racecheck): every scale layout on
odd and strided shapes with its inverse, and moe_align_block_size on the one-CTA and the multi-CTA paths."""

from __future__ import annotations

import sys

import cupy
import numpy as np

import mxrt

FORMS = [("aiter32x8", None), ("turbo16x4", None), ("turbo16x4", np.uint32), ("cublas128x4", None)]
FORMS += [("deepgemm_ue8m0", None)]


def main() -> int:
    rng = np.random.default_rng(0)
    bad = 0
    big = rng.integers(0, 256, (400, 90), dtype=np.uint8)
    dbig = cupy.asarray(big)
    for shape in [(1, 1), (7, 3), (255, 9), (300, 70)]:
        for layout, dtype in FORMS:
            for dv, hv in ((dbig[: shape[0], : shape[1]], big[: shape[0], : shape[1]]),):
                got = mxrt.preshuffle_scales(dv, layout, dtype=dtype, pad_value=0)
                want = mxrt.preshuffle_scales(hv, layout, dtype=dtype, pad_value=0, backend="numpy")
                bad += int((cupy.asnumpy(got) != want).sum())
                back = mxrt.unshuffle_scales(got, layout, shape)
                bad += int((cupy.asnumpy(back) != hv).sum())
    cases = [(500, 64, 16, True), (9000, 256, 64, True), (100, 3000, 32, False), (0, 16, 8, False)]
    for numel, e, bs, with_map in cases:
        ids = rng.integers(0, e + 1, numel).astype(np.int32)
        emap = rng.integers(-1, e, e).astype(np.int32) if with_map else None
        got = mxrt.moe_align_block_size(cupy.asarray(ids), bs, e, None if emap is None else cupy.asarray(emap))
        want = mxrt.moe_align_block_size(ids, bs, e, emap, backend="numpy")
        bad += sum(int((cupy.asnumpy(g) != w).sum()) for g, w in zip(got, want, strict=True))
    cupy.cuda.runtime.deviceSynchronize()
    print("mismatches", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
