"""Independent oracles for the numpy quantizers, written differently on purpose.

The implementation derives scales from fp32 bit fields and encodes on a value grid; these oracles use
``log2``/``frexp`` arithmetic, torchao's multiply-by-reciprocal RCEIL, and ml_dtypes casts (after clipping),
so an error in one is not repeated in the other. Used by ``mxrt check`` and by the tests.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..formats.codecs import ElemFormat


def scale_bytes(amax: np.ndarray, f: ElemFormat, mode: str) -> np.ndarray:
    """E8M0 bytes for fp32 ``amax`` by the textbook formulas (MX_REFERENCE.md 2.1-2.2)."""
    amax = np.where(np.isnan(amax), np.float32(np.nan), np.asarray(amax, np.float32))  # quiet any sNaN
    a = amax.astype(np.float64)
    out = np.zeros(a.shape, np.int64)
    finite = np.isfinite(a)
    pos = finite & (a > 0)
    ap = np.where(pos, a, 1.0)
    tiny = ap < 2.0**-126  # fp32 subnormal amax: the fp32 exponent field reads -127
    if mode == "floor":
        e = np.where(tiny, -127, np.floor(np.log2(ap))) - f.emax
    elif mode == "ceil":
        e = np.where(tiny, -127 + (ap > 0), np.ceil(np.log2(ap))) - f.emax
    elif mode == "even":
        mant, ex = np.frexp(ap)  # ap = mant * 2^ex, mant in [0.5, 1)
        # round the significand half-up to mb fraction bits; a carry to 1.0 bumps the exponent
        r = np.floor(mant * 2.0 ** (f.mbits + 1) + 0.5) / 2.0 ** (f.mbits + 1)
        e = np.where(tiny, -127, ex - 1 + (r >= 1.0)) - f.emax
    elif mode == "rceil":
        # torchao _to_mx_rceil: d = amax * fp32(1/max), then ceil to a power of two from the fp32 bits
        d = (np.asarray(amax, np.float32) * np.float32(1.0 / f.max_value)).astype(np.float32)
        bits = np.where(pos, d, np.float32(1)).view(np.uint32).astype(np.int64)
        ex, man = (bits >> 23) & 0xFF, bits & 0x7FFFFF
        biased = np.where(ex == 0, (man > 0x400000).astype(np.int64), ex + (man != 0))
        e = biased - 127
    else:
        raise ValueError(mode)
    b = np.clip(e, -127, 127) + 127
    out = np.where(pos, b, 0)
    out = np.where(finite, out, 255)
    return out.astype(np.uint8)


def element_codes(y: np.ndarray, f: ElemFormat) -> np.ndarray:
    """Saturating RNE codes of already-scaled float64 values, through ml_dtypes (which does not saturate)."""
    return np.clip(y, -f.max_value, f.max_value).astype(f.ml_dtype).view(np.uint8)


def quantize_rows(x32: np.ndarray, f: ElemFormat, mode: str, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes unpacked, scales) for blocks along the last axis of a float32 array; one Python loop per block."""
    *lead, n = x32.shape
    nb = -(-n // block_size)
    flat = x32.reshape(-1, n)
    codes = np.zeros(flat.shape, np.uint8)
    scales = np.zeros((flat.shape[0], nb), np.uint8)
    for j in range(nb):
        blk = flat[:, j * block_size : (j + 1) * block_size]
        amax = np.max(np.abs(blk), axis=1) if blk.size else np.zeros(flat.shape[0], np.float32)
        s = scale_bytes(amax, f, mode)
        scales[:, j] = s
        for i in range(flat.shape[0]):
            if s[i] == 255:
                codes[i, j * block_size : j * block_size + blk.shape[1]] = f.nan_code or 0
            else:
                y = blk[i].astype(np.float64) / 2.0 ** (int(s[i]) - 127)
                codes[i, j * block_size : j * block_size + blk.shape[1]] = element_codes(y, f)
    return codes.reshape(*lead, n), scales.reshape(*lead, nb)


def rounding_bound(x32: np.ndarray, scales_per_elem: np.ndarray, f: ElemFormat) -> np.ndarray:
    """Largest allowed |dequantize(quantize(x)) - x| per element: half an element ulp at |x / 2^e|, or the
    saturation gap when |x / 2^e| exceeds max (FLOOR/EVEN)."""
    e = scales_per_elem.astype(np.float64) - 127
    y = np.abs(x32.astype(np.float64)) / 2.0**e
    ey = np.floor(np.log2(np.where(y > 0, y, 1.0)))
    ulp = 2.0 ** (np.maximum(ey, 1 - f.bias) - f.mbits)
    bound = np.where(y > f.max_value, y - f.max_value, 0.5 * ulp)
    return bound * 2.0**e


def bf16_all() -> np.ndarray:
    """Every bfloat16 bit pattern."""
    return np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
