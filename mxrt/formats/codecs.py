"""Element codecs for the OCP MX element formats and the E8M0 scale, on numpy alone.

The encoder is a value-grid round-to-nearest-even written from the format parameters (MX_REFERENCE.md 1.1,
1.3); it does not call ml_dtypes, so the exhaustive tests against ml_dtypes are an independent check.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import SIZE_LIMIT, DtypeError, ShapeError, UnknownNameError, check_int, check_size_limit


@dataclass(frozen=True)
class ElemFormat:
    """One OCP MX element format: sign + ``ebits`` exponent + ``mbits`` mantissa, exponent ``bias``.

    ``max_value`` is the largest finite value, ``emax`` the exponent of the largest normal (torchao's
    ``max_pow2``), ``nan_code`` the positive NaN code or ``None`` when the format has no NaN.
    """

    name: str
    ebits: int
    mbits: int
    bias: int
    max_value: float
    max_code: int
    emax: int
    nan_code: int | None
    ml_dtype: type

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def min_normal_exp(self) -> int:
        return 1 - self.bias

    @property
    def num_codes(self) -> int:
        return 1 << self.bits


E4M3 = ElemFormat("e4m3", 4, 3, 7, 448.0, 0x7E, 8, 0x7F, ml_dtypes.float8_e4m3fn)  # max 0x7E; NaN S.1111.111
E5M2 = ElemFormat("e5m2", 5, 2, 15, 57344.0, 0x7B, 15, 0x7E, ml_dtypes.float8_e5m2)  # max 0x7B; Inf 0x7C
E2M3 = ElemFormat("e2m3", 2, 3, 1, 7.5, 0x1F, 2, None, ml_dtypes.float6_e2m3fn)  # max 0x1F
E3M2 = ElemFormat("e3m2", 3, 2, 3, 28.0, 0x1F, 4, None, ml_dtypes.float6_e3m2fn)  # max 0x1F
E2M1 = ElemFormat("e2m1", 2, 1, 1, 6.0, 0x7, 2, None, ml_dtypes.float4_e2m1fn)  # max 0x7

FORMATS: dict[str, ElemFormat] = {f.name: f for f in (E4M3, E5M2, E2M3, E3M2, E2M1)}

#: Accepted spellings, normalised to the OCP/ml_dtypes short names.
_ALIASES = {
    "float8_e4m3fn": "e4m3",
    "e4m3fn": "e4m3",
    "fp8": "e4m3",
    "mxfp8": "e4m3",
    "float8_e5m2": "e5m2",
    "float6_e2m3fn": "e2m3",
    "float6_e3m2fn": "e3m2",
    "float4_e2m1fn": "e2m1",
    "fp4": "e2m1",
    "mxfp4": "e2m1",
}

E8M0_NAN = 0xFF  # scale byte that means NaN
E8M0_BIAS = 127
E8M0_ONE = 127  # 2^0, the neutral scale


def get_format(fmt: str | ElemFormat, op: str = "get_format") -> ElemFormat:
    """Return the :class:`ElemFormat` for a name such as ``"e4m3"`` (aliases: ``"float8_e4m3fn"``, ...)."""
    if isinstance(fmt, ElemFormat):
        return fmt
    if not isinstance(fmt, str):
        raise DtypeError(f"{op}: argument 'fmt' is {fmt!r} ({type(fmt).__name__}), expected a format name")
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS:
        raise UnknownNameError(f"{op}: argument 'fmt' is {fmt!r}, an unknown format; expected one of {sorted(FORMATS)}")
    return FORMATS[name]


_FLOAT_DTYPES = (
    np.dtype(np.float16),
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(ml_dtypes.bfloat16),
)


def check_size(a: np.ndarray, op: str, arg: str) -> np.ndarray:
    """``a`` when its element count is within mxrt's size limit (:data:`mxrt.errors.SIZE_LIMIT`), checked before
    any copy (a broadcast view of 2^31 elements costs no memory until then)."""
    if a.size > SIZE_LIMIT:
        check_size_limit(a.size, op, f"argument '{arg}' has shape {a.shape}: its element count")
    return a


def as_array(x: object, op: str, arg: str) -> np.ndarray:
    """``np.asarray(x)`` with typed errors: ragged nested lists are a :class:`DtypeError`, and the element count
    must be within the size limit. Arrays (numpy or anything with ``__array__``) are not copied."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's ragged-list deprecation / overflow warnings become errors here
            a = np.asarray(x)
    except (ValueError, TypeError, OverflowError, Warning) as e:
        raise DtypeError(
            f"{op}: argument '{arg}' is a {type(x).__name__} that is not a rectangular array ({e})"
        ) from None
    return check_size(a, op, arg)


def native(a: np.ndarray) -> np.ndarray:
    """``a`` in native byte order (a copy only for big-endian data on a little-endian host)."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def check_float_array(x: object, op: str, arg: str = "x") -> np.ndarray:
    """Accept float16/32/64 and bfloat16 numpy arrays (either byte order) within the size limit; raise DtypeError
    for anything else."""
    if not isinstance(x, np.ndarray):
        raise DtypeError(
            f"{op}: argument '{arg}' is a {type(x).__name__}, expected a numpy array of float16, float32, "
            "float64 or bfloat16"
        )
    if x.dtype.newbyteorder("=") not in _FLOAT_DTYPES:
        raise DtypeError(f"{op}: argument '{arg}' has dtype {x.dtype}, expected float16, float32, float64 or bfloat16")
    return native(check_size(x, op, arg))


def to_float32(x: np.ndarray) -> np.ndarray:
    """``x.astype(float32)`` without the warning ml_dtypes raises when it widens a NaN-payload bfloat16."""
    with np.errstate(invalid="ignore"):
        return x.astype(np.float32)


def to_float32_checked(x: np.ndarray, op: str, arg: str = "x") -> np.ndarray:
    """:func:`to_float32` for the quantizers, which read fp32: a finite float64 value that float32 cannot hold
    (``|x|`` beyond ``FLT_MAX`` after rounding, e.g. 1e39 or 3.5e38) raises :class:`ShapeError` naming it,
    instead of becoming inf and turning its whole block NaN."""
    if x.dtype != np.float64:
        return to_float32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32)
    bad = np.isinf(x32) & np.isfinite(x)
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), x.shape)
        raise ShapeError(
            f"{op}: argument '{arg}' holds {x[i]!r} at index {tuple(int(v) for v in i)}, a finite float64 beyond "
            f"float32's range (max {float(np.finfo(np.float32).max)!r}); expected values the fp32 quantizer can "
            "read (pass +-inf for infinities, or clip x first)"
        )
    return x32


def _grid_round(a: np.ndarray, f: ElemFormat) -> np.ndarray:
    """RNE of non-negative finite float64 ``a`` (already <= max) to the code grid of ``f``.

    Normal codes: ``code = ((e + bias - 1) << M) + rint(a / 2^(e - M))`` with ``e = floor(log2 a)``; the same
    formula with ``e`` clamped to the minimum normal exponent gives the subnormals, and a mantissa that rounds
    up to ``2^(M+1)`` carries into the exponent field by plain addition.
    """
    _, ex = np.frexp(a)  # a = m * 2^ex, m in [0.5, 1)  =>  floor(log2 a) = ex - 1 (0 -> ex 0)
    e = np.maximum(np.where(a > 0, ex.astype(np.int64) - 1, f.min_normal_exp), f.min_normal_exp)
    q = np.rint(np.ldexp(a, (f.mbits - e).astype(np.int32)))  # exact power-of-two scaling, then RNE
    return ((e + f.bias - 1) << f.mbits) + q.astype(np.int64)


def encode(x: np.ndarray, fmt: str | ElemFormat) -> np.ndarray:
    """Encode floats to element codes: round to nearest even, saturating to +-max (OCP "saturate normals").

    Parameters
    ----------
    x : float16, float32, float64 or bfloat16 ndarray, any shape
    fmt : ``"e4m3"``, ``"e5m2"``, ``"e2m3"``, ``"e3m2"`` or ``"e2m1"``

    Returns
    -------
    uint8 ndarray of x's shape, one code per element (e2m1 is *not* packed here; see :func:`pack_fp4`).

    Notes
    -----
    Equal to ``np.clip(x, -max, max).astype(ml_dtype).view(uint8)`` for every input: +-Inf saturate to +-max;
    NaN becomes 0x7F/0xFF (e4m3), 0x7E/0xFE (e5m2), and for formats without NaN the zero whose sign bit is
    the opposite of the NaN's (ml_dtypes' rule). Float64 inputs are rounded once, directly.
    """
    f = get_format(fmt, "encode")
    x = check_float_array(np.asarray(x) if isinstance(x, np.generic) else x, "encode")
    with np.errstate(invalid="ignore"):  # ml_dtypes warns when it widens a NaN bfloat16
        xd = x.astype(np.float64)
    neg = np.signbit(xd)
    nan = np.isnan(xd)
    a = np.minimum(np.abs(np.where(nan, 0.0, xd)), f.max_value)
    code = _grid_round(a, f)
    code = np.where(neg, code | f.sign_bit, code)
    if nan.any():
        if f.nan_code is not None:
            nan_codes = np.where(neg, f.nan_code | f.sign_bit, f.nan_code)
        else:
            nan_codes = np.where(neg, 0, f.sign_bit)
        code = np.where(nan, nan_codes, code)
    return code.astype(np.uint8)


def _decode_table(f: ElemFormat) -> np.ndarray:
    """float32 value of every code, from the encoding formula of MX_REFERENCE.md 1.1."""
    c = np.arange(f.num_codes, dtype=np.int64)
    s = np.where(c & f.sign_bit, -1.0, 1.0)
    e = (c >> f.mbits) & ((1 << f.ebits) - 1)
    m = c & ((1 << f.mbits) - 1)
    frac = m / float(1 << f.mbits)
    mag = np.where(e == 0, np.ldexp(frac, 1 - f.bias), np.ldexp(1.0 + frac, (e - f.bias).astype(np.int32)))
    v = s * mag
    if f.name == "e4m3":
        v[(c & 0x7F) == 0x7F] = np.nan
    elif f.name == "e5m2":
        top = e == 31
        v[top & (m == 0)] = s[top & (m == 0)] * np.inf
        v[top & (m != 0)] = np.nan
    return v.astype(np.float32)


_DECODE = {name: _decode_table(f) for name, f in FORMATS.items()}


def decode_table(fmt: str | ElemFormat) -> np.ndarray:
    """Read-only float32 array of the value of every code of ``fmt`` (length 2^bits)."""
    t = _DECODE[get_format(fmt, "decode_table").name].view()
    t.flags.writeable = False
    return t


def decode(codes: np.ndarray, fmt: str | ElemFormat) -> np.ndarray:
    """Decode uint8 element codes (one per byte; unpack e2m1 first) to float32."""
    f = get_format(fmt, "decode")
    codes = as_array(codes, "decode", "codes")
    if codes.dtype != np.uint8:
        raise DtypeError(f"decode: argument 'codes' has dtype {codes.dtype}, expected uint8")
    if codes.size and int(codes.max()) >= f.num_codes:
        raise ShapeError(
            f"decode: argument 'codes' holds code {int(codes.max()):#x}, expected codes < {f.num_codes:#x} "
            f"for {f.name} ({f.bits} bits)"
        )
    return _DECODE[f.name][codes]


def check_axis(axis: object, ndim: int, op: str, arg: str = "axis") -> int:
    """An int axis in ``[-ndim, ndim)`` for an array of rank ``ndim >= 1``; returns it non-negative."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise DtypeError(f"{op}: argument '{arg}' is {axis!r}, expected an int")
    if not -ndim <= int(axis) < ndim:
        raise ShapeError(f"{op}: argument '{arg}' is {axis}, expected an axis in [-{ndim}, {ndim}) for ndim {ndim}")
    return int(axis) % ndim


def _check_nibble_input(a: object, op: str, arg: str, top: int) -> np.ndarray:
    """An integer array of rank >= 1 with values in ``[0, top]``, as uint8."""
    a = as_array(a, op, arg)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{op}: argument '{arg}' has dtype {a.dtype}, expected an integer dtype (uint8)")
    if a.ndim == 0:
        raise ShapeError(f"{op}: argument '{arg}' has shape (), expected an array of rank >= 1")
    if a.size and (int(a.min()) < 0 or int(a.max()) > top):
        raise ShapeError(f"{op}: argument '{arg}' holds values in [{a.min()}, {a.max()}], expected [0, {top}]")
    return a.astype(np.uint8, copy=False)


def _pack_fp4(codes: np.ndarray, axis: int) -> np.ndarray:
    codes = np.moveaxis(codes, axis, -1)
    n = codes.shape[-1]
    if n % 2:
        codes = np.concatenate([codes, np.zeros((*codes.shape[:-1], 1), np.uint8)], axis=-1)
    packed = (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)
    return np.ascontiguousarray(np.moveaxis(packed.astype(np.uint8), -1, axis))


def _unpack_fp4(packed: np.ndarray, n: int, axis: int) -> np.ndarray:
    p = np.moveaxis(packed, axis, -1)
    out = np.empty((*p.shape[:-1], 2 * p.shape[-1]), np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return np.ascontiguousarray(np.moveaxis(out[..., :n], -1, axis))


def pack_fp4(codes: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pack 4-bit codes two per byte along ``axis``: even element in the low nibble (MX_REFERENCE.md 1.2).

    ``codes`` is an integer array of rank >= 1 with values in [0, 15] (a :class:`ShapeError` otherwise: nothing
    is masked). An odd length gets a zero high nibble in its last byte; the result is uint8 with length
    ``ceil(n / 2)`` along ``axis``.
    """
    op = "pack_fp4"
    c = _check_nibble_input(codes, op, "codes", 0xF)
    return _pack_fp4(c, check_axis(axis, c.ndim, op))


def unpack_fp4(packed: np.ndarray, n: int, axis: int = -1) -> np.ndarray:
    """Inverse of :func:`pack_fp4`: ``n`` 4-bit codes along ``axis`` from ``ceil(n / 2)`` bytes.

    ``packed`` is an integer array of rank >= 1 with byte values; ``n`` must satisfy
    ``ceil(n / 2) == packed.shape[axis]`` (so the result holds exactly ``n`` codes along ``axis``).
    """
    op = "unpack_fp4"
    p = _check_nibble_input(packed, op, "packed", 0xFF)
    ax = check_axis(axis, p.ndim, op)
    count = check_int(n, op, "n", minimum=0)
    if -(-count // 2) != p.shape[ax]:
        raise ShapeError(
            f"{op}: argument 'n' is {count}, expected {2 * p.shape[ax] - 1} or {2 * p.shape[ax]} for packed of shape "
            f"{p.shape} (ceil(n / 2) bytes along axis {ax})"
        )
    return _unpack_fp4(p, count, ax)


# --- E8M0 ------------------------------------------------------------------------------------------------


def e8m0_decode(s: np.ndarray) -> np.ndarray:
    """E8M0 bytes to float32: byte b is 2^(b-127) (byte 0 is the fp32 subnormal 2^-127), 0xFF is NaN."""
    s = as_array(s, "e8m0_decode", "s")
    if s.dtype != np.uint8:
        raise DtypeError(f"e8m0_decode: argument 's' has dtype {s.dtype}, expected uint8")
    v = np.ldexp(1.0, s.astype(np.int32) - E8M0_BIAS)  # float64, exact; 2^-127 survives the cast below
    return np.where(s == E8M0_NAN, np.nan, v).astype(np.float32)


def e8m0_encode_exponent(e: np.ndarray) -> np.ndarray:
    """Unbiased exponents in [-127, 127] to E8M0 bytes."""
    e = np.asarray(e)
    if e.size and (int(e.min()) < -127 or int(e.max()) > 127):
        raise ShapeError(
            f"e8m0_encode_exponent: argument 'e' spans [{int(e.min())}, {int(e.max())}], expected [-127, 127]"
        )
    return (e.astype(np.int64) + E8M0_BIAS).astype(np.uint8)


def ceil_to_ue8m0(sf: np.ndarray) -> np.ndarray:
    """DeepGEMM's ``ceil_to_ue8m0``: ceil |sf| to a power of two, exponent field clamped to [1, 254] (fp32).

    ``e = exp(|sf|) + (man(|sf|) != 0)``, returned as ``float32(clamp(e, 1, 254) << 23)``
    (MX_REFERENCE.md 2.5). NaN gives 2^127 (clamped), as DeepGEMM's bit formula does.
    """
    op = "ceil_to_ue8m0"
    a = as_array(sf, op, "sf")
    if a.dtype.newbyteorder("=") not in _FLOAT_DTYPES:
        raise DtypeError(f"{op}: argument 'sf' has dtype {a.dtype}, expected float16, float32, float64 or bfloat16")
    bits = np.abs(to_float32_checked(native(a), op, "sf")).view(np.uint32).astype(np.int64)
    e = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0)
    return (np.clip(e, 1, 254).astype(np.uint32) << 23).view(np.float32)
