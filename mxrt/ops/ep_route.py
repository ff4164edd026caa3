"""GPU launchers of :func:`mxrt.ep.dispatch`'s device layout (kernels_src/moe/ep_*.hip; specs and limits in
:mod:`mxrt.ops.ep_kernels`), on raw device pointers (ints) of the caller's torch tensors, on CuPy's current device
and stream (the caller sets both; nothing here allocates, reads a value back or synchronises).

- :func:`launch_route`: ``ep_route_count`` + ``ep_route_scatter``, a stable counting sort of the flat pair indices
  by expert id (ids outside ``[0, E)`` in a last bin): ``order``, its inverse ``pos`` and the ``[W, E/W + 1]``
  send counts (last column: the bad ids). Twin: :func:`mxrt.layouts.ep.route`.
- :func:`launch_gather`: ``ep_gather_rows``, ``dst_g[i] = src_g[idx[i] // div]`` for one or two row segments (the
  dispatch's send gather packs codes and scales into one row; its receive gather splits them again), in the widest
  unit of 16 / 8 / 4 / 2 / 1 bytes that divides every pointer, width and row stride.
- :func:`launch_recv_map`: ``ep_recv_map``, ``grouped_to_recv`` / ``recv_to_grouped`` and ``group_lens`` from the
  received counts. Twins: :func:`mxrt.layouts.ep.grouped_to_recv`, :func:`mxrt.layouts.ep.recv_to_grouped`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..layouts._check import cdiv
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch, prepare
from . import ep_kernels as K

OP = "ep.dispatch"
#: the kernels count and index pairs and rows in 32-bit integers
MAX_ROWS = 2**31 - 1


@dataclass(frozen=True)
class RoutePlan:
    """``num_ctas`` contiguous chunks of ``chunk`` pairs (the same for the count and the scatter kernel)."""

    chunk: int
    num_ctas: int

    @property
    def config(self) -> LaunchConfig:
        return LaunchConfig(grid=(self.num_ctas, 1, 1), block=(K.THREADS, 1, 1))


def plan_route(numel: int) -> RoutePlan:
    """Chunks of at least ``MIN_CHUNK`` pairs (a multiple of THREADS), at most ``MAX_ROUTE_CTAS`` of them."""
    ctas = max(1, min(cdiv(numel, K.MIN_CHUNK), K.MAX_ROUTE_CTAS))
    chunk = cdiv(cdiv(max(numel, 1), ctas), K.THREADS) * K.THREADS
    return RoutePlan(chunk, max(1, cdiv(numel, chunk)))


def unsupported(numel: int, num_experts: int) -> str | None:
    """Why the kernels cannot lay out a dispatch of ``numel`` pairs over ``num_experts`` experts (None: they can;
    the received rows are checked against :data:`MAX_ROWS` once the host knows them)."""
    if num_experts + 1 > K.MAX_BINS or num_experts > K.MAX_SEGS:
        return f"num_experts = {num_experts}: the kernels hold at most {K.MAX_SEGS} experts' counts"
    if numel + K.MIN_CHUNK * K.MAX_ROUTE_CTAS > MAX_ROWS:
        return f"{numel} pairs: the kernels index pairs in 32 bits"
    return None


#: argument kinds of each kernel, as numpy scalars (u64: a pointer), for preparing its launches
_U, _I, _Q = np.uint64(0), np.int32(0), np.int64(0)
_KINDS = {
    "ep_route_count": (_U, _U, _I, _I, _I),
    "ep_route_scatter": (_U,) * 5 + (_I,) * 5,
    "ep_gather_rows": (_U,) * 5 + (_Q,) * 8,
    "ep_recv_map": (_U,) * 4 + (_Q, _I, _I, _I),
}
_PREPARED: dict[tuple, Any] = {}


def _launch(spec: Any, cfg: LaunchConfig, vals: tuple[int, ...], **kw: int) -> None:
    """Launch ``spec`` (defines THREADS + ``kw``) with raw int arguments (pointers as ints) on CuPy's current device
    and stream: a cached :func:`mxrt.runtime.launch.prepare` launch per (kernel, device, grid) packs the ints
    straight into its parameter block (a few microseconds: the dispatch launches these on its critical path);
    :func:`mxrt.runtime.launch.launch` where the driver route does not serve."""
    arch = get_arch()
    kernel = build(spec, defines(THREADS=K.THREADS, **kw), arch)
    key = (id(kernel), arch.device_id, cfg)
    p = _PREPARED.get(key)
    if p is None or p.kernel is not kernel or not p.usable():
        p = prepare(OP, kernel, cfg, _KINDS[spec.symbol])
        if p is None:
            args = tuple(type(k)(v) for k, v in zip(_KINDS[spec.symbol], vals, strict=True))
            launch(OP, kernel, cfg, args)
            return
        if len(_PREPARED) > 512:  # a long run of odd grids: start over rather than grow
            _PREPARED.clear()
        _PREPARED[key] = p
    p(*vals)


def launch_route(
    ids: int, id_bytes: int, numel: int, num_experts: int, world_size: int, hist: int, order: int, pos: int,
    counts: int, plan: RoutePlan,
) -> None:  # fmt: skip
    """Send order and counts of ``numel`` ids (``id_bytes`` 4 or 8, contiguous, signed): ``hist`` int32
    ``[plan.num_ctas * (E + 1)]`` workspace; writes ``order`` / ``pos`` int64 ``[numel]`` and ``counts`` int64
    ``[W, E / W + 1]``. Both kernels run even for ``numel = 0`` (the counts are then zeros)."""
    if id_bytes not in (4, 8) or num_experts % world_size or numel + plan.chunk > MAX_ROWS:
        raise ShapeError(f"{OP}: route of {numel} ids ({id_bytes} bytes), E = {num_experts}, W = {world_size}")
    cfg = plan.config
    _launch(K.EP_ROUTE_COUNT, cfg, (ids, hist, numel, num_experts, plan.chunk), ID_BYTES=id_bytes)
    vals = (ids, hist, order, pos, counts, numel, num_experts, world_size, plan.chunk, plan.num_ctas)
    _launch(K.EP_ROUTE_SCATTER, cfg, vals, ID_BYTES=id_bytes)


def gather_unit(*values: int) -> int:
    """The widest unit of :data:`ep_kernels.UNITS` bytes dividing every value (pointers, widths, row strides)."""
    for u in K.UNITS:
        if all(v % u == 0 for v in values):
            return u
    return 1


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def gather_config(rows: int) -> LaunchConfig:
    """One warp per row, grid-stride beyond ``MAX_GATHER_CTAS`` CTAs; the CTA count rounded up to a power of two
    (idle warps exit) so that the received row counts, new on every call, reuse a few prepared launches."""
    ctas = min(_pow2(cdiv(rows, K.THREADS // 32)), K.MAX_GATHER_CTAS)
    return LaunchConfig(grid=(ctas, 1, 1), block=(K.THREADS, 1, 1))


Segment = tuple[int, int, int, int, int]  # (dst pointer, dst row stride, src pointer, src row stride, width), bytes


def launch_gather(segments: list[Segment], idx: int, rows: int, div: int) -> None:
    """``dst[i, :width] = src[idx[i] // div, :width]`` for ``i < rows`` and each of one or two segments (byte
    pointers and strides); ``idx`` int64 ``[rows]`` on the device, every ``idx[i] // div`` a row of each src."""
    if not 1 <= len(segments) <= 2 or div < 1:
        raise ShapeError(f"{OP}: a row gather takes one or two segments and div >= 1, got {len(segments)}, {div}")
    if rows == 0:
        return
    segs = list(segments) + [(0, 0, 0, 0, 0)] * (2 - len(segments))
    unit = gather_unit(*(v for s in segs for v in s))
    (d0, ldd0, s0, lds0, w0), (d1, ldd1, s1, lds1, w1) = segs
    u = unit
    vals = (d0, d1, s0, s1, idx, rows, div, w0 // u, w1 // u, ldd0 // u, ldd1 // u, lds0 // u, lds1 // u)
    _launch(K.EP_GATHER_ROWS, gather_config(rows), vals, UNIT=unit)


def map_config(rows: int) -> LaunchConfig:
    """About 8 grouped rows per thread (each CTA builds the segment tables once); a power of two of CTAs."""
    ctas = min(_pow2(cdiv(rows, K.THREADS * 8)), K.MAX_MAP_CTAS)
    return LaunchConfig(grid=(ctas, 1, 1), block=(K.THREADS, 1, 1))


def launch_recv_map(
    counts: int, ldc: int, world_size: int, experts_local: int, rows: int, g2r: int, perm: int, lens: int
) -> None:
    """From the received counts (int64, row ``s`` at ``counts + 8 * s * ldc``, ``experts_local`` columns read):
    ``g2r`` / ``perm`` int64 ``[rows]`` and ``lens`` int64 ``[experts_local]``; ``rows`` is the counts' sum."""
    if world_size * experts_local > K.MAX_SEGS or rows > MAX_ROWS:
        raise ShapeError(f"{OP}: receive map of {world_size} x {experts_local} segments, {rows} rows")
    vals = (counts, g2r, perm, lens, rows, world_size, experts_local, ldc)
    _launch(K.EP_RECV_MAP, map_config(rows), vals, ID_BYTES=8)
