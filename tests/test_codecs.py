"""Element codecs and E8M0: exhaustive against ml_dtypes (an independent implementation)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats import FORMATS, decode, decode_table, e8m0_decode, encode, pack_fp4, unpack_fp4
from mxrt.formats.codecs import to_float32

FMTS = list(FORMATS)


def ml_encode(x: np.ndarray, fmt: str) -> np.ndarray:
    f = FORMATS[fmt]
    with np.errstate(invalid="ignore"):
        return np.clip(x, -f.max_value, f.max_value).astype(f.ml_dtype).view(np.uint8)


@pytest.mark.parametrize("fmt", FMTS)
def test_decode_every_code_matches_ml_dtypes(fmt: str) -> None:
    f = FORMATS[fmt]
    codes = np.arange(f.num_codes, dtype=np.uint8)
    np.testing.assert_array_equal(decode(codes, fmt), codes.view(f.ml_dtype).astype(np.float32))


@pytest.mark.parametrize("fmt", FMTS)
def test_encode_every_bf16_matches_ml_dtypes_after_clip(fmt: str) -> None:
    xs = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(encode(xs, fmt), ml_encode(to_float32(xs), fmt))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_encode_random_matches_ml_dtypes(fmt: str, dtype: type) -> None:
    rng = np.random.default_rng(7)
    f = FORMATS[fmt]
    # values clustered around the format's grid, including exact midpoints (ties) and subnormals
    grid = decode_table(fmt)[np.isfinite(decode_table(fmt))].astype(np.float64)
    mids = (np.sort(grid)[1:] + np.sort(grid)[:-1]) / 2
    rnd = rng.standard_normal(50_000) * np.exp2(rng.integers(-12, 18, 50_000))
    with np.errstate(over="ignore"):  # 1e30 -> inf in float16 on purpose
        x = np.concatenate([grid, mids, rnd, [f.max_value * 1.01, -f.max_value * 3, 1e30, -1e30]]).astype(dtype)
    np.testing.assert_array_equal(encode(x, fmt), ml_encode(x, fmt))


@pytest.mark.parametrize("fmt", FMTS)
def test_decode_encode_roundtrip_every_finite_code(fmt: str) -> None:
    f = FORMATS[fmt]
    codes = np.arange(f.num_codes, dtype=np.uint8)
    vals = decode(codes, fmt)
    finite = np.isfinite(vals)
    np.testing.assert_array_equal(encode(vals[finite], fmt), codes[finite])


def test_format_constants() -> None:
    for fmt, (mx, emax) in {
        "e4m3": (448, 8),
        "e5m2": (57344, 15),
        "e2m3": (7.5, 2),
        "e3m2": (28, 4),
        "e2m1": (6, 2),
    }.items():
        f = FORMATS[fmt]
        assert f.max_value == mx and f.emax == emax
        assert decode(np.array([f.max_code], np.uint8), fmt)[0] == mx
        assert float(ml_dtypes.finfo(f.ml_dtype).max) == mx


def test_saturation_and_specials() -> None:
    x = np.array([np.inf, -np.inf, 1e9, -465.0, 464.0, np.nan, -np.nan], np.float32)
    assert encode(x, "e4m3").tolist() == [0x7E, 0xFE, 0x7E, 0xFE, 0x7E, 0x7F, 0xFF]
    assert encode(x, "e5m2").tolist()[:4] == [0x7B, 0xFB, 0x7B, 0xDF]
    assert encode(x, "e2m1").tolist()[:4] == [0x7, 0xF, 0x7, 0xF]


def test_fp4_rounds_ties_to_even() -> None:
    # DeepGEMM's reference rounds these ties toward zero (0.5, 1.5, 3); OCP/ml_dtypes RNE gives 1, 2, 4
    got = decode(encode(np.array([0.75, 1.75, 3.5, 0.25, 2.5, 5.0], np.float32), "e2m1"), "e2m1")
    np.testing.assert_array_equal(got, [1.0, 2.0, 4.0, 0.0, 2.0, 4.0])


def test_e8m0_every_byte_matches_ml_dtypes() -> None:
    b = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(e8m0_decode(b), b.view(ml_dtypes.float8_e8m0fnu).astype(np.float32))


def test_e8m0_byte_zero_is_two_to_minus_127_not_zero() -> None:
    v = e8m0_decode(np.array([0, 1, 127, 254, 255], np.uint8))
    assert v[0] == np.float32(2.0**-127) and v[0] > 0 and v[0].view(np.uint32) == 0x00400000
    assert v[1] == np.float32(2.0**-126) and v[2] == 1.0 and v[3] == np.float32(2.0**127)
    assert np.isnan(v[4])


@pytest.mark.parametrize("n", [1, 2, 7, 32, 33])
def test_fp4_pack_low_nibble_is_even_element(n: int) -> None:
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 16, (3, n)).astype(np.uint8)
    packed = pack_fp4(codes)
    assert packed.shape == (3, -(-n // 2))
    for i in range(n):
        nib = (packed[:, i // 2] >> (4 * (i % 2))) & 0xF
        np.testing.assert_array_equal(nib, codes[:, i])
    if n % 2:
        assert not (packed[:, -1] >> 4).any()
    np.testing.assert_array_equal(unpack_fp4(packed, n), codes)
    np.testing.assert_array_equal(unpack_fp4(pack_fp4(codes.T, axis=0), n, axis=0), codes.T)


def test_decode_rejects_bad_codes() -> None:
    with pytest.raises(mxrt.ShapeError, match=r"decode: argument 'codes' holds code 0x10"):
        decode(np.array([16], np.uint8), "e2m1")
    with pytest.raises(mxrt.DtypeError, match="expected uint8"):
        decode(np.array([1], np.int32), "e4m3")
