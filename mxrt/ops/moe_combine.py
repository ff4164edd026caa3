"""GPU twin of :func:`mxrt.moe_combine` (kernels_src/moe/moe_combine.hip): the weighted top-k sum of MoE expert
outputs back into token order, ``out[t] = bf16(sum_j w[t, j] * y[src[t, j]])``, bit-identical to the numpy twin
:func:`mxrt.layouts.ep.moe_combine` (``ftz=True`` on CUDA: NVRTC flushes fp32 subnormals).

One kernel reads every pair's bf16 row once (16-byte vectors when ``n % 8 == 0`` and the rows are 16-byte aligned,
one bf16 per access otherwise), multiplies and sums in fp32 in slot order and writes ``[T, n]`` bf16 once: about
``2 * n * (T * k + T)`` bytes, against the ~5x of a gather to pair order plus an fp32 ``[T, k, n]`` product and sum.

The caller's contract (not read back: the op never synchronises with the host and can be captured in a CUDA
graph): ``src`` values lie in ``[0, R)``. A value outside is never dereferenced; that pair reads as a NaN row, so
the token's output row is NaN. CuPy in -> CuPy out on CuPy's current stream (``y``'s bf16 dtype, or uint16 bits);
numpy in -> numpy out (uploaded and downloaded here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import is_device_array
from ..errors import DtypeError, LayoutError
from ..layouts._check import cdiv, check_int32_limit
from ..layouts.ep import BF16, check_combine
from ..runtime import alloc
from ..runtime.arch import get_arch
from ..runtime.compiler import build
from ..runtime.kernel_spec import defines
from ..runtime.launch import LaunchConfig, launch
from . import moe_kernels
from .kernels import select

OP = "moe_combine"


def combine_config(items: int) -> LaunchConfig:
    """``items`` (token, vector) work items: one per thread, at most ``COMBINE_MAX_CTAS`` CTAs (grid-stride)."""
    threads = moe_kernels.COMBINE_THREADS
    return LaunchConfig(grid=(max(1, min(cdiv(items, threads), moe_kernels.COMBINE_MAX_CTAS)), 1, 1),
                        block=(threads, 1, 1))  # fmt: skip


def _row_stride(y: Any) -> int:
    """``y``'s row stride in elements; a LayoutError unless the rows are contiguous along n."""
    s0, s1 = (int(v) for v in y.strides)
    r, n = (int(v) for v in y.shape)
    if r == 0 or n == 0:
        return n  # no element is read (CuPy and DLPack give empty arrays any strides, e.g. (0, 0))
    if n > 1 and s1 != 2:
        raise LayoutError(
            f"{OP}: argument 'y' has strides {tuple(y.strides)} for shape {tuple(y.shape)}, expected rows contiguous "
            "along n (stride 2 bytes; pass cupy.ascontiguousarray(y))"
        )
    if r > 1 and (s0 < 0 or s0 % 2 or s0 < 2 * n):
        raise LayoutError(
            f"{OP}: argument 'y' has a row stride of {s0} bytes, expected a non-negative multiple of 2 that is at "
            f"least n * 2 = {2 * n} (non-overlapping rows)"
        )
    return s0 // 2 if r > 1 else n


def _contiguous(op: str, name: str, a: Any) -> None:
    if not a.flags.c_contiguous:
        raise LayoutError(
            f"{op}: argument '{name}' has strides {tuple(a.strides)} for shape {tuple(a.shape)}, expected a "
            f"C-contiguous array (the kernel reads the flat index t * k + j; pass cupy.ascontiguousarray({name}))"
        )


def moe_combine_gpu(y: Any, src: Any, topk_weights: Any) -> Any:
    """GPU twin of :func:`mxrt.moe_combine` (same arguments): CuPy arrays (or numpy, uploaded here) -> ``out
    [T, n]`` bf16 of ``y``'s dtype (CuPy bfloat16 or uint16 bits; numpy ml_dtypes bfloat16)."""
    import cupy

    r, n, t, k = check_combine(y, src, topk_weights, OP)
    check_int32_limit(k, OP, "k = src.shape[1]")
    device_in = is_device_array(y)
    if device_in:
        for name, a in (("src", src), ("topk_weights", topk_weights)):
            if not is_device_array(a):
                raise DtypeError(
                    f"{OP}: argument '{name}' is a {type(a).__name__} while y is a CuPy array; pass "
                    f"cupy.asarray({name}) (mxrt makes no implicit host-to-device copy)"
                )
        dy, ds, dw = y, src, topk_weights
    else:
        for name, a in (("y", y), ("src", src), ("topk_weights", topk_weights)):
            if not isinstance(a, np.ndarray):
                raise DtypeError(f"{OP}: argument '{name}' is a {type(a).__name__}, expected a numpy or CuPy array")
        dy = cupy.asarray(np.ascontiguousarray(y).view(np.uint16))
        ds, dw = cupy.asarray(np.ascontiguousarray(src)), cupy.asarray(np.ascontiguousarray(topk_weights))
    _contiguous(OP, "src", ds)
    _contiguous(OP, "topk_weights", dw)
    ldy = _row_stride(dy)
    with cupy.cuda.Device(dy.data.device_id):  # y's GPU (e.g. a torchrun rank's), whatever device is current
        out = alloc.empty((t, n), dy.dtype)
        if t and n:
            run_moe_combine(dy, ds, dw, out, r, t, k, n, ldy)
    if not device_in:
        return out.get().view(BF16)
    return out


def run_moe_combine(y: Any, src: Any, w: Any, out: Any, r: int, t: int, k: int, n: int, ldy: int) -> None:
    """Launch for validated device arguments (``out`` allocated by the caller, ``t, n >= 1``)."""
    arch = get_arch()
    vec = int(n % 8 == 0 and ldy % 8 == 0 and y.data.ptr % 16 == 0 and out.data.ptr % 16 == 0)
    d = defines(IDX_BYTES=src.dtype.itemsize, THREADS=moe_kernels.COMBINE_THREADS, VEC=vec)
    kernel = build(select(OP, arch.target), d, arch)
    cfg = combine_config(t * (n // 8 if vec else n))
    i64 = np.int64
    launch(OP, kernel, cfg, (y, src, w, out, i64(r), i64(t), np.int32(k), i64(n), i64(ldy)))


def moe_combine_unsupported(y: Any, src: Any = None, topk_weights: Any = None) -> str | None:
    """The kernel covers every validated call (``backend="auto"`` runs it when a GPU is present)."""
    return None
