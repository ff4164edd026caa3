"""Float64 twins of the grouped (MoE) MX GEMMs (:mod:`mxrt.problems.grouped_gemm`): the numpy backend of
:func:`mxrt.grouped_gemm_mx`, :func:`mxrt.grouped_gemm_mx_wgrad` and the DeepGEMM entry points, and the
reference every GPU path is tested against.

Each group's product is taken in float64 from the exactly dequantized operands and rounded once to the output
dtype (wgrad with ``accumulate``: ``round(out + product)``, the addend read from ``out``).
"""

from __future__ import annotations

import numpy as np

from ..formats import dequantize_mx
from ..formats.codecs import decode, get_format
from ..layouts.groups import group_offsets
from ..problems.grouped_gemm import GroupedGemmProblem, wgrad_columns
from .gemm import round_to


def _a_b(p: GroupedGemmProblem) -> tuple[np.ndarray, np.ndarray]:
    """``A [m, k]`` and ``B [G, n, k]`` (wgrad: ``B [n, k]``) exactly in float64; b's padding past k cut off."""
    a = dequantize_mx(p.a, np.float64)
    b = dequantize_mx(p.b, np.float64)
    if p.kind != "wgrad":
        b = b.reshape(p.num_groups, p.n, -1)[:, :, : p.k]
    return a, b


def row_groups(p: GroupedGemmProblem) -> list[tuple[int, np.ndarray]]:
    """``[(g, rows of a and out that group g computes), ...]`` of a forward problem (host groups)."""
    if p.kind == "lens":
        offs = group_offsets(p.groups)
        return [(g, np.arange(offs[g], offs[g + 1])) for g in range(p.num_groups)]
    if p.kind == "masked":
        return [(g, g * p.max_m + np.arange(int(p.groups[g]))) for g in range(p.num_groups)]
    ids = np.asarray(p.groups)
    return [(g, np.nonzero(ids == g)[0]) for g in range(p.num_groups)]


def grouped_gemm_f64(p: GroupedGemmProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(d64, written)``: the float64 result and a bool mask of the entries the op writes (wgrad: all)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if p.kind == "wgrad":
            d = np.zeros(p.out_shape, np.float64)
            if p.m and p.n:
                a, b = _a_b(p)
                for g, (c0, c1) in enumerate(wgrad_columns(p)):
                    d[g] = a[:, c0:c1] @ b[:, c0:c1].T
            return d, np.ones(p.out_shape, bool)
        d = np.zeros((p.m, p.n), np.float64)
        written = np.zeros((p.m, 1), bool)
        if p.m == 0 or p.n == 0:
            return d, np.broadcast_to(written, d.shape)
        a, b = _a_b(p)
        for g, rows in row_groups(p):
            if rows.size:
                d[rows] = a[rows] @ b[g].T
                written[rows] = True
        return d, np.broadcast_to(written, d.shape)


def grouped_gemm_numpy(p: GroupedGemmProblem) -> np.ndarray:
    """The numpy backend: ``p.out`` written in place (only the rows the op owns; wgrad: everything), or a fresh
    array (rows of no group are zero)."""
    d64, written = grouped_gemm_f64(p)
    if p.accumulate:
        with np.errstate(over="ignore", invalid="ignore"):
            d64 = d64 + np.asarray(p.out, np.float64)
    d = round_to(d64, p.out_dtype)
    if p.out is None:
        return np.where(written, d, np.zeros((), p.out_dtype)).astype(p.out_dtype)
    out = p.out
    np.copyto(out, d, where=written)
    return out


def deepgemm_dequant(codes: np.ndarray, fmt: str, sf: np.ndarray, gran_mn: int, gran_k: int) -> np.ndarray:
    """DeepGEMM operand ``codes [..., mn, k]`` (fp8 codes, uint8) times its scale factors ``sf [..., ceil(mn /
    gran_mn), ceil(k / gran_k)]`` (float32, or E8M0 bytes already decoded to float) in float64:
    ``x[..., i, j] = decode(codes[..., i, j]) * sf[..., i // gran_mn, j // gran_k]``."""
    f = get_format(fmt, "deepgemm_dequant")
    x = decode(np.asarray(codes, np.uint8), f.name).astype(np.float64)
    mn, k = x.shape[-2], x.shape[-1]
    s = np.asarray(sf, np.float64)
    s = np.repeat(np.repeat(s, gran_mn, axis=-2)[..., :mn, :], gran_k, axis=-1)[..., :k]
    with np.errstate(over="ignore", invalid="ignore"):
        return x * s
