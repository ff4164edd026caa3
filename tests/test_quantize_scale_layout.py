"""quantize_mx / quantize_mx_dual with ``scale_layout=``: the numpy twin of the fused quantize + preshuffle."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats.mx import MXArray

LAYOUTS = ("aiter32x8", "turbo16x4", "cublas128x4", "deepgemm_ue8m0")
SHAPES = [(1, 1), (7, 33), (33, 7), (64, 256), (300, 96), (0, 64), (5, 0)]


def _x(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1", "e5m2"])
def test_equals_preshuffle_of_plain(layout, fmt):
    for i, shape in enumerate(SHAPES):
        x = _x(shape, i, ml_dtypes.bfloat16 if i % 2 else np.float32)
        plain = mxrt.quantize_mx(x, fmt)
        fused = mxrt.quantize_mx(x, fmt, scale_layout=layout)
        want = mxrt.preshuffle_scales(plain.scales, layout)
        assert fused.scale_layout == layout and plain.scale_layout is None
        assert fused.scales.shape == want.shape and fused.scales.dtype == want.dtype
        assert fused.scales.strides == want.strides
        assert np.array_equal(fused.scales, want)
        assert np.array_equal(fused.data, plain.data)
        assert np.array_equal(mxrt.unshuffle_scales(fused.scales, layout, plain.scales.shape), plain.scales)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dequantize_round_trip(layout):
    x = _x((45, 200), 3)
    x[3, :40] = np.nan
    plain = mxrt.quantize_mx(x, "e4m3")
    fused = mxrt.quantize_mx(x, "e4m3", scale_layout=layout)
    assert np.array_equal(mxrt.dequantize_mx(fused), mxrt.dequantize_mx(plain), equal_nan=True)
    assert np.array_equal(mxrt.dequantize_mx(fused, np.float16), plain.dequantize(np.float16), equal_nan=True)
    with pytest.raises(mxrt.LayoutError, match=r"mxrt\.dequantize_mx"):  # the method is the row-major numpy twin
        fused.dequantize()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("block_2d", [False, True])
def test_dual(layout, block_2d):
    x = _x((70, 100), 4)
    plain = mxrt.quantize_mx_dual(x, "e2m1", block_2d=block_2d)
    fused = mxrt.quantize_mx_dual(x, "e2m1", block_2d=block_2d, scale_layout=layout)
    for part in ("row", "col"):
        p, f = getattr(plain, part), getattr(fused, part)
        assert f.scale_layout == layout
        assert np.array_equal(f.scales, mxrt.preshuffle_scales(p.scales, layout))
        assert np.array_equal(f.data, p.data)
        assert np.array_equal(mxrt.dequantize_mx(f), mxrt.dequantize_mx(p))


def test_padding_is_127():
    s = mxrt.quantize_mx(np.ones((3, 40), np.float32), scale_layout="cublas128x4").scales
    assert s.shape == (128, 4)
    plain = mxrt.quantize_mx(np.ones((3, 40), np.float32)).scales
    assert np.count_nonzero(s == 127) == s.size - plain.size + np.count_nonzero(plain == 127)


def test_errors():
    x = _x((4, 64))
    with pytest.raises(mxrt.LayoutError, match="scale_layout"):
        mxrt.quantize_mx(x, scale_layout="nope")
    with pytest.raises(mxrt.LayoutError, match="scale_layout"):
        mxrt.quantize_mx_dual(x, scale_layout=3)
    with pytest.raises(mxrt.ShapeError, match="2-D x blocked along its last axis"):
        mxrt.quantize_mx(x, axis=0, scale_layout="aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="2-D"):
        mxrt.quantize_mx(_x((2, 3, 64)), scale_layout="aiter32x8")
    q = mxrt.quantize_mx(_x((2, 3, 64)))
    bad = MXArray(q.data, q.scales, q.fmt, 32, 2, q.shape, q.scale_mode, "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="scale_layout"):
        mxrt.dequantize_mx(bad)


def test_mxarray_backward_compatible():
    q = mxrt.quantize_mx(_x((4, 64)))
    old = MXArray(q.data, q.scales, q.fmt, q.block_size, q.axis, q.shape, q.scale_mode)
    assert old.scale_layout is None and "scale_layout" not in repr(old)
    assert np.array_equal(mxrt.dequantize_mx(old), mxrt.dequantize_mx(q))
    fused = mxrt.quantize_mx(_x((4, 64)), scale_layout="turbo16x4")
    assert "scale_layout='turbo16x4'" in repr(fused)
    assert fused.scale_shape == (4, 2)
