"""A small MoE decode run for compute-sanitizer (memcheck and racecheck): gate/up and down on moe_align_block_size
layouts, block sizes 1 / 16 / 128 (token chunks), -1 experts, topk weights, e2m1 weights, bf16 and fp16 out.
Exits non-zero on a mismatch against the numpy twin."""

from __future__ import annotations

import sys

import cupy
import numpy as np

import mxrt


def dev(q):
    return mxrt.MXArray(cupy.asarray(q.data), cupy.asarray(q.scales), q.fmt, q.block_size, q.axis, q.shape,
                        q.scale_mode)  # fmt: skip


def main() -> int:
    rng = np.random.default_rng(0)
    bad = 0
    # k 4096 with e2m1 weights and blocks of 16 / 8: the long-K e2m1 builds (4 warps, 2 / 3 stages, 64 rows per CTA);
    # at most 8 live blocks with blocks of 16: the few-block builds (3, 2, 4) at k 4096 and (1, 3, 4) at k 2048;
    # 16 blocks of 64 at MT 2: the chunk loop
    for t, e, top_k, bs, a_div, wf, od, k in [(3, 8, 2, 16, 2, "e4m3", "bfloat16", 256),
                                              (5, 16, 4, 1, 1, "e2m1", "float16", 256),
                                              (9, 4, 4, 128, 4, "e4m3", "bfloat16", 256),
                                              (3, 8, 2, 16, 2, "e2m1", "bfloat16", 4096),
                                              (4, 8, 2, 8, 1, "e2m1", "float16", 4096),
                                              (1, 8, 8, 16, 1, "e2m1", "bfloat16", 2048),
                                              (17, 16, 4, 64, 1, "e4m3", "bfloat16", 256)]:  # fmt: skip
        ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
        emap = np.where(np.arange(e) == 1, -1, np.arange(e)).astype(np.int32)
        s, b, p = mxrt.moe_align_block_size(ids, bs, e, emap, backend="numpy")
        x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
        w = mxrt.quantize_mx(rng.standard_normal((e, 72, k)).astype(np.float32), wf, axis=2)
        tw = rng.random((t, top_k)).astype(np.float32)
        kw = dict(top_k=top_k, block_size=bs, a_div=a_div, out_dtype=od)
        got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(s), cupy.asarray(b), cupy.asarray(p),
                               topk_weights=cupy.asarray(tw), **kw).get()  # fmt: skip
        want = mxrt.moe_gemm_mx(x, w, s, b, p, topk_weights=tw, backend="numpy", **kw)
        g = got.view(want.dtype).astype(np.float64) if od == "bfloat16" else got.astype(np.float64)
        diff = mxrt.calc_diff(g, want.astype(np.float64))
        if not (np.isfinite(g).all() and diff <= 1e-5):
            bad += 1
            print(f"FAIL t={t} e={e} bs={bs}: calc_diff {diff}")
    cupy.cuda.Device().synchronize()
    print(f"moe gemm smoke: {bad} mismatches")
    return int(bad != 0)


if __name__ == "__main__":
    sys.exit(main())
