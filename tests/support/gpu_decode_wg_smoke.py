"""A small run of the wgmma decode kernel (kernels_src/gemm/gemm_mx_decode_sm90_wg.hip) for compute-sanitizer (memcheck,
racecheck, synccheck): every token tile with one and two consumer warpgroups, a shallow and a deep ring, tails in m
and n, split-K with fp32 slices (splits without groups included) and the fp16 atomic mode, a wide stage and NaN
scales; e4m3 and e2m1 weights (the producers' widening, rows past n not copied). Exits non-zero on any mismatch
against the float64 reference (calc_diff <= 1e-5).

    python tests/support/gpu_decode_wg_smoke.py [--quick] [--lineinfo]
"""

from __future__ import annotations

import sys

import cupy
import ml_dtypes
import numpy as np

import mxrt
from mxrt.ops import gemm as gemm_op
from mxrt.ops import gemm_decode_wg
from mxrt.ops.gemm_decode_kernels import wg_valid
from mxrt.problems import gemm_problem


def main() -> int:
    quick = "--quick" in sys.argv
    if "--lineinfo" in sys.argv:  # builds with line info, so compute-sanitizer names source lines
        from mxrt.runtime import compiler

        plain = compiler.compile_options
        compiler.compile_options = lambda arch, d: (*plain(arch, d), "-lineinfo")
    rng = np.random.default_rng(0)
    bad = 0
    shapes = ((1, 1, 1), (2, 1, 2), (2, 1, 4), (2, 1, 8), (2, 2, 1), (4, 2, 4))  # (nc, ns, pw)
    cases = [(nt - 3, nc, ns, pw, 8) for nt in (16, 32, 64) for nc, ns, pw in shapes if wg_valid(nt, nc, 8, ns, pw)]
    if quick:
        cases = [(13, 1, 1, 1, 2), (61, 2, 1, 2, 4), (30, 4, 2, 4, 8), (29, 2, 1, 8, 8)]
    cases = [
        (m, nc, ns, pw, st, fmt)
        for m, nc, ns, pw, st in cases
        for fmt in ("e4m3", "e2m1")
        if wg_valid(next(t for t in (16, 32, 64) if t >= m), nc, st, ns, pw, fmt == "e2m1")
    ]
    for m, nc, ns, pw, st, fmt in cases:
        nt = next(t for t in (16, 32, 64) if t >= m)
        n, k = 200, 1024
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        qa, qb = mxrt.quantize_mx(x, "e4m3", backend="numpy"), mxrt.quantize_mx(w, fmt, backend="numpy")
        sb = qb.scales.copy()
        sb[150, 9] = 30  # one wide stage (CTA 2)
        sb[3, 20] = 255  # a NaN column
        want = mxrt.reference.gemm_mx((qa.data, qa.scales, "e4m3", k), (qb.data, sb, fmt, k), out_dtype="float64")
        a = (cupy.asarray(qa.data), cupy.asarray(qa.scales), "e4m3", k)
        b = (cupy.asarray(qb.data), cupy.asarray(sb), fmt, k)
        # split_k 1: the stream-K grid (its default CTA count, and 5 CTAs: every slab split between two or three)
        modes = ((1, True, "bfloat16", {}), (1, True, "float16", {"ctas": 5}), (3, True, "bfloat16", {}),
                 (11, True, "float16", {}), (2, False, "float16", {}))  # fmt: skip
        for split, det, out, more in modes:
            dg = gemm_op.device_gemm(gemm_problem(a, b, out_dtype=out, split_k=split, deterministic=det))
            dg.out.view(cupy.uint8).fill(0xFF)  # poisoned
            gemm_decode_wg.run(dg, nt=nt, nc=nc, ns=ns, pw=pw, stages=st, **more)
            got = dg.out.get().view(ml_dtypes.bfloat16 if out == "bfloat16" else np.float16).astype(np.float64)
            nan = np.isnan(want)
            ok = np.array_equal(np.isnan(got), nan) and mxrt.reference.calc_diff(got[~nan], want[~nan]) <= 1e-5 * (
                1 if det else split
            )
            if not ok:
                print(f"mismatch {fmt} m={m} nc={nc} ns={ns} pw={pw} stages={st} split={split} det={det} {out}")
                bad += 1
    cupy.cuda.Device().synchronize()
    print(f"decode_wg smoke: {len(cases) * 5} runs, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
