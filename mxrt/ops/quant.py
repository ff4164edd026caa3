"""GPU twins of :func:`mxrt.quantize_mx` and :func:`mxrt.quantize_mx_dual` (kernels_src/quant/).

CuPy arrays in -> CuPy arrays out, on the current stream, no host transfer. numpy arrays in -> numpy out
(uploaded and downloaded here). Results are bit-identical to the numpy reference.

Axes: the kernels block along the last, contiguous axis. A numpy input may name any ``axis`` (the host copy
that uploads it also moves the axis). A CuPy input must be C-contiguous and blocked along its last axis: any
other layout would need a device copy, which mxrt never makes behind the caller's back
(``cupy.ascontiguousarray(cupy.moveaxis(x, axis, -1))`` is the explicit way; for the colwise operand of a
2-D tensor, :func:`quantize_mx_dual` gives both in one pass).
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from .. import codes
from .._kinds import dtype_name, is_device_array
from ..errors import DtypeError, LayoutError, ShapeError
from ..formats.mx import MXArray, MXDual, QuantArgs
from ..layouts.scales import scale_layout_shape
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch, prepare
from . import quant_kernels
from .kernels import select

GPU_BLOCK_SIZES = (32,)
_INDEX_LIMIT = 2**31  # kernels index elements with 32-bit unsigned offsets; keep m*k below 2^31
_NUMPY_IN = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16"}


def _check_input(op: str, x: Any) -> str:
    """The kernel input dtype name of ``x`` (float32, float16, bfloat16; numpy float64 too), or DtypeError."""
    dt = getattr(x, "dtype", None)
    name = dtype_name(dt) if dt is not None else type(x).__name__
    if is_device_array(x):
        if name not in codes.IN_DTYPE_CODES:
            raise DtypeError(
                f"{op}: argument 'x' is a CuPy array of dtype {name}, expected float32, float16 or bfloat16 "
                "(float64 has no kernel: x.astype(cupy.float32) rounds it as the reference does)"
            )
        return name
    if not isinstance(x, np.ndarray) or (x.dtype not in _NUMPY_IN and x.dtype != np.float64):
        raise DtypeError(
            f"{op}: argument 'x' is {type(x).__name__} of dtype {getattr(x, 'dtype', None)}, expected a numpy or "
            "CuPy array of float32, float16 or bfloat16 (numpy float64 is rounded to float32 first)"
        )
    return "float32" if x.dtype == np.float64 else _NUMPY_IN[x.dtype]


def _upload(x: np.ndarray) -> Any:
    """Host array -> CuPy array holding the kernel's input bits (16-bit types travel as uint16)."""
    import cupy

    if x.dtype == np.float64:
        with np.errstate(invalid="ignore", over="ignore"):
            x = x.astype(np.float32)
    x = np.ascontiguousarray(x)
    return cupy.asarray(x.view(np.uint16) if x.dtype.itemsize == 2 else x)


def _empty(shape: tuple[int, ...]) -> Any:
    """Output allocation (poisoned inside mxrt.runtime.debug(poison=...))."""
    return alloc.empty(shape, np.uint8)


def _itemsize(name: str) -> int:
    return 4 if name == "float32" else 2


def _aligned(ptr: int, row_bytes: int) -> bool:
    return ptr % 16 == 0 and row_bytes % 16 == 0


def _check_device_layout(op: str, x: Any, name: str) -> None:
    if not x.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument 'x' has strides {x.strides} for shape {x.shape}: the GPU kernels need a C-contiguous "
            "array (mxrt makes no implicit device copy; pass cupy.ascontiguousarray(x))"
        )
    if x.data.ptr % _itemsize(name):
        raise LayoutError(f"{op}: argument 'x' starts at {x.data.ptr:#x}, not aligned to its {name} element size")


def _check_limits(op: str, m: int, k: int) -> None:
    if m * k >= _INDEX_LIMIT:
        raise ShapeError(
            f"{op}: argument 'x' has {m} x {k} = {m * k} elements, expected fewer than 2^31: the kernels use "
            "32-bit element offsets"
        )


# ---- scale storage: plain [rows, cols], or a preshuffled layout written by the kernel ---------------------


def _layout_code(layout: str | None) -> int:
    return codes.SCALE_LAYOUT_CODES[layout]


def _check_scale_storage(op: str, layout: str | None, rows: int, cols: int) -> None:
    if layout is None:
        return
    sm, sn = scale_layout_shape(layout, rows, cols)
    if sm * sn >= _INDEX_LIMIT:
        raise ShapeError(
            f"{op}: scale_layout {layout!r} stores {sm} x {sn} = {sm * sn} bytes for scales [{rows}, {cols}], "
            "expected fewer than 2^31: the kernels use 32-bit offsets"
        )


def _scale_buffer(layout: str | None, rows: int, cols: int) -> Any:
    """The device buffer the kernel writes scales into: [rows, cols], or the layout's flat padded storage."""
    if layout is None:
        return _empty((rows, cols))
    sm, sn = scale_layout_shape(layout, rows, cols)
    return _empty((sm * sn,))


def scale_view(buf: Any, layout: str | None, rows: int, cols: int) -> Any:
    """The scales as :func:`mxrt.layouts.preshuffle_scales` returns them, viewing the kernel's buffer ``buf``
    (numpy or CuPy): uint8 [sm, sn], or for ``"deepgemm_ue8m0"`` the int32 view [rows, sn/4] with strides
    (4, 4*sm) bytes over the MN-major storage."""
    if layout is None:
        return buf
    sm, sn = scale_layout_shape(layout, rows, cols)
    if layout == "deepgemm_ue8m0":
        return buf.view("int32").reshape(sn // 4, sm).T[:rows]
    return buf.reshape(sm, sn)


def _download_scales(buf: Any, layout: str | None, rows: int, cols: int) -> np.ndarray:
    return scale_view(buf.get(), layout, rows, cols)


# ---- quantize_mx (rowwise along the last axis) -------------------------------------------------------------

ROWWISE_UNROLL = 4  # 16-byte chunks per lane in the FLAT path (kernels_src/quant/quantize_mx_rowwise.hip)
DUAL_ROWS_FAST = 0  # mirrors the default of DUAL_ROWS_FAST in kernels_src/quant/quantize_mx_dual.hip


def rowwise_launch(m: int, k: int, name: str, x_ptr: int, q_ptr: int, fmt_name: str) -> tuple[int, LaunchConfig]:
    """Run-time flags and launch config of quantize_mx_rowwise for x [m, k] of dtype ``name`` at ``x_ptr``.

    FLAT (k % 32 == 0, x and q 16-byte aligned): a warp takes 32 * ROWWISE_UNROLL consecutive 16-byte chunks.
    Otherwise one thread per 32-element block.
    """
    threads = quant_kernels.QUANT_ROWWISE_THREADS
    itemsize = _itemsize(name)
    row_bytes = -(-k // 2) if fmt_name == "e2m1" else k
    flags = (codes.FLAG_VEC_IN if _aligned(x_ptr, k * itemsize) else 0) | (
        codes.FLAG_VEC_OUT if _aligned(q_ptr, row_bytes) else 0
    )
    if k % 32 == 0 and x_ptr % 16 == 0 and q_ptr % 16 == 0:
        chunks = m * k * itemsize // 16
        per_cta = 32 * ROWWISE_UNROLL * (threads // 32)
        return flags | codes.FLAG_FLAT, LaunchConfig(grid=(max(1, -(-chunks // per_cta)), 1, 1), block=(threads, 1, 1))
    nblocks = m * (-(-k // 32))
    return flags, LaunchConfig(grid=(max(1, -(-nblocks // threads)), 1, 1), block=(threads, 1, 1))


def dual_launch(
    m: int,
    k: int,
    name: str,
    x_ptr: int,
    q_row_ptr: int,
    q_col_ptr: int,
    fmt_name: str,
    rows_fast: int = DUAL_ROWS_FAST,
) -> tuple[int, LaunchConfig]:
    """Run-time flags and launch config of quantize_mx_dual: one tile of 64 rows x 64 words (128 columns of a
    16-bit input, 64 of fp32) per block of 256 threads; grid (k tiles, m tiles), or (m tiles, k tiles) when
    the kernel is built with DUAL_ROWS_FAST=1."""
    packed = fmt_name == "e2m1"
    row_bytes, col_bytes = (-(-k // 2), -(-m // 2)) if packed else (k, m)
    flags = (
        (codes.FLAG_VEC_IN if _aligned(x_ptr, k * _itemsize(name)) else 0)
        | (codes.FLAG_VEC_OUT if _aligned(q_row_ptr, row_bytes) else 0)
        | (codes.FLAG_VEC_OUT_COL if _aligned(q_col_ptr, col_bytes) else 0)
    )
    tile_k = 128 if _itemsize(name) == 2 else 64
    tiles = (max(1, -(-k // tile_k)), max(1, -(-m // 64)))
    grid = (tiles[1], tiles[0], 1) if rows_fast else (tiles[0], tiles[1], 1)
    return flags, LaunchConfig(grid=grid, block=(quant_kernels.QUANT_DUAL_THREADS, 1, 1))


_ROWWISE_KERNELS: dict = {}


def _rowwise_kernel(fmt_name: str, name: str, layout: str | None) -> Any:
    arch = get_arch()
    kkey = (arch, fmt_name, name, layout)
    kernel = _ROWWISE_KERNELS.get(kkey)  # the small-call dispatch: select / defines / build lookup once per kind
    if kernel is None:
        spec = select("quantize_mx", arch.target)
        d = defines(
            FMT=codes.FMT_CODES[fmt_name],
            IN_DTYPE=codes.IN_DTYPE_CODES[name],
            SCALE_LAYOUT=_layout_code(layout),
            THREADS=quant_kernels.QUANT_ROWWISE_THREADS,
        )
        kernel = _ROWWISE_KERNELS[kkey] = build(spec, d, arch)
    return kernel


def _quantize_rows(
    op: str, xd: Any, name: str, m: int, k: int, fmt_name: str, mode_value: str, layout: str | None = None
) -> tuple[Any, Any]:
    """Launch the rowwise kernel on a contiguous device array viewed as [m, k]; returns (q [m, kb], the scale
    buffer: s [m, nb], or the layout's flat storage; see :func:`scale_view`)."""
    packed = fmt_name == "e2m1"
    row_bytes = -(-k // 2) if packed else k
    nb = -(-k // 32)
    q = _empty((m, row_bytes))
    s = _scale_buffer(layout, m, nb)
    if m == 0 or k == 0:
        if layout is not None and s.size:  # padding only (e.g. k == 0): nothing for the kernel to read
            s.fill(127)
        return q, s
    kernel = _rowwise_kernel(fmt_name, name, layout)
    flags, cfg = rowwise_launch(m, k, name, xd.data.ptr, q.data.ptr, fmt_name)
    args = (xd, q, s, np.int32(m), np.int32(k), np.int32(codes.SCALE_MODE_CODES[mode_value]), np.int32(flags))
    launch(op, kernel, cfg, args)
    return q, s


def quantize_mx_gpu(x: Any, args: QuantArgs) -> MXArray:
    """GPU twin of :func:`mxrt.quantize_mx` for validated ``args`` (bit-identical result); with a scale layout
    the kernel stores every scale byte at its offset in the preshuffled layout (one pass, padding written 127).
    ``x`` is a CuPy array (CuPy out) or a numpy array (uploaded; numpy out)."""
    op = "quantize_mx"
    name = _check_input(op, x)
    f, mode, bs, ax, layout = args.fmt, args.mode, args.block_size, args.axis, args.scale_layout
    if bs not in GPU_BLOCK_SIZES:
        raise ShapeError(f"{op}: argument 'block_size' is {bs}, the GPU kernels support {GPU_BLOCK_SIZES}")
    device_in = is_device_array(x)
    if device_in:
        if ax != x.ndim - 1:
            raise LayoutError(
                f"{op}: argument 'axis' is {ax} for a CuPy array of shape {x.shape}; the GPU kernel blocks along "
                "the last axis (pass cupy.ascontiguousarray(cupy.moveaxis(x, axis, -1)), or use "
                "quantize_mx_dual for the colwise operand of a 2-D tensor)"
            )
        _check_device_layout(op, x, name)
        moved_shape = tuple(x.shape)
        xd = x
    else:
        xm = np.moveaxis(x, ax, -1)
        moved_shape = tuple(xm.shape)
    k = moved_shape[-1]
    m = math.prod(moved_shape[:-1])
    _check_limits(op, m, k)
    _check_scale_storage(op, layout, m, -(-k // 32))
    if not device_in:
        xd = _upload(xm)
    q, s = _quantize_rows(op, xd, name, m, k, f.name, mode.value, layout)
    lead = moved_shape[:-1]
    if len(lead) != 1:
        q = q.reshape(*lead, q.shape[-1])
    if layout is not None:  # 2-D, blocked along the last axis (check_fused_layout)
        s = _download_scales(s, layout, m, -(-k // 32)) if not device_in else scale_view(s, layout, m, -(-k // 32))
        if not device_in:
            q = q.get()
    else:
        if len(lead) != 1:
            s = s.reshape(*lead, s.shape[-1])
        if not device_in:
            q = np.ascontiguousarray(np.moveaxis(q.get(), -1, ax))
            s = np.ascontiguousarray(np.moveaxis(s.get(), -1, ax))
    return MXArray(
        data=q,
        scales=s,
        fmt=f.name,
        block_size=bs,
        axis=ax,
        shape=tuple(x.shape),
        scale_mode=mode.value,
        scale_layout=layout,
    )


class PreparedQuantize:
    """:func:`quantize_mx_gpu` for every device ``x`` of one plan key (:mod:`mxrt.api.quant`: same dtype, shape,
    strides, 16-byte alignment and device, same validated arguments): the kernel, launch configuration, output
    shapes and the prepared launch are computed once; a call allocates the outputs and launches.

    ``q_shape`` / ``s_shape``: the shapes of the returned codes and (row-major) scales; ``fields``: the returned
    MXArray's fields after ``data`` and ``scales``; :meth:`launch_into` queues the kernel on given addresses."""

    __slots__ = ("_alloc_s", "_kernel", "_nb", "_rows", "_scalars", "cfg", "fields", "launch", "q_shape", "s_shape")

    def __init__(self, x: Any, args: QuantArgs, launch_: Any, kernel: Any, cfg: LaunchConfig, flags: int) -> None:
        lead, k = tuple(x.shape[:-1]), x.shape[-1]
        m = math.prod(lead)
        fmt_name, layout = args.fmt.name, args.scale_layout
        nb = -(-k // 32)
        self._rows, self._nb = m, nb
        self.q_shape = (*lead, -(-k // 2) if fmt_name == "e2m1" else k)
        self.s_shape = (*lead, nb)
        self._alloc_s = self.s_shape if layout is None else (math.prod(scale_layout_shape(layout, m, nb)),)
        self._scalars = (m, k, codes.SCALE_MODE_CODES[args.mode.value], flags)
        self.fields = (fmt_name, args.block_size, args.axis, tuple(x.shape), args.mode.value, layout)
        self.launch, self._kernel, self.cfg = launch_, kernel, cfg

    def usable(self) -> bool:
        return self.launch.usable()

    def launch_into(self, x_ptr: int, q_ptr: int, s_ptr: int) -> None:
        """Queue the kernel: ``x`` at ``x_ptr`` (the plan's layout), codes to ``q_ptr`` (16-byte aligned, C-contiguous
        ``q_shape``), scales to ``s_ptr`` (C-contiguous ``s_shape``, or the layout's storage)."""
        self.launch(x_ptr, q_ptr, s_ptr, *self._scalars)

    def __call__(self, x: Any) -> MXArray:
        q, s = _empty(self.q_shape), _empty(self._alloc_s)
        if q.data.ptr & 15:  # never from CuPy's pool (512-byte blocks); the flags assumed an aligned q
            m, k, mode, _ = self._scalars
            flags, cfg = rowwise_launch(m, k, _name(x), x.data.ptr, q.data.ptr, self.fields[0])
            i32 = np.int32
            launch("quantize_mx", self._kernel, cfg, (x, q, s, i32(m), i32(k), i32(mode), i32(flags)))
        else:
            self.launch(x.data.ptr, q.data.ptr, s.data.ptr, *self._scalars)
        layout = self.fields[5]
        if layout is not None:
            s = scale_view(s, layout, self._rows, self._nb)
        return MXArray(q, s, *self.fields)


def _name(x: Any) -> str:
    return dtype_name(x.dtype)


def prepare_quantize(x: Any, args: QuantArgs) -> PreparedQuantize | None:
    """The prepared form of :func:`quantize_mx_gpu` for a CuPy ``x`` it has just quantized with ``args``, or None
    (empty inputs, launches through CuPy's call)."""
    if not is_device_array(x) or x.ndim < 1 or args.axis != x.ndim - 1:
        return None
    name = _name(x)
    m, k = math.prod(x.shape[:-1]), x.shape[-1]
    if m == 0 or k == 0:
        return None
    kernel = _rowwise_kernel(args.fmt.name, name, args.scale_layout)
    flags, cfg = rowwise_launch(m, k, name, x.data.ptr, 0, args.fmt.name)  # q: a fresh pool block, 16-aligned
    i32 = np.int32
    pl = prepare("quantize_mx", kernel, cfg, (x, x, x, i32(0), i32(0), i32(0), i32(0)))
    if pl is None:
        return None
    return PreparedQuantize(x, args, pl, kernel, cfg, flags)


def quantize_unsupported(x: Any, args: QuantArgs) -> str | None:
    """Why the GPU kernels do not cover ``quantize_mx`` / ``quantize_mx_dual`` with ``args``, or None."""
    if args.block_size not in GPU_BLOCK_SIZES:
        return f"argument 'block_size' is {args.block_size}, the GPU kernels support {GPU_BLOCK_SIZES}"
    return None


# ---- quantize_mx_dual --------------------------------------------------------------------------------------


def _quantize_dual(
    op: str,
    xd: Any,
    name: str,
    m: int,
    k: int,
    fmt_name: str,
    mode_value: str,
    block_2d: bool,
    layout: str | None = None,
) -> tuple[Any, Any, Any, Any]:
    """Launch the dual kernel on a contiguous device array [m, k]; returns (q_row, s_row, q_col, s_col) with
    the scale buffers as :func:`_quantize_rows` returns them."""
    packed = fmt_name == "e2m1"
    row_bytes, col_bytes = (-(-k // 2), -(-m // 2)) if packed else (k, m)
    q_row, s_row = _empty((m, row_bytes)), _scale_buffer(layout, m, -(-k // 32))
    q_col, s_col = _empty((k, col_bytes)), _scale_buffer(layout, k, -(-m // 32))
    if not (m and k):
        for s in (s_row, s_col):
            if layout is not None and s.size:
                s.fill(127)
        return q_row, s_row, q_col, s_col
    arch = get_arch()
    spec = select(op, arch.target)
    path = dual_scale_path(m, k, layout)
    d = dual_defines(fmt_name, name, layout, bool(block_2d))
    flags, cfg = dual_launch(m, k, name, xd.data.ptr, q_row.data.ptr, q_col.data.ptr, fmt_name)
    kernel = build(spec, d, arch)
    sr, sc, t_flag, transpose = dual_scale_targets(m, k, path, s_row, s_col, _empty)
    args = (xd, q_row, sr, q_col, sc, np.int32(m), np.int32(k))
    args += (np.int32(codes.SCALE_MODE_CODES[mode_value]), np.int32(flags | t_flag))
    launch(op, kernel, cfg, args)
    if transpose is not None:
        launch(op, transpose_kernel(arch), *transpose, early=DUAL_T_EARLY)
    return q_row, s_row, q_col, s_col


#: quantize_mx_dual calls of at least this many elements store their scales transposed (:func:`dual_scales_transposed`)
DUAL_SCALES_T_MIN_ELEMS = 1 << 24
#: How quantize_mx_dual stores its scales (:func:`dual_scale_path`): "auto" (the measured choice), or one of
#: :data:`DUAL_SCALE_PATHS` where the call allows it (``mxrt bench quant --dual-scales`` times each)
DUAL_SCALES = "auto"
DUAL_SCALE_PATHS = ("t", "inplace")
#: SCALES_T's transpose launch is a programmatic dependent launch (mxrt.runtime.launch ``early``): its CTAs take
#: the SMs the quantizer's last wave leaves and wait there for its scales (RESULTS.md session 19)
DUAL_T_EARLY = True


def dual_scales_transposed(m: int, k: int, layout: str | None) -> bool:
    """Whether quantize_mx_dual stores its scales transposed in whole 16-byte chunks (flag SCALES_T) for
    :func:`transpose_launch` to put in place. The kernel needs plain scales and m, k multiples of 16. Written in place
    instead, each CTA puts 2 bytes per column of s_col and 4 per row of s_row into sectors 8-16 CTAs share: 13% of
    the kernel's time at 8192^2 on an H100. Taken where it measured faster (RESULTS.md session 18, call 9, H100):
    8192^2 82.6% -> 89% of copy, 4096 x 7168 / 7168 x 4096 +1.5-2%; not below ~2^24 elements (4096 x 2048: -8%, the
    second launch) nor where the transpose's rows are not whole 16-byte chunks (k or m not a multiple of 512:
    2880 x 4096 -21%)."""
    return layout is None and m % 512 == 0 and k % 512 == 0 and m * k >= DUAL_SCALES_T_MIN_ELEMS


def dual_scale_path(m: int, k: int, layout: str | None, path: str | None = None) -> str:
    """How quantize_mx_dual stores its scales: ``path`` (default :data:`DUAL_SCALES`) where the call allows it, else
    "inplace" (every byte where it belongs, from the CTA that computed it). "t": :func:`dual_scales_transposed`.
    "auto": t where it applies, else in place (three ways without a second launch lost to both on an H100:
    RESULTS.md session 19)."""
    path = DUAL_SCALES if path is None else path
    if path not in ("auto", *DUAL_SCALE_PATHS):
        raise ValueError(f"quantize_mx_dual: scale path {path!r}, expected 'auto' or one of {DUAL_SCALE_PATHS}")
    if path in ("auto", "t"):
        return "t" if dual_scales_transposed(m, k, layout) else "inplace"
    return "inplace"


def dual_defines(fmt_name: str, name: str, layout: str | None, block_2d: bool) -> Any:
    """The defines of a quantize_mx_dual build."""
    return defines(
        BLOCK_2D=int(block_2d),
        FMT=codes.FMT_CODES[fmt_name],
        IN_DTYPE=codes.IN_DTYPE_CODES[name],
        SCALE_LAYOUT=_layout_code(layout),
        THREADS=quant_kernels.QUANT_DUAL_THREADS,
    )


def dual_scale_targets(
    m: int, k: int, path: str, s_row: Any, s_col: Any, empty: Any
) -> tuple[Any, Any, int, tuple[LaunchConfig, tuple] | None]:
    """Where quantize_mx_dual writes its scales for the result buffers ``s_row`` / ``s_col`` on :func:`dual_scale_path`
    ``path``: ``(s_row, s_col, 0, None)``, or for "t" two workspaces from ``empty(shape)`` (uint8), the flag SCALES_T
    and the :func:`transpose_launch` that puts them into ``s_row`` / ``s_col`` after the kernel."""
    if path != "t":
        return s_row, s_col, 0, None
    sr, sc = empty((-(-k // 32), m)), empty((-(-m // 32), k))
    return sr, sc, codes.FLAG_SCALES_T, transpose_launch(sr, s_row, sc, s_col)


def transpose_kernel(arch: Any) -> Any:
    """The build of transpose_u8 (kernels_src/quant/transpose_u8.hip) for ``arch``."""
    return build(quant_kernels.TRANSPOSE_U8, defines(THREADS=quant_kernels.TRANSPOSE_U8_THREADS), arch)


def transpose_launch(src0: Any, dst0: Any, src1: Any = None, dst1: Any = None) -> tuple[LaunchConfig, tuple]:
    """Launch config and arguments of transpose_u8: ``dst0 = src0.T`` and ``dst1 = src1.T`` in one launch (byte
    matrices, source columns a multiple of 16, sources 16-byte aligned; numpy or CuPy arrays). Without ``src1`` the
    launch transposes ``src0`` alone (its second matrix is ``src0`` with no rows: no tiles)."""
    tt = 128
    if src1 is None:
        (r0, c0), (r1, c1) = src0.shape, (0, src0.shape[1])
        src1, dst1 = src0, dst0
    else:
        (r0, c0), (r1, c1) = src0.shape, src1.shape
    tiles0 = -(-r0 // tt) * -(-c0 // tt)
    tiles = tiles0 + -(-r1 // tt) * -(-c1 // tt)
    cfg = LaunchConfig(grid=(max(1, tiles), 1, 1), block=(quant_kernels.TRANSPOSE_U8_THREADS, 1, 1))
    i32 = np.int32
    return cfg, (src0, dst0, i32(r0), i32(c0), src1, dst1, i32(r1), i32(c1), i32(tiles0))


def quantize_mx_dual_gpu(x: Any, args: QuantArgs) -> MXDual:
    """GPU twin of :func:`mxrt.quantize_mx_dual` for validated ``args``: rowwise and colwise in one read of
    ``x [m, k]``."""
    op = "quantize_mx_dual"
    name = _check_input(op, x)
    f, mode, bs, layout, block_2d = args.fmt, args.mode, args.block_size, args.scale_layout, args.block_2d
    if bs not in GPU_BLOCK_SIZES:
        raise ShapeError(f"{op}: argument 'block_size' is {bs}, the GPU kernels support {GPU_BLOCK_SIZES}")
    device_in = is_device_array(x)
    if device_in:
        _check_device_layout(op, x, name)
    m, k = (int(v) for v in x.shape)
    _check_limits(op, m, k)
    _check_scale_storage(op, layout, m, -(-k // 32))
    _check_scale_storage(op, layout, k, -(-m // 32))
    tiles_y = -(-k // (128 if _itemsize(name) == 2 else 64)) if DUAL_ROWS_FAST else -(-m // 64)
    if tiles_y > 65535:
        raise ShapeError(f"{op}: argument 'x' has shape {(m, k)}: {tiles_y} tiles along grid y, at most 65535")
    xd = x if device_in else _upload(x)
    q_row, s_row, q_col, s_col = _quantize_dual(op, xd, name, m, k, f.name, mode.value, bool(block_2d), layout)
    mb, kb = -(-m // 32), -(-k // 32)
    if device_in:
        s_row, s_col = scale_view(s_row, layout, m, kb), scale_view(s_col, layout, k, mb)
    else:
        q_row, q_col = q_row.get(), q_col.get()
        s_row, s_col = _download_scales(s_row, layout, m, kb), _download_scales(s_col, layout, k, mb)

    def wrap(data: Any, scales: Any, shape: tuple[int, int]) -> MXArray:
        return MXArray(data, scales, f.name, bs, 1, shape, mode.value, layout)

    return MXDual(wrap(q_row, s_row, (m, k)), wrap(q_col, s_col, (k, m)))
