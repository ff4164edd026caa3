"""Shared-scale rules: one E8M0 scale from the fp32 amax of a block (MX_REFERENCE.md section 2)."""

from __future__ import annotations

import enum

import numpy as np

from ..errors import DtypeError, UnknownNameError
from .codecs import E8M0_BIAS, E8M0_NAN, ElemFormat


class ScaleMode(str, enum.Enum):
    """How the E8M0 scale exponent ``e`` of a block is derived from its fp32 ``amax``.

    With ``P = emax`` of the element format (e4m3 8, e5m2 15, e2m3 2, e3m2 4, e2m1 2), ``mb`` its mantissa
    bits, ``max`` its largest finite value, and ``exp``/``man`` the fp32 exponent and mantissa fields:

    - ``FLOOR`` (OCP MX v1.0): ``e = exp(amax) - 127 - P``. Can overflow the element range: saturates.
    - ``CEIL``: ``e = exp(amax) - 127 + (man(amax) != 0) - P``.
    - ``EVEN`` (torchao EVEN, Primus-Turbo's quantizers): round amax half-up to ``mb`` mantissa bits,
      ``a' = (bits(amax) + (1 << (22 - mb))) & 0xFF800000``, then ``e = exp(a') - 127 - P``.
    - ``RCEIL`` (NVIDIA/TE, aiter, DeepGEMM ue8m0): the smallest ``e`` with ``max * 2^e >= amax``. Never
      needs saturation.

    Every mode then clamps ``e`` to [-127, 127] and stores ``b = e + 127``. ``amax == 0`` gives ``b = 0``;
    ``amax`` NaN or +-Inf gives ``b = 0xFF``.
    """

    FLOOR = "floor"
    CEIL = "ceil"
    EVEN = "even"
    RCEIL = "rceil"


def get_scale_mode(mode: str | ScaleMode, op: str = "get_scale_mode") -> ScaleMode:
    if isinstance(mode, ScaleMode):
        return mode
    if not isinstance(mode, str):
        raise DtypeError(f"{op}: argument 'scale_mode' is {mode!r}, expected one of {[m.value for m in ScaleMode]}")
    try:
        return ScaleMode(mode.lower())
    except ValueError:
        raise UnknownNameError(
            f"{op}: argument 'scale_mode' is {mode!r}, an unknown scale mode; expected one of "
            f"{[m.value for m in ScaleMode]}"
        ) from None


def scale_exponent(amax: np.ndarray, f: ElemFormat, mode: ScaleMode) -> np.ndarray:
    """Unbiased scale exponent (int64, before clamping) for finite, positive fp32 ``amax``."""
    bits = np.asarray(amax, dtype=np.float32).view(np.uint32).astype(np.int64)
    exp_field = (bits >> 23) & 0xFF
    if mode is ScaleMode.FLOOR:
        return exp_field - 127 - f.emax
    if mode is ScaleMode.CEIL:
        return exp_field - 127 + ((bits & 0x7FFFFF) != 0) - f.emax
    if mode is ScaleMode.EVEN:
        rounded = (bits + (1 << (22 - f.mbits))) & 0xFF800000
        return ((rounded >> 23) & 0xFF) - 127 - f.emax
    # RCEIL: amax / max is exact enough in float64 (amax has 24 significant bits, max at most 4), so the
    # quotient is a power of two exactly when amax is max times one.
    q = np.asarray(amax, dtype=np.float64) / f.max_value
    m, ex = np.frexp(q)
    return ex.astype(np.int64) - (m == 0.5)


def compute_scales(amax: np.ndarray, f: ElemFormat, mode: ScaleMode) -> np.ndarray:
    """E8M0 bytes (uint8) for an array of fp32 block amax values (>= 0, or NaN/Inf)."""
    amax = np.asarray(amax, dtype=np.float32)
    finite = np.isfinite(amax)
    safe = np.where(finite & (amax > 0), amax, np.float32(1.0))
    e = np.clip(scale_exponent(safe, f, mode), -127, 127)
    b = e + E8M0_BIAS
    b = np.where(amax == 0, 0, b)
    b = np.where(finite, b, E8M0_NAN)
    return b.astype(np.uint8)
