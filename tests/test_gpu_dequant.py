"""mxrt.dequantize_mx on the GPU (kernels_src/quant/dequantize_mx.hip; marker ``gpu``, skips without a device):
bitwise the numpy twin (NaN as NaN) on every code x every scale byte of every format and output dtype, on tails,
N-D arrays, every preshuffled scale layout read in place, unaligned rows; outputs poisoned first; the GEMM gate
word; typed errors; torch tensors in and out."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats import MXArray

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import device_available  # noqa: E402

if not device_available():
    pytest.skip("no GPU", allow_module_level=True)

NCODES = {"e4m3": 256, "e5m2": 256, "e2m3": 64, "e3m2": 64, "e2m1": 16}
OUT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=0xFF, sync_after_launch=True) as session:
        yield session


def _pack(codes: np.ndarray, fmt: str) -> np.ndarray:
    if fmt != "e2m1":
        return codes
    c = codes if codes.shape[-1] % 2 == 0 else np.concatenate([codes, np.zeros_like(codes[..., :1])], -1)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def _host_q(codes: np.ndarray, scales: np.ndarray, fmt: str) -> MXArray:
    return MXArray(_pack(codes, fmt), scales, fmt, 32, codes.ndim - 1, codes.shape, "floor")


def _device_q(q: MXArray, layout: str | None = None) -> MXArray:
    s = cupy.asarray(q.scales)
    if layout is not None:
        s = mxrt.preshuffle_scales(s, layout)
    return MXArray(cupy.asarray(q.data), s, q.fmt, 32, q.axis, q.shape, q.scale_mode, layout)


def _assert_bitwise(got, want: np.ndarray, out: str) -> None:
    g = cupy.asnumpy(got)
    g = g.view(ml_dtypes.bfloat16) if out == "bfloat16" else g
    assert g.shape == want.shape and g.dtype == want.dtype
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(g.astype(np.float64)), nan)
    bits = {4: np.uint32, 2: np.uint16}[want.dtype.itemsize]
    np.testing.assert_array_equal(g[~nan].view(bits), want[~nan].view(bits))


@pytest.mark.parametrize("out", list(OUT))
@pytest.mark.parametrize("fmt", list(NCODES))
def test_every_code_times_every_scale_bitwise(fmt: str, out: str) -> None:
    n = NCODES[fmt]
    k = max(n, 32)
    codes = np.tile((np.arange(k) % n).astype(np.uint8), (256, 1))
    scales = np.arange(256, dtype=np.uint8)[:, None].repeat(k // 32, axis=1)
    q = _host_q(codes, scales, fmt)
    _assert_bitwise(mxrt.dequantize_mx(_device_q(q), OUT[out]), mxrt.dequantize_mx(q, OUT[out]), out)


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (37, 100), (5, 3, 64), (129, 1000), (3, 4097)], ids=str)
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "e3m2"])
@pytest.mark.parametrize("out", list(OUT))
def test_tails_and_nd_random_bitwise(fmt: str, out: str, shape: tuple) -> None:
    rng = np.random.default_rng(sum(shape))
    codes = rng.integers(0, NCODES[fmt], shape).astype(np.uint8)
    scales = rng.integers(0, 256, (*shape[:-1], -(-shape[-1] // 32))).astype(np.uint8)
    q = _host_q(codes, scales, fmt)
    _assert_bitwise(mxrt.dequantize_mx(_device_q(q), OUT[out]), mxrt.dequantize_mx(q, OUT[out]), out)


@pytest.mark.parametrize("layout", mxrt.SCALE_LAYOUTS)
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1", "e5m2"])
def test_scale_layouts_read_in_place(fmt: str, layout: str) -> None:
    rng = np.random.default_rng(5)
    codes = rng.integers(0, NCODES[fmt], (300, 200)).astype(np.uint8)
    scales = rng.integers(100, 150, (300, 7)).astype(np.uint8)
    q = _host_q(codes, scales, fmt)
    got = mxrt.dequantize_mx(_device_q(q, layout), "bfloat16")
    _assert_bitwise(got, mxrt.dequantize_mx(q, ml_dtypes.bfloat16), "bfloat16")


def test_turbo16x4_uint32_words() -> None:
    rng = np.random.default_rng(6)
    codes = rng.integers(0, 256, (40, 96)).astype(np.uint8)
    scales = rng.integers(100, 150, (40, 3)).astype(np.uint8)
    q = _host_q(codes, scales, "e4m3")
    dq = _device_q(q, "turbo16x4")
    dq = MXArray(dq.data, dq.scales.astype(cupy.uint32), "e4m3", 32, 1, q.shape, "floor", "turbo16x4")
    _assert_bitwise(mxrt.dequantize_mx(dq, np.float32), mxrt.dequantize_mx(q, np.float32), "float32")


def test_unaligned_rows_take_the_byte_path() -> None:
    """Codes starting at an odd address (a view one byte in): the vector path is off, the bits the same."""
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 256, (9, 64)).astype(np.uint8)
    scales = rng.integers(0, 256, (9, 2)).astype(np.uint8)
    q = _host_q(codes, scales, "e4m3")
    buf = cupy.zeros(9 * 64 + 1, cupy.uint8)
    buf[1:] = cupy.asarray(codes.ravel())
    dq = MXArray(buf[1:].reshape(9, 64), cupy.asarray(scales), "e4m3", 32, 1, (9, 64), "floor")
    _assert_bitwise(mxrt.dequantize_mx(dq, np.float16), mxrt.dequantize_mx(q, np.float16), "float16")


@pytest.mark.parametrize(
    ("fmt", "case", "raised"),
    [("e4m3", "window", 0), ("e4m3", "low", 1), ("e4m3", "high", 1), ("e4m3", "nan_code", 1), ("e4m3", "nan_block", 0),
     ("e5m2", "inf_code", 1), ("e5m2", "window", 0), ("e2m1", "window", 0), ("e2m1", "high", 1)],
)  # fmt: skip
def test_gate_word(fmt: str, case: str, raised: int) -> None:
    """The GEMM gate: raised exactly where a bf16 GEMM of the result would not be exact; the bf16 result and its
    zeroed K padding are the same either way."""
    from mxrt.ops.dequant import launch_dequant
    from mxrt.runtime import get_arch

    rng = np.random.default_rng(8)
    lo, hi = (17, 142) if fmt == "e5m2" else (10, 134)
    rows, k, ldo = 70, 100, 104
    codes = rng.integers(0, NCODES[fmt], (rows, k)).astype(np.uint8)
    if fmt == "e4m3":
        codes[(codes & 0x7F) == 0x7F] = 0
    elif fmt == "e5m2":
        codes[(codes & 0x7C) == 0x7C] = 0
    scales = rng.integers(lo, hi + 1, (rows, 4)).astype(np.uint8)
    if case == "low":
        scales[3, 1] = lo - 1
    elif case == "high":
        scales[60, 3] = hi + 1
    elif case == "nan_code":
        codes[10, 99] = 0xFF
    elif case == "inf_code":
        codes[69, 0] = 0x7C
    elif case == "nan_block":
        scales[2, 2] = 255
        codes[2, 70] = 0x7F
    q = _host_q(codes, scales, fmt)
    dq = _device_q(q)
    out = cupy.empty((rows, ldo), cupy.uint16)
    gate = cupy.zeros(1, cupy.uint32)
    launch_dequant("t", dq.data, dq.scales, out, rows, k, ldo, fmt, None, "bfloat16", get_arch(), gate)
    assert int(gate.get()[0]) == raised
    want = np.zeros((rows, ldo), ml_dtypes.bfloat16)
    want[:, :k] = mxrt.dequantize_mx(q, ml_dtypes.bfloat16)
    _assert_bitwise(out, want, "bfloat16")


def test_typed_errors() -> None:
    q = mxrt.quantize_mx(cupy.ones((4, 64), cupy.float32), "e4m3")
    with pytest.raises(mxrt.DtypeError, match="float64 for GPU arrays"):
        mxrt.dequantize_mx(q, np.float64)
    qc = mxrt.quantize_mx(np.ones((64, 4), np.float32), "e4m3", axis=0)
    dq = MXArray(cupy.asarray(qc.data), cupy.asarray(qc.scales), "e4m3", 32, 0, qc.shape, "floor")
    with pytest.raises(mxrt.LayoutError, match="last axis"):
        mxrt.dequantize_mx(dq)
    bad = MXArray(q.data[:, :32], q.scales, "e4m3", 32, 1, (4, 64), "floor")
    with pytest.raises(mxrt.ShapeError, match=r"q\.data"):
        mxrt.dequantize_mx(bad)
    with pytest.raises(mxrt.DtypeError, match=r"q\.scales"):
        mxrt.dequantize_mx(MXArray(q.data, q.scales.astype(cupy.int32), "e4m3", 32, 1, (4, 64), "floor"))


def test_quantize_then_dequantize_roundtrip_and_torch() -> None:
    x = cupy.asarray(np.random.default_rng(9).standard_normal((33, 96)).astype(np.float32))
    q = mxrt.quantize_mx(x, "e4m3")
    host = mxrt.dequantize_mx(MXArray(q.data.get(), q.scales.get(), "e4m3", 32, 1, q.shape, q.scale_mode))
    _assert_bitwise(mxrt.dequantize_mx(q), host, "float32")
    torch = pytest.importorskip("torch")
    tq = mxrt.quantize_mx(torch.as_tensor(x, device="cuda"), "e4m3")
    t = mxrt.dequantize_mx(tq, "bfloat16")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and t.is_cuda
    np.testing.assert_array_equal(t.float().cpu().numpy(), host.astype(ml_dtypes.bfloat16).astype(np.float32))
