"""A small GEMM run for compute-sanitizer (memcheck, racecheck, synccheck): tiny and odd shapes, every output dtype,
split-K in both accumulation modes, preshuffled scale layouts (fp32 and bf16 out), an unaligned 16-bit out.
``--path NAME`` forces one GEMM path (``MXRT_GEMM_PATH``) on the calls it supports and skips the others; with
``sm90_ws`` it adds the engine's persistent walk (3 CTAs over 15 tiles, every scale layout). ``--time`` instead
times the generic kernel at 4096^3 e4m3 -> bf16 (CUDA events around the op, median of 20 after 3 warm-ups)."""

from __future__ import annotations

import os
import sys

import cupy
import numpy as np
from support.gemm_cases import check_result, operands, to_device

import mxrt

SKIPPED = [0]


def gemm(*args, **kw):
    """mxrt.gemm_mx, or None where a forced path declines the call (``--path``)."""
    try:
        return mxrt.gemm_mx(*args, **kw)
    except mxrt.UnsupportedArchError:
        if not os.environ.get("MXRT_GEMM_PATH"):
            raise
        SKIPPED[0] += 1
        return None


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
                got = gemm(a, b, out_dtype=out_dtype, split_k=split_k, deterministic=det)
                if got is None:
                    continue
                cupy.cuda.Device().synchronize()
                errs = check_result(got, qa, qb, out_dtype, splits_rounded=1 if det else split_k)
                if errs:
                    bad += 1
                    print(f"FAIL {m}x{n}x{k} {fa}x{fb} {out_dtype} split_k={split_k} det={det}: {errs}")
        sa = mxrt.preshuffle_scales(a.scales, "aiter32x8")
        got = gemm((a.data, sa, fa, k), b, out_dtype="float32", a_scale_layout="aiter32x8")
        errs = None if got is None else check_result(got, qa, qb, "float32")
        if errs:
            bad += 1
            print(f"FAIL layout aiter32x8 {m}x{n}x{k}: {errs}")
        # bf16 out with both operands preshuffled: the sm90 path reads the layouts in place (SLA / SLB)
        sb = mxrt.preshuffle_scales(b.scales, "cublas128x4")
        got = gemm((a.data, sa, fa, k), (b.data, sb, fb, k), a_scale_layout="aiter32x8", b_scale_layout="cublas128x4")
        errs = None if got is None else check_result(got, qa, qb, "bfloat16")
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
            got = gemm(
                (cupy.asarray(qa.data), cupy.asarray(sa), "e4m3", 512),
                (cupy.asarray(qb.data), cupy.asarray(sb), "e4m3", 512),
                out_dtype=out_dtype,
            )
            if got is None:
                continue
            cupy.cuda.Device().synchronize()
            want = mxrt.reference.gemm_mx(ha, hb, out_dtype="float64")
            g = got.get().view(np.dtype("bfloat16")) if out_dtype == "bfloat16" else got.get()
            diff = mxrt.reference.calc_diff(g.astype(np.float64), want)
            if not diff <= 1e-5:
                bad += 1
                print(f"FAIL wide stages m={m} {out_dtype}: calc_diff {diff:.3g}")
    buf = cupy.zeros(9 * 31 + 2, cupy.uint16)
    _, _, qa, qb = operands(9, 31, 96, "e4m3", "e4m3", seed=4)
    gemm(to_device(qa), to_device(qb), out=buf[1:-1].reshape(9, 31), split_k=3, deterministic=False)
    cupy.cuda.Device().synchronize()
    if os.environ.get("MXRT_GEMM_PATH") == "sm90_ws":
        bad += ws_walk()
    print("gpu_gemm_smoke:", "OK" if not bad else f"{bad} failures", f"({SKIPPED[0]} calls the forced path declines)")
    return 1 if bad else 0


def ws_walk() -> int:
    """The engine's persistent walk under the sanitizers: 3 CTAs over 3 x 5 tiles (the ring wraps across tiles),
    33 K blocks (funnel-shifted word copies), every scale layout code on one operand, bf16 out (compile-check
    builds: gemm_sm90_kernels.WS_LAYOUT_PAIRS)."""
    from mxrt.ops import gemm_sm90_ws
    from mxrt.ops.gemm_paths import DeviceGemm
    from mxrt.problems import gemm_problem
    from mxrt.runtime import get_arch

    bad = 0
    m, n, k = 300, 520, 1056
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=7)
    forms = [(None, None), ("aiter32x8", "deepgemm_ue8m0"), (None, "turbo16x4"), ("turbo16x4:u32", "cublas128x4")]
    for la, lb in forms:

        def scales(q, layout):
            s = cupy.asarray(q.scales)
            if layout == "turbo16x4:u32":
                return mxrt.preshuffle_scales(s, "turbo16x4", dtype=np.uint32)
            return s if layout is None else mxrt.preshuffle_scales(s, layout)

        name = {"turbo16x4:u32": "turbo16x4"}
        a = (cupy.asarray(qa.data), scales(qa, la), "e4m3", k)
        b = (cupy.asarray(qb.data), scales(qb, lb), "e4m3", k)
        p = gemm_problem(a, b, out_dtype="bfloat16", a_scale_layout=name.get(la, la), b_scale_layout=name.get(lb, lb))
        out = cupy.empty((m, n), cupy.uint16)
        gemm_sm90_ws.run(DeviceGemm(p, a[0], b[0], a[1], b[1], out, get_arch()), ctas=3)
        cupy.cuda.Device().synchronize()
        errs = check_result(out, qa, qb, "bfloat16")
        if errs:
            bad += 1
            print(f"FAIL ws walk {la} x {lb}: {errs}")
    return bad


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
    if "--path" in sys.argv:
        os.environ["MXRT_GEMM_PATH"] = sys.argv[sys.argv.index("--path") + 1]
    sys.exit(time_4096() if "--time" in sys.argv else smoke())
