"""Device arrays from other libraries: DLPack import into CuPy (the only place mxrt creates a CuPy array from a
foreign one). No copy is made; a producer on another device type is refused by CuPy with its own message."""

from __future__ import annotations

import sys
from typing import Any

from ..errors import UnsupportedArchError


def from_dlpack(x: Any) -> Any:
    """``cupy.from_dlpack(x)``: a CuPy array sharing ``x``'s device memory (torch CUDA tensors, JAX GPU arrays)."""
    try:
        import cupy
    except ImportError:
        raise UnsupportedArchError(
            f"a GPU array ({type(x).__name__}) was passed, but CuPy is not installed: mxrt's GPU ops need it "
            '(pip install "mxrt[cuda]")'
        ) from None
    return cupy.from_dlpack(x)


_TORCH_TO_NUMPY = {
    "torch.float32": "float32",
    "torch.float16": "float16",
    "torch.float64": "float64",
    "torch.int16": "int16",
    "torch.int32": "int32",
    "torch.int64": "int64",
    "torch.uint8": "uint8",
    "torch.int8": "int8",
}


def from_torch_cuda(t: Any) -> Any:
    """A CuPy view of a CUDA torch tensor built from its pointer (a few microseconds instead of a DLPack
    exchange), or None where the DLPack exchange is needed for ordering or the dtype: only when torch and CuPy
    both use the legacy default stream (then the producer's work is ordered before mxrt's launches without any
    event) and the dtype is a plain numeric one (bfloat16 / float8 arrive here as int16 / uint8 views)."""
    import cupy

    torch = sys.modules["torch"]
    dt = _TORCH_TO_NUMPY.get(str(t.dtype))
    if dt is None or cupy.cuda.get_current_stream().ptr != 0:
        return None
    if torch.cuda.current_stream(t.device).cuda_stream != 0:
        return None
    return view_torch_cuda(t, dt)


def view_torch_cuda(t: Any, dtype: Any) -> Any:
    """A CuPy array over CUDA torch tensor ``t``'s memory (its shape and strides, ``dtype`` of the same item size),
    holding ``t`` alive; no copy, no stream ordering (the caller's: :func:`from_torch_cuda`, or work queued on one
    stream as in :mod:`mxrt.runtime.torch_grouped`)."""
    import cupy

    itemsize = t.element_size()
    # the span from the first element to the last: sum of (size - 1) * stride over the dims, plus one element
    nbytes = (sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1) * itemsize if t.numel() else 0
    mem = cupy.cuda.UnownedMemory(t.data_ptr(), nbytes, t, t.device.index)
    ptr = cupy.cuda.MemoryPointer(mem, 0)
    strides = tuple(st * itemsize for st in t.stride())
    return cupy.ndarray(tuple(t.shape), dtype=dtype, memptr=ptr, strides=strides)


def torch_on_legacy_streams(torch: Any, device_index: int) -> bool:
    """True when CuPy's current stream and torch's current stream on ``device_index`` are both the legacy default
    stream: then work queued by torch before a call is ordered before mxrt's launches and mxrt's before torch's
    next work, without events (the condition :func:`from_torch_cuda` reads a tensor under). The small-call plans
    ask this on every call (``torch._C._cuda_getCurrentRawStream`` where torch has it: ~0.2 us, the public
    ``torch.cuda.current_stream`` builds a Stream object)."""
    global _STREAM_QUERIES
    cupy = sys.modules.get("cupy")
    q = _STREAM_QUERIES
    if q is None or q[0] is not torch or q[1] is not cupy:
        import cupy

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        q = _STREAM_QUERIES = (torch, cupy, cupy.cuda.get_current_stream, raw)
    if q[2]().ptr != 0:
        return False
    if q[3] is not None:
        return q[3](device_index) == 0
    return torch.cuda.current_stream(device_index).cuda_stream == 0


_STREAM_QUERIES: Any = None  # (torch, cupy, CuPy's current-stream query, torch's raw one or None)
