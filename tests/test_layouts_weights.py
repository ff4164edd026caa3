"""aiter 16x16 weight preshuffle: bitwise against the per-element offset formula and a loop; round trips; errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mxrt
from mxrt.checks.layouts import weight_oracle

SHAPES = [(0, 0), (1, 1), (16, 32), (17, 33), (31, 64), (32, 256), (7, 255), (257, 96)]


def codes(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fp8_and_packed_fp4_vs_formula(shape):
    q = codes(shape, shape[0])
    p = mxrt.preshuffle_weight(q)
    assert p.shape == mxrt.weight_layout_shape("aiter16x16", *shape) and p.dtype == np.uint8
    np.testing.assert_array_equal(p, weight_oracle(q))
    np.testing.assert_array_equal(mxrt.unshuffle_weight(p, shape=shape), q)


def test_python_loop_fp8_formula():
    # MX_REFERENCE 3b' FP8: o = n0*16K + k0*512 + k1*256 + n1*16 + k2
    q = codes((32, 64), 1)
    flat = mxrt.preshuffle_weight(q).ravel()
    for n in range(32):
        for k in range(64):
            o = (n // 16) * 16 * 64 + (k // 32) * 512 + ((k % 32) // 16) * 256 + (n % 16) * 16 + k % 16
            assert flat[o] == q[n, k]


def test_lane_chunks():
    # after the shuffle, lane l's 16-byte chunk of a 16(N) x 32(K bytes) tile is at tile_base + 16*l
    q = codes((16, 32), 2)
    p = mxrt.preshuffle_weight(q).ravel()
    for lane in range(32):
        k1, n1 = divmod(lane, 16)
        np.testing.assert_array_equal(p[16 * lane : 16 * lane + 16], q[n1, 16 * k1 : 16 * k1 + 16])


def test_float8_and_bf16_and_batched():
    q = codes((3, 20, 40), 3)
    f8 = q.view(ml_dtypes.float8_e4m3fn)
    p = mxrt.preshuffle_weight(f8)
    assert p.dtype == f8.dtype and p.shape == (3, 32, 64)
    for g in range(3):
        np.testing.assert_array_equal(p[g].view(np.uint8), weight_oracle(q[g]))
    np.testing.assert_array_equal(mxrt.unshuffle_weight(p, shape=(20, 40)).view(np.uint8), q)
    # 2-byte elements: kp = 8 elements per 16-byte chunk
    b = np.random.default_rng(4).standard_normal((18, 40)).astype(ml_dtypes.bfloat16)
    pb = mxrt.preshuffle_weight(b)
    np.testing.assert_array_equal(pb.view(np.uint16), weight_oracle(b.view(np.uint16)))
    np.testing.assert_array_equal(mxrt.unshuffle_weight(pb, "aiter16x16", (18, 40)).view(np.uint16), b.view(np.uint16))


@settings(max_examples=25, deadline=None)
@given(
    n=st.one_of(st.sampled_from([1, 7, 31, 33, 255, 256, 257]), st.integers(0, 80)),
    k=st.one_of(st.sampled_from([1, 31, 32, 33, 64, 255]), st.integers(0, 100)),
    seed=st.integers(0, 2**31),
)
def test_hypothesis_shapes(n, k, seed):
    q = codes((n, k), seed)
    p = mxrt.preshuffle_weight(q)
    np.testing.assert_array_equal(p, weight_oracle(q))
    np.testing.assert_array_equal(mxrt.unshuffle_weight(p, shape=(n, k)), q)
    np.testing.assert_array_equal(mxrt.unshuffle_weight(p)[:n, :k], q)


def test_padding_is_zero():
    q = np.full((5, 7), 0xAB, np.uint8)
    p = mxrt.preshuffle_weight(q)
    assert np.count_nonzero(p) == 35 and np.all(p[p != 0] == 0xAB)


def test_errors():
    q = codes((16, 32))
    with pytest.raises(mxrt.LayoutError, match="preshuffle_weight: argument 'layout' is 'x'"):
        mxrt.preshuffle_weight(q, "x")
    with pytest.raises(mxrt.DtypeError, match="argument 'q' has dtype float32"):
        mxrt.preshuffle_weight(q.astype(np.float32))
    with pytest.raises(mxrt.DtypeError):
        mxrt.preshuffle_weight(q.astype(bool))
    with pytest.raises(mxrt.ShapeError, match="2 <= ndim"):
        mxrt.preshuffle_weight(q.ravel())
    with pytest.raises(mxrt.ShapeError, match="n % 16 == 0"):
        mxrt.unshuffle_weight(q[:8])
    with pytest.raises(mxrt.ShapeError, match="pads to"):
        mxrt.unshuffle_weight(q, shape=(17, 32))
    with pytest.raises(mxrt.ShapeError, match="expected \\(n, k\\)"):
        mxrt.unshuffle_weight(q, shape=16)
