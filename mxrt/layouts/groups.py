"""Group layouts for grouped / MoE GEMMs (MX_REFERENCE.md 4a, 4b): offsets, per-group padding, DeepGEMM layouts.

``group_lens: int [G]`` holds the rows of each group in a tight ``x [sum(group_lens), ...]``. Offsets are int64
(Primus-Turbo); the DeepGEMM layouts are int32 and refuse totals beyond 2^31-1 with a :class:`ShapeError`.
"""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, LayoutError, ShapeError, check_size_limit
from ._check import (
    INT32_MAX,
    INT64_MAX,
    as_array,
    cdiv,
    check_alloc,
    check_fill_value,
    check_group_lens,
    check_int,
    check_int32_limit,
    check_int_array,
    check_total,
)


def group_offsets(group_lens: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum ``offs: int64 [G+1]``, ``offs[0] = 0``, ``offs[g+1] = offs[g] + group_lens[g]``.

    Group ``g`` owns rows ``[offs[g], offs[g+1])`` (Primus-Turbo ``group_offs``). Example:
    ``group_offsets([3, 0, 5]) -> [0, 3, 3, 8]``.
    """
    return _offsets(check_group_lens(group_lens, "group_offsets"))


def _offsets(lens: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum of validated lengths (their total fits int64)."""
    offs = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    return offs


def _pad_layout(lens: np.ndarray, align: object, op: str, arg: str = "align") -> tuple[int, np.ndarray, np.ndarray]:
    """``(align, lens_pad, offs_pad)`` of validated ``lens``, computed without wrapping (errors name ``op``)."""
    a = check_int(align, op, arg, minimum=1)
    if lens.size and int(lens.max()) > INT64_MAX - (a - 1):
        raise ShapeError(
            f"{op}: argument '{arg}' is {a}, which pads group length {int(lens.max())} past 2^63-1; expected padded "
            "lengths that fit int64"
        )
    lens_pad = (lens + (a - 1)) // a * a
    check_total(lens_pad, op, f"the group lengths padded to argument '{arg}' = {a}")
    return a, lens_pad, _offsets(lens_pad)


def pad_group_layout(group_lens: np.ndarray, align: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group padded lengths and offsets: ``lens_pad[g] = ceil(lens[g]/align)*align`` (int64 [G]) and
    ``offs_pad = group_offsets(lens_pad)`` (int64 [G+1]); Primus-Turbo ``compute_padded_layout_kernel`` (align 32
    for the rowwise operand, 128 for the colwise/wgrad one). Empty groups stay empty.
    """
    op = "pad_group_layout"
    _, lens_pad, offs_pad = _pad_layout(check_group_lens(group_lens, op), align, op)
    return lens_pad, offs_pad


def padded_rows_upper_bound(total_rows: int, num_groups: int, align: int) -> int:
    """Host-side upper bound of ``pad_group_layout(lens, align)[1][-1]`` over every split of ``total_rows`` into
    ``num_groups`` groups: ``ceil((total_rows + num_groups*align) / align) * align`` (Primus-Turbo buffer sizes
    ``M_pad_row``/``M_pad_col``), so a device buffer can be sized without reading the group sizes back. Every
    argument and the result are within mxrt's size limit, 2^31-1 (a :class:`ShapeError` otherwise).
    """
    return rows_bound(total_rows, num_groups, align, "padded_rows_upper_bound")


def rows_bound(total_rows: object, num_groups: object, align: object, op: str, arg: str = "align") -> int:
    """:func:`padded_rows_upper_bound` with errors that name ``op`` (the public op that sizes its buffers)."""
    t = check_int(total_rows, op, "total_rows", minimum=0)
    g = check_int(num_groups, op, "num_groups", minimum=0)
    a = check_int(align, op, arg, minimum=1)
    bound = cdiv(t + g * a, a) * a
    return check_size_limit(bound, op, f"the padded row bound ceil((total_rows + num_groups*{arg}) / {arg}) * {arg}")


def _row_map(lens: np.ndarray, offs_dst: np.ndarray) -> np.ndarray:
    """Destination row of every tight row: ``offs_dst[g] + i`` for row ``offs[g] + i``."""
    offs = _offsets(lens)
    return np.repeat(offs_dst[:-1] - offs[:-1], lens) + np.arange(int(offs[-1]), dtype=np.int64)


def pad_rows(
    x: np.ndarray, group_lens: np.ndarray, align: int, pad_value: object = 0, *, rows: int | None = None
) -> np.ndarray:
    """Move rows from the tight layout to the per-group padded one: ``y[offs_pad[g] + i] = x[offs[g] + i]`` for
    ``i < lens[g]``; every other row is ``pad_value``.

    ``x: [sum(group_lens), ...]`` of any numeric dtype (kept). ``y`` has ``rows`` rows: by default the exact
    padded total ``offs_pad[-1]``; pass ``padded_rows_upper_bound(...)`` for the device-sized buffer (must be
    ``>= offs_pad[-1]``). ``pad_value`` is a real scalar that x's dtype holds (see ``check_fill_value``: 0.5 for
    integer x, ``None``, complex for real x, or 1e300 for float16 are errors). ``y`` holds at most 2^31-1 elements.
    """
    op = "pad_rows"
    x = _check_rows_array(x, op, "x")
    lens = check_group_lens(group_lens, op)
    a, _, offs_pad = _pad_layout(lens, align, op)
    total = int(lens.sum())
    if x.shape[0] != total:
        raise ShapeError(
            f"{op}: argument 'x' has shape {x.shape}, expected [{total}, ...] = [sum(group_lens), ...]; "
            "argument 'group_lens' and x disagree"
        )
    need = int(offs_pad[-1])
    n = need if rows is None else check_int(rows, op, "rows", minimum=0)
    if n < need:
        raise ShapeError(f"{op}: argument 'rows' is {n}, expected >= {need} (the padded total for align {a})")
    fill = check_fill_value(pad_value, x.dtype, op)
    y = np.full(check_alloc((n, *x.shape[1:]), op, "the result"), fill, dtype=x.dtype)
    y[_row_map(lens, offs_pad)] = x
    return y


def _check_rows_array(x: object, op: str, arg: str, *, ndim: int = 1) -> np.ndarray:
    """A numeric array of rank >= ``ndim`` (rows of it are moved), in native byte order."""
    a = as_array(x, op, arg)
    if a.dtype.kind in "OSUMm" or (a.dtype.kind == "V" and a.dtype.type.__module__ != "ml_dtypes"):
        raise DtypeError(f"{op}: argument '{arg}' has dtype {a.dtype}, expected a numeric dtype")
    if a.ndim < ndim:
        raise ShapeError(f"{op}: argument '{arg}' has shape {a.shape}, expected an array of rank >= {ndim}")
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def unpad_rows(y: np.ndarray, group_lens: np.ndarray, align: int) -> np.ndarray:
    """Inverse of :func:`pad_rows`: ``x[offs[g] + i] = y[offs_pad[g] + i]``; ``y`` may have extra trailing rows."""
    op = "unpad_rows"
    y = _check_rows_array(y, op, "y")
    lens = check_group_lens(group_lens, op)
    a, _, offs_pad = _pad_layout(lens, align, op)
    need = int(offs_pad[-1])
    check_size_limit(need, op, f"the padded total for argument 'align' = {a}")
    if y.shape[0] < need:
        raise ShapeError(f"{op}: argument 'y' has shape {y.shape}, expected at least {need} rows (padded total)")
    return y[_row_map(lens, offs_pad)]


def contiguous_m_indices(group_lens: np.ndarray, alignment: int = 128) -> np.ndarray:
    """DeepGEMM contiguous ``grouped_layout``: int32 ``[M_sum]``, ``M_sum = sum(align(m_g, alignment))``.

    Row ``offs_pad[g] + i`` holds ``g`` for ``i < m_g`` and ``-1`` for the group's padding rows
    ``m_g <= i < align(m_g, alignment)`` (``offs_pad`` from :func:`pad_group_layout`; rows of ``A`` go there via
    :func:`pad_rows`). Raises :class:`ShapeError` when ``M_sum`` exceeds 2^31-1 (int32 row math in the kernels).
    """
    return _m_indices(check_group_lens(group_lens, "contiguous_m_indices"), alignment, "contiguous_m_indices")


def _m_indices(lens: np.ndarray, alignment: object, op: str) -> np.ndarray:
    _, _, offs_pad = _pad_layout(lens, alignment, op, "alignment")
    check_int32_limit(int(offs_pad[-1]), op, "M_sum = sum(align(group_lens, alignment))")
    out = np.full(int(offs_pad[-1]), -1, dtype=np.int32)
    out[_row_map(lens, offs_pad)] = np.repeat(np.arange(lens.size, dtype=np.int32), lens)
    return out


def group_lens_from_m_indices(m_indices: np.ndarray, num_groups: int, alignment: int = 128) -> np.ndarray:
    """Inverse of :func:`contiguous_m_indices`: the int64 ``group_lens [num_groups]`` it was built from.

    Raises :class:`LayoutError` when ``m_indices`` is not exactly ``contiguous_m_indices(lens, alignment)``.
    """
    op = "group_lens_from_m_indices"
    m = check_int_array(m_indices, op, "m_indices", ndim=1)
    g = check_int(num_groups, op, "num_groups", minimum=0)
    a = check_int(alignment, op, "alignment", minimum=1)
    if m.size and (m.min() < -1 or m.max() >= g):
        raise LayoutError(
            f"{op}: argument 'm_indices' has values in [{m.min()}, {m.max()}], expected -1 or [0, {g}) for "
            f"num_groups = {g}"
        )
    lens = np.bincount(m[m >= 0].astype(np.int64), minlength=g).astype(np.int64)
    if not np.array_equal(_m_indices(lens, a, op), m):
        raise LayoutError(
            f"{op}: argument 'm_indices' is not a contiguous layout with alignment {alignment} "
            f"(groups in order, each padded with -1 to a multiple of {alignment})"
        )
    return lens


def contiguous_psum_layout(group_lens: np.ndarray, alignment: int = 128) -> np.ndarray:
    """DeepGEMM contiguous psum ``grouped_layout`` (``use_psum_layout=True``): int32 ``[G]`` end offsets.

    ``end[g] = align(end[g-1], alignment) + m_g`` with ``align(end[-1]) = 0``; group ``g`` covers rows
    ``[align(end[g-1], alignment), end[g])``. Its start rows equal ``pad_group_layout(lens, alignment)[1][:-1]``,
    so :func:`pad_rows` places ``A``. Raises :class:`ShapeError` past 2^31-1.
    """
    op = "contiguous_psum_layout"
    lens = check_group_lens(group_lens, op)
    _, _, offs_pad = _pad_layout(lens, alignment, op, "alignment")
    end = offs_pad[:-1] + lens
    if end.size:
        check_int32_limit(int(end[-1]), op, "the last end offset")
    return end.astype(np.int32)


def group_lens_from_psum(psum_layout: np.ndarray, alignment: int = 128) -> np.ndarray:
    """Inverse of :func:`contiguous_psum_layout`: ``m_g = end[g] - align(end[g-1], alignment)`` (int64 [G]).

    Raises :class:`LayoutError` when an end offset lies before its group's aligned start.
    """
    op = "group_lens_from_psum"
    end = check_int_array(psum_layout, op, "psum_layout", ndim=1)
    a = check_int(alignment, op, "alignment", minimum=1)
    if end.size and (int(end.max()) > INT32_MAX or int(end.min()) < 0):
        raise ShapeError(
            f"{op}: argument 'psum_layout' holds values in [{end.min()}, {end.max()}], expected int32 end offsets "
            f"in [0, 2^31-1]"
        )
    end = end.astype(np.int64)
    start = np.zeros_like(end)
    start[1:] = (end[:-1] + (a - 1)) // a * a
    lens = end - start
    if lens.size and lens.min() < 0:
        g = int(np.argmax(lens < 0))
        raise LayoutError(
            f"{op}: argument 'psum_layout' has end[{g}] = {end[g]} before the group's start {start[g]}, "
            f"expected non-decreasing ends with align(end[g-1], alignment = {a}) <= end[g]"
        )
    return lens


def to_masked(
    x: np.ndarray, group_lens: np.ndarray, max_m: int | None = None, pad_value: object = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Tight ``x [sum(lens), ...]`` to DeepGEMM's masked layout: ``x_masked [G, max_m, ...]`` with
    ``x_masked[g, i] = x[offs[g] + i]`` for ``i < lens[g]`` (the rest ``pad_value``), and ``masked_m = int32(lens)``.

    ``max_m`` defaults to ``max(lens)`` (0 with no groups); a smaller one, or one past 2^31-1, is a
    :class:`ShapeError`.
    """
    op = "to_masked"
    x = _check_rows_array(x, op, "x")
    lens = check_group_lens(group_lens, op)
    total = int(lens.sum())
    if x.shape[0] != total:
        raise ShapeError(
            f"{op}: argument 'x' has shape {x.shape}, expected [{total}, ...] = [sum(group_lens), ...]; "
            "argument 'group_lens' and x disagree"
        )
    longest = int(lens.max()) if lens.size else 0
    m = longest if max_m is None else check_int(max_m, op, "max_m", minimum=0)
    if m < longest:
        raise ShapeError(f"{op}: argument 'max_m' is {m}, expected >= max(group_lens) = {longest}")
    fill = check_fill_value(pad_value, x.dtype, op)
    out = np.full(check_alloc((lens.size, m, *x.shape[1:]), op, "x_masked"), fill, dtype=x.dtype)
    g = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    i = np.arange(total, dtype=np.int64) - np.repeat(group_offsets(lens)[:-1], lens)
    out[g, i] = x
    return out, lens.astype(np.int32)


def from_masked(x_masked: np.ndarray, masked_m: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_masked`: concatenate ``x_masked[g, :masked_m[g]]`` over ``g`` (``[sum(masked_m), ...]``)."""
    op = "from_masked"
    xm = _check_rows_array(x_masked, op, "x_masked", ndim=2)
    lens = check_group_lens(masked_m, op, "masked_m")
    if xm.shape[0] != lens.size:
        raise ShapeError(
            f"{op}: argument 'x_masked' has shape {xm.shape}, expected [{lens.size}, max_m, ...] for argument "
            f"'masked_m' of {lens.size} groups"
        )
    if lens.size and lens.max() > xm.shape[1]:
        raise ShapeError(f"{op}: argument 'masked_m' has max {lens.max()}, expected <= max_m = {xm.shape[1]}")
    return xm[np.arange(xm.shape[1]) < lens[:, None]]
