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
  order and ``out[t] = sum_j topk_weights[t, j] * y_pairs[t * topk + j]``. Fused (:func:`moe_combine`, the
  GPU kernel's twin): ``src = pair_rows(order)`` (``src[order] = arange``) names the received row of every pair,
  and ``out[t] = bf16(sum_j w[t, j] * y_sent[src[t, j]])`` reads each row once, with no ``y_pairs`` copy.

:func:`simulate_dispatch` / :func:`simulate_combine` run all ranks of a simulated world in one process (the
all-to-all as list shuffling); the tests check them against a plain loop over ranks, experts and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import DtypeError, ShapeError
from ._check import check_int, check_int_array

BF16 = np.dtype(ml_dtypes.bfloat16)
#: the bf16 bits every NaN result of :func:`moe_combine` is written as (one pattern on every target)
BF16_NAN_BITS = 0x7FC0


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


@dataclass(frozen=True)
class Route:
    """The device send layout of one rank (:func:`route`): ``order [P]`` (send row -> flat pair), ``pos [P]`` (its
    inverse, :func:`pair_rows`) and ``counts [W, E_l + 1]`` (pairs per destination and local expert; last column:
    the ids outside ``[0, E)``, the same in every row)."""

    order: np.ndarray
    pos: np.ndarray
    counts: np.ndarray


def route(topk_ids: object, num_experts: int, world_size: int, op: str = "ep") -> Route:
    """The twin of the kernels ``ep_route_count`` + ``ep_route_scatter`` (kernels_src/moe/ep_route.h): a stable sort
    of the flat pair indices by bin, where an id in ``[0, E)`` is its own bin and every other id (negative or too
    large) falls in a last bin ``E``. For valid ids ``order`` and the counts are :func:`send_layout`'s; the last
    column carries the bad ids' count to every destination, so each rank learns the group's total from the counts'
    own all-to-all (and every rank raises, none waits in a collective)."""
    el = experts_per_rank(num_experts, world_size, op)
    ids = check_int_array(topk_ids, op, "topk_ids").ravel()
    valid = (ids >= 0) & (ids < num_experts) if ids.dtype.kind == "i" else ids < num_experts
    bins = np.where(valid, ids, num_experts).astype(np.int64)
    order = np.argsort(bins, kind="stable").astype(np.int64)
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size, dtype=np.int64)
    cnt = np.bincount(bins, minlength=num_experts + 1).astype(np.int64)
    bad = np.full((world_size, 1), cnt[num_experts], np.int64)
    return Route(order, pos, np.concatenate([cnt[:num_experts].reshape(world_size, el), bad], 1))


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


def pair_rows(order: object) -> np.ndarray:
    """``src [P]``: the send row of each flat pair index, the inverse permutation of ``order`` (``src[order] =
    arange(P)``); what :func:`moe_combine` reads the returned rows through."""
    o = check_int_array(order, "pair_rows", "order", ndim=1).astype(np.int64)
    if o.size and (o.min() < 0 or o.max() >= o.size or np.unique(o).size != o.size):
        raise ShapeError(f"pair_rows: argument 'order' is not a permutation of range({o.size})")
    src = np.empty_like(o)
    src[o] = np.arange(o.size, dtype=np.int64)
    return src


def _ftz(x: np.ndarray) -> np.ndarray:
    """fp32 subnormals -> zeros of the same sign (NVRTC's -ftz=true)."""
    b = x.view(np.uint32)
    return np.where((b & 0x7F800000) == 0, (b & 0x80000000).view(np.float32), x)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bits (uint16), round to nearest even, overflow to +-Inf, every NaN to ``BF16_NAN_BITS``: the
    kernel's integer formula (kernels_src/moe/moe_combine.hip)."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where((b & 0x7FFFFFFF) > 0x7F800000, np.uint16(BF16_NAN_BITS), r)


def check_combine(y: object, src: object, topk_weights: object, op: str) -> tuple[int, int, int, int]:
    """``(R, n, T, k)`` of a combine's arguments (dtypes, ranks, matching shapes, k >= 1); values not read. Shared
    by the numpy twin and the GPU op (mxrt.ops.moe_combine), so both refuse the same calls."""
    for name, a in (("y", y), ("src", src), ("topk_weights", topk_weights)):
        if not hasattr(a, "dtype") or not hasattr(a, "shape"):
            raise DtypeError(f"{op}: argument '{name}' is a {type(a).__name__}, expected an array")
    yname, sname, wname = (str(getattr(a.dtype, "name", a.dtype)) for a in (y, src, topk_weights))  # type: ignore[union-attr]
    if yname not in ("bfloat16", "uint16"):
        raise DtypeError(
            f"{op}: argument 'y' has dtype {yname}, expected bfloat16 (or uint16 bf16 bits, CuPy's form): the expert "
            "outputs"
        )
    if sname not in ("int32", "int64"):
        raise DtypeError(f"{op}: argument 'src' has dtype {sname}, expected int32 or int64 row indices of y")
    if wname != "float32":
        raise DtypeError(
            f"{op}: argument 'topk_weights' has dtype {wname}, expected float32 (the kernel multiplies in fp32; "
            "convert other weights with .astype(float32) first)"
        )
    ys, ss, ws = (tuple(int(v) for v in a.shape) for a in (y, src, topk_weights))  # type: ignore[union-attr]
    if len(ys) != 2:
        raise ShapeError(f"{op}: argument 'y' has shape {ys}, expected a 2-D [R, n] array of rows")
    if len(ss) != 2:
        raise ShapeError(f"{op}: argument 'src' has shape {ss}, expected [T, k] (the row of y of pair (t, j))")
    if ws != ss:
        raise ShapeError(f"{op}: argument 'topk_weights' has shape {ws}, expected {ss} (src's shape [T, k])")
    if ss[1] < 1:
        raise ShapeError(f"{op}: argument 'src' has shape {ss}, expected k = src.shape[1] >= 1 slots per token")
    return ys[0], ys[1], ss[0], ss[1]


def moe_combine(y: object, src: object, topk_weights: object, *, ftz: bool = False) -> np.ndarray:
    """``out [T, n]`` bfloat16: ``out[t] = bf16(sum_{j<k} topk_weights[t, j] * y[src[t, j]])``, the exact twin of the
    GPU kernel (kernels_src/moe/moe_combine.hip).

    Parameters
    ----------
    y : bfloat16 ``[R, n]`` rows (uint16 arrays are read as bf16 bits); the expert outputs as they came back.
    src : int32 / int64 ``[T, k]``, the row of ``y`` holding pair ``(t, j)``, every value in ``[0, R)``
        (:class:`ShapeError` otherwise; the GPU kernel never reads such a row and writes the token's row as NaN).
    topk_weights : float32 ``[T, k]``.
    ftz : flush fp32 subnormal inputs and results of every product and sum to zero (NVRTC's ``-ftz=true``), for
        comparing with a CUDA build bit for bit.

    Notes
    -----
    float32 arithmetic in the kernel's order: ``p_j = fp32(w[t, j] * y[src[t, j]])`` (one rounding, never fused),
    ``acc = p_0``, then ``acc = fp32(acc + p_j)`` for ``j = 1 .. k-1``; one round to bf16 (RNE), NaN written as
    ``0x7FC0``, overflow to +-Inf. Not float64: this is the contract a GPU result is compared with bitwise;
    :func:`simulate_combine` is the float64 form.
    """
    op = "moe_combine"
    r, n, t, k = check_combine(y, src, topk_weights, op)
    yv = np.asarray(y)
    if not isinstance(yv, np.ndarray) or yv.dtype.kind == "O":
        raise DtypeError(f"{op}: argument 'y' is a {type(y).__name__}, expected a numpy array")
    s = np.asarray(src).astype(np.int64)
    w = np.asarray(topk_weights, np.float32)
    if s.size and (s.min() < 0 or s.max() >= r):
        bad = s[(s < 0) | (s >= r)][0]
        raise ShapeError(f"{op}: argument 'src' holds the row {bad}, expected rows in [0, {r}) (y has {r} rows)")
    bits = yv.view(np.uint16)
    out = np.empty((t, n), np.uint16)
    if t and n:
        flush = _ftz if ftz else (lambda a: a)
        acc = np.zeros((t, n), np.float32)
        for j in range(k):
            yj = (bits[s[:, j]].astype(np.uint32) << 16).view(np.float32)
            with np.errstate(all="ignore"):
                p = flush(flush(w[:, j, None]) * flush(yj))
                acc = p if j == 0 else flush(flush(acc) + p)  # acc = p_0: a -0 product stays -0
        out[...] = f32_to_bf16_bits(acc)
    return out.view(BF16)


__all__ = [
    "BF16_NAN_BITS",
    "Route",
    "SendLayout",
    "SimHandle",
    "check_combine",
    "check_topk_ids",
    "experts_per_rank",
    "f32_to_bf16_bits",
    "grouped_to_recv",
    "moe_combine",
    "pair_rows",
    "recv_to_grouped",
    "route",
    "send_layout",
    "simulate_combine",
    "simulate_dispatch",
]
