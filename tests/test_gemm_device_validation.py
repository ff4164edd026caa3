"""CPU tests of gemm_problem's device-array validation (no cupy needed): CuPy arrays are recognised by their module
(``mxrt._kinds.is_device_array``), so a small stand-in with ``shape``, ``dtype``, ``strides`` and ``flags`` walks
the same code. Also: an MXArray whose scales are preshuffled (``quantize_mx(..., scale_layout=...)``)."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.problems import gemm_problem


class _Flags:
    def __init__(self, c: bool) -> None:
        self.c_contiguous = c


class FakeDevice:
    """Looks like a CuPy array to mxrt (its type's module starts with 'cupy'); wraps a numpy array's metadata."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        self.shape, self.dtype, self.strides, self.ndim = a.shape, a.dtype, a.strides, a.ndim
        self.flags = _Flags(a.flags.c_contiguous)
        self.size = a.size

    @property
    def T(self) -> FakeDevice:
        return FakeDevice(self._a.T)


FakeDevice.__module__ = "cupy._fake"


def _ops(m=8, n=16, k=256, fa="e4m3", fb="e4m3"):
    rng = np.random.default_rng(0)
    qa = mxrt.quantize_mx(rng.standard_normal((m, k)), fa, backend="numpy")
    qb = mxrt.quantize_mx(rng.standard_normal((n, k)), fb, backend="numpy")
    return qa, qb


def dev(q: mxrt.MXArray, scales=None, layout=None) -> mxrt.MXArray:
    s = q.scales if scales is None else scales
    return mxrt.MXArray(FakeDevice(q.data), FakeDevice(s), q.fmt, 32, 1, q.shape, q.scale_mode, layout)


def test_device_operands_validate_without_reading():
    qa, qb = _ops()
    p = gemm_problem(dev(qa), dev(qb), out=FakeDevice(np.zeros((8, 16), np.uint16)))
    assert p.device and (p.m, p.n, p.k) == (8, 16, 256) and p.a_scale_layout is None
    p = gemm_problem((FakeDevice(qa.data), FakeDevice(qa.scales), "e4m3", 256), dev(qb), out_dtype="float32")
    assert p.device and p.a.scales._a is qa.scales  # the buffer as given


@pytest.mark.parametrize("layout", mxrt.SCALE_LAYOUTS)
def test_device_preshuffled_scales_are_checked_by_storage_shape(layout):
    qa, qb = _ops(m=70, k=200)
    s = mxrt.preshuffle_scales(qa.scales, layout)
    p = gemm_problem((FakeDevice(qa.data), FakeDevice(s), "e4m3"), dev(qb), a_scale_layout=layout)
    assert p.device and p.a_scale_layout == layout and p.a.scales._a is s
    mx = dev(qa, scales=s, layout=layout)  # what the GPU quantize_mx(..., scale_layout=) returns
    assert gemm_problem(mx, dev(qb)).a_scale_layout == layout
    with pytest.raises(mxrt.ShapeError if layout != "deepgemm_ue8m0" else mxrt.LayoutError):
        bad = np.ascontiguousarray(s)[:-1] if layout != "deepgemm_ue8m0" else np.ascontiguousarray(s)
        gemm_problem((FakeDevice(qa.data), FakeDevice(bad), "e4m3"), dev(qb), a_scale_layout=layout)


def test_device_misuse_is_typed():
    qa, qb = _ops()
    with pytest.raises(mxrt.DtypeError, match="same side"):
        gemm_problem(dev(qa), qb)
    with pytest.raises(mxrt.DtypeError, match="mixes host and device"):
        gemm_problem((FakeDevice(qa.data), qa.scales, "e4m3"), dev(qb))
    with pytest.raises(mxrt.DtypeError, match="expected a CuPy array"):
        gemm_problem(dev(qa), dev(qb), out=np.zeros((8, 16), np.float32), out_dtype="float32")
    with pytest.raises(mxrt.DtypeError, match="expected a numpy array"):
        gemm_problem(qa, qb, out=FakeDevice(np.zeros((8, 16), np.float32)), out_dtype="float32")
    with pytest.raises(mxrt.DtypeError, match="uint16 or bfloat16"):
        gemm_problem(dev(qa), dev(qb), out=FakeDevice(np.zeros((8, 16), np.float32)))
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        gemm_problem(dev(qa), dev(qb), out=FakeDevice(np.zeros((16, 8), np.float32)).T, out_dtype="float32")
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        gemm_problem((FakeDevice(np.zeros((8, 512), np.uint8)[:, ::2]), FakeDevice(qa.scales), "e4m3"), dev(qb))
    with pytest.raises(mxrt.DtypeError, match="expected uint8 element codes"):
        gemm_problem((FakeDevice(qa.data.view(np.int8)), FakeDevice(qa.scales), "e4m3"), dev(qb))
    with pytest.raises(mxrt.ShapeError, match="expected uint8"):
        gemm_problem((FakeDevice(qa.data), FakeDevice(qa.scales[:, :3]), "e4m3"), dev(qb))
    with pytest.raises(mxrt.ShapeError, match="k = 300"):
        gemm_problem((FakeDevice(qa.data), FakeDevice(qa.scales), "e4m3", 300), dev(qb))
    with pytest.raises(mxrt.DtypeError, match="host-only"):
        mxrt.reference.gemm_mx(dev(qa), dev(qb))
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.gemm_mx(dev(qa), dev(qb), backend="numpy")


@pytest.mark.parametrize("layout", mxrt.SCALE_LAYOUTS)
def test_host_mxarray_with_its_own_scale_layout(layout):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((40, 100)), rng.standard_normal((24, 100))
    qa = mxrt.quantize_mx(x, "e4m3", scale_layout=layout, backend="numpy")
    qb = mxrt.quantize_mx(w, "e2m1", backend="numpy")
    plain = mxrt.quantize_mx(x, "e4m3", backend="numpy")
    p = gemm_problem(qa, qb)
    assert p.a_scale_layout == layout
    np.testing.assert_array_equal(p.a.scales, plain.scales)
    np.testing.assert_array_equal(mxrt.gemm_mx(qa, qb, backend="numpy"), mxrt.gemm_mx(plain, qb, backend="numpy"))
    other = "aiter32x8" if layout != "aiter32x8" else "turbo16x4"
    with pytest.raises(mxrt.LayoutError, match="'a' is an MXArray"):
        gemm_problem(qa, qb, a_scale_layout=other)
