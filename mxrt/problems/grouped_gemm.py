"""Grouped (MoE) MX GEMMs as problems: argument validation into one frozen :class:`GroupedGemmProblem`.

Four shapes of the same thing, ``out[rows of group g] = a_g @ b_g.T`` with every operand MX-quantized along the
reduction axis (one E8M0 scale per 32 elements):

- ``"lens"`` (:func:`mxrt.grouped_gemm_mx`, forward and dgrad): ``a [M, K]`` tight, rows grouped contiguously by
  ``group_lens [G]``; ``b [G, N, Kb]``; ``out [M, N]``.
- ``"indices"`` (DeepGEMM ``m_grouped_*_contiguous``): ``a [M, K]``, a group id per row (``m_indices [M]``, -1 rows
  are skipped and their ``out`` rows left untouched); ``b [G, N, Kb]``; ``out [M, N]``.
- ``"masked"`` (DeepGEMM ``m_grouped_*_masked``): ``a [G * max_m, K]`` (the ``[G, max_m, K]`` buffer, flat),
  group g owns rows ``[g * max_m, g * max_m + masked_m[g])``; ``out [G * max_m, N]``, other rows untouched.
- ``"wgrad"`` (:func:`mxrt.grouped_gemm_mx_wgrad`, variable K): ``a [N, Mc]`` and ``b [K, Mc]``, both quantized
  along their columns (M), the column layout of :func:`mxrt.quantize_mx_grouped` ``(colwise=True)``: group g reduces
  over columns ``[offs_pad[g], offs_pad[g+1])`` (its rows, then its zero padding) with
  ``offs_pad = pad_group_layout(group_lens, align)[1]``;
  ``out [G, N, K] = a_g @ b_g.T`` (optionally added to ``out``).

``b`` of the forward problems may carry zero padding past K (``quantize_mx_dual_grouped``'s ``k_pad``): only its
first K elements are read. Host group descriptions are checked here (lengths, sums, ids); device ones (CuPy) only
for dtype and shape, as the kernels read them without a host synchronisation (see :mod:`mxrt.ops.grouped_gemm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kinds import dtype_name, is_device_array
from ..errors import DtypeError, LayoutError, ShapeError, check_int, check_size_limit
from ..formats import MXArray
from ..formats.mx import _check_geometry, check_mxarray
from ..layouts._check import check_group_lens, check_int_array
from ..layouts.groups import pad_group_layout, rows_bound
from .gemm import GEMM_BLOCK, GEMM_FORMAT_PAIRS, _operand, _out_dtype

#: Output dtypes of the forward / dgrad grouped GEMM and of the wgrad.
GROUPED_OUT_DTYPES = ("bfloat16", "float16", "float32")
WGRAD_OUT_DTYPES = ("float32", "bfloat16")
GROUPED_KINDS = ("lens", "indices", "masked", "wgrad", "kgrouped")
_DEVICE_INT = ("int32", "int64")


@dataclass(frozen=True, eq=False)
class GroupedGemmProblem:
    """A validated grouped GEMM; everything a backend needs.

    Attributes
    ----------
    op : the public op's name (error messages).
    kind : one of :data:`GROUPED_KINDS` (module docstring).
    num_groups : G.
    m : rows of ``a`` (and of ``out`` except for wgrad); wgrad: N.
    n : columns of ``out``; wgrad: K.
    k : the reduction length read; wgrad: the column count ``Mc`` of ``a`` and ``b``.
    a : MXArray ``[m, k]`` along axis 1, logical row-major scales ``[m, ceil(k/32)]``.
    b : MXArray ``[G * n, kb]`` along axis 1 (``b [G, n, kb]`` flattened; ``kb >= k``, padding unread);
        wgrad: ``[n, k]``.
    a_fmt, b_fmt : element formats (a pair of :data:`GEMM_FORMAT_PAIRS`).
    groups : the group description: ``group_lens`` int64 ``[G]`` (``"lens"``, ``"wgrad"``), ``m_indices`` int32
        ``[m]`` (``"indices"``), ``masked_m`` int32 ``[G]`` (``"masked"``); a CuPy int32/int64 array on the device.
    max_m : rows per group of the masked buffer (``"masked"``), else 0.
    align : the per-group column padding of the wgrad operands (``"wgrad"``), else 0.
    out_dtype : numpy dtype of ``out``.
    out : caller's output (``[m, n]``; wgrad ``[G, m, n]``) or None; required for indices / masked.
    accumulate : wgrad adds into ``out`` (``out`` required).
    device : every array is a CuPy array.
    """

    op: str
    kind: str
    num_groups: int
    m: int
    n: int
    k: int
    a: MXArray
    b: MXArray
    a_fmt: str
    b_fmt: str
    groups: Any
    max_m: int
    align: int
    out_dtype: np.dtype
    out: Any
    accumulate: bool
    device: bool
    #: DeepGEMM's Hopper recipe (built by mxrt.api.deep_gemm only): ``a.scales`` float32 ``[m, ceil(k/128)]``,
    #: ``b.scales`` float32 ``[G * ceil(n/sf_gmn_b), ceil(k/128)]``; GPU only (the host twin has its own path)
    scale_f32: bool = False
    sf_gmn_b: int = 1
    #: DeepGEMM's granularity with UE8M0 bytes (built by mxrt.api.deep_gemm for the grouped engine only): ``a.scales``
    #: uint8 ``[m, ceil(k/128)]``, ``b.scales`` uint8 ``[G * ceil(n/128), ceil(k/128)]`` (``sf_gmn_b`` 128)
    sf_k128: bool = False

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.num_groups, self.m, self.n) if self.kind in ("wgrad", "kgrouped") else (self.m, self.n)

    @property
    def flops_bound(self) -> int:
        """``2 * m * n * k``: the FLOPs of the dense problem that holds every group (an upper bound)."""
        return 2 * self.m * self.n * self.k


def _grouped_b(b: object, op: str, name: str = "b") -> tuple[MXArray, int, int, int]:
    """``b [G, N, Kb]`` along its last axis (MXArray or ``(codes, scales, fmt[, kb])``) as a flat ``[G*N, Kb]``
    MXArray for :func:`mxrt.problems.gemm._operand`; returns ``(flat, G, N, Kb)``. ``name`` is the argument's name in
    error messages (``"w"`` for :func:`mxrt.moe_gemm_mx`)."""
    if isinstance(b, MXArray):
        shape, axis, _ = _check_geometry(b, op, name)
        if len(shape) != 3:
            raise ShapeError(f"{op}: {name} has shape {shape}, expected a 3-D [G, n, k] MXArray (one weight per group)")
        if axis != 2:
            raise ShapeError(
                f"{op}: {name} is quantized along axis {axis}, expected axis 2 (the reduction dim of {name} [G, n, k])"
            )
        if b.scale_layout is not None:
            raise LayoutError(f"{op}: {name}.scale_layout is {b.scale_layout!r}, expected None (row-major scales)")
        if is_device_array(b.data) or is_device_array(b.scales):
            data, scales = b.data, b.scales
            # the buffers against the MXArray's own shape before they are flattened (their last axis, dtype and
            # contiguity are checked by the dense operand check the flat view goes through)
            for what, arr in (("data", data), ("scales", scales)):
                got = tuple(getattr(arr, "shape", ()))
                if len(got) != 3 or got[:2] != tuple(shape[:2]):
                    raise ShapeError(
                        f"{op}: {name}.{what} has shape {got}, expected [{shape[0]}, {shape[1]}, ...] for an MXArray "
                        f"of shape {tuple(shape)}"
                    )
        else:
            b = check_mxarray(b, op, name)
            data, scales = np.asarray(b.data), np.asarray(b.scales)
        g, n, kb = shape
        flat = MXArray(
            _flat(data, g, n, op, f"{name}.data"),
            _flat(scales, g, n, op, f"{name}.scales"),
            b.fmt,
            b.block_size,
            1,
            (g * n, kb),
            b.scale_mode,
        )
        return flat, g, n, kb
    if isinstance(b, tuple) and len(b) in (3, 4):
        codes, scales = b[0], b[1]
        if getattr(codes, "ndim", None) != 3 or getattr(scales, "ndim", None) != 3:
            raise ShapeError(
                f"{op}: {name} codes / scales have shapes {getattr(codes, 'shape', None)} / "
                f"{getattr(scales, 'shape', None)}, expected 3-D [G, n, k] codes and [G, n, ceil(k/32)] scales"
            )
        g, n = int(codes.shape[0]), int(codes.shape[1])
        if tuple(scales.shape[:2]) != (g, n):
            raise ShapeError(
                f"{op}: {name} scales have shape {tuple(scales.shape)}, expected [{g}, {n}, ceil(k/32)] for codes of "
                f"shape {tuple(codes.shape)}"
            )
        pieces = (_flat(codes, g, n, op, f"{name} codes"), _flat(scales, g, n, op, f"{name} scales"), *b[2:])
        q = _operand(pieces, name, None, op)[0]
        return q, g, n, q.shape[1]
    raise DtypeError(
        f"{op}: argument '{name}' is a {type(b).__name__}, expected an MXArray [G, n, k] or a tuple (codes, scales, "
        "fmt)"
    )


def _flat(x: Any, g: int, n: int, op: str, what: str) -> Any:
    if is_device_array(x):
        if not x.flags.c_contiguous:
            raise LayoutError(f"{op}: {what} has strides {x.strides}, expected a C-contiguous CuPy array")
        return x.reshape(g * n, -1) if g * n else x.reshape(0, x.shape[-1])
    a = np.asarray(x)
    return a.reshape(g * n, a.shape[-1])


def _check_b_k(op: str, k: int, kb: int, what: str = "b") -> None:
    """``b``'s reduction length ``kb`` against ``a``'s ``k``: equal, or padded past it with whole 32-blocks."""
    if kb == k:
        return
    if kb < k or kb % GEMM_BLOCK:
        raise ShapeError(
            f"{op}: a has k = {k} but {what} has k = {kb}, expected equal K, or {what} padded past k to a multiple of "
            f"{GEMM_BLOCK} (the k_pad of quantize_mx_dual_grouped; its padding is not read)"
        )


def _pair(op: str, qa: MXArray, qb: MXArray) -> None:
    if (qa.fmt, qb.fmt) not in GEMM_FORMAT_PAIRS:
        raise DtypeError(
            f"{op}: formats (a.fmt, b.fmt) are {(qa.fmt, qb.fmt)}, expected one of {list(GEMM_FORMAT_PAIRS)}"
        )


def _device_ints(x: Any, op: str, arg: str, size: int) -> Any:
    if not is_device_array(x):
        raise DtypeError(
            f"{op}: argument '{arg}' is a {type(x).__name__} while the operands are CuPy arrays, expected a CuPy "
            "int32/int64 array (mxrt makes no implicit transfer; the kernels read it on the device)"
        )
    if dtype_name(x.dtype) not in _DEVICE_INT:
        raise DtypeError(f"{op}: argument '{arg}' is a CuPy array of dtype {x.dtype}, expected int32 or int64")
    if x.ndim != 1 or int(x.shape[0]) != size:
        raise ShapeError(f"{op}: argument '{arg}' has shape {tuple(x.shape)}, expected ({size},)")
    if not x.flags.c_contiguous:
        raise LayoutError(f"{op}: argument '{arg}' has strides {x.strides}, expected a contiguous CuPy array")
    return x


def _side(op: str, device: bool, *named: tuple[str, Any]) -> None:
    for name, x in named:
        if x is not None and is_device_array(x) != device:
            raise DtypeError(
                f"{op}: argument '{name}' is {'a CuPy array' if is_device_array(x) else 'a host array'} but a is "
                f"{'on the device' if device else 'on the host'}; expected every array on the same side (mxrt makes "
                "no implicit transfer)"
            )


def _check_out(op: str, out: Any, shape: tuple[int, ...], dt: np.dtype, device: bool, required: bool) -> None:
    if out is None:
        if required:
            raise ShapeError(f"{op}: argument 'out' is None, expected an array of shape {shape} (written in place)")
        return
    if device:
        allowed = ("uint16", "bfloat16") if dt.name == "bfloat16" else (dt.name,)
        if dtype_name(out.dtype) not in allowed:
            raise DtypeError(f"{op}: argument 'out' is a CuPy array of dtype {out.dtype}, expected {allowed[0]}")
        if tuple(out.shape) != shape:
            raise ShapeError(f"{op}: argument 'out' has shape {tuple(out.shape)}, expected {shape}")
        if not out.flags.c_contiguous:
            raise LayoutError(f"{op}: argument 'out' has strides {out.strides}, expected a C-contiguous CuPy array")
        return
    if not isinstance(out, np.ndarray):
        raise DtypeError(f"{op}: argument 'out' is a {type(out).__name__}, expected a numpy array or None")
    if out.dtype != dt:
        raise DtypeError(f"{op}: argument 'out' has dtype {out.dtype}, expected {dt}")
    if out.shape != shape:
        raise ShapeError(f"{op}: argument 'out' has shape {out.shape}, expected {shape}")
    if not out.flags.writeable:
        raise ShapeError(f"{op}: argument 'out' is read-only, expected a writeable array")


def _lens(op: str, group_lens: Any, g: int, total: int | None, device: bool, arg: str = "group_lens") -> Any:
    """Host lengths checked (>= 0, G of them, summing to ``total`` when given); device ones by dtype and shape."""
    if device:
        if not is_device_array(group_lens):
            raise DtypeError(
                f"{op}: argument '{arg}' is a {type(group_lens).__name__} while the operands are CuPy arrays, expected "
                "a CuPy int32/int64 array (mxrt makes no implicit transfer; the kernels read it on the device)"
            )
        return _device_ints(group_lens, op, arg, g)
    if is_device_array(group_lens):
        raise DtypeError(f"{op}: argument '{arg}' is a CuPy array but the operands are numpy arrays")
    lens = check_group_lens(group_lens, op, arg)
    if lens.size != g:
        raise ShapeError(f"{op}: argument '{arg}' has {lens.size} groups, expected G = {g} (b.shape[0])")
    if total is not None and int(lens.sum()) != total:
        raise ShapeError(f"{op}: argument '{arg}' sums to {int(lens.sum())}, expected a.shape[0] = {total}")
    return lens


def grouped_gemm_problem(
    a: object,
    b: object,
    groups: object,
    *,
    kind: str = "lens",
    out_dtype: object = "bfloat16",
    out: object = None,
    max_m: int = 0,
    op: str = "grouped_gemm_mx",
    out_dtypes: tuple[str, ...] = GROUPED_OUT_DTYPES,
) -> GroupedGemmProblem:
    """Validate a forward / dgrad grouped GEMM (``kind`` "lens", "indices" or "masked"; module docstring).

    Check order: operands (types, formats, shapes), K match, group description, out_dtype, out.
    """
    qa = _operand(a, "a", None, op)[0]
    qb, g, n, kb = _grouped_b(b, op)
    _pair(op, qa, qb)
    m, k = qa.shape
    _check_b_k(op, k, kb)
    check_size_limit(m * n, op, f"the result [m, n] = [{m}, {n}]: its element count")
    device = is_device_array(qa.data)
    if device != is_device_array(qb.data):
        raise DtypeError(f"{op}: a and b live on different sides (host and device); expected both numpy or both CuPy")
    if kind == "lens":
        grp = _lens(op, groups, g, m, device)
    elif kind == "masked":
        mm = check_int(max_m, op, "max_m", minimum=0)
        if m != g * mm:
            raise ShapeError(f"{op}: a has {m} rows, expected G * max_m = {g} * {mm} (a [G, max_m, k])")
        grp = _device_ints(groups, op, "masked_m", g) if device else _masked_m(op, groups, g, mm)
    elif kind == "indices":
        grp = _device_ints(groups, op, "grouped_layout", m) if device else _m_indices(op, groups, g, m)
    else:
        raise ValueError(f"grouped_gemm_problem: kind {kind!r}")  # internal caller error, never user input
    dt = _out_dtype(out_dtype, op, out_dtypes)
    _side(op, device, ("out", out))
    _check_out(op, out, (m, n), dt, device, required=kind != "lens")
    return GroupedGemmProblem(
        op=op,
        kind=kind,
        num_groups=g,
        m=m,
        n=n,
        k=k,
        a=qa,
        b=qb,
        a_fmt=qa.fmt,
        b_fmt=qb.fmt,
        groups=grp,
        max_m=int(max_m) if kind == "masked" else 0,
        align=0,
        out_dtype=dt,
        out=out,
        accumulate=False,
        device=device,
    )


def _masked_m(op: str, masked_m: object, g: int, max_m: int) -> np.ndarray:
    mm = check_group_lens(masked_m, op, "masked_m")
    if mm.size != g:
        raise ShapeError(f"{op}: argument 'masked_m' has {mm.size} groups, expected G = {g} (b.shape[0])")
    if mm.size and int(mm.max()) > max_m:
        raise ShapeError(f"{op}: argument 'masked_m' has max {int(mm.max())}, expected values <= max_m = {max_m}")
    return mm.astype(np.int32)


def _m_indices(op: str, m_indices: object, g: int, m: int) -> np.ndarray:
    ids = check_int_array(m_indices, op, "grouped_layout", ndim=1)
    if ids.size != m:
        raise ShapeError(
            f"{op}: argument 'grouped_layout' has {ids.size} rows, expected a.shape[0] = {m} (one id per row)"
        )
    if ids.size and (int(ids.min()) < -1 or int(ids.max()) >= g):
        raise LayoutError(
            f"{op}: argument 'grouped_layout' holds ids in [{int(ids.min())}, {int(ids.max())}], expected -1 (skipped "
            f"row) or a group in [0, {g})"
        )
    return ids.astype(np.int32)


def wgrad_problem(
    a: object,
    b: object,
    group_lens: object,
    *,
    align: object = 32,
    out_dtype: object = "float32",
    out: object = None,
    accumulate: object = False,
    op: str = "grouped_gemm_mx_wgrad",
) -> GroupedGemmProblem:
    """Validate a variable-K grouped wgrad (module docstring, ``"wgrad"``).

    ``a``, ``b`` may also be :class:`mxrt.MXGrouped` results of ``quantize_mx_grouped(..., colwise=True)`` (their
    ``col`` is used).
    """
    a, b = wgrad_operand(a, "a", op), wgrad_operand(b, "b", op)
    qa = _operand(a, "a", None, op)[0]
    qb = _operand(b, "b", None, op)[0]
    _pair(op, qa, qb)
    (n, mc), (k, mcb) = qa.shape, qb.shape
    if mc != mcb:
        raise ShapeError(
            f"{op}: a has {mc} columns (shape {qa.shape}) but b has {mcb} (shape {qb.shape}), expected the same padded "
            "M (both quantized by quantize_mx_grouped with the same group_lens and col_align)"
        )
    al = check_int(align, op, "align", minimum=1)
    if al % GEMM_BLOCK:
        raise ShapeError(
            f"{op}: argument 'align' is {al}, expected a multiple of {GEMM_BLOCK} (a scale block must not straddle "
            "two groups)"
        )
    device = is_device_array(qa.data)
    if device != is_device_array(qb.data):
        raise DtypeError(f"{op}: a and b live on different sides (host and device); expected both numpy or both CuPy")
    if device:
        lens = _lens(op, group_lens, _num_groups(group_lens, op), None, True)
        g = int(lens.shape[0])
    else:
        lens = _lens(op, group_lens, _num_groups(group_lens, op), None, False)
        g = lens.size
        need = int(pad_group_layout(lens, al)[1][-1])
        if need > mc:
            raise ShapeError(
                f"{op}: argument 'group_lens' padded to align = {al} needs {need} columns, but a and b have {mc}; "
                "expected the colwise output of quantize_mx_grouped(x, group_lens, colwise=True, col_align=align)"
            )
    rows_bound(0, g, al, op)
    check_size_limit(g * n * k, op, f"the result [G, n, k] = [{g}, {n}, {k}]: its element count")
    if not isinstance(accumulate, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'accumulate' is {accumulate!r}, expected a bool")
    dt = _out_dtype(out_dtype, op, WGRAD_OUT_DTYPES)
    _side(op, device, ("out", out))
    _check_out(op, out, (g, n, k), dt, device, required=bool(accumulate))
    return GroupedGemmProblem(
        op=op,
        kind="wgrad",
        num_groups=g,
        m=n,
        n=k,
        k=mc,
        a=qa,
        b=qb,
        a_fmt=qa.fmt,
        b_fmt=qb.fmt,
        groups=lens,
        max_m=0,
        align=al,
        out_dtype=dt,
        out=out,
        accumulate=bool(accumulate),
        device=device,
    )


def wgrad_operand(x: Any, name: str, op: str) -> Any:
    """An :class:`mxrt.MXGrouped` operand as its colwise MXArray (anything else unchanged)."""
    if not _is_grouped(x):
        return x
    if x.col is None:
        raise ShapeError(
            f"{op}: argument '{name}' is an MXGrouped without a colwise part, expected the result of "
            "quantize_mx_grouped(..., colwise=True)"
        )
    return x.col


def _is_grouped(x: object) -> bool:
    return type(x).__name__ == "MXGrouped" and hasattr(x, "col")


def _num_groups(group_lens: object, op: str) -> int:
    shape = getattr(group_lens, "shape", None)
    if shape is None:
        return len(check_group_lens(group_lens, op))
    if len(shape) != 1:
        raise ShapeError(f"{op}: argument 'group_lens' has shape {tuple(shape)}, expected a 1-D [G] array")
    return int(shape[0])


def wgrad_columns(p: GroupedGemmProblem) -> list[tuple[int, int]]:
    """Host wgrad problem: the columns ``[(c0, c1), ...]`` each group reduces over: ``[offs_pad[g], offs_pad[g+1])``,
    its real columns and its padding (zero codes from :func:`mxrt.quantize_mx_grouped`, so they add nothing)."""
    offs = pad_group_layout(p.groups, p.align)[1]
    return [(int(offs[g]), int(offs[g + 1])) for g in range(p.num_groups)]
