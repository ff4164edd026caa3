"""Argument checks shared by the layout functions (house error format: op, argument, got, expected).

Size policy (:data:`mxrt.errors.SIZE_LIMIT`): size arguments and the element counts an op reads or allocates are at
most 2^31-1 (the kernels index with int32), checked before anything is allocated. Group lengths may sum to int64
(Primus-Turbo offsets) in the functions that only compute offsets; every padded total is computed without wrapping.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SIZE_LIMIT, DtypeError, ShapeError, check_int, check_size_limit
from ..formats.codecs import as_array

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "align",
    "as_array",
    "cdiv",
    "check_alloc",
    "check_fill_value",
    "check_group_lens",
    "check_int",
    "check_int32_limit",
    "check_int_array",
]

#: Largest value a signed 32-bit index can hold; kernels that use int32 offsets/ids are limited by it.
INT32_MAX = SIZE_LIMIT  # 0x7FFFFFFF
#: Largest value an int64 offset can hold.
INT64_MAX = 2**63 - 1


def check_int_array(x: object, op: str, arg: str, *, ndim: int | None = None) -> np.ndarray:
    """An ndarray (or rectangular nested list) of an integer dtype, optionally of rank ``ndim``; bool is rejected."""
    a = as_array(x, op, arg)
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{op}: argument '{arg}' has dtype {a.dtype}, expected an integer dtype")
    if ndim is not None and a.ndim != ndim:
        raise ShapeError(f"{op}: argument '{arg}' has shape {a.shape}, expected a {ndim}-D array")
    return a


def check_group_lens(group_lens: object, op: str, arg: str = "group_lens") -> np.ndarray:
    """1-D non-negative integer group lengths whose total fits int64; returned as int64."""
    a = check_int_array(group_lens, op, arg, ndim=1)
    if a.size and a.dtype.kind == "u" and a.max() > INT64_MAX:
        raise ShapeError(f"{op}: argument '{arg}' has a value {a.max()}, expected values <= 2^63-1")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        g = int(np.argmax(a < 0))
        raise ShapeError(f"{op}: argument '{arg}' has {arg}[{g}] = {a[g]}, expected lengths >= 0")
    check_total(a, op, f"argument '{arg}'")
    return a


def check_total(a: np.ndarray, op: str, what: str) -> int:
    """``sum(a)`` of non-negative int64 values, exactly (no wrap); a ShapeError past 2^63-1."""
    if a.size and int(a.max()) > INT64_MAX // a.size:
        total = sum(int(v) for v in a)
        if total > INT64_MAX:
            raise ShapeError(f"{op}: {what} sums to {total}, past 2^63-1; expected a total that fits int64")
        return total
    return int(a.sum())


def check_int32_limit(value: int, op: str, what: str) -> None:
    """Raise when ``value`` (a count/offset a kernel stores as int32) exceeds 2^31-1."""
    check_size_limit(value, op, what)


def check_alloc(shape: tuple[int, ...], op: str, what: str) -> tuple[int, ...]:
    """``shape`` of an array about to be allocated, when its element count is within the size limit."""
    check_size_limit(math.prod(shape), op, f"{what} of shape {shape}: its element count")
    return shape


def check_fill_value(value: object, dtype: np.dtype, op: str, arg: str = "pad_value") -> object:
    """A real scalar that ``dtype`` holds without changing it: an integer in range for integer dtypes (0.5, -1 on
    uint8 and 2**40 on int32 are errors), a real number within range (or +-inf/NaN) for float dtypes (1e300 on
    float16 is an error; rounding to the nearest float is allowed), 0/1/bool for bool, any number for complex."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    numeric = isinstance(value, (int, float, complex, np.number, np.bool_)) and not isinstance(value, str)
    if not numeric:
        raise DtypeError(f"{op}: argument '{arg}' is {value!r}, expected a real number (a scalar)")
    kind = dtype.kind
    if kind == "c":
        return value
    if isinstance(value, (complex, np.complexfloating)):
        raise DtypeError(f"{op}: argument '{arg}' is {value!r}, a complex number for x of dtype {dtype}")
    v = float(value) if not isinstance(value, (int, np.integer, bool, np.bool_)) else int(value)
    if kind == "b":
        if v not in (0, 1):
            raise ShapeError(f"{op}: argument '{arg}' is {value!r}, expected 0, 1, False or True for x of dtype bool")
        return bool(v)
    if kind in "iu":
        info = np.iinfo(dtype)
        if (isinstance(v, float) and not v.is_integer()) or not (info.min <= v <= info.max):
            raise ShapeError(
                f"{op}: argument '{arg}' is {value!r}, expected an integer in [{info.min}, {info.max}] for x of "
                f"dtype {dtype}"
            )
        return int(v)
    if kind == "f" or dtype.type.__module__ == "ml_dtypes":
        try:
            big = float(np.finfo(dtype).max)
        except ValueError:  # an ml_dtypes type numpy's finfo does not know
            import ml_dtypes

            big = float(ml_dtypes.finfo(dtype).max)
        if math.isfinite(v) and abs(v) > big:
            raise ShapeError(
                f"{op}: argument '{arg}' is {value!r}, beyond the range of x's dtype {dtype} (max {big!r})"
            )
        return v
    raise DtypeError(f"{op}: argument 'x' has dtype {dtype}, expected a numeric dtype")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def align(a: int, b: int) -> int:
    return cdiv(a, b) * b
