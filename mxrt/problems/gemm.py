"""Dense MX GEMM ``a @ b.T`` as a problem: the argument validation into one frozen :class:`GemmProblem`.

Both operands are MX-quantized along K with one E8M0 scale per 32 elements ("NT", the layout every MX matrix
unit reads). :func:`gemm_problem` turns the user's arguments (MXArrays, or raw ``(codes, scales, fmt)`` pieces
whose scales may sit in a preshuffled layout of :mod:`mxrt.layouts`) into one frozen :class:`GemmProblem`: the
public op :func:`mxrt.gemm_mx` validates once through it and hands the problem to the numpy twin or a GPU path.
Device (CuPy) buffers are checked from their shape, dtype and flags alone (no cupy import, nothing copied).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .._kinds import dtype_name, is_device_array
from ..errors import DtypeError, LayoutError, MxrtError, ShapeError, UnknownLayoutError, check_int, check_size_limit
from ..formats import FORMATS, MXArray, get_format
from ..formats.codecs import _ALIASES, as_array
from ..formats.mx import _check_geometry, check_mxarray
from ..layouts import (
    SCALE_LAYOUTS,
    WEIGHT_LAYOUTS,
    scale_layout_shape,
    unshuffle_scales,
    unshuffle_weight,
    weight_layout_shape,
)

#: Elements per E8M0 scale along K; the only block size the MX matrix instructions read.
GEMM_BLOCK = 32

#: Supported (a.fmt, b.fmt) pairs: MXFP8 (e4m3/e5m2 in any combination), MXFP4, and mixed e4m3 x e2m1.
GEMM_FORMAT_PAIRS = (
    ("e4m3", "e4m3"),
    ("e4m3", "e5m2"),
    ("e5m2", "e4m3"),
    ("e5m2", "e5m2"),
    ("e2m1", "e2m1"),
    ("e4m3", "e2m1"),
    ("e2m1", "e4m3"),
)

#: Output dtypes of the public op (what the GPU kernels write). The reference also rounds to float64.
GEMM_OUT_DTYPES = ("bfloat16", "float16", "float32")
_DTYPES = {
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


_FMT_NAMES = frozenset(FORMATS) | frozenset(_ALIASES)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, eq=False)
class GemmProblem:
    """A validated ``d = a @ b.T`` problem; everything a backend needs, nothing it must re-check.

    Attributes
    ----------
    op : name used in error messages (``"gemm_mx"``).
    m, n, k : logical sizes; ``a`` is ``[m, k]``, ``b`` is ``[n, k]``, ``d`` is ``[m, n]``.
    a, b : MXArray along axis 1 with block 32 and **logical** (row-major, unshuffled) scales
        ``uint8 [rows, ceil(k/32)]``; ``.data`` is fp8 codes ``uint8 [rows, k]`` or packed fp4 ``[rows, ceil(k/2)]``
        (even k in the low nibble), exactly the caller's buffers when they were already in that form.
    a_fmt, b_fmt : element formats, one of :data:`GEMM_FORMAT_PAIRS`.
    a_scale_layout, b_scale_layout : the layout the caller's scales came in (``None`` = row-major), and
    a_scales_given, b_scales_given : the caller's scale buffers as given (a kernel that reads that layout
        can use them without reshuffling; ``a.scales`` is always the unshuffled form).
    out_dtype : numpy dtype of ``d`` (float32, float16, bfloat16; float64 for the reference only).
    split_k : number of K ranges, ``1 <= split_k <= max(1, ceil(k/32))``; see :attr:`k_ranges`.
    deterministic : reduce split-K partials through a workspace in a fixed order (True) or atomically.
    out : caller-provided output ``[m, n]`` of ``out_dtype``, or ``None``.
    device : True when every array is a CuPy array (validated from shape, dtype and flags only, nothing copied).
        Then ``a.scales`` / ``b.scales`` are the caller's scale buffers **as given** (row-major ``[rows,
        ceil(k/32)]``, or the preshuffled storage of ``*_scale_layout``, never unshuffled on the host) and a
        bfloat16 ``out`` is a CuPy uint16 array of bfloat16 bits (CuPy has no bfloat16 dtype).
    b_weight_layout : the layout the caller's weight codes came in: ``None`` (row-major) or ``"aiter16x16"``
        (:func:`mxrt.preshuffle_weight`'s ``[ceil(n/16)*16, ceil(row bytes/32)*32]`` buffer). Host problems hold the
        unshuffled codes in ``b.data`` (unshuffled at validation); device problems hold the caller's shuffled
        buffer **as given**, which only a path listing the layout in ``GemmPath.weight_layouts`` reads.
    """

    op: str
    m: int
    n: int
    k: int
    a: MXArray
    b: MXArray
    a_fmt: str
    b_fmt: str
    a_scale_layout: str | None
    b_scale_layout: str | None
    a_scales_given: Any
    b_scales_given: Any
    out_dtype: np.dtype
    split_k: int
    deterministic: bool
    out: Any
    device: bool = False
    b_weight_layout: str | None = None

    @property
    def k_blocks(self) -> int:
        """Scale blocks along K, ``ceil(k / 32)``."""
        return _cdiv(self.k, GEMM_BLOCK)

    @property
    def k_ranges(self) -> tuple[tuple[int, int], ...]:
        """The split-K ranges ``[(k0, k1), ...]`` in elements, on 32-element scale boundaries.

        Split ``i`` owns scale blocks ``[i*kb//split_k, (i+1)*kb//split_k)`` (kb = ``k_blocks``), so every split
        is non-empty and their sizes differ by at most one block; its scale offset is ``k0 // 32``. The last
        range ends at ``k`` (the K tail). With ``k == 0`` it is ``((0, 0),)``.
        """
        kb = self.k_blocks
        if kb == 0:
            return ((0, 0),)
        edges = [i * kb // self.split_k for i in range(self.split_k + 1)]
        return tuple((GEMM_BLOCK * b0, min(GEMM_BLOCK * b1, self.k)) for b0, b1 in itertools.pairwise(edges))

    @property
    def is_empty(self) -> bool:
        """True when ``d`` has no elements or K is 0 (the result is then all zeros, no kernel runs)."""
        return self.m == 0 or self.n == 0 or self.k == 0

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def _out_dtype(out_dtype: object, op: str, allowed: tuple[str, ...]) -> np.dtype:
    try:  # np.dtype(None) is float64: None is not a dtype here
        dt = (
            None
            if out_dtype is None
            else np.dtype(out_dtype)
            if not isinstance(out_dtype, str)
            else _DTYPES.get(out_dtype)
        )
    except TypeError:
        dt = None
    if dt is None or dt not in [_DTYPES[name] for name in allowed]:
        raise DtypeError(f"{op}: argument 'out_dtype' is {out_dtype!r}, expected one of {list(allowed)}")
    return dt


def _scales_u8(s: object) -> np.ndarray:
    a = np.asarray(s)
    return a.view(np.uint8) if a.dtype == np.dtype(ml_dtypes.float8_e8m0fnu) else a


def _dev_name(x: object) -> str:
    return f"{type(x).__name__} of dtype {getattr(x, 'dtype', None)} and shape {getattr(x, 'shape', None)}"


def _check_device_scales(s: Any, layout: str | None, rows: int, cols: int, name: str, op: str) -> None:
    """A CuPy scale buffer, checked against its layout's storage (mxrt.layouts.scale_layout_shape) without reading
    it: the kernels read preshuffled storage through the index maps of kernels_src/common/scale_layouts.h."""
    dt = dtype_name(s.dtype)
    if layout is None:
        if dt != "uint8" or tuple(s.shape) != (rows, cols):
            raise (DtypeError if dt != "uint8" else ShapeError)(
                f"{op}: {name}.scales is a CuPy array of dtype {dt} and shape {tuple(s.shape)}, expected uint8 "
                f"{(rows, cols)} = [{'m' if name == 'a' else 'n'}, ceil(k / 32)]"
            )
        if not s.flags.c_contiguous:
            raise LayoutError(f"{op}: {name}.scales has strides {s.strides}, expected a C-contiguous CuPy array")
        return
    sm, sn = scale_layout_shape(layout, rows, cols)
    where = f"{name}_scale_layout={layout!r} for scales [{rows}, {cols}]"
    if layout == "deepgemm_ue8m0":
        if dt not in ("int32", "uint32"):
            raise DtypeError(f"{op}: {name}.scales has dtype {dt}, expected int32 for {where}")
        if tuple(s.shape) != (rows, sn // 4):
            raise ShapeError(f"{op}: {name}.scales has shape {tuple(s.shape)}, expected {(rows, sn // 4)} for {where}")
        want = (4, 4 * sm)
        if any(st != w for st, w, d in zip(s.strides, want, s.shape, strict=True) if d > 1):
            raise LayoutError(
                f"{op}: {name}.scales has strides {s.strides}, expected {want} (the MN-major int32 storage that "
                f"preshuffle_scales returns) for {where}"
            )
        return
    allowed = ("uint8", "uint32") if layout == "turbo16x4" else ("uint8",)
    if dt not in allowed:
        raise DtypeError(f"{op}: {name}.scales has dtype {dt}, expected one of {list(allowed)} for {where}")
    if tuple(s.shape) not in ((sm, sn), (sm * sn,)):
        raise ShapeError(
            f"{op}: {name}.scales has shape {tuple(s.shape)}, expected {(sm, sn)} (or flat ({sm * sn},)) = "
            f"scale_layout_shape({layout!r}, {rows}, {cols}) for {where}"
        )
    if not s.flags.c_contiguous:
        raise LayoutError(f"{op}: {name}.scales has strides {s.strides}, expected a C-contiguous CuPy array")


def _device_operand(
    codes: Any, scales: Any, fmt: str, k: int | None, layout: str | None, name: str, op: str
) -> MXArray:
    """An MXArray over CuPy buffers, validated from shape, dtype and flags only (no transfer, no unshuffle)."""
    if not (is_device_array(codes) and is_device_array(scales)):
        raise DtypeError(
            f"{op}: {name} mixes host and device arrays (codes {type(codes).__name__}, scales "
            f"{type(scales).__name__}); expected both CuPy or both numpy"
        )
    if dtype_name(codes.dtype) != "uint8":
        raise DtypeError(f"{op}: {name} codes are a CuPy array of dtype {codes.dtype}, expected uint8 element codes")
    if codes.ndim != 2:
        raise ShapeError(f"{op}: {name} codes have shape {tuple(codes.shape)}, expected a 2-D [rows, k] array")
    if not codes.flags.c_contiguous:
        raise LayoutError(
            f"{op}: {name} codes have strides {codes.strides} for shape {tuple(codes.shape)}: the GPU kernels need a "
            "C-contiguous array (mxrt makes no implicit device copy; pass cupy.ascontiguousarray)"
        )
    packed = fmt == "e2m1"
    rows, width = (int(v) for v in codes.shape)
    if k is None:
        k = 2 * width if packed else width
    want = _cdiv(k, 2) if packed else k
    if width != want:
        raise ShapeError(
            f"{op}: {name} codes have shape {(rows, width)}, expected {(rows, want)} for k = {k}"
            + (" (packed e2m1, ceil(k/2) bytes per row)" if packed else "")
        )
    _check_device_scales(scales, layout, rows, _cdiv(k, GEMM_BLOCK), name, op)
    return _given(codes, scales, fmt, rows, k, layout)


def _given(codes: Any, scales: Any, fmt: str, rows: int, k: int, layout: str | None) -> MXArray:
    """An MXArray over the caller's (already checked) device buffers: logical shape ``(rows, k)``."""
    return MXArray(codes, scales, fmt, GEMM_BLOCK, 1, (rows, k), "given", layout)


def _layout_name(layout: object, arg: str, known: tuple[str, ...], what: str, op: str) -> str | None:
    """``layout`` as given for argument ``arg``: None or one of ``known`` (UnknownLayoutError otherwise)."""
    if layout is not None and (not isinstance(layout, str) or layout not in known):
        raise UnknownLayoutError(
            f"{op}: argument '{arg}' is {layout!r}, an unknown {what}; expected None (row-major) or one of "
            f"{list(known)}"
        )
    return layout


def _check_scale_layout(layout: object, name: str, op: str) -> str | None:
    return _layout_name(layout, f"{name}_scale_layout", SCALE_LAYOUTS, "layout", op)


def _raw_fmt(fmt: object, name: str, op: str) -> str:
    """The canonical format name of raw pieces' 3rd item."""
    if not isinstance(fmt, str) or fmt.lower() not in _FMT_NAMES:
        raise DtypeError(f"{op}: {name}[2] (fmt) is {fmt!r}, expected a format name such as 'e4m3' or 'e2m1'")
    return get_format(fmt, op).name


def _host_codes(codes: object, name: str, op: str) -> np.ndarray:
    """Raw pieces' host codes as uint8 (float8 / int8 views accepted)."""
    c = as_array(codes, op, f"{name}[0] (codes)")
    if c.dtype != np.uint8 and c.dtype.itemsize == 1 and c.dtype.kind in "iufV":
        c = c.view(np.uint8)
    if c.dtype != np.uint8:
        raise DtypeError(f"{op}: {name} codes have dtype {c.dtype}, expected uint8 element codes")
    return c


def _operand(x: object, name: str, layout: object, op: str) -> tuple[MXArray, Any, str | None]:
    """An MXArray with logical scales from ``x`` (MXArray or raw pieces), the caller's scale buffer, and the layout
    it is stored in (the argument, or an MXArray's own ``scale_layout``)."""
    _check_scale_layout(layout, name, op)
    if isinstance(x, MXArray):
        shape, axis, bs = _check_geometry(x, op, name)  # a tampered MXArray's fields, before any use
        own = x.scale_layout
        if layout is not None and layout != own:
            raise LayoutError(
                f"{op}: argument '{name}_scale_layout' is {layout!r} but '{name}' is an MXArray, whose scales are "
                f"{'row-major' if own is None else repr(own)}; expected None (the MXArray names its own layout), or "
                f"pass {name} as raw pieces (codes, scales, fmt)"
            )
        if own is not None and (not isinstance(own, str) or own not in SCALE_LAYOUTS):
            raise UnknownLayoutError(
                f"{op}: {name}.scale_layout is {own!r}, an unknown layout; expected None or one of "
                f"{list(SCALE_LAYOUTS)}"
            )
        layout = own
        if len(shape) != 2:
            raise ShapeError(f"{op}: {name} has shape {shape}, expected a 2-D [rows, k] MXArray")
        if axis != 1:
            raise ShapeError(
                f"{op}: {name} is quantized along axis {axis}, expected axis 1 (K, the reduction dim) for "
                f"{name} of shape {shape}"
            )
        if bs != GEMM_BLOCK:
            raise ShapeError(f"{op}: {name}.block_size is {bs}, expected {GEMM_BLOCK}")
        if not isinstance(x.fmt, str) or x.fmt not in FORMATS:
            raise DtypeError(f"{op}: {name}.fmt is {x.fmt!r}, expected a format name such as 'e4m3' or 'e2m1'")
        if is_device_array(x.data) or is_device_array(x.scales):
            return _device_operand(x.data, x.scales, x.fmt, shape[1], layout, name, op), x.scales, layout
        x = check_mxarray(x, op, name)
        q, given = x, x.scales
        if layout is not None:  # e.g. quantize_mx(..., scale_layout=...): the logical scales for the reference
            q = _operand((x.data, x.scales, x.fmt, x.shape[1]), name, layout, op)[0]
    elif isinstance(x, tuple) and len(x) in (3, 4):
        codes, scales = x[0], x[1]
        fmt = _raw_fmt(x[2], name, op)
        if len(x) == 4:
            check_int(x[3], op, f"{name}[3] (k)", minimum=0)
        if is_device_array(codes) or is_device_array(scales):
            k_dev = int(x[3]) if len(x) == 4 else None
            return _device_operand(codes, scales, fmt, k_dev, layout, name, op), scales, layout
        codes = _host_codes(codes, name, op)
        if codes.ndim != 2:
            raise ShapeError(f"{op}: {name} codes have shape {codes.shape}, expected a 2-D [rows, k] array")
        packed = fmt == "e2m1"
        if len(x) == 4:
            k = check_int(x[3], op, f"{name}[3] (k)", minimum=0)
            want = _cdiv(k, 2) if packed else k
            if codes.shape[1] != want:
                raise ShapeError(
                    f"{op}: {name} codes have shape {codes.shape}, expected {(codes.shape[0], want)} for k = {k}"
                    + (" (packed e2m1, ceil(k/2) bytes per row)" if packed else "")
                )
        else:
            k = 2 * codes.shape[1] if packed else codes.shape[1]
        check_size_limit(k, op, f"{name}'s k")
        rows, cols = codes.shape[0], _cdiv(k, GEMM_BLOCK)
        given = scales
        if layout is None:
            s = _scales_u8(as_array(scales, op, f"{name}[1] (scales)"))
            if s.dtype != np.uint8:
                raise DtypeError(f"{op}: {name}.scales has dtype {s.dtype}, expected uint8 (E8M0 bytes)")
        else:
            try:
                s = unshuffle_scales(_scales_u8(scales), layout, (rows, cols))
            except MxrtError as e:
                raise type(e)(
                    f"{op}: {name}.scales does not fit {name}_scale_layout={layout!r} for {name} of shape "
                    f"({rows}, {k}) (scales [{rows}, {cols}]): {e}"
                ) from None
        q = MXArray(data=codes, scales=s, fmt=fmt, block_size=GEMM_BLOCK, axis=1, shape=(rows, k), scale_mode="given")
    else:
        raise DtypeError(
            f"{op}: argument '{name}' is a {type(x).__name__}, expected an MXArray or a tuple (codes, scales, fmt)"
            " or (codes, scales, fmt, k)"
        )
    data, s = np.asarray(q.data), np.asarray(q.scales)
    rows, k = q.shape
    want_data = (rows, _cdiv(k, 2) if q.fmt == "e2m1" else k)
    if data.dtype != np.uint8 or data.shape != want_data:
        raise ShapeError(f"{op}: {name}.data is {data.dtype}{data.shape}, expected uint8{want_data} for {q.fmt}")
    if s.dtype != np.uint8:
        raise DtypeError(f"{op}: {name}.scales has dtype {s.dtype}, expected uint8 (E8M0 bytes)")
    want_s = (rows, _cdiv(k, GEMM_BLOCK))
    if s.shape != want_s:
        raise ShapeError(
            f"{op}: {name}.scales has shape {s.shape}, expected {want_s} = "
            f"[{'m' if name == 'a' else 'n'}, ceil(k / 32)] for {name} of shape {q.shape}"
        )
    return q, given, layout


def _weight_layout(layout: object, op: str) -> str | None:
    return _layout_name(layout, "b_weight_layout", WEIGHT_LAYOUTS, "weight layout", op)


def _weight_operand(x: object, wl: str, scale_layout: object, op: str) -> tuple[MXArray, Any, str | None]:
    """``b`` given as raw pieces whose codes are stored in weight layout ``wl`` (:func:`mxrt.preshuffle_weight`'s
    ``[np_, kk]`` buffer). n is the row count of row-major scales, or ``np_`` with a preshuffled scale layout (whose
    storage does not tell n); k is the 4th item, else ``kk`` (fp8) or ``2 * kk`` (e2m1). Host codes are unshuffled
    here (the problem then holds row-major codes); device codes are checked from shape, dtype and flags only."""
    if isinstance(x, MXArray):
        raise LayoutError(
            f"{op}: argument 'b_weight_layout' is {wl!r} but 'b' is an MXArray, whose codes are row-major; expected b "
            "as raw pieces (codes, scales, fmt[, k]) with codes = mxrt.preshuffle_weight(...)"
        )
    if not (isinstance(x, tuple) and len(x) in (3, 4)):
        raise DtypeError(
            f"{op}: argument 'b' is a {type(x).__name__}, expected a tuple (codes, scales, fmt) or (codes, scales, "
            f"fmt, k) with codes in b_weight_layout={wl!r}"
        )
    codes, scales = x[0], x[1]
    fmt = _raw_fmt(x[2], "b", op)
    packed = fmt == "e2m1"
    device = is_device_array(codes)
    if device != is_device_array(scales):
        raise DtypeError(
            f"{op}: b mixes host and device arrays (codes {type(codes).__name__}, scales {type(scales).__name__}); "
            "expected both CuPy or both numpy"
        )
    if not device:
        codes = _host_codes(codes, "b", op)
    elif dtype_name(codes.dtype) != "uint8":
        raise DtypeError(f"{op}: b codes have dtype {codes.dtype}, expected uint8 element codes in layout {wl!r}")
    shape = tuple(int(v) for v in codes.shape)
    if len(shape) != 2 or shape[0] % 16 or shape[1] % 32:
        raise ShapeError(
            f"{op}: b codes have shape {shape}, expected a 2-D [ceil(n/16)*16, ceil(row bytes/32)*32] buffer "
            f"(b_weight_layout={wl!r}: mxrt.preshuffle_weight's output)"
        )
    np_, kk = shape
    k = check_int(x[3], op, "b[3] (k)", minimum=0) if len(x) == 4 else (2 * kk if packed else kk)
    check_size_limit(k, op, "b's k")
    row_bytes = _cdiv(k, 2) if packed else k
    if scale_layout is None:
        s_shape = tuple(int(v) for v in getattr(scales, "shape", np.shape(scales)))
        if len(s_shape) != 2:
            raise ShapeError(f"{op}: b.scales has shape {s_shape}, expected [n, ceil(k / 32)] (row-major scales)")
        n = s_shape[0]
    else:
        n = np_
    if weight_layout_shape(wl, n, row_bytes) != (np_, kk):
        raise ShapeError(
            f"{op}: b codes have shape {shape}, expected {weight_layout_shape(wl, n, row_bytes)} = "
            f"weight_layout_shape({wl!r}, n={n}, {row_bytes}) for b of shape ({n}, {k})"
            + (" (packed e2m1, ceil(k/2) bytes per row)" if packed else "")
            + ("; n is the row count of the row-major scales" if scale_layout is None else "")
        )
    if device:
        if not codes.flags.c_contiguous:
            raise LayoutError(
                f"{op}: b codes have strides {codes.strides} for shape {shape}: the GPU kernels need a C-contiguous "
                "array (mxrt makes no implicit device copy; pass cupy.ascontiguousarray)"
            )
        lay = _check_scale_layout(scale_layout, "b", op)
        _check_device_scales(scales, lay, n, _cdiv(k, GEMM_BLOCK), "b", op)
        return _given(codes, scales, fmt, n, k, lay), scales, lay
    plain = unshuffle_weight(codes, wl, (n, row_bytes))
    return _operand((plain, scales, fmt, k), "b", scale_layout, op)


def gemm_problem(
    a: object,
    b: object,
    *,
    out_dtype: object = "bfloat16",
    split_k: object = 1,
    deterministic: object = True,
    out: object = None,
    a_scale_layout: object = None,
    b_scale_layout: object = None,
    b_weight_layout: object = None,
    op: str = "gemm_mx",
    out_dtypes: tuple[str, ...] = GEMM_OUT_DTYPES,
) -> GemmProblem:
    """Validate the arguments of ``gemm_mx`` and return a :class:`GemmProblem` (typed errors otherwise).

    Check order (STYLE.md 5): operand types and formats, operand shapes and scale shapes (after unshuffling a
    preshuffled layout), K match, out_dtype, split_k / deterministic, ``out``. ``b_weight_layout``: b's codes
    are stored in that weight layout (:func:`_weight_operand`).
    """
    qa, sa, a_scale_layout = _operand(a, "a", a_scale_layout, op)
    wl = _weight_layout(b_weight_layout, op)
    if wl is None:
        qb, sb, b_scale_layout = _operand(b, "b", b_scale_layout, op)
    else:
        qb, sb, b_scale_layout = _weight_operand(b, wl, b_scale_layout, op)
    pair = (qa.fmt, qb.fmt)
    if pair not in GEMM_FORMAT_PAIRS:
        raise DtypeError(
            f"{op}: formats (a.fmt, b.fmt) are {pair}, expected one of {list(GEMM_FORMAT_PAIRS)} "
            "(MXFP8 e4m3/e5m2 pairs, e2m1 x e2m1, e4m3 x e2m1 in either order)"
        )
    (m, ka), (n, kb) = qa.shape, qb.shape
    if ka != kb:
        raise ShapeError(
            f"{op}: a has k = {ka} (shape {qa.shape}) but b has k = {kb} (shape {qb.shape}), expected equal K"
        )
    check_size_limit(m * n, op, f"the result d [m, n] = [{m}, {n}]: its element count")
    dt = _out_dtype(out_dtype, op, out_dtypes)
    if isinstance(split_k, (bool, np.bool_)) or not isinstance(split_k, (int, np.integer)):
        raise DtypeError(f"{op}: argument 'split_k' is {split_k!r}, expected a positive int")
    blocks = _cdiv(ka, GEMM_BLOCK)
    if split_k < 1 or split_k > max(1, blocks):
        raise ShapeError(
            f"{op}: argument 'split_k' is {split_k}, expected 1 <= split_k <= {max(1, blocks)} = max(1, ceil(k / 32)) "
            f"for k = {ka} (splits fall on 32-element scale boundaries)"
        )
    if not isinstance(deterministic, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'deterministic' is {deterministic!r}, expected a bool")
    device = is_device_array(qa.data)
    if device != is_device_array(qb.data):
        raise DtypeError(
            f"{op}: a is {'on the device (CuPy)' if device else 'a host (numpy) array'} but b is "
            f"{'on the device (CuPy)' if not device else 'a host (numpy) array'}; expected both on the same side "
            "(mxrt makes no implicit transfer: cupy.asarray(...) or .get())"
        )
    if out is not None and device:
        if not is_device_array(out):
            raise DtypeError(
                f"{op}: argument 'out' is a {type(out).__name__} but a and b are CuPy arrays; expected a CuPy array "
                "(mxrt makes no implicit transfer)"
            )
        allowed = ("uint16", "bfloat16") if dt == _DTYPES["bfloat16"] else (dt.name,)
        if dtype_name(out.dtype) not in allowed:
            raise DtypeError(
                f"{op}: argument 'out' is a CuPy array of dtype {out.dtype}, expected {' or '.join(allowed)} for "
                f"out_dtype {dt}" + (" (bfloat16 bits in uint16: CuPy has no bfloat16)" if len(allowed) == 2 else "")
            )
        if tuple(out.shape) != (m, n):
            raise ShapeError(f"{op}: argument 'out' has shape {tuple(out.shape)}, expected {(m, n)} = [m, n]")
        if not out.flags.c_contiguous:
            raise LayoutError(f"{op}: argument 'out' has strides {out.strides}, expected a C-contiguous CuPy array")
    elif out is not None:
        if is_device_array(out):
            raise DtypeError(
                f"{op}: argument 'out' is a CuPy array but a and b are numpy arrays; expected a numpy array "
                "(mxrt makes no implicit transfer)"
            )
        if not isinstance(out, np.ndarray):
            raise DtypeError(f"{op}: argument 'out' is a {type(out).__name__}, expected a numpy array or None")
        if out.dtype != dt:
            raise DtypeError(f"{op}: argument 'out' has dtype {out.dtype}, expected {dt} (out_dtype)")
        if out.shape != (m, n):
            raise ShapeError(f"{op}: argument 'out' has shape {out.shape}, expected {(m, n)} = [m, n]")
        if not out.flags.writeable:
            raise ShapeError(f"{op}: argument 'out' is read-only, expected a writeable array")
    return GemmProblem(
        op=op,
        m=m,
        n=n,
        k=ka,
        a=qa,
        b=qb,
        a_fmt=qa.fmt,
        b_fmt=qb.fmt,
        a_scale_layout=a_scale_layout,  # type: ignore[arg-type]
        b_scale_layout=b_scale_layout,  # type: ignore[arg-type]
        a_scales_given=sa,
        b_scales_given=sb,
        out_dtype=dt,
        split_k=int(split_k),
        deterministic=bool(deterministic),
        out=out,
        device=device,
        b_weight_layout=wl,
    )
