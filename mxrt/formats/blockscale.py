"""DeepGEMM-compatible FP8 blockscale casts (1 x gran_k activations, gran_k x gran_k weights).

Semantics follow DeepGEMM ``deep_gemm/utils/math.py`` (MX_REFERENCE.md 2.5), computed in fp32 like the torch
original: ``amax`` clamped to >= 1e-4, ``sf = amax / 448``, ``sf = ceil_to_ue8m0(sf)`` when ``use_ue8m0``,
codes ``e4m3(x * (1 / sf))``. Codes come back as uint8 (``.view(ml_dtypes.float8_e4m3fn)`` for typed values).
"""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, ShapeError
from .codecs import E4M3, ceil_to_ue8m0, check_float_array, encode, to_float32

_AMAX_FLOOR = np.float32(1e-4)
_E4M3_MAX = np.float32(E4M3.max_value)


def _check(x: object, use_ue8m0: object, gran_k: object, op: str) -> tuple[np.ndarray, int]:
    x = check_float_array(x, op)
    if x.ndim != 2:
        raise ShapeError(f"{op}: argument 'x' has shape {x.shape}, expected a 2-D [m, n] array")
    if not isinstance(use_ue8m0, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'use_ue8m0' is {use_ue8m0!r}, expected a bool")
    if isinstance(gran_k, bool) or not isinstance(gran_k, (int, np.integer)) or int(gran_k) < 1:
        raise ShapeError(f"{op}: argument 'gran_k' is {gran_k!r}, expected a positive int (DeepGEMM: 32 or 128)")
    return to_float32(x), int(gran_k)


def _cast(xv: np.ndarray, amax: np.ndarray, use_ue8m0: bool) -> tuple[np.ndarray, np.ndarray]:
    sf = np.maximum(amax, _AMAX_FLOOR) / _E4M3_MAX  # torch clamp keeps NaN, like np.maximum
    if use_ue8m0:
        sf = ceil_to_ue8m0(sf)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = xv * (np.float32(1.0) / sf)
    return y, sf.astype(np.float32)


def per_token_cast_to_fp8(x: np.ndarray, use_ue8m0: bool, gran_k: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """DeepGEMM ``per_token_cast_to_fp8``: one fp32 scale per ``1 x gran_k`` block of ``x [m, n]``.

    Returns ``(q uint8 [m, n] e4m3 codes, sf float32 [m, ceil(n / gran_k)])``; ``x ~= decode(q) * sf``.
    The tail block is zero-padded. With ``use_ue8m0`` every ``sf`` is a power of two (exponent 1..254).
    """
    op = "per_token_cast_to_fp8"
    x32, g = _check(x, use_ue8m0, gran_k, op)
    m, n = x32.shape
    nb = -(-n // g)
    padded = np.zeros((m, nb * g), np.float32)
    padded[:, :n] = x32
    xv = padded.reshape(m, nb, g)
    amax = np.abs(xv).max(axis=-1, keepdims=True) if xv.size else np.zeros((m, nb, 1), np.float32)
    y, sf = _cast(xv, amax, bool(use_ue8m0))
    q = encode(y.reshape(m, nb * g)[:, :n], "e4m3")
    return np.ascontiguousarray(q), np.ascontiguousarray(sf.reshape(m, nb))


def per_block_cast_to_fp8(x: np.ndarray, use_ue8m0: bool, gran_k: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """DeepGEMM ``per_block_cast_to_fp8``: one fp32 scale per ``gran_k x gran_k`` block of ``x [m, n]``.

    Returns ``(q uint8 [m, n] e4m3 codes, sf float32 [ceil(m / gran_k), ceil(n / gran_k)])``.
    """
    op = "per_block_cast_to_fp8"
    x32, g = _check(x, use_ue8m0, gran_k, op)
    m, n = x32.shape
    mb, nb = -(-m // g), -(-n // g)
    padded = np.zeros((mb * g, nb * g), np.float32)
    padded[:m, :n] = x32
    xv = padded.reshape(mb, g, nb, g)
    if xv.size:
        amax = np.abs(xv).max(axis=(1, 3), keepdims=True)
    else:
        amax = np.zeros((mb, 1, nb, 1), np.float32)
    y, sf = _cast(xv, amax, bool(use_ue8m0))
    q = encode(y.reshape(mb * g, nb * g)[:m, :n], "e4m3")
    return np.ascontiguousarray(q), np.ascontiguousarray(sf.reshape(mb, nb))
