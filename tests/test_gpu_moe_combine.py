"""GPU mxrt.moe_combine against its float32 twin, bit for bit (marker ``gpu``; skips without cupy or a device).

Outputs start poisoned (0xFF bytes: NaN) and every launch is synchronised, except in the CUDA-graph test. Cases:
random rows (vector and scalar paths, int32 / int64 src), NaN / Inf rows, k = 1, n not a multiple of 8, odd T,
T = 0 / R = 0, row strides, src outside [0, R) (NaN rows, no fault), torch in -> torch out without a copy.
On CUDA the twin runs with ``ftz=True`` (NVRTC's -ftz=true); the inputs here hold no subnormal except where a test
says so.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.layouts import ep as ep_np
from mxrt.ops import kernels

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

BF16 = np.dtype(ml_dtypes.bfloat16)
POISON = 0xFF


@pytest.fixture(autouse=True)
def poisoned_outputs():
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True):
        yield


@pytest.fixture(autouse=True)
def _supported():
    target = mxrt.runtime.get_arch().target
    if not kernels.op_supports("moe_combine", target):
        pytest.skip(f"moe_combine: no kernel for {target} in the dispatch table")


def _ftz() -> bool:
    return mxrt.runtime.get_arch().vendor == "nvidia"


def problem(seed, r, t, k, n, idx=np.int64, scale=4.0):
    rng = np.random.default_rng(seed)
    y = (rng.standard_normal((r, n)) * scale).astype(BF16)
    src = rng.integers(0, max(r, 1), (t, k)).astype(idx)
    w = rng.random((t, k)).astype(np.float32)
    return y, src, w


def on_gpu(y, src, w):
    return cupy.asarray(np.ascontiguousarray(y).view(np.uint16)), cupy.asarray(src), cupy.asarray(w)


def check(y, src, w, tag="", dy=None):
    dy2, ds, dw = on_gpu(y, src, w)
    got = mxrt.moe_combine(dy if dy is not None else dy2, ds, dw)
    assert type(got).__module__.startswith("cupy") and got.shape == (src.shape[0], y.shape[1]), tag
    want = ep_np.moe_combine(y, src, w, ftz=_ftz()).view(np.uint16)
    h = cupy.asnumpy(got).view(np.uint16)
    bad = np.argwhere(h != want)
    assert bad.size == 0, f"{tag}: {len(bad)} mismatches, first at {bad[0]}: got {h[tuple(bad[0])]:#06x}, want " + (
        f"{want[tuple(bad[0])]:#06x}"
    )
    return got


@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize(("t", "k", "n"), [(1, 1, 8), (7, 8, 7168 // 8), (333, 8, 64), (64, 6, 100), (9, 3, 1)])
def test_random_bitwise(t, k, n, idx):
    y, src, w = problem(t * 31 + k * 7 + n, 3 * t + 5, t, k, n, idx)
    check(y, src, w, f"T={t} k={k} n={n} {idx.__name__}")


def test_deepseek_row_and_many_tokens():
    y, src, w = problem(1, 8 * 1000, 1000, 8, 7168)  # 8000 rows of 7168: the vector path, grid-stride
    check(y, src, w, "T=1000 k=8 n=7168")
    y, src, w = problem(2, 200_000, 100_000, 2, 16)  # many tokens, short rows: 200k items, 8192 CTAs
    check(y, src, w, "T=100000 k=2 n=16")


def test_nan_inf_rows_and_k1():
    y, src, w = problem(3, 40, 30, 4, 24)
    y[0] = np.nan
    y[1, ::2] = np.inf
    y[2, 1::2] = -np.inf
    y[3, :8] = BF16.type(2.0**120)  # sums overflow fp32 for large weights
    w[:5] = 300.0
    src[:10, 0] = np.arange(10) % 4
    got = check(y, src, w, "nan/inf")
    h = cupy.asnumpy(got).view(np.uint16)
    assert (h[src[:, 0] == 0] == ep_np.BF16_NAN_BITS).all()
    y1, src1, w1 = problem(4, 9, 9, 1, 40)
    check(y1, src1, w1, "k=1")


def test_empty():
    for r, t in ((0, 0), (5, 0)):
        y, src, w = problem(5, r, t, 3, 16)
        got = check(y, src, w, f"R={r} T={t}")
        assert got.shape == (0, 16)
    y, src, w = problem(5, 4, 3, 2, 0)  # n = 0
    assert mxrt.moe_combine(*on_gpu(y, src, w)).shape == (3, 0)


def test_row_stride_and_unaligned_rows():
    y, src, w = problem(6, 50, 20, 4, 32)
    big = cupy.asarray(np.zeros((50, 48), np.uint16))
    big[:, :32] = cupy.asarray(y.view(np.uint16))
    check(y, src, w, "ldy=48", dy=big[:, :32])  # vector path with a row stride
    big44 = cupy.asarray(np.zeros((50, 44), np.uint16))  # ldy % 8 != 0: the scalar path
    big44[:, :32] = cupy.asarray(y.view(np.uint16))
    check(y, src, w, "ldy=44 (scalar)", dy=big44[:, :32])
    odd = cupy.asarray(np.zeros(50 * 32 + 1, np.uint16))[1:].reshape(50, 32)  # rows 2 bytes past 16: scalar path
    odd[...] = cupy.asarray(y.view(np.uint16))
    check(y, src, w, "misaligned", dy=odd)


def test_src_out_of_range_gives_nan_rows_not_a_fault():
    y, src, w = problem(7, 16, 12, 3, 16)
    bad = src.copy()
    bad[2, 1], bad[5, 0], bad[7, 2] = 16, -1, 2**40
    got = mxrt.moe_combine(*on_gpu(y, bad, w))
    h = cupy.asnumpy(got).view(np.uint16)
    assert (h[[2, 5, 7]] == ep_np.BF16_NAN_BITS).all()
    keep = [i for i in range(12) if i not in (2, 5, 7)]
    want = ep_np.moe_combine(y, src[keep], w[keep], ftz=_ftz()).view(np.uint16)
    np.testing.assert_array_equal(h[keep], want)


def test_subnormals_follow_the_platform():
    y = np.full((2, 8), 2.0**-130, BF16)
    y[1] = 1.0
    src, w = np.array([[0, 1]]), np.array([[1.0, 2.0**-127]], np.float32)
    got = cupy.asnumpy(mxrt.moe_combine(*on_gpu(y, src, w))).view(np.uint16)
    want = ep_np.moe_combine(y, src, w, ftz=_ftz()).view(np.uint16)
    np.testing.assert_array_equal(got, want)


def test_cuda_graph_capture_follows_new_data():
    y, src, w = problem(8, 300, 200, 8, 256)
    dy, ds, dw = on_gpu(y, src, w)
    with mxrt.runtime.debug():  # real allocations and no synchronisation while capturing
        mxrt.moe_combine(dy, ds, dw)  # compile outside the capture
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            out = mxrt.moe_combine(dy, ds, dw)
            graph = stream.end_capture()  # raises if the op synchronised
        y2, src2, w2 = problem(9, 300, 200, 8, 256)
        dy[...] = cupy.asarray(y2.view(np.uint16))
        ds[...] = cupy.asarray(src2)
        dw[...] = cupy.asarray(w2)
        graph.launch(stream=stream)
        stream.synchronize()
    want = ep_np.moe_combine(y2, src2, w2, ftz=_ftz()).view(np.uint16)
    np.testing.assert_array_equal(cupy.asnumpy(out).view(np.uint16), want)


def test_torch_in_torch_out_zero_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    y, src, w = problem(10, 64, 40, 8, 7168 // 8)
    ty = torch.from_numpy(y.view(np.int16)).cuda().view(torch.bfloat16)
    ts, tw = torch.from_numpy(src).cuda(), torch.from_numpy(w).cuda()
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as dbg:
        out = mxrt.moe_combine(ty, ts, tw)
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == torch.bfloat16 and out.shape == (40, 896)
    assert [launch[1] for launch in dbg.launches] == ["moe_combine"]  # one kernel: no copy of y, src or w
    want = ep_np.moe_combine(y, src, w, ftz=_ftz()).view(np.uint16)
    np.testing.assert_array_equal(out.view(torch.int16).cpu().numpy().view(np.uint16), want)
    back = cupy.from_dlpack(out.view(torch.int16))  # the result is the kernel's buffer, shared with torch
    assert back.data.ptr == out.data_ptr()
    with pytest.raises(mxrt.DtypeError, match="'topk_weights' has dtype float64"):
        mxrt.moe_combine(ty, ts, tw.double())
    with pytest.raises(mxrt.LayoutError, match="'src'"):
        mxrt.moe_combine(ty, ts.t().contiguous().t(), tw)


def test_runs_on_the_inputs_device_not_the_current_one():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    y, src, w = problem(11, 30, 20, 4, 64)
    with cupy.cuda.Device(1):
        dy, ds, dw = on_gpu(y, src, w)
    with cupy.cuda.Device(0):
        got = mxrt.moe_combine(dy, ds, dw)
    assert got.data.device_id == 1
    with cupy.cuda.Device(1):
        h = cupy.asnumpy(got)
    np.testing.assert_array_equal(h, ep_np.moe_combine(y, src, w, ftz=_ftz()).view(np.uint16))
