"""``mxrt.ep``: expert parallelism over ``torch.distributed`` (NCCL): MX dispatch / combine around the grouped GEMMs.

Imported on request only (``import mxrt`` never imports it; it needs torch with ``torch.distributed``). ``W`` ranks
of ``group`` each hold their own tokens and ``E / W`` contiguous experts (rank ``r``: ``[r * E_l, (r + 1) * E_l)``).

- :func:`dispatch` sends each (token, slot) pair's MX row, element codes and E8M0 scales packed in one row of
  integer words (two buffers when the hidden size is not a multiple of 128; no dequantisation), to the owner of
  its expert and lays the received rows out per local expert, the tight grouped layout
  :func:`mxrt.grouped_gemm_mx` consumes, with ``group_lens`` on the device.
- :func:`combine` sends the expert outputs back in bfloat16 and sums them with the routing weights in token order:
  on CUDA one fused kernel (:func:`mxrt.moe_combine`) reads each returned row once through ``src = pair_rows(order)``
  and writes ``[T, n]`` bf16; the torch expression (a pair-order copy and an fp32 ``[T, k, n]`` product) stays
  for CPU tensors (gloo worlds). Both sum in float32 in slot order and round once (the same arithmetic).
- :func:`moe_forward`: quantize -> dispatch -> grouped GEMM gate_up -> silu * up -> quantize -> grouped GEMM down
  -> combine; :func:`mxrt.reference.moe_layer.moe_layer_f64` is its single-process float64 reference.
- ``python -m mxrt.ep.launch`` (under ``torchrun --nproc-per-node W``) checks and times it.

The index maps are :mod:`mxrt.layouts.ep`'s (numpy, the reference); this module computes the same maps with torch
on the device. Host syncs: one per dispatch (the all-to-all-v split sizes, :mod:`mxrt.ep._transport`), none in
the combine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import config
from ..api.grouped_gemm import grouped_gemm_mx
from ..api.layouts import moe_combine
from ..api.quant import quantize_mx
from ..errors import DtypeError, ShapeError, UnsupportedArchError
from ..formats.mx import MXArray
from ..layouts.ep import experts_per_rank
from . import _fused
from . import _transport as tp
from ._transport import NVLS_OFF, multicast_off


@dataclass(frozen=True, eq=False)
class DispatchHandle:
    """What :func:`combine` needs from a :func:`dispatch` (all tensors on the tokens' device).

    Attributes
    ----------
    order : int64 ``[T * topk]``, send row -> flat pair index ``t * topk + j``.
    recv_to_grouped : int64 ``[R]``, grouped row of each received row.
    group_lens : int64 ``[E_l]``, rows per local expert (device; what the grouped GEMMs read).
    recv_counts : int64 ``[W, E_l]``, rows received from each source rank per local expert.
    send_splits, recv_splits : host tuples of ``W`` row counts (the all-to-all-v sizes).
    num_tokens, topk : this rank's ``topk_ids`` shape.
    topk_weights : ``[T, topk]`` routing weights (float32 for the combine).
    world_size, rank : of the group the dispatch ran on.
    pair_rows : int64 ``[T * topk]``, the send row of each flat pair (the inverse of ``order``, what the fused
        combine reads through), or None where the dispatch did not compute it (the torch layout).
    """

    order: torch.Tensor
    recv_to_grouped: torch.Tensor
    group_lens: torch.Tensor
    recv_counts: torch.Tensor
    send_splits: tuple[int, ...]
    recv_splits: tuple[int, ...]
    num_tokens: int
    topk: int
    topk_weights: torch.Tensor
    world_size: int
    rank: int
    pair_rows: torch.Tensor | None = None

    @property
    def num_recv(self) -> int:
        """``R``: rows this rank's experts compute."""
        return sum(self.recv_splits)


def _check_routing(x: torch.Tensor, topk_ids: Any, topk_weights: Any, op: str) -> None:
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dtype not in (torch.int32, torch.int64):
        raise DtypeError(f"{op}: argument 'topk_ids' is {_what(topk_ids)}, expected an int32/int64 torch tensor")
    if not isinstance(topk_weights, torch.Tensor) or not topk_weights.is_floating_point():
        raise DtypeError(f"{op}: argument 'topk_weights' is {_what(topk_weights)}, expected a float torch tensor")
    if topk_ids.ndim != 2 or topk_ids.shape[0] != x.shape[0]:
        raise ShapeError(
            f"{op}: argument 'topk_ids' has shape {tuple(topk_ids.shape)}, expected [num_tokens, topk] with "
            f"num_tokens = {x.shape[0]} (the tokens' rows)"
        )
    if topk_weights.shape != topk_ids.shape:
        raise ShapeError(
            f"{op}: argument 'topk_weights' has shape {tuple(topk_weights.shape)}, expected "
            f"{tuple(topk_ids.shape)} (topk_ids' shape)"
        )
    for name, t in (("topk_ids", topk_ids), ("topk_weights", topk_weights)):
        if t.device != x.device:
            raise ShapeError(f"{op}: argument '{name}' is on {t.device}, expected the tokens' device {x.device}")


def _what(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor"
    return f"a {type(x).__name__}"


def _words(t: torch.Tensor) -> torch.Tensor:
    """Rows of ``t`` as the widest integer words that tile them (8, 4 or 1 bytes; NCCL has no 2-byte integer): the
    gathers, scatters and NCCL copies then move 8-byte elements instead of single code bytes."""
    b = t.contiguous().view(torch.uint8)
    if b.numel() == 0:
        b = torch.empty(b.shape, dtype=torch.uint8, device=b.device)  # empty views may carry stride 0
    for size, dt in ((8, torch.int64), (4, torch.int32)):
        if b.shape[1] % size == 0:  # the word follows from the row width alone (both layouts: one wire format)
            return (b if b.storage_offset() % size == 0 else b.clone()).view(dt)
    return b


def _payload_bytes(x: Any, op: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The rows to send as uint8 ``[T, width]`` tensors (an MXArray: its codes and its E8M0 scales; a tensor: its
    rows) and a tensor that stands for the tokens (shape, device).

    Both layouts send them packed side by side in one row (``codes | scales``: one gather, one all-to-all-v) of
    NCCL words of 8, 4 or 1 bytes, decided from the row's byte width alone: every rank of a group sends the same
    format whichever layout it runs."""
    if isinstance(x, MXArray):
        if not isinstance(x.data, torch.Tensor):
            raise DtypeError(f"{op}: argument 'x_mx' holds {_what(x.data)} codes, expected torch tensors")
        if len(x.shape) != 2 or x.axis != 1 or x.scale_layout is not None:
            raise ShapeError(
                f"{op}: argument 'x_mx' is an MXArray of shape {x.shape} blocked along axis {x.axis} with scale "
                f"layout {x.scale_layout}, expected [num_tokens, hidden] blocked along axis 1, plain scales"
            )
        return [x.data.contiguous().view(torch.uint8), x.scales.contiguous().view(torch.uint8)], x.data
    if isinstance(x, torch.Tensor) and x.ndim == 2:
        return [x.contiguous().view(torch.uint8)], x
    raise DtypeError(f"{op}: argument 'x_mx' is {_what(x)}, expected an MXArray of torch tensors or a 2-D tensor")


def _counts(key: torch.Tensor, num_experts: int, w: int, el: int) -> torch.Tensor:
    """``[W, E_l + 1]``: pairs per (destination rank, local expert) and, in the last column, this rank's number of
    ids outside ``[0, E)``. ``key``: the ids clamped to ``[-1, E]`` (both ends count as bad; never indexed out of
    range; no bincount: it syncs on CUDA)."""
    cnt = torch.zeros(num_experts + 2, dtype=torch.int64, device=key.device)
    cnt.index_add_(0, key + 1, torch.ones(1, dtype=torch.int64, device=key.device).expand(key.numel()))
    bad = cnt[:1] + cnt[num_experts + 1 :]
    return torch.cat([cnt[1 : num_experts + 1].view(w, el), bad.expand(w, 1)], 1)


def grouped_to_recv(recv_counts: torch.Tensor, num_recv: int) -> torch.Tensor:
    """:func:`mxrt.layouts.ep.grouped_to_recv` on the device: the received row of each grouped row (``num_recv``
    from the host splits: no sync). The dispatch gathers with it (a gather streams ~2x faster than the scatter by
    the forward map)."""
    w, el = recv_counts.shape
    c = recv_counts.reshape(-1)
    recv_start = (torch.cumsum(c, 0) - c).view(w, el).t().reshape(-1)  # per (expert, source) segment
    ct = recv_counts.t().reshape(-1)
    grouped_start = torch.cumsum(ct, 0) - ct
    seg = torch.repeat_interleave(torch.arange(w * el, device=c.device), ct, output_size=num_recv)
    return torch.arange(num_recv, device=c.device) - grouped_start[seg] + recv_start[seg]


def _inverse(perm: torch.Tensor) -> torch.Tensor:
    """The inverse of a permutation of ``[0, len)``: ``inv[perm[i]] = i`` (one int64 scatter on the device)."""
    return torch.empty_like(perm).index_copy_(0, perm, torch.arange(perm.numel(), device=perm.device))


def recv_to_grouped(recv_counts: torch.Tensor, num_recv: int) -> torch.Tensor:
    """:func:`mxrt.layouts.ep.recv_to_grouped` on the device (``num_recv`` from the host splits: no sync)."""
    return _inverse(grouped_to_recv(recv_counts, num_recv))


def dispatch(
    x_mx: Any, topk_ids: torch.Tensor, topk_weights: torch.Tensor, group: Any = None, *, num_experts: int
) -> tuple[Any, DispatchHandle]:
    """Send every (token, slot) row to the rank owning its expert; lay the received rows out per local expert.

    Parameters
    ----------
    x_mx : MXArray ``[T, H]`` of torch tensors, quantized along axis 1 (``mxrt.quantize_mx(x)``): codes and E8M0
        scales travel as two uint8 buffers. A plain 2-D torch tensor (e.g. bfloat16 tokens) is sent as it is (the
        bf16 baseline).
    topk_ids : int32/int64 ``[T, topk]`` global expert ids in ``[0, num_experts)``, on the tokens' device.
    topk_weights : float ``[T, topk]`` routing weights (kept for :func:`combine`).
    group : a ``torch.distributed`` process group (None: the default group), NCCL for CUDA tensors.
    num_experts : ``E``, a multiple of the group's size ``W``; this rank owns ``E / W`` of them.

    Returns
    -------
    ``(x_grouped, handle)``: ``x_grouped`` an MXArray ``[R, H]`` (or a tensor like ``x_mx``) whose rows are grouped
    by local expert (expert, source rank, flat pair index), ready for ``mxrt.grouped_gemm_mx(x_grouped, w_local,
    handle.group_lens)``; ``handle`` (:class:`DispatchHandle`) for :func:`combine`.

    Notes
    -----
    Collectives, in order: an all-to-all of the ``[W, E_l + 1]`` counts (equal splits, device), **one host sync**
    (the split sizes NCCL's all-to-all-v needs on the host and the bad-id count; the rows to send are gathered on
    the device while the host waits), then one all-to-all-v (codes and scales packed in one row) and a gather into
    the grouped order. Ids outside ``[0, E)`` raise :class:`ShapeError` on every rank after the sync (the count
    travels with the counts, so no rank is left waiting in a collective).

    Two layouts compute the same maps and rows bit for bit (``MXRT_EP_DISPATCH``): ``fused`` (default for CUDA
    tensors: mxrt's layout kernels, the counts' exchange on a side stream, :mod:`mxrt.ep._fused`) and ``torch``
    (torch ops only). Both send the same wire format, so the ranks of a group may run different ones.
    """
    op = "ep.dispatch"
    srcs, tokens = _payload_bytes(x_mx, op)
    _check_routing(tokens, topk_ids, topk_weights, op)
    rank, w = tp.world(group)
    experts_per_rank(num_experts, w, op)
    t, k = topk_ids.shape
    layout = _fused.dispatch_rows if _use_fused(tokens.device, t * k, num_experts, op) else _dispatch_torch
    outs, fields = layout(srcs, topk_ids, num_experts, group, rank, w, op)
    handle = DispatchHandle(num_tokens=t, topk=k, topk_weights=topk_weights, world_size=w, rank=rank, **fields)
    if isinstance(x_mx, MXArray):
        g = MXArray(
            data=outs[0].view(x_mx.data.dtype),
            scales=outs[1].view(x_mx.scales.dtype),
            fmt=x_mx.fmt,
            block_size=x_mx.block_size,
            axis=1,
            shape=(handle.num_recv, x_mx.shape[1]),
            scale_mode=x_mx.scale_mode,
        )
        return g, handle
    return outs[0].view(x_mx.dtype), handle


def _use_fused(device: torch.device, numel: int, num_experts: int, op: str) -> bool:
    """``MXRT_EP_DISPATCH``: ``torch`` / ``fused`` force a layout (``fused`` raises where it cannot run); ``auto``
    (default) takes the fused one for CUDA tensors wherever it can run."""
    mode = config.ep_dispatch_mode()
    if mode == "torch":
        return False
    if mode not in ("auto", "fused"):
        raise UnsupportedArchError(f"{op}: MXRT_EP_DISPATCH is {mode!r}, expected 'auto', 'fused' or 'torch'")
    why = _fused.unsupported(device, numel, num_experts)
    if mode == "fused" and why is not None:
        raise UnsupportedArchError(f"{op}: MXRT_EP_DISPATCH=fused cannot run here: {why}")
    return why is None and (mode == "fused" or device.type == "cuda")


def _dispatch_torch(
    srcs: list[torch.Tensor], topk_ids: torch.Tensor, num_experts: int, group: Any, rank: int, w: int, op: str
) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """The torch layout (``MXRT_EP_DISPATCH=torch``): :func:`mxrt.ep._fused.dispatch_rows`'s contract with torch ops
    (counts by ``index_add_``, the send order by a stable radix argsort, gathers by ``index_select``)."""
    el = num_experts // w
    k = topk_ids.shape[1]
    widths = [s.shape[1] for s in srcs]
    rows = _words(srcs[0] if len(srcs) == 1 else torch.cat(srcs, 1))  # a fresh buffer: offset 0
    ws = rows.element_size()
    # ids clamped to [-1, E] (the two ends are the bad ids) as int32: the counts' bins and a 4-pass sort key
    key = topk_ids.reshape(-1).clamp(-1, num_experts).to(torch.int32)
    send = _counts(key, num_experts, w, el)
    recv = tp.all_to_all_equal(send, group)
    recv_counts = recv[:, :el]
    sizes = torch.cat([send[:, :el].sum(1), recv_counts.sum(1), recv[:, el].sum().view(1)])
    pending = tp.host_ints(sizes)  # the copy starts; the device goes on with the gathers below
    order = torch.argsort(key, stable=True)  # ids are (rank, local expert)-major: rows leave grouped by both
    sendbuf = rows.index_select(0, order // k)
    host = pending.wait()  # the one host sync
    send_splits, recv_splits, nbad = host[:w], host[w : 2 * w], host[2 * w]
    if nbad:
        raise ShapeError(
            f"{op}: argument 'topk_ids' holds {nbad} id(s) outside [0, {num_experts}) on the group's ranks, "
            f"expected every id in [0, {num_experts})"
        )
    num_recv = sum(recv_splits)
    got = tp.all_to_all_v(sendbuf, send_splits, recv_splits, group)
    g2r = grouped_to_recv(recv_counts, num_recv)
    outs, lo = [], 0
    for wd in widths:  # column slices gather contiguous rows; in words where the slice is whole words
        if lo % ws == 0 and wd % ws == 0:
            outs.append(got[:, lo // ws : (lo + wd) // ws].index_select(0, g2r).view(torch.uint8))
        else:
            outs.append(got.view(torch.uint8)[:, lo : lo + wd].index_select(0, g2r))
        lo += wd
    fields = dict(
        order=order,
        recv_to_grouped=_inverse(g2r),
        group_lens=recv_counts.sum(0),
        recv_counts=recv_counts,
        send_splits=tuple(send_splits),
        recv_splits=tuple(recv_splits),
    )
    return outs, fields


def combine(y: torch.Tensor, handle: DispatchHandle, group: Any = None) -> torch.Tensor:
    """Send expert outputs back and sum them per token: ``out[t] = sum_j topk_weights[t, j] * y(t, j)``.

    Parameters
    ----------
    y : bfloat16 ``[R, n]`` in the grouped order of ``handle``'s dispatch (the grouped GEMM's output).
    handle : the :class:`DispatchHandle` of that dispatch.
    group : the same process group as the dispatch.

    Returns
    -------
    bfloat16 ``[T, n]`` in this rank's token order; the weighted sum runs in float32 (slot order: each product
    rounded to fp32, then added; never an fma) and is rounded once. No host sync (the dispatch's split sizes are
    reused, reversed).

    Notes
    -----
    CUDA tensors: the returned rows ``back [T * topk, n]`` (send order) are summed by :func:`mxrt.moe_combine`
    through ``src[order] = arange`` (one int64 scatter), reading each row once: ``2n (T * topk + T)`` bytes.
    CPU tensors: ``back`` is copied to pair order and summed by torch in float32 (the same arithmetic; fp32
    subnormals flush on CUDA only).
    """
    op = "ep.combine"
    if not isinstance(y, torch.Tensor) or y.dtype != torch.bfloat16 or y.ndim != 2:
        raise DtypeError(f"{op}: argument 'y' is {_what(y)}, expected a 2-D bfloat16 torch tensor [R, n]")
    if y.shape[0] != handle.num_recv:
        raise ShapeError(
            f"{op}: argument 'y' has shape {tuple(y.shape)}, expected [{handle.num_recv}, n] (the rows the "
            "dispatch delivered to this rank)"
        )
    rank, w = tp.world(group)
    if (rank, w) != (handle.rank, handle.world_size):
        raise ShapeError(
            f"{op}: argument 'group' is rank {rank} of {w}, expected rank {handle.rank} of {handle.world_size} "
            "(the dispatch's group)"
        )
    y_recv = y.index_select(0, handle.recv_to_grouped)
    back = tp.all_to_all_v(y_recv, list(handle.recv_splits), list(handle.send_splits), group)
    t, k = handle.num_tokens, handle.topk
    wts = handle.topk_weights.to(torch.float32).contiguous()
    if back.is_cuda:
        src = handle.pair_rows if handle.pair_rows is not None else _inverse(handle.order)
        return moe_combine(back, src.view(t, k), wts.view(t, k))
    pairs = torch.empty_like(back).index_copy_(0, handle.order, back)
    return _combine_pairs(pairs.view(t, k, y.shape[1]), wts.view(t, k, 1))


def _combine_pairs(pairs: torch.Tensor, wts: torch.Tensor) -> torch.Tensor:
    """``bf16(sum_j wts[:, j] * pairs[:, j])``, products rounded to fp32 and added in slot order (the kernel's
    arithmetic; ``(pairs * wts).sum(1)`` would leave the order of the sum to torch's reduction)."""
    prod = pairs.to(torch.float32) * wts
    acc = prod[:, 0]
    for j in range(1, prod.shape[1]):
        acc = acc + prod[:, j]
    return acc.to(torch.bfloat16)


def moe_forward(
    x: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    w_gate_up: MXArray,
    w_down: MXArray,
    group: Any = None,
    *,
    num_experts: int,
    fmt: str = "e4m3",
) -> torch.Tensor:
    """Expert-parallel MX MoE layer forward of this rank's tokens.

    Parameters
    ----------
    x : bfloat16 (or float32) ``[T, H]`` tokens of this rank.
    topk_ids, topk_weights : ``[T, topk]`` routing (global expert ids, weights).
    w_gate_up : MXArray ``[E_l, 2I, H]`` of this rank's experts (gate rows first, then up), quantized along axis 2.
    w_down : MXArray ``[E_l, H, I]``, quantized along axis 2.
    group, num_experts : as :func:`dispatch`.
    fmt : element format of the activations (``"e4m3"``).

    Returns
    -------
    bfloat16 ``[T, H]``: quantize -> :func:`dispatch` -> ``grouped_gemm_mx`` (gate_up, bf16) -> ``silu(gate) * up``
    (float32) -> quantize -> ``grouped_gemm_mx`` (down, bf16) -> :func:`combine`. The float64 reference is
    :func:`mxrt.reference.moe_layer.moe_layer_f64`.
    """
    xg, h = dispatch(quantize_mx(x, fmt), topk_ids, topk_weights, group, num_experts=num_experts)
    gu = grouped_gemm_mx(xg, w_gate_up, h.group_lens)
    i = gu.shape[1] // 2
    a = torch.nn.functional.silu(gu[:, :i].float()) * gu[:, i:].float()
    y = grouped_gemm_mx(quantize_mx(a, fmt), w_down, h.group_lens)
    return combine(y, h, group)


__all__ = [
    "NVLS_OFF",
    "DispatchHandle",
    "combine",
    "dispatch",
    "grouped_to_recv",
    "moe_forward",
    "multicast_off",
    "recv_to_grouped",
]
