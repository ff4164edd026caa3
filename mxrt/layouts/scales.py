"""Scale preshuffles: E8M0 byte matrices ``s: uint8 [rows, cols]`` into the layouts MX GEMM kernels read.

``rows`` is M or N, ``cols = ceil(k / 32)``. Every layout pads ``s`` to its tile with ``pad_value`` (default 127,
the neutral scale 2^0) and ships its inverse. Index maps (MX_REFERENCE.md section 3) are written with ``S`` the
padded matrix of shape ``scale_layout_shape(layout, rows, cols) = (sm, sn)`` and ``o`` the offset in the
layout's storage; :func:`scale_index` evaluates them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

from ..codes import SCALE_LAYOUT_CODES
from ..errors import DtypeError, MxrtError, ShapeError, UnknownLayoutError, UnknownNameError
from ._check import align, as_array, check_alloc, check_int

#: Scale layout names accepted by :func:`preshuffle_scales`.
SCALE_LAYOUTS = tuple(name for name in SCALE_LAYOUT_CODES if name is not None)

# (row tile, col tile) each layout pads to
_TILES = {"aiter32x8": (256, 8), "turbo16x4": (16, 4), "cublas128x4": (128, 4), "deepgemm_ue8m0": (4, 4)}


def check_scale_layout(layout: object, op: str) -> str:
    if not isinstance(layout, str) or layout not in SCALE_LAYOUTS:
        raise UnknownLayoutError(
            f"{op}: argument 'layout' is {layout!r}, an unknown scale layout; expected one of {list(SCALE_LAYOUTS)}"
        )
    return layout


def scale_layout_shape(layout: str, rows: int, cols: int) -> tuple[int, int]:
    """Padded byte-matrix shape ``(sm, sn)`` that ``layout`` stores for scales ``[rows, cols]``.

    - ``"aiter32x8"``: ``(ceil(rows/256)*256, ceil(cols/8)*8)``
    - ``"turbo16x4"``: ``(ceil(rows/16)*16, ceil(cols/4)*4)``
    - ``"cublas128x4"``: ``(ceil(rows/128)*128, ceil(cols/4)*4)``
    - ``"deepgemm_ue8m0"``: ``(ceil(rows/4)*4, ceil(cols/4)*4)`` (bytes; stored as int32 ``[sn/4, sm]``)

    The storage holds ``sm * sn`` bytes (uint32 elements for ``turbo16x4`` with ``dtype=np.uint32``).
    """
    return _layout_shape(layout, rows, cols, "scale_layout_shape", ("rows", "cols"))


def _layout_shape(layout: object, rows: object, cols: object, op: str, args: tuple[str, str]) -> tuple[int, int]:
    layout = check_scale_layout(layout, op)
    r = check_int(rows, op, args[0], minimum=0)
    c = check_int(cols, op, args[1], minimum=0)
    tr, tc = _TILES[layout]
    return align(r, tr), align(c, tc)


def _check_scales(s: object, op: str) -> np.ndarray:
    a = as_array(s, op, "s")
    if a.dtype == np.dtype(ml_dtypes.float8_e8m0fnu):
        a = a.view(np.uint8)
    if a.dtype != np.uint8:
        raise DtypeError(f"{op}: argument 's' has dtype {a.dtype}, expected uint8 (E8M0 bytes) or float8_e8m0fnu")
    if a.ndim != 2:
        raise ShapeError(f"{op}: argument 's' has shape {a.shape}, expected a 2-D [rows, cols] scale matrix")
    return a


def check_preshuffle_options(layout: object, pad_value: object, dtype: Any, op: str) -> tuple[str, int, np.dtype]:
    """Validated ``(layout, pad, out_dtype)`` of :func:`preshuffle_scales` (shared with its GPU twin)."""
    layout = check_scale_layout(layout, op)
    pad = check_int(pad_value, op, "pad_value", minimum=0)
    if pad > 255:
        raise ShapeError(f"{op}: argument 'pad_value' is {pad}, expected a byte in [0, 255]")
    default = np.dtype(np.int32) if layout == "deepgemm_ue8m0" else np.dtype(np.uint8)
    try:
        out_dtype = default if dtype is None else np.dtype(dtype)
    except (TypeError, ValueError):
        if isinstance(dtype, str):
            raise UnknownNameError(f"{op}: argument 'dtype' is {dtype!r}, an unknown dtype name") from None
        raise DtypeError(f"{op}: argument 'dtype' is {dtype!r}, expected None or a numpy dtype") from None
    allowed = (default, np.dtype(np.uint32)) if layout == "turbo16x4" else (default,)
    if out_dtype not in allowed:
        raise DtypeError(
            f"{op}: argument 'dtype' is {out_dtype} for layout {layout!r}, expected one of {[str(d) for d in allowed]}"
        )
    return layout, pad, out_dtype


def check_unshuffle_shape(shape: object, op: str) -> tuple[int, int]:
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ShapeError(f"{op}: argument 'shape' is {shape!r}, expected (rows, cols)")
    return check_int(shape[0], op, "shape[0]", minimum=0), check_int(shape[1], op, "shape[1]", minimum=0)


def _storage_shape(layout: str, rows: int, cols: int, op: str, what: str) -> tuple[int, int]:
    """The layout's padded ``(sm, sn)``, whose byte count must be within the size limit (checked before use)."""
    sm, sn = scale_layout_shape(layout, rows, cols)
    check_alloc((sm, sn), op, what)
    return sm, sn


def _pad(s: np.ndarray, shape: tuple[int, int], pad_value: int) -> np.ndarray:
    out = np.full(shape, pad_value, dtype=np.uint8)
    out[: s.shape[0], : s.shape[1]] = s
    return out


def preshuffle_scales(
    s: np.ndarray,
    layout: str,
    *,
    pad_value: int = 127,
    dtype: Any = None,
) -> np.ndarray:
    """Pad E8M0 scales ``s: uint8 [rows, cols]`` to the layout's tile and permute them into its storage order.

    Index maps, with ``S`` padded to ``(sm, sn) = scale_layout_shape(layout, rows, cols)`` (MX_REFERENCE.md 3a-3e):

    ``"aiter32x8"`` (aiter ``shuffle_scale`` / ``e8m0_shuffle``, Primus-Turbo ``compute_shuffle_scale_index``,
    FlyDSL/wave preshuffled scales): view ``S`` as ``[sm/32, 2, 16, sn/8, 2, 4]`` indexed
    ``(i0, i1, i2, i3, i4, i5)`` with ``r = 32*i0 + 16*i1 + i2``, ``c = 8*i3 + 4*i4 + i5``, permute
    ``(0, 3, 5, 2, 4, 1)``: ``o = i0*(sn/8)*256 + i3*256 + i5*64 + i2*4 + i4*2 + i1``. Returns uint8 ``[sm, sn]``
    (the full padded buffer, row-major storage ``o``).

    ``"turbo16x4"`` (Primus-Turbo ``preshuffle_scale_16x4``): ``o = (r//16)*16*sn + (c//4)*64 + (c%4)*16 + r%16``,
    each 16x4 tile column-major, tiles along K per 16-row band. Returns ``[sm, sn]`` uint8, or the zero-extended
    uint32 form the kernel reads with ``dtype=np.uint32``.

    ``"cublas128x4"`` (cuBLAS / TransformerEngine ``gemm_swizzled_scale_idx`` / torchao ``to_blocked``):
    ``o = ((r//128)*(sn/4) + c//4)*512 + (r%32)*16 + ((r%128)//32)*4 + c%4``, 512-byte tiles row-block-major.
    Returns uint8 ``[sm, sn]``; ``.ravel()`` is torchao's flat ``to_blocked`` output (with 127 instead of 0 padding
    unless ``pad_value=0``).

    ``"deepgemm_ue8m0"`` (DeepGEMM ``get_mn_major_tma_aligned_packed_ue8m0_tensor``): four scales per int32
    along K, ``P[r, t] = S[r,4t] | S[r,4t+1]<<8 | S[r,4t+2]<<16 | S[r,4t+3]<<24``, stored MN-major: ``P[r, t]`` is
    int32 element ``t*sm + r`` (byte ``o = 4*(t*sm + r) + c%4``). Returns the int32 view ``[rows, sn/4]`` with
    strides ``(4, 4*sm)`` bytes over a storage of ``sm`` rows; padding rows exist in the storage only. DeepGEMM
    pads with 0: pass ``pad_value=0`` for its bytes.

    Parameters
    ----------
    s : uint8 (or float8_e8m0fnu) ``[rows, cols]``, any ``rows``/``cols`` (including 0).
    layout : one of :data:`SCALE_LAYOUTS`.
    pad_value : byte written to every padding position (0..255; 127 = scale 1.0).
    dtype : output dtype; only ``"turbo16x4"`` accepts ``np.uint32`` besides its default.
    """
    op = "preshuffle_scales"
    s = _check_scales(s, op)
    layout, pad, out_dtype = check_preshuffle_options(layout, pad_value, dtype, op)
    rows, cols = s.shape
    sm, sn = _storage_shape(layout, rows, cols, op, f"the padded storage of layout {layout!r}")
    S = _pad(s, (sm, sn), pad)
    if layout == "aiter32x8":
        return S.reshape(sm // 32, 2, 16, sn // 8, 2, 4).transpose(0, 3, 5, 2, 4, 1).reshape(sm, sn)
    if layout == "turbo16x4":
        out = S.reshape(sm // 16, 16, sn // 4, 4).transpose(0, 2, 3, 1).reshape(sm, sn)
        return out.astype(out_dtype)
    if layout == "cublas128x4":
        return S.reshape(sm // 128, 4, 32, sn // 4, 4).transpose(0, 3, 2, 1, 4).reshape(sm, sn)
    # deepgemm_ue8m0: little-endian pack along K, then an MN-major (transposed contiguous) int32 storage
    packed = np.ascontiguousarray(S).view("<u4").astype(np.uint32).view(np.int32)  # [sm, sn/4]
    storage = np.empty((sn // 4, sm), dtype=np.int32)  # fresh buffer: strides (4*sm, 4) even for size-1 dims
    storage[...] = packed.T  # element (t, r) at int32 offset t*sm + r
    return storage.T[:rows]


def _byte_storage(p: object, layout: str, shape: tuple[int, int], op: str) -> np.ndarray:
    """The layout's storage as uint8 ``[sm, sn]`` in storage order, validated against ``shape``."""
    rows, cols = shape
    sm, sn = _storage_shape(layout, rows, cols, op, f"the padded storage of layout {layout!r} for argument 'shape'")
    a = as_array(p, op, "p")
    if layout == "deepgemm_ue8m0":
        if a.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
            raise DtypeError(f"{op}: argument 'p' has dtype {a.dtype}, expected int32 for layout {layout!r}")
        if a.shape != (rows, sn // 4):
            raise ShapeError(
                f"{op}: argument 'p' has shape {a.shape}, expected {(rows, sn // 4)} = [rows, ceil(cols/4)] "
                f"for shape {shape}"
            )
        # the logical bytes, row-major: byte j of P[r, t] is S[r, 4t + j]
        return np.ascontiguousarray(a.astype(np.uint32), dtype="<u4").view(np.uint8).reshape(rows, sn)
    if a.dtype == np.uint32 and layout == "turbo16x4":
        if a.size and a.max() > 255:
            raise ShapeError(f"{op}: argument 'p' holds {a.max()}, expected zero-extended bytes (<= 255)")
        a = a.astype(np.uint8)
    if a.dtype != np.uint8:
        raise DtypeError(f"{op}: argument 'p' has dtype {a.dtype}, expected uint8 for layout {layout!r}")
    if a.shape not in ((sm, sn), (sm * sn,)):
        raise ShapeError(
            f"{op}: argument 'p' has shape {a.shape}, expected {(sm, sn)} (or flat ({sm * sn},)) = "
            f"scale_layout_shape({layout!r}, {rows}, {cols})"
        )
    return a.reshape(sm, sn)


def unshuffle_scales(p: np.ndarray, layout: str, shape: tuple[int, int]) -> np.ndarray:
    """Invert :func:`preshuffle_scales`: the layout's buffer back to ``uint8 [rows, cols]`` (padding dropped).

    ``shape`` is the original ``(rows, cols)``. ``p`` is what :func:`preshuffle_scales` returned: uint8
    ``[sm, sn]`` (or its flat ``[sm*sn]`` form; uint32 accepted for ``"turbo16x4"``), or the int32
    ``[rows, ceil(cols/4)]`` view for ``"deepgemm_ue8m0"`` (read by value, so any strides work).
    """
    op = "unshuffle_scales"
    layout = check_scale_layout(layout, op)
    rows, cols = check_unshuffle_shape(shape, op)
    P = _byte_storage(p, layout, (rows, cols), op)
    sm, sn = P.shape
    if layout == "aiter32x8":
        S = P.reshape(sm // 32, sn // 8, 4, 16, 2, 2).transpose(0, 5, 3, 1, 4, 2).reshape(sm, sn)
    elif layout == "turbo16x4":
        S = P.reshape(sm // 16, sn // 4, 4, 16).transpose(0, 3, 1, 2).reshape(sm, sn)
    elif layout == "cublas128x4":
        S = P.reshape(sm // 128, sn // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(sm, sn)
    else:
        S = P
    return np.ascontiguousarray(S[:rows, :cols])


def scale_index(layout: str, row: Any, col: Any, shape: tuple[int, int]) -> np.ndarray:
    """Offset of scale ``S[row, col]`` in ``layout``'s storage, for scales of logical ``shape = (rows, cols)``.

    The offset counts elements of the flat storage: bytes of ``preshuffle_scales(...).ravel()`` (uint32
    elements for ``turbo16x4`` with ``dtype=np.uint32``); for ``"deepgemm_ue8m0"`` the byte offset in the
    little-endian int32 MN-major storage, ``4*((col//4)*sm + row) + col%4``. ``row``/``col`` broadcast and may
    address padding positions (``row < sm``, ``col < sn``). Returns int64. The formulas are those of
    :func:`preshuffle_scales`.
    """
    op = "scale_index"
    layout = check_scale_layout(layout, op)
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ShapeError(f"{op}: argument 'shape' is {shape!r}, expected (rows, cols)")
    sm, sn = _layout_shape(layout, shape[0], shape[1], op, ("shape[0]", "shape[1]"))
    r = as_array(row, op, "row")
    c = as_array(col, op, "col")
    for name, v, hi in (("row", r, sm), ("col", c, sn)):
        if v.dtype.kind not in "iu":
            raise DtypeError(f"{op}: argument '{name}' has dtype {v.dtype}, expected an integer dtype")
        if v.size and (v.min() < 0 or v.max() >= hi):
            raise ShapeError(
                f"{op}: argument '{name}' has values in [{v.min()}, {v.max()}], expected [0, {hi}) for the padded "
                f"shape {(sm, sn)} of layout {layout!r}"
            )
    for name, v in (("row", r), ("col", c)):
        if v.ndim > 32:  # np.broadcast_shapes' limit
            raise ShapeError(f"{op}: argument '{name}' has {v.ndim} dims, expected at most 32")
    try:
        check_alloc(np.broadcast_shapes(r.shape, c.shape), op, "the broadcast of row and col")
    except ValueError:
        raise ShapeError(
            f"{op}: arguments 'row' {r.shape} and 'col' {c.shape} do not broadcast, expected broadcastable shapes"
        ) from None
    r = r.astype(np.int64)
    c = c.astype(np.int64)
    if layout == "aiter32x8":
        i0, i1, i2 = r // 32, (r // 16) % 2, r % 16
        i3, i4, i5 = c // 8, (c // 4) % 2, c % 4
        return i0 * (sn // 8) * 256 + i3 * 256 + i5 * 64 + i2 * 4 + i4 * 2 + i1
    if layout == "turbo16x4":
        return (r // 16) * 16 * sn + (c // 4) * 64 + (c % 4) * 16 + r % 16
    if layout == "cublas128x4":
        return ((r // 128) * (sn // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    return 4 * ((c // 4) * sm + r) + c % 4


def with_scale_layout(q: Any, layout: str | None) -> Any:
    """The numpy MXArray ``q`` (row-major scales) with its scales preshuffled into ``layout`` (None: ``q``)."""
    if layout is None:
        return q
    return dataclasses.replace(q, scales=preshuffle_scales(q.scales, layout), scale_layout=layout)


def without_scale_layout(q: Any, op: str) -> Any:
    """The numpy MXArray ``q`` (validated geometry) with row-major scales: its preshuffled scales unshuffled."""
    if q.scale_layout is None:
        return q
    try:
        plain = unshuffle_scales(q.scales, q.scale_layout, q.scale_shape)
    except MxrtError as e:  # name the op that was called and the argument, keep the class and the detail
        raise type(e)(f"{op}: q.scales does not fit q.scale_layout={q.scale_layout!r}: {e}") from None
    return dataclasses.replace(q, scales=plain, scale_layout=None)
