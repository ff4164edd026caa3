"""Device arrays from other libraries: DLPack import into CuPy (the only place mxrt creates a CuPy array from a
foreign one). No copy is made; a producer on another device type is refused by CuPy with its own message."""

from __future__ import annotations

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
