"""The fused layout of :func:`mxrt.ep.dispatch` (``MXRT_EP_DISPATCH=fused``; the default for CUDA tensors).

mxrt's own layout kernels (kernels_src/moe/ep_*.hip through :mod:`mxrt.ops.ep_route`) replace the ~35 small torch
ops of the torch layout, and the work is ordered so that the device never waits for the host's launches:

1. side stream (high priority): ``ep_route_count`` + ``ep_route_scatter`` (a stable counting sort: the send order,
   its inverse ``pair_rows`` for the combine, and the ``[W, E_l + 1]`` send counts, bad ids in the last column),
   then the counts' all-to-all (NCCL), then one copy of both count matrices to pinned host memory;
2. caller's stream, after the sort only: ``ep_gather_rows`` packs codes and scales of each pair's token into its
   send row (no ``torch.cat`` of the tokens first), while the counts travel: a first launch of
   :data:`FIRST_GATHER_BYTES` before the counts' NCCL call (the device works through the host's call), the rest
   after it (the NCCL kernel then waits for the first launch's blocks only);
3. the one host sync waits for the counts' copy alone; the split sizes and the bad-id total are summed on the host;
4. caller's stream: the all-to-all-v of the packed rows; side stream meanwhile: ``ep_recv_map`` (grouped_to_recv,
   recv_to_grouped, group_lens in one kernel, hidden behind the transfer);
5. caller's stream, after the side stream: ``ep_gather_rows`` splits the received rows into the grouped codes and
   scales.

Results are bitwise those of the torch layout (the same maps, :mod:`mxrt.layouts.ep` twins). CPU tensors (gloo
worlds) run the same flow with the kernels' numpy twins and no streams: the tests' way to check it without a GPU.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..errors import ShapeError
from ..layouts import ep as ep_np
from . import _transport as tp

#: bytes of send rows gathered before the counts' all-to-all is called (~70 us of gather on an H200): the device
#: works through the host's ~60-100 us NCCL call instead of idling, and the NCCL kernel, queued behind only this
#: first launch's blocks, is not held back until the whole gather has been dispatched (equal-priority kernels
#: start in launch order); the rest of the rows are gathered by a second launch after the call
FIRST_GATHER_BYTES = 128 << 20
#: side streams, one per CUDA device (created on first use)
_SIDE: dict[int, Any] = {}
#: CuPy views of torch streams, by stream pointer
_EXT_STREAMS: dict[int, Any] = {}


def side_stream(dev: torch.device) -> Any:
    s = _SIDE.get(dev.index)
    if s is None:
        s = _SIDE[dev.index] = torch.cuda.Stream(device=dev, priority=-1)  # high priority (clamped to the range)
    return s


def unsupported(device: torch.device, numel: int, num_experts: int) -> str | None:
    """Why the fused layout cannot run this dispatch on the GPU (None: it can; CPU tensors always can, on the
    twins)."""
    if device.type != "cuda":
        return None
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed (the layout kernels launch through it)"
    from ..ops import ep_route

    return ep_route.unsupported(numel, num_experts)


class _CudaKernels:
    """The layout kernels on torch tensors' pointers, on a torch stream (CuPy's current stream inside :meth:`on`)."""

    def __init__(self, dev: torch.device) -> None:
        import cupy

        from ..ops import ep_route

        self.cupy, self.ops, self.index = cupy, ep_route, dev.index
        self._streams = _EXT_STREAMS

    @contextlib.contextmanager
    def on(self, stream: Any) -> Iterator[None]:
        ptr = 0 if stream is None else stream.cuda_stream  # None: the legacy default stream
        ext = self._streams.get(ptr)
        if ext is None:
            # CuPy 14 deprecates ExternalStream for Stream.from_external, which takes an object with the CUDA stream
            # protocol; what this has is torch's raw pointer (0 for the legacy stream), so it keeps ExternalStream
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                try:
                    ext = self.cupy.cuda.ExternalStream(ptr, device_id=self.index)
                except TypeError:  # a CuPy without device_id: the stream belongs to the current device, set below
                    ext = self.cupy.cuda.ExternalStream(ptr)
            self._streams[ptr] = ext
        with self.cupy.cuda.Device(self.index), ext:
            yield

    def route(self, stream: Any, ids: torch.Tensor, e: int, w: int, counts: torch.Tensor, order: torch.Tensor,
              pos: torch.Tensor) -> None:  # fmt: skip
        plan = self.ops.plan_route(ids.numel())
        hist = torch.empty(plan.num_ctas * (e + 1), dtype=torch.int32, device=ids.device)  # the side stream's pool
        with self.on(stream):
            self.ops.launch_route(ids.data_ptr(), ids.element_size(), ids.numel(), e, w, hist.data_ptr(),
                                  order.data_ptr(), pos.data_ptr(), counts.data_ptr(), plan)  # fmt: skip

    def gather(self, stream: Any, segs: list[tuple[torch.Tensor, torch.Tensor]], idx: torch.Tensor, rows: int,
               div: int) -> None:  # fmt: skip
        if rows == 0:
            return
        s = [(d.data_ptr(), d.stride(0), x.data_ptr(), x.stride(0), d.shape[1]) for d, x in segs]
        with self.on(stream):
            self.ops.launch_gather(s, idx.data_ptr(), rows, div)

    def recv_map(self, stream: Any, rc: torch.Tensor, rows: int, g2r: torch.Tensor, perm: torch.Tensor,
                 lens: torch.Tensor) -> None:  # fmt: skip
        w, ld = rc.shape
        with self.on(stream):
            self.ops.launch_recv_map(rc.data_ptr(), rc.stride(0), w, ld - 1, rows, g2r.data_ptr(), perm.data_ptr(),
                                     lens.data_ptr())  # fmt: skip


class _TwinKernels:
    """The same three steps on CPU tensors through the kernels' numpy twins (:mod:`mxrt.layouts.ep`)."""

    def route(self, stream: Any, ids: torch.Tensor, e: int, w: int, counts: torch.Tensor, order: torch.Tensor,
              pos: torch.Tensor) -> None:  # fmt: skip
        r = ep_np.route(ids.numpy(), e, w)
        order.copy_(torch.from_numpy(r.order))
        pos.copy_(torch.from_numpy(r.pos))
        counts.copy_(torch.from_numpy(r.counts))

    def gather(self, stream: Any, segs: list[tuple[torch.Tensor, torch.Tensor]], idx: torch.Tensor, rows: int,
               div: int) -> None:  # fmt: skip
        if rows == 0:
            return
        src = idx // div
        for d, x in segs:
            d.copy_(x.index_select(0, src))

    def recv_map(self, stream: Any, rc: torch.Tensor, rows: int, g2r: torch.Tensor, perm: torch.Tensor,
                 lens: torch.Tensor) -> None:  # fmt: skip
        c = rc[:, :-1].numpy()
        g2r.copy_(torch.from_numpy(ep_np.grouped_to_recv(c)))
        perm.copy_(torch.from_numpy(ep_np.recv_to_grouped(c)))
        lens.copy_(torch.from_numpy(c.sum(0).astype(np.int64)))


def _kernels(dev: torch.device) -> Any:
    return _CudaKernels(dev) if dev.type == "cuda" else _TwinKernels()


def _word_dtype(row_bytes: int) -> torch.dtype:
    """NCCL's element type for rows of ``row_bytes`` (no 2-byte integer there; the torch layout picks the same)."""
    return torch.int64 if row_bytes % 8 == 0 else torch.int32 if row_bytes % 4 == 0 else torch.uint8


def dispatch_rows(
    srcs: list[torch.Tensor], topk_ids: torch.Tensor, num_experts: int, group: Any, rank: int, w: int, op: str
) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """Move the rows ``srcs`` (uint8 ``[T, width]`` each, packed side by side into one send row) of every pair to
    its expert's rank; returns the received rows in the grouped order (uint8 ``[R, width]`` per src) and the
    :class:`mxrt.ep.DispatchHandle` fields of the maps."""
    dev = topk_ids.device
    cuda = dev.type == "cuda"
    el = num_experts // w
    t, k = topk_ids.shape
    p = t * k
    widths = [s.shape[1] for s in srcs]
    rb = sum(widths)
    kern = _kernels(dev)
    ids = topk_ids.contiguous().view(-1)
    i64 = dict(dtype=torch.int64, device=dev)
    order, pos = torch.empty(p, **i64), torch.empty(p, **i64)
    cbuf = torch.empty((2, w, el + 1), **i64)  # [0]: this rank's send counts, [1]: what every source sends here
    send = torch.empty((p, rb), dtype=torch.uint8, device=dev)
    main = torch.cuda.current_stream(dev) if cuda else None
    side = side_stream(dev) if cuda else None
    if cuda:
        side.wait_stream(main)  # the ids and the rows are the caller's stream's
    with torch.cuda.stream(side) if cuda else contextlib.nullcontext():
        kern.route(side, ids, num_experts, w, cbuf[0], order, pos)
        sorted_ev = side.record_event() if cuda else None
    if cuda:
        main.wait_event(sorted_ev)
    segs, lo = [], 0
    for s, wd in zip(srcs, widths, strict=True):
        segs.append((send[:, lo : lo + wd], s))
        lo += wd
    first = min(p, max(1, FIRST_GATHER_BYTES // max(rb, 1)))
    kern.gather(main, [(d[:first], s) for d, s in segs], order[:first], first, k)
    with torch.cuda.stream(side) if cuda else contextlib.nullcontext():
        tp.all_to_all_into(cbuf[1], cbuf[0], group)  # the counts travel while the send rows are gathered
    kern.gather(main, [(d[first:], s) for d, s in segs], order[first:], p - first, k)
    with torch.cuda.stream(side) if cuda else contextlib.nullcontext():
        pending = tp.host_ints(cbuf)
    host = np.asarray(pending.wait(), np.int64).reshape(2, w, el + 1)  # the one host sync
    send_splits = [int(v) for v in host[0, :, :el].sum(1)]
    recv_splits = [int(v) for v in host[1, :, :el].sum(1)]
    nbad = int(host[1, :, el].sum())
    if nbad:
        raise ShapeError(
            f"{op}: argument 'topk_ids' holds {nbad} id(s) outside [0, {num_experts}) on the group's ranks, "
            f"expected every id in [0, {num_experts})"
        )
    r = sum(recv_splits)
    wdt = _word_dtype(rb)
    got = tp.all_to_all_v(send.view(wdt), send_splits, recv_splits, group).view(torch.uint8)
    g2r, perm, lens = torch.empty(r, **i64), torch.empty(r, **i64), torch.empty(el, **i64)
    outs = [torch.empty((r, wd), dtype=torch.uint8, device=dev) for wd in widths]
    with torch.cuda.stream(side) if cuda else contextlib.nullcontext():
        kern.recv_map(side, cbuf[1], r, g2r, perm, lens)  # behind the transfer
    if cuda:
        main.wait_stream(side)
    segs, lo = [], 0
    for o, wd in zip(outs, widths, strict=True):
        segs.append((o, got[:, lo : lo + wd]))
        lo += wd
    kern.gather(main, segs, g2r, r, 1)
    fields = dict(
        order=order,
        recv_to_grouped=perm,
        group_lens=lens,
        recv_counts=cbuf[1][:, :el],
        send_splits=tuple(send_splits),
        recv_splits=tuple(recv_splits),
        pair_rows=pos,
    )
    return outs, fields
