"""The only layer that imports cupy (or hip). It imports without cupy: cupy is imported inside the functions
that need a device, and :func:`device_available` answers False when cupy or a device is missing."""

from __future__ import annotations

from functools import lru_cache

from .._kinds import is_device_array
from .alloc import DebugSession, debug, empty, zeros
from .arch import Arch, get_arch, normalize_target
from .arrays import from_dlpack
from .compiler import build, clear_cache, compile_options, compile_times
from .graph_memory import graph_memory_bytes, release_graph_memory
from .kernel_spec import Defines, KernelSpec, defines
from .launch import LaunchConfig, launch
from .source import inlined_source, kernels_src_dir, stamped_source


@lru_cache(maxsize=1)
def device_available() -> bool:
    """True when cupy imports and sees at least one GPU."""
    try:
        import cupy
    except ImportError:
        return False
    try:
        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # CUDARuntimeError / HIP errors when no driver or device is present
        return False


__all__ = [
    "Arch",
    "DebugSession",
    "Defines",
    "KernelSpec",
    "LaunchConfig",
    "build",
    "clear_cache",
    "compile_options",
    "compile_times",
    "debug",
    "defines",
    "device_available",
    "empty",
    "from_dlpack",
    "get_arch",
    "graph_memory_bytes",
    "inlined_source",
    "is_device_array",
    "kernels_src_dir",
    "launch",
    "normalize_target",
    "release_graph_memory",
    "stamped_source",
    "zeros",
]
