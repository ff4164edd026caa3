"""Backend resolution shared by every op: ``"numpy"`` (the exact reference), ``"gpu"``, or ``"auto"``."""

from __future__ import annotations

from .config import ENV_BACKEND, default_backend
from .errors import ShapeError, UnsupportedArchError

BACKENDS = ("auto", "numpy", "gpu")

#: Ops that have GPU kernels. The runtime (issue 4) registers into this set; until then every op is numpy.
GPU_OPS: set[str] = set()


def gpu_available(op: str) -> bool:
    """True when ``op`` has a GPU kernel and a usable device is present."""
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
