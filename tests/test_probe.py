"""Bad-input probe over every public function (issue 9, "Robustness"), ml_dtypes-style: one table of bad inputs.

Every public function gets a small adapter (:class:`Fn`): a good call, written as keyword arguments, and the
*kind* of each argument. :data:`BAD` maps a kind to its bad inputs (wrong dtypes, non-contiguous / negative-stride
/ Fortran / big-endian / read-only arrays, 0-d and 64-D inputs, huge or bool or numpy-integer sizes, unknown
names, NaN/Inf, tampered MXArrays, sizes past 2^31). The probe replaces one argument at a time and classifies the
call. Allowed outcomes:

- a typed :class:`mxrt.MxrtError` whose message starts with ``"<op>:"`` and names the argument;
- for ``SAME`` cases (another spelling of the good argument: a view, a numpy integer, a list), the good call's
  answer, bitwise;
- for ``ANY`` cases (legal inputs whose answer the table does not know: NaN, empty, 0-d), any answer.

Never: a raw numpy / Index / Assertion / ZeroDivision / Overflow / Memory error, a warning, an allocation past
:data:`PEAK_BYTES` (a size check must fire first), or a call longer than :data:`CALL_SECONDS` (a hang). Each
function also has ``pairs``: mismatched paired arguments. :data:`DEFECTS` keeps one case per defect issue 9
listed (and the answers the table cannot check generically).
"""

from __future__ import annotations

import dataclasses
import math
import re
import resource
import signal
import tracemalloc
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt import problems, reference

ERROR, SAME, ANY = "error", "same", "any"

#: Per-call wall-clock limit: a size check must fire before any allocation or loop proportional to a bad size.
CALL_SECONDS = 5.0
#: Per-call traced allocation limit (numpy reports its buffers to tracemalloc).
PEAK_BYTES = 64 << 20
#: Address space a call may add (hard guard; PEAK_BYTES is the finer check).
VM_HEADROOM = 1 << 30
#: A size just past the limit mxrt documents (``mxrt.errors.SIZE_LIMIT = 2^31 - 1``).
PAST = 2**31


@dataclass(frozen=True)
class Bad:
    """One bad input: ``make(good)`` builds it from the good argument (None: the case does not apply)."""

    id: str
    make: Callable[[Any], Any]
    expect: str


class _Skip(Exception):
    pass


def _const(v: Any) -> Callable[[Any], Any]:
    return lambda _good: v


def _arr(good: Any) -> np.ndarray:
    if not isinstance(good, np.ndarray) or good.ndim == 0:
        raise _Skip
    return good


def _noncontig(good: Any) -> np.ndarray:
    a = _arr(good)
    b = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
    b[..., ::2] = a
    return b[..., ::2]


def _negstride(good: Any) -> np.ndarray:
    a = _arr(good)
    return np.flip(np.flip(a).copy())


def _bigendian(good: Any) -> np.ndarray:
    a = _arr(good)
    if a.dtype.kind not in "iuf" or a.dtype.itemsize == 1 or a.dtype.type.__module__ == "ml_dtypes":
        raise _Skip
    return a.astype(a.dtype.newbyteorder(">"))


def _readonly(good: Any) -> np.ndarray:
    a = _arr(good).copy()
    a.flags.writeable = False
    return a


def _zero_d(good: Any) -> np.ndarray:
    a = _arr(good)
    return a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype)


def _rank(n: int) -> Callable[[Any], Any]:
    def make(good: Any) -> np.ndarray:
        a = _arr(good)
        return a.reshape((1,) * (n - a.ndim) + a.shape)

    return make


def _astype(dt: Any) -> Callable[[Any], Any]:
    return lambda good: _arr(good).astype(dt)


def _huge(dt: Any) -> Callable[[Any], Any]:
    """A read-only broadcast view with 2^31 elements: costs no memory, must be refused before any copy."""
    return lambda good: np.broadcast_to(np.zeros((), dt), (1,) * (max(_arr(good).ndim, 1) - 1) + (PAST,))


def _fill(v: float) -> Callable[[Any], Any]:
    def make(good: Any) -> np.ndarray:
        a = _arr(good).copy()
        if not a.size or (v < 0 and a.dtype.kind == "u") or (a.dtype.kind in "iu" and not math.isfinite(v)):
            raise _Skip
        if a.dtype.kind in "iu" and not np.iinfo(a.dtype).min <= v <= np.iinfo(a.dtype).max:
            raise _Skip
        a.reshape(-1)[:1] = v
        return a

    return make


#: Layout variants of an array argument: the same values, so the answer must be the good call's.
VIEWS = [
    Bad("noncontig", _noncontig, SAME),
    Bad("negstride", _negstride, SAME),
    Bad("fortran", lambda g: np.asfortranarray(_arr(g)), SAME),
    Bad("bigendian", _bigendian, SAME),
    Bad("readonly", _readonly, SAME),
    # a list has no dtype: the answer may differ in dtype (pad_rows keeps x's), so only "no raw error" here
    Bad("list", lambda g: _arr(g).tolist() if _arr(g).dtype.type.__module__ == "numpy" else _skip(), ANY),
]

#: What any array argument must survive.
ARRAY = [
    *VIEWS,
    Bad("none", _const(None), ERROR),
    Bad("str", _const("abc"), ERROR),
    Bad("object", _const(object()), ERROR),
    Bad("ragged", _const([[1], [2, 3]]), ERROR),
    Bad("object_array", lambda g: _arr(g).astype(object), ERROR),
    Bad("str_array", _const(np.array(["a", "b"])), ERROR),
    Bad("complex64", _astype(np.complex64), ERROR),
    Bad("0d", _zero_d, ANY),
    Bad("rank32", _rank(32), ANY),
    Bad("rank64", _rank(64), ANY),
    Bad("empty", lambda g: _arr(g)[:0], ANY),
]


def _skip() -> Any:
    raise _Skip


FLOAT = [
    *ARRAY,
    Bad("int32", _astype(np.int32), ERROR),
    Bad("bool", _astype(bool), ERROR),
    Bad("float64", _astype(np.float64), SAME),  # float32 values: float64 holds them exactly
    Bad("float16", _astype(np.float16), ANY),
    Bad("bfloat16", _astype(ml_dtypes.bfloat16), ANY),
    Bad("nan", _fill(np.nan), ANY),
    Bad("inf", _fill(np.inf), ANY),
    Bad("-inf", _fill(-np.inf), ANY),
    Bad("beyond_fp32", lambda g: _fill(1e39)(_astype(np.float64)(g)), ANY),  # see DEFECTS for the rule
    Bad("huge", _huge(np.float32), ERROR),
]

INTS = [
    *ARRAY,
    Bad("int_list", lambda g: _arr(g).tolist(), SAME),
    Bad("float64", _astype(np.float64), ERROR),
    Bad("bool", _astype(bool), ERROR),
    Bad("int32", _astype(np.int32), SAME),
    Bad("uint16", lambda g: _astype(np.uint16)(g) if _arr(g).min(initial=0) >= 0 else _skip(), SAME),
    Bad("negative", _fill(-3), ANY),
    Bad("uint64_max", lambda g: _fill(2**64 - 1)(_astype(np.uint64)(g)), ANY),
    Bad("int64_max", _fill(2**63 - 1), ANY),
    Bad("huge", _huge(np.int64), ERROR),
]

BYTES = [
    *ARRAY,
    Bad("int_list", lambda g: _arr(g).tolist(), SAME),
    Bad("int64", _astype(np.int64), SAME),
    Bad("int8", _astype(np.int8), SAME),
    Bad("float32", _astype(np.float32), ERROR),
    Bad("bool", _astype(bool), ERROR),
    Bad("max_byte", _fill(255), ANY),
    Bad("huge", _huge(np.uint8), ERROR),
]

#: int32-only layout arrays (vLLM's moe_align_block_size outputs, read in place by the kernels): other integer
#: dtypes and lists are errors; int32 in another byte order or stride is the same array
INT32 = [
    *(b for b in ARRAY if b.id != "list"),
    Bad("int_list", lambda g: _arr(g).tolist(), ERROR),
    Bad("int64", _astype(np.int64), ERROR),
    Bad("uint32", _astype(np.uint32), ERROR),
    Bad("float32", _astype(np.float32), ERROR),
    Bad("bool", _astype(bool), ERROR),
    Bad("negative", _fill(-3), ANY),
    Bad("int32_max", _fill(2**31 - 1), ANY),
    Bad("huge", _huge(np.int32), ERROR),
]

#: float32-only arrays where None is the documented default (routing weights)
OPT_FLOAT32 = [
    *(b for b in ARRAY if b.id != "none"),
    Bad("none", _const(None), ANY),
    Bad("int32", _astype(np.int32), ERROR),
    Bad("float64", _astype(np.float64), ERROR),
    Bad("float16", _astype(np.float16), ERROR),
    Bad("bfloat16", _astype(ml_dtypes.bfloat16), ERROR),
    Bad("nan", _fill(np.nan), ANY),
    Bad("inf", _fill(np.inf), ANY),
    Bad("huge", _huge(np.float32), ERROR),
]

#: Rows moved by the group layouts: any numeric dtype is legal (kept in the answer).
ROWS = [
    *(b for b in ARRAY if b.id != "complex64"),
    *(Bad(dt, _astype(dt), ANY) for dt in ("complex64", "int32", "bool", "float64", "float16")),
    Bad("bfloat16", _astype(ml_dtypes.bfloat16), ANY),
    Bad("huge", _huge(np.float32), ERROR),
]

#: Metric inputs: any real dtype (integers too); complex and non-numeric are errors.
REAL = [*(b for b in FLOAT if b.id not in ("int32", "bool")), Bad("int32", _astype(np.int32), ANY)]

SIZE = [
    Bad("np_int64", lambda g: np.int64(g), SAME),
    Bad("np_uint8", lambda g: np.uint8(g) if 0 <= g < 256 else _skip(), SAME),
    Bad("np_uint64", lambda g: np.uint64(g), SAME),
    Bad("true", _const(True), ERROR),
    Bad("np_bool", _const(np.bool_(True)), ERROR),
    Bad("float", lambda g: float(g), ERROR),
    Bad("str", lambda g: str(g), ERROR),
    Bad("none", _const(None), ERROR),
    Bad("0d_array", lambda g: np.array(g), ERROR),
    Bad("zero", _const(0), ANY),
    Bad("minus1", _const(-1), ERROR),
    Bad("int64_min", _const(-(2**63)), ERROR),
    Bad("2^31", _const(PAST), ERROR),
    Bad("2^40", _const(2**40), ERROR),
    Bad("2^62", _const(2**62), ERROR),
    Bad("2^63-1", _const(2**63 - 1), ERROR),
    Bad("2^63", _const(2**63), ERROR),
    Bad("2^64", _const(2**64), ERROR),
    Bad("np_uint64_max", _const(np.uint64(2**64 - 1)), ERROR),
    Bad("nan", _const(math.nan), ERROR),
]

#: A size where None is the documented default.
OPT_SIZE = [*(b for b in SIZE if b.id != "none"), Bad("none", _const(None), ANY)]

NAME = [
    Bad("unknown", _const("foo"), ERROR),
    Bad("empty", _const(""), ERROR),
    Bad("none", _const(None), ERROR),
    Bad("int", _const(3), ERROR),
    Bad("bytes", lambda g: g.encode() if isinstance(g, str) else _skip(), ERROR),
    Bad("np_str", lambda g: np.str_(g) if isinstance(g, str) else _skip(), SAME),
    Bad("list", lambda g: [g], ERROR),
]

#: A name where None is the documented default (scale layouts of the quantizers and the GEMM).
OPT_NAME = [b for b in NAME if b.id != "none"]

BOOL = [
    Bad("np_bool", lambda g: np.bool_(g), SAME),
    Bad("none", _const(None), ERROR),
    Bad("int1", _const(1), ERROR),
    Bad("int0", _const(0), ERROR),
    Bad("str", _const("yes"), ERROR),
    Bad("array", lambda g: np.array([g]), ERROR),
]

AXIS = [
    Bad("np_int64", lambda g: np.int64(g), SAME),
    Bad("out_of_range", _const(5), ERROR),
    Bad("neg_out_of_range", _const(-5), ERROR),
    Bad("float", _const(1.5), ERROR),
    Bad("none", _const(None), ERROR),
    Bad("true", _const(True), ERROR),
    Bad("2^63", _const(2**63), ERROR),
    Bad("tuple", _const((0, 1)), ERROR),
]

DTYPE = [
    Bad("unknown", _const("foo"), ERROR),
    Bad("none", _const(None), ERROR),
    Bad("object", _const(object()), ERROR),
    Bad("int32", _const(np.int32), ERROR),
    Bad("complex", _const(np.complex64), ERROR),
]

BACKEND = [
    # backend="gpu" on a machine without CuPy: the message is the lead's (issue 9 dispatch work); any typed
    # error naming the op passes here.
    Bad("gpu", _const("gpu"), ERROR),
    Bad("numpy", _const("numpy"), SAME),
    Bad("unknown", _const("cuda"), ERROR),
    Bad("none", _const(None), ERROR),
    Bad("int", _const(3), ERROR),
]

FLOAT_SCALAR = [
    Bad("none", _const(None), ERROR),
    Bad("str", _const("0"), ERROR),
    Bad("complex", _const(1 + 2j), ERROR),
    Bad("nan", _const(math.nan), ANY),
    Bad("huge", _const(1e300), ANY),
    Bad("array", _const(np.zeros(3)), ERROR),
]


def _tamper(**kw: Any) -> Callable[[Any], Any]:
    return lambda q: dataclasses.replace(q, **kw)


def _tamper_f(**kw: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda q: dataclasses.replace(q, **{k: f(q) for k, f in kw.items()})


#: Tampered MXArray fields (an MXArray is a plain frozen dataclass: anyone can build a wrong one).
MXARRAY = [
    Bad("not_mxarray", lambda q: q.data, ERROR),
    Bad("none", _const(None), ERROR),
    Bad("block_size_0", _tamper(block_size=0), ERROR),
    Bad("block_size_none", _tamper(block_size=None), ERROR),
    Bad("block_size_3", _tamper(block_size=3), ERROR),
    Bad("block_size_neg", _tamper(block_size=-32), ERROR),
    Bad("block_size_true", _tamper(block_size=True), ERROR),
    Bad("block_size_float", _tamper(block_size=32.0), ERROR),
    Bad("block_size_2^40", _tamper(block_size=2**40), ERROR),
    Bad("block_size_np", _tamper_f(block_size=lambda q: np.int64(q.block_size)), SAME),
    Bad("axis_5", _tamper(axis=5), ERROR),
    Bad("axis_neg", _tamper(axis=-1), ERROR),
    Bad("axis_float", _tamper(axis=1.5), ERROR),
    Bad("axis_none", _tamper(axis=None), ERROR),
    Bad("shape_short", _tamper_f(shape=lambda q: q.shape[:1]), ERROR),
    Bad("shape_float", _tamper_f(shape=lambda q: tuple(float(v) for v in q.shape)), ERROR),
    Bad("shape_neg", _tamper_f(shape=lambda q: (-1, *q.shape[1:])), ERROR),
    Bad("shape_none", _tamper(shape=None), ERROR),
    Bad("shape_list", _tamper_f(shape=lambda q: list(q.shape)), SAME),
    Bad("shape_np_ints", _tamper_f(shape=lambda q: tuple(np.int64(v) for v in q.shape)), SAME),
    Bad("shape_wrong", _tamper_f(shape=lambda q: (q.shape[0], q.shape[1] + 64)), ERROR),
    Bad("fmt_unknown", _tamper(fmt="foo"), ERROR),
    Bad("fmt_none", _tamper(fmt=None), ERROR),
    Bad("fmt_other", _tamper_f(fmt=lambda q: "e5m2" if q.fmt == "e2m1" else "e2m1"), ERROR),
    Bad("data_none", _tamper(data=None), ERROR),
    Bad("data_float", _tamper_f(data=lambda q: q.data.astype(np.float32)), ERROR),
    Bad("data_short", _tamper_f(data=lambda q: q.data[:, :1]), ERROR),
    Bad("data_list", _tamper_f(data=lambda q: q.data.tolist()), ANY),
    Bad("data_noncontig", _tamper_f(data=lambda q: _noncontig(q.data)), SAME),
    Bad("data_codes_out_of_range", _tamper_f(data=lambda q: np.full_like(q.data, 0xFF)), ANY),
    Bad("scales_none", _tamper(scales=None), ERROR),
    Bad("scales_int32", _tamper_f(scales=lambda q: q.scales.astype(np.int32)), ERROR),
    Bad("scales_short", _tamper_f(scales=lambda q: q.scales[:, :0]), ERROR),
    Bad("scales_readonly", _tamper_f(scales=lambda q: _readonly(q.scales)), SAME),
    Bad("scale_layout_unknown", _tamper(scale_layout="foo"), ERROR),
    Bad("scale_layout_int", _tamper(scale_layout=3), ERROR),
    Bad("scale_mode_none", _tamper(scale_mode=None), ANY),  # informational only
]

BAD: dict[str, list[Bad]] = {
    "float": FLOAT,
    "rows": ROWS,
    "real": REAL,
    "ints": INTS,
    "int32": INT32,
    "opt_float32": OPT_FLOAT32,
    "bytes": BYTES,
    "array": ARRAY,  # any dtype is legal (weights: fp8 codes or fp16/bf16)
    "size": SIZE,
    "opt_size": OPT_SIZE,
    "name": NAME,
    "opt_name": OPT_NAME,
    "bool": BOOL,
    "axis": AXIS,
    "dtype": DTYPE,
    "backend": BACKEND,
    "float_scalar": FLOAT_SCALAR,
    "mxarray": MXARRAY,
}

# ---- the good calls ---------------------------------------------------------------------------------------

RNG = np.random.default_rng(9)
X = (RNG.standard_normal((3, 40)) * 4).astype(np.float32)  # odd m, a partial 32-block
Q = mxrt.quantize_mx(X, "e4m3", backend="numpy")
Q4 = mxrt.quantize_mx(X, "e2m1", backend="numpy")
QA = mxrt.quantize_mx((RNG.standard_normal((3, 64))).astype(np.float32), backend="numpy")
QB = mxrt.quantize_mx((RNG.standard_normal((5, 64))).astype(np.float32), backend="numpy")
LENS = np.array([3, 0, 5], np.int64)
XR = RNG.standard_normal((8, 4)).astype(np.float32)
IDS = np.array([[0, 1], [2, 0], [1, 3]], np.int32)
S = RNG.integers(100, 150, (5, 3), dtype=np.uint8)
W8 = RNG.integers(0, 256, (20, 40), dtype=np.uint8)
GA = mxrt.quantize_mx(RNG.standard_normal((8, 64)).astype(np.float32), backend="numpy")  # rows of LENS groups
GB = mxrt.quantize_mx(RNG.standard_normal((3, 5, 64)).astype(np.float32), axis=2, backend="numpy")  # [G, n, k]
# DeepGEMM pairs (data, sf): MX 1x32 UE8M0 bytes and the float32 Hopper recipe
DGA = (GA.data.view(ml_dtypes.float8_e4m3fn), GA.scales)
DGB = (GB.data.view(ml_dtypes.float8_e4m3fn), GB.scales)
DG_IDS = np.array([0, 0, 0, -1, 2, 2, 2, 2], np.int32)
DGM = mxrt.quantize_mx(RNG.standard_normal((3, 4, 64)).astype(np.float32), axis=2, backend="numpy")
KG_A = (np.zeros(256 * 4, ml_dtypes.float8_e4m3fn), np.ones((4, 2), np.float32))  # ks [128, 0, 128], m = 4
KG_B = (np.zeros(256 * 5, ml_dtypes.float8_e4m3fn), np.ones((5, 2), np.float32))
MOE_IDS = np.array([[0, 2], [3, 0], [2, 1]], np.int32)  # [T, top_k] routing of MOE_X
MOE_X = mxrt.quantize_mx(RNG.standard_normal((3, 64)).astype(np.float32), backend="numpy")
MOE_W = mxrt.quantize_mx(RNG.standard_normal((4, 5, 64)).astype(np.float32), axis=2, backend="numpy")
MOE_LAYOUT = mxrt.moe_align_block_size(MOE_IDS, 2, 4, backend="numpy")
COMBINE_Y = RNG.standard_normal((6, 5)).astype(ml_dtypes.bfloat16)  # [R, n] expert outputs of mxrt.moe_combine
COMBINE_SRC = np.array([[0, 2], [3, 5], [1, 4]], np.int64)  # [T, k] rows of COMBINE_Y
GWA = mxrt.quantize_mx_grouped(RNG.standard_normal((8, 5)).astype(np.float32), LENS, colwise=True, col_align=32).col
GWB = mxrt.quantize_mx_grouped(RNG.standard_normal((8, 6)).astype(np.float32), LENS, colwise=True, col_align=32).col


@dataclass(frozen=True)
class Fn:
    """Adapter of one public function: ``call(**good)`` is the good call; ``kinds[name]`` picks the bad-input
    table of argument ``name`` (missing: not probed). ``pairs``: (id, overrides, args that may be named)."""

    op: str
    call: Callable[..., Any]
    good: dict[str, Any]
    kinds: dict[str, str]
    pairs: list[tuple] = field(default_factory=list)
    #: bad-input ids (prefixes) that do not apply: attribute access on a non-MXArray is not an mxrt call
    skip: tuple[str, ...] = ()


def _codes(q: Any) -> Any:
    return q.codes


def _scale_shape(q: Any) -> Any:
    return q.scale_shape


METHOD = ("not_mxarray", "none")
NOT_GEOMETRY = ("fmt_", "data_", "scales_", "scale_layout_", "shape_wrong")

FNS = [
    Fn(
        "quantize_mx",
        mxrt.quantize_mx,
        dict(x=X, fmt="e4m3", block_size=32, axis=-1, scale_mode="rceil", backend="numpy", scale_layout=None),
        dict(
            x="float",
            fmt="name",
            block_size="size",
            axis="axis",
            scale_mode="name",
            backend="backend",
            scale_layout="opt_name",
        ),
        [
            ("3d_layout", dict(x=X[None], scale_layout="aiter32x8"), ("scale_layout",)),
            ("axis0_layout", dict(axis=0, scale_layout="aiter32x8"), ("scale_layout",)),
        ],
    ),
    Fn(
        "quantize_mx_dual",
        mxrt.quantize_mx_dual,
        dict(x=X, fmt="e2m1", block_size=32, scale_mode="floor", block_2d=True, backend="numpy", scale_layout=None),
        dict(
            x="float",
            fmt="name",
            block_size="size",
            scale_mode="name",
            block_2d="bool",
            backend="backend",
            scale_layout="opt_name",
        ),
    ),
    Fn("dequantize_mx", mxrt.dequantize_mx, dict(q=Q, dtype=np.float32), dict(q="mxarray", dtype="dtype")),
    Fn("dequantize_mx", mxrt.dequantize_mx, dict(q=Q4, dtype="bfloat16"), dict(q="mxarray")),
    Fn("dequantize_mx", lambda q: q.dequantize(), dict(q=Q), dict(q="mxarray"), skip=METHOD),
    Fn("MXArray.codes", _codes, dict(q=Q4), dict(q="mxarray"), skip=METHOD),
    Fn("MXArray.codes", _codes, dict(q=Q), dict(q="mxarray"), skip=METHOD),
    Fn("convert", mxrt.convert, dict(x=X, kind="numpy"), dict(x="array", kind="name")),
    # scale_shape reads the geometry fields only (shape, axis, block_size)
    Fn("MXArray.scale_shape", _scale_shape, dict(q=Q), dict(q="mxarray"), skip=(*METHOD, *NOT_GEOMETRY)),
    Fn("encode", mxrt.encode, dict(x=X, fmt="e5m2"), dict(x="float", fmt="name")),
    Fn("decode", mxrt.decode, dict(codes=Q4.codes, fmt="e2m1"), dict(codes="bytes", fmt="name")),
    Fn("e8m0_decode", mxrt.e8m0_decode, dict(s=Q.scales), dict(s="bytes")),
    Fn("ceil_to_ue8m0", mxrt.ceil_to_ue8m0, dict(sf=X), dict(sf="float")),
    Fn("pack_fp4", mxrt.pack_fp4, dict(codes=Q4.codes, axis=-1), dict(codes="bytes", axis="axis")),
    Fn(
        "unpack_fp4",
        mxrt.unpack_fp4,
        dict(packed=Q4.data, n=40, axis=-1),
        dict(packed="bytes", n="size", axis="axis"),
        [("n_too_big", dict(n=41), ("n",)), ("n_too_small", dict(n=37), ("n",))],
    ),
    Fn(
        "per_token_cast_to_fp8",
        mxrt.per_token_cast_to_fp8,
        dict(x=X, use_ue8m0=True, gran_k=32, backend="numpy"),
        dict(x="float", use_ue8m0="bool", gran_k="size", backend="backend"),
    ),
    Fn(
        "per_block_cast_to_fp8",
        mxrt.per_block_cast_to_fp8,
        dict(x=X, use_ue8m0=False, gran_k=32, backend="numpy"),
        dict(x="float", use_ue8m0="bool", gran_k="size", backend="backend"),
    ),
    Fn("group_offsets", mxrt.group_offsets, dict(group_lens=LENS), dict(group_lens="ints")),
    Fn(
        "pad_group_layout",
        mxrt.pad_group_layout,
        dict(group_lens=LENS, align=4),
        dict(group_lens="ints", align="size"),
        [("overflow", dict(group_lens=[2], align=2**62), ("align",))],
    ),
    Fn(
        "padded_rows_upper_bound",
        mxrt.padded_rows_upper_bound,
        dict(total_rows=8, num_groups=3, align=4),
        dict(total_rows="size", num_groups="size", align="size"),
    ),
    Fn(
        "pad_rows",
        mxrt.pad_rows,
        dict(x=XR, group_lens=LENS, align=4, pad_value=0, rows=16),
        dict(x="rows", group_lens="ints", align="size", pad_value="float_scalar", rows="opt_size"),
        [("rows_short", dict(rows=5), ("rows",)), ("lens_sum", dict(group_lens=[3, 0, 4]), ("group_lens", "x"))],
    ),
    Fn(
        "unpad_rows",
        mxrt.unpad_rows,
        dict(y=mxrt.pad_rows(XR, LENS, 4), group_lens=LENS, align=4),
        dict(y="rows", group_lens="ints", align="size"),
        [("short", dict(y=XR[:5]), ("y",))],
    ),
    Fn(
        "contiguous_m_indices",
        mxrt.contiguous_m_indices,
        dict(group_lens=LENS, alignment=4),
        dict(group_lens="ints", alignment="size"),
    ),
    Fn(
        "group_lens_from_m_indices",
        mxrt.group_lens_from_m_indices,
        dict(m_indices=mxrt.contiguous_m_indices(LENS, 4), num_groups=3, alignment=4),
        dict(m_indices="ints", num_groups="size", alignment="size"),
        [("alignment", dict(alignment=8), ("m_indices",))],
    ),
    Fn(
        "contiguous_psum_layout",
        mxrt.contiguous_psum_layout,
        dict(group_lens=LENS, alignment=4),
        dict(group_lens="ints", alignment="size"),
    ),
    Fn(
        "group_lens_from_psum",
        mxrt.group_lens_from_psum,
        dict(psum_layout=mxrt.contiguous_psum_layout(LENS, 4), alignment=4),
        dict(psum_layout="ints", alignment="size"),
    ),
    Fn(
        "to_masked",
        mxrt.to_masked,
        dict(x=XR, group_lens=LENS, max_m=6, pad_value=0),
        dict(x="rows", group_lens="ints", max_m="opt_size", pad_value="float_scalar"),
        [("max_m_short", dict(max_m=4), ("max_m",)), ("lens_sum", dict(group_lens=[1, 2]), ("group_lens", "x"))],
    ),
    Fn(
        "from_masked",
        mxrt.from_masked,
        dict(x_masked=mxrt.to_masked(XR, LENS, 6)[0], masked_m=LENS.astype(np.int32)),
        dict(x_masked="rows", masked_m="ints"),
        [("masked_m_long", dict(masked_m=[7, 0, 0]), ("masked_m",)), ("groups", dict(masked_m=[1]), ("x_masked",))],
    ),
    Fn(
        "moe_align_block_size",
        mxrt.moe_align_block_size,
        dict(topk_ids=IDS, block_size=4, num_experts=4, expert_map=None, pad_sorted_ids=False, backend="numpy"),
        dict(topk_ids="ints", block_size="size", num_experts="size", pad_sorted_ids="bool", backend="backend"),
        [
            ("expert_map", dict(expert_map=[0, 1]), ("expert_map",)),
            ("expert_map_dtype", dict(expert_map=np.zeros(4)), ("expert_map",)),
        ],
    ),
    Fn(
        "moe_sorting",
        mxrt.moe_sorting,
        dict(topk_ids=IDS, topk_weights=np.ones(IDS.shape, np.float32), num_experts=4, block_size=4, expert_mask=None),
        dict(topk_ids="ints", topk_weights="float", num_experts="size", block_size="size"),
        [
            ("weights_shape", dict(topk_weights=np.ones((2, 3), np.float32)), ("topk_weights",)),
            ("mask_shape", dict(expert_mask=[1, 1]), ("expert_mask",)),
            ("mask_float", dict(expert_mask=np.ones(4)), ("expert_mask",)),
        ],
    ),
    Fn(
        "moe_combine",
        mxrt.moe_combine,
        dict(y=COMBINE_Y, src=COMBINE_SRC, topk_weights=np.ones(COMBINE_SRC.shape, np.float32), backend="numpy"),
        dict(y="rows", src="ints", topk_weights="float", backend="backend"),
        [
            ("src_out_of_range", dict(src=COMBINE_SRC + 5), ("src",)),
            ("src_k0", dict(src=COMBINE_SRC[:, :0], topk_weights=np.ones((3, 0), np.float32)), ("src",)),
            ("weights_shape", dict(topk_weights=np.ones((3, 1), np.float32)), ("topk_weights",)),
            ("y_uint16_bits", dict(y=COMBINE_Y.view(np.uint16)), ("y",), SAME),
        ],
    ),
    Fn(
        "preshuffle_scales",
        mxrt.preshuffle_scales,
        dict(s=S, layout="aiter32x8", pad_value=127, dtype=None, backend="numpy"),
        dict(s="bytes", layout="name", pad_value="size", backend="backend"),
        [
            ("pad_256", dict(pad_value=256), ("pad_value",)),
            ("dtype", dict(dtype=np.uint32), ("dtype",)),
            ("dtype_unknown", dict(dtype="foo"), ("dtype",)),
        ],
    ),
    Fn(
        "unshuffle_scales",
        mxrt.unshuffle_scales,
        dict(p=mxrt.preshuffle_scales(S, "turbo16x4"), layout="turbo16x4", shape=(5, 3), backend="numpy"),
        dict(p="bytes", layout="name", backend="backend"),
        [
            ("shape", dict(shape=(5, 9)), ("p",)),
            ("shape_type", dict(shape=5), ("shape",)),
            ("shape_huge", dict(shape=(PAST, 3)), ("shape",)),
            ("shape_float", dict(shape=(5.0, 3)), ("shape",)),
        ],
    ),
    Fn(
        "scale_index",
        mxrt.scale_index,
        dict(layout="cublas128x4", row=np.arange(5), col=np.array([0, 1, 2, 0, 1]), shape=(5, 3)),
        dict(layout="name", row="ints", col="ints"),
        [
            ("row_range", dict(row=np.array([300])), ("row",)),
            ("shape_huge", dict(shape=(2**62, 3)), ("shape",)),
            ("shape_none", dict(shape=None), ("shape",)),
        ],
    ),
    Fn(
        "scale_layout_shape",
        mxrt.scale_layout_shape,
        dict(layout="deepgemm_ue8m0", rows=5, cols=3),
        dict(layout="name", rows="size", cols="size"),
    ),
    Fn("preshuffle_weight", mxrt.preshuffle_weight, dict(q=W8, layout="aiter16x16"), dict(q="array", layout="name")),
    Fn(
        "unshuffle_weight",
        mxrt.unshuffle_weight,
        dict(p=mxrt.preshuffle_weight(W8), layout="aiter16x16", shape=(20, 40)),
        dict(p="array", layout="name"),
        [("shape", dict(shape=(40, 40)), ("shape",)), ("shape_huge", dict(shape=(PAST, 40)), ("shape",))],
    ),
    Fn(
        "weight_layout_shape",
        mxrt.weight_layout_shape,
        dict(layout="aiter16x16", n=20, k=40),
        dict(layout="name", n="size", k="size"),
    ),
    Fn(
        "quantize_mx_grouped",
        mxrt.quantize_mx_grouped,
        dict(
            x=XR.repeat(16, 1),
            group_lens=LENS,
            fmt="e4m3",
            align=32,
            colwise=True,
            col_align=32,
            scale_mode="rceil",
            block_size=32,
            backend="numpy",
        ),
        dict(
            x="float",
            group_lens="ints",
            fmt="name",
            align="size",
            colwise="bool",
            col_align="size",
            scale_mode="name",
            block_size="size",
            backend="backend",
        ),
        [("lens_sum", dict(group_lens=[3, 0, 4]), ("group_lens",)), ("col_align", dict(col_align=48), ("col_align",))],
    ),
    Fn(
        "quantize_mx_dual_grouped",
        mxrt.quantize_mx_dual_grouped,
        dict(w=np.stack([X, -X]), fmt="e2m1", block_2d=True, scale_mode="even", pad=64, block_size=32, backend="numpy"),
        dict(
            w="float", fmt="name", block_2d="bool", scale_mode="name", pad="size", block_size="size", backend="backend"
        ),
        [
            ("pad", dict(pad=48), ("pad",)),
            ("many_empty_groups", dict(w=np.zeros((2**24, 0, 0), np.float32)), ("w",), ANY),
        ],
    ),
    Fn(
        "m_grouped_fp8_gemm_nt_contiguous",
        mxrt.m_grouped_fp8_gemm_nt_contiguous,
        dict(a=DGA, b=DGB, d=np.zeros((8, 5), ml_dtypes.bfloat16), grouped_layout=DG_IDS, use_psum_layout=False),
        dict(grouped_layout="ints", use_psum_layout="bool"),
        [
            ("ids_range", dict(grouped_layout=np.array([0, 0, 0, -1, 3, 2, 2, 2], np.int32)), ("grouped_layout",)),
            ("ids_count", dict(grouped_layout=DG_IDS[:5]), ("grouped_layout",)),
            ("d_dtype", dict(d=np.zeros((8, 5), np.float32)), ("d",)),
            ("d_shape", dict(d=np.zeros((8, 4), ml_dtypes.bfloat16)), ("d",)),
            ("d_noncontig", dict(d=np.zeros((8, 10), ml_dtypes.bfloat16)[:, ::2]), ("d",)),
            ("sf_shape", dict(a=(DGA[0], np.repeat(DGA[1], 2, axis=1)[:, :3])), ("a",)),
            ("sf_dtype", dict(a=(DGA[0], DGA[1].astype(np.float64))), ("a",)),
            ("sf_kind_mix", dict(a=(DGA[0], np.ones((8, 1), np.float32))), ("a", "b")),
            ("data_dtype", dict(a=(GA.data.astype(np.float32), GA.scales)), ("a",)),
            ("not_pair", dict(a=GA), ("a",)),
            ("k", dict(b=(DGB[0][:, :, :32], DGB[1][:, :, :1])), ("b",)),
            ("recipe_both", dict(recipe=(1, 128, 128), recipe_a=(1, 128)), ("recipe",)),
            ("recipe_gran", dict(recipe=(1, 1, 64)), ("recipe",)),
            ("psum", dict(grouped_layout=np.array([3, 3, 136], np.int32), use_psum_layout=True), ("grouped_layout",)),
            ("psum_hint", dict(expected_m_for_psum_layout=8), ("expected_m_for_psum_layout",)),
            ("compiled_dims", dict(compiled_dims="xyz"), ("compiled_dims",)),
        ],
    ),
    Fn(
        "m_grouped_fp8_gemm_nt_masked",
        mxrt.m_grouped_fp8_gemm_nt_masked,
        dict(
            a=(DGM.data, DGM.scales),
            b=DGB,
            d=np.zeros((3, 4, 5), ml_dtypes.bfloat16),
            masked_m=np.array([4, 0, 2], np.int32),
            expected_m=2,
        ),
        dict(masked_m="ints", expected_m="size"),
        [
            ("masked_past_max", dict(masked_m=np.array([5, 0, 2], np.int32)), ("masked_m",)),
            ("masked_count", dict(masked_m=np.array([1, 2], np.int32)), ("masked_m",)),
            ("groups", dict(b=(DGB[0][:2], DGB[1][:2])), ("a", "b")),
            ("d_shape", dict(d=np.zeros((3, 5, 5), ml_dtypes.bfloat16)), ("d",)),
        ],
    ),
    Fn(
        "k_grouped_fp8_gemm_nt_contiguous",
        mxrt.k_grouped_fp8_gemm_nt_contiguous,
        dict(
            a=KG_A,
            b=KG_B,
            d=np.zeros((3, 4, 5), np.float32),
            ks=[128, 0, 128],
            grouped_layout=np.array([128, 0, 128], np.int32),
            c=None,
        ),
        dict(ks="ints", grouped_layout="ints"),
        [
            ("ks_unaligned", dict(ks=[100, 28, 128], grouped_layout=np.array([100, 28, 128], np.int32)), ("ks",)),
            ("layout_mismatch", dict(grouped_layout=np.array([0, 128, 128], np.int32)), ("grouped_layout",)),
            ("data_size", dict(a=(KG_A[0][:1000], KG_A[1])), ("a",)),
            ("sf_shape", dict(b=(KG_B[0], np.ones((5, 3), np.float32))), ("b",)),
            ("d_dtype", dict(d=np.zeros((3, 4, 5), ml_dtypes.bfloat16)), ("d",)),
            ("c_shape", dict(c=np.zeros((3, 4, 4), np.float32)), ("c",)),
            ("recipe", dict(recipe=(1, 128, 128)), ("recipe",)),
        ],
    ),
    Fn(
        "grouped_gemm_mx",
        mxrt.grouped_gemm_mx,
        dict(a=GA, b=GB, group_lens=LENS, out_dtype="bfloat16", out=None, backend="numpy"),
        dict(a="mxarray", b="mxarray", group_lens="ints", out_dtype="dtype", backend="backend"),
        [
            ("lens_sum", dict(group_lens=[3, 0, 4]), ("group_lens",)),
            ("lens_count", dict(group_lens=[3, 5]), ("group_lens",)),
            ("lens_negative", dict(group_lens=[4, -1, 5]), ("group_lens",)),
            ("b_2d", dict(b=QB), ("b",)),
            ("b_short_k", dict(b=mxrt.quantize_mx(np.ones((3, 5, 32), np.float32), axis=2)), ("b",)),
            ("b_odd_pad", dict(b=(np.zeros((3, 5, 70), np.uint8), np.zeros((3, 5, 3), np.uint8), "e4m3")), ("b",)),
            ("b_axis1", dict(b=mxrt.quantize_mx(np.ones((3, 64, 64), np.float32), axis=1)), ("b",)),
            ("pair", dict(b=mxrt.quantize_mx(np.ones((3, 5, 64), np.float32), "e2m1", axis=2), a=GA), ("a", "b"), ANY),
            ("out_shape", dict(out=np.zeros((8, 4), ml_dtypes.bfloat16)), ("out",)),
            ("out_dtype_mismatch", dict(out=np.zeros((8, 5), np.float32)), ("out",)),
            ("out_readonly", dict(out=_readonly(np.zeros((8, 5), ml_dtypes.bfloat16))), ("out",)),
        ],
    ),
    Fn(
        "grouped_gemm_mx_wgrad",
        mxrt.grouped_gemm_mx_wgrad,
        dict(a=GWA, b=GWB, group_lens=LENS, align=32, out_dtype="float32", out=None, accumulate=False, backend="numpy"),
        dict(
            a="mxarray",
            b="mxarray",
            group_lens="ints",
            align="size",
            out_dtype="dtype",
            accumulate="bool",
            backend="backend",
        ),
        [
            ("cols", dict(b=GA), ("b",)),
            ("lens_past_cols", dict(group_lens=[100, 0, 50]), ("group_lens",)),
            ("lens_negative", dict(group_lens=[4, -1, 5]), ("group_lens",)),
            ("align_48", dict(align=48), ("align",)),
            ("accumulate_no_out", dict(accumulate=True), ("out", "accumulate")),
            ("out_shape", dict(out=np.zeros((3, 5, 5), np.float32)), ("out",)),
            ("out_dtype", dict(out_dtype="float16"), ("out_dtype",)),
        ],
    ),
    Fn(
        "moe_gemm_mx",
        mxrt.moe_gemm_mx,
        dict(
            x=MOE_X,
            w=MOE_W,
            sorted_token_ids=MOE_LAYOUT[0],
            expert_ids=MOE_LAYOUT[1],
            num_tokens_post_padded=MOE_LAYOUT[2],
            top_k=2,
            block_size=2,
            topk_weights=RNG.random((3, 2), dtype=np.float32),
            a_div=2,
            out=None,
            out_dtype="bfloat16",
            backend="numpy",
        ),
        dict(
            x="mxarray",
            w="mxarray",
            sorted_token_ids="int32",
            expert_ids="int32",
            num_tokens_post_padded="int32",
            top_k="size",
            block_size="size",
            topk_weights="opt_float32",
            a_div="opt_size",
            out_dtype="dtype",
            backend="backend",
        ),
        [
            (
                "ids_past_numel",
                dict(sorted_token_ids=np.where(MOE_LAYOUT[0] == 6, 7, MOE_LAYOUT[0])),
                ("sorted_token_ids",),
            ),
            ("expert_past_e", dict(expert_ids=np.full_like(MOE_LAYOUT[1], 4)), ("expert_ids",)),
            ("expert_not_local", dict(expert_ids=np.full_like(MOE_LAYOUT[1], -1)), ("expert_ids",), ANY),
            ("nblocks", dict(expert_ids=MOE_LAYOUT[1][:-1]), ("expert_ids",)),
            ("block_size_mismatch", dict(block_size=4), ("expert_ids",)),
            ("a_div_down", dict(a_div=1), ("sorted_token_ids", "topk_weights")),
            ("a_div_down_no_weights", dict(a_div=1, topk_weights=None), ("sorted_token_ids",)),
            ("k", dict(w=mxrt.quantize_mx(np.ones((4, 5, 32), np.float32), axis=2)), ("w",)),
            ("w_2d", dict(w=QB), ("w",)),
            ("w_axis1", dict(w=mxrt.quantize_mx(np.ones((4, 64, 64), np.float32), axis=1)), ("w",)),
            ("w_pieces", dict(w=(MOE_W.data, MOE_W.scales[:, :4], "e4m3")), ("w",)),
            ("x_pieces", dict(x=(MOE_X.data, MOE_X.scales, "e4m3", 64)), ("x",), SAME),
            ("topk_weights_size", dict(topk_weights=np.ones(5, np.float32)), ("topk_weights",)),
            ("out_shape", dict(out=np.zeros((6, 4), ml_dtypes.bfloat16)), ("out",)),
            ("out_dtype_mismatch", dict(out=np.zeros((6, 5), np.float32)), ("out",)),
            ("out_readonly", dict(out=_readonly(np.zeros((6, 5), ml_dtypes.bfloat16))), ("out",)),
        ],
    ),
    Fn(
        "gemm_mx",
        mxrt.gemm_mx,
        dict(
            a=QA,
            b=QB,
            out_dtype="bfloat16",
            split_k=2,
            deterministic=True,
            out=None,
            backend="numpy",
            a_scale_layout=None,
            b_scale_layout=None,
        ),
        dict(
            a="mxarray",
            b="mxarray",
            out_dtype="dtype",
            split_k="size",
            deterministic="bool",
            backend="backend",
            a_scale_layout="opt_name",
            b_scale_layout="opt_name",
        ),
        [
            ("k", dict(b=QA.__class__(QB.data[:, :32], QB.scales[:, :1], "e4m3", 32, 1, (5, 32), "rceil")), ("b",)),
            ("out_shape", dict(out=np.zeros((3, 4), ml_dtypes.bfloat16)), ("out",)),
            ("out_dtype", dict(out=np.zeros((3, 5), np.float32)), ("out",)),
            ("out_readonly", dict(out=_readonly(np.zeros((3, 5), ml_dtypes.bfloat16))), ("out",)),
            ("split_k", dict(split_k=3), ("split_k",)),
        ],
    ),
    Fn(
        "gemm_mx",
        mxrt.gemm_mx,
        dict(a=(QA.data, QA.scales, "e4m3"), b=(QB.data, QB.scales, "e4m3", 64), backend="numpy"),
        dict(backend="backend"),
        [
            ("k_piece", dict(b=(QB.data, QB.scales, "e4m3", 2**40)), ("b",)),
            ("k_piece_bool", dict(b=(QB.data, QB.scales, "e4m3", True)), ("b",)),
            ("fmt_piece", dict(b=(QB.data, QB.scales, "foo")), ("b",)),
            (
                "codes_huge",
                dict(
                    a=(np.broadcast_to(np.uint8(0), (1, PAST)), np.broadcast_to(np.uint8(0), (1, 2**26)), "e4m3"),
                    b=(np.broadcast_to(np.uint8(0), (1, PAST)), np.broadcast_to(np.uint8(0), (1, 2**26)), "e4m3"),
                ),
                ("a",),
            ),
            ("codes_views", dict(a=(_noncontig(QA.data), _negstride(QA.scales), "e4m3")), ("a",), SAME),
            ("tuple_len", dict(a=(QA.data, QA.scales)), ("a",)),
        ],
    ),
    Fn(
        "calc_diff",
        mxrt.calc_diff,
        dict(x=X, y=X * 1.01),
        dict(x="real", y="real"),
        [("broadcast", dict(y=X[:, :1]), ("x", "y")), ("broadcast_1d", dict(x=X[0], y=X[0][:, None]), ("x", "y"))],
    ),
    Fn(
        "snr_db",
        mxrt.snr_db,
        dict(ref=X, y=X * 1.01),
        dict(ref="real", y="real"),
        [("broadcast", dict(y=X[:, :1]), ("ref", "y"))],
    ),
    Fn(
        "relative_error",
        mxrt.relative_error,
        dict(ref=X, y=X * 1.01),
        dict(ref="real", y="real"),
        [("broadcast", dict(y=X[:, :1]), ("ref", "y"))],
    ),
    Fn(
        "max_abs_diff",
        reference.max_abs_diff,
        dict(x=X, y=X * 1.01),
        dict(x="real", y="real"),
        [("broadcast", dict(y=X[:, :1]), ("x", "y"))],
    ),
    Fn(
        "reference.gemm_mx",
        reference.gemm_mx,
        dict(a=QA, b=QB, out_dtype="float64"),
        dict(a="mxarray", b="mxarray", out_dtype="dtype"),
    ),
    Fn("gemm_mx", problems.gemm_problem, dict(a=QA, b=QB), dict(a="mxarray", b="mxarray")),
]

# ---- running one call -------------------------------------------------------------------------------------


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _run(call: Callable[..., Any], kw: dict[str, Any]) -> tuple[str, Any, int]:
    """("ok", answer) or ("raised", exception); and the traced peak bytes. The address space is capped for the
    call (a runaway allocation becomes a MemoryError here instead of the machine's OOM killer)."""
    limits = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + VM_HEADROOM, limits[1]))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return "ok", call(**kw), tracemalloc.get_traced_memory()[1]
    except (Exception, _Timeout) as e:
        return "raised", e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, limits)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes() if a.dtype != object else repr(a.tolist()).encode()


def same(x: Any, y: Any) -> bool:
    """Bitwise equality of answers (arrays: dtype, shape, bits; NamedTuples/tuples/MXArrays: field by field)."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (
            isinstance(x, np.ndarray)
            and isinstance(y, np.ndarray)
            and x.dtype == y.dtype
            and x.shape == y.shape
            and _bits(x) == _bits(y)
        )
    if isinstance(x, mxrt.MXArray):
        return type(y) is type(x) and all(same(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, problems.GemmProblem):
        return isinstance(y, problems.GemmProblem) and same(x.a, y.a) and same(x.b, y.b) and x.k == y.k
    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
    return type(x) is type(y) and x == y


def classify(fn: Fn, kw: dict[str, Any], expect: str, args: tuple[str, ...], want: Any) -> str | None:
    """None when the call behaved; otherwise why not."""
    status, got, peak = _run(fn.call, kw)
    if peak > PEAK_BYTES:
        return f"allocated {peak >> 20} MiB (> {PEAK_BYTES >> 20} MiB): a size check should fire first"
    if status == "raised":
        if isinstance(got, _Timeout):
            return f"no answer in {CALL_SECONDS} s (hang)"
        if not isinstance(got, mxrt.MxrtError):
            return f"untyped {type(got).__name__}: {str(got)[:160]}"
        msg = str(got)
        if not msg.startswith(f"{fn.op}:"):
            return f"typed error does not start with '{fn.op}:': {msg[:160]}"
        if not any(a in msg for a in args):
            return f"typed error names none of {args}: {msg[:160]}"
        return None
    if expect == ERROR:
        return f"accepted, returned {type(got).__name__}"
    if expect == SAME and not same(got, want):
        return "wrong answer (differs from the good call)"
    return None


def cases(fn: Fn) -> list[tuple[str, dict[str, Any], str, tuple[str, ...]]]:
    out = []
    for name, kind in fn.kinds.items():
        for bad in BAD[kind]:
            try:
                v = bad.make(fn.good[name])
            except _Skip:
                continue
            out.append((f"{name}={bad.id}", {**fn.good, name: v}, bad.expect, (name,)))
    out = [c for c in out if not any(c[0].split("=", 1)[-1].startswith(p) for p in fn.skip)]
    out += [(p[0], {**fn.good, **p[1]}, p[3] if len(p) > 3 else ERROR, p[2]) for p in fn.pairs]
    return out


def _fn_id(fn: Fn) -> str:
    return f"{fn.op}[{','.join(fn.kinds)}]"


@pytest.mark.parametrize("fn", FNS, ids=[_fn_id(f) for f in FNS])
def test_probe(fn: Fn) -> None:
    status, want, _ = _run(fn.call, fn.good)
    assert status == "ok", f"the good call fails: {want!r}"
    failures = []
    for cid, kw, expect, args in cases(fn):
        why = classify(fn, kw, expect, args, want)
        if why is not None:
            failures.append(f"{fn.op}({cid}): {why}")
    assert not failures, f"{len(failures)} bad outcome(s):\n" + "\n".join(failures)


def test_probe_covers_every_public_function() -> None:
    public = {n for n in mxrt.__all__ if callable(getattr(mxrt, n)) and not isinstance(getattr(mxrt, n), type)}
    probed = {f.call.__name__ for f in FNS}
    assert public <= probed, f"public functions without a probe adapter: {sorted(public - probed)}"
    assert sum(len(cases(f)) for f in FNS) > 1500


# ---- one case per defect issue 9 listed (answers the generic table cannot check) ------------------------------

Q_E4M3 = mxrt.quantize_mx(np.ones((4, 64), np.float32), backend="numpy")
BIG_LENS = np.full(4, 2**30, np.int64)

#: (id, call, expected error class or None, regex for the message / the expected answer check)
DEFECTS: list[tuple[str, Callable[[], Any], type[Exception] | None, Any]] = [
    ("size_block", lambda: mxrt.quantize_mx(X, block_size=2**40), mxrt.ShapeError, r"'block_size' is 1099511627776"),
    ("size_block_2^30_no_alloc", lambda: mxrt.quantize_mx(X, block_size=2**30).scales.shape, None, (3, 1)),
    ("size_dual_block", lambda: mxrt.quantize_mx_dual(X, block_size=2**63), mxrt.ShapeError, "size limit"),
    ("size_gran_k", lambda: mxrt.per_token_cast_to_fp8(X, True, 2**40), mxrt.ShapeError, r"'gran_k'"),
    ("size_gran_k_2^30_no_alloc", lambda: mxrt.per_block_cast_to_fp8(X, True, 2**30)[1].shape, None, (1, 1)),
    ("size_align", lambda: mxrt.quantize_mx_grouped(XR.repeat(8, 1), LENS, align=2**40), mxrt.ShapeError, "'align'"),
    (
        "size_align_output",
        lambda: mxrt.quantize_mx_grouped(XR.repeat(8, 1), LENS, align=2**30),
        mxrt.ShapeError,
        r"^quantize_mx_grouped: the padded row bound",
    ),
    ("size_pad", lambda: mxrt.quantize_mx_dual_grouped(np.stack([X]), pad=2**40), mxrt.ShapeError, "'pad'"),
    ("size_rows", lambda: mxrt.pad_rows(XR, LENS, 4, rows=2**40), mxrt.ShapeError, "'rows'"),
    ("size_to_masked", lambda: mxrt.to_masked(XR, LENS, max_m=2**31 - 1), mxrt.ShapeError, "x_masked of shape"),
    ("size_m_indices", lambda: mxrt.group_lens_from_m_indices([0, 0], 2**40), mxrt.ShapeError, "'num_groups'"),
    ("size_moe_align", lambda: mxrt.moe_align_block_size(IDS, 1, 2**40), mxrt.ShapeError, "'num_experts'"),
    (
        "size_moe_sorting_before_alloc",
        lambda: mxrt.moe_sorting(IDS, np.ones((3, 2), np.float32), 2**30),
        mxrt.ShapeError,
        "capacity",
    ),
    (
        "size_broadcast_x",
        lambda: mxrt.quantize_mx(np.broadcast_to(np.float32(1), (1, 2**31))),
        mxrt.ShapeError,
        "element count",
    ),
    ("size_gemm_k", lambda: mxrt.gemm_mx((QA.data, QA.scales, "e4m3", 2**31), QB), mxrt.ShapeError, "k"),
    ("overflow_pad_group_layout", lambda: mxrt.pad_group_layout([2], 2**63 - 1), mxrt.ShapeError, "'align'"),
    ("overflow_pad_lengths", lambda: mxrt.pad_group_layout([2**63 - 2], 4), mxrt.ShapeError, "past 2\\^63-1"),
    (
        "overflow_align_2^64",
        lambda: mxrt.pad_group_layout([2], 2**64),
        mxrt.ShapeError,
        "'align' is 18446744073709551616",
    ),
    ("overflow_offsets_int64", lambda: mxrt.group_offsets(BIG_LENS)[-1], None, 2**32),
    (
        "tampered_block_size_0",
        lambda: mxrt.dequantize_mx(dataclasses.replace(Q_E4M3, block_size=0)),
        mxrt.ShapeError,
        r"^dequantize_mx: argument 'q.block_size' is 0",
    ),
    (
        "tampered_axis",
        lambda: mxrt.dequantize_mx(dataclasses.replace(Q_E4M3, axis=5)),
        mxrt.ShapeError,
        r"^dequantize_mx: q.axis is 5",
    ),
    (
        "tampered_shape",
        lambda: mxrt.dequantize_mx(dataclasses.replace(Q_E4M3, shape=(4.0, 64.0))),
        mxrt.DtypeError,
        r"q.shape\[0\]",
    ),
    (
        "tampered_in_gemm",
        lambda: mxrt.gemm_mx(dataclasses.replace(QA, block_size=None), QB),
        mxrt.DtypeError,
        r"^gemm_mx: argument 'a.block_size' is None",
    ),
    ("pack_fp4_range", lambda: mxrt.pack_fp4([16, 17]), mxrt.ShapeError, r"^pack_fp4: argument 'codes' holds"),
    ("pack_fp4_negative", lambda: mxrt.pack_fp4(np.array([-1, 2])), mxrt.ShapeError, "expected \\[0, 15\\]"),
    ("pack_fp4_float", lambda: mxrt.pack_fp4([1.0, 2.0]), mxrt.DtypeError, "integer dtype"),
    ("pack_fp4_str", lambda: mxrt.pack_fp4(["a", "b"]), mxrt.DtypeError, "integer dtype"),
    ("pack_fp4_axis", lambda: mxrt.pack_fp4([1, 2], axis=3), mxrt.ShapeError, r"^pack_fp4: argument 'axis' is 3"),
    ("unpack_fp4_n_more", lambda: mxrt.unpack_fp4(np.array([1, 2], np.uint8), 5), mxrt.ShapeError, "'n' is 5"),
    ("unpack_fp4_n_huge", lambda: mxrt.unpack_fp4(np.array([1, 2], np.uint8), 2**62), mxrt.ShapeError, "'n'"),
    ("unpack_fp4_n_negative", lambda: mxrt.unpack_fp4(np.array([1, 2], np.uint8), -1), mxrt.ShapeError, "'n' is -1"),
    ("unpack_fp4_odd", lambda: mxrt.unpack_fp4(np.array([0x21, 0x03], np.uint8), 3).tolist(), None, [1, 2, 3]),
    (
        "dequantize_dtype_foo",
        lambda: mxrt.dequantize_mx(Q_E4M3, dtype="foo"),
        mxrt.UnknownNameError,
        "'dtype' is 'foo'",
    ),
    ("dequantize_dtype_none", lambda: mxrt.dequantize_mx(Q_E4M3, dtype=None), mxrt.DtypeError, "'dtype' is None"),
    ("dequantize_dtype_object", lambda: mxrt.dequantize_mx(Q_E4M3, dtype=object()), mxrt.DtypeError, "'dtype'"),
    ("ragged_lens", lambda: mxrt.group_offsets([[1], [2, 3]]), mxrt.DtypeError, "not a rectangular array"),
    ("ragged_ids", lambda: mxrt.moe_sorting([[1], [2, 3]], [[1.0]], 4), mxrt.DtypeError, "'topk_ids'"),
    ("rank64_x", lambda: mxrt.quantize_mx(np.ones((1,) * 63 + (40,), np.float32)).scales.shape, None, (1,) * 63 + (2,)),
    (
        "rank64_weight",
        lambda: mxrt.preshuffle_weight(np.ones((1,) * 62 + (16, 32), np.uint8)),
        mxrt.ShapeError,
        "ndim <= 61",
    ),
    ("metric_broadcast", lambda: mxrt.calc_diff(np.ones(3), np.ones((3, 1))), mxrt.ShapeError, "do not broadcast"),
    ("metric_complex", lambda: mxrt.snr_db(np.ones(3, np.complex64), np.ones(3)), mxrt.DtypeError, "imaginary"),
    ("metric_none", lambda: mxrt.relative_error(None, np.ones(3)), mxrt.DtypeError, "'ref' has dtype object"),
    (
        "metric_fortran_bits",
        lambda: mxrt.relative_error(np.asfortranarray(X), X * 1.01) == mxrt.relative_error(X, X * 1.01),
        None,
        True,
    ),
    ("pad_value_none", lambda: mxrt.pad_rows(XR, LENS, 4, None), mxrt.DtypeError, "'pad_value' is None"),
    (
        "pad_value_half_on_int",
        lambda: mxrt.pad_rows(XR.astype(np.int32), LENS, 4, 0.5),
        mxrt.ShapeError,
        "'pad_value' is 0.5",
    ),
    ("pad_value_complex", lambda: mxrt.pad_rows(XR, LENS, 4, 1 + 2j), mxrt.DtypeError, "complex"),
    (
        "pad_value_fp16_range",
        lambda: mxrt.pad_rows(XR.astype(np.float16), LENS, 4, 1e300),
        mxrt.ShapeError,
        "beyond the range",
    ),
    (
        "pad_value_uint8_negative",
        lambda: mxrt.pad_rows(XR.astype(np.uint8), LENS, 4, -1),
        mxrt.ShapeError,
        r"\[0, 255\]",
    ),
    ("pad_value_nan_ok", lambda: bool(np.isnan(mxrt.pad_rows(XR, LENS, 4, np.nan)[3]).all()), None, True),
    ("beyond_fp32", lambda: mxrt.quantize_mx(np.full((1, 32), 1e39)), mxrt.ShapeError, "beyond float32's range"),
    ("beyond_fp32_rounds_to_inf", lambda: mxrt.quantize_mx(np.full((1, 32), 3.5e38)), mxrt.ShapeError, "3.5e\\+38"),
    (
        "fp32_max_ok",
        lambda: int(mxrt.quantize_mx(np.full((1, 32), float(np.finfo(np.float32).max))).scales[0, 0]),
        None,
        247,
    ),
    (
        "empty_groups_fast",
        lambda: mxrt.quantize_mx_dual_grouped(np.zeros((2**24, 0, 0), np.float32)).row.shape,
        None,
        (2**24, 0, 0),
    ),
    (
        "msg_dequantize_not_decode",
        lambda: mxrt.dequantize_mx(dataclasses.replace(Q_E4M3, fmt="foo")),
        mxrt.UnknownNameError,
        r"^dequantize_mx: q.fmt is 'foo'",
    ),
    (
        "msg_pad_rows_not_pad_group_layout",
        lambda: mxrt.pad_rows(XR, LENS, 0),
        mxrt.ShapeError,
        r"^pad_rows: argument 'align'",
    ),
    (
        "msg_from_masked_names_masked_m",
        lambda: mxrt.from_masked(np.zeros((1, 2)), [-1]),
        mxrt.ShapeError,
        r"^from_masked: argument 'masked_m'",
    ),
    (
        "msg_0d_x_not_axis",
        lambda: mxrt.quantize_mx(np.array(1.0, np.float32)),
        mxrt.ShapeError,
        r"argument 'x' has shape \(\)",
    ),
    ("unknown_fmt", lambda: mxrt.quantize_mx(X, "e4m4"), mxrt.UnknownNameError, "unknown format"),
    ("unknown_scale_mode", lambda: mxrt.quantize_mx(X, scale_mode="nearest"), mxrt.UnknownNameError, "unknown scale"),
    ("unknown_layout", lambda: mxrt.preshuffle_scales(S, "foo"), mxrt.UnknownLayoutError, "unknown scale layout"),
    ("unknown_name_is_value_error", lambda: mxrt.encode(X, "int4"), ValueError, "encode: argument 'fmt'"),
    # backend="gpu" without CuPy: its message ("CuPy / a device is not available") is the lead's dispatch work
]


@pytest.mark.parametrize(("cid", "call", "err", "want"), DEFECTS, ids=[d[0] for d in DEFECTS])
def test_defect(cid: str, call: Callable[[], Any], err: type[Exception] | None, want: Any) -> None:
    status, got, peak = _run(lambda: call(), {})
    assert peak <= PEAK_BYTES, f"{cid}: allocated {peak >> 20} MiB"
    if err is None:
        assert status == "ok", f"{cid}: raised {got!r}"
        assert got == want
    else:
        assert status == "raised" and isinstance(got, err), f"{cid}: {status} {got!r}"
        assert re.search(want, str(got)), str(got)
