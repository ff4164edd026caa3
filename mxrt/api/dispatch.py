"""Backend choice for the public ops: ``"numpy"`` (the exact reference), ``"gpu"``, or ``"auto"``.

A device input (CuPy, a CUDA torch tensor, a GPU JAX array) always runs on the GPU: mxrt never moves data
between host and device behind the caller's back. A host input runs on the GPU under ``backend="gpu"`` (or
``"auto"`` with a usable device and a kernel that covers the arguments; ``MXRT_BACKEND`` sets what ``"auto"``
means) and comes back on the host.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import runtime
from ..config import ENV_BACKEND, default_backend
from ..errors import DtypeError, UnknownNameError, UnsupportedArchError

BACKENDS = ("auto", "numpy", "gpu")

#: The public ops that have GPU kernels (each defined in mxrt/api/, calling its mxrt/ops/ twin explicitly).
GPU_OPS = (
    "dequantize_mx",
    "gemm_mx",
    "grouped_gemm_mx",
    "grouped_gemm_mx_wgrad",
    "moe_align_block_size",
    "moe_combine",
    "moe_gemm_mx",
    "preshuffle_scales",
    "quantize_mx",
    "quantize_mx_dual",
    "quantize_mx_dual_grouped",
    "quantize_mx_grouped",
    "unshuffle_scales",
)


def _no_device(op: str) -> UnsupportedArchError:
    return UnsupportedArchError(
        f"{op}: backend 'gpu' was requested, but CuPy or a GPU is not available on this machine "
        "(pip install \"mxrt[cuda]\" where a GPU is present); use backend='numpy' or 'auto'"
    )


def _env_backend(op: str) -> str:
    env = default_backend()
    if env not in BACKENDS:
        raise UnknownNameError(f"{op}: environment variable {ENV_BACKEND} is {env!r}, expected one of {list(BACKENDS)}")
    return env


def check_backend(op: str, backend: object) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise UnknownNameError(f"{op}: argument 'backend' is {backend!r}, expected one of {list(BACKENDS)}")
    return backend


def use_gpu(op: str, backend: object, device_in: bool, unsupported: Callable[[], str | None]) -> bool:
    """True when ``op`` runs its GPU twin; False for the numpy twin; a typed error when neither may run.

    ``unsupported()`` returns why the kernels do not cover the (already validated) arguments, or None.
    """
    backend = check_backend(op, backend)
    if device_in:
        if backend == "numpy":
            raise DtypeError(
                f"{op}: the input lives on the GPU but backend='numpy'; copy it to the host first (.get() / .cpu())"
            )
        why = unsupported()
        if why is not None:
            raise UnsupportedArchError(f"{op}: {why}")
        return True
    if backend == "auto":
        backend = _env_backend(op)
        if backend == "auto":
            return runtime.device_available() and unsupported() is None
    if backend == "numpy":
        return False
    if not runtime.device_available():
        raise _no_device(op)
    why = unsupported()
    if why is not None:
        raise UnsupportedArchError(f"{op}: {why}")
    return True


def host_only(op: str, backend: object, device_in: bool) -> None:
    """For ops with only a numpy twin: refuse device inputs and ``backend='gpu'`` with a typed error."""
    backend = check_backend(op, backend)
    if device_in:
        raise DtypeError(
            f"{op}: the input lives on the GPU, but {op} runs on the host only (it has no GPU kernel); copy it to "
            "the host first (.get() / .cpu())"
        )
    if backend == "gpu":
        raise UnsupportedArchError(f"{op}: backend 'gpu' was requested, but {op} has no GPU kernel; use 'auto'")
