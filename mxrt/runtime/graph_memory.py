"""Device memory that a captured CUDA graph still uses, held until the caller says the graphs are gone.

An op allocates its workspaces (the bf16 operands of ``sm90_cublas``, split-K slices, gate words, CuPy's own
temporaries) from CuPy's memory pool and drops them when it returns. Eagerly that is right: the next allocation on
the stream runs after the op. Inside a stream capture it is not: the graph replays into those addresses later, while
the pool may have handed them to other arrays in the meantime, so a replay would overwrite them (and read theirs).
CuPy's pool does not know about graphs; torch keeps a private pool per graph for the same reason.

So every public GPU op runs under :func:`graph_safe`: when CuPy's current stream is capturing, its allocations come
from the same allocator but are also held here, the outputs included (a graph writes them at every replay, whether
or not the caller kept them). :func:`release_graph_memory` drops them; call it once the graphs that captured mxrt
ops are destroyed and their last replays have finished. :func:`graph_memory_bytes` says how much is held. Eager
calls pay one check of the current stream (the legacy default stream cannot capture: no query at all there).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_HELD: list[Any] = []  # MemoryPointers allocated while a stream was capturing
_LOCK = threading.Lock()
_STATE = threading.local()  # .active: inside a holding op of this thread (nested public calls hold once)


def _capturing(cupy: Any) -> bool:
    cuda = getattr(cupy, "cuda", None)  # a stand-in module (tests) may have no stream API: nothing captures there
    if cuda is None or not hasattr(cuda, "get_current_stream"):
        return False
    ptr = cuda.get_current_stream().ptr
    return ptr != 0 and cuda.runtime.streamIsCapturing(ptr) != 0


def graph_safe(fn: F) -> F:
    """Decorator of the public GPU ops: run ``fn`` with its allocations held while CuPy's current stream captures
    (module docstring); otherwise call it as it is."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cupy = sys.modules.get("cupy")
        if cupy is None or getattr(_STATE, "active", False) or not _capturing(cupy):
            return fn(*args, **kwargs)
        inner = cupy.cuda.get_allocator()

        def holding(size: int) -> Any:
            mem = inner(size)
            with _LOCK:
                _HELD.append(mem)
            return mem

        _STATE.active = True
        try:
            with cupy.cuda.using_allocator(holding):
                return fn(*args, **kwargs)
        finally:
            _STATE.active = False

    return wrapper  # type: ignore[return-value]


def graph_memory_bytes() -> int:
    """Bytes of device memory held for captured graphs (:func:`graph_safe`)."""
    with _LOCK:
        return sum(int(getattr(m, "mem", m).size) for m in _HELD)


def release_graph_memory() -> int:
    """Give the memory held for captured graphs back to CuPy's pool; returns its size in bytes. Only after every
    graph that captured an mxrt op is destroyed (or will never replay again): a later replay would write memory
    that other arrays may own by then."""
    with _LOCK:
        held = list(_HELD)
        _HELD.clear()
    return sum(int(getattr(m, "mem", m).size) for m in held)


__all__ = ["graph_memory_bytes", "graph_safe", "release_graph_memory"]
