"""Every bad argument gets a typed error that names the op, the argument, what it got and what was expected."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
import mxrt.runtime
from mxrt import errors

X = np.ones((4, 64), np.float32)


def test_error_classes_inherit_builtins() -> None:
    assert issubclass(errors.ShapeError, ValueError) and issubclass(errors.ShapeError, errors.MxrtError)
    assert issubclass(errors.DtypeError, TypeError)
    assert issubclass(errors.LayoutError, ValueError)
    assert issubclass(errors.UnsupportedArchError, RuntimeError)
    assert issubclass(errors.CompileError, RuntimeError)
    assert issubclass(errors.UnknownNameError, ValueError)
    assert not issubclass(errors.UnknownNameError, errors.ShapeError)
    assert issubclass(errors.UnknownLayoutError, errors.UnknownNameError)
    assert issubclass(errors.UnknownLayoutError, errors.LayoutError)


@pytest.mark.parametrize(
    "x,match",
    [
        (np.ones((2, 32), np.int32), r"quantize_mx: argument 'x' has dtype int32, expected float16"),
        (np.ones((2, 32), np.complex64), r"has dtype complex64"),
        (np.ones((2, 32), np.uint8), r"has dtype uint8"),
        ([1.0, 2.0], r"quantize_mx: argument 'x' is a list, expected a numpy array"),
        (3.0, r"argument 'x' is a float"),
    ],
)
def test_wrong_input_type(x: object, match: str) -> None:
    with pytest.raises(mxrt.DtypeError, match=match):
        mxrt.quantize_mx(x)


@pytest.mark.parametrize(
    "kwargs,cls,match",
    [
        ({"fmt": "e4m4"}, mxrt.UnknownNameError, r"quantize_mx: argument 'fmt' is 'e4m4', an unknown format; expected"),
        ({"fmt": 8}, mxrt.DtypeError, r"argument 'fmt' is 8"),
        ({"scale_mode": "nearest"}, mxrt.UnknownNameError, r"'scale_mode' is 'nearest', an unknown scale mode"),
        ({"block_size": 24}, mxrt.ShapeError, r"argument 'block_size' is 24, expected a power of two"),
        ({"block_size": 0}, mxrt.ShapeError, r"argument 'block_size' is 0"),
        ({"block_size": -32}, mxrt.ShapeError, r"argument 'block_size' is -32"),
        ({"block_size": 32.0}, mxrt.DtypeError, r"argument 'block_size' is 32.0"),
        ({"block_size": True}, mxrt.DtypeError, r"argument 'block_size' is True"),
        ({"axis": 2}, mxrt.ShapeError, r"argument 'axis' is 2, expected an axis in \[-2, 2\)"),
        ({"axis": -3}, mxrt.ShapeError, r"argument 'axis' is -3"),
        ({"axis": 1.0}, mxrt.DtypeError, r"argument 'axis' is 1.0"),
        ({"backend": "cuda"}, mxrt.UnknownNameError, r"argument 'backend' is 'cuda', expected one of"),
    ],
)
def test_bad_arguments(kwargs: dict, cls: type, match: str) -> None:
    with pytest.raises(cls, match=match):
        mxrt.quantize_mx(X, **kwargs)


def test_scalar_input_has_no_axis() -> None:
    with pytest.raises(mxrt.ShapeError, match=r"quantize_mx: argument 'x' has shape \(\), expected an array of rank"):
        mxrt.quantize_mx(np.array(1.0, np.float32))


def test_gpu_backend_without_kernels_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mxrt.runtime, "device_available", lambda: False)
    with pytest.raises(mxrt.UnsupportedArchError, match=r"quantize_mx: backend 'gpu' was requested"):
        mxrt.quantize_mx(X, backend="gpu")


def test_env_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXRT_BACKEND", "numpy")
    assert mxrt.quantize_mx(X).scales.shape == (4, 2)
    monkeypatch.setenv("MXRT_BACKEND", "tpu")
    with pytest.raises(mxrt.UnknownNameError, match="MXRT_BACKEND is 'tpu'"):
        mxrt.quantize_mx(X)


def test_dequantize_errors() -> None:
    q = mxrt.quantize_mx(X)
    with pytest.raises(mxrt.DtypeError, match=r"dequantize_mx: argument 'q' is a ndarray, expected an MXArray"):
        mxrt.dequantize_mx(X)
    with pytest.raises(mxrt.DtypeError, match=r"argument 'dtype' is .*int8"):
        mxrt.dequantize_mx(q, np.int8)
    bad = mxrt.MXArray(q.data, q.scales[:, :1], q.fmt, q.block_size, q.axis, q.shape, q.scale_mode)
    with pytest.raises(mxrt.ShapeError, match=r"q.scales has shape \(4, 1\), expected \(4, 2\)"):
        mxrt.dequantize_mx(bad)
    bad = mxrt.MXArray(q.data[:, :3], q.scales, q.fmt, q.block_size, q.axis, q.shape, q.scale_mode)
    with pytest.raises(mxrt.ShapeError, match=r"q.data has shape \(4, 3\)"):
        mxrt.dequantize_mx(bad)


def test_dual_errors() -> None:
    with pytest.raises(mxrt.ShapeError, match=r"quantize_mx_dual: argument 'x' has shape \(4, 4, 4\)"):
        mxrt.quantize_mx_dual(np.ones((4, 4, 4), np.float32))
    with pytest.raises(mxrt.DtypeError, match="block_2d"):
        mxrt.quantize_mx_dual(X, block_2d="yes")
    with pytest.raises(mxrt.ShapeError, match="block_size"):
        mxrt.quantize_mx_dual(X, block_size=3)


def test_encode_errors() -> None:
    with pytest.raises(mxrt.UnknownNameError, match=r"encode: argument 'fmt' is 'int4'"):
        mxrt.encode(X, "int4")
    with pytest.raises(mxrt.DtypeError, match=r"encode: argument 'x' has dtype int64"):
        mxrt.encode(np.arange(3), "e4m3")
