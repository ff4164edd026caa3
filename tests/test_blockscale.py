"""DeepGEMM-compatible blockscale casts against a line-by-line float32 transcription of DeepGEMM's torch code."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats import decode


def deepgemm_ceil_to_ue8m0(x: np.ndarray) -> np.ndarray:
    bits = np.abs(x).astype(np.float32).view(np.int32).astype(np.int64)
    exp = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0)
    return (np.clip(exp, 1, 254) << 23).astype(np.int32).view(np.float32)


def ref_per_token(x: np.ndarray, use_ue8m0: bool, gran_k: int) -> tuple[np.ndarray, np.ndarray]:
    m, n = x.shape
    pad = np.zeros((m, -(-n // gran_k) * gran_k), np.float32)
    pad[:, :n] = x
    v = pad.reshape(m, -1, gran_k)
    amax = np.clip(np.abs(v).max(axis=2), np.float32(1e-4), None)
    sf = (amax / np.float32(448.0)).astype(np.float32)
    if use_ue8m0:
        sf = deepgemm_ceil_to_ue8m0(sf)
    y = (v * (np.float32(1.0) / sf[..., None])).astype(np.float32)
    return y.reshape(m, -1)[:, :n].astype(ml_dtypes.float8_e4m3fn).view(np.uint8), sf


def ref_per_block(x: np.ndarray, use_ue8m0: bool, g: int) -> tuple[np.ndarray, np.ndarray]:
    m, n = x.shape
    pad = np.zeros((-(-m // g) * g, -(-n // g) * g), np.float32)
    pad[:m, :n] = x
    v = pad.reshape(-1, g, pad.shape[1] // g, g)
    amax = np.clip(np.abs(v).max(axis=(1, 3), keepdims=True), np.float32(1e-4), None)
    sf = (amax / np.float32(448.0)).astype(np.float32)
    if use_ue8m0:
        sf = deepgemm_ceil_to_ue8m0(sf)
    y = (v * (np.float32(1.0) / sf)).astype(np.float32).reshape(pad.shape)
    return y[:m, :n].astype(ml_dtypes.float8_e4m3fn).view(np.uint8), sf.reshape(v.shape[0], v.shape[2])


def data(m: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n)) * np.exp2(rng.integers(-30, 30, (m, 1)))
    x = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # DeepGEMM's inputs are bf16
    x[0, : min(n, 128)] = 0.0  # an all-zero block: amax clamps to 1e-4
    return x


@pytest.mark.parametrize("use_ue8m0", [False, True])
@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("shape", [(1, 1), (3, 129), (64, 512), (17, 300)], ids=str)
def test_per_token(use_ue8m0: bool, gran_k: int, shape: tuple[int, int]) -> None:
    x = data(*shape, seed=shape[1])
    q, sf = mxrt.per_token_cast_to_fp8(x, use_ue8m0=use_ue8m0, gran_k=gran_k)
    rq, rsf = ref_per_token(x, use_ue8m0, gran_k)
    np.testing.assert_array_equal(q, rq)
    np.testing.assert_array_equal(sf, rsf)
    assert sf.shape == (shape[0], -(-shape[1] // gran_k)) and sf.dtype == np.float32


@pytest.mark.parametrize("use_ue8m0", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (130, 129), (256, 384)], ids=str)
def test_per_block(use_ue8m0: bool, shape: tuple[int, int]) -> None:
    x = data(*shape, seed=7)
    q, sf = mxrt.per_block_cast_to_fp8(x, use_ue8m0=use_ue8m0)
    rq, rsf = ref_per_block(x, use_ue8m0, 128)
    np.testing.assert_array_equal(q, rq)
    np.testing.assert_array_equal(sf, rsf)
    deq = decode(q, "e4m3").astype(np.float64) * np.repeat(np.repeat(sf, 128, 0), 128, 1)[: shape[0], : shape[1]]
    assert mxrt.calc_diff(deq, x) < 2e-3


def test_zero_block_scale_is_two_to_minus_22_with_ue8m0() -> None:
    _, sf = mxrt.per_token_cast_to_fp8(np.zeros((1, 128), np.float32), use_ue8m0=True)
    assert sf[0, 0] == np.float32(2.0**-22)


def test_ue8m0_scales_are_powers_of_two() -> None:
    _, sf = mxrt.per_token_cast_to_fp8(data(8, 1024, 3), use_ue8m0=True)
    mant, _ = np.frexp(sf)
    assert (mant == 0.5).all()


def test_errors() -> None:
    with pytest.raises(mxrt.ShapeError, match="per_token_cast_to_fp8: argument 'x' has shape"):
        mxrt.per_token_cast_to_fp8(np.zeros(4, np.float32), use_ue8m0=False)
    with pytest.raises(mxrt.ShapeError, match="gran_k"):
        mxrt.per_block_cast_to_fp8(np.zeros((4, 4), np.float32), use_ue8m0=False, gran_k=0)
    with pytest.raises(mxrt.DtypeError, match="use_ue8m0"):
        mxrt.per_block_cast_to_fp8(np.zeros((4, 4), np.float32), use_ue8m0="yes")
    with pytest.raises(mxrt.DtypeError, match="dtype int32"):
        mxrt.per_token_cast_to_fp8(np.zeros((4, 4), np.int32), use_ue8m0=False)
