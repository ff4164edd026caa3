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

:class:`PreparedRoute` is the route of one call signature with everything decided (issue 11, host cost): prepared
launches, workspace shapes, the result's copy, so that a call allocates three torch tensors, queues four launches,
one memset, ``torch._grouped_mm`` and at most one copy, and views nothing through CuPy unless the caller wants a
CuPy result. ``DEVICE_TYPE`` and :func:`_raw_stream` are the seams the CPU tests move onto CPU torch.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from functools import lru_cache
from typing import Any

from .arrays import view_torch_cuda

#: torch's device type of the route's tensors (the CPU tests set "cpu" to walk the route on CPU torch)
DEVICE_TYPE = "cuda"


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


def _raw_stream(torch: Any, dev: int) -> int:
    """torch's current CUDA stream on device ``dev`` as a handle (``torch._C._cuda_getCurrentRawStream``: ~0.2 us;
    the public ``torch.cuda.current_stream`` builds a Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(dev) if raw is not None else torch.cuda.current_stream(dev).cuda_stream


class on_cupy_stream:
    """Context: torch's current stream is CuPy's current stream (a ``torch.cuda.ExternalStream`` of it unless it
    already is); ``with on_cupy_stream() as torch:`` gives the torch module."""

    def __enter__(self) -> Any:
        import cupy
        import torch

        ptr = cupy.cuda.get_current_stream().ptr
        dev = cupy.cuda.Device().id
        cur = _raw_stream(torch, dev)
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
    t = torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=DEVICE_TYPE)
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


class PreparedRoute:
    """The route of one call signature with every decision made (:func:`mxrt.ops.grouped_gemm_torch.prepare`): the
    prepared launches ``(dequantise a, dequantise b, group ends, gated fallback)`` (:func:`mxrt.runtime.launch.
    prepare`) with their trailing scalars, the workspace shapes and the result's shape.

    A call (:meth:`__call__`) takes raw device pointers and queues everything on CuPy's current stream (torch's work
    too: directly where torch's current stream is that stream, else under :class:`on_cupy_stream`): three
    ``torch.empty`` (the two bf16 operands, and the int32 group ends with the gate word after them), a memset of the
    gate word, the two dequantisations, the group-ends kernel, ``torch._grouped_mm``, one device copy into ``out``
    (or into a C-contiguous result where torch padded the rows of its own), and the fallback, which recomputes
    everything where the gate is raised. Call :meth:`usable` first on every call (the launch route, the current
    device, no CUDA-graph capture)."""

    __slots__ = (
        "_a_shape", "_b_shape", "_cupy", "_dev", "_g", "_launches", "_n", "_out_shape", "_rows", "_split", "_tdev",
        "_torch", "_values", "kind",
    )  # fmt: skip

    def __init__(
        self,
        launches: tuple[Any, Any, Any, Any],
        values: tuple[tuple[int, ...], ...],
        a_shape: tuple[int, ...],
        b_shape: tuple[int, ...],
        num_groups: int,
        out_shape: tuple[int, ...],
        kind: str,
    ) -> None:
        import cupy
        import torch

        self._launches, self._values = launches, values
        self._a_shape, self._b_shape, self._g, self._out_shape = a_shape, b_shape, num_groups, out_shape
        self._n, self._rows = out_shape[-1], math.prod(out_shape[:-1])
        self.kind = kind  # "lens" (forward / dgrad) or "wgrad"
        self._split = kind == "lens"  # the forward's group-ends kernel also checks the split (gate bit 2)
        self._torch, self._cupy = torch, cupy
        self._dev = cupy.cuda.Device().id
        self._tdev = torch.device(DEVICE_TYPE, self._dev) if DEVICE_TYPE == "cuda" else torch.device(DEVICE_TYPE)

    def usable(self) -> bool:
        """The launch route still packs parameters itself, the current device is the plan's, and CuPy's stream is
        not capturing a CUDA graph (the route steps aside there)."""
        if not self._launches[0].usable():
            return False
        rt = self._cupy.cuda.runtime
        return not rt.streamIsCapturing(self._cupy.cuda.get_current_stream().ptr)

    def __call__(self, a: int, sa: int, b: int, sb: int, lens: int, out: int | None) -> Any:
        """Queue the route: operand codes / scales ``a, sa, b, sb``, group lengths ``lens``, and ``out`` (the
        C-contiguous result buffer, or None: a new torch bfloat16 tensor, C-contiguous, is returned)."""
        stream = self._cupy.cuda.get_current_stream().ptr
        if _raw_stream(self._torch, self._dev) == stream:
            return self._run(a, sa, b, sb, lens, out, stream)
        with on_cupy_stream():  # torch's current stream differs: torch allocates and queues on CuPy's
            return self._run(a, sa, b, sb, lens, out, stream)

    def _run(self, a: int, sa: int, b: int, sb: int, lens: int, out: int | None, stream: int) -> Any:
        torch, dev, g = self._torch, self._tdev, self._g
        rt = self._cupy.cuda.runtime
        pa, pb, po, pf = self._launches
        va, vb, vo, vf = self._values
        # torch's caching allocator aligns every block to 512 bytes: the dequantisers' vector stores hold
        ta = torch.empty(self._a_shape, dtype=torch.bfloat16, device=dev)
        tb = torch.empty(self._b_shape, dtype=torch.bfloat16, device=dev)
        to = torch.empty(g + 1, dtype=torch.int32, device=dev)  # the group ends, then the gate word
        offs = to.data_ptr()
        gate = offs + 4 * g
        rt.memsetAsync(gate, 0, 4, stream)
        pa(a, sa, ta.data_ptr(), gate, *va)
        pb(b, sb, tb.data_ptr(), gate, *vb)
        po(lens, offs, gate if self._split else 0, *vo)
        res = torch._grouped_mm(ta, tb.transpose(-2, -1), offs=to.narrow(0, 0, g))
        if out is not None:
            self._copy(out, res, stream)
            res = None
        elif res.stride(-2) != self._n:  # torch pads rows of a width that is not a multiple of 8: C-contiguous
            dense = torch.empty(self._out_shape, dtype=torch.bfloat16, device=dev)
            self._copy(dense.data_ptr(), res, stream)
            res = dense
        pf(a, sa, b, sb, out if out is not None else res.data_ptr(), lens, *vf, gate)
        return res

    def _copy(self, dst: int, res: Any, stream: int) -> None:
        """``res`` (rows of ``n`` bf16 at torch's row stride) into the C-contiguous rows at ``dst``: one device
        copy, 2-D where torch padded the rows (one per group should a 3-D result not stride its groups evenly)."""
        rt = self._cupy.cuda.runtime
        n, ld, d2d = self._n, res.stride(-2), rt.memcpyDeviceToDevice
        src = res.data_ptr()
        if res.dim() == 3 and res.stride(0) != res.shape[1] * ld:
            h = res.shape[1]
            runs = [(src + 2 * i * res.stride(0), dst + 2 * i * h * n, h) for i in range(res.shape[0])]
        else:
            runs = [(src, dst, self._rows)]
        for s, d, h in runs:
            if ld == n:
                rt.memcpyAsync(d, s, 2 * h * n, d2d, stream)
            else:
                rt.memcpy2DAsync(d, 2 * n, s, 2 * ld, 2 * n, h, d2d, stream)
