"""quantize_mx / dequantize_mx / quantize_mx_dual against the independent oracle, bit for bit."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mxrt
from mxrt.checks.formats import E4M3_BLOCK, E4M3_BLOCK_CODES, FP4_BLOCK, FP4_BLOCK_BYTES, wide_range
from mxrt.checks.independent import quantize_rows, rounding_bound, scale_bytes
from mxrt.formats import FORMATS, ScaleMode, decode, pack_fp4, unpack_fp4

FMTS = list(FORMATS)
MODES = [m.value for m in ScaleMode]
SHAPES = [(1, 1), (7, 31), (3, 33), (5, 64), (2, 100), (1, 257)]  # odd m, k tails, k = 32 multiples


def assert_bitwise(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    bad = np.argwhere(got != expected)
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} mismatches, first at {i}: got {got[i]:#x}, want {expected[i]:#x}")


def check_against_oracle(x: np.ndarray, fmt: str, mode: str, block_size: int = 32, axis: int = -1) -> None:
    q = mxrt.quantize_mx(x, fmt, scale_mode=mode, block_size=block_size, axis=axis, backend="numpy")
    x32 = np.moveaxis(x.astype(np.float32), axis, -1)
    codes, scales = quantize_rows(x32, FORMATS[fmt], mode, block_size)
    assert_bitwise(q.scales, np.moveaxis(scales, -1, axis), f"{fmt}/{mode} scales")
    assert_bitwise(q.codes, np.moveaxis(codes, -1, axis), f"{fmt}/{mode} codes")
    if fmt == "e2m1":
        assert_bitwise(q.data, np.moveaxis(pack_fp4(codes), -1, axis), "packed")


@pytest.mark.parametrize("mode", MODES)
def test_worked_example_e4m3(mode: str) -> None:
    q = mxrt.quantize_mx(np.array(E4M3_BLOCK, np.float32), "e4m3", scale_mode=mode)
    s, codes = E4M3_BLOCK_CODES[mode]
    assert q.scales.tolist() == [s] and q.data[:8].tolist() == codes


@pytest.mark.parametrize("mode", MODES)
def test_worked_example_fp4(mode: str) -> None:
    q = mxrt.quantize_mx(np.array(FP4_BLOCK, np.float32), "e2m1", scale_mode=mode)
    s, packed = FP4_BLOCK_BYTES[mode]
    assert q.scales.tolist() == [s] and q.data[:4].tolist() == packed and q.data.shape == (16,)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_wide_range_vs_oracle(fmt: str, mode: str, shape: tuple[int, int]) -> None:
    check_against_oracle(wide_range(shape, seed=zlib.crc32(f"{fmt}{mode}{shape}".encode())), fmt, mode)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
def test_input_dtypes(dtype: type, fmt: str) -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((9, 70)) * 100).astype(dtype)
    check_against_oracle(x, fmt, "rceil")


def test_float64_rounds_through_float32() -> None:
    x = np.array([1.0 + 2.0**-30] * 32)  # a float64-only tail must not change the fp32 amax or codes
    q64 = mxrt.quantize_mx(x, "e4m3")
    q32 = mxrt.quantize_mx(x.astype(np.float32), "e4m3")
    assert_bitwise(q64.data, q32.data, "codes")


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_axes(axis: int, fmt: str) -> None:
    x = wide_range((33, 5, 40), seed=axis + 10)
    check_against_oracle(x, fmt, "floor", axis=axis)
    q = mxrt.quantize_mx(x, fmt, axis=axis)
    n = x.shape[axis]
    shp = list(x.shape)
    shp[axis] = -(-n // 32)
    assert q.scales.shape == tuple(shp) and q.axis == axis % 3 and q.shape == x.shape
    shp[axis] = -(-n // 2) if fmt == "e2m1" else n
    assert q.data.shape == tuple(shp)


@pytest.mark.parametrize("block_size", [1, 2, 16, 64, 128])
def test_block_sizes(block_size: int) -> None:
    check_against_oracle(wide_range((4, 130), seed=block_size), "e4m3", "even", block_size=block_size)


def test_partial_block_behaves_zero_padded() -> None:
    x = wide_range((3, 45), seed=5)
    padded = np.zeros((3, 64), np.float32)
    padded[:, :45] = x
    a, b = mxrt.quantize_mx(x, "e2m1"), mxrt.quantize_mx(padded, "e2m1")
    assert_bitwise(a.scales, b.scales, "scales")
    assert_bitwise(a.codes, b.codes[:, :45], "codes")
    assert a.data.shape == (3, 23) and (a.data[:, -1] >> 4 == 0).all()


def test_scale_minus_127_uses_the_exact_scale() -> None:
    # amax tiny enough that RCEIL picks e = -127; a peer that divides by 2^-126 would halve every code value
    x = np.zeros(32, np.float32)
    x[:4] = np.float32(2.0**-127) * np.array([448, 224, 3, -56], np.float32)
    q = mxrt.quantize_mx(x, "e4m3")
    assert q.scales[0] == 0
    np.testing.assert_array_equal(decode(q.data[:4], "e4m3"), [448, 224, 3, -56])
    np.testing.assert_array_equal(mxrt.dequantize_mx(q)[:4], x[:4])


@pytest.mark.parametrize("fmt", FMTS)
def test_nonfinite_blocks_become_nan_and_zero_blocks_scale_zero(fmt: str) -> None:
    x = wide_range((4, 96), seed=9)
    x[0, 3] = np.nan
    x[1, 40] = np.inf
    x[2, 95] = -np.inf
    x[3, 32:64] = 0.0
    q = mxrt.quantize_mx(x, fmt)
    assert q.scales[0, 0] == 0xFF and q.scales[1, 1] == 0xFF and q.scales[2, 2] == 0xFF
    assert q.scales[3, 1] == 0
    d = mxrt.dequantize_mx(q)
    assert np.isnan(d[0, :32]).all() and np.isnan(d[1, 32:64]).all() and np.isnan(d[2, 64:]).all()
    assert np.isfinite(d[0, 32:]).all() and (d[3, 32:64] == 0).all()


@pytest.mark.parametrize("shape", [(0,), (0, 32), (4, 0), (2, 0, 3)])
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_empty_arrays(shape: tuple[int, ...], fmt: str) -> None:
    x = np.zeros(shape, np.float32)
    q = mxrt.quantize_mx(x, fmt, axis=-1)
    n = shape[-1]
    assert q.scales.shape == (*shape[:-1], -(-n // 32))
    assert mxrt.dequantize_mx(q).shape == shape
    if len(shape) == 2:
        d = mxrt.quantize_mx_dual(x, fmt)
        assert d.row.shape == shape and d.col.shape == shape[::-1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_dequantize_dtypes(dtype: type) -> None:
    x = wide_range((4, 64), seed=2)
    q = mxrt.quantize_mx(x, "e4m3")
    ref = mxrt.dequantize_mx(q, np.float64)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(mxrt.dequantize_mx(q, dtype), ref.astype(dtype))
    assert q.dequantize(dtype).dtype == np.dtype(dtype)


# --- properties -------------------------------------------------------------------------------------------

finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40), elements=finite_f32),
    fmt=st.sampled_from(FMTS),
    mode=st.sampled_from(MODES),
    block_size=st.sampled_from([1, 4, 32]),
)
def test_property_error_bound(x: np.ndarray, fmt: str, mode: str, block_size: int) -> None:
    """|dequantize(quantize(x)) - x| is at most half an element ulp at the block's scale (or the saturation gap)."""
    q = mxrt.quantize_mx(x, fmt, scale_mode=mode, block_size=block_size)
    n = x.shape[-1]
    s = np.repeat(q.scales, block_size, axis=-1)[..., :n]
    err = np.abs(mxrt.dequantize_mx(q, np.float64) - x.astype(np.float64))
    bound = rounding_bound(x, s, FORMATS[fmt])
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=70), elements=finite_f32),
    fmt=st.sampled_from(FMTS),
    mode=st.sampled_from(MODES),
)
def test_property_idempotent_on_representable_data(x: np.ndarray, fmt: str, mode: str) -> None:
    """Quantizing already-quantized values reproduces them exactly."""
    with np.errstate(over="ignore"):
        y = mxrt.dequantize_mx(mxrt.quantize_mx(x, fmt, scale_mode=mode))
    if not np.isfinite(y).all():  # values that do not fit float32 (FLOOR near fp32 max)
        return
    z = mxrt.dequantize_mx(mxrt.quantize_mx(y, fmt, scale_mode=mode))
    np.testing.assert_array_equal(z, y)


@settings(max_examples=30, deadline=None)
@given(
    x=hnp.arrays(np.float32, st.tuples(st.integers(1, 9), st.integers(1, 70)), elements=finite_f32),
    fmt=st.sampled_from(FMTS),
    mode=st.sampled_from(MODES),
)
def test_property_matches_oracle(x: np.ndarray, fmt: str, mode: str) -> None:
    check_against_oracle(x, fmt, mode)


# --- dual and 2-D blocks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("shape", [(1, 1), (33, 70), (64, 96)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_dual_equals_two_single_quantizations(fmt: str, shape: tuple[int, int]) -> None:
    x = wide_range(shape, seed=11)
    d = mxrt.quantize_mx_dual(x, fmt, scale_mode="even")
    r = mxrt.quantize_mx(x, fmt, scale_mode="even")
    c = mxrt.quantize_mx(np.ascontiguousarray(x.T), fmt, scale_mode="even")
    for got, want in ((d.row, r), (d.col, c)):
        assert_bitwise(got.data, want.data, "data")
        assert_bitwise(got.scales, want.scales, "scales")
        assert got.shape == want.shape and got.axis == 1
    assert d.col.shape == shape[::-1]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1"])
@pytest.mark.parametrize("shape", [(32, 32), (70, 45), (5, 100)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_dual_2d_blocks_vs_tile_formula(fmt: str, shape: tuple[int, int]) -> None:
    f = FORMATS[fmt]
    m, k = shape
    x = wide_range(shape, seed=12)
    d = mxrt.quantize_mx_dual(x, fmt, block_2d=True)
    for i in range(m):
        for j in range(k):
            blk = x[32 * (i // 32) : 32 * (i // 32) + 32, 32 * (j // 32) : 32 * (j // 32) + 32]
            s = int(scale_bytes(np.array([np.abs(blk).max()], np.float32), f, "rceil")[0])
            assert d.row.scales[i, j // 32] == s and d.col.scales[j, i // 32] == s
    y = x.astype(np.float64) / np.exp2(np.repeat(d.row.scales.astype(np.float64) - 127, 32, axis=1)[:, :k])
    codes = np.clip(y, -f.max_value, f.max_value).astype(f.ml_dtype).view(np.uint8)
    assert_bitwise(d.row.codes, codes, "row codes")
    assert_bitwise(d.col.codes, codes.T, "col codes")
    if fmt == "e2m1":
        assert_bitwise(unpack_fp4(d.col.data, m), codes.T, "col packed along m")


def test_mxarray_repr_and_codes() -> None:
    q = mxrt.quantize_mx(wide_range((2, 64), seed=0), "e2m1")
    assert "e2m1" in repr(q) and "(2, 32)" in repr(q)
    assert q.packed and q.codes.shape == (2, 64)
