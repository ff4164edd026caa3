"""MoE routing layouts: vLLM ``moe_align_block_size`` and aiter ``moe_sorting`` (MX_REFERENCE.md 4c).

Both sort the ``numel = T * topk`` (token, slot) pairs of ``topk_ids [T, topk]`` by expert, in ascending flat
index ``i = t*topk + j`` inside each expert (the Triton / reference order; vLLM's CUDA paths order a segment
differently or nondeterministically, so compare segments as sets against those), and pad each expert's segment
to a multiple of ``block_size``. Expert ids ``>= num_experts`` are **skipped** (they get no slot, as in vLLM's
CUDA kernel and aiter's reference); negative ids are a :class:`ShapeError`.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import DtypeError, ShapeError
from ..formats.codecs import to_float32_checked
from ._check import INT64_MAX, align, as_array, cdiv, check_int, check_int32_limit, check_int_array


def _check_ids(topk_ids: object, op: str, *, ndim: int | None = None) -> np.ndarray:
    ids = check_int_array(topk_ids, op, "topk_ids", ndim=ndim)
    if ids.ndim == 0:
        raise ShapeError(f"{op}: argument 'topk_ids' has shape (), expected [num_tokens, topk]")
    if ids.size and ids.dtype.kind == "i" and ids.min() < 0:
        raise ShapeError(
            f"{op}: argument 'topk_ids' holds {ids.min()}, expected expert ids >= 0 (ids >= num_experts are skipped)"
        )
    check_int32_limit(ids.size, op, "topk_ids.size")
    return ids


def _flat_ids(ids: np.ndarray) -> np.ndarray:
    """``ids.ravel()`` as int64; uint64 ids past 2^63-1 (skipped anyway: they are >= num_experts) saturate
    instead of wrapping negative."""
    flat = ids.ravel()
    if flat.dtype == np.uint64:
        flat = np.minimum(flat, np.uint64(INT64_MAX))
    return flat.astype(np.int64)


def _sort_by_expert(flat: np.ndarray, num_experts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat indices of valid entries ordered by (expert, index), their experts, and the count per expert."""
    valid = flat < num_experts
    idx = np.flatnonzero(valid)
    experts = flat[valid].astype(np.int64)
    order = np.argsort(experts, kind="stable")
    return idx[order], experts[order], np.bincount(experts, minlength=num_experts).astype(np.int64)


def _ranks(cnt: np.ndarray) -> np.ndarray:
    """0, 1, ..., cnt[e]-1 for every expert in turn."""
    starts = np.zeros(cnt.size, dtype=np.int64)
    np.cumsum(cnt[:-1], out=starts[1:])
    return np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(starts, cnt)


def moe_align_capacity(
    numel: int, block_size: object, num_experts: object, pad_sorted_ids: object, op: str
) -> tuple[int, int, int]:
    """Validated ``(block_size, num_experts, cap)`` of :func:`moe_align_block_size` for ``numel`` ids (shared with
    its GPU twin): ``cap = numel + num_experts*(block_size-1)``, rounded up to ``block_size`` with
    ``pad_sorted_ids``, at most 2^31-1."""
    bs = check_int(block_size, op, "block_size", minimum=1)
    e_num = check_int(num_experts, op, "num_experts", minimum=1)
    if not isinstance(pad_sorted_ids, (bool, np.bool_)):
        raise DtypeError(f"{op}: argument 'pad_sorted_ids' is {pad_sorted_ids!r}, expected a bool")
    cap = numel + e_num * (bs - 1)
    if pad_sorted_ids:
        cap = align(cap, bs)
    check_int32_limit(cap, op, "the capacity numel + num_experts*(block_size-1)")
    return bs, e_num, cap


def check_expert_map(expert_map: object, num_experts: int, op: str) -> np.ndarray:
    """A host ``expert_map``: integer ``[num_experts]`` with values in ``[-1, 2^31-1]``."""
    emap = check_int_array(expert_map, op, "expert_map", ndim=1)
    if emap.shape != (num_experts,):
        raise ShapeError(
            f"{op}: argument 'expert_map' has shape {emap.shape}, expected ({num_experts},) = [num_experts]"
        )
    if emap.size and (emap.min() < -1 or emap.max() > 2**31 - 1):
        raise ShapeError(f"{op}: argument 'expert_map' holds {emap.min()}..{emap.max()}, expected int32 ids >= -1")
    return emap


def moe_align_block_size(
    topk_ids: np.ndarray,
    block_size: int,
    num_experts: int,
    expert_map: np.ndarray | None = None,
    *,
    pad_sorted_ids: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """vLLM ``moe_align_block_size``: sort flat (token, slot) indices by expert, padded to ``block_size`` blocks.

    With ``flat = topk_ids.ravel()``, ``numel = flat.size``, ``cnt[e] = #{i: flat[i] == e}``,
    ``padded[e] = ceil(cnt[e]/block_size)*block_size`` (0 for an expert without tokens) and
    ``cumsum[e] = sum(padded[:e])``:

    - ``sorted_token_ids: int32 [cap]``, ``cap = numel + num_experts*(block_size-1)`` (rounded up to
      ``block_size`` with ``pad_sorted_ids``), filled with ``numel`` (the padding value) and
      ``sorted_token_ids[cumsum[e] + r] = i`` for the r-th (ascending) ``i`` with ``flat[i] == e``;
    - ``expert_ids: int32 [ceil(cap/block_size)]``, ``expert_ids[b] = e`` for blocks
      ``b in [cumsum[e], cumsum[e+1]) / block_size``, unused entries 0; with ``expert_map`` (int [num_experts],
      global -> local id, -1 if not local) the whole array becomes ``expert_map[expert_ids]``, as vLLM does;
    - ``num_tokens_post_padded: int32 [1] = cumsum[num_experts]``.

    Ids ``>= num_experts`` are skipped (vLLM's CUDA kernel); negative ids, ``block_size < 1``,
    ``num_experts < 1``, non-integer dtypes, and ``cap > 2^31-1`` raise typed errors.

    This is the numpy twin; ``mxrt.moe_align_block_size`` also runs it on the GPU (sync-free, graph-capturable).
    """
    op = "moe_align_block_size"
    ids = _check_ids(topk_ids, op)
    numel = ids.size
    bs, e_num, cap = moe_align_capacity(numel, block_size, num_experts, pad_sorted_ids, op)
    emap = None if expert_map is None else check_expert_map(expert_map, e_num, op)
    idx, experts, cnt = _sort_by_expert(_flat_ids(ids), e_num)
    padded = (cnt + (bs - 1)) // bs * bs
    cumsum = np.zeros(e_num + 1, dtype=np.int64)
    np.cumsum(padded, out=cumsum[1:])
    sorted_token_ids = np.full(cap, numel, dtype=np.int32)
    sorted_token_ids[cumsum[experts] + _ranks(cnt)] = idx
    expert_ids = np.zeros(cdiv(cap, bs), dtype=np.int32)
    blocks = np.repeat(np.arange(e_num, dtype=np.int32), padded // bs)
    expert_ids[: blocks.size] = blocks
    if emap is not None:
        expert_ids = emap[expert_ids].astype(np.int32)
    return sorted_token_ids, expert_ids, np.array([cumsum[-1]], dtype=np.int32)


def moe_sorting(
    topk_ids: np.ndarray,
    topk_weights: np.ndarray,
    num_experts: int,
    block_size: int = 32,
    expert_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """aiter ``moe_sorting`` (reference ``run_torch_moe_sorting``): token ids packed with their top-k slot.

    For ``topk_ids [M, topk]``, ``cap = M*topk + num_experts*block_size - topk``:

    - ``sorted_ids: int32 [cap]``: expert by expert (skipping experts with ``expert_mask[e] == 0``), the entries
      ``(j << 24) | t`` of every ``(t, j)`` with ``topk_ids[t, j] == e`` in ascending ``(t, j)``, each expert's
      segment padded to a multiple of ``block_size`` with ``(topk << 24) | M``;
    - ``sorted_weights: float32 [cap]``: ``topk_weights[t, j]`` beside each entry, 0.0 at padding (aiter leaves
      it uninitialised);
    - ``sorted_expert_ids: int32 [ceil(cap/block_size)]``: the *local* expert id of each block,
      ``e - #{masked experts < e}``, unused blocks -1;
    - ``num_valid_ids: int32 [2] = [padded total, M]``.

    Ids ``>= num_experts`` are skipped; negative ids are an error. ``topk <= num_experts`` is required (the
    capacity formula relies on it: ``padded total <= numel + num_experts*(block_size-1)``). ``M < 2^24`` and
    ``topk <= 127`` keep the packed ids in int32. aiter's ``moe_buf`` output (a zeroed ``[M, model_dim]``
    accumulator) is not a layout and is not produced here.
    """
    op = "moe_sorting"
    ids = _check_ids(topk_ids, op, ndim=2)
    m, topk = ids.shape
    w = as_array(topk_weights, op, "topk_weights")
    if w.dtype.kind != "f" and w.dtype != np.dtype(ml_dtypes.bfloat16):
        raise DtypeError(f"{op}: argument 'topk_weights' has dtype {w.dtype}, expected a float dtype")
    if w.shape != ids.shape:
        raise ShapeError(f"{op}: argument 'topk_weights' has shape {w.shape}, expected {ids.shape} = topk_ids.shape")
    e_num = check_int(num_experts, op, "num_experts", minimum=1)
    bs = check_int(block_size, op, "block_size", minimum=1)
    if m >= 2**24:
        raise ShapeError(f"{op}: topk_ids has {m} tokens, expected < 2^24 (token ids use bits 0..23)")
    if topk > 127:
        raise ShapeError(f"{op}: topk_ids has topk = {topk}, expected <= 127 (slot << 24 must fit int32)")
    if topk > e_num:
        raise ShapeError(
            f"{op}: topk_ids has topk = {topk} > num_experts = {e_num}, expected topk <= num_experts (aiter's "
            "capacity numel + num_experts*block_size - topk is only large enough then)"
        )
    cap = max(ids.size + e_num * bs - topk, 0)
    check_int32_limit(cap, op, "the capacity numel + num_experts*block_size - topk")  # before any allocation
    keep = np.ones(e_num, dtype=bool)
    if expert_mask is not None:
        mask = as_array(expert_mask, op, "expert_mask")
        if mask.dtype.kind not in "iub":
            raise DtypeError(f"{op}: argument 'expert_mask' has dtype {mask.dtype}, expected an integer or bool dtype")
        if mask.shape != (e_num,):
            raise ShapeError(f"{op}: argument 'expert_mask' has shape {mask.shape}, expected ({e_num},)")
        keep = mask != 0

    flat = _flat_ids(ids)
    in_range = flat < e_num
    skip = ~in_range | ~keep[np.where(in_range, flat, 0)]  # out-of-range ids and masked experts get no slot
    flat = np.where(skip, e_num, flat)
    idx, experts, cnt = _sort_by_expert(flat, e_num)
    padded = (cnt + (bs - 1)) // bs * bs
    cumsum = np.zeros(e_num + 1, dtype=np.int64)
    np.cumsum(padded, out=cumsum[1:])
    sorted_ids = np.full(cap, (topk << 24) | m, dtype=np.int32)
    sorted_weights = np.zeros(cap, dtype=np.float32)
    dest = cumsum[experts] + _ranks(cnt)
    t, j = np.divmod(idx, max(topk, 1))
    sorted_ids[dest] = (j << 24) | t
    sorted_weights[dest] = to_float32_checked(w, op, "topk_weights")[t, j]
    local = np.cumsum(keep) - 1  # local id of every kept expert
    sorted_expert_ids = np.full(cdiv(cap, bs), -1, dtype=np.int32)
    blocks = np.repeat(local.astype(np.int32), padded // bs)
    sorted_expert_ids[: blocks.size] = blocks
    return sorted_ids, sorted_weights, sorted_expert_ids, np.array([cumsum[-1], m], dtype=np.int32)
