"""cuBLAS, the library CuPy already loads for its own matmul, called through ctypes: one bf16 GEMM with fp32
accumulation, ``out[m, n] = a[m, k] @ b[n, k].T`` in row-major terms, on CuPy's current stream. Imports without
cupy; :func:`available` says whether a CUDA device and the library are present.

Why not CuPy's bindings: they refuse every call while a stream captures (``NotImplementedError: calling cuBLAS API
during stream capture``, measured session 10), and mxrt's GPU ops must be CUDA-graph capturable. cuBLAS itself
supports capture once a handle has a fixed workspace (it then never allocates): mxrt keeps one handle per device,
with ``WORKSPACE_BYTES`` from CuPy's pool set as its workspace, and sets the handle's stream on every call.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from functools import lru_cache
from typing import Any

import numpy as np

CUDA_R_32F, CUDA_R_16BF = 0, 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
OP_N, OP_T = 0, 1
WORKSPACE_BYTES = 32 * 2**20

_OUT_TYPES = {"float32": CUDA_R_32F, "bfloat16": CUDA_R_16BF}
_ONE = np.ones(1, np.float32)
_ZERO = np.zeros(1, np.float32)
_HANDLES: dict[int, tuple[ctypes.c_void_p, Any]] = {}  # device -> (handle, its workspace buffer)
_SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL | None:
    """libcublas: the copy CuPy loaded (found by soname once CuPy's cublas module is imported), else the pip wheel's
    under ``nvidia/*/lib``, else the system's. None when absent."""
    try:
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (makes CuPy load its libcublas)
    except Exception:  # older / newer CuPy layouts, or CuPy without cuBLAS: look for the library itself
        pass
    candidates = list(_SONAMES)
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libcublas.so*")), reverse=True)
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
            lib.cublasGemmEx  # noqa: B018  (the symbol this module needs)
        except (OSError, AttributeError):
            continue
        v = ctypes.c_void_p
        i = ctypes.c_int
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(v)]
        lib.cublasSetStream_v2.argtypes = [v, v]
        lib.cublasSetWorkspace_v2.argtypes = [v, v, ctypes.c_size_t]
        lib.cublasGemmEx.argtypes = [v, i, i, i, i, i, v, v, i, i, v, i, i, v, v, i, i, i, i]
        return lib
    return None


def available() -> bool:
    """True on CUDA (not ROCm) with CuPy and a loadable libcublas."""
    try:
        import cupy
    except ImportError:
        return False
    if getattr(cupy.cuda.runtime, "is_hip", False):
        return False
    return _lib() is not None


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"mxrt.runtime.cublas: {what} returned cuBLAS status {status}")


def _handle() -> ctypes.c_void_p:
    """This device's handle, created with its fixed workspace on first use (never during a capture: the first
    call of an op runs before any capture of it, as every op's warm-up does)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    hit = _HANDLES.get(dev)
    if hit is None:
        lib = _lib()
        h = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        ws = cupy.empty(WORKSPACE_BYTES, np.uint8)
        _check(lib.cublasSetWorkspace_v2(h, ctypes.c_void_p(ws.data.ptr), WORKSPACE_BYTES), "cublasSetWorkspace")
        hit = _HANDLES[dev] = (h, ws)
    return hit[0]


def gemm_bf16_nt(
    m: int, n: int, k: int, a_ptr: int, lda: int, b_ptr: int, ldb: int, c_ptr: int, ldc: int, out_dtype: str
) -> None:
    """``C[m, n] = A[m, k] @ B[n, k].T`` (row-major; leading dimensions in elements): bf16 A and B, fp32
    accumulation, C float32 or bfloat16, on CuPy's current stream. Capturable."""
    import cupy

    lib = _lib()
    h = _handle()
    _check(lib.cublasSetStream_v2(h, ctypes.c_void_p(cupy.cuda.get_current_stream().ptr)), "cublasSetStream")
    # column-major: C^T [n, m] = B [n, k] (stored k x n, transposed) @ A^T (stored k x m)
    vp = ctypes.c_void_p
    status = lib.cublasGemmEx(
        h, OP_T, OP_N, n, m, k,
        vp(_ONE.ctypes.data), vp(b_ptr), CUDA_R_16BF, ldb, vp(a_ptr), CUDA_R_16BF, lda,
        vp(_ZERO.ctypes.data), vp(c_ptr), _OUT_TYPES[out_dtype], ldc,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT,
    )  # fmt: skip
    _check(status, "cublasGemmEx")
