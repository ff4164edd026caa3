"""Typed errors. Every subclass also inherits the matching builtin, so ``except ValueError`` keeps working.

Messages name the op, the argument, what it got and what was expected::

    quantize_mx: argument 'block_size' is 24, expected a power of two >= 1
"""

from __future__ import annotations


class MxrtError(Exception):
    """Base class of every error mxrt raises on purpose."""


class ShapeError(MxrtError, ValueError):
    """An argument has the wrong shape, size or an out-of-range value."""


class DtypeError(MxrtError, TypeError):
    """An argument has the wrong dtype or type."""


class LayoutError(MxrtError, ValueError):
    """An unknown layout name, or data that does not fit the layout."""


class UnknownNameError(MxrtError, ValueError):
    """An argument names something mxrt does not know (a format, a scale mode, a layout, a dtype name).

    The message lists the names that are known. Unknown *layout* names raise :class:`UnknownLayoutError`, which is
    both this and a :class:`LayoutError`.
    """


class UnknownLayoutError(UnknownNameError, LayoutError):
    """An unknown scale or weight layout name (``except LayoutError`` keeps catching it)."""


class UnsupportedArchError(MxrtError, RuntimeError):
    """The requested backend or target has no kernels for this op."""


class CompileError(MxrtError, RuntimeError):
    """A kernel failed to compile; the message carries the log, options and dumped source path."""


def fail(cls: type[MxrtError], op: str, arg: str, got: object, expected: str) -> MxrtError:
    """Build an error in the house format: ``op: argument 'arg' is <got>, expected <expected>``."""
    return cls(f"{op}: argument '{arg}' is {got}, expected {expected}")


#: mxrt's size limit: every element count, index and size argument (block size, alignment, rows, capacity) an op
#: reads or allocates must be at most 2^31-1, because the kernels index with int32. Larger sizes raise
#: :class:`ShapeError` naming the limit before anything is allocated.
SIZE_LIMIT = 2**31 - 1  # 0x7FFFFFFF


def check_size_limit(value: int, op: str, what: str) -> int:
    """Return ``value``, or raise :class:`ShapeError` when it is past :data:`SIZE_LIMIT`."""
    if value > SIZE_LIMIT:
        raise ShapeError(
            f"{op}: {what} is {value}, expected <= 2^31-1 = {SIZE_LIMIT} (mxrt's size limit: the kernels index "
            "with int32)"
        )
    return value


def check_int(value: object, op: str, arg: str, *, minimum: int | None = None, limit: bool = True) -> int:
    """A Python or numpy integer (not bool), optionally ``>= minimum`` and (by default) within :data:`SIZE_LIMIT`;
    returns a Python int."""
    import numpy as np  # errors.py stays importable alone; numpy is a hard dependency of every other module

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise DtypeError(f"{op}: argument '{arg}' is {value!r}, expected an int")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ShapeError(f"{op}: argument '{arg}' is {v}, expected an int >= {minimum}")
    if limit:
        check_size_limit(v, op, f"argument '{arg}'")
    return v
