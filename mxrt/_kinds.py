"""What kind of array an object is, told by its type's module: imports no array library."""

from __future__ import annotations

import numpy as np

#: Array kinds mxrt tells apart. "dlpack" is any other object with ``__dlpack__``; "other" is everything else
#: (lists, scalars), which the numpy twins read with ``np.asarray``.
KINDS = ("numpy", "cupy", "torch", "jax", "dlpack", "other")


def array_kind(x: object) -> str:
    """One of :data:`KINDS` for ``x``, without importing cupy, torch or jax."""
    if isinstance(x, np.ndarray):
        return "numpy"
    root = type(x).__module__.split(".", 1)[0]
    if root == "cupy":
        return "cupy"
    if root == "torch":
        return "torch"
    if root in ("jax", "jaxlib"):
        return "jax"
    if hasattr(x, "__dlpack__"):
        return "dlpack"
    return "other"


def is_device_array(x: object) -> bool:
    """True for a CuPy array (the native device array of mxrt's GPU ops)."""
    return type(x).__module__.split(".", 1)[0] == "cupy"


_DTYPE_NAMES: dict = {}


def dtype_name(dt: object) -> str:
    """``str(dt)`` memoised per dtype (numpy 2 computes dtype names in Python: a few microseconds each, which
    the small-problem dispatch pays several times per call)."""
    try:
        return _DTYPE_NAMES[dt]
    except KeyError:
        name = _DTYPE_NAMES[dt] = str(dt)
        return name
    except TypeError:  # unhashable stand-ins
        return str(dt)
