"""MX quantization on numpy: one E8M0 scale per ``block_size`` elements along an axis (the exact reference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from ..errors import DtypeError, LayoutError, ShapeError
from .codecs import (
    E8M0_BIAS,
    E8M0_NAN,
    ElemFormat,
    _grid_round,
    check_float_array,
    decode,
    get_format,
    pack_fp4,
    to_float32,
    unpack_fp4,
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
        if self.packed:
            return unpack_fp4(self.data, self.shape[self.axis], axis=self.axis)
        return self.data

    def dequantize(self, dtype: Any = np.float32) -> np.ndarray:
        """Shortcut for the numpy twin :func:`dequantize_mx` (row-major scales; ``mxrt.dequantize_mx`` also reads
        preshuffled scales and arrays of any kind)."""
        return dequantize_mx(self, dtype)

    @property
    def scale_shape(self) -> tuple[int, ...]:
        """Shape of the plain (unshuffled) scale matrix: ``shape`` with ``shape[axis] -> ceil(n / block_size)``."""
        out = list(self.shape)
        out[self.axis] = -(-out[self.axis] // self.block_size)
        return tuple(out)

    def as_dtype(self) -> tuple[Any, Any]:
        """``(codes, scales)`` as typed arrays of the fields' own library, sharing memory where the types allow.

        numpy: codes as ``ml_dtypes`` ``float8_e4m3fn`` / ``float8_e5m2`` / ``float6_e2m3fn`` / ``float6_e3m2fn``
        (views) or ``float4_e2m1fn`` (e2m1 is unpacked to one code per byte: a copy), scales as
        ``float8_e8m0fnu`` (a view). torch: codes as ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` (other formats
        uint8), scales as ``torch.float8_e8m0fnu`` where torch has it. CuPy (no fp8 dtypes) and other kinds:
        the fields unchanged. Preshuffled ``deepgemm_ue8m0`` scales stay int32 (four scales per word).
        """
        kind = _field_kind(self.data)
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
            name = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}.get(self.fmt)
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
        """``(lo, hi)``: the smallest and largest finite power-of-two exponent ``b - 127`` among the scales (0xFF
        NaN blocks and preshuffle padding included as stored), or None when there are no scales. Reads device
        arrays back (a synchronisation)."""
        s = self.scales
        if getattr(s, "size", 0) == 0 or self.scale_layout == "deepgemm_ue8m0":
            return None
        kind = _field_kind(s)
        if kind == "numpy":
            b = s.view(np.uint8) if s.dtype != np.uint8 and s.dtype.itemsize == 1 else s
        elif kind == "torch":
            import sys

            b = s.view(sys.modules["torch"].uint8)
        else:
            b = s
        finite = b[b != E8M0_NAN] if kind == "numpy" else b
        if kind == "numpy" and finite.size == 0:
            return None
        return int(finite.min()) - E8M0_BIAS, int(finite.max()) - E8M0_BIAS

    def __repr__(self) -> str:
        layout = f", scale_layout={self.scale_layout!r}" if self.scale_layout is not None else ""
        try:
            rng = self.scale_range()
        except Exception:  # a repr never raises (tampered fields)
            rng = None
        span = f", scales 2^{rng[0]}..2^{rng[1]}" if rng is not None else ""
        kind = _field_kind(self.data)
        return (
            f"MXArray(fmt={self.fmt!r}, shape={self.shape}, axis={self.axis}, block_size={self.block_size}, "
            f"scale_mode={self.scale_mode!r}{layout}{span}, {kind} on {_device_of(self.data)}, "
            f"data={getattr(self.data, 'dtype', '?')}{tuple(getattr(self.data, 'shape', ()))}, "
            f"scales={getattr(self.scales, 'dtype', '?')}{tuple(getattr(self.scales, 'shape', ()))})"
        )

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}</pre>"


_ML_CODE_DTYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}


def _field_kind(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return "numpy"
    root = type(x).__module__.split(".", 1)[0]
    return root if root in ("cupy", "torch", "jax", "jaxlib") else type(x).__name__


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
    """Validate the options of ``quantize_mx`` for an ``ndim``-D input, in the house order. ``scale_layout`` must
    already be validated (:func:`mxrt.layouts.check_fused_layout`, the layer above) or None."""
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if ndim == 0:
        raise ShapeError(f"{op}: argument 'x' is 0-d, expected an array with at least one axis")
    ax = check_axis(axis, ndim, op)
    return QuantArgs(f, mode, bs, ax, scale_layout)


def check_block_size(block_size: object, op: str) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)):
        raise DtypeError(f"{op}: argument 'block_size' is {block_size!r}, expected an int power of two")
    bs = int(block_size)
    if bs < 1 or bs & (bs - 1):
        raise ShapeError(f"{op}: argument 'block_size' is {bs}, expected a power of two >= 1")
    return bs


def check_axis(axis: object, ndim: int, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise DtypeError(f"{op}: argument 'axis' is {axis!r}, expected an int")
    if not -ndim <= int(axis) < ndim:
        raise ShapeError(f"{op}: argument 'axis' is {axis}, expected an axis in [-{ndim}, {ndim}) for ndim {ndim}")
    return int(axis) % ndim


def block_amax(x32: np.ndarray, block_size: int) -> np.ndarray:
    """fp32 max |x| over blocks of ``block_size`` along the last axis (zero-padded tail); NaN propagates."""
    n = x32.shape[-1]
    nb = -(-n // block_size)
    pad = nb * block_size - n
    if pad:
        x32 = np.concatenate([x32, np.zeros((*x32.shape[:-1], pad), np.float32)], axis=-1)
    xb = np.abs(x32.reshape(*x32.shape[:-1], nb, block_size))
    if xb.size == 0:
        return np.zeros(xb.shape[:-1], np.float32)
    return xb.max(axis=-1)


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
    b = np.repeat(scales, block_size, axis=-1)[..., :n]
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
    return pack_fp4(codes, axis=-1) if f.name == "e2m1" else codes


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
    x : float32, float64, float16 or bfloat16 ndarray of any rank (float64 is rounded to float32 first, as
        every GPU quantizer reads at most fp32).
    fmt : element format, ``"e4m3"`` (default), ``"e5m2"``, ``"e2m3"``, ``"e3m2"`` or ``"e2m1"``.
    block_size : power of two; a length not divisible by it ends in a partial block that behaves as
        zero-padded.
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
    return quantize_with(x, quantize_args(op, x.ndim, fmt, block_size, axis, scale_mode, None))


def quantize_with(x: np.ndarray, args: QuantArgs) -> MXArray:
    """The numpy twin's arithmetic for a float ndarray ``x`` (``check_float_array``) and validated ``args``."""
    f, mode, bs, ax = args.fmt, args.mode, args.block_size, args.axis
    x32 = np.moveaxis(to_float32(x), ax, -1)
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


def dequantize_mx(q: MXArray, dtype: Any = np.float32) -> np.ndarray:
    """Invert :func:`quantize_mx`: ``decode(code) * 2^(b - 127)``, NaN for blocks whose scale byte is 0xFF.

    The product is exact in float64 and rounded once to ``dtype`` (float32, float64, float16 or bfloat16);
    values beyond the range of ``dtype`` become +-inf. Preshuffled scales (``q.scale_layout`` set) are read
    back through :func:`mxrt.layouts.unshuffle_scales` by :func:`mxrt.dequantize_mx`.
    """
    op = "dequantize_mx"
    if not isinstance(q, MXArray):
        raise DtypeError(f"{op}: argument 'q' is a {type(q).__name__}, expected an MXArray")
    try:
        out_dtype = np.dtype(dtype)
    except TypeError:
        out_dtype = None
    if out_dtype not in _OUT_DTYPES:
        raise DtypeError(f"{op}: argument 'dtype' is {dtype!r}, expected float32, float64, float16 or bfloat16")
    data, scales = np.asarray(q.data), np.asarray(q.scales)
    if q.scale_layout is not None:  # mxrt.dequantize_mx unshuffles (layouts sits above formats)
        raise LayoutError(
            f"{op}: q.scale_layout is {q.scale_layout!r}; this numpy twin reads row-major scales: call "
            "mxrt.dequantize_mx (which unshuffles them) or pass mxrt.unshuffle_scales' result"
        )
    n = q.shape[q.axis]
    data_shape = list(q.shape)
    data_shape[q.axis] = -(-n // 2) if q.packed else n
    if data.shape != tuple(data_shape) or data.dtype != np.uint8:
        raise ShapeError(
            f"{op}: q.data is {data.dtype}{data.shape}, expected uint8{tuple(data_shape)} for {q.fmt} of shape "
            f"{q.shape} along axis {q.axis}"
        )
    expected = list(q.shape)
    expected[q.axis] = -(-n // q.block_size)
    if scales.shape != tuple(expected) or scales.dtype != np.uint8:
        raise ShapeError(
            f"{op}: q.scales is {scales.dtype}{scales.shape}, expected uint8{tuple(expected)} for shape "
            f"{q.shape}, axis {q.axis}, block_size {q.block_size}"
        )
    vals = decode(q.codes, q.fmt).astype(np.float64)
    s = np.repeat(np.moveaxis(scales, q.axis, -1), q.block_size, axis=-1)[..., :n]
    s = np.moveaxis(s, -1, q.axis)
    out = np.ldexp(vals, s.astype(np.int32) - E8M0_BIAS)
    out[s == E8M0_NAN] = np.nan
    with np.errstate(over="ignore"):  # e.g. 448 * 2^127 is beyond float32: +-inf, as IEEE rounding says
        return out.astype(out_dtype)


def check_dual_args(
    op: str, shape: tuple[int, ...], fmt: Any, scale_mode: Any, block_size: Any, block_2d: Any, scale_layout: Any
) -> tuple[ElemFormat, ScaleMode, int, str | None]:
    """Validate the arguments of ``quantize_mx_dual`` (numpy twin and GPU op alike) in the house order;
    ``scale_layout`` is validated by the caller (:func:`mxrt.layouts.check_fused_layout`) or None."""
    if len(shape) != 2:
        raise ShapeError(f"{op}: argument 'x' has shape {tuple(shape)}, expected a 2-D [m, k] array")
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if not isinstance(block_2d, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'block_2d' is {block_2d!r}, expected a bool")
    return f, mode, bs, scale_layout


def dual_args(
    op: str, shape: tuple[int, ...], fmt: Any, scale_mode: Any, block_size: Any, block_2d: Any, scale_layout: Any
) -> QuantArgs:
    """:func:`check_dual_args` as the frozen :class:`QuantArgs` both twins read (axis 1)."""
    f, mode, bs, layout = check_dual_args(op, shape, fmt, scale_mode, block_size, block_2d, scale_layout)
    return QuantArgs(f, mode, bs, 1, layout, bool(block_2d))


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
    """
    op = "quantize_mx_dual"
    x = check_float_array(x, op)
    return quantize_dual_with(x, dual_args(op, x.shape, fmt, scale_mode, block_size, block_2d, None))


def quantize_dual_with(x: np.ndarray, args: QuantArgs) -> MXDual:
    """The numpy twin's arithmetic of :func:`quantize_mx_dual` for a 2-D float ndarray and validated ``args``."""
    f, mode, bs, block_2d = args.fmt, args.mode, args.block_size, args.block_2d
    x32 = to_float32(x)
    m, k = x32.shape
    if block_2d:
        mb, kb = -(-m // bs), -(-k // bs)
        padded = np.zeros((mb * bs, kb * bs), np.float32)
        padded[:m, :k] = x32
        tiles = padded.reshape(mb, bs, kb, bs).transpose(0, 2, 1, 3).reshape(mb, kb, bs * bs)
        s_tile = compute_scales(block_amax(tiles, bs * bs)[..., 0], f, mode)
        row_s = np.repeat(s_tile, bs, axis=0)[:m]
        col_s = np.repeat(s_tile.T, bs, axis=0)[:k]
    else:
        row_s = compute_scales(block_amax(x32, bs), f, mode)
        col_s = compute_scales(block_amax(x32.T, bs), f, mode)
    row_q = _finish(encode_with_scales(x32, row_s, f, bs), f)
    col_q = _finish(encode_with_scales(np.ascontiguousarray(x32.T), col_s, f, bs), f)

    def wrap(data: np.ndarray, scales: np.ndarray, shape: tuple[int, int]) -> MXArray:
        return MXArray(np.ascontiguousarray(data), np.ascontiguousarray(scales), f.name, bs, 1, shape, mode.value)

    return MXDual(wrap(row_q, row_s, (m, k)), wrap(col_q, col_s, (k, m)))
