"""A small run of the bf16 wgrad route (mxrt/ops/grouped_wgrad_bf16.py, kernels_src/gemm/gemm_wgrad_bf16_sm90.hip) for
compute-sanitizer (memcheck, racecheck, synccheck): float32 out plain, bfloat16 out accumulating, an empty and an
unaligned group, output tiles cut in both dimensions, groups longer than the ring, and a scale outside the bf16
window (the kernel returns at once, the gated generic kernel computes); one float32 forward (MODE 1); every call
twice (the second runs its call plan, mxrt/api/grouped_gemm.py). Exits non-zero
on any mismatch against the float64 reference (fp32 relative / bf16 calc_diff <= 1e-5).

    MXRT_GROUPED_GEMM_KERNEL=sm90_bf16 python tests/support/gpu_wgrad_bf16_smoke.py
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys

import cupy
import ml_dtypes
import numpy as np
from support.grouped_cases import dev

import mxrt
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64


def main() -> int:
    os.environ["MXRT_GROUPED_GEMM_KERNEL"] = "sm90_bf16"
    rng = np.random.default_rng(0)
    bad = runs = 0
    lens = np.array([300, 0, 37, 700])
    n, k = 200, 136
    m = int(lens.sum())
    go, x = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal((m, k)).astype(np.float32)
    qg = mxrt.quantize_mx_grouped(go, lens, "e4m3", colwise=True).col
    qx = mxrt.quantize_mx_grouped(x, lens, "e4m3", colwise=True).col
    wide = qg.scales.copy()
    wide[5, 3] = 2  # one block far below the window: the gate
    for scales in (qg.scales, wide):
        a = dataclasses.replace(qg, scales=scales)
        da, db = dev(a), dev(qx)
        want, _ = grouped_gemm_f64(wgrad_problem(a, qx, lens))
        for (out_dtype, acc), rep in itertools.product((("float32", False), ("bfloat16", True)), range(2)):
            start = rng.standard_normal(want.shape).astype(np.float32)
            if out_dtype == "bfloat16":
                start = start.astype(ml_dtypes.bfloat16)
                out = cupy.asarray(start.view(np.uint16))
            else:
                out = cupy.asarray(start)
            kw = dict(out=out, accumulate=True) if acc else dict(out=out)
            mxrt.grouped_gemm_mx_wgrad(da, db, cupy.asarray(lens), out_dtype=out_dtype, **kw)
            h = out.get()
            got = (h.view(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else h).astype(np.float64)
            ref = want + (start.astype(np.float64) if acc else 0.0)
            if out_dtype == "float32":
                ok = np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
            else:
                ok = mxrt.reference.calc_diff(got, ref) <= 1e-5
            runs += 1
            if not ok:
                print(f"mismatch {out_dtype} accumulate={acc} gate={scales is wide} call {rep}")
                bad += 1
    # the forward (MODE 1): groups straddling row tiles, an empty one, rows past the last group (zeros), k tail
    flens = np.array([100, 0, 37, 200])
    qa = mxrt.quantize_mx(rng.standard_normal((400, 176)).astype(np.float32))
    qb = mxrt.quantize_mx(rng.standard_normal((4, 264, 176)).astype(np.float32), axis=2)
    fp = grouped_gemm_problem(qa, qb, np.array([100, 0, 37, 263]), out_dtype="float32")  # a valid split, then
    want, _ = grouped_gemm_f64(dataclasses.replace(fp, groups=flens))  # the device lens: rows past 337 are zeros
    fa, fb, fl = dev(qa), dev(qb), cupy.asarray(flens)
    for rep in range(2):
        got = mxrt.grouped_gemm_mx(fa, fb, fl, out_dtype="float32").get().astype(np.float64)
        runs += 1
        if np.abs(got - want).max() > 1e-5 * np.abs(want).max():
            print(f"mismatch forward, call {rep}")
            bad += 1
    cupy.cuda.Device().synchronize()
    print(f"wgrad bf16 smoke: {runs} runs, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
