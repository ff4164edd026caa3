"""Public quantize / dequantize ops: numpy twin or GPU kernel, chosen explicitly here (one dispatch layer).

Flow of every op: arrays in (:mod:`mxrt.api.interop`, zero-copy) -> validation once into a frozen argument object
-> :func:`mxrt.api.dispatch.use_gpu` -> the numpy twin (:mod:`mxrt.formats`) or the GPU op (:mod:`mxrt.ops`)
-> results out in the caller's kind.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .._kinds import is_device_array
from ..formats import blockscale
from ..formats import mx as mx_np
from ..formats.codecs import check_float_array, to_float32_checked
from ..formats.mx import FP8_CODE_DTYPES, MXArray, MXDual
from ..formats.scales import ScaleMode
from ..layouts import scales as scales_np
from ..ops import dequant as dequant_ops
from ..ops import quant as quant_ops
from ..runtime import alloc
from ..runtime.arrays import torch_on_legacy_streams
from ..runtime.graph_memory import graph_safe
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


# ---- quantize_mx plans: the small-call dispatch (issue 9, host overhead) -------------------------------------
# A call on a CuPy array (or a CUDA torch tensor) with plain arguments (str / int / None, compared with their
# types) is described by the array's dtype, shape, strides, 16-byte alignment and device and the arguments; a key
# that validated and ran once reuses the prepared kernel launch (mxrt.ops.quant.PreparedQuantize). backend 'auto'
# and 'gpu' mean the same for a device input. A planned torch call allocates its outputs with torch (same shapes,
# dtypes and views as the unplanned route's DLPack export), only without a scale layout, while CuPy and torch are
# both on the legacy default stream and outside mxrt.runtime.debug (see mxrt.api.gemm).

_QPLANS: dict[tuple, Any] = {}
_QPLANS_KEPT = 512


def _quant_key(x: Any, fmt: Any, block_size: Any, axis: Any, scale_mode: Any, backend: Any, layout: Any) -> Any:
    if type(backend) is not str or backend not in ("auto", "gpu"):
        return None
    types = (type(fmt), type(block_size), type(axis), type(scale_mode), type(layout))
    for t in types:
        if t not in _PLAIN:
            return None
    if is_device_array(x):
        mem = x.data
        return ("cupy", x.dtype, x.shape, x.strides, mem.ptr & 15, mem.device_id, fmt, block_size, axis, scale_mode,
                layout, types)  # fmt: skip
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or not x.is_cuda:
        return None
    # torch.Size is a tuple: equal to and hashed as the tuple of its sizes
    return ("torch", x.dtype, x.shape, x.stride(), x.data_ptr() & 15, x.get_device(), fmt, block_size, axis,
            scale_mode, layout, types)  # fmt: skip


def _run_plan_torch(plan: Any, x: Any) -> MXArray | None:
    """A planned call on a CUDA torch tensor, or None where the unplanned route must run."""
    fmt_name, layout = plan.fields[0], plan.fields[5]
    if layout is not None or alloc.current_debug() is not None:
        return None
    torch = sys.modules["torch"]
    dev = x.get_device()
    if not torch_on_legacy_streams(torch, dev):
        return None
    # allocated in the dtypes the unplanned route's export views its uint8 buffers as (no view calls)
    name = FP8_CODE_DTYPES.get(fmt_name)
    q = torch.empty(plan.q_shape, dtype=getattr(torch, name, torch.uint8) if name else torch.uint8, device=dev)
    s = torch.empty(plan.s_shape, dtype=getattr(torch, "float8_e8m0fnu", torch.uint8), device=dev)
    if q.data_ptr() & 15:
        return None
    plan.launch_into(x.data_ptr(), q.data_ptr(), s.data_ptr())
    return MXArray(q, s, *plan.fields)


def clear_plans() -> None:
    """Forget every quantize_mx plan (tests)."""
    _QPLANS.clear()


@graph_safe
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
    key = _quant_key(x, fmt, block_size, axis, scale_mode, backend, scale_layout)
    if key is not None:
        plan = _QPLANS.get(key)
        if plan is not None and plan.usable():
            if key[0] == "cupy":
                return plan(x)  # CuPy in, CuPy out, as below
            q = _run_plan_torch(plan, x)
            if q is not None:
                return q  # torch in, torch out, as below
    op = "quantize_mx"
    x, caller = interop.import_array(x, op, "x")
    if not caller.device:
        x = _host_input(x, op)
        mx_np.check_x_rank(x, op)
    args = _quantize_args(op, x.ndim, fmt, block_size, axis, scale_mode, scale_layout)
    if use_gpu(op, backend, caller.device, lambda: quant_ops.quantize_unsupported(x, args)):
        q = quant_ops.quantize_mx_gpu(x, args)
        if key is not None and caller.kind == key[0]:
            plan = quant_ops.prepare_quantize(x, args)  # x: the CuPy array (a torch tensor's view)
            if plan is not None:
                if len(_QPLANS) >= _QPLANS_KEPT:
                    _QPLANS.clear()
                _QPLANS[key] = plan
    else:
        q = scales_np.with_scale_layout(mx_np.quantize_with(x, args), args.scale_layout)
    return interop.export_mx(q, caller)


@graph_safe
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


@graph_safe
def dequantize_mx(q: MXArray, dtype: Any = np.float32) -> Any:
    op = "dequantize_mx"
    native, caller = interop.import_mx(q, op, "q")
    if caller.device:  # the GPU twin (kernels_src/quant/dequantize_mx.hip), bitwise the numpy one
        out_dtype = mx_np.check_out_dtype(dtype, op)
        role = "bfloat16" if out_dtype.name == "bfloat16" else "value"
        return interop.export(dequant_ops.dequantize_mx_gpu(native, out_dtype), caller, role)
    q = scales_np.without_scale_layout(mx_np.check_mxarray(native, op), op)
    return interop.export(mx_np.dequantize_mx(q, dtype), caller)


@graph_safe
def per_token_cast_to_fp8(x: Any, use_ue8m0: bool, gran_k: int = 128, *, backend: str = "auto") -> Any:
    op = "per_token_cast_to_fp8"
    x, caller = interop.import_array(x, op, "x")
    host_only(op, backend, caller.device)
    q, sf = blockscale.per_token_cast_to_fp8(x, use_ue8m0, gran_k)
    return interop.export(q, caller, "codes:e4m3"), interop.export(sf, caller)


@graph_safe
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
