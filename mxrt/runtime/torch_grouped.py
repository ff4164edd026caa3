"""PyTorch's grouped bf16 GEMM (``torch._grouped_mm``: CUTLASS grouped kernels that read the group offsets on the
device) run on CuPy arrays, on CuPy's current stream, for the ``torch`` route of the grouped MX GEMMs
(:mod:`mxrt.ops.grouped_gemm_torch`). torch is an optional peer: this module imports it only when asked and
:func:`unavailable` says why the route cannot run (no torch, no CUDA device in torch, no ``_grouped_mm``).

The route's workspaces (the bf16 operands, the group ends) are torch allocations that CuPy views through their
pointers (:func:`empty`, :func:`mxrt.runtime.arrays.view_torch_cuda`: a few microseconds each, where a DLPack
exchange costs tens), and so is torch's result. Work is queued on CuPy's current stream: torch runs under a
``torch.cuda.ExternalStream`` of it unless torch's current stream is already that stream (:class:`on_cupy_stream`),
so torch's allocator hands out memory ordered on that stream.

What the route relies on (measured on an H200, torch 2.11, session 11 call 1): offsets past the last group leave
those output rows unwritten (torch allocates the result uninitialised); empty groups are fine; the 2-D x 2-D form
(``a [n, Mc]`` row-major times a column-major view ``[Mc, k]``, offsets along Mc) gives ``[G, n, k]`` with zeros for
empty groups; every leading dimension must be a multiple of 16 bytes; the output dtype is the inputs' (bfloat16;
``out_dtype=torch.float32`` raises). The result is a new torch allocation, so a CUDA-graph capture of the route
would leave the graph writing memory that torch's allocator has taken back: :func:`capturing` lets the caller
decline it while CuPy's stream captures.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from typing import Any

from .arrays import view_torch_cuda


@lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why ``torch._grouped_mm`` cannot serve mxrt here (None: it can). Imports torch the first time when it is
    installed (about a second)."""
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return "torch is not installed (the torch route runs torch._grouped_mm)"
    try:
        import torch
    except Exception as e:  # a broken install is a reason, not an error
        return f"torch does not import ({type(e).__name__}: {e})"
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm"
    if torch.version.cuda is None or not torch.cuda.is_available():
        return "torch has no CUDA device"
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        return f"torch._grouped_mm is used on sm_90 only here (device capability {major}.x)"
    return None


def capturing() -> bool:
    """Whether CuPy's current stream is capturing a CUDA graph."""
    import cupy

    s = cupy.cuda.get_current_stream().ptr
    return bool(cupy.cuda.runtime.streamIsCapturing(s))


class on_cupy_stream:
    """Context: torch's current stream is CuPy's current stream (a ``torch.cuda.ExternalStream`` of it unless it
    already is); ``with on_cupy_stream() as torch:`` gives the torch module."""

    def __enter__(self) -> Any:
        import cupy
        import torch

        ptr = cupy.cuda.get_current_stream().ptr
        dev = cupy.cuda.Device().id
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        cur = raw(dev) if raw is not None else torch.cuda.current_stream(dev).cuda_stream
        self._ctx = None
        if cur != ptr:
            self._ctx = torch.cuda.stream(torch.cuda.ExternalStream(ptr, device=torch.device("cuda", dev)))
            self._ctx.__enter__()
        return torch

    def __exit__(self, *exc: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


_TORCH_DTYPES = {"uint16": "bfloat16", "int32": "int32"}


def empty(torch: Any, shape: tuple[int, ...], dtype: str) -> tuple[Any, Any]:
    """``(tensor, view)``: a torch allocation on the current (CuPy's) stream and its CuPy view of ``dtype``
    (``"uint16"``: a bfloat16 tensor; ``"int32"``). Call inside :class:`on_cupy_stream`."""
    t = torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device="cuda")
    return t, view_torch_cuda(t, dtype)


def grouped_mm(torch: Any, a: Any, b: Any, offs: Any) -> Any:
    """``torch._grouped_mm`` on bfloat16 tensors from :func:`empty`: ``a [m, kp]`` (``kp`` a multiple of 8) and
    either ``b [G, n, kp]`` (the forward / dgrad: ``out[rows of g] = a[rows of g] @ b[g].T``, ``out [m, n]``) or
    ``b [n, kp]`` (the wgrad: ``out[g] = a[:, cols of g] @ b[:, cols of g].T``, ``out [G, m, n]``, groups along kp);
    ``offs`` int32 ``[G]`` group ends on the device (non-decreasing, at most the grouped length). Returns ``out`` as
    a CuPy uint16 view of the tensor torch allocated (its rows may be padded to 16 bytes). No host
    synchronisation; queued on the current stream. Call inside :class:`on_cupy_stream`."""
    out = torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)
    return view_torch_cuda(out, "uint16")
