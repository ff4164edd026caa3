"""Scale rules: worked tables and every bf16 amax against independent formulas."""

from __future__ import annotations

import numpy as np
import pytest

from mxrt.checks.formats import SCALE_TABLE
from mxrt.checks.independent import bf16_all, scale_bytes
from mxrt.formats import FORMATS, ScaleMode, ceil_to_ue8m0, compute_scales
from mxrt.formats.codecs import to_float32

MODES = [m.value for m in ScaleMode]


@pytest.mark.parametrize("col,mode", list(enumerate(["floor", "ceil", "even", "rceil"])))
def test_worked_table_e4m3(col: int, mode: str) -> None:
    amax = np.array(list(SCALE_TABLE), np.float32)
    expected = [row[col] for row in SCALE_TABLE.values()]
    assert compute_scales(amax, FORMATS["e4m3"], ScaleMode(mode)).tolist() == expected


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("mode", MODES)
def test_every_bf16_amax_and_random_fp32(fmt: str, mode: str) -> None:
    f = FORMATS[fmt]
    rng = np.random.default_rng(3)
    rnd = np.abs(rng.standard_normal(100_000).astype(np.float32) * np.exp2(rng.integers(-149, 127, 100_000)))
    near = (f.max_value * np.exp2(np.arange(-120, 100))).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(np.inf))])
    for amax in (np.abs(to_float32(bf16_all())), rnd.astype(np.float32), near):
        with np.errstate(invalid="ignore", over="ignore"):
            np.testing.assert_array_equal(compute_scales(amax, f, ScaleMode(mode)), scale_bytes(amax, f, mode))


@pytest.mark.parametrize("mode", MODES)
def test_special_amax(mode: str) -> None:
    f = FORMATS["e4m3"]
    amax = np.array([0.0, np.nan, np.inf, 2.0**-149, 3.4e38], np.float32)
    s = compute_scales(amax, f, ScaleMode(mode))
    assert s[0] == 0 and s[1] == 255 and s[2] == 255
    assert s[3] == 0  # clamped to 2^-127
    assert s[4] <= 254


def test_rceil_never_needs_saturation() -> None:
    rng = np.random.default_rng(0)
    amax = np.abs(rng.standard_normal(100_000).astype(np.float32)) * np.float32(2.0**60)
    for f in FORMATS.values():
        s = compute_scales(amax, f, ScaleMode.RCEIL).astype(np.float64)
        assert np.all(amax / np.exp2(s - 127) <= f.max_value)
        # and it is the smallest such power of two
        assert np.all(amax / np.exp2(s - 128) > f.max_value)


def test_even_differs_from_floor_and_ceil_where_expected() -> None:
    f = FORMATS["e4m3"]  # EVEN rounds amax to 3 mantissa bits: 1.9375 * 2^k rounds up, 1.875 does not
    amax = np.array([1.875 * 2**8, 1.9375 * 2**8], np.float32)
    assert compute_scales(amax, f, ScaleMode.EVEN).tolist() == [127, 128]
    assert compute_scales(amax, f, ScaleMode.FLOOR).tolist() == [127, 127]


def test_ceil_to_ue8m0_matches_deepgemm_bits() -> None:
    x = np.array([1.0, 1.0000001, 3.0, 2.0**-130, 0.0, 1e-4 / 448, -3.0, 3e38], np.float32)
    bits = np.abs(x).view(np.uint32).astype(np.int64)
    e = np.clip(((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0), 1, 254)
    np.testing.assert_array_equal(ceil_to_ue8m0(x), np.exp2(e - 127.0).astype(np.float32))
    assert ceil_to_ue8m0(np.array([np.float32(1e-4) / np.float32(448)]))[0] == np.float32(2.0**-22)
