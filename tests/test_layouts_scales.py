"""Scale preshuffles: bitwise against the inverse index maps, Python loops, worked examples; round trips; errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mxrt
from mxrt.checks.layouts import (
    deepgemm_pack_oracle,
    padded_scales,
    scale_coords,
    scale_storage_oracle,
    torchao_to_blocked,
)

LAYOUTS = list(mxrt.SCALE_LAYOUTS)
BYTE_LAYOUTS = [lay for lay in LAYOUTS if lay != "deepgemm_ue8m0"]
SHAPES = [(0, 0), (0, 3), (5, 0), (1, 1), (7, 31), (31, 33), (32, 8), (33, 7), (255, 4), (256, 8), (257, 9), (128, 5)]
ODD = [1, 7, 31, 33, 255, 256, 257]
TILES = {"aiter32x8": (256, 8), "turbo16x4": (16, 4), "cublas128x4": (128, 4), "deepgemm_ue8m0": (4, 4)}


def codes(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def storage_bytes(p: np.ndarray, layout: str, shape) -> np.ndarray:
    """The flat storage of a preshuffled buffer; for DeepGEMM read through the documented MN-major strides."""
    sm, sn = mxrt.scale_layout_shape(layout, *shape)
    if layout != "deepgemm_ue8m0":
        return p.ravel()
    assert p.strides == (4, 4 * sm) or p.size == 0
    store = np.lib.stride_tricks.as_strided(p, (sn // 4, sm), (4 * sm, 4), writeable=False)
    return np.ascontiguousarray(store).astype("<i4").view(np.uint8).ravel()


def loop_offset(layout: str, r: int, c: int, sm: int, sn: int) -> int:
    """Forward maps of MX_REFERENCE.md 3a/3b/3d/3e, one element at a time (plain Python)."""
    if layout == "aiter32x8":
        return (
            (r // 32) * (sn // 8) * 256
            + (c // 8) * 256
            + (c % 4) * 64
            + (r % 16) * 4
            + ((c // 4) % 2) * 2
            + ((r // 16) % 2)
        )
    if layout == "turbo16x4":
        return (r // 16) * 16 * sn + (c // 4) * 64 + (c % 4) * 16 + r % 16
    if layout == "cublas128x4":
        return ((r // 128) * (sn // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    return ((c // 4) * sm + r) * 4 + c % 4


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scale_layout_shape(layout):
    tr, tc = TILES[layout]
    for rows in [0, *ODD]:
        for cols in [0, 1, 3, 4, 5, 8, 9]:
            sm, sn = mxrt.scale_layout_shape(layout, rows, cols)
            assert sm % tr == 0 and sn % tc == 0 and rows <= sm < rows + tr and cols <= sn < cols + tc


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_preshuffle_vs_inverse_map(layout, shape):
    s = codes(shape, sum(shape))
    sm, sn = mxrt.scale_layout_shape(layout, *shape)
    p = mxrt.preshuffle_scales(s, layout, backend="numpy")
    np.testing.assert_array_equal(storage_bytes(p, layout, shape), scale_storage_oracle(layout, s, sm, sn))
    u = mxrt.unshuffle_scales(p, layout, shape)
    assert u.dtype == np.uint8 and u.shape == shape
    np.testing.assert_array_equal(u, s)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(7, 9), (33, 5), (130, 12)], ids=str)
def test_preshuffle_vs_python_loop(layout, shape):
    s = codes(shape, 3)
    sm, sn = mxrt.scale_layout_shape(layout, *shape)
    pad = 200
    expected = np.full(sm * sn, pad, np.uint8)
    for r in range(shape[0]):
        for c in range(shape[1]):
            expected[loop_offset(layout, r, c, sm, sn)] = s[r, c]
    p = mxrt.preshuffle_scales(s, layout, pad_value=pad)
    np.testing.assert_array_equal(storage_bytes(p, layout, shape), expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 1), (33, 9), (257, 12)], ids=str)
def test_scale_index_is_a_bijection_matching_inverse(layout, shape):
    sm, sn = mxrt.scale_layout_shape(layout, *shape)
    o = np.arange(sm * sn)
    r, c = scale_coords(layout, o, sm, sn)
    np.testing.assert_array_equal(mxrt.scale_index(layout, r, c, shape), o)
    rr, cc = np.indices((sm, sn))
    idx = mxrt.scale_index(layout, rr, cc, shape)
    assert idx.dtype == np.int64 and np.array_equal(np.sort(idx.ravel()), o)
    assert mxrt.scale_index(layout, 0, 0, shape) == loop_offset(layout, 0, 0, sm, sn)
    assert mxrt.scale_index(layout, sm - 1, sn - 1, shape) == loop_offset(layout, sm - 1, sn - 1, sm, sn)


@settings(max_examples=25, deadline=None)
@given(
    layout=st.sampled_from(LAYOUTS),
    rows=st.one_of(st.sampled_from(ODD), st.integers(0, 300)),
    cols=st.one_of(st.sampled_from([1, 3, 4, 5, 8, 9, 31, 33]), st.integers(0, 40)),
    pad=st.integers(0, 255),
    seed=st.integers(0, 2**31),
)
def test_hypothesis_shapes(layout, rows, cols, pad, seed):
    s = codes((rows, cols), seed)
    sm, sn = mxrt.scale_layout_shape(layout, rows, cols)
    p = mxrt.preshuffle_scales(s, layout, pad_value=pad)
    np.testing.assert_array_equal(storage_bytes(p, layout, (rows, cols)), scale_storage_oracle(layout, s, sm, sn, pad))
    np.testing.assert_array_equal(mxrt.unshuffle_scales(p, layout, (rows, cols)), s)
    # every padding position holds pad_value
    rr, cc = np.indices((sm, sn))
    is_pad = (rr >= rows) | (cc >= cols)
    flat = storage_bytes(p, layout, (rows, cols))
    assert np.all(flat[mxrt.scale_index(layout, rr[is_pad], cc[is_pad], (rows, cols))] == pad)


def test_aiter_first_bytes_example():
    # MX_REFERENCE 3b: with S[r,c] = (r,c) the first bytes are (0,0),(16,0),(0,4),(16,4),(1,0),(17,0),(1,4),(17,4)...
    r, c = np.indices((32, 8))
    p = mxrt.preshuffle_scales((c * 32 + r).astype(np.uint8), "aiter32x8")
    assert p.shape == (256, 8) and p.dtype == np.uint8
    ex = [(0, 0), (16, 0), (0, 4), (16, 4), (1, 0), (17, 0), (1, 4), (17, 4), (2, 0), (18, 0)]
    assert p.ravel()[:10].tolist() == [32 * cc + rr for rr, cc in ex]


def test_aiter_dword_lane_semantics():
    # lane L = 16*i5 + i2 of a 32x8 tile reads one dword; byte j = 2*i4 + i1 holds S[16*i1 + i2, 4*i4 + i5]
    s = codes((32, 8), 1)
    dw = mxrt.preshuffle_scales(s, "aiter32x8")[:32].ravel().view("<u4")[:64]
    for lane in range(64):
        i5, i2 = divmod(lane, 16)
        for j in range(4):
            i4, i1 = divmod(j, 2)
            assert (int(dw[lane]) >> (8 * j)) & 0xFF == s[16 * i1 + i2, 4 * i4 + i5]


def test_turbo_example_and_uint32():
    # MX_REFERENCE 3a: out[0..15] = (0..15, 0), out[16..31] = (0..15, 1), out[64] = (0, 4)
    r, c = np.indices((16, 8))
    s = (16 * c + r).astype(np.uint8)
    p = mxrt.preshuffle_scales(s, "turbo16x4").ravel()
    assert p[:16].tolist() == list(range(16)) and p[16:32].tolist() == [16 + i for i in range(16)] and p[64] == 64
    s = codes((48, 12), 2)
    p32 = mxrt.preshuffle_scales(s, "turbo16x4", dtype=np.uint32)
    assert p32.dtype == np.uint32
    np.testing.assert_array_equal(p32, mxrt.preshuffle_scales(s, "turbo16x4").astype(np.uint32))
    np.testing.assert_array_equal(mxrt.unshuffle_scales(p32, "turbo16x4", s.shape), s)
    # lane l of 128-wide K step t in band b reads out[b*16*cols + t*64 + l] = S[16b + l%16, 4t + l//16]
    flat = p32.ravel()
    for b, t, lane in [(0, 0, 0), (1, 2, 37), (2, 1, 63)]:
        assert flat[b * 16 * 12 + t * 64 + lane] == s[16 * b + lane % 16, 4 * t + lane // 16]


def test_cublas_example_and_torchao():
    # MX_REFERENCE 3e: bytes 0..3 = row 0, 4..7 = row 32, 8..11 = row 64, 12..15 = row 96, 16..19 = row 1
    r, c = np.indices((128, 4))
    pr = mxrt.preshuffle_scales(r.astype(np.uint8), "cublas128x4").ravel()
    pc = mxrt.preshuffle_scales(c.astype(np.uint8), "cublas128x4").ravel()
    assert pr[:20].tolist() == [0] * 4 + [32] * 4 + [64] * 4 + [96] * 4 + [1] * 4
    assert pc[:20].tolist() == [0, 1, 2, 3] * 5
    for shape in [(1, 1), (129, 7), (300, 9), (256, 8)]:
        s = codes(shape, 4)
        sm, sn = mxrt.scale_layout_shape("cublas128x4", *shape)
        got = mxrt.preshuffle_scales(s, "cublas128x4", pad_value=0).ravel()
        np.testing.assert_array_equal(got, torchao_to_blocked(padded_scales(s, sm, sn, 0)))
        # torchao's swizzled dims for hp [M, K]: (ceil(M/128)*32, ceil(K/128)*16) bytes
        assert got.size == (-(-shape[0] // 128) * 32) * (-(-shape[1] // 4) * 16)


@pytest.mark.parametrize("shape", [(1, 1), (5, 4), (7, 9), (130, 17)], ids=str)
def test_deepgemm_pack_strides_and_storage(shape):
    s = codes(shape, 6)
    sm, sn = mxrt.scale_layout_shape("deepgemm_ue8m0", *shape)
    p = mxrt.preshuffle_scales(s, "deepgemm_ue8m0", pad_value=0)
    assert p.dtype == np.int32 and p.shape == (shape[0], sn // 4) and p.strides == (4, 4 * sm)
    np.testing.assert_array_equal(p, deepgemm_pack_oracle(s, 0))
    # k = 4t is the low byte
    assert (int(p[0, 0]) & 0xFF) == s[0, 0]
    # int32 element (r, t) sits at storage offset t*sm + r (MN-major)
    store = np.lib.stride_tricks.as_strided(p, (sn // 4, sm), (4 * sm, 4), writeable=False)
    for r in range(shape[0]):
        for t in range(sn // 4):
            word = sum(int(s[r, 4 * t + j]) << (8 * j) for j in range(4) if 4 * t + j < shape[1])
            assert np.int64(store[t, r]) & 0xFFFFFFFF == word
    if sm > shape[0]:  # storage padding rows carry the pad byte in every position
        assert np.all(store[:, shape[0] :] == 0)


def test_pad_value_default_is_127_everywhere():
    s = codes((3, 5), 7)
    for layout in LAYOUTS:
        p = mxrt.preshuffle_scales(s, layout)
        sm, sn = mxrt.scale_layout_shape(layout, 3, 5)
        flat = storage_bytes(p, layout, (3, 5))
        rr, cc = np.indices((sm, sn))
        pad = (rr >= 3) | (cc >= 5)
        assert np.all(flat[mxrt.scale_index(layout, rr[pad], cc[pad], (3, 5))] == 127)


def test_accepts_e8m0_dtype_and_flat_buffers():
    s = codes((40, 10), 8)
    e = s.view(ml_dtypes.float8_e8m0fnu)
    for layout in BYTE_LAYOUTS:
        p = mxrt.preshuffle_scales(e, layout)
        np.testing.assert_array_equal(p, mxrt.preshuffle_scales(s, layout))
        np.testing.assert_array_equal(mxrt.unshuffle_scales(p.ravel(), layout, s.shape), s)


def test_errors():
    s = codes((4, 4))
    with pytest.raises(mxrt.UnknownLayoutError, match="preshuffle_scales: argument 'layout' is 'foo', an unknown"):
        mxrt.preshuffle_scales(s, "foo")
    with pytest.raises(mxrt.DtypeError, match="argument 's' has dtype float32"):
        mxrt.preshuffle_scales(s.astype(np.float32), "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="expected a 2-D"):
        mxrt.preshuffle_scales(s.ravel(), "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="pad_value"):
        mxrt.preshuffle_scales(s, "aiter32x8", pad_value=256)
    with pytest.raises(mxrt.DtypeError, match="pad_value"):
        mxrt.preshuffle_scales(s, "aiter32x8", pad_value=1.5)
    with pytest.raises(mxrt.DtypeError, match="dtype"):
        mxrt.preshuffle_scales(s, "aiter32x8", dtype=np.uint32)
    with pytest.raises(mxrt.UnknownNameError, match="backend"):
        mxrt.preshuffle_scales(s, "aiter32x8", backend="cuda")
    with pytest.MonkeyPatch.context() as mp, pytest.raises(mxrt.UnsupportedArchError):
        mp.setattr("mxrt.runtime.device_available", lambda: False)  # backend="gpu" with no usable device
        mxrt.preshuffle_scales(s, "aiter32x8", backend="gpu")
    p = mxrt.preshuffle_scales(s, "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match=r"expected \(256, 8\)"):
        mxrt.unshuffle_scales(p[:128], "aiter32x8", (4, 4))
    with pytest.raises(mxrt.DtypeError, match="expected uint8"):
        mxrt.unshuffle_scales(p.astype(np.int16), "aiter32x8", (4, 4))
    with pytest.raises(mxrt.ShapeError, match="shape"):
        mxrt.unshuffle_scales(p, "aiter32x8", 4)
    with pytest.raises(mxrt.ShapeError, match="zero-extended"):
        mxrt.unshuffle_scales(np.full((16, 4), 256, np.uint32), "turbo16x4", (4, 4))
    with pytest.raises(mxrt.DtypeError, match="int32"):
        mxrt.unshuffle_scales(np.zeros((4, 1), np.uint8), "deepgemm_ue8m0", (4, 4))
    with pytest.raises(mxrt.ShapeError, match=r"\[rows, ceil\(cols/4\)\]"):
        mxrt.unshuffle_scales(np.zeros((4, 2), np.int32), "deepgemm_ue8m0", (4, 4))
    with pytest.raises(mxrt.ShapeError, match="expected an int >= 0"):
        mxrt.scale_layout_shape("aiter32x8", -1, 4)
    with pytest.raises(mxrt.ShapeError, match="row"):
        mxrt.scale_index("aiter32x8", 256, 0, (4, 4))
    with pytest.raises(mxrt.DtypeError, match="col"):
        mxrt.scale_index("aiter32x8", 0, 0.5, (4, 4))
