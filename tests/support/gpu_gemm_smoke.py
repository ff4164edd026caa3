"""A small GEMM run for compute-sanitizer (memcheck and racecheck): tiny and odd shapes, every output dtype, split-K
in both accumulation modes, preshuffled scale layouts (fp32 and bf16 out), an unaligned 16-bit out. ``--time``
instead times the generic kernel at 4096^3 e4m3 -> bf16 (CUDA events around the op, median of 20 after 3 warm-ups)."""

from __future__ import annotations

import sys

import cupy
import numpy as np
from support.gemm_cases import check_result, operands, to_device

import mxrt


def smoke() -> int:
    bad = 0
    cases = [(1, 1, 1, "e4m3", "e4m3"), (7, 13, 33, "e2m1", "e4m3"), (129, 65, 100, "e5m2", "e4m3")]
    cases += [(34, 65, 300, "e2m1", "e2m1"), (16, 300, 512, "e4m3", "e4m3"), (70, 260, 1024, "e5m2", "e4m3")]
    # the sm_90a decode path (m <= 64, k % 32 == 0): tails in m and n, every token tile, e2m1 widening
    cases += [(1, 100, 2048, "e4m3", "e2m1"), (64, 72, 1024, "e2m1", "e2m1"), (9, 40, 256, "e5m2", "e5m2")]
    cases += [(33, 17, 4096, "e2m1", "e4m3")]
    for m, n, k, fa, fb in cases:
        _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + n + k)
        a, b = to_device(qa), to_device(qb)
        kb = -(-k // 32)
        for out_dtype in ("float32", "bfloat16", "float16"):
            for split_k, det in ((1, True), (min(3, kb), True), (min(3, kb), False), (kb, False)):
                got = mxrt.gemm_mx(a, b, out_dtype=out_dtype, split_k=split_k, deterministic=det)
                cupy.cuda.Device().synchronize()
                errs = check_result(got, qa, qb, out_dtype, splits_rounded=1 if det else split_k)
                if errs:
                    bad += 1
                    print(f"FAIL {m}x{n}x{k} {fa}x{fb} {out_dtype} split_k={split_k} det={det}: {errs}")
        sa = mxrt.preshuffle_scales(a.scales, "aiter32x8")
        got = mxrt.gemm_mx((a.data, sa, fa, k), b, out_dtype="float32", a_scale_layout="aiter32x8")
        errs = check_result(got, qa, qb, "float32")
        if errs:
            bad += 1
            print(f"FAIL layout aiter32x8 {m}x{n}x{k}: {errs}")
        # bf16 out with both operands preshuffled: the sm90 path reads the layouts in place (SLA / SLB)
        sb = mxrt.preshuffle_scales(b.scales, "cublas128x4")
        got = mxrt.gemm_mx(
            (a.data, sa, fa, k), (b.data, sb, fb, k), a_scale_layout="aiter32x8", b_scale_layout="cublas128x4"
        )
        errs = check_result(got, qa, qb, "bfloat16")
        if errs:
            bad += 1
            print(f"FAIL layouts aiter32x8 x cublas128x4 bf16 {m}x{n}x{k}: {errs}")
    # wide stages (scale bytes outside [64, 190]) beside fast ones, in the 64-, 128- and 256-row sm90 tiles
    for m in (40, 100, 300):
        _, _, qa, qb = operands(m, 136, 512, "e4m3", "e4m3", seed=m)
        sa = np.full(qa.scales.shape, 110, np.uint8)
        sb = np.full(qb.scales.shape, 120, np.uint8)
        sa[: m // 2, 5], sa[m // 2 :, 5], sb[:, 5] = 40, 64, 190  # wide (40) in the first rows only
        sa[:, 9], sb[:, 9] = 0, 230  # a wide stage everywhere (product 2^-24, as the others)
        ha, hb = (qa.data, sa, "e4m3", 512), (qb.data, sb, "e4m3", 512)
        for out_dtype in ("bfloat16",):  # fp16 range: tests/test_gpu_gemm.py
            got = mxrt.gemm_mx(
                (cupy.asarray(qa.data), cupy.asarray(sa), "e4m3", 512),
                (cupy.asarray(qb.data), cupy.asarray(sb), "e4m3", 512),
                out_dtype=out_dtype,
            )
            cupy.cuda.Device().synchronize()
            want = mxrt.reference.gemm_mx(ha, hb, out_dtype="float64")
            g = got.get().view(np.dtype("bfloat16")) if out_dtype == "bfloat16" else got.get()
            diff = mxrt.reference.calc_diff(g.astype(np.float64), want)
            if not diff <= 1e-5:
                bad += 1
                print(f"FAIL wide stages m={m} {out_dtype}: calc_diff {diff:.3g}")
    buf = cupy.zeros(9 * 31 + 2, cupy.uint16)
    _, _, qa, qb = operands(9, 31, 96, "e4m3", "e4m3", seed=4)
    mxrt.gemm_mx(to_device(qa), to_device(qb), out=buf[1:-1].reshape(9, 31), split_k=3, deterministic=False)
    cupy.cuda.Device().synchronize()
    print("gpu_gemm_smoke:", "OK" if not bad else f"{bad} failures")
    return 1 if bad else 0


def time_4096() -> int:
    n = 4096
    rng = np.random.default_rng(0)
    xa = cupy.asarray(rng.standard_normal((n, n), dtype=np.float32))
    xb = cupy.asarray(rng.standard_normal((n, n), dtype=np.float32))
    a, b = mxrt.quantize_mx(xa, "e4m3"), mxrt.quantize_mx(xb, "e4m3")
    out = cupy.empty((n, n), cupy.uint16)
    for _ in range(3):
        mxrt.gemm_mx(a, b, out=out)
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(20):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        mxrt.gemm_mx(a, b, out=out)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    ms = float(np.median(times))
    print(f"generic gemm_mx 4096^3 e4m3 x e4m3 -> bf16: median {ms:.3f} ms = {2 * n**3 / ms / 1e9:.1f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(time_4096() if "--time" in sys.argv else smoke())
