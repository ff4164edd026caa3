"""Accuracy metrics shared by tests, checks and benchmarks (MX_REFERENCE.md section 5), in float64.

Both arguments are real arrays (integer, float, bfloat16 or float8 dtypes) of the **same shape**: a metric never
broadcasts (``(3,)`` against ``(3, 1)`` would compare 9 pairs) and never drops an imaginary part. Reductions run
in C order, so a Fortran-ordered or strided input gives the bits of its contiguous copy. Inf/NaN inputs give the
IEEE result (NaN or +-inf) without a warning.
"""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, ShapeError
from ..formats.codecs import as_array


def _f64(a: object, op: str, arg: str) -> np.ndarray:
    x = as_array(a, op, arg)
    ml = x.dtype.type.__module__ == "ml_dtypes"  # bfloat16, float8_*: real floats numpy files under kind "V"
    if x.dtype.kind not in "iuf" and not ml:
        raise DtypeError(
            f"{op}: argument '{arg}' has dtype {x.dtype}, expected a real (integer or float) dtype"
            + (": complex inputs would lose their imaginary part" if x.dtype.kind == "c" else "")
        )
    with np.errstate(invalid="ignore"):  # ml_dtypes warns when it widens a NaN payload
        return x.astype(np.float64, order="C")


def _pair(x: object, y: object, op: str, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a, b = _f64(x, op, names[0]), _f64(y, op, names[1])
    if a.shape != b.shape:
        raise ShapeError(
            f"{op}: arguments '{names[0]}' {a.shape} and '{names[1]}' {b.shape} differ in shape, expected equal "
            "shapes (metrics do not broadcast)"
        )
    return a.ravel(), b.ravel()


def calc_diff(x: object, y: object) -> float:
    """DeepGEMM ``calc_diff``: ``1 - 2 sum(xy) / sum(x^2 + y^2)`` = ``sum((x-y)^2) / sum(x^2 + y^2)``.

    0.0 when both are all zero. Thresholds in DeepGEMM: fp8 x fp8 1e-3, one fp4 operand 1e-2, fp4 x fp4 2e-2.
    """
    x, y = _pair(x, y, "calc_diff", ("x", "y"))
    with np.errstate(all="ignore"):
        denom = float(np.sum(x * x + y * y))
        if denom == 0.0:
            return 0.0
        return float(np.sum((x - y) ** 2) / denom)


def snr_db(ref: object, y: object) -> float:
    """Primus-Turbo ``compute_snr``: ``10 log10(|ref|^2 / (|ref - y|^2 + 1e-12))`` in dB."""
    ref, y = _pair(ref, y, "snr_db", ("ref", "y"))
    with np.errstate(all="ignore"):
        return float(10.0 * np.log10(np.sum(ref * ref) / (np.sum((ref - y) ** 2) + 1e-12)))


def relative_error(ref: object, y: object) -> float:
    """Relative Frobenius error ``|y - ref| / |ref|`` (0.0 when both are zero)."""
    ref, y = _pair(ref, y, "relative_error", ("ref", "y"))
    with np.errstate(all="ignore"):
        den = float(np.linalg.norm(ref))
        num = float(np.linalg.norm(y - ref))
        return num / den if den else num


def max_abs_diff(x: object, y: object) -> float:
    """``max |x - y|`` (0.0 for empty inputs)."""
    x, y = _pair(x, y, "max_abs_diff", ("x", "y"))
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(x - y))) if x.size else 0.0
