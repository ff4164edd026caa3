"""A small run of weights in aiter's 16x16 layout for compute-sanitizer (memcheck, racecheck, synccheck): the decode
kernel's 5-D TMA read (WLB = 1) at tails of m, n (padded rows) and every token tile, split-K in both modes, a
preshuffled weight-scale layout, and the device unshuffle (m > 64, k % 128 != 0). Prints the mismatch count."""

from __future__ import annotations

import sys

import cupy
from support.gemm_cases import check_result, operands, shuffled_weight, to_device

import mxrt


def smoke() -> int:
    bad = 0
    cases = [(1, 100, 2048, "e4m3", "e4m3"), (9, 300, 1024, "e4m3", "e2m1"), (64, 72, 512, "e2m1", "e2m1")]
    cases += [(33, 17, 4096, "e5m2", "e4m3"), (70, 130, 256, "e4m3", "e4m3"), (4, 64, 96, "e2m1", "e2m1")]
    for m, n, k, fa, fb in cases:
        _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + n + k)
        a, b = to_device(qa), shuffled_weight(qb)
        kb = -(-k // 32)
        for split_k, det in ((1, True), (min(3, kb), True), (min(3, kb), False)):
            got = mxrt.gemm_mx(a, b, split_k=split_k, deterministic=det, b_weight_layout="aiter16x16")
            cupy.cuda.Device().synchronize()
            errs = check_result(got, qa, qb, "bfloat16", splits_rounded=1 if det else split_k)
            if errs:
                bad += 1
                print(f"FAIL {m}x{n}x{k} {fa}x{fb} split_k={split_k} det={det}: {errs}")
        # with a preshuffled scale layout n is the padded row count (the storage does not tell n): columns past n
        # are the zero-code padding rows' zeros
        sb = mxrt.preshuffle_scales(b[1], "aiter32x8")
        got = mxrt.gemm_mx(a, (b[0], sb, fb, k), b_scale_layout="aiter32x8", b_weight_layout="aiter16x16")
        errs = check_result(got[:, :n], qa, qb, "bfloat16")
        if got.shape != (m, b[0].shape[0]) or bool((got[:, n:] != 0).any()):
            errs.append(f"padding columns: shape {got.shape}, nonzero {int((got[:, n:] != 0).sum())}")
        if errs:
            bad += 1
            print(f"FAIL aiter32x8 scales {m}x{n}x{k}: {errs}")
    print(f"mismatches {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(smoke())
