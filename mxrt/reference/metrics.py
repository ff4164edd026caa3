"""Accuracy metrics shared by tests, checks and benchmarks (MX_REFERENCE.md section 5), in float64."""

from __future__ import annotations

import numpy as np


def _f64(a: object) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def calc_diff(x: object, y: object) -> float:
    """DeepGEMM ``calc_diff``: ``1 - 2 sum(xy) / sum(x^2 + y^2)`` = ``sum((x-y)^2) / sum(x^2 + y^2)``.

    0.0 when both are all zero. Thresholds in DeepGEMM: fp8 x fp8 1e-3, one fp4 operand 1e-2, fp4 x fp4 2e-2.
    """
    x, y = _f64(x), _f64(y)
    denom = float(np.sum(x * x + y * y))
    if denom == 0.0:
        return 0.0
    return float(np.sum((x - y) ** 2) / denom)


def snr_db(ref: object, y: object) -> float:
    """Primus-Turbo ``compute_snr``: ``10 log10(|ref|^2 / (|ref - y|^2 + 1e-12))`` in dB."""
    ref, y = _f64(ref), _f64(y)
    return float(10.0 * np.log10(np.sum(ref * ref) / (np.sum((ref - y) ** 2) + 1e-12)))


def relative_error(ref: object, y: object) -> float:
    """Relative Frobenius error ``|y - ref| / |ref|`` (0.0 when both are zero)."""
    ref, y = _f64(ref), _f64(y)
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(y - ref))
    return num / den if den else num


def max_abs_diff(x: object, y: object) -> float:
    x, y = _f64(x), _f64(y)
    return float(np.max(np.abs(x - y))) if x.size else 0.0
