"""A small run of DeepGEMM's Hopper recipe (float32 scales, a 1x128, b 128x128) on the grouped engine's SCALE_F32
builds (MXRT_GROUPED_GEMM_KERNEL=sm90_ws) for compute-sanitizer (memcheck, racecheck, synccheck): contiguous ids with
-1 rows, an n tail and a K tail, masked with masked_m 0 / 1 / max_m. Exits non-zero on any mismatch against the host
twins (mxrt.deep_gemm on numpy) or a written row the call does not own; skips (exit 0) off sm_90a."""

from __future__ import annotations

import os
import sys

import cupy
import ml_dtypes
import numpy as np

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt.runtime import get_arch

BF16 = ml_dtypes.bfloat16


def close(got, want, tol=2e-2) -> int:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.isfinite(got).all():
        return 1
    return int(np.linalg.norm(got - want) > tol * max(np.linalg.norm(want), 1e-30))


def main() -> int:
    if get_arch().target != "sm_90a":
        print("not sm_90a: skipped")
        return 0
    os.environ["MXRT_GROUPED_GEMM_KERNEL"] = "sm90_ws"
    rng = np.random.default_rng(0)
    bad = 0
    lens = np.array([50, 0, 7, 200])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 136, 320, lens.size
    x, w = rng.standard_normal((m, k)), rng.standard_normal((g, n, k))
    ca, sa = mxrt.per_token_cast_to_fp8(x, False)
    cb, sb = (np.stack(v) for v in zip(*(mxrt.per_block_cast_to_fp8(w[i], False) for i in range(g)), strict=True))
    d = cupy.full((m, n), 0xFFFF, cupy.uint16)
    dev = lambda c, s: (cupy.asarray(c), cupy.asarray(s))  # noqa: E731
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(dev(ca, sa), dev(cb, sb), d, cupy.asarray(ids))
    ref = np.zeros((m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((ca, sa), (cb, sb), ref, ids)
    h = d.get()
    bad += int((h[ids < 0] != 0xFFFF).any())
    bad += close(h.view(BF16)[ids >= 0], ref[ids >= 0])
    max_m = 130
    x3 = rng.standard_normal((g, max_m, k))
    ca3, sa3 = (np.stack(v) for v in zip(*(mxrt.per_token_cast_to_fp8(x3[i], False) for i in range(g)), strict=True))
    mm = np.array([0, 1, 129, 130], np.int32)
    d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(dev(ca3, sa3), dev(cb, sb), d, cupy.asarray(mm), max_m)
    ref = np.zeros((g, max_m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((ca3, sa3), (cb, sb), ref, mm, max_m)
    h = d.get()
    for i, r in enumerate(mm):
        bad += int((h[i, r:] != 0xFFFF).any())
        if r:
            bad += close(h[i, :r].view(BF16), ref[i, :r])
    print(f"mismatches {bad}")
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main())
