"""GPU twin of :func:`mxrt.dequantize_mx` (kernels_src/quant/dequantize_mx.hip), and the dequantisation pass of
the ``sm90_cublas`` GEMM path (:mod:`mxrt.ops.gemm_cublas`), which writes bf16 operands with a zeroed K padding and
raises a device gate word where a bf16 GEMM of them would not be exact.

Results are bitwise the numpy twin's (NaN stays NaN; its sign and payload are unspecified), every scale byte and
code included. The kernel blocks along the last, contiguous axis of a C-contiguous array (block size 32), reads
row-major scales or any preshuffled layout in place, and writes float32, bfloat16 (uint16 bits in CuPy) or float16.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import codes
from .._kinds import dtype_name
from ..errors import DtypeError, LayoutError, ShapeError
from ..formats import mx as mx_np
from ..formats.mx import MXArray
from ..layouts.scales import scale_layout_shape
from ..problems.gemm import _device_operand
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import quant_kernels
from .gemm_sm90 import scale_layout_code

GPU_OUT_DTYPES = ("float32", "bfloat16", "float16")
_LIMIT = 2**31
_FLAG_VEC_IN, _FLAG_VEC_OUT = 1, 2
_MAX_BLOCKS = 1 << 20


def check_dequant_limits(op: str, rows: int, k: int, layout: str | None) -> None:
    """Typed errors for what the kernel cannot index (32-bit scale offsets)."""
    kbs = -(-k // 32)
    if rows * kbs >= _LIMIT:
        raise ShapeError(f"{op}: {rows} x {kbs} scale blocks, expected fewer than 2^31 (32-bit scale offsets)")
    if layout is not None:
        sm, sn = scale_layout_shape(layout, rows, kbs)
        if sm * sn >= _LIMIT:
            raise ShapeError(
                f"{op}: scale_layout {layout!r} stores {sm} x {sn} bytes, expected fewer than 2^31 (32-bit offsets)"
            )


def dequant_entry(
    q_ptr: int,
    out_ptr: int,
    scales: Any,
    rows: int,
    k: int,
    ldo: int,
    fmt: str,
    layout: str | None,
    out_dtype: str,
    arch: Any,
    gated: bool,
    ch: int = quant_kernels.DEQUANT_CH,
) -> tuple[Any, LaunchConfig, tuple[np.uint32, ...]]:
    """The kernel, launch configuration and trailing scalars ``(rows, k, ldo, kbs, flags)`` of one dequantisation
    (the vector flags from the code / output addresses' 16-byte alignment, which a small-call plan keys on)."""
    kbs = -(-k // 32)
    row_bytes = -(-k // 2) if fmt == "e2m1" else k
    flags = 0
    if k % 16 == 0 and q_ptr % (8 if fmt == "e2m1" else 16) == 0 and row_bytes % (8 if fmt == "e2m1" else 16) == 0:
        flags |= _FLAG_VEC_IN
    isz = 4 if out_dtype == "float32" else 2
    if out_ptr % 16 == 0 and (ldo * isz) % 16 == 0:
        flags |= _FLAG_VEC_OUT
    d = defines(
        CH=ch,
        EFMT=codes.FMT_CODES[fmt],
        GATE=int(gated),
        OUT_DTYPE=codes.GEMM_OUT_DTYPE_CODES[out_dtype],
        SL=scale_layout_code(layout, scales),
        THREADS=quant_kernels.DEQUANT_THREADS,
    )
    kernel = build(quant_kernels.DEQUANTIZE_MX, d, arch)
    chunks = rows * -(-ldo // ch)
    blocks = min(-(-chunks // (32 // ch * quant_kernels.DEQUANT_THREADS)), _MAX_BLOCKS)  # 32 / ch chunks a thread
    cfg = LaunchConfig((blocks, 1, 1), (quant_kernels.DEQUANT_THREADS, 1, 1), 0)
    u32 = np.uint32
    return kernel, cfg, (u32(rows), u32(k), u32(ldo), u32(kbs), u32(flags))


def launch_dequant(
    op: str,
    q: Any,
    scales: Any,
    out: Any,
    rows: int,
    k: int,
    ldo: int,
    fmt: str,
    layout: str | None,
    out_dtype: str,
    arch: Any,
    gate: Any = None,
    ch: int = quant_kernels.DEQUANT_CH,
) -> None:
    """Queue the kernel: ``out[rows, ldo]`` (C-contiguous, ``out_dtype``) from codes ``q`` (``[rows, k]`` bytes, or
    packed e2m1 ``[rows, ceil(k/2)]``, C-contiguous) and ``scales`` (row-major ``[rows, ceil(k/32)]`` or the
    layout's storage); columns ``[k, ldo)`` written 0. ``gate``: a zeroed device uint32 word the kernel sets where
    a bf16 GEMM of the result would not be exact (GEMM formats only); ``ch``: elements per chunk (development: 8 or
    16). No host synchronisation."""
    if rows == 0 or ldo == 0:
        return
    entry = dequant_entry(
        q.data.ptr, out.data.ptr, scales, rows, k, ldo, fmt, layout, out_dtype, arch, gate is not None, ch
    )
    kernel, cfg, scalars = entry
    g = gate if gate is not None else np.uint64(0)  # a null pointer (a numpy scalar: the driver route packs it)
    launch(op, kernel, cfg, (q, scales, out, g, *scalars))


def check_device_mx(q: Any, op: str) -> tuple[MXArray, int, int]:
    """An MXArray with CuPy fields validated from shapes, dtypes and flags only (no transfer): ``(q2, rows, k)``
    with ``q2`` its 2-D ``[rows, k]`` view (blocks of 32 along the last axis)."""
    shape, axis, bs = mx_np._check_geometry(q, op, "q")
    if not isinstance(q.fmt, str) or q.fmt not in codes.FMT_CODES:
        raise DtypeError(f"{op}: q.fmt is {q.fmt!r}, expected one of {sorted(codes.FMT_CODES)}")
    if bs != 32:
        raise ShapeError(f"{op}: q.block_size is {bs}; the GPU kernel reads 32-element blocks")
    if axis != len(shape) - 1:
        raise LayoutError(
            f"{op}: q.axis is {axis} for shape {shape}; the GPU kernel dequantizes blocks along the last axis "
            "(quantize along the last axis, or copy q to the host first: q.data.get(), q.scales.get())"
        )
    if q.scale_layout is not None and len(shape) != 2:
        raise ShapeError(f"{op}: q has scale_layout {q.scale_layout!r} but shape {shape}; expected a 2-D array")
    k = shape[-1]
    rows = math.prod(shape[:-1])
    width = -(-k // 2) if q.fmt == "e2m1" else k
    data, scales = q.data, q.scales
    for name, a, want in (("data", data, (*shape[:-1], width)), ("scales", scales, (*shape[:-1], -(-k // 32)))):
        if name == "scales" and q.scale_layout is not None:
            continue
        if dtype_name(a.dtype) != "uint8" or tuple(a.shape) != want:
            raise (DtypeError if dtype_name(a.dtype) != "uint8" else ShapeError)(
                f"{op}: q.{name} is a CuPy array of dtype {dtype_name(a.dtype)} and shape {tuple(a.shape)}, "
                f"expected uint8 {want} for {q.fmt} of shape {shape}"
            )
        if not a.flags.c_contiguous:
            raise LayoutError(f"{op}: q.{name} has strides {a.strides}: the GPU kernel needs C-contiguous fields")
    if len(shape) != 2:
        data = data.reshape(rows, width)
        scales = scales.reshape(rows, -(-k // 32))
    return _device_operand(data, scales, q.fmt, k, q.scale_layout, "q", op), rows, k


def dequantize_mx_gpu(q: Any, out_dtype: np.dtype) -> Any:
    """GPU twin of :func:`mxrt.dequantize_mx` for an MXArray ``q`` with CuPy fields: a CuPy array of ``q.shape``
    (bfloat16 as uint16 bits), on the current stream; bitwise the numpy twin."""
    op = "dequantize_mx"
    name = dtype_name(out_dtype)
    if name not in GPU_OUT_DTYPES:
        raise DtypeError(
            f"{op}: argument 'dtype' is {name} for GPU arrays; the kernel writes {list(GPU_OUT_DTYPES)} (every value "
            "is exact in float32: dequantize to float32, then .astype(cupy.float64))"
        )
    q2, rows, k = check_device_mx(q, op)
    check_dequant_limits(op, rows, k, q2.scale_layout)
    out = alloc.empty(tuple(q.shape), np.uint16 if name == "bfloat16" else np.dtype(name))
    if out.size:
        launch_dequant(op, q2.data, q2.scales, out, rows, k, k, q2.fmt, q2.scale_layout, name, get_arch())
    return out
