"""A small run of DeepGEMM's Hopper recipe (float32 scales, a 1x128, b 128x128) on the grouped engine's SCALE_F32 builds
(MXRT_GROUPED_GEMM_KERNEL=sm90_ws) for compute-sanitizer (memcheck, racecheck, synccheck): contiguous ids with -1
rows, an n tail and a K tail, masked with masked_m 0 / 1 / max_m, also with UE8M0 bytes per 128 (the per-128 build's
wide stages); then the k-grouped wgrad on the sm90_bf16 route (float32 scales and UE8M0, c accumulated in place, an
empty group, m / n tails). Exits non-zero on any mismatch against the host twins (mxrt.deep_gemm on numpy) or a
written row the call does not own; skips (exit 0) off sm_90a."""

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
    # float32 scales, then UE8M0 bytes at the same granularity: the engine's per-128 build (wide stages: bytes far
    # from 127)
    sa8 = rng.integers(30, 120, sa3.shape).astype(np.uint8)
    sb8 = rng.integers(140, 220, sb.shape).astype(np.uint8)
    for sa_m, sb_m in ((sa3, sb), (sa8, sb8)):
        d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(dev(ca3, sa_m), dev(cb, sb_m), d, cupy.asarray(mm), max_m)
        ref = np.zeros((g, max_m, n), BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked((ca3, sa_m), (cb, sb_m), ref, mm, max_m)
        h = d.get()
        for i, r in enumerate(mm):
            bad += int((h[i, r:] != 0xFFFF).any())
            if r:
                bad += close(h[i, :r].view(BF16), ref[i, :r])
    # the k-grouped wgrad on the sm90_bf16 route: float32 scales (MODE 2) and UE8M0 (MODE 0), c accumulated in place
    os.environ["MXRT_GROUPED_GEMM_KERNEL"] = "sm90_bf16"
    ks, m, n = [256, 0, 128, 384], 136, 200
    total = sum(ks)
    for recipe in ("f32", "ue8m0"):
        ops = []
        for rows in (m, n):
            codes, sf = mxrt.per_token_cast_to_fp8(rng.standard_normal((rows, total)), recipe == "ue8m0")
            if recipe == "ue8m0":
                sf = (sf.view(np.uint32) >> 23).astype(np.uint8)
            starts = np.cumsum([0, *ks[:-1]])
            blocks = [codes[:, s0 : s0 + kk].reshape(-1) for s0, kk in zip(starts, ks, strict=True)]
            ops.append((np.concatenate(blocks), sf))
        c = rng.standard_normal((len(ks), m, n)).astype(np.float32)
        want = c.copy()
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(ops[0], ops[1], want, ks, np.array(ks, np.int32), c=want)
        d = cupy.asarray(c)
        ksd = cupy.asarray(np.array(ks, np.int32))
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(dev(*ops[0]), dev(*ops[1]), d, ks, ksd, c=d)
        bad += close(d.get(), want, 1e-5)
    print(f"mismatches {bad}")
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main())
