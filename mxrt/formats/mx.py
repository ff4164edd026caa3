"""MX quantization on numpy: one E8M0 scale per ``block_size`` elements along an axis (the exact reference)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import ml_dtypes
import numpy as np

from .._kinds import array_kind
from ..codes import SCALE_LAYOUT_CODES
from ..errors import (
    DtypeError,
    LayoutError,
    ShapeError,
    UnknownLayoutError,
    UnknownNameError,
    check_int,
    check_size_limit,
)
from .codecs import (
    E8M0_BIAS,
    E8M0_NAN,
    FORMATS,
    ElemFormat,
    _grid_round,
    _pack_fp4,
    _unpack_fp4,
    check_axis,
    check_float_array,
    decode,
    get_format,
    to_float32_checked,
)
from .scales import ScaleMode, compute_scales, get_scale_mode

_OUT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


@dataclass(frozen=True, eq=False)
class MXArray:
    """An MX-quantized array.

    Attributes
    ----------
    data : uint8 [shape], element codes; for ``e2m1`` two codes per byte along ``axis`` (even element in the
        low nibble), so ``data.shape[axis] == ceil(shape[axis] / 2)``.
    scales : uint8, E8M0 bytes, ``shape`` with ``shape[axis] -> ceil(shape[axis] / block_size)``.
    fmt : element format name (``"e4m3"``, ``"e5m2"``, ``"e2m3"``, ``"e3m2"``, ``"e2m1"``).
    block_size : elements per scale along ``axis``.
    axis : the blocked axis, non-negative.
    shape : logical shape of the quantized tensor.
    scale_mode : the rule that produced the scales (``"floor"``, ``"ceil"``, ``"even"``, ``"rceil"``).
    scale_layout : None (``scales`` as above), or the name of the preshuffled layout ``scales`` is stored in
        (:data:`mxrt.layouts.SCALE_LAYOUTS`; 2-D only): ``scales`` is then
        ``mxrt.preshuffle_scales(plain_scales, scale_layout)``, padding 127, and ``unshuffle_scales`` inverts it.
    """

    data: Any
    scales: Any
    fmt: str
    block_size: int
    axis: int
    shape: tuple[int, ...]
    scale_mode: str
    scale_layout: str | None = None

    @property
    def packed(self) -> bool:
        """True when two codes share a byte (``e2m1``)."""
        return self.fmt == "e2m1"

    @property
    def codes(self) -> np.ndarray:
        """Element codes, one per byte, unpacked: uint8 [shape]."""
        q = check_mxarray(self, "MXArray.codes", "q")
        if q.packed:
            return _unpack_fp4(np.asarray(q.data), q.shape[q.axis], q.axis)
        return q.data

    def dequantize(self, dtype: Any = np.float32) -> np.ndarray:
        """Shortcut for the numpy twin :func:`dequantize_mx` (row-major scales; ``mxrt.dequantize_mx`` also reads
        preshuffled scales and arrays of any kind)."""
        return dequantize_mx(self, dtype)

    @property
    def scale_shape(self) -> tuple[int, ...]:
        """Shape of the plain (unshuffled) scale matrix: ``shape`` with ``shape[axis] -> ceil(n / block_size)``."""
        shape, axis, bs = _check_geometry(self, "MXArray.scale_shape", "q")
        return _scale_shape(shape, axis, bs)

    def as_dtype(self) -> tuple[Any, Any]:
        """``(codes, scales)`` as typed arrays of the fields' own library, sharing memory where the types allow.

        numpy: codes as ``ml_dtypes`` ``float8_e4m3fn`` / ``float8_e5m2`` / ``float6_e2m3fn`` / ``float6_e3m2fn``
        (views) or ``float4_e2m1fn`` (e2m1 is unpacked to one code per byte: a copy), scales as
        ``float8_e8m0fnu`` (a view). torch: codes as ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` (other formats
        uint8), scales as ``torch.float8_e8m0fnu`` where torch has it. CuPy (no fp8 dtypes) and other kinds:
        the fields unchanged. Preshuffled ``deepgemm_ue8m0`` scales stay int32 (four scales per word).
        """
        kind = array_kind(self.data)
        if kind == "numpy":
            codes = self.codes if self.packed else self.data
            typed = _ML_CODE_DTYPES[self.fmt]
            scales = self.scales
            if scales.dtype == np.uint8:
                scales = scales.view(ml_dtypes.float8_e8m0fnu)
            return codes.view(typed), scales
        if kind == "torch":
            import sys

            torch = sys.modules["torch"]
            codes, scales = self.data, self.scales
            name = FP8_CODE_DTYPES.get(self.fmt)
            if codes.dtype == torch.uint8 and name is not None:
                codes = codes.view(getattr(torch, name))
            if scales.dtype == torch.uint8 and hasattr(torch, "float8_e8m0fnu"):
                scales = scales.view(torch.float8_e8m0fnu)
            return codes, scales
        return self.data, self.scales

    @property
    def device(self) -> str:
        """Where the fields live: ``"cpu"``, or the GPU (``"cuda:0"``)."""
        return _device_of(self.data)

    def scale_range(self) -> tuple[int, int] | None:
        """``(lo, hi)``: the smallest and largest exponent ``b - 127`` among the stored scale bytes other than
        0xFF (NaN blocks; preshuffle padding counts as stored), or None when there are none. Works on numpy, CuPy
        and torch fields (device arrays are read back: a synchronisation)."""
        s = self.scales
        if self.scale_layout == "deepgemm_ue8m0":  # four scales per int32 word
            return None
        if array_kind(s) == "torch":
            import sys

            s = s.view(sys.modules["torch"].uint8)
        elif s.dtype != np.uint8:  # e.g. an ml_dtypes float8_e8m0fnu view
            s = s.view(np.uint8)
        finite = s[s != E8M0_NAN]
        if finite.shape[0] == 0:
            return None
        return int(finite.min()) - E8M0_BIAS, int(finite.max()) - E8M0_BIAS

    def __repr__(self) -> str:
        layout = f", scale_layout={self.scale_layout!r}" if self.scale_layout is not None else ""
        try:
            rng = self.scale_range()
        except Exception:  # a repr never raises (tampered fields)
            rng = None
        span = f", scales 2^{rng[0]}..2^{rng[1]}" if rng is not None else ""
        kind = array_kind(self.data)
        return (
            f"MXArray(fmt={self.fmt!r}, shape={self.shape}, axis={self.axis}, block_size={self.block_size}, "
            f"scale_mode={self.scale_mode!r}{layout}{span}, {kind} on {_device_of(self.data)}, "
            f"data={getattr(self.data, 'dtype', '?')}{tuple(getattr(self.data, 'shape', ()))}, "
            f"scales={getattr(self.scales, 'dtype', '?')}{tuple(getattr(self.scales, 'shape', ()))})"
        )

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}</pre>"


#: element format -> the torch / JAX dtype name of its codes (the other formats stay uint8 there)
FP8_CODE_DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}

_ML_CODE_DTYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}


def _device_of(x: Any) -> str:
    """``"cpu"`` or the GPU of an array field, read from its attributes (no import)."""
    if isinstance(x, np.ndarray):
        return "cpu"
    dev = getattr(x, "device", None)
    if dev is None:
        return "cpu"
    if hasattr(dev, "id") and not hasattr(dev, "type"):  # cupy.cuda.Device
        return f"cuda:{dev.id}"
    return str(dev)


class MXDual(NamedTuple):
    """Rowwise and colwise quantization of one 2-D tensor ``x [m, k]``.

    ``row`` quantizes ``x`` along its last axis (blocks along k); ``col`` quantizes ``x.T`` (shape [k, m])
    along its last axis, i.e. blocks along m with the block axis contiguous, as GEMM kernels read it.
    """

    row: MXArray
    col: MXArray


@dataclass(frozen=True)
class QuantArgs:
    """The validated options of :func:`quantize_mx` / :func:`quantize_mx_dual`: built once by
    :func:`quantize_args` (or :func:`dual_args`); the numpy twin and the GPU op both read this object."""

    fmt: ElemFormat
    mode: ScaleMode
    block_size: int
    axis: int  # non-negative; the last axis (1) for the dual quantizer
    scale_layout: str | None
    block_2d: bool = False


def quantize_args(
    op: str, ndim: int, fmt: object, block_size: object, axis: object, scale_mode: object, scale_layout: object
) -> QuantArgs:
    """Validate the options of ``quantize_mx`` for an ``ndim``-D input, in the house order."""
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if ndim == 0:
        raise ShapeError(f"{op}: argument 'x' is 0-d, expected an array with at least one axis")
    ax = check_axis(axis, ndim, op)
    return QuantArgs(f, mode, bs, ax, check_fused_layout(scale_layout, ndim, ax, op))


def check_fused_layout(scale_layout: object, ndim: int, axis: int, op: str) -> str | None:
    """Validate ``scale_layout`` (None or a scale layout name, :data:`mxrt.codes.SCALE_LAYOUT_CODES`) for an
    ``ndim`` input blocked along ``axis`` (non-negative): layouts are defined for 2-D scale matrices blocked along
    the last axis."""
    if scale_layout is None:
        return None
    if not isinstance(scale_layout, str) or scale_layout not in SCALE_LAYOUT_CODES:
        names = [n for n in SCALE_LAYOUT_CODES if n is not None]
        raise UnknownLayoutError(
            f"{op}: argument 'scale_layout' is {scale_layout!r}, an unknown layout; expected None or one of {names}"
        )
    if ndim != 2 or axis != 1:
        raise ShapeError(
            f"{op}: argument 'scale_layout' is {scale_layout!r} for a {ndim}-D input blocked along axis {axis}; "
            "preshuffled scales need a 2-D x blocked along its last axis"
        )
    return scale_layout


def check_block_size(block_size: object, op: str, arg: str = "block_size") -> int:
    """A power of two in ``[1, 2^30]`` (the largest power of two within mxrt's size limit)."""
    if isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, (int, np.integer)):
        raise DtypeError(f"{op}: argument '{arg}' is {block_size!r}, expected an int power of two")
    bs = int(block_size)
    if bs < 1 or bs & (bs - 1):
        raise ShapeError(f"{op}: argument '{arg}' is {bs}, expected a power of two >= 1")
    check_size_limit(bs, op, f"argument '{arg}'")
    return bs


def check_x_rank(x: np.ndarray, op: str, arg: str = "x") -> None:
    """The quantizers block an axis: ``x`` needs rank >= 1 (a 0-d x is the argument's fault, not the axis')."""
    if x.ndim == 0:
        raise ShapeError(f"{op}: argument '{arg}' has shape (), expected an array of rank >= 1 (one axis is blocked)")


def _scale_shape(shape: tuple[int, ...], axis: int, bs: int) -> tuple[int, ...]:
    out = list(shape)
    out[axis] = -(-out[axis] // bs)
    return tuple(out)


def _check_geometry(q: object, op: str, arg: str) -> tuple[tuple[int, ...], int, int]:
    """``(shape, axis, block_size)`` of an MXArray, each field checked for type and range."""
    if not isinstance(q, MXArray):
        raise DtypeError(f"{op}: argument '{arg}' is a {type(q).__name__}, expected an MXArray")
    shape = q.shape
    if not isinstance(shape, (tuple, list)) or not shape:
        raise ShapeError(f"{op}: {arg}.shape is {shape!r}, expected a non-empty tuple of ints >= 0")
    shape = tuple(check_int(v, op, f"{arg}.shape[{i}]", minimum=0) for i, v in enumerate(shape))
    count = 1
    for v in shape:
        count *= v
    check_size_limit(count, op, f"{arg}.shape {shape}: its element count")
    bs = check_block_size(q.block_size, op, f"{arg}.block_size")
    if isinstance(q.axis, (bool, np.bool_)) or not isinstance(q.axis, (int, np.integer)):
        raise DtypeError(f"{op}: {arg}.axis is {q.axis!r}, expected an int")
    if not 0 <= int(q.axis) < len(shape):
        raise ShapeError(f"{op}: {arg}.axis is {q.axis}, expected a non-negative axis < {len(shape)} for shape {shape}")
    return shape, int(q.axis), bs


def check_mxarray(q: object, op: str, arg: str = "q") -> MXArray:
    """Validate every field of a (host) MXArray, as a tampered or hand-built one can hold anything, and return it
    normalised (Python ints, tuple shape, numpy data and scales).

    Checks: ``shape`` a non-empty tuple of ints >= 0 within the size limit; ``block_size`` a power of two;
    ``axis`` in ``[0, ndim)``; ``fmt`` a known format name; ``scale_layout`` None or a known layout (2-D, axis 1);
    ``data`` uint8 of ``shape`` (packed e2m1: ``ceil(n / 2)`` along ``axis``); ``scales`` uint8 of
    ``scale_shape`` (or the storage of ``scale_layout``, checked when it is unshuffled).
    """
    shape, axis, bs = _check_geometry(q, op, arg)
    q = cast(MXArray, q)  # _check_geometry raised for anything else
    fmt = q.fmt
    if not isinstance(fmt, str):
        raise DtypeError(f"{op}: {arg}.fmt is {fmt!r}, expected a format name")
    if fmt not in FORMATS:
        raise UnknownNameError(f"{op}: {arg}.fmt is {fmt!r}, an unknown format; expected one of {sorted(FORMATS)}")
    layout = q.scale_layout
    if layout is not None:
        if not isinstance(layout, str) or layout not in SCALE_LAYOUT_CODES:
            names = [n for n in SCALE_LAYOUT_CODES if n is not None]
            raise UnknownLayoutError(
                f"{op}: {arg}.scale_layout is {layout!r}, an unknown layout; expected None or one of {names}"
            )
        if len(shape) != 2 or axis != 1:
            raise ShapeError(
                f"{op}: {arg} has scale_layout {layout!r} but shape {shape} blocked along axis {axis}; "
                "preshuffled scales belong to a 2-D array blocked along its last axis"
            )
    data, scales = q.data, q.scales
    for name, a in (("data", data), ("scales", scales)):
        if not isinstance(a, np.ndarray):
            raise DtypeError(f"{op}: {arg}.{name} is a {type(a).__name__}, expected a numpy uint8 array")
    data_shape = list(shape)
    if fmt == "e2m1":
        data_shape[axis] = -(-shape[axis] // 2)
    expected = {"data": tuple(data_shape), "scales": _scale_shape(shape, axis, bs) if layout is None else None}
    what = {"data": "element codes", "scales": "E8M0 bytes"}
    for name in ("data", "scales") if layout is None else ("data",):  # a layout's storage: unshuffle checks it
        a = getattr(q, name)
        if a.dtype != np.uint8:
            raise DtypeError(f"{op}: {arg}.{name} has dtype {a.dtype}, expected uint8 ({what[name]})")
        if expected[name] is not None and a.shape != expected[name]:
            raise ShapeError(
                f"{op}: {arg}.{name} has shape {a.shape}, expected {expected[name]} for {fmt} of shape {shape}, "
                f"axis {axis}, block_size {bs}"
            )
    plain = type(q.shape) is tuple and all(type(v) is int for v in q.shape)
    if plain and type(q.axis) is int and type(q.block_size) is int:
        return q
    return dataclasses.replace(q, shape=shape, axis=axis, block_size=bs)


def block_amax(x32: np.ndarray, block_size: int) -> np.ndarray:
    """fp32 max |x| over blocks of ``block_size`` along the last axis (the tail block as if zero-padded); NaN
    propagates. Works on a 2-D ``[rows, n]`` view, so any rank and any block size cost memory ~ ``x32.size``."""
    *lead, n = x32.shape
    nb = -(-n // block_size)
    rows = x32.reshape(math.prod(lead), n)
    out = np.zeros((rows.shape[0], nb), np.float32)
    full = n // block_size
    if rows.size and full:
        out[:, :full] = np.abs(rows[:, : full * block_size].reshape(-1, full, block_size)).max(axis=-1)
    if rows.size and full < nb:  # partial tail: the zero padding never exceeds |x|, so max(|tail|) is the block's
        out[:, full] = np.abs(rows[:, full * block_size :]).max(axis=-1)
    return out.reshape(*lead, nb)


def encode_with_scales(x32: np.ndarray, scales: np.ndarray, f: ElemFormat, block_size: int) -> np.ndarray:
    """Element codes for ``x32 [..., n]`` given E8M0 ``scales [..., ceil(n/bs)]``: RNE(saturate(x / 2^e)).

    The division by the exact power of two ``2^e`` (e = b - 127, also for e = -127) happens in float64 and is
    exact. Blocks with scale 0xFF get the format's NaN code (0 for formats without NaN). Rows are processed in
    chunks of about 2^20 elements so the float64 temporaries stay small.
    """
    n = x32.shape[-1]
    if x32.size == 0:
        return np.zeros(x32.shape, np.uint8)
    rows_x = x32.reshape(-1, n)
    rows_s = scales.reshape(-1, scales.shape[-1])
    out = np.empty(rows_x.shape, np.uint8)
    step = max(1, (1 << 20) // max(n, 1))
    for r0 in range(0, rows_x.shape[0], step):
        out[r0 : r0 + step] = _encode_rows(rows_x[r0 : r0 + step], rows_s[r0 : r0 + step], f, block_size)
    return out.reshape(x32.shape)


def _encode_rows(x32: np.ndarray, scales: np.ndarray, f: ElemFormat, block_size: int) -> np.ndarray:
    n = x32.shape[-1]
    b = scales[..., np.arange(n) // block_size]  # one scale per element, memory ~ x (not ~ block_size)
    nonfinite = b == E8M0_NAN
    e = np.where(nonfinite, 0, b.astype(np.int32) - E8M0_BIAS)
    with np.errstate(invalid="ignore"):  # signalling-NaN payloads; those blocks are overwritten below
        y = np.ldexp(np.where(nonfinite, 0.0, x32.astype(np.float64)), -e)
    neg = np.signbit(y)
    code = _grid_round(np.minimum(np.abs(y), f.max_value), f)
    code = np.where(neg, code | f.sign_bit, code)
    if nonfinite.any():
        code = np.where(nonfinite, f.nan_code if f.nan_code is not None else 0, code)
    return code.astype(np.uint8)


def _finish(codes: np.ndarray, f: ElemFormat) -> np.ndarray:
    return _pack_fp4(codes, -1) if f.name == "e2m1" else codes


def quantize_mx(
    x: np.ndarray,
    fmt: str = "e4m3",
    *,
    block_size: int = 32,
    axis: int = -1,
    scale_mode: str | ScaleMode = "rceil",
) -> MXArray:
    """Quantize ``x`` to an MX format: one E8M0 scale per ``block_size`` consecutive elements along ``axis``.

    Parameters
    ----------
    x : float32, float64, float16 or bfloat16 ndarray of rank >= 1 (float64 is rounded to float32 first, as
        every GPU quantizer reads at most fp32; a finite float64 beyond float32's range, such as 1e39, is a
        :class:`~mxrt.ShapeError` rather than an inf that would turn its block NaN). At most 2^31-1 elements
        (mxrt's size limit, :data:`mxrt.errors.SIZE_LIMIT`).
    fmt : element format, ``"e4m3"`` (default), ``"e5m2"``, ``"e2m3"``, ``"e3m2"`` or ``"e2m1"``.
    block_size : power of two, at most 2^30; a length not divisible by it ends in a partial block that behaves
        as zero-padded.
    axis : the blocked axis (the GEMM reduction dim K).
    scale_mode : ``"rceil"`` (default; never saturates), ``"floor"`` (OCP v1.0), ``"ceil"``, ``"even"``; see
        :class:`ScaleMode` for the formulas.
    scale_layout : (``mxrt.quantize_mx`` only) None (default), or a preshuffled scale layout (``"aiter32x8"``,
        ``"turbo16x4"``, ``"cublas128x4"``, ``"deepgemm_ue8m0"``) for a 2-D ``x`` blocked along its last axis:
        ``scales`` is then ``mxrt.preshuffle_scales(scales, scale_layout)`` (padding 127), written in the same
        pass on the GPU.

    Returns
    -------
    MXArray
        Codes ``RNE(saturate(x / 2^e))`` and scale bytes ``e + 127``. All-zero blocks get scale byte 0; a
        block holding NaN or +-Inf gets 0xFF and its codes are the format's NaN code (0 where it has none),
        so every element of it dequantizes to NaN.
    """
    op = "quantize_mx"
    x = check_float_array(x, op)
    check_x_rank(x, op)
    return quantize_with(x, quantize_args(op, x.ndim, fmt, block_size, axis, scale_mode, None))


def quantize_with(x: np.ndarray, args: QuantArgs) -> MXArray:
    """The numpy twin's arithmetic for a float ndarray ``x`` (``check_float_array``) and validated ``args``."""
    op = "quantize_mx"
    f, mode, bs, ax = args.fmt, args.mode, args.block_size, args.axis
    x32 = np.moveaxis(to_float32_checked(x, op), ax, -1)
    scales = compute_scales(block_amax(x32, bs), f, mode)
    codes = _finish(encode_with_scales(x32, scales, f, bs), f)
    return MXArray(
        data=np.ascontiguousarray(np.moveaxis(codes, -1, ax)),
        scales=np.ascontiguousarray(np.moveaxis(scales, -1, ax)),
        fmt=f.name,
        block_size=bs,
        axis=ax,
        shape=tuple(x.shape),
        scale_mode=mode.value,
    )


def check_out_dtype(dtype: object, op: str) -> np.dtype:
    """One of :data:`_OUT_DTYPES` (a dtype, scalar type, or its name); None and unknown names are errors."""
    try:
        out_dtype = None if dtype is None else np.dtype(dtype)  # np.dtype(None) would silently be float64
    except (TypeError, ValueError):
        out_dtype = None
    if out_dtype is None and isinstance(dtype, str):
        raise UnknownNameError(
            f"{op}: argument 'dtype' is {dtype!r}, an unknown dtype name; expected float32, float64, float16 or "
            "bfloat16"
        )
    if out_dtype is None or out_dtype not in _OUT_DTYPES:  # (np.dtype == None is True: test None first)
        raise DtypeError(f"{op}: argument 'dtype' is {dtype!r}, expected float32, float64, float16 or bfloat16")
    return out_dtype


def dequantize_mx(q: MXArray, dtype: Any = np.float32) -> np.ndarray:
    """Invert :func:`quantize_mx`: ``decode(code) * 2^(b - 127)``, NaN for blocks whose scale byte is 0xFF.

    The product is exact in float64 and rounded once to ``dtype`` (float32, float64, float16 or bfloat16);
    values beyond the range of ``dtype`` become +-inf. Preshuffled scales (``q.scale_layout`` set) are read
    back through :func:`mxrt.layouts.unshuffle_scales` by :func:`mxrt.dequantize_mx`. Every field of ``q`` is
    validated first (:func:`check_mxarray`).
    """
    op = "dequantize_mx"
    q = check_mxarray(q, op)
    out_dtype = check_out_dtype(dtype, op)
    data, scales = q.data, q.scales
    if q.scale_layout is not None:  # mxrt.dequantize_mx unshuffles (layouts sits above formats)
        raise LayoutError(
            f"{op}: q.scale_layout is {q.scale_layout!r}; this numpy twin reads row-major scales: call "
            "mxrt.dequantize_mx (which unshuffles them) or pass mxrt.unshuffle_scales' result"
        )
    n = q.shape[q.axis]
    codes = _unpack_fp4(data, n, q.axis) if q.packed else data
    try:
        vals = decode(codes, q.fmt).astype(np.float64)
    except ShapeError as e:
        raise ShapeError(f"{op}: q.data holds codes that are not {q.fmt} codes: {e}") from None
    s = np.moveaxis(scales, q.axis, -1)[..., np.arange(n) // q.block_size]
    s = np.moveaxis(s, -1, q.axis)
    out = np.ldexp(vals, s.astype(np.int32) - E8M0_BIAS)
    out[s == E8M0_NAN] = np.nan
    with np.errstate(over="ignore"):  # e.g. 448 * 2^127 is beyond float32: +-inf, as IEEE rounding says
        return out.astype(out_dtype)


def check_dual_args(
    op: str, shape: tuple[int, ...], fmt: Any, scale_mode: Any, block_size: Any, block_2d: Any, scale_layout: Any
) -> tuple[ElemFormat, ScaleMode, int, str | None]:
    """Validate the arguments of ``quantize_mx_dual`` (numpy twin and GPU op alike) in the house order."""
    if len(shape) != 2:
        raise ShapeError(f"{op}: argument 'x' has shape {tuple(shape)}, expected a 2-D [m, k] array")
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if not isinstance(block_2d, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'block_2d' is {block_2d!r}, expected a bool")
    return f, mode, bs, check_fused_layout(scale_layout, 2, 1, op)


def dual_args(
    op: str, shape: tuple[int, ...], fmt: Any, scale_mode: Any, block_size: Any, block_2d: Any, scale_layout: Any
) -> QuantArgs:
    """:func:`check_dual_args` as the frozen :class:`QuantArgs` both twins read (axis 1)."""
    f, mode, bs, layout = check_dual_args(op, shape, fmt, scale_mode, block_size, block_2d, scale_layout)
    return QuantArgs(f, mode, bs, 1, layout, bool(block_2d))


def dual_codes(
    x32: np.ndarray, f: ElemFormat, mode: ScaleMode, bs: int, block_2d: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(row_q, row_s, col_q, col_s)`` of :func:`quantize_mx_dual` for fp32 ``x32 [..., m, k]`` (any leading
    batch dims, so the grouped quantizer runs every group in one pass): rowwise codes ``[..., m, k]`` (packed for
    e2m1) and scales ``[..., m, ceil(k/bs)]``, colwise codes of the transpose ``[..., k, m]`` and scales
    ``[..., k, ceil(m/bs)]``. With ``block_2d`` a tile's amax is the max over its rows' block amaxes, and
    every row (column) of the tile stores the tile's scale."""
    xt = np.ascontiguousarray(np.swapaxes(x32, -1, -2))
    m, k = x32.shape[-2:]
    if block_2d:
        row_amax = block_amax(x32, bs)  # [..., m, kb]
        tile_amax = block_amax(np.swapaxes(row_amax, -1, -2), bs)  # [..., kb, mb]; amax >= 0, so abs is a no-op
        s_tile = compute_scales(tile_amax, f, mode)
        row_s = np.swapaxes(s_tile, -1, -2)[..., np.arange(m) // bs, :]
        col_s = s_tile[..., np.arange(k) // bs, :]
    else:
        row_s = compute_scales(block_amax(x32, bs), f, mode)
        col_s = compute_scales(block_amax(xt, bs), f, mode)
    row_q = _finish(encode_with_scales(x32, row_s, f, bs), f)
    col_q = _finish(encode_with_scales(xt, col_s, f, bs), f)
    return row_q, row_s, col_q, col_s


def quantize_mx_dual(
    x: np.ndarray,
    fmt: str = "e4m3",
    *,
    block_size: int = 32,
    scale_mode: str | ScaleMode = "rceil",
    block_2d: bool = False,
) -> MXDual:
    """Rowwise and colwise MX quantization of a 2-D ``x [m, k]`` (the fwd and the wgrad operands).

    Returns :class:`MXDual` ``(row, col)``: ``row`` equals ``quantize_mx(x, axis=-1)``; ``col`` equals
    ``quantize_mx(x.T, axis=-1)``, shape [k, m] with blocks along m.

    With ``block_2d=True`` one scale covers each ``block_size x block_size`` tile (Primus-Turbo's
    ``use_2d_block``, used for MoE weights): both outputs store, for every row of the tile, the tile's scale,
    and the codes of ``col`` are the transpose of those of ``row`` (before fp4 packing).

    ``mxrt.quantize_mx_dual(..., scale_layout=)`` (None, or a name of :data:`mxrt.layouts.SCALE_LAYOUTS`)
    stores both scale matrices preshuffled, as :func:`mxrt.quantize_mx` does (``row.scales`` for
    ``[m, ceil(k/bs)]``, ``col.scales`` for ``[k, ceil(m/bs)]``).

    As in :func:`quantize_mx`, ``x`` is read as fp32: a finite float64 beyond float32's range is a
    :class:`~mxrt.ShapeError`, and ``x`` holds at most 2^31-1 elements.
    """
    op = "quantize_mx_dual"
    x = check_float_array(x, op)
    return quantize_dual_with(x, dual_args(op, x.shape, fmt, scale_mode, block_size, block_2d, None))


def quantize_dual_with(x: np.ndarray, args: QuantArgs) -> MXDual:
    """The numpy twin's arithmetic of :func:`quantize_mx_dual` for a 2-D float ndarray and validated ``args``."""
    op = "quantize_mx_dual"
    f, mode, bs, block_2d = args.fmt, args.mode, args.block_size, args.block_2d
    x32 = to_float32_checked(x, op)
    m, k = x32.shape
    row_q, row_s, col_q, col_s = dual_codes(x32, f, mode, bs, bool(block_2d))

    def wrap(data: np.ndarray, scales: np.ndarray, shape: tuple[int, int]) -> MXArray:
        return MXArray(np.ascontiguousarray(data), np.ascontiguousarray(scales), f.name, bs, 1, shape, mode.value)

    return MXDual(wrap(row_q, row_s, (m, k)), wrap(col_q, col_s, (k, m)))
