"""gemm_mx typed errors: each bad argument raises the documented MxrtError subclass with an informative message."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt import DtypeError, LayoutError, ShapeError, UnknownNameError, UnsupportedArchError, reference


def q(rows, k, fmt="e4m3", seed=0):
    return mxrt.quantize_mx(np.random.default_rng(seed).standard_normal((rows, k)), fmt)


A = q(128, 256)
B = q(128, 256, seed=1)


def mx(base, **kw):
    fields = dict(
        data=base.data,
        scales=base.scales,
        fmt=base.fmt,
        block_size=base.block_size,
        axis=base.axis,
        shape=base.shape,
        scale_mode=base.scale_mode,
    )
    fields.update(kw)
    return mxrt.MXArray(**fields)


CASES = [
    # (id, kwargs for gemm_mx, error type, message fragment)
    ("b_scales_short", dict(a=A, b=mx(B, scales=B.scales[:, :7])), ShapeError,
     "gemm_mx: b.scales has shape (128, 7), expected (128, 8) for e4m3 of shape (128, 256), axis 1, block_size 32"),
    ("a_scales_dtype", dict(a=mx(A, scales=A.scales.astype(np.int32)), b=B), DtypeError, "a.scales has dtype int32"),
    ("a_data_shape", dict(a=mx(A, data=A.data[:, :200]), b=B), ShapeError, "a.data has shape (128, 200)"),
    ("k_mismatch", dict(a=A, b=q(128, 224)), ShapeError, "a has k = 256 (shape (128, 256)) but b has k = 224"),
    ("block_16", dict(a=mxrt.quantize_mx(np.ones((4, 64)), block_size=16), b=q(4, 64)), ShapeError,
     "a.block_size is 16, expected 32"),
    ("axis_0", dict(a=mxrt.quantize_mx(np.ones((64, 4)), axis=0), b=q(4, 64)), ShapeError,
     "a is quantized along axis 0, expected axis 1 (K"),
    ("not_2d", dict(a=mxrt.quantize_mx(np.ones((2, 4, 64))), b=q(4, 64)), ShapeError, "a has shape (2, 4, 64)"),
    ("fp6", dict(a=q(4, 64, "e2m3"), b=q(4, 64)), DtypeError, "formats (a.fmt, b.fmt) are ('e2m3', 'e4m3')"),
    ("e5m2_fp4", dict(a=q(4, 64, "e5m2"), b=q(4, 64, "e2m1")), DtypeError, "('e5m2', 'e2m1')"),
    ("a_list", dict(a=[A.data, A.scales, "e4m3"], b=B), DtypeError, "argument 'a' is a list, expected an MXArray"),
    ("a_ndarray", dict(a=np.ones((4, 4)), b=B), DtypeError, "argument 'a' is a ndarray"),
    ("raw_fmt_bad", dict(a=(A.data, A.scales, "e9m9"), b=B), DtypeError, "a[2] (fmt) is 'e9m9'"),
    ("raw_fmt_type", dict(a=(A.data, A.scales, 4), b=B), DtypeError, "a[2] (fmt) is 4"),
    ("raw_codes_dtype", dict(a=(A.data.astype(np.float32), A.scales, "e4m3"), b=B), DtypeError,
     "a codes have dtype float32"),
    ("raw_codes_1d", dict(a=(A.data.ravel(), A.scales, "e4m3"), b=B), ShapeError, "a codes have shape (32768,)"),
    ("raw_k_type", dict(a=(A.data, A.scales, "e4m3", 2.5), b=B), DtypeError, "'a[3] (k)' is 2.5"),
    ("raw_k_wrong", dict(a=(A.data, A.scales, "e4m3", 255), b=B), ShapeError, "expected (128, 255) for k = 255"),
    ("raw_fp4_k", dict(a=(A.data[:, :128], A.scales, "e2m1", 200), b=B), ShapeError, "packed e2m1"),
    ("raw_scales_shape", dict(a=(A.data, A.scales[:, :4], "e4m3"), b=B), ShapeError, "a.scales has shape (128, 4)"),
    ("layout_unknown", dict(a=(A.data, A.scales, "e4m3"), b=B, a_scale_layout="aiter16x16"), LayoutError,
     "argument 'a_scale_layout' is 'aiter16x16'"),
    ("layout_on_mxarray", dict(a=A, b=B, b_scale_layout="turbo16x4"), LayoutError, "'b' is an MXArray"),
    ("layout_wrong_size", dict(a=(A.data, A.scales, "e4m3"), b=B, a_scale_layout="aiter32x8"), ShapeError,
     "a.scales does not fit a_scale_layout='aiter32x8'"),
    ("layout_wrong_dtype",
     dict(a=(A.data, mxrt.preshuffle_scales(A.scales, "turbo16x4").astype(np.int16), "e4m3"), b=B,
          a_scale_layout="turbo16x4"), DtypeError, "a.scales does not fit a_scale_layout='turbo16x4'"),
    ("out_dtype_name", dict(a=A, b=B, out_dtype="float8"), DtypeError, "argument 'out_dtype' is 'float8'"),
    ("out_dtype_f64", dict(a=A, b=B, out_dtype="float64"), DtypeError, "argument 'out_dtype' is 'float64'"),
    ("out_dtype_int", dict(a=A, b=B, out_dtype=np.int32), DtypeError, "argument 'out_dtype'"),
    ("split_k_zero", dict(a=A, b=B, split_k=0), ShapeError, "argument 'split_k' is 0, expected 1 <= split_k <= 8"),
    ("split_k_too_many", dict(a=A, b=B, split_k=9), ShapeError, "split_k <= 8 = max(1, ceil(k / 32)) for k = 256"),
    ("split_k_float", dict(a=A, b=B, split_k=2.0), DtypeError, "argument 'split_k' is 2.0"),
    ("split_k_bool", dict(a=A, b=B, split_k=True), DtypeError, "argument 'split_k' is True"),
    ("split_k_k0", dict(a=q(3, 0), b=q(4, 0), split_k=2), ShapeError, "expected 1 <= split_k <= 1"),
    ("deterministic", dict(a=A, b=B, deterministic=1), DtypeError, "argument 'deterministic' is 1"),
    ("out_shape", dict(a=A, b=B, out_dtype="float32", out=np.zeros((128, 127), np.float32)), ShapeError,
     "argument 'out' has shape (128, 127), expected (128, 128)"),
    ("out_dtype_mismatch", dict(a=A, b=B, out=np.zeros((128, 128), np.float32)), DtypeError,
     "argument 'out' has dtype float32, expected bfloat16"),
    ("out_list", dict(a=A, b=B, out=[[0.0]]), DtypeError, "argument 'out' is a list"),
    ("backend", dict(a=A, b=B, backend="cuda"), UnknownNameError, "argument 'backend' is 'cuda'"),
    ("backend_gpu", dict(a=A, b=B, backend="gpu"), UnsupportedArchError, "CuPy or a GPU is not available"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "err", "msg"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_typed_errors(kwargs, err, msg):
    kwargs = dict(kwargs)
    a, b = kwargs.pop("a"), kwargs.pop("b")
    with pytest.raises(err) as info:
        mxrt.gemm_mx(a, b, **kwargs)
    assert msg in str(info.value), str(info.value)
    assert str(info.value).startswith("gemm_mx: ")
    assert isinstance(info.value, mxrt.MxrtError)


def test_read_only_out():
    out = np.zeros((128, 128), np.float32)
    out.flags.writeable = False
    with pytest.raises(ShapeError, match="read-only"):
        mxrt.gemm_mx(A, B, out_dtype="float32", out=out)


def test_errors_are_builtin_subclasses_and_survive_python_O():
    with pytest.raises(ValueError):
        mxrt.gemm_mx(A, q(128, 224))
    with pytest.raises(TypeError):
        mxrt.gemm_mx(A, B, out_dtype="int8")


def test_reference_validates_the_same_way_and_allows_float64():
    with pytest.raises(ShapeError, match=r"^reference\.gemm_mx: b\.scales has shape \(128, 7\)"):
        reference.gemm_mx(A, mx(B, scales=B.scales[:, :7]))
    with pytest.raises(DtypeError, match="out_dtype"):
        reference.gemm_mx(A, B, out_dtype="int32")
    assert reference.gemm_mx(A, B, out_dtype="float64").dtype == np.float64
