"""``mxrt.gemm_mx``: dense MX GEMM ``d = a @ b.T`` (numpy backend; the GPU backend plugs in through GEMM_BACKENDS).

Flow (STYLE.md 5): :func:`mxrt.reference.gemm.gemm_problem` validates into a frozen
:class:`~mxrt.reference.GemmProblem` -> empty early return -> :func:`mxrt._backend.resolve_backend` -> the
backend's function, which receives only the validated problem and returns ``d [m, n]`` of ``problem.out_dtype``.
A GPU op registers itself with ``GEMM_BACKENDS["gpu"] = fn`` and ``register_gpu_op("gemm_mx", ...)``
(:mod:`mxrt.ops.gemm`, which runs the GEMM path that :func:`mxrt.ops.gemm_paths.select_gemm_path` picks).
CuPy operands always run there (``"auto"`` resolves to the GPU; ``"numpy"`` is a DtypeError) and give CuPy results.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._backend import resolve_backend
from .errors import DtypeError, UnsupportedArchError
from .formats import MXArray
from .reference.gemm import GEMM_FORMAT_PAIRS, GemmProblem, gemm_f64, gemm_problem, round_to

__all__ = ["GEMM_BACKENDS", "GEMM_FORMAT_PAIRS", "GemmProblem", "gemm_mx"]

OP = "gemm_mx"


def _gemm_numpy(p: GemmProblem) -> np.ndarray:
    """The numpy backend: float64 partial products over ``p.k_ranges``, reduced in split order, rounded once.

    Each split's partial ``A[:, k0:k1] @ B[:, k0:k1].T`` is a float64 workspace slice; the reduce adds them in
    split order (the deterministic schedule; numpy has no atomics, so ``deterministic=False`` runs the same
    code). Float64 partials hold every MX product exactly and their sums to ~K * 2^-53 relative, far below an
    ulp of float32/float16/bfloat16, so the result equals the ``split_k=1`` one after the single rounding to
    ``out_dtype`` (bitwise, except for a float64 sum within that distance of an ``out_dtype`` rounding tie).
    """
    if p.split_k == 1:
        return round_to(gemm_f64(p), p.out_dtype)
    workspace = np.stack([gemm_f64(p, r) for r in p.k_ranges])  # [split_k, m, n] float64
    acc = workspace[0].copy()
    for part in workspace[1:]:
        acc += part
    return round_to(acc, p.out_dtype)


#: Backend name -> function(GemmProblem) -> ndarray [m, n] of problem.out_dtype.
GEMM_BACKENDS: dict[str, Callable[[GemmProblem], np.ndarray]] = {"numpy": _gemm_numpy}


def gemm_mx(
    a: MXArray | tuple,
    b: MXArray | tuple,
    *,
    out_dtype: str = "bfloat16",
    split_k: int = 1,
    deterministic: bool = True,
    out: np.ndarray | None = None,
    backend: str = "auto",
    a_scale_layout: str | None = None,
    b_scale_layout: str | None = None,
) -> np.ndarray:
    """Dense MX GEMM ``d = a @ b.T`` ("NT"): both operands MX-quantized along K, one E8M0 scale per 32.

    Parameters
    ----------
    a : MXArray ``[m, k]`` quantized along axis 1 (K) with ``block_size=32``, or raw pieces
        ``(codes, scales, fmt)`` / ``(codes, scales, fmt, k)``: ``codes`` uint8 ``[m, k]`` (fp8) or packed e2m1
        ``[m, ceil(k/2)]`` (even k in the low nibble; without the 4th item ``k = 2 * codes.shape[1]``), ``scales``
        E8M0 uint8 ``[m, ceil(k/32)]``, or that matrix preshuffled into ``a_scale_layout``.
    b : the same for ``[n, k]``.
    out_dtype : ``"bfloat16"`` (default), ``"float16"`` or ``"float32"``.
    split_k : K is split into ``split_k`` ranges on 32-element scale boundaries
        (``1 <= split_k <= max(1, ceil(k/32))``; ranges in ``GemmProblem.k_ranges``).
    deterministic : GPU split-K reduces partials through a workspace in a fixed order (True) or atomically.
    out : optional ``[m, n]`` array of ``out_dtype`` to write into (returned).
    backend : ``"auto"``, ``"numpy"`` or ``"gpu"``.
    a_scale_layout, b_scale_layout : ``None`` (row-major scales) or one of ``mxrt.SCALE_LAYOUTS``
        (``"aiter32x8"``, ``"turbo16x4"``, ``"cublas128x4"``, ``"deepgemm_ue8m0"``): the raw-piece scales are the
        buffer :func:`mxrt.preshuffle_scales` returned for the logical ``[rows, ceil(k/32)]`` scales.

    Returns
    -------
    ndarray ``[m, n]`` of ``out_dtype``; for CuPy operands a CuPy array (``out`` when given) of float32, float16,
    or uint16 holding the bfloat16 bits (CuPy has no bfloat16 dtype).

    Formats (a.fmt, b.fmt): e4m3/e5m2 in any combination, e2m1 x e2m1, e4m3 x e2m1 and e2m1 x e4m3.

    Raises
    ------
    DtypeError : wrong operand type, codes/scales dtype, unsupported format pair, out_dtype, split_k type,
        deterministic not a bool, ``out`` dtype.
    ShapeError : operand not 2-D, quantized along an axis other than K, block size != 32, codes or scales of the
        wrong shape, mismatched K, ``split_k`` out of range, ``out`` of the wrong shape or read-only.
    LayoutError : an unknown scale layout, or a layout given for an MXArray operand.

    Notes
    -----
    The numpy backend computes each split's partial in float64 from the exactly dequantized operands and rounds
    once to ``out_dtype``; its result does not depend on ``split_k`` (see ``_gemm_numpy``). It equals
    :func:`mxrt.reference.gemm_mx`, the float64 twin every GPU path is tested against. Empty ``m`` or ``n`` give an
    empty result; ``k == 0`` gives zeros.
    """
    p = gemm_problem(
        a,
        b,
        out_dtype=out_dtype,
        split_k=split_k,
        deterministic=deterministic,
        out=out,
        a_scale_layout=a_scale_layout,
        b_scale_layout=b_scale_layout,
        op=OP,
    )
    if p.device:  # CuPy operands run on the GPU (never an implicit host transfer)
        if backend == "numpy":
            raise DtypeError(f"{OP}: a and b are CuPy arrays but backend='numpy'; pass numpy arrays (.get())")
        name = resolve_backend(OP, "gpu" if backend == "auto" else backend)
    else:
        name = resolve_backend(OP, backend)
    if p.is_empty and name == "numpy":
        d = np.zeros((p.m, p.n), p.out_dtype)
    else:
        fn = GEMM_BACKENDS.get(name)
        if fn is None:
            raise UnsupportedArchError(
                f"{OP}: backend {name!r} has no implementation, expected one of {sorted(GEMM_BACKENDS)}"
            )
        d = fn(p)
    if out is None or d is out:
        return d
    out[...] = d
    return out
