"""Every environment variable mxrt reads lives here (and is listed in the README)."""

from __future__ import annotations

import os

#: ``MXRT_BACKEND``: what ``backend="auto"`` resolves to. ``auto`` (default) picks a GPU when mxrt has
#: kernels for the op on the current device, numpy otherwise; ``numpy`` forces the reference everywhere.
ENV_BACKEND = "MXRT_BACKEND"


def default_backend() -> str:
    return os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"
