"""cuBLAS through CuPy's bindings (the library CuPy already loads for its own matmul): one bf16 GEMM with fp32
accumulation, ``out[m, n] = a[m, k] @ b[n, k].T`` in row-major terms, on CuPy's current stream. Imports without
cupy; :func:`available` says whether the bindings and a CUDA device are present.

Graph capture: cuBLAS may allocate its workspace on first use of a stream, which a capture forbids; every handle
gets a fixed workspace here (``WORKSPACE_BYTES`` from CuPy's pool, kept for the process) before its first GEMM.
"""

from __future__ import annotations

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
_WORKSPACES: dict[int, Any] = {}


@lru_cache(maxsize=1)
def _bindings() -> Any:
    try:
        from cupy_backends.cuda.libs import cublas  # CuPy 12-14
    except ImportError:
        try:
            from cupy.cuda import cublas  # older layouts
        except ImportError:
            return None
    return cublas if hasattr(cublas, "gemmEx") else None


def available() -> bool:
    """True on CUDA (not ROCm) when CuPy's cuBLAS bindings with ``gemmEx`` import."""
    try:
        import cupy
    except ImportError:
        return False
    if getattr(cupy.cuda.runtime, "is_hip", False):
        return False
    return _bindings() is not None


def _handle() -> int:
    import cupy

    cublas = _bindings()
    handle = cupy.cuda.device.get_cublas_handle()
    dev = cupy.cuda.runtime.getDevice()
    if dev not in _WORKSPACES and hasattr(cublas, "setWorkspace"):
        ws = cupy.empty(WORKSPACE_BYTES, np.uint8)
        cublas.setWorkspace(handle, ws.data.ptr, WORKSPACE_BYTES)
        _WORKSPACES[dev] = ws
    return handle


def gemm_bf16_nt(
    m: int, n: int, k: int, a_ptr: int, lda: int, b_ptr: int, ldb: int, c_ptr: int, ldc: int, out_dtype: str
) -> None:
    """``C[m, n] = A[m, k] @ B[n, k].T`` (row-major; leading dimensions in elements): bf16 A and B, fp32
    accumulation, C float32 or bfloat16, on CuPy's current stream (CuPy's binding sets the handle's stream)."""
    import cupy

    cublas = _bindings()
    handle = _handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    # column-major: C^T [n, m] = B [n, k] (stored k x n, transposed) @ A^T (stored k x m)
    cublas.gemmEx(
        handle, OP_T, OP_N, n, m, k,
        _ONE.ctypes.data, b_ptr, CUDA_R_16BF, ldb, a_ptr, CUDA_R_16BF, lda,
        _ZERO.ctypes.data, c_ptr, _OUT_TYPES[out_dtype], ldc,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT,
    )  # fmt: skip
