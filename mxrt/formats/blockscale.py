"""DeepGEMM-compatible FP8 blockscale casts (1 x gran_k activations, gran_k x gran_k weights).

Semantics follow DeepGEMM ``deep_gemm/utils/math.py`` (MX_REFERENCE.md 2.5), computed in fp32 like the torch
original: ``amax`` clamped to >= 1e-4, ``sf = amax / 448``, ``sf = ceil_to_ue8m0(sf)`` when ``use_ue8m0``,
codes ``e4m3(x * (1 / sf))``. Codes come back as uint8 (``.view(ml_dtypes.float8_e4m3fn)`` for typed values).
"""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, ShapeError, check_int
from .codecs import E4M3, ceil_to_ue8m0, check_float_array, encode, to_float32_checked
from .mx import block_amax

_AMAX_FLOOR = np.float32(1e-4)
_E4M3_MAX = np.float32(E4M3.max_value)


def _check(x: object, use_ue8m0: object, gran_k: object, op: str) -> tuple[np.ndarray, int]:
    x = check_float_array(x, op)
    if x.ndim != 2:
        raise ShapeError(f"{op}: argument 'x' has shape {x.shape}, expected a 2-D [m, n] array")
    if not isinstance(use_ue8m0, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'use_ue8m0' is {use_ue8m0!r}, expected a bool")
    g = check_int(gran_k, op, "gran_k", minimum=1)  # DeepGEMM: 32 or 128; at most 2^31-1 (the size limit)
    return to_float32_checked(x, op), g


def _cast(
    x32: np.ndarray, amax: np.ndarray, use_ue8m0: bool, col_block: np.ndarray, row_block: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(x * (1 / sf), sf)`` with ``sf`` per block of ``amax``; ``col_block``/``row_block`` map each column/row of
    ``x`` to its block (``row_block`` None: one block row per row of ``x``)."""
    sf = np.maximum(amax, _AMAX_FLOOR) / _E4M3_MAX  # torch clamp keeps NaN, like np.maximum
    if use_ue8m0:
        sf = ceil_to_ue8m0(sf)
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = np.float32(1.0) / sf
    inv = inv[:, col_block] if row_block is None else inv[row_block][:, col_block]
    with np.errstate(invalid="ignore", over="ignore"):
        y = x32 * inv
    return y, sf.astype(np.float32)


def per_token_cast_to_fp8(x: np.ndarray, use_ue8m0: bool, gran_k: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """DeepGEMM ``per_token_cast_to_fp8``: one fp32 scale per ``1 x gran_k`` block of ``x [m, n]``.

    Returns ``(q uint8 [m, n] e4m3 codes, sf float32 [m, ceil(n / gran_k)])``; ``x ~= decode(q) * sf``.
    The tail block is zero-padded. With ``use_ue8m0`` every ``sf`` is a power of two (exponent 1..254).
    """
    op = "per_token_cast_to_fp8"
    x32, g = _check(x, use_ue8m0, gran_k, op)
    n = x32.shape[1]
    amax = block_amax(x32, g)  # [m, ceil(n / g)], the tail block as if zero-padded
    y, sf = _cast(x32, amax, bool(use_ue8m0), np.arange(n) // g, None)
    return np.ascontiguousarray(encode(y, "e4m3")), np.ascontiguousarray(sf)


def per_block_cast_to_fp8(x: np.ndarray, use_ue8m0: bool, gran_k: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """DeepGEMM ``per_block_cast_to_fp8``: one fp32 scale per ``gran_k x gran_k`` block of ``x [m, n]``.

    Returns ``(q uint8 [m, n] e4m3 codes, sf float32 [ceil(m / gran_k), ceil(n / gran_k)])``.
    """
    op = "per_block_cast_to_fp8"
    x32, g = _check(x, use_ue8m0, gran_k, op)
    m, n = x32.shape
    amax = block_amax(block_amax(x32, g).T, g).T  # [ceil(m / g), ceil(n / g)]: max over each tile's rows
    y, sf = _cast(x32, amax, bool(use_ue8m0), np.arange(n) // g, np.arange(m) // g)
    return np.ascontiguousarray(encode(y, "e4m3")), np.ascontiguousarray(sf)
