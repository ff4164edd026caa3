"""Public quantize / dequantize ops: numpy twin or GPU kernel, chosen explicitly here (one dispatch layer).

Flow of every op: arrays in (:mod:`mxrt.api.interop`, zero-copy) -> validation once into a frozen argument object
-> :func:`mxrt.api.dispatch.use_gpu` -> the numpy twin (:mod:`mxrt.formats`) or the GPU op (:mod:`mxrt.ops`)
-> results out in the caller's kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedArchError
from ..formats import blockscale
from ..formats import mx as mx_np
from ..formats.codecs import check_float_array, to_float32_checked
from ..formats.mx import MXArray, MXDual
from ..formats.scales import ScaleMode
from ..layouts import scales as scales_np
from ..ops import quant as quant_ops
from . import interop
from .dispatch import host_only, use_gpu


def _host_input(x: Any, op: str) -> np.ndarray:
    """A host float array, validated; float64 is checked to fit float32 (a finite value beyond it is a typed
    error, whichever backend runs) and rounded to float32 once."""
    x = check_float_array(x, op)
    if x.dtype == np.float64:
        x = to_float32_checked(x, op)
    return x


_ARGS: dict = {}
_PLAIN = (str, int, type(None))


def _quantize_args(op, ndim, fmt, block_size, axis, scale_mode, scale_layout):
    """``mx_np.quantize_args``, memoised for plain argument values (str / int / None, compared with their types,
    so ``True`` never stands for ``1``): the small-call dispatch validates a given argument set once."""
    vals = (fmt, block_size, axis, scale_mode, scale_layout)
    if not all(type(v) in _PLAIN for v in vals):
        return mx_np.quantize_args(op, ndim, *vals)
    key = (op, ndim, *vals, *(type(v) for v in vals))
    hit = _ARGS.get(key)
    if hit is None:
        hit = mx_np.quantize_args(op, ndim, *vals)
        if len(_ARGS) < 1024:
            _ARGS[key] = hit
    return hit


def quantize_mx(
    x: Any,
    fmt: str = "e4m3",
    *,
    block_size: int = 32,
    axis: int = -1,
    scale_mode: str | ScaleMode = "rceil",
    backend: str = "auto",
    scale_layout: str | None = None,
) -> MXArray:
    op = "quantize_mx"
    x, caller = interop.import_array(x, op, "x")
    if not caller.device:
        x = _host_input(x, op)
        mx_np.check_x_rank(x, op)
    args = _quantize_args(op, x.ndim, fmt, block_size, axis, scale_mode, scale_layout)
    if use_gpu(op, backend, caller.device, lambda: quant_ops.quantize_unsupported(x, args)):
        q = quant_ops.quantize_mx_gpu(x, args)
    else:
        q = scales_np.with_scale_layout(mx_np.quantize_with(x, args), args.scale_layout)
    return interop.export_mx(q, caller)


def quantize_mx_dual(
    x: Any,
    fmt: str = "e4m3",
    *,
    block_size: int = 32,
    scale_mode: str | ScaleMode = "rceil",
    block_2d: bool = False,
    backend: str = "auto",
    scale_layout: str | None = None,
) -> MXDual:
    op = "quantize_mx_dual"
    x, caller = interop.import_array(x, op, "x")
    if not caller.device:
        x = _host_input(x, op)
    args = mx_np.dual_args(op, tuple(x.shape), fmt, scale_mode, block_size, block_2d, scale_layout)
    layout = args.scale_layout
    if use_gpu(op, backend, caller.device, lambda: quant_ops.quantize_unsupported(x, args)):
        d = quant_ops.quantize_mx_dual_gpu(x, args)
    else:
        d = mx_np.quantize_dual_with(x, args)
        d = MXDual(scales_np.with_scale_layout(d.row, layout), scales_np.with_scale_layout(d.col, layout))
    return interop.export_mx(d, caller)


def dequantize_mx(q: MXArray, dtype: Any = np.float32) -> Any:
    op = "dequantize_mx"
    native, caller = interop.import_mx(q, op, "q")
    if caller.device:
        raise UnsupportedArchError(
            f"{op}: argument 'q' holds GPU arrays, but dequantize_mx runs on the host (the exact numpy twin); copy "
            "the fields to the host first (mxrt.convert(q, 'numpy') after .get() / .cpu(), or q.data.get())"
        )
    q = scales_np.without_scale_layout(mx_np.check_mxarray(native, op), op)
    return interop.export(mx_np.dequantize_mx(q, dtype), caller)


def per_token_cast_to_fp8(x: Any, use_ue8m0: bool, gran_k: int = 128, *, backend: str = "auto") -> Any:
    op = "per_token_cast_to_fp8"
    x, caller = interop.import_array(x, op, "x")
    host_only(op, backend, caller.device)
    q, sf = blockscale.per_token_cast_to_fp8(x, use_ue8m0, gran_k)
    return interop.export(q, caller, "codes:e4m3"), interop.export(sf, caller)


def per_block_cast_to_fp8(x: Any, use_ue8m0: bool, gran_k: int = 128, *, backend: str = "auto") -> Any:
    op = "per_block_cast_to_fp8"
    x, caller = interop.import_array(x, op, "x")
    host_only(op, backend, caller.device)
    q, sf = blockscale.per_block_cast_to_fp8(x, use_ue8m0, gran_k)
    return interop.export(q, caller, "codes:e4m3"), interop.export(sf, caller)


quantize_mx.__doc__ = mx_np.quantize_mx.__doc__.replace(
    "    scale_layout : None (default)",
    '    backend : ``"auto"`` (GPU when a device and a kernel are present, else numpy), ``"numpy"`` or ``"gpu"``;\n'
    "        a GPU input (CuPy, CUDA torch tensor) always runs on the GPU.\n    scale_layout : None (default)",
)
quantize_mx_dual.__doc__ = mx_np.quantize_mx_dual.__doc__
dequantize_mx.__doc__ = mx_np.dequantize_mx.__doc__
per_token_cast_to_fp8.__doc__ = blockscale.per_token_cast_to_fp8.__doc__
per_block_cast_to_fp8.__doc__ = blockscale.per_block_cast_to_fp8.__doc__
