"""Grouped MX quantization for MoE GEMMs (MX_REFERENCE.md 4a), on numpy: the exact reference of the GPU ops.

- :func:`quantize_mx_grouped`: activations ``x [total_m, k]`` split into groups by ``group_lens``, quantized
  straight into Primus-Turbo's per-group padded layout (rowwise for fwd/dgrad, optional colwise for wgrad).
- :func:`quantize_mx_dual_grouped`: per-group dual (rowwise + colwise) quantization of B-side weights
  ``w [G, n, k]``, each output padded along its blocked axis.

Both are compositions of :func:`mxrt.quantize_mx` / :func:`mxrt.quantize_mx_dual` with the padding helpers of
:mod:`mxrt.layouts.groups` (the only place where group sizes and padding are computed); the one extra rule is
Primus-Turbo's grouped convention that a block holding only padding gets the neutral scale byte 127 (2^0)
instead of the all-zero block's 0, so every byte of the padded buffers is defined.

It lives in the layouts layer because it combines the group padding math of :mod:`.groups` with the quantizer of
:mod:`mxrt.formats` (layouts build on formats, never the other way round).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import DtypeError, ShapeError
from ..formats.codecs import E8M0_ONE, check_float_array, get_format, to_float32_checked
from ..formats.mx import MXArray, MXDual, check_block_size, dual_codes, quantize_mx
from ..formats.scales import ScaleMode, get_scale_mode
from ._check import check_alloc, check_group_lens, check_int
from .groups import pad_group_layout, pad_rows, rows_bound

#: Scale byte of a block that holds only padding (Primus-Turbo grouped kernels: 127 = 2^0, MX_REFERENCE.md 2.3).
PAD_SCALE = E8M0_ONE  # 0x7F


class MXGrouped(NamedTuple):
    """Result of :func:`quantize_mx_grouped`.

    Attributes
    ----------
    row : MXArray, data ``[M_ub, k]`` (e2m1: ``[M_ub, ceil(k/2)]``), scales ``[M_ub, ceil(k/32)]``, blocks along
        k; ``M_ub = padded_rows_upper_bound(total_m, G, align)``. Row ``offs[g] + i`` of ``x`` is row
        ``offs_pad_row[g] + i``.
    col : MXArray or None, data ``[k, M_col_ub]`` (e2m1: ``[k, M_col_ub/2]``), scales ``[k, M_col_ub/32]``,
        blocks along M; ``M_col_ub = padded_rows_upper_bound(total_m, G, col_align)``. Row ``offs[g] + i`` of
        ``x`` is column ``offs_pad_col[g] + i``.
    offs_pad_row : int64 [G+1], ``pad_group_layout(group_lens, align)[1]`` (a CuPy array from the GPU op).
    offs_pad_col : int64 [G+1] or None, ``pad_group_layout(group_lens, col_align)[1]``.
    """

    row: MXArray
    col: MXArray | None
    offs_pad_row: Any
    offs_pad_col: Any | None


def check_grouped_args(
    op: str, x: Any, group_lens: Any, align: Any, colwise: Any, col_align: Any, block_size: int
) -> tuple[int, int, int]:
    """Shape-level checks shared by the numpy twin and the GPU op (no look at lens values): returns
    ``(align, col_align, num_groups)``."""
    if x.ndim != 2:
        raise ShapeError(f"{op}: argument 'x' has shape {tuple(x.shape)}, expected a 2-D [total_m, k] array")
    if getattr(group_lens, "ndim", None) != 1:
        raise ShapeError(
            f"{op}: argument 'group_lens' has shape {tuple(getattr(group_lens, 'shape', ()))}, expected a 1-D [G] "
            "array of integers"
        )
    if not isinstance(colwise, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'colwise' is {colwise!r}, expected a bool")
    a = check_int(align, op, "align", minimum=1)
    ca = check_int(col_align, op, "col_align", minimum=1)
    if colwise and ca % block_size:
        raise ShapeError(
            f"{op}: argument 'col_align' is {ca}, expected a multiple of block_size = {block_size}: colwise blocks "
            "run along M and must not straddle two groups"
        )
    return a, ca, int(group_lens.shape[0])


def _pad_rows_mask(group_lens: np.ndarray, align: int, rows: int) -> np.ndarray:
    """bool [rows]: True where a padded row holds a real row of ``x``."""
    return pad_rows(np.ones(int(group_lens.sum()), bool), group_lens, align, False, rows=rows)


def quantize_mx_grouped(
    x: np.ndarray,
    group_lens: Any,
    fmt: str = "e4m3",
    *,
    align: int = 32,
    colwise: bool = False,
    col_align: int = 128,
    scale_mode: str | ScaleMode = "rceil",
    block_size: int = 32,
) -> MXGrouped:
    """Quantize MoE activations straight into the per-group padded layout (Primus-Turbo grouped MXFP8/MXFP4).

    Parameters
    ----------
    x : float32, float64, float16 or bfloat16 [total_m, k]; rows ``[offs[g], offs[g+1])`` belong to group g,
        ``offs = group_offsets(group_lens)``.
    group_lens : int [G], non-negative, ``sum == total_m``. For a CuPy ``x``: a CuPy int32/int64 array, never
        read on the host (see :mod:`mxrt.ops.grouped` for what the kernel does with inconsistent lens).
    fmt, scale_mode, block_size : as :func:`mxrt.quantize_mx`.
    align : per-group row padding of the rowwise output (Primus-Turbo: 32).
    colwise : also produce the colwise (wgrad) operand, blocks along M.
    col_align : per-group padding along M of the colwise output (Primus-Turbo: 128), a multiple of block_size.

    Returns
    -------
    MXGrouped
        ``row.data[offs_pad_row[g] + i] = quantize_mx(x)[offs[g] + i]`` for ``i < lens[g]``. Every other row of
        the ``M_ub = padded_rows_upper_bound(total_m, G, align)`` rows (each group's padding and the tail) has
        zero codes and scale byte 127. ``col`` likewise for ``x^T`` with ``col_align``: columns of padding are
        zero codes, and a 32-block of M holding only padding has scale 127 (a block with at least one real row
        has the ordinary scale of its values, padding counted as zeros).

    Notes
    -----
    Equals ``quantize_mx(pad_rows(x, group_lens, align, rows=M_ub))`` with the scales of padding rows set to 127
    (and the same for ``x^T`` with ``col_align``). A real all-zero block keeps scale byte 0, as in
    :func:`mxrt.quantize_mx`; only blocks of padding take Primus-Turbo's grouped 127 (MX_REFERENCE.md 2.3, 4a).
    Buffers are sized by the host-side upper bound so the GPU op never reads ``group_lens`` back.
    """
    op = "quantize_mx_grouped"
    x = check_float_array(x, op)
    lens = check_group_lens(group_lens, op)
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    a, ca, num_groups = check_grouped_args(op, x, lens, align, colwise, col_align, bs)
    total = int(lens.sum())
    if total != x.shape[0]:
        raise ShapeError(f"{op}: argument 'group_lens' sums to {total}, expected x.shape[0] = {x.shape[0]} (total_m)")
    m_ub = rows_bound(total, num_groups, a, op)
    check_alloc((m_ub, x.shape[1]), op, f"the rowwise output for argument 'align' = {a}")
    if colwise:
        mc_ub = rows_bound(total, num_groups, ca, op, "col_align")
        check_alloc((x.shape[1], mc_ub), op, f"the colwise output for argument 'col_align' = {ca}")
    x = to_float32_checked(x, op)  # what quantize_mx reads; its range error names this op
    q = quantize_mx(pad_rows(x, lens, a, rows=m_ub), f.name, block_size=bs, scale_mode=mode)
    s = q.scales.copy()
    s[~_pad_rows_mask(lens, a, m_ub)] = PAD_SCALE
    row = MXArray(q.data, s, f.name, bs, 1, q.shape, mode.value)
    col = offs_col = None
    if colwise:
        xc = np.ascontiguousarray(pad_rows(x, lens, ca, rows=mc_ub).T)
        qc = quantize_mx(xc, f.name, block_size=bs, scale_mode=mode)
        sc = qc.scales.copy()
        real_block = _pad_rows_mask(lens, ca, mc_ub).reshape(-1, bs).any(axis=1)
        sc[:, ~real_block] = PAD_SCALE
        col = MXArray(qc.data, sc, f.name, bs, 1, qc.shape, mode.value)
        offs_col = pad_group_layout(lens, ca)[1]
    return MXGrouped(row, col, pad_group_layout(lens, a)[1], offs_col)


def dual_grouped_shapes(n: int, k: int, pad: int) -> tuple[int, int]:
    """``(k_pad, n_pad)``: the padded row length of the rowwise ``[G, n, k_pad]`` and colwise ``[G, k, n_pad]``
    outputs of :func:`quantize_mx_dual_grouped`, each ``ceil(len / pad) * pad``."""
    return -(-k // pad) * pad, -(-n // pad) * pad


def quantize_mx_dual_grouped(
    w: np.ndarray,
    fmt: str = "e4m3",
    *,
    block_2d: bool = False,
    scale_mode: str | ScaleMode = "rceil",
    pad: int = 32,
    block_size: int = 32,
) -> MXDual:
    """Per-group rowwise and colwise MX quantization of grouped-GEMM weights ``w [G, n, k]`` (B, NT layout).

    Parameters
    ----------
    w : float32, float64, float16 or bfloat16 [G, n, k].
    fmt, scale_mode, block_size : as :func:`mxrt.quantize_mx`.
    block_2d : one scale per ``block_size x block_size`` tile, as ``quantize_mx_dual(block_2d=True)``
        (Primus-Turbo quantizes MoE weights with 32x32 blocks).
    pad : the blocked axis of each output is padded to a multiple of ``pad`` (a multiple of block_size).

    Returns
    -------
    MXDual
        ``row``: shape ``[G, n, k_pad]`` (blocks along k), ``row[g, :, :k]`` = ``quantize_mx_dual(w[g]).row``;
        ``col``: shape ``[G, k, n_pad]`` (blocks along n), ``col[g, :, :n]`` = ``quantize_mx_dual(w[g]).col``;
        ``(k_pad, n_pad) = dual_grouped_shapes(n, k, pad)``. Padding elements are zero codes; blocks (or 2-D
        tiles) holding only padding have scale byte 127.

    Notes
    -----
    Why pad: an MX GEMM reads K in whole 32-element blocks (one scale each) and tiles it further, so the
    reduction axis of each operand is stored padded with zeros: ``pad = 32`` (default) makes every stored scale
    cover 32 stored codes; ``pad = 128`` reproduces Primus-Turbo's ``N_pad = ceil(N/128)*128`` K-dim padding.
    Zero padding leaves the dot products unchanged, and the real blocks' scales are those of the unpadded
    tensor. Equals ``quantize_mx_dual`` of each group zero-padded to ``[n_pad, k_pad]``, cut to ``[n, k_pad]``
    and ``[k, n_pad]``, with the scales of pad-only blocks set to 127.
    """
    op = "quantize_mx_dual_grouped"
    w = check_float_array(w, op, "w")
    f = get_format(fmt, op)
    mode = get_scale_mode(scale_mode, op)
    bs = check_block_size(block_size, op)
    g, n, k, p = check_dual_grouped_args(op, w, block_2d, pad, bs)
    k_pad, n_pad = dual_grouped_shapes(n, k, p)
    check_alloc((g, n_pad, k_pad), op, f"the padded weights for argument 'pad' = {p}")
    # every group in one vectorised pass (a Python loop over 2^24 empty groups took minutes)
    wp = np.zeros((g, n_pad, k_pad), np.float32)
    wp[:, :n, :k] = to_float32_checked(w, op, "w")
    row_q, row_s, col_q, col_s = dual_codes(wp, f, mode, bs, bool(block_2d))
    row_q, row_s = np.ascontiguousarray(row_q[:, :n]), np.ascontiguousarray(row_s[:, :n])
    col_q, col_s = np.ascontiguousarray(col_q[:, :k]), np.ascontiguousarray(col_s[:, :k])
    row_s[:, :, -(-k // bs) :] = PAD_SCALE
    col_s[:, :, -(-n // bs) :] = PAD_SCALE
    row = MXArray(row_q, row_s, f.name, bs, 2, (g, n, k_pad), mode.value)
    col = MXArray(col_q, col_s, f.name, bs, 2, (g, k, n_pad), mode.value)
    return MXDual(row, col)


def check_dual_grouped_args(op: str, w: Any, block_2d: Any, pad: Any, block_size: int) -> tuple[int, int, int, int]:
    """Checks shared by the numpy twin and the GPU op: returns ``(G, n, k, pad)``."""
    if w.ndim != 3:
        raise ShapeError(f"{op}: argument 'w' has shape {tuple(w.shape)}, expected a 3-D [G, n, k] array")
    if not isinstance(block_2d, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'block_2d' is {block_2d!r}, expected a bool")
    p = check_int(pad, op, "pad", minimum=1)
    if p % block_size:
        raise ShapeError(
            f"{op}: argument 'pad' is {p}, expected a multiple of block_size = {block_size} (padding is whole blocks)"
        )
    g, n, k = (int(v) for v in w.shape)
    return g, n, k, p
