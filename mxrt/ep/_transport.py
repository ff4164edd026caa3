"""The only transport of :mod:`mxrt.ep`: ``torch.distributed`` collectives (NCCL for CUDA tensors, gloo on the CPU).

mxrt grows no transport of its own (issue 13): every byte moves through ``all_to_all_single``, NCCL's
all-to-all-v (grouped ``ncclSend`` / ``ncclRecv``). Only :mod:`mxrt.ep` imports this module.

**Host synchronisation.** ``all_to_all_single`` with uneven splits takes ``input_split_sizes`` /
``output_split_sizes`` as host lists: torch sizes the NCCL sends and receives (and the receive buffer) on the host.
That is the one host sync a dispatch needs: :func:`host_ints` starts the copy of ``[2W + 1]`` int64 counts (send
splits, receive splits, bad-id count) device -> host into pinned memory, and :meth:`PendingInts.wait` waits for that
copy alone, so the device goes on with the work queued after it (the dispatch's gathers) while the host waits.
Everything else (the counts' own all-to-all, sort, gathers, group_lens) stays on the device and on the current
stream; the combine reuses the dispatch's splits and syncs nowhere.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

#: NVLink multicast (NVLS) off: a program using it can take a shared host's GPUs out of service (the device
#: tool's KINDS.md); the launcher and :func:`init` set these before NCCL creates a communicator.
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def multicast_off() -> None:
    """Set :data:`NVLS_OFF` in this process's environment (NCCL reads it when a communicator is created)."""
    os.environ.update(NVLS_OFF)


def world(group: Any) -> tuple[int, int]:
    """``(rank, world_size)`` of ``group`` (None: the default group)."""
    return dist.get_rank(group), dist.get_world_size(group)


def backend(group: Any) -> str:
    return str(dist.get_backend(group))


def all_to_all_equal(x: torch.Tensor, group: Any) -> torch.Tensor:
    """All-to-all of ``x [W, ...]``: row ``d`` goes to rank ``d``; row ``s`` of the result came from rank ``s``."""
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x.contiguous(), group=group)
    return out


def all_to_all_into(out: torch.Tensor, x: torch.Tensor, group: Any) -> None:
    """:func:`all_to_all_equal` into ``out`` (contiguous, ``x``'s shape): row ``s`` of ``out`` came from rank ``s``."""
    dist.all_to_all_single(out, x, group=group)


def all_to_all_v(x: torch.Tensor, send_splits: list[int], recv_splits: list[int], group: Any) -> torch.Tensor:
    """All-to-all-v of the rows of ``x``: ``send_splits[d]`` rows to rank ``d``, ``recv_splits[s]`` rows from rank
    ``s`` (host lists, :func:`host_ints`). Byte payloads travel as uint8 (NCCL has no float8 / e8m0 type)."""
    out = x.new_empty((sum(recv_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), recv_splits, send_splits, group=group)
    return out


class PendingInts:
    """A small int64 tensor on its way to the host (:func:`host_ints`); :meth:`wait` is THE host sync of a dispatch."""

    __slots__ = ("_buf", "_event")

    def __init__(self, t: torch.Tensor) -> None:
        if t.device.type == "cuda":
            self._buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            self._buf.copy_(t, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._buf, self._event = t, None

    def wait(self) -> list[int]:
        """Block until the copy has landed (not until later work on the stream is done); the values as ints."""
        if self._event is not None:
            self._event.synchronize()
        return self._buf.tolist()


def host_ints(t: torch.Tensor) -> PendingInts:
    """Start copying ``t`` (int64, small) to the host; ``.wait()`` returns it as a list (see the module docstring)."""
    return PendingInts(t)


__all__ = [
    "NVLS_OFF",
    "PendingInts",
    "all_to_all_equal",
    "all_to_all_into",
    "all_to_all_v",
    "backend",
    "host_ints",
    "multicast_off",
    "world",
]
