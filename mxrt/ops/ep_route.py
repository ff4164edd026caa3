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
from ..runtime.launch import LaunchConfig, launch
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


def _arch_defines(**kw: int) -> tuple[Any, Any]:
    return get_arch(), defines(THREADS=K.THREADS, **kw)


def launch_route(
    ids: int, id_bytes: int, numel: int, num_experts: int, world_size: int, hist: int, order: int, pos: int,
    counts: int, plan: RoutePlan,
) -> None:  # fmt: skip
    """Send order and counts of ``numel`` ids (``id_bytes`` 4 or 8, contiguous, signed): ``hist`` int32
    ``[plan.num_ctas * (E + 1)]`` workspace; writes ``order`` / ``pos`` int64 ``[numel]`` and ``counts`` int64
    ``[W, E / W + 1]``. Both kernels run even for ``numel = 0`` (the counts are then zeros)."""
    if id_bytes not in (4, 8) or num_experts % world_size or numel + plan.chunk > MAX_ROWS:
        raise ShapeError(f"{OP}: route of {numel} ids ({id_bytes} bytes), E = {num_experts}, W = {world_size}")
    arch, d = _arch_defines(ID_BYTES=id_bytes)
    i32, u64 = np.int32, np.uint64
    cfg = plan.config
    launch(OP, build(K.EP_ROUTE_COUNT, d, arch), cfg,
           (u64(ids), u64(hist), i32(numel), i32(num_experts), i32(plan.chunk)))  # fmt: skip
    args = (u64(ids), u64(hist), u64(order), u64(pos), u64(counts), i32(numel), i32(num_experts), i32(world_size))
    launch(OP, build(K.EP_ROUTE_SCATTER, d, arch), cfg, (*args, i32(plan.chunk), i32(plan.num_ctas)))


def gather_unit(*values: int) -> int:
    """The widest unit of :data:`ep_kernels.UNITS` bytes dividing every value (pointers, widths, row strides)."""
    for u in K.UNITS:
        if all(v % u == 0 for v in values):
            return u
    return 1


def gather_config(rows: int) -> LaunchConfig:
    """One warp per row, grid-stride beyond ``MAX_GATHER_CTAS`` CTAs."""
    ctas = max(1, min(cdiv(rows, K.THREADS // 32), K.MAX_GATHER_CTAS))
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
    arch, d = _arch_defines(UNIT=unit)
    i64, u64 = np.int64, np.uint64
    args = (u64(d0), u64(d1), u64(s0), u64(s1), u64(idx), i64(rows), i64(div), i64(w0 // unit), i64(w1 // unit))
    strides = (i64(ldd0 // unit), i64(ldd1 // unit), i64(lds0 // unit), i64(lds1 // unit))
    launch(OP, build(K.EP_GATHER_ROWS, d, arch), gather_config(rows), (*args, *strides))


def map_config(rows: int) -> LaunchConfig:
    ctas = max(1, min(cdiv(rows, K.THREADS * 8), K.MAX_MAP_CTAS))
    return LaunchConfig(grid=(ctas, 1, 1), block=(K.THREADS, 1, 1))


def launch_recv_map(
    counts: int, ldc: int, world_size: int, experts_local: int, rows: int, g2r: int, perm: int, lens: int
) -> None:
    """From the received counts (int64, row ``s`` at ``counts + 8 * s * ldc``, ``experts_local`` columns read):
    ``g2r`` / ``perm`` int64 ``[rows]`` and ``lens`` int64 ``[experts_local]``; ``rows`` is the counts' sum."""
    if world_size * experts_local > K.MAX_SEGS or rows > MAX_ROWS:
        raise ShapeError(f"{OP}: receive map of {world_size} x {experts_local} segments, {rows} rows")
    arch, d = _arch_defines(ID_BYTES=8)
    i32, i64, u64 = np.int32, np.int64, np.uint64
    args = (u64(counts), u64(g2r), u64(perm), u64(lens), i64(rows), i32(world_size), i32(experts_local), i32(ldc))
    launch(OP, build(K.EP_RECV_MAP, d, arch), map_config(rows), args)
