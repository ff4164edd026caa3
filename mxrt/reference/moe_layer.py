"""Single-process float64 reference of the MX MoE layer forward that :mod:`mxrt.ep` runs over ``W`` ranks.

The same quantized math, with the rounding points of the GPU path and nothing distributed::

    xq  = quantize_mx(x, fmt)                             per token, blocks of 32 along hidden
    h   = bf16(xq[t] @ w_gate_up[e].T)                    float64 product, rounded once (grouped_gemm_mx's twin)
    a   = silu(h[:, :I]) * h[:, I:]                       float32
    aq  = quantize_mx(a, fmt)
    y   = bf16(aq @ w_down[e].T)
    out = bf16(sum_j topk_weights[t, j] * y(t, j))        summed in float64 here (float32 on the GPU)

``w_gate_up`` is an MXArray ``[E, 2I, H]`` and ``w_down`` ``[E, H, I]``, both quantized along their last axis;
expert ``e`` of pair ``(t, j)`` is ``topk_ids[t, j]``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..formats import dequantize_mx
from ..formats.mx import MXArray, quantize_mx
from .gemm import round_to

BF16 = np.dtype(ml_dtypes.bfloat16)


def silu_mul(h: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` in float32 of ``h [R, 2I]`` (gate the first half, up the second)."""
    h = np.asarray(h, np.float32)
    i = h.shape[1] // 2
    g, u = h[:, :i], h[:, i:]
    with np.errstate(over="ignore"):
        return (g / (np.float32(1) + np.exp(-g)) * u).astype(np.float32)


def _expert_gemm(a: np.ndarray, w: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``bf16(a[p] @ w[ids[p]].T)`` per row ``p``, float64 products rounded once."""
    out = np.zeros((a.shape[0], w.shape[1]), BF16)
    for e in np.unique(ids):
        rows = np.nonzero(ids == e)[0]
        out[rows] = round_to(a[rows] @ w[e].T, BF16)
    return out


def moe_layer_f64(
    x: np.ndarray,
    topk_ids: np.ndarray,
    topk_weights: np.ndarray,
    w_gate_up: MXArray,
    w_down: MXArray,
    fmt: str = "e4m3",
) -> np.ndarray:
    """The MoE layer forward of ``x [T, H]`` (float32 / bfloat16) on one process; returns bfloat16 ``[T, H]``.

    Notes
    -----
    Pairs are computed in flat order ``t * topk + j``; per-row quantization makes the result independent of how
    the rows are grouped, so this is what every rank of :func:`mxrt.ep.moe_forward` must produce for its tokens.
    """
    ids = np.asarray(topk_ids, np.int64)
    t, k = ids.shape
    xq = dequantize_mx(quantize_mx(np.asarray(x), fmt), np.float64)
    wgu = dequantize_mx(w_gate_up, np.float64)[:, :, : x.shape[1]]
    wd = dequantize_mx(w_down, np.float64)
    flat = ids.ravel()
    pair_x = xq[np.arange(t * k) // k]
    h = _expert_gemm(pair_x, wgu, flat)
    a = silu_mul(h.astype(np.float32))
    aq = dequantize_mx(quantize_mx(a, fmt), np.float64)
    y = _expert_gemm(aq, wd[:, :, : a.shape[1]], flat).astype(np.float64)
    w64 = np.asarray(topk_weights, np.float32).astype(np.float64)
    return round_to((y.reshape(t, k, y.shape[1]) * w64[:, :, None]).sum(1), BF16)


__all__ = ["moe_layer_f64", "silu_mul"]
