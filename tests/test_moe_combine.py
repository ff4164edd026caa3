"""mxrt.moe_combine on the CPU: the float32 twin against a float64 formula (within rounding) and against a scalar loop
(bitwise), its edge semantics (NaN / Inf / -0 / ftz), typed errors, and the kernel itself built for the host
(tests/support/simt_combine_host.cpp on the SIMT emulator) against the twin bit for bit. GPU: test_gpu_moe_combine.py.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import build_simt_lib, host_compiler

import mxrt
from mxrt.errors import DtypeError, LayoutError, ShapeError
from mxrt.layouts import ep as ep_np
from mxrt.ops import moe_combine as combine_ops
from mxrt.ops import moe_kernels

ROOT = Path(__file__).resolve().parents[1]
BF16 = np.dtype(ml_dtypes.bfloat16)
POISON = 0xA5A5


def problem(seed: int, r: int, t: int, k: int, n: int, idx=np.int64):
    rng = np.random.default_rng(seed)
    y = (rng.standard_normal((r, n)) * rng.uniform(0.1, 8.0)).astype(BF16)
    src = rng.integers(0, max(r, 1), (t, k)).astype(idx)
    w = rng.random((t, k)).astype(np.float32)
    return y, src, w


def scalar_loop(y: np.ndarray, src: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic, one element at a time with numpy float32 scalars (independent of the twin)."""
    t, k = src.shape
    yf = y.astype(np.float32)  # bf16 -> fp32 is exact
    out = np.empty((t, y.shape[1]), BF16)
    with np.errstate(all="ignore"):
        for i in range(t):
            for c in range(y.shape[1]):
                acc = np.float32(w[i, 0]) * yf[src[i, 0], c]
                for j in range(1, k):
                    acc = np.float32(acc + np.float32(w[i, j]) * yf[src[i, j], c])
                out[i, c] = np.float32(acc).astype(BF16) if not np.isnan(acc) else BF16.type(np.nan)
    return out


def bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


@pytest.mark.parametrize(("t", "k", "n"), [(5, 1, 7), (9, 3, 16), (4, 8, 33), (1, 8, 64)])
def test_twin_matches_scalar_loop_bitwise(t, k, n):
    y, src, w = problem(t * 100 + k, 11, t, k, n)
    got = ep_np.moe_combine(y, src, w)
    want = scalar_loop(y, src, w)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_twin_within_rounding_of_float64():
    y, src, w = problem(3, 300, 200, 8, 96)
    got = ep_np.moe_combine(y, src, w).astype(np.float64)
    terms = y.astype(np.float64)[src] * w.astype(np.float64)[:, :, None]
    ref = terms.sum(1)
    bound = np.abs(ref) * 2.0**-8 + np.abs(terms).sum(1) * 8 * 2.0**-24 + 1e-30
    assert (np.abs(got - ref) <= bound).all()


def test_twin_edges_nan_inf_negzero_and_k1():
    y = np.array([[1.0, -2.0, np.inf, 0.0], [np.nan, 3.0, -np.inf, -0.0], [2.0**127, 2.0**127, 1.0, 5.0]], BF16)
    w = np.array([[0.5, 0.25], [1.0, 1.0], [2.0, 0.0]], np.float32)
    src = np.array([[0, 0], [2, 2], [1, 0]])
    got = ep_np.moe_combine(y, src, w).astype(np.float32)
    np.testing.assert_array_equal(got[0], np.float32([0.75, -1.5, np.inf, 0.0]))
    np.testing.assert_array_equal(got[1], np.float32([np.inf, np.inf, 2.0, 10.0]))  # 2^127 + 2^127 overflows fp32
    # NaN in y propagates, Inf * 0 is NaN, -0 + 0 = +0
    assert np.isnan(got[2, 0]) and got[2, 1] == 6 and np.isnan(got[2, 2]) and bits(got[2:, 3].astype(BF16))[0] == 0
    assert (bits(ep_np.moe_combine(y, src, w))[np.isnan(got)] == ep_np.BF16_NAN_BITS).all()
    # k = 1: one product rounded once; a -0 product stays -0 (acc = p_0, not 0 + p_0)
    one = ep_np.moe_combine(y, np.array([[1]]), np.array([[1.0]], np.float32))
    assert bits(one)[0, 3] == 0x8000
    np.testing.assert_array_equal(bits(one)[0, [1, 3]], bits(y[1, [1, 3]]))


def test_twin_ftz_flushes_subnormals():
    tiny = np.array([[2.0**-130, 1.0]], BF16)  # a bf16 subnormal (= an fp32 subnormal)
    w = np.array([[1.0]], np.float32)
    assert ep_np.moe_combine(tiny, np.array([[0]]), w).astype(np.float32)[0, 0] == np.float32(2.0**-130)
    assert ep_np.moe_combine(tiny, np.array([[0]]), w, ftz=True).astype(np.float32)[0, 0] == 0
    w2 = np.array([[2.0**-100]], np.float32)  # 1.0 * 2^-100 is normal; 2^-100 * 2^-30 -> subnormal product
    y2 = np.array([[2.0**-30]], BF16)
    assert ep_np.moe_combine(y2, np.array([[0]]), w2, ftz=True).astype(np.float32)[0, 0] == 0
    assert ep_np.moe_combine(y2, np.array([[0]]), w2).astype(np.float32)[0, 0] == np.float32(2.0**-130)


def test_pair_rows_inverts_order_and_feeds_the_combine():
    rng = np.random.default_rng(0)
    t, k, n = 13, 3, 8
    ids = rng.integers(0, 5, (t, k))
    order = np.argsort(ids.ravel(), kind="stable")
    src = ep_np.pair_rows(order)
    np.testing.assert_array_equal(src[order], np.arange(t * k))
    pairs = (rng.standard_normal((t * k, n))).astype(BF16)
    sent = pairs[order]  # send order
    w = rng.random((t, k)).astype(np.float32)
    np.testing.assert_array_equal(
        bits(ep_np.moe_combine(sent, src.reshape(t, k), w)),
        bits(ep_np.moe_combine(pairs, np.arange(t * k).reshape(t, k), w)),
    )
    with pytest.raises(ShapeError, match="permutation"):
        ep_np.pair_rows(np.array([0, 0, 1]))


def test_public_face_numpy_and_empty():
    y, src, w = problem(1, 6, 4, 2, 10)
    got = mxrt.moe_combine(y, src, w, backend="numpy")
    np.testing.assert_array_equal(bits(got), bits(ep_np.moe_combine(y, src, w)))
    assert got.dtype == BF16 and got.shape == (4, 10)
    e = mxrt.moe_combine(np.zeros((0, 10), BF16), np.zeros((0, 2), np.int32), np.zeros((0, 2), np.float32))
    assert e.shape == (0, 10) and e.dtype == BF16
    u = mxrt.moe_combine(y.view(np.uint16), src, w, backend="numpy")  # uint16 bits read as bf16
    np.testing.assert_array_equal(bits(u), bits(got))


def test_bad_input_is_typed():
    y, src, w = problem(2, 6, 4, 2, 10)
    f = mxrt.moe_combine
    with pytest.raises(DtypeError, match="'y' has dtype float32"):
        f(y.astype(np.float32), src, w)
    with pytest.raises(DtypeError, match="'src' has dtype float64"):
        f(y, src.astype(np.float64), w)
    with pytest.raises(DtypeError, match="'topk_weights' has dtype float64"):
        f(y, src, w.astype(np.float64))
    with pytest.raises(DtypeError, match="'src' is a list"):
        f(y, src.tolist(), w)
    with pytest.raises(ShapeError, match=r"'y' has shape \(60,\)"):
        f(y.ravel(), src, w)
    with pytest.raises(ShapeError, match=r"'src' has shape \(8,\)"):
        f(y, src.ravel(), w)
    with pytest.raises(ShapeError, match="'topk_weights' has shape"):
        f(y, src, w[:, :1])
    with pytest.raises(ShapeError, match=r"k = src\.shape"):
        f(y, src[:, :0], w[:, :0])
    with pytest.raises(ShapeError, match=r"holds the row 6, expected rows in \[0, 6\)"):
        f(y, np.where(src == src[0, 0], 6, src), w)
    with pytest.raises(ShapeError, match="holds the row -1"):
        f(y, np.where(src == src[0, 0], -1, src), w)
    with pytest.raises(ShapeError, match=r"expected rows in \[0, 0\)"):
        f(y[:0], src, w)


def test_launch_config_and_variants():
    assert {dict(d)["VEC"] for d in moe_kernels.MOE_COMBINE.variants} == {0, 1}
    assert {dict(d)["IDX_BYTES"] for d in moe_kernels.MOE_COMBINE.variants} == {4, 8}
    cfg = combine_ops.combine_config(16384 * 7168 // 8)
    assert cfg.grid == (moe_kernels.COMBINE_MAX_CTAS, 1, 1) and cfg.block == (moe_kernels.COMBINE_THREADS, 1, 1)
    assert combine_ops.combine_config(1).grid == (1, 1, 1)
    assert mxrt.moe_combine.__module__ == "mxrt.api.layouts" and "moe_combine" in mxrt.GPU_OPS


def test_layout_errors_of_the_gpu_op_without_a_device():
    class Fake:  # the strides check runs before anything touches a device
        def __init__(self, shape, strides):
            self.shape, self.strides = shape, strides

    with pytest.raises(LayoutError, match="rows contiguous along n"):
        combine_ops._row_stride(Fake((4, 8), (16, 4)))
    with pytest.raises(LayoutError, match="row stride of 8 bytes"):
        combine_ops._row_stride(Fake((4, 8), (8, 2)))
    assert combine_ops._row_stride(Fake((4, 8), (48, 2))) == 24
    assert combine_ops._row_stride(Fake((1, 8), (0, 2))) == 8
    assert combine_ops._row_stride(Fake((0, 16), (0, 0))) == 16  # empty CuPy arrays carry any strides
    assert combine_ops._row_stride(Fake((3, 0), (0, 0))) == 0


# ---- the kernel on the host SIMT emulator ---------------------------------------------------------------------

_LIBS: dict[tuple, ctypes.CDLL] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_combine")


def _lib(build_dir: Path, vec: int, idx_bytes: int, ftz: bool) -> ctypes.CDLL:
    key = (vec, idx_bytes, ftz)
    if key not in _LIBS:
        out = build_dir / f"combine_v{vec}_i{idx_bytes}{'_ftz' if ftz else ''}.so"
        flags = [f"-DTHREADS={moe_kernels.COMBINE_THREADS}", f"-DVEC={vec}", f"-DIDX_BYTES={idx_bytes}"]
        _LIBS[key] = build_simt_lib(out, "simt_combine_host.cpp", flags + (["-DMXRT_HOST_FTZ"] if ftz else []))
    return _LIBS[key]


def run_host(build_dir, y, src, w, *, vec, ftz=False, gx=3, order=2, ldy=None):
    """The kernel on the host: y [R, ldy] storage (the first n columns are the rows), poisoned output."""
    r, n = y.shape
    t, k = src.shape
    ldy = ldy or n
    store = np.zeros((max(r, 1), ldy), np.uint16)
    store[:r, :n] = y.view(np.uint16)
    s = np.ascontiguousarray(src)
    wf = np.ascontiguousarray(w, np.float32)
    out = np.full((t, n), POISON, np.uint16)
    so = _lib(build_dir, vec, s.dtype.itemsize, ftz)
    ll = ctypes.c_longlong
    rc = so.simt_run(
        ctypes.c_void_p(store.ctypes.data),
        ctypes.c_void_p(s.ctypes.data),
        ctypes.c_void_p(wf.ctypes.data),
        ctypes.c_void_p(out.ctypes.data),
        ll(r),
        ll(t),
        ctypes.c_int(k),
        ll(n),
        ll(ldy),
        ctypes.c_int(gx),
        ctypes.c_int(order),
    )
    assert rc == 0, so.simt_error().decode()
    return out


@pytest.mark.parametrize("ftz", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize(("vec", "n"), [(1, 64), (1, 8), (0, 13), (0, 1)])
def test_host_kernel_bitwise(build_dir, vec, n, idx, ftz):
    for t, k in ((7, 8), (3, 1), (5, 11)):
        y, src, w = problem(t * k + n, 17, t, k, n, idx)
        y[2, : min(n, 3)] = np.array([np.nan, np.inf, -np.inf], BF16)[: min(n, 3)]
        y[5, 0] = BF16.type(2.0**-130)  # subnormal: flushed in the ftz build
        got = run_host(build_dir, y, src, w, vec=vec, ftz=ftz, gx=2)  # fewer threads than items: grid-stride
        want = ep_np.moe_combine(y, src, w, ftz=ftz)
        np.testing.assert_array_equal(got, bits(want), err_msg=f"t={t} k={k}")


def test_host_kernel_row_stride_and_out_of_range_rows(build_dir):
    y, src, w = problem(9, 10, 6, 4, 24)
    got = run_host(build_dir, y, src, w, vec=1, ldy=40)
    np.testing.assert_array_equal(got, bits(ep_np.moe_combine(y, src, w)))
    bad = src.copy()
    bad[1, 2], bad[4, 0] = 10, -3  # outside [0, R): never read, the token's row is NaN
    got = run_host(build_dir, y, bad, w, vec=0)
    assert (got[[1, 4]] == ep_np.BF16_NAN_BITS).all()
    keep = [0, 2, 3, 5]
    np.testing.assert_array_equal(got[keep], bits(ep_np.moe_combine(y, src[keep], w[keep])))
