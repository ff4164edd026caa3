"""Device allocation for every op's outputs and workspaces, and the public test hook :func:`debug`.

Every op allocates through :func:`empty` (and :func:`zeros` where a buffer must start zero), and every kernel
launch goes through :func:`mxrt.runtime.launch`. Inside ``with debug(...)`` both change behaviour::

    with mxrt.runtime.debug(poison=0xA5, sync_after_launch=True) as dbg:
        q = mxrt.quantize_mx(x_on_gpu)   # outputs start as 0xA5 bytes; each launch is synchronised and checked
    dbg.launches                         # [(op, symbol, grid, block), ...] of every launch inside the block

``poison``: :func:`empty` fills each new buffer with this byte before any kernel runs, so a byte the kernel fails
to write shows up (0xFF is NaN in fp32, fp16 and bf16). ``sync_after_launch``: after each launch, synchronise the
stream and the device, so an asynchronous fault raises in the op (and the test) that caused it. Both default to
off, and ``with debug():`` inside an outer ``debug(...)`` turns them off again, e.g. around a CUDA-graph capture,
which needs real allocations and no synchronisation. The settings are per thread / context (a ContextVar).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..errors import DtypeError


@dataclass
class DebugSession:
    """The settings of one ``with debug(...)`` block and what it saw."""

    poison: int | None = None
    sync_after_launch: bool = False
    #: (op, symbol, grid, block) of every launch inside the block
    launches: list[tuple[str, str, tuple[int, int, int], tuple[int, int, int]]] = field(default_factory=list)


_SESSION: ContextVar[DebugSession | None] = ContextVar("mxrt_debug_session", default=None)


def current_debug() -> DebugSession | None:
    """The innermost active :func:`debug` session, or None."""
    return _SESSION.get()


@contextmanager
def debug(*, poison: int | None = None, sync_after_launch: bool = False) -> Iterator[DebugSession]:
    """Test hook: poison every buffer :func:`empty` returns with the byte ``poison`` (0..255) and/or synchronise
    and check after every kernel launch, inside the ``with`` block (module docstring)."""
    if poison is not None and (isinstance(poison, bool) or not isinstance(poison, int) or not 0 <= poison <= 255):
        raise DtypeError(f"mxrt.runtime.debug: argument 'poison' is {poison!r}, expected a byte 0..255 or None")
    session = DebugSession(poison=poison, sync_after_launch=bool(sync_after_launch))
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def empty(shape: tuple[int, ...] | int, dtype: Any = "uint8") -> Any:
    """A new CuPy array for an op's output or workspace (CuPy's pool, on the current stream); poisoned inside
    ``debug(poison=...)``."""
    import cupy

    out = cupy.empty(shape, dtype=dtype)
    session = _SESSION.get()
    if session is not None and session.poison is not None and out.size:
        out.reshape(-1).view(cupy.uint8).fill(session.poison)
    return out


def zeros(shape: tuple[int, ...] | int, dtype: Any = "uint8") -> Any:
    """A new zeroed CuPy array (accumulators, counters): never poisoned."""
    import cupy

    return cupy.zeros(shape, dtype=dtype)


def after_launch(op: str, kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
    """Called by :func:`mxrt.runtime.launch` after every launch: records it, and synchronises and checks inside
    ``debug(sync_after_launch=True)``."""
    session = _SESSION.get()
    if session is None:
        return
    session.launches.append((op, str(getattr(kernel, "name", kernel)), tuple(grid), tuple(block)))
    if session.sync_after_launch:
        import cupy

        cupy.cuda.get_current_stream().synchronize()  # raises on an asynchronous fault of this launch
        cupy.cuda.runtime.deviceSynchronize()


__all__ = ["DebugSession", "after_launch", "current_debug", "debug", "empty", "zeros"]
