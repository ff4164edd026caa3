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


class UnsupportedArchError(MxrtError, RuntimeError):
    """The requested backend or target has no kernels for this op."""


class CompileError(MxrtError, RuntimeError):
    """A kernel failed to compile; the message carries the log, options and dumped source path."""


def fail(cls: type[MxrtError], op: str, arg: str, got: object, expected: str) -> MxrtError:
    """Build an error in the house format: ``op: argument 'arg' is <got>, expected <expected>``."""
    return cls(f"{op}: argument '{arg}' is {got}, expected {expected}")


class UnknownNameError(MxrtError, ValueError):
    """A name (format, layout, scale mode, backend, dtype name, ...) that mxrt does not know."""
