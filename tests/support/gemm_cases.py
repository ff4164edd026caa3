"""Shared pieces of the GPU GEMM tests and the sanitizer smoke script: operands, device copies, tolerances."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import mxrt
from mxrt.checks.gemm import calc_diff_limit
from mxrt.reference import calc_diff, relative_error

#: fp32 out: relative Frobenius error vs the float64 reference of the dequantized inputs
FP32_REL_LIMIT = 1e-5
#: bf16 / fp16 out: calc_diff vs that reference (one rounding); atomic 16-bit split-K rounds once per split
HALF_CALC_DIFF_LIMIT = 1e-5


def operands(m: int, n: int, k: int, fa: str, fb: str, seed: int):
    """Unquantized ``x [m, k]``, ``w [n, k]`` and their numpy MXArrays (RCEIL scales along K)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    return x, w, mxrt.quantize_mx(x, fa, backend="numpy"), mxrt.quantize_mx(w, fb, backend="numpy")


def to_device(q: mxrt.MXArray) -> mxrt.MXArray:
    import cupy

    return mxrt.MXArray(cupy.asarray(q.data), cupy.asarray(q.scales), q.fmt, 32, 1, q.shape, q.scale_mode)


def host_result(d: Any, out_dtype: str) -> np.ndarray:
    """A GEMM result as float64 numpy (CuPy bf16 results are uint16 bits)."""
    h = d.get() if type(d).__module__.split(".", 1)[0] == "cupy" else np.asarray(d)
    if out_dtype == "bfloat16" and h.dtype == np.uint16:
        h = h.view(ml_dtypes.bfloat16)
    return h.astype(np.float64)


def check_result(got: Any, qa, qb, out_dtype: str, *, x=None, w=None, splits_rounded: int = 1) -> list[str]:
    """Problems of ``got`` against the float64 reference (and the unquantized product when x, w are given)."""
    ref = mxrt.reference.gemm_mx(qa, qb, out_dtype="float64")
    g = host_result(got, out_dtype)
    errs = []
    if g.shape != ref.shape:
        return [f"shape {g.shape} != {ref.shape}"]
    if not np.isfinite(g).all():
        errs.append(f"{int((~np.isfinite(g)).sum())} non-finite outputs")
    if out_dtype == "float32":
        e = relative_error(ref, g)
        if not e <= FP32_REL_LIMIT:
            errs.append(f"rel Frobenius {e:.3g} > {FP32_REL_LIMIT}")
    else:
        e, lim = calc_diff(g, ref), HALF_CALC_DIFF_LIMIT * splits_rounded
        if not e <= lim:
            errs.append(f"calc_diff {e:.3g} > {lim:.3g} vs dequantized")
    if x is not None and ref.size and np.abs(ref).sum() > 0:
        e, lim = calc_diff(g, x.astype(np.float64) @ w.astype(np.float64).T), calc_diff_limit(qa.fmt, qb.fmt)
        if not e <= lim:
            errs.append(f"calc_diff {e:.3g} > {lim:g} vs unquantized")
    return errs
