"""Backend resolution shared by every op: ``"numpy"`` (the exact reference), ``"gpu"``, or ``"auto"``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import ENV_BACKEND, default_backend
from .errors import DtypeError, ShapeError, UnsupportedArchError

BACKENDS = ("auto", "numpy", "gpu")


@dataclass(frozen=True)
class GpuOp:
    """A GPU twin of a numpy op: ``run`` takes the numpy op's arguments; ``unsupported`` returns why these
    arguments have no kernel (block size, axis, ...) or None."""

    run: Callable[..., Any]
    unsupported: Callable[..., str | None]


#: Ops that have GPU kernels, registered by :mod:`mxrt.ops` when it is imported (see :func:`_load_gpu_ops`).
GPU_OPS: dict[str, GpuOp] = {}
_loaded = False


def register_gpu_op(name: str, op: GpuOp) -> None:
    GPU_OPS[name] = op


def _load_gpu_ops() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import ops  # noqa: F401  registers into GPU_OPS; imports without cupy


def is_device_array(x: object) -> bool:
    """True for a CuPy array, without importing cupy."""
    return type(x).__module__.split(".", 1)[0] == "cupy"


def gpu_available(op: str) -> bool:
    """True when ``op`` has a GPU kernel and a usable device is present."""
    _load_gpu_ops()
    if op not in GPU_OPS:
        return False
    from .runtime import device_available  # the only layer that imports cupy

    return device_available()


def resolve_backend(op: str, backend: str) -> str:
    """Map a user's ``backend`` argument to ``"numpy"`` or ``"gpu"``, or raise a typed error."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ShapeError(f"{op}: argument 'backend' is {backend!r}, expected one of {BACKENDS}")
    if backend == "auto":
        env = default_backend()
        if env not in ("auto", "numpy", "gpu"):
            raise ShapeError(f"{op}: environment variable {ENV_BACKEND} is {env!r}, expected 'auto', 'numpy' or 'gpu'")
        if env == "numpy":
            return "numpy"
        if env == "gpu":
            backend = "gpu"
        else:
            return "gpu" if gpu_available(op) else "numpy"
    if backend == "numpy":
        return "numpy"
    if not gpu_available(op):
        raise UnsupportedArchError(
            f"{op}: backend 'gpu' was requested, but mxrt has no GPU kernel for {op} on this machine "
            f"(GPU ops: {sorted(GPU_OPS) or 'none yet'}); use backend='numpy' or 'auto'"
        )
    return "gpu"


def run_gpu(op: str, backend: str, x: Any, **kw: Any) -> Any:
    """Run ``op``'s GPU twin on ``x``, or return None when the numpy reference should run instead.

    A device (CuPy) array always runs on the GPU (never an implicit host transfer); a numpy array runs there
    when ``backend`` resolves to ``"gpu"``, and falls back to numpy under ``"auto"`` when the kernel does not
    cover the arguments.
    """
    device_in = is_device_array(x)
    if device_in:
        if backend == "numpy":
            raise DtypeError(
                f"{op}: argument 'x' is a {type(x).__name__} on the GPU, but backend='numpy'; pass x.get()"
            )
        resolve_backend(op, "gpu" if backend == "auto" else backend)
    elif resolve_backend(op, backend) != "gpu":
        return None
    gop = GPU_OPS[op]
    reason = gop.unsupported(x, **kw)
    if reason is not None:
        if backend == "auto" and not device_in:
            return None
        raise UnsupportedArchError(f"{op}: {reason}")
    return gop.run(x, **kw)
