"""GPU twins of :func:`mxrt.quantize_mx_grouped` and :func:`mxrt.quantize_mx_dual_grouped`.

Grouped activations (kernels_src/quant/quantize_mx_grouped*.hip): ``group_lens`` stays on the device. One
single-CTA kernel turns it into the offsets ``[offs, offs_pad_row(, offs_pad_col)]`` (int64, returned as
views), and the quantizer reads them back from device memory; every buffer is sized on the host by
:func:`mxrt.padded_rows_upper_bound`, so nothing in this path reads the device (the GPU tests capture it in
a CUDA graph, where any synchronisation fails).

What the kernels do with ``group_lens`` they cannot check without a device-to-host read (the numpy twin and
the numpy-in path check them on the host and raise):

- a negative length counts as 0, and a length above ``total_m`` as ``total_m``;
- groups are cut at ``total_m``: with ``S[g]`` the running sum of the clamped lengths, group g owns tight rows
  ``[min(S[g], total_m), min(S[g+1], total_m))``. So when ``sum(group_lens) > total_m`` the last groups lose
  rows (never a read past ``x``), and when it is smaller the remaining rows of ``x`` are ignored;
- the returned padded offsets describe what was written, and always lie within the buffers (a cut split pads
  to at most the host upper bound), so every byte of every output is written exactly once, whatever the lens.
  For valid lens (>= 0, sum == total_m) this is exactly :func:`mxrt.pad_group_layout`.

Host-known limits are checked before any launch: at most 1024 groups, and 32-bit element offsets
(``total_m * k``, ``M_ub * k`` and ``M_col_ub * k`` below 2^31).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codes
from .._kinds import is_device_array
from ..errors import DtypeError, LayoutError, ShapeError
from ..formats.codecs import get_format
from ..formats.mx import MXArray, MXDual, check_block_size
from ..formats.scales import get_scale_mode
from ..layouts._check import check_group_lens
from ..layouts.grouped_quant import (
    MXGrouped,
    check_dual_grouped_args,
    check_grouped_args,
    dual_grouped_shapes,
)
from ..layouts.groups import padded_rows_upper_bound
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build, build_with_smem
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import grouped_kernels
from .kernels import select
from .quant import (
    GPU_BLOCK_SIZES,
    _aligned,
    _check_device_layout,
    _check_input,
    _itemsize,
    _upload,
    transpose_kernel,
    transpose_launch,
)

_INDEX_LIMIT = 2**31
#: CTAs per SM/CU of the grid-stride rowwise kernel.
_ROWWISE_CTAS_PER_CU = 16
#: Quarter blocks in flight per thread of the rowwise kernel (define UNROLL, grouped_kernels.QUANT_GROUPED_UNROLLS).
#: Both builds are bit-exact on H100; 1 was 1-4 points of copy bandwidth faster there (2 needs 48-60 registers).
ROWWISE_UNROLL = 1
_DEVICE_LENS_DTYPES = ("int32", "int64")
#: The row+col quantizer stores s_col transposed (flag SCALES_T) and transpose_u8 puts it in place
#: (:func:`rowcol_scales_transposed`); False keeps the in-place stores everywhere (A/B: RESULTS.md session 19)
ROWCOL_SCALES_T = True
#: ... for k from this on (H100, session 19 call 8: k = 7168 +5.2-5.5%, 2880 +1.2-2.0%, 2048 -1.1% / +0.7%)
ROWCOL_SCALES_T_MIN_K = 2560


def rowcol_scales_transposed(k: int, m_col_ub: int) -> bool:
    """Whether the row+col grouped quantizer writes s_col as ``[m_col_ub / 32, k]`` in whole sectors (each unit's
    MXG_SUB block rows of 128 contiguous bytes) for a transpose launch to put in place: in the ``[k, m_col_ub / 32]``
    layout each unit puts MXG_SUB bytes per column into sectors that 8 units share (the plain dual's partial-sector
    cost, RESULTS.md session 18). Needs k % 16 == 0 (the transpose's 16-byte loads); taken where it measured
    faster (k >= :data:`ROWCOL_SCALES_T_MIN_K`)."""
    return ROWCOL_SCALES_T and k % 16 == 0 and k >= ROWCOL_SCALES_T_MIN_K and m_col_ub >= 32


def _empty(shape: tuple[int, ...], dtype: Any = None) -> Any:
    """Output allocation (poisoned inside mxrt.runtime.debug(poison=...))."""
    return alloc.empty(shape, np.uint8 if dtype is None else dtype)


def _limit(op: str, what: str, value: int) -> None:
    if value >= _INDEX_LIMIT:
        raise ShapeError(f"{op}: {what} is {value}, expected fewer than 2^31: the kernels use 32-bit offsets")


# ---- quantize_mx_grouped -----------------------------------------------------------------------------------


def _device_lens(op: str, group_lens: Any) -> Any:
    if not is_device_array(group_lens):
        raise DtypeError(
            f"{op}: argument 'group_lens' is a {type(group_lens).__name__} while x is a CuPy array: pass the lens "
            "on the device (cupy.asarray(group_lens)); mxrt makes no implicit host-device transfer"
        )
    if str(group_lens.dtype) not in _DEVICE_LENS_DTYPES:
        raise DtypeError(f"{op}: argument 'group_lens' has dtype {group_lens.dtype}, expected int32 or int64")
    if group_lens.ndim != 1:
        raise ShapeError(f"{op}: argument 'group_lens' has shape {tuple(group_lens.shape)}, expected a 1-D [G] array")
    if not group_lens.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument 'group_lens' has strides {group_lens.strides}, expected a contiguous array "
            "(pass cupy.ascontiguousarray(group_lens))"
        )
    return group_lens


def _grouped_unsupported_reason(align: int, colwise: bool, col_align: int, num_groups: int) -> str | None:
    if num_groups > codes.GROUPED_MAX_GROUPS:
        return f"argument 'group_lens' has {num_groups} groups, the GPU kernels take at most {codes.GROUPED_MAX_GROUPS}"
    if colwise and col_align % align:
        return (
            f"argument 'col_align' is {col_align}, the fused GPU kernel needs a multiple of align = {align} "
            "(each group's rowwise rows must lie inside its colwise tiles)"
        )
    return None


def quantize_mx_grouped_gpu(
    x: Any,
    group_lens: Any,
    fmt: str = "e4m3",
    *,
    align: int = 32,
    colwise: bool = False,
    col_align: int = 128,
    scale_mode: str = "rceil",
    block_size: int = 32,
) -> MXGrouped:
    """GPU twin of :func:`mxrt.quantize_mx_grouped` (same arguments, bit-identical result for valid lens)."""
    op = "quantize_mx_grouped"
    name = _check_input(op, x)
    device_in = is_device_array(x)
    if device_in:
        lens_d = _device_lens(op, group_lens)
    else:
        lens_h = check_group_lens(group_lens, op)
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if bs not in GPU_BLOCK_SIZES:
        raise ShapeError(f"{op}: argument 'block_size' is {bs}, the GPU kernels support {GPU_BLOCK_SIZES}")
    a, ca, num_groups = check_grouped_args(op, x, lens_d if device_in else lens_h, align, colwise, col_align, bs)
    why = _grouped_unsupported_reason(a, bool(colwise), ca, num_groups)
    if why:
        raise ShapeError(f"{op}: {why}")
    total, k = (int(v) for v in x.shape)
    if not device_in and int(lens_h.sum()) != total:
        raise ShapeError(f"{op}: argument 'group_lens' sums to {int(lens_h.sum())}, expected x.shape[0] = {total}")
    if device_in:
        _check_device_layout(op, x, name)
    m_ub = padded_rows_upper_bound(total, num_groups, a)
    mc_ub = padded_rows_upper_bound(total, num_groups, ca) if colwise else 0
    nb = -(-k // 32)
    _limit(op, "total_m * k", total * k)
    _limit(op, "M_ub * k (rowwise buffer)", m_ub * max(k, 1))
    _limit(op, "M_ub * ceil(k/32) * 4 (work items)", m_ub * nb * 4)
    n_tail = min(-(-m_ub // 32), num_groups + 2)  # CTAs (per k tile) that write the rowwise tail
    if colwise:
        _limit(op, "M_col_ub * k (colwise buffer)", mc_ub * max(k, 1))
    packed = f.name == "e2m1"
    row_bytes = -(-k // 2) if packed else k
    xd = x if device_in else _upload(x)
    import cupy

    if not device_in:
        lens_d = cupy.asarray(lens_h)
    offs = _empty((3 if colwise else 2, num_groups + 1), cupy.int64)
    q, s = _empty((m_ub, row_bytes)), _empty((m_ub, nb))
    if colwise:
        q_col, s_col = _empty((k, mc_ub // 2 if packed else mc_ub)), _empty((k, mc_ub // 32))
    arch = get_arch()
    threads = grouped_kernels.QUANT_GROUPED_THREADS
    d_off = defines(THREADS=threads)
    kernel = build(select("quantize_mx_grouped_offsets", arch.target), d_off, arch)
    args = (lens_d, offs, np.int32(num_groups), np.int32(total), np.int32(a), np.int32(ca))
    args += (np.int32(lens_d.dtype == cupy.int64), np.int32(offs.shape[0]))
    launch(op, kernel, LaunchConfig(grid=(1, 1, 1), block=(threads, 1, 1)), args)
    d = defines(FMT=codes.FMT_CODES[f.name], IN_DTYPE=codes.IN_DTYPE_CODES[name], THREADS=threads)
    vec_in = codes.FLAG_VEC_IN if _aligned(xd.data.ptr, k * _itemsize(name)) else 0
    mode_code = np.int32(codes.SCALE_MODE_CODES[mode.value])
    if m_ub and k:
        flags = vec_in | (codes.FLAG_VEC_OUT if _aligned(q.data.ptr, row_bytes) else 0)
        if not colwise:
            d_row = defines(**dict(d), UNROLL=ROWWISE_UNROLL)
            kernel = build(select("quantize_mx_grouped", arch.target), d_row, arch)
            items = m_ub * nb * 4
            ctas = max(1, min(-(-items // (threads * ROWWISE_UNROLL)), arch.num_cus * _ROWWISE_CTAS_PER_CU))
            args = (xd, offs, q, s, np.int32(num_groups), np.int32(m_ub), np.int32(k), mode_code, np.int32(flags))
            args += (np.int32(ctas),)
            launch(op, kernel, LaunchConfig(grid=(ctas, 1, 1), block=(threads, 1, 1)), args)
        else:
            flags |= codes.FLAG_VEC_OUT_COL if _aligned(q_col.data.ptr, q_col.shape[1]) else 0
            smem = 3 * 4 * (num_groups + 1)  # the offset rows (dynamic: the static part is ~40 KB)
            kernel = build_with_smem(select("quantize_mx_grouped_rowcol", arch.target), d, arch, smem)
            s_col_t = _empty((mc_ub // 32, k)) if rowcol_scales_transposed(k, mc_ub) else None
            if s_col_t is not None:
                flags |= codes.FLAG_SCALES_T
            sc = s_col if s_col_t is None else s_col_t
            args = (xd, offs, q, s, q_col, sc, np.int32(num_groups), np.int32(m_ub), np.int32(mc_ub), np.int32(k))
            tiles_x = -(-k // 128)
            units = -(-(mc_ub // 32) // grouped_kernels.persistent_sub(arch.target)) * tiles_x
            workers = min(units, arch.num_cus * grouped_kernels.persistent_ctas(arch.target))
            args += (mode_code, np.int32(flags), np.int32(n_tail), np.int32(workers))
            cfg = LaunchConfig(grid=(workers + tiles_x * n_tail, 1, 1), block=(threads, 1, 1), shared_mem=smem)
            launch(op, kernel, cfg, args)
            if s_col_t is not None:  # [m_col_ub / 32, k] -> [k, m_col_ub / 32], launched early (waits in the kernel)
                launch(op, transpose_kernel(arch), *transpose_launch(s_col_t, s_col), early=True)
    offs_row, offs_col = offs[1], (offs[2] if colwise else None)
    if not device_in:
        q, s, offs_row = q.get(), s.get(), offs_row.get()
        if colwise:
            q_col, s_col, offs_col = q_col.get(), s_col.get(), offs_col.get()
    row = MXArray(q, s, f.name, bs, 1, (m_ub, k), mode.value)
    col = MXArray(q_col, s_col, f.name, bs, 1, (k, mc_ub), mode.value) if colwise else None
    return MXGrouped(row, col, offs_row, offs_col)


def grouped_unsupported(
    x: Any,
    group_lens: Any = None,
    fmt: Any = "e4m3",
    *,
    align: Any = 32,
    colwise: Any = False,
    col_align: Any = 128,
    block_size: Any = 32,
    **_: Any,
) -> str | None:
    if isinstance(block_size, (int, np.integer)) and int(block_size) not in GPU_BLOCK_SIZES:
        return f"argument 'block_size' is {block_size}, the GPU kernels support {GPU_BLOCK_SIZES}"
    num_groups = int(getattr(group_lens, "shape", (0,))[0]) if getattr(group_lens, "ndim", 0) == 1 else 0
    if isinstance(align, (int, np.integer)) and isinstance(col_align, (int, np.integer)) and int(align) > 0:
        return _grouped_unsupported_reason(int(align), bool(colwise), int(col_align), num_groups)
    return None


# ---- quantize_mx_dual_grouped ------------------------------------------------------------------------------


def quantize_mx_dual_grouped_gpu(
    w: Any,
    fmt: str = "e4m3",
    *,
    block_2d: bool = False,
    scale_mode: str = "rceil",
    pad: int = 32,
    block_size: int = 32,
) -> MXDual:
    """GPU twin of :func:`mxrt.quantize_mx_dual_grouped`: all groups in one launch (grid z = group)."""
    op = "quantize_mx_dual_grouped"
    name = _check_input(op, w)
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    if bs not in GPU_BLOCK_SIZES:
        raise ShapeError(f"{op}: argument 'block_size' is {bs}, the GPU kernels support {GPU_BLOCK_SIZES}")
    g, n, k, p = check_dual_grouped_args(op, w, block_2d, pad, bs)
    device_in = is_device_array(w)
    if device_in:
        _check_device_layout(op, w, name)
    k_pad, n_pad = dual_grouped_shapes(n, k, p)
    _limit(op, "G * n * k_pad (rowwise buffer)", g * n * k_pad)
    _limit(op, "G * k * n_pad (colwise buffer)", g * k * n_pad)
    _limit(op, "G * n * k (input)", g * n * k)
    packed = f.name == "e2m1"
    rb, cb = (k_pad // 2, n_pad // 2) if packed else (k_pad, n_pad)
    wd = w if device_in else _upload(w)
    q_row, s_row = _empty((g, n, rb)), _empty((g, n, k_pad // 32))
    q_col, s_col = _empty((g, k, cb)), _empty((g, k, n_pad // 32))
    if g and n and k:  # otherwise every output is empty (n_pad = 0 or k_pad = 0)
        arch = get_arch()
        d = defines(
            BLOCK_2D=int(bool(block_2d)),
            FMT=codes.FMT_CODES[f.name],
            IN_DTYPE=codes.IN_DTYPE_CODES[name],
            THREADS=grouped_kernels.QUANT_GROUPED_THREADS,
        )
        flags = (
            (codes.FLAG_VEC_IN if _aligned(wd.data.ptr, k * _itemsize(name)) else 0)
            | (codes.FLAG_VEC_OUT if _aligned(q_row.data.ptr, rb) else 0)
            | (codes.FLAG_VEC_OUT_COL if _aligned(q_col.data.ptr, cb) else 0)
        )
        kernel = build(select(op, arch.target), d, arch)
        args = (wd, q_row, s_row, q_col, s_col, np.int32(n), np.int32(k), np.int32(k_pad), np.int32(n_pad))
        # units of MXG_SUB 32 x 128 tiles stacked along n (< 2^20 under the limits above), walked by a persistent grid
        num_units = g * -(-(n_pad // 32) // grouped_kernels.persistent_sub(arch.target)) * -(-k_pad // 128)
        args += (np.int32(codes.SCALE_MODE_CODES[mode.value]), np.int32(flags), np.int32(num_units))
        ctas = min(num_units, arch.num_cus * grouped_kernels.persistent_ctas(arch.target))
        cfg = LaunchConfig(grid=(ctas, 1, 1), block=(grouped_kernels.QUANT_GROUPED_THREADS, 1, 1))
        launch(op, kernel, cfg, args)
    if not device_in:
        q_row, s_row, q_col, s_col = (a.get() for a in (q_row, s_row, q_col, s_col))
    row = MXArray(q_row, s_row, f.name, bs, 2, (g, n, k_pad), mode.value)
    col = MXArray(q_col, s_col, f.name, bs, 2, (g, k, n_pad), mode.value)
    return MXDual(row, col)


def dual_grouped_unsupported(w: Any, fmt: Any = "e4m3", *, block_size: Any = 32, **_: Any) -> str | None:
    if isinstance(block_size, (int, np.integer)) and int(block_size) not in GPU_BLOCK_SIZES:
        return f"argument 'block_size' is {block_size}, the GPU kernels support {GPU_BLOCK_SIZES}"
    return None
