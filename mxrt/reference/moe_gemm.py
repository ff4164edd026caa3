"""Float64 twin of the MoE decode GEMM (:mod:`mxrt.problems.moe_gemm`): the numpy backend of
:func:`mxrt.moe_gemm_mx` and the reference its GPU path is tested against.

Every routed slot's row is the float64 product of the exactly dequantized operands (times its routing weight),
rounded once to the output dtype; slots no block reaches are 0.
"""

from __future__ import annotations

import numpy as np

from ..formats import MXArray, dequantize_mx
from ..problems.gemm import _DTYPES, GEMM_BLOCK
from ..problems.moe_gemm import MoeGemmProblem
from .gemm import round_to


def moe_slots(p: MoeGemmProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, experts)``: every slot id the op writes and the expert that computes it, in ``sorted_token_ids``
    order (host problems). A slot is written when its position ``i < cap`` lies in a block ``b = i // block_size``
    with ``b < numel``, ``b * block_size < num_tokens_post_padded[0]`` and ``0 <= expert_ids[b] < E``, and
    ``0 <= id < numel``
    (ids equal to the sentinel ``numel`` are padding). An id listed twice is written by each listing (the last one
    wins here; the GPU order is unspecified)."""
    ids = np.asarray(p.sorted_token_ids, np.int64)
    blocks = np.asarray(p.expert_ids, np.int64)
    ntpp = int(np.asarray(p.num_tokens_post_padded)[0])
    blk = np.arange(ids.size, dtype=np.int64) // p.block_size
    e = blocks[blk] if ids.size else np.zeros(0, np.int64)
    live = (blk < p.numel) & (blk * p.block_size < ntpp)  # at most numel live blocks (mxrt.problems.moe_gemm)
    keep = live & (e >= 0) & (e < p.e) & (ids >= 0) & (ids < p.numel)
    return ids[keep], e[keep]


def _x(p: MoeGemmProblem) -> np.ndarray:
    shape = (p.m_act, p.k)
    return dequantize_mx(MXArray(p.x_codes, p.x_scales, p.x_fmt, GEMM_BLOCK, 1, shape, "given"), np.float64)


def _w(p: MoeGemmProblem, e: int) -> np.ndarray:
    """Expert ``e``'s weight ``[n, k]`` in float64 (only the experts a slot reaches are dequantized)."""
    q = MXArray(p.w_codes[e], p.w_scales[e], p.w_fmt, GEMM_BLOCK, 1, (p.n, p.k), "given")
    return dequantize_mx(q, np.float64)


def moe_gemm_f64(p: MoeGemmProblem) -> np.ndarray:
    """The float64 result ``[numel, n]`` of a host problem (module docstring of :mod:`mxrt.problems.moe_gemm`).

    One matmul per expert that owns a written slot: ``out[ids_e] = X[ids_e // a_div] @ W[e].T``, then the rows
    are multiplied by ``topk_weights[id]`` when given.
    """
    d = np.zeros((p.numel, p.n), np.float64)
    if p.is_empty:
        return d
    ids, experts = moe_slots(p)
    if ids.size == 0:
        return d
    x = _x(p)
    with np.errstate(over="ignore", invalid="ignore"):
        for e in np.unique(experts):
            rows = ids[experts == e]
            d[rows] = x[rows // p.a_div] @ _w(p, int(e)).T
        if p.topk_weights is not None:
            w = np.asarray(p.topk_weights, np.float64)[ids]
            d[ids] *= w[:, None]
    return d


def moe_gemm_numpy(p: MoeGemmProblem) -> np.ndarray:
    """The numpy backend of :func:`mxrt.moe_gemm_mx`: :func:`moe_gemm_f64` rounded once to ``p.out_dtype``, written
    into ``p.out`` (every row: unreached slots become 0) when given, else a fresh array."""
    d = round_to(moe_gemm_f64(p), _DTYPES[p.out_dtype])
    if p.out is None:
        return d
    p.out[...] = d
    return p.out
