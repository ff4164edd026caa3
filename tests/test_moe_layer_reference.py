"""The float64 MoE layer reference (mxrt.reference.moe_layer) against the same layer built from the public numpy
ops (quantize_mx, grouped_gemm_mx's numpy twin) over a simulated W-rank dispatch / combine (mxrt.layouts.ep)."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.layouts.ep import simulate_combine, simulate_dispatch
from mxrt.reference.metrics import calc_diff
from mxrt.reference.moe_layer import BF16, moe_layer_f64, silu_mul


def _layer_by_public_ops(xs, ids, wts, wgu, wd, e, fmt):
    w = len(xs)
    el = e // w
    qs = [mxrt.quantize_mx(x, fmt) for x in xs]
    codes, lens, h = simulate_dispatch([q.data for q in qs], ids, e)
    scales, _, _ = simulate_dispatch([q.scales for q in qs], ids, e)
    ys = []
    for d in range(w):
        xg = (codes[d], scales[d], fmt, xs[0].shape[1])
        sl = slice(d * el, (d + 1) * el)
        bgu = (wgu.data[sl], wgu.scales[sl], fmt)
        gu = mxrt.grouped_gemm_mx(xg, bgu, lens[d], backend="numpy")
        a = silu_mul(np.asarray(gu, np.float32))
        ys.append(
            np.asarray(
                mxrt.grouped_gemm_mx(
                    mxrt.quantize_mx(a, fmt), (wd.data[sl], wd.scales[sl], fmt), lens[d], backend="numpy"
                ),
                np.float64,
            )
        )
    return [o.astype(BF16) for o in simulate_combine(ys, wts, h)]


@pytest.mark.parametrize(("w", "fmt"), [(1, "e4m3"), (2, "e4m3"), (4, "e5m2"), (2, "e2m1")])
def test_reference_equals_public_numpy_ops(w, fmt):
    rng = np.random.default_rng(w)
    e, k, h, i = 8, 3, 64, 64
    tokens = [11, 0, 7, 20][:w]
    xs = [(rng.standard_normal((t, h)) * 3).astype(BF16) for t in tokens]
    ids = [np.argsort(rng.random((t, e)), 1)[:, :k] for t in tokens]
    wts = [rng.random((t, k)).astype(np.float32) for t in tokens]
    wgu = mxrt.quantize_mx(rng.standard_normal((e, 2 * i, h)).astype(np.float32) / 8, fmt, axis=2)
    wd = mxrt.quantize_mx(rng.standard_normal((e, h, i)).astype(np.float32) / 8, fmt, axis=2)
    got = _layer_by_public_ops(xs, ids, wts, wgu, wd, e, fmt)
    for r in range(w):
        ref = moe_layer_f64(xs[r], ids[r], wts[r], wgu, wd, fmt)
        assert ref.dtype == BF16 and ref.shape == (tokens[r], h)
        if tokens[r]:
            assert calc_diff(got[r].astype(np.float32), ref.astype(np.float32)) <= 1e-5
            # the float64 sum vs the twin's float64 sum of the same bf16 rows: equal up to one bf16 rounding
            np.testing.assert_allclose(got[r].astype(np.float32), ref.astype(np.float32), rtol=2**-7, atol=1e-30)
