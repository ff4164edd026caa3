"""Float64 reference of the dense MX GEMM ``a @ b.T`` (the twin every GEMM path is tested against)."""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError
from ..formats import MXArray, dequantize_mx
from ..problems.gemm import GEMM_OUT_DTYPES, GemmProblem, gemm_problem


def dequantized_operands(p: GemmProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` as exact float64 ``[m, k]`` and ``[n, k]`` (NaN where a scale byte is 0xFF)."""
    return dequantize_mx(p.a, np.float64), dequantize_mx(p.b, np.float64)


def round_to(d64: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float64 once to ``dtype`` (RNE; beyond its range -> +-inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return d64.astype(dtype)


def gemm_f64(p: GemmProblem, k_range: tuple[int, int] | None = None) -> np.ndarray:
    """Float64 ``A[:, k0:k1] @ B[:, k0:k1].T`` of the dequantized operands (all of K by default)."""
    if p.is_empty:
        return np.zeros((p.m, p.n), np.float64)
    A, B = dequantized_operands(p)
    if k_range is not None:
        A, B = A[:, k_range[0] : k_range[1]], B[:, k_range[0] : k_range[1]]
    with np.errstate(over="ignore", invalid="ignore"):
        return A @ B.T


def gemm_mx(
    a: MXArray | tuple,
    b: MXArray | tuple,
    *,
    out_dtype: str = "float32",
    a_scale_layout: str | None = None,
    b_scale_layout: str | None = None,
) -> np.ndarray:
    """Float64 reference of the dense MX GEMM: ``round(dequant(a) @ dequant(b).T)`` to ``out_dtype``.

    Parameters
    ----------
    a : MXArray ``[m, k]`` quantized along axis 1 with block 32, or raw pieces ``(codes, scales, fmt[, k])``
        (see :func:`mxrt.gemm_mx`).
    b : the same for ``[n, k]``.
    out_dtype : ``"float32"`` (default), ``"bfloat16"``, ``"float16"`` or ``"float64"``.
    a_scale_layout, b_scale_layout : layout of raw-piece scales (one of ``mxrt.SCALE_LAYOUTS``) or None.

    Returns
    -------
    ndarray ``[m, n]`` of ``out_dtype``.

    Notes
    -----
    Both operands are dequantized exactly in float64 (``decode(code) * 2^(scale - 127)``), multiplied in
    float64, and rounded once. Empty dims give an empty result; ``k == 0`` gives zeros. This is the numpy twin
    that every backend of :func:`mxrt.gemm_mx` is tested against.
    """
    p = gemm_problem(
        a,
        b,
        out_dtype=out_dtype,
        a_scale_layout=a_scale_layout,
        b_scale_layout=b_scale_layout,
        op="reference.gemm_mx",
        out_dtypes=(*GEMM_OUT_DTYPES, "float64"),
    )
    if p.device:
        raise DtypeError("reference.gemm_mx: a and b are CuPy arrays, expected numpy (the float64 twin is host-only)")
    return round_to(gemm_f64(p), p.out_dtype)


def gemm_numpy(p: GemmProblem) -> np.ndarray:
    """The numpy backend of :func:`mxrt.gemm_mx`: float64 partials over ``p.k_ranges``, reduced in split order.

    Each split's partial ``A[:, k0:k1] @ B[:, k0:k1].T`` is a float64 workspace slice; the reduce adds them in
    split order (the deterministic schedule; numpy has no atomics, so ``deterministic=False`` runs the same
    code). Float64 partials hold every MX product exactly and their sums to ~K * 2^-53 relative, far below an
    ulp of float32/float16/bfloat16, so the result equals the ``split_k=1`` one after the single rounding to
    ``out_dtype`` (bitwise, except for a float64 sum within that distance of an ``out_dtype`` rounding tie).
    Empty problems give zeros.
    """
    if p.is_empty:
        return np.zeros((p.m, p.n), p.out_dtype)
    if p.split_k == 1:
        return round_to(gemm_f64(p), p.out_dtype)
    workspace = np.stack([gemm_f64(p, r) for r in p.k_ranges])  # [split_k, m, n] float64
    acc = workspace[0].copy()
    for part in workspace[1:]:
        acc += part
    return round_to(acc, p.out_dtype)
