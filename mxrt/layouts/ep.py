"""Expert-parallel (EP) routing layouts: who sends which (token, slot) row where, and how it comes back.

``W`` ranks each hold ``T_r`` tokens and ``E_l = E / W`` experts: rank ``r`` owns the experts
``[r * E_l, (r + 1) * E_l)``. A token's ``topk`` slots ``topk_ids [T_r, topk]`` name global experts. Dispatch sends
one row per (token, slot) pair (``i = t * topk + j``, the flat pair index) to the owner of its expert; combine
brings the expert outputs back and sums them with the routing weights. The index maps, which :mod:`mxrt.ep`
computes with torch on the device and this module with numpy (the reference of the layout math):

- **send order** ``order = argsort(topk_ids.ravel(), stable)``: send row ``j`` carries pair ``order[j]`` (token
  ``order[j] // topk``). Since a rank's experts are contiguous, sorting by global expert sorts by destination rank,
  then local expert, then flat pair index; rank ``d`` gets send rows ``[send_offs[d], send_offs[d + 1])``.
- **counts** ``counts [W, E_l]``: ``counts[d, e]`` = pairs for rank ``d``'s local expert ``e`` (a bincount of the
  ids); ``send_splits = counts.sum(1)``. Rank ``d`` receives ``recv_counts[s, e] = counts_s[d, e]`` from each
  source ``s`` (the counts' own all-to-all), ``recv_splits = recv_counts.sum(1)``.
- **received order** is (source, local expert, flat pair index of the source); the **grouped order** that
  :func:`mxrt.grouped_gemm_mx` consumes is (local expert, source, flat pair index), with
  ``group_lens = recv_counts.sum(0)``. ``recv_to_grouped[j]`` is the grouped row of received row ``j``:
  ``grouped_start[s, e] + (j - recv_start[s, e])`` for ``j`` in segment ``(s, e)``, with ``recv_start`` the
  exclusive prefix sum of ``recv_counts`` in (s, e) order and ``grouped_start`` the one in (e, s) order.
- **inverse (combine)**: expert output rows go back by ``y_recv = y_grouped[recv_to_grouped]``, the reverse
  all-to-all returns rank ``s``'s rows in its send order, ``y_pairs[order] = y_sent`` puts them back in pair
  order and ``out[t] = sum_j topk_weights[t, j] * y_pairs[t * topk + j]``.

:func:`simulate_dispatch` / :func:`simulate_combine` run all ranks of a simulated world in one process (the
all-to-all as list shuffling); the tests check them against a plain loop over ranks, experts and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError
from ._check import check_int, check_int_array


def experts_per_rank(num_experts: object, world_size: object, op: str = "ep") -> int:
    """``E_l = num_experts / world_size``; a typed error unless ``world_size`` divides ``num_experts``."""
    e = check_int(num_experts, op, "num_experts", minimum=1)
    w = check_int(world_size, op, "world_size", minimum=1)
    if e % w:
        raise ShapeError(
            f"{op}: argument 'num_experts' is {e}, expected a multiple of the world size {w} (each rank owns "
            "num_experts / world_size contiguous experts)"
        )
    return e // w


def check_topk_ids(topk_ids: object, num_experts: int, op: str = "ep") -> np.ndarray:
    """``topk_ids [T, topk]`` as int64, every id in ``[0, num_experts)`` (EP has no slot for other ids)."""
    ids = check_int_array(topk_ids, op, "topk_ids", ndim=2)
    if ids.size and (ids.min() < 0 or ids.max() >= num_experts):
        bad = ids[(ids < 0) | (ids >= num_experts)][0]
        raise ShapeError(f"{op}: argument 'topk_ids' holds the id {bad}, expected ids in [0, {num_experts})")
    return ids.astype(np.int64)


@dataclass(frozen=True)
class SendLayout:
    """One rank's send side: ``order [T*topk]`` (send row -> flat pair), ``counts [W, E_l]``, ``send_splits [W]``."""

    order: np.ndarray
    counts: np.ndarray
    send_splits: np.ndarray


def send_layout(topk_ids: object, num_experts: int, world_size: int, op: str = "ep") -> SendLayout:
    """The send order and counts of one rank's ``topk_ids [T, topk]`` (module docstring for the maps)."""
    el = experts_per_rank(num_experts, world_size, op)
    flat = check_topk_ids(topk_ids, num_experts, op).ravel()
    order = np.argsort(flat, kind="stable").astype(np.int64)
    counts = np.bincount(flat, minlength=num_experts).astype(np.int64).reshape(world_size, el)
    return SendLayout(order, counts, counts.sum(1))


def _exclusive(c: np.ndarray) -> np.ndarray:
    out = np.zeros(c.size, np.int64)
    np.cumsum(c[:-1], out=out[1:])
    return out


def recv_to_grouped(recv_counts: np.ndarray) -> np.ndarray:
    """``[R]`` grouped row of each received row, from ``recv_counts [W, E_l]`` (rows (source, expert) -> (expert,
    source)); a permutation of ``range(R)``, ``R = recv_counts.sum()``."""
    c = np.asarray(recv_counts, np.int64)
    w, el = c.shape
    recv_start = _exclusive(c.ravel())
    grouped_start = _exclusive(c.T.ravel()).reshape(el, w).T.ravel()
    seg = np.repeat(np.arange(w * el), c.ravel())
    return np.arange(seg.size, dtype=np.int64) - recv_start[seg] + grouped_start[seg]


def grouped_to_recv(recv_counts: np.ndarray) -> np.ndarray:
    """The inverse permutation of :func:`recv_to_grouped`: ``[R]`` received row of each grouped row."""
    fwd = recv_to_grouped(recv_counts)
    inv = np.empty_like(fwd)
    inv[fwd] = np.arange(fwd.size, dtype=np.int64)
    return inv


@dataclass(frozen=True)
class SimHandle:
    """What a simulated dispatch keeps for the combine: per rank its send layout, received counts and permutation."""

    sends: list[SendLayout]
    recv_counts: list[np.ndarray]
    perms: list[np.ndarray]
    topk: int


def simulate_dispatch(
    rows: list[np.ndarray], topk_ids: list[np.ndarray], num_experts: int
) -> tuple[list[np.ndarray], list[np.ndarray], SimHandle]:
    """Dispatch of ``W = len(rows)`` ranks in one process: ``rows[r] [T_r, ...]`` (any row payload: codes, scales),
    ``topk_ids[r] [T_r, topk]``. Returns per rank the grouped rows ``[R_r, ...]`` (local expert, source, pair),
    ``group_lens [E_l]`` and the handle for :func:`simulate_combine`."""
    op = "simulate_dispatch"
    w = len(rows)
    sends = [send_layout(ids, num_experts, w, op) for ids in topk_ids]
    topk = int(np.asarray(topk_ids[0]).shape[1])
    send_rows = []
    for r in range(w):
        x = np.asarray(rows[r])
        if x.shape[0] != np.asarray(topk_ids[r]).shape[0]:
            raise ShapeError(f"{op}: rank {r} has {x.shape[0]} rows and {np.asarray(topk_ids[r]).shape[0]} ids")
        sent = x[sends[r].order // topk]
        send_rows.append(np.split(sent, np.cumsum(sends[r].send_splits)[:-1]))
    grouped, lens, recv_counts, perms = [], [], [], []
    for d in range(w):
        rc = np.stack([sends[s].counts[d] for s in range(w)])  # the counts' all-to-all
        recv = np.concatenate([send_rows[s][d] for s in range(w)])  # the rows' all-to-all-v
        perm = recv_to_grouped(rc)
        g = np.empty_like(recv)
        g[perm] = recv
        grouped.append(g)
        lens.append(rc.sum(0))
        recv_counts.append(rc)
        perms.append(perm)
    return grouped, lens, SimHandle(sends, recv_counts, perms, topk)


def simulate_combine(y: list[np.ndarray], topk_weights: list[np.ndarray], h: SimHandle) -> list[np.ndarray]:
    """The inverse of :func:`simulate_dispatch`: ``y[d] [R_d, n]`` expert outputs in rank ``d``'s grouped order ->
    per source rank ``out [T_r, n] = sum_j topk_weights[t, j] * y(t, j)`` in float64."""
    w = len(y)
    back = []
    for d in range(w):
        yr = np.asarray(y[d])[h.perms[d]]  # grouped -> received order
        back.append(np.split(yr, np.cumsum(h.recv_counts[d].sum(1))[:-1]))
    out = []
    for s in range(w):
        sent = np.concatenate([back[d][s] for d in range(w)])  # the reverse all-to-all-v, in s's send order
        pairs = np.empty_like(sent)
        pairs[h.sends[s].order] = sent
        tw = np.asarray(topk_weights[s], np.float64)
        t = tw.shape[0]
        out.append((pairs.reshape(t, h.topk, *sent.shape[1:]).astype(np.float64) * tw[:, :, None]).sum(1))
    return out


__all__ = [
    "SendLayout",
    "SimHandle",
    "check_topk_ids",
    "experts_per_rank",
    "grouped_to_recv",
    "recv_to_grouped",
    "send_layout",
    "simulate_combine",
    "simulate_dispatch",
]
