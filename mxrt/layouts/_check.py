"""Argument checks shared by the layout functions (house error format: op, argument, got, expected)."""

from __future__ import annotations

import numpy as np

from ..errors import DtypeError, ShapeError

#: Largest value a signed 32-bit index can hold; kernels that use int32 offsets/ids are limited by it.
INT32_MAX = 2**31 - 1  # 0x7FFFFFFF
#: Largest value an int64 offset can hold.
INT64_MAX = 2**63 - 1


def check_int(value: object, op: str, arg: str, *, minimum: int | None = None) -> int:
    """A Python or numpy integer (not bool), optionally ``>= minimum``; returns a Python int."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise DtypeError(f"{op}: argument '{arg}' is {value!r}, expected an int")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ShapeError(f"{op}: argument '{arg}' is {v}, expected an int >= {minimum}")
    return v


def check_int_array(x: object, op: str, arg: str, *, ndim: int | None = None) -> np.ndarray:
    """An ndarray (or nested list) of an integer dtype, optionally of rank ``ndim``; bool is rejected."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{op}: argument '{arg}' has dtype {a.dtype}, expected an integer dtype")
    if ndim is not None and a.ndim != ndim:
        raise ShapeError(f"{op}: argument '{arg}' has shape {a.shape}, expected a {ndim}-D array")
    return a


def check_group_lens(group_lens: object, op: str) -> np.ndarray:
    """1-D non-negative integer group lengths whose total fits int64; returned as int64."""
    a = check_int_array(group_lens, op, "group_lens", ndim=1)
    if a.size and a.dtype.kind == "u" and a.max() > INT64_MAX:
        raise ShapeError(f"{op}: argument 'group_lens' has a value {a.max()}, expected values <= 2^63-1")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        g = int(np.argmax(a < 0))
        raise ShapeError(f"{op}: argument 'group_lens' has group_lens[{g}] = {a[g]}, expected lengths >= 0")
    if a.size and int(a.max()) > INT64_MAX // a.size and sum(int(v) for v in a) > INT64_MAX:
        raise ShapeError(f"{op}: argument 'group_lens' sums past 2^63-1, expected a total that fits int64")
    return a


def check_int32_limit(value: int, op: str, what: str) -> None:
    """Raise when ``value`` (a count/offset a kernel stores as int32) exceeds 2^31-1."""
    if value > INT32_MAX:
        raise ShapeError(f"{op}: {what} is {value}, expected <= 2^31-1 = {INT32_MAX} (the kernels use int32 offsets)")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def align(a: int, b: int) -> int:
    return cdiv(a, b) * b
