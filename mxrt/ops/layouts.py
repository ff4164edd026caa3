"""GPU twins of :func:`mxrt.preshuffle_scales` and :func:`mxrt.unshuffle_scales` (kernels_src/layout/).

CuPy arrays in -> CuPy arrays out, on the current stream, with the shapes, dtypes and strides of the numpy
results (for ``"deepgemm_ue8m0"`` the int32 view ``[rows, sn/4]`` with strides ``(4, 4*sm)`` over a fresh
MN-major storage of ``sm`` rows). numpy in -> numpy out (uploaded and downloaded here). Results are bit-identical
to the numpy reference: every storage element, padding included, is written by the kernel.

A CuPy ``s`` may have any strides (the kernel gathers through them). A CuPy ``p`` for :func:`unshuffle_scales_gpu`
must be C-contiguous, except the ``"deepgemm_ue8m0"`` int32 view, which is read through its strides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import is_device_array
from ..errors import DtypeError, LayoutError, ShapeError
from ..layouts.scales import (
    _byte_storage,
    _check_scales,
    check_preshuffle_options,
    check_scale_layout,
    check_unshuffle_shape,
    scale_layout_shape,
)
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import layout_kernels
from .kernels import select

_INDEX_LIMIT = 2**31  # the kernels address the storage with 32-bit offsets


def _empty(shape: tuple[int, ...], dtype: Any) -> Any:
    """Output allocation (poisoned inside mxrt.runtime.debug(poison=...))."""
    return alloc.empty(shape, dtype)


def _check_limit(op: str, layout: str, sm: int, sn: int) -> None:
    if sm * sn >= _INDEX_LIMIT:
        raise ShapeError(
            f"{op}: layout {layout!r} stores {sm} x {sn} = {sm * sn} scales, expected fewer than 2^31: the kernels "
            "use 32-bit offsets"
        )


def layout_config(n_threads: int) -> LaunchConfig:
    """One thread per work item, ``LAYOUT_THREADS`` per block."""
    threads = layout_kernels.LAYOUT_THREADS
    return LaunchConfig(grid=(max(1, -(-n_threads // threads)), 1, 1), block=(threads, 1, 1))


def _kernel(op: str, layout: str, wide: bool) -> Any:
    arch = get_arch()
    d = defines(LAYOUT=codes.SCALE_LAYOUT_CODES[layout], WIDE=int(wide), THREADS=layout_kernels.LAYOUT_THREADS)
    return build(select(op, arch.target), d, arch)


# ---- preshuffle_scales ---------------------------------------------------------------------------------------


def _device_scales(op: str, s: Any) -> Any:
    if str(s.dtype) != "uint8":
        raise DtypeError(
            f"{op}: argument 's' is a CuPy array of dtype {s.dtype}, expected uint8 (E8M0 bytes; CuPy has no "
            "float8_e8m0fnu, view such data as uint8)"
        )
    if s.ndim != 2:
        raise ShapeError(f"{op}: argument 's' has shape {tuple(s.shape)}, expected a 2-D [rows, cols] scale matrix")
    return s


def preshuffle_scales_gpu(s: Any, layout: str, *, pad_value: int = 127, dtype: Any = None) -> Any:
    """GPU twin of :func:`mxrt.preshuffle_scales` (same arguments, bit-identical result)."""
    op = "preshuffle_scales"
    device_in = is_device_array(s)
    s = _device_scales(op, s) if device_in else _check_scales(s, op)
    layout, pad, out_dtype = check_preshuffle_options(layout, pad_value, dtype, op)
    rows, cols = (int(v) for v in s.shape)
    sm, sn = scale_layout_shape(layout, rows, cols)
    _check_limit(op, layout, sm, sn)
    if not device_in:
        import cupy

        s = cupy.asarray(np.ascontiguousarray(s))
    wide = layout == "turbo16x4" and out_dtype == np.dtype(np.uint32)
    deepgemm = layout == "deepgemm_ue8m0"
    # deepgemm_ue8m0: a fresh MN-major int32 storage [sn/4, sm]; its byte o is the kernel's storage offset o
    out = _empty((sn // 4, sm) if deepgemm else (sm, sn), np.int32 if deepgemm else out_dtype)
    if sm and sn:
        args = (s, out, np.int32(rows), np.int32(cols), np.int32(sm), np.int32(sn))
        args += (np.int64(s.strides[0]), np.int64(s.strides[1]), np.int32(pad))
        launch(op, _kernel(op, layout, wide), layout_config(sm * sn // 4), args)
    if not device_in:
        out = out.get()
    return out.T[:rows] if deepgemm else out


def preshuffle_unsupported(s: Any, layout: Any = None, **_: Any) -> str | None:
    if is_device_array(s) or not isinstance(layout, str) or layout not in codes.SCALE_LAYOUT_CODES:
        return None  # device inputs and bad arguments get their typed error from the GPU op
    shape = np.shape(s)
    if len(shape) == 2:
        sm, sn = scale_layout_shape(layout, shape[0], shape[1])
        if sm * sn >= _INDEX_LIMIT:
            return f"the layout stores {sm * sn} scales, beyond the kernels' 32-bit offsets"
    return None


# ---- unshuffle_scales ----------------------------------------------------------------------------------------


def _check_device_storage(op: str, p: Any, layout: str, rows: int, cols: int) -> tuple[bool, int, int]:
    """Validate a CuPy ``p`` like ``mxrt.layouts.scales._byte_storage``; returns (wide, row stride, col stride)."""
    sm, sn = scale_layout_shape(layout, rows, cols)
    dt = str(p.dtype)
    if layout == "deepgemm_ue8m0":
        if dt not in ("int32", "uint32"):
            raise DtypeError(f"{op}: argument 'p' has dtype {dt}, expected int32 for layout {layout!r}")
        if tuple(p.shape) != (rows, sn // 4):
            raise ShapeError(
                f"{op}: argument 'p' has shape {tuple(p.shape)}, expected {(rows, sn // 4)} = [rows, ceil(cols/4)] "
                f"for shape {(rows, cols)}"
            )
        return False, int(p.strides[0]), int(p.strides[1])
    wide = dt == "uint32" and layout == "turbo16x4"
    if dt != "uint8" and not wide:
        raise DtypeError(f"{op}: argument 'p' has dtype {dt}, expected uint8 for layout {layout!r}")
    if tuple(p.shape) not in ((sm, sn), (sm * sn,)):
        raise ShapeError(
            f"{op}: argument 'p' has shape {tuple(p.shape)}, expected {(sm, sn)} (or flat ({sm * sn},)) = "
            f"scale_layout_shape({layout!r}, {rows}, {cols})"
        )
    if not p.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument 'p' has strides {p.strides} for shape {tuple(p.shape)}: the GPU kernel reads a "
            "C-contiguous storage (mxrt makes no implicit device copy; pass cupy.ascontiguousarray(p))"
        )
    if wide and p.size and int(p.max()) > 255:  # the one device-to-host read: the uint32 form's value check
        raise ShapeError(f"{op}: argument 'p' holds {int(p.max())}, expected zero-extended bytes (<= 255)")
    return wide, 0, 0


def unshuffle_scales_gpu(p: Any, layout: str, shape: tuple[int, int]) -> Any:
    """GPU twin of :func:`mxrt.unshuffle_scales`: ``uint8 [rows, cols]`` gathered through the forward index map.

    A CuPy ``p`` in the zero-extended uint32 form of ``"turbo16x4"`` is checked for values > 255 with one
    device reduction read back to the host (the numpy twin raises on them); every other input is validated from
    its shape and dtype alone.
    """
    op = "unshuffle_scales"
    layout = check_scale_layout(layout, op)
    rows, cols = check_unshuffle_shape(shape, op)
    sm, sn = scale_layout_shape(layout, rows, cols)
    _check_limit(op, layout, sm, sn)
    device_in = is_device_array(p)
    if not device_in:
        import cupy

        _byte_storage(p, layout, (rows, cols), op)  # the numpy twin's checks, values included
        host = np.asarray(p)
        if layout == "deepgemm_ue8m0":
            host = host.astype(np.int32)  # values (uint32 wraps to the same bits)
        p = cupy.asarray(np.ascontiguousarray(host))
    wide, p_row, p_col = _check_device_storage(op, p, layout, rows, cols)
    out = _empty((rows, cols), np.uint8)
    if rows and cols:
        args = (p, out, np.int32(rows), np.int32(cols), np.int32(sm), np.int32(sn), np.int64(p_row), np.int64(p_col))
        launch(op, _kernel(op, layout, wide), layout_config(rows * cols), args)
    return out if device_in else out.get()


def unshuffle_unsupported(p: Any, layout: Any = None, shape: Any = None, **_: Any) -> str | None:
    return None  # every layout and shape below 2^31 scales (a typed error above) has a kernel
