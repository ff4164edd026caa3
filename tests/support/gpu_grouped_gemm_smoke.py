"""A small grouped-GEMM run for compute-sanitizer (memcheck and racecheck): every mode of
kernels_src/gemm/gemm_mx_grouped_generic.hip (group_lens forward/dgrad, variable-K wgrad with accumulate, DeepGEMM
per-row ids with -1 rows, masked, k-grouped with float32 scales), empty and unaligned groups, device lens the
host cannot check; on sm_90a also every mode of gemm_mx_grouped_sm90.hip (forced with MXRT_GROUPED_GEMM_KERNEL:
lens on both tiles with a tail of rows past the last group, ids with several groups per tile, masked, bf16
wgrad plain and accumulating on both tiles with an empty group). Exits
non-zero on any mismatch against the numpy twins."""

from __future__ import annotations

import dataclasses
import os
import sys

import cupy
import ml_dtypes
import numpy as np

import mxrt
import mxrt.deep_gemm as deep_gemm

BF16 = ml_dtypes.bfloat16


def dev(q):
    return dataclasses.replace(q, data=cupy.asarray(q.data), scales=cupy.asarray(q.scales))


def close(got, want, tol=1e-5) -> int:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.isfinite(got).all():
        return 1
    scale = max(np.linalg.norm(want), 1e-30)
    return int(np.linalg.norm(got - want) / scale > tol)


def main() -> int:
    rng = np.random.default_rng(0)
    bad = 0
    x = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    for lens, n, k in [([0, 0, 3], 40, 32), ([77, 0, 1, 130], 72, 96), ([5000, 3], 33, 64)]:
        lens = np.array(lens, np.int64)
        m, g = int(lens.sum()), lens.size
        qa, qw = mxrt.quantize_mx(x(m, k)), mxrt.quantize_mx_dual_grouped(x(g, n, k))
        got = mxrt.grouped_gemm_mx(dev(qa), dev(qw.row), cupy.asarray(lens), out_dtype="float32").get()
        bad += close(got, mxrt.grouped_gemm_mx(qa, qw.row, lens, out_dtype="float32", backend="numpy"))
        qgo = mxrt.quantize_mx(x(m, n))
        got = mxrt.grouped_gemm_mx(dev(qgo), dev(qw.col), cupy.asarray(lens)).get()
        want = mxrt.grouped_gemm_mx(qgo, qw.col, lens, backend="numpy")
        bad += close(got.view(BF16) if got.dtype == np.uint16 else got, want.astype(np.float64), 1e-2)
        qg = mxrt.quantize_mx_grouped(x(m, n), lens, colwise=True, col_align=32)
        qx = mxrt.quantize_mx_grouped(x(m, k), lens, colwise=True, col_align=32)
        start = x(g, n, k)
        out = cupy.asarray(start)
        mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qx.col), cupy.asarray(lens), out=out, accumulate=True)
        want = mxrt.grouped_gemm_mx_wgrad(qg.col, qx.col, lens, out=start.copy(), accumulate=True, backend="numpy")
        bad += close(out.get(), want)
    # lens the host cannot check: past M, negative
    qa, qb = mxrt.quantize_mx(x(200, 64)), mxrt.quantize_mx(x(4, 40, 64), axis=2)
    for weird in ([300, 300, 0, 0], [-7, 50, -1, 10**9]):
        mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(weird), out_dtype="float32").get()
    # DeepGEMM contiguous (ids with -1 rows), masked, k-grouped float32 scales
    lens = np.array([50, 0, 7, 129])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 128, 256, lens.size
    qa, qb = mxrt.quantize_mx(x(m, k)), mxrt.quantize_mx(x(g, n, k), axis=2)
    d = cupy.full((m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (cupy.asarray(qa.data), cupy.asarray(qa.scales)),
        (cupy.asarray(qb.data), cupy.asarray(qb.scales)),
        d,
        cupy.asarray(ids),
    )
    ref = np.full((m, n), 0xFFFF, np.uint16).view(BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qa.data, qa.scales), (qb.data, qb.scales), ref, ids)
    bad += int((d.get() != ref.view(np.uint16))[ids < 0].any())
    bad += close(d.get().view(BF16)[ids >= 0], ref[ids >= 0], 1e-2)
    qa3 = mxrt.quantize_mx(x(g, 130, k), axis=2)
    mm = np.array([0, 1, 129, 130], np.int32)
    d = cupy.full((g, 130, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(
        (cupy.asarray(qa3.data), cupy.asarray(qa3.scales)),
        (cupy.asarray(qb.data), cupy.asarray(qb.scales)),
        d,
        cupy.asarray(mm),
        expected_m=64,
    )
    own = np.arange(130)[None, :] < mm[:, None]
    bad += int((d.get()[~own] != 0xFFFF).any())
    ks, mk, nk = [128, 0, 384], 128, 256
    starts = np.cumsum([0, *ks[:-1]])
    aa, bb = x(sum(ks), mk), x(sum(ks), nk)

    def cast(v):
        q, sf = mxrt.per_token_cast_to_fp8(np.ascontiguousarray(v.T), False)
        return np.concatenate([q[:, s : s + kk].reshape(-1) for s, kk in zip(starts, ks, strict=True)]), sf

    ca, cb = cast(aa), cast(bb)
    want = np.zeros((3, mk, nk), np.float32)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(ca, cb, want, ks, np.array(ks, np.int32))
    d = cupy.zeros((3, mk, nk), cupy.float32)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
        (cupy.asarray(ca[0]), cupy.asarray(ca[1])),
        (cupy.asarray(cb[0]), cupy.asarray(cb[1])),
        d,
        ks,
        cupy.asarray(np.array(ks, np.int32)),
    )
    bad += close(d.get(), want)
    bad += sm90(rng, x)
    cupy.cuda.Device().synchronize()
    print(f"grouped gemm smoke: {bad} mismatches")
    return int(bad != 0)


def sm90(rng, x) -> int:
    """The Hopper grouped kernels (sm_90a only, MXRT_GROUPED_GEMM_KERNEL=sm90): on the grouped engine
    gemm_mx_grouped_sm90_ws lens (with device lens short of m: tail rows are zeroed), DeepGEMM ids with several
    groups and -1 rows in one tile, masked; on gemm_mx_grouped_sm90 the bf16 wgrad (plain, accumulate) on both
    tiles."""
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        return 0
    bad = 0
    os.environ["MXRT_GROUPED_GEMM_KERNEL"] = "sm90"
    try:
        for lens, n, k in [([77, 0, 1, 130], 72, 96), ([600, 430], 136, 208)]:
            lens = np.array(lens, np.int64)
            m, g = int(lens.sum()), lens.size
            qa, qb = mxrt.quantize_mx(x(m, k)), mxrt.quantize_mx(x(g, n, k), axis=2)
            got = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens)).get().view(BF16)
            want = mxrt.grouped_gemm_mx(qa, qb, lens, backend="numpy")
            bad += close(got, want.astype(np.float64), 1e-2)
            short = lens.copy()
            short[-1] -= 5  # the last 5 rows lie past every group: zeros
            got = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(short)).get().view(BF16)
            bad += int((got[m - 5 :].astype(np.float32) != 0).any())
        for lens, n, k in [([77, 0, 1, 130], 72, 96), ([600, 0, 430], 200, 136)]:  # wgrad: 128- / 256-row tiles
            lens = np.array(lens, np.int64)
            m, g = int(lens.sum()), lens.size
            qg = mxrt.quantize_mx_grouped(x(m, n), lens, colwise=True, col_align=32).col
            qx = mxrt.quantize_mx_grouped(x(m, k), lens, colwise=True, col_align=32).col
            got = mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens), out_dtype="bfloat16").get()
            want = mxrt.grouped_gemm_mx_wgrad(qg, qx, lens, out_dtype="bfloat16", backend="numpy")
            bad += close(got.view(BF16), want.astype(np.float64), 1e-2)
            start = x(g, n, k).astype(BF16)
            out = cupy.asarray(start.view(np.uint16))
            mxrt.grouped_gemm_mx_wgrad(
                dev(qg), dev(qx), cupy.asarray(lens), out_dtype="bfloat16", out=out, accumulate=True
            )
            want = mxrt.grouped_gemm_mx_wgrad(
                qg, qx, lens, out_dtype="bfloat16", out=start.copy(), accumulate=True, backend="numpy"
            )
            bad += close(out.get().view(BF16), want.astype(np.float64), 1e-2)
        m, n, k, g = 256, 128, 256, 3
        ids = np.where(rng.random(m) < 0.2, -1, rng.integers(0, g, m)).astype(np.int32)
        qa, qb = mxrt.quantize_mx(x(m, k)), mxrt.quantize_mx(x(g, n, k), axis=2)
        d = cupy.full((m, n), 0xFFFF, cupy.uint16)
        dq = lambda q: (cupy.asarray(q.data), cupy.asarray(q.scales))  # noqa: E731
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(dq(qa), dq(qb), d, cupy.asarray(ids))
        ref = np.full((m, n), 0xFFFF, np.uint16).view(BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qa.data, qa.scales), (qb.data, qb.scales), ref, ids)
        bad += int((d.get() != ref.view(np.uint16))[ids < 0].any())
        bad += close(d.get().view(BF16)[ids >= 0], ref[ids >= 0], 1e-2)
        qa3 = mxrt.quantize_mx(x(g, 130, k), axis=2)
        mm = np.array([0, 129, 130], np.int32)
        d = cupy.full((g, 130, n), 0xFFFF, cupy.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(dq(qa3), dq(qb), d, cupy.asarray(mm), expected_m=64)
        ref = np.zeros((g, 130, n), BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked((qa3.data, qa3.scales), (qb.data, qb.scales), ref, mm, 64)
        own = np.arange(130)[None, :] < mm[:, None]
        bad += int((d.get()[~own] != 0xFFFF).any())
        bad += close(d.get().view(BF16)[own], ref[own], 1e-2)
    finally:
        os.environ.pop("MXRT_GROUPED_GEMM_KERNEL", None)
    return bad


if __name__ == "__main__":
    sys.exit(main())
