"""Weights in aiter's 16x16 layout (``gemm_mx(..., b_weight_layout="aiter16x16")``, MX_REFERENCE.md 3b') on an
sm_90a GPU: both decode kernels read the shuffled codes in place (define WLB = 1): ``sm90_decode`` (3-D TMA boxes of
the layout's chunk columns) and ``sm90_decode_wg`` (fp8: 8 boxes a stage into the no-swizzle K-major wgmma tile;
e2m1: the producers' cp.async sources), at every m of the envelope (each call on the path its row-major twin takes),
every format pair and out dtype, every token / row tile, both wgmma grids, split-K modes, a preshuffled weight-scale
layout on top, extreme and NaN scales, n tails of the layout's padding, and CUDA-graph capture; every result
**bitwise** the row-major call of the same build, and inside the float64 reference's bar. Outside the decode
envelope (m > 64, k % 128) the codes are unshuffled on the device first (``mxrt.ops.gemm.unshuffled_weight``, bitwise
``mxrt.unshuffle_weight``) and the ordinary path runs, bitwise the row-major call. Outputs start poisoned.

Marker ``gpu``: skips without cupy, a device, or an sm_90a target.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.problems.gemm import GEMM_FORMAT_PAIRS

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from support.gemm_cases import check_result, host_result, operands, shuffled_weight, to_device  # noqa: E402

from mxrt.ops import gemm as gemm_op  # noqa: E402
from mxrt.ops import gemm_decode, gemm_decode_wg  # noqa: E402
from mxrt.ops import gemm_decode_kernels as K  # noqa: E402
from mxrt.problems import gemm_problem  # noqa: E402
from mxrt.runtime import device_available, get_arch  # noqa: E402

if not device_available() or get_arch().target != "sm_90a":
    pytest.skip("the decode path runs on sm_90a", allow_module_level=True)

W16 = "aiter16x16"


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=0xFF, sync_after_launch=True) as session:
        yield session


def path_of(a, b, **kw) -> str:
    dg = gemm_op.device_gemm(gemm_problem(a, b, **kw))
    return gemm_op.resolve_gemm_path(dg)[0].name


def shuffled_and_row_major(qa, qb, **kw):
    """gemm_mx with the weights shuffled and row-major: both on the path the row-major call takes (a decode path),
    the second forced onto it so that its result does not depend on a table entry read differently."""
    a, b = to_device(qa), shuffled_weight(qb)
    path = path_of(a, to_device(qb), **kw)
    assert path in ("sm90_decode", "sm90_decode_wg")
    assert path_of(a, b, b_weight_layout=W16, **kw) == path
    got = mxrt.gemm_mx(a, b, b_weight_layout=W16, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MXRT_GEMM_PATH", path)
        ref = mxrt.gemm_mx(a, to_device(qb), **kw)
    return got, ref


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("pair", GEMM_FORMAT_PAIRS, ids="x".join)
@pytest.mark.parametrize("m", [1, 8, 33, 64])
def test_decode_reads_the_layout_in_place(pair, out_dtype, m):
    """n = 300 pads to 304 (a tail of the last 16-row tile and of every CTA's rows); k = 2048: the path's own K
    split. m 33 / 64 run on the wgmma decode kernel (e4m3 / e5m2 / e2m1 weights, e4m3 / e5m2 tokens), the rest on
    sm90_decode."""
    n, k = 300, 2048
    x, w, qa, qb = operands(m, n, k, *pair, seed=m + 3)
    if out_dtype == "float32" and pair != ("e2m1", "e2m1"):
        dg = gemm_op.device_gemm(gemm_problem(to_device(qa), shuffled_weight(qb), b_weight_layout=W16,
                                              out_dtype=out_dtype))  # fmt: skip
        assert "float32 output" in gemm_decode.supports(dg)
        got = mxrt.gemm_mx(to_device(qa), shuffled_weight(qb), b_weight_layout=W16, out_dtype=out_dtype)
        assert not check_result(got, qa, qb, out_dtype, x=x, w=w)  # unshuffled, then another path
        return
    got, ref = shuffled_and_row_major(qa, qb, out_dtype=out_dtype)
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w)
    np.testing.assert_array_equal(got.get(), ref.get())


@pytest.mark.parametrize("mt", K.DECODE_MT)
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids="x".join)
def test_every_row_tile_and_split(mt, pair):
    """Each RT a token tile takes, at two warp counts and K splits (n = 150: tails of 16, 32 and 64 rows), the
    WLB = 1 build against the WLB = 0 build with the same tuning, bitwise."""
    m, n, k = 8 * mt - 3 if mt > 1 else 5, 150, 1024
    _, _, qa, qb = operands(m, n, k, *pair, seed=20 + mt)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), shuffled_weight(qb), b_weight_layout=W16))
    dr = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb)))
    for rt in K.DECODE_RT:
        if not K.valid_rt(mt, rt):
            continue
        for kw, split in ((2, 1), (4, 2)):
            dg.out.fill(0xFFFF)
            dr.out.fill(0)
            gemm_decode.run(dg, mt=mt, kw=kw, stages=2, rt=rt, split=split)
            gemm_decode.run(dr, mt=mt, kw=kw, stages=2, rt=rt, split=split)
            assert not check_result(dg.out, qa, qb, "bfloat16"), (rt, kw, split)
            np.testing.assert_array_equal(dg.out.get(), dr.out.get())


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split_k", [3, 8])
def test_split_k_and_a_weight_scale_layout(split_k, deterministic):
    """The caller's split_k in both modes, with the weights' scales preshuffled too (aiter32x8: the checkpoint
    form aiter ships), n = 512, k = 1024, m = 17."""
    m, n, k = 17, 512, 1024
    x, w, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=split_k)
    codes, scales, fmt, _ = shuffled_weight(qb)
    b = (codes, mxrt.preshuffle_scales(scales, "aiter32x8"), fmt, k)
    kw = dict(split_k=split_k, deterministic=deterministic)
    assert path_of(to_device(qa), b, b_weight_layout=W16, b_scale_layout="aiter32x8", **kw) == "sm90_decode"  # m 17
    got = mxrt.gemm_mx(to_device(qa), b, b_weight_layout=W16, b_scale_layout="aiter32x8", **kw)
    rounded = split_k if not deterministic else 1
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w, splits_rounded=rounded)
    if deterministic:  # bitwise the row-major codes with the same scales on the same path
        rm = (to_device(qb).data, b[1], fmt, k)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MXRT_GEMM_PATH", "sm90_decode")
            ref = mxrt.gemm_mx(to_device(qa), rm, b_scale_layout="aiter32x8", **kw)
        np.testing.assert_array_equal(got.get(), ref.get())


@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids="x".join)
def test_extreme_and_nan_scales(pair):
    """Scale pairs at both ends of E8M0 (products near 2^0), a zero-code block under 2^254 factors, and NaN scale
    bytes in a token row and a weight row: NaN exactly where the reference has it, the rest in the bar."""
    m, n, k = 11, 72, 384
    rng = np.random.default_rng(5)
    _, _, qa, qb = operands(m, n, k, *pair, seed=5)
    kb = k // 32
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    w_codes = qb.data.copy()
    sa[:, 4], sb[:, 4] = 254, 254
    w_codes[:, 4 * (16 if pair[1] == "e2m1" else 32) : 5 * (16 if pair[1] == "e2m1" else 32)] = 0
    sa[6, 2], sb[40, 7] = 255, 255
    a = (cupy.asarray(qa.data), cupy.asarray(sa), pair[0], k)
    b = (cupy.asarray(mxrt.preshuffle_weight(w_codes)), cupy.asarray(sb), pair[1], k)
    want = mxrt.reference.gemm_mx((qa.data, sa, pair[0], k), (w_codes, sb, pair[1], k), out_dtype="float64")
    assert path_of(a, b, b_weight_layout=W16) in ("sm90_decode", "sm90_decode_wg")
    got = host_result(mxrt.gemm_mx(a, b, b_weight_layout=W16), "bfloat16")
    nan = np.isnan(want)
    assert nan[6].all() and nan[:, 40].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    assert mxrt.reference.calc_diff(got[~nan], want[~nan]) <= 1e-5


def test_cuda_graph_capture():
    """Captured with shuffled weights; new weights shuffled into the same buffer between replays."""
    m, n, k = 4, 520, 2048
    _, _, qa, qb1 = operands(m, n, k, "e4m3", "e4m3", seed=31)
    _, _, _, qb2 = operands(m, n, k, "e4m3", "e4m3", seed=32)
    with mxrt.runtime.debug():
        a, b = to_device(qa), shuffled_weight(qb1)
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.gemm_mx(a, b, out=out, b_weight_layout=W16)
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            mxrt.gemm_mx(a, b, out=out, b_weight_layout=W16)
            graph = stream.end_capture()
        for qb in (qb2, qb1):
            b[0][...] = cupy.asarray(mxrt.preshuffle_weight(qb.data))
            b[1][...] = cupy.asarray(qb.scales)
            out.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            assert not check_result(out, qa, qb, "bfloat16")


@pytest.mark.parametrize("nk", [(300, 2048), (64, 96), (1000, 1056)], ids=str)
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_device_unshuffle_matches_numpy(fmt, nk):
    """unshuffled_weight's strided copy (and its padding drop) is numpy's unshuffle_weight, bitwise."""
    n, k = nk
    _, _, qa, qb = operands(2, n, k, "e4m3", fmt, seed=n)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), shuffled_weight(qb), b_weight_layout=W16))
    plain = gemm_op.unshuffled_weight(dg)
    assert plain.p.b_weight_layout is None and plain.b_codes.flags.c_contiguous
    np.testing.assert_array_equal(plain.b_codes.get(), qb.data)


@pytest.mark.parametrize("mk", [(65, 1024), (300, 512), (8, 96), (4, 1056)], ids=str)
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1")], ids="x".join)
def test_outside_the_decode_envelope_unshuffles_first(pair, mk):
    """m > 64, or k % 128 != 0: the weights are unshuffled on the device and the ordinary path runs; bitwise the
    row-major call (the same path), inside the reference's bar."""
    m, k = mk
    n = 200
    x, w, qa, qb = operands(m, n, k, *pair, seed=m)
    a = to_device(qa)
    dg = gemm_op.device_gemm(gemm_problem(a, shuffled_weight(qb), b_weight_layout=W16))
    path, plain = gemm_op.resolve_gemm_path(dg)
    assert plain is not dg and path.name != "sm90_decode"
    got = mxrt.gemm_mx(a, shuffled_weight(qb), b_weight_layout=W16)
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w)
    np.testing.assert_array_equal(got.get(), mxrt.gemm_mx(a, to_device(qb)).get())


@pytest.mark.parametrize("fb", ["e4m3", "e5m2", "e2m1"])
@pytest.mark.parametrize("m", [9, 32, 64])
def test_wgmma_decode_every_token_tile_and_grid(m, fb):
    """The wgmma decode kernel's WLB build against its row-major build, bitwise, per token tile (NT 16 / 32 / 64),
    on the older grid with and without a K split and on the stream-K grid; n = 200 (a 64-row slab tail, padded to
    208), k = 4096."""
    n, k = 200, 4096
    _, _, qa, qb = operands(m, n, k, "e4m3", fb, seed=m)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), shuffled_weight(qb), b_weight_layout=W16))
    dr = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb)))
    assert gemm_decode_wg.supports(dg) is None
    for tune in ({"split": 1, "ctas": 0}, {"split": 3, "ctas": 0}, {"ctas": 5}):
        dg.out.fill(0xFFFF)
        dr.out.fill(0)
        gemm_decode_wg.run(dg, **dict(tune))
        gemm_decode_wg.run(dr, **dict(tune))
        assert not check_result(dg.out, qa, qb, "bfloat16"), tune
        np.testing.assert_array_equal(dg.out.get(), dr.out.get())


@pytest.mark.parametrize("m", [9, 16, 17])
def test_shuffled_e2m1_weights_stay_on_the_mma_kernel_to_m16(m):
    """e2m1 weights in the layout go to the wgmma decode kernel only above gemm_decode.E2M1_W16_MIN_M tokens (its
    shuffled build lost at M 16); row-major ones above gemm_decode_wg.E2M1_MIN_M (no tuned e2m1 entry at n = 200)."""
    _, _, qa, qb = operands(m, 200, 1024, "e4m3", "e2m1", seed=m)
    want = "sm90_decode" if m <= gemm_decode.E2M1_W16_MIN_M else "sm90_decode_wg"
    assert path_of(to_device(qa), shuffled_weight(qb), b_weight_layout=W16) == want
    assert path_of(to_device(qa), to_device(qb)) == "sm90_decode_wg"
