"""GPU quantizers against their numpy twins, bit for bit (marker ``gpu``; skips without cupy or a device).

Every output buffer is poisoned with 0xA5 before the kernel writes, every launch is followed by a device
synchronisation (so a fault fails the test that caused it), and skips come from the dispatch tables.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.runtime import specs

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

FMTS = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
MODES = ("floor", "ceil", "even", "rceil")
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
ROW_SHAPES = [(1, 1), (7, 31), (7, 33), (1, 4095), (3, 4096), (64, 256), (2, 3, 96)]
DUAL_SHAPES = [(1, 1), (7, 33), (33, 7), (31, 4095), (64, 256), (100, 130)]
KINDS = ("random", "wide", "edge")
POISON = 0xA5


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch: pytest.MonkeyPatch):
    """Outputs start as 0xA5 and every launch is synchronised and checked."""
    from mxrt.ops import quant

    monkeypatch.setattr(quant, "_empty", lambda shape: cupy.full(shape, POISON, dtype=cupy.uint8))
    real_launch = quant.launch

    def checked_launch(*args, **kw):
        real_launch(*args, **kw)
        cupy.cuda.get_current_stream().synchronize()  # raises on an asynchronous fault
        cupy.cuda.runtime.deviceSynchronize()

    monkeypatch.setattr(quant, "launch", checked_launch)


def _skip_unless_supported(op: str) -> None:
    target = mxrt.runtime.get_arch().target
    if not specs.op_supports(op, target):
        pytest.skip(f"{op}: no kernel for {target} in the dispatch table")


def make_input(shape: tuple[int, ...], kind: str, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if kind == "wide":
            x = np.ldexp(x, rng.integers(-140, 120, shape)).astype(np.float32)
        elif kind == "edge":
            flat = x.reshape(-1)
            n = flat.size
            specials = np.array(
                [0.0, -0.0, 1e-40, -1e-45, 3.0e38, -3.4e38, 448.0, 57344.0, 6.0, 7.5, 28.0, 2.0**-127, 2.0**-149],
                np.float32,
            )
            idx = rng.integers(0, n, max(1, n // 4))
            flat[idx] = rng.choice(specials, idx.size)
            flat[: min(n, 40)] = 0.0  # an all-zero block (or most of one)
            if n > 70:
                flat[64:70] = -0.0
            if n > 100:
                flat[rng.integers(0, n)] = np.nan
                flat[rng.integers(0, n)] = np.inf
                flat[rng.integers(0, n)] = -np.inf
                flat[rng.integers(0, n, 8)] = rng.standard_normal(8).astype(np.float32) * np.float32(1e-39)
        return x.astype(dtype)


def to_device(x: np.ndarray):
    """A CuPy copy of x, or None when this CuPy has no such dtype (bfloat16 then goes through numpy-in)."""
    try:
        return cupy.asarray(x)
    except (TypeError, ValueError):
        return None


def assert_same(op: str, what: str, got, want) -> None:
    got = cupy.asnumpy(got) if not isinstance(got, np.ndarray) else got
    assert got.shape == want.shape and got.dtype == want.dtype, f"{op} {what}: {got.dtype}{got.shape} vs {want.shape}"
    bad = np.argwhere(got != want)
    assert bad.size == 0, (
        f"{op} {what}: {len(bad)} mismatches, first at {tuple(bad[0])}: got {got[tuple(bad[0])]:#04x}, "
        f"want {want[tuple(bad[0])]:#04x}; poison 0xA5 left: {int(np.count_nonzero(got == POISON))}"
    )


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_mx_bitexact(fmt: str, mode: str, dtype: str) -> None:
    _skip_unless_supported("quantize_mx")
    for si, shape in enumerate(ROW_SHAPES):
        for ki, kind in enumerate(KINDS):
            x = make_input(shape, kind, DTYPES[dtype], seed=100 * si + ki)
            want = mxrt.quantize_mx(x, fmt, scale_mode=mode, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx(xd if xd is not None else x, fmt, scale_mode=mode, backend="gpu")
            tag = f"{fmt}/{mode}/{dtype} {shape} {kind}"
            assert_same("quantize_mx", f"scales {tag}", got.scales, want.scales)
            assert_same("quantize_mx", f"data {tag}", got.data, want.data)
            assert isinstance(got.data, np.ndarray) == (xd is None)


@pytest.mark.parametrize("block_2d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_mx_dual_bitexact(fmt: str, mode: str, dtype: str, block_2d: bool) -> None:
    _skip_unless_supported("quantize_mx_dual")
    for si, shape in enumerate(DUAL_SHAPES):
        for ki, kind in enumerate(KINDS):
            x = make_input(shape, kind, DTYPES[dtype], seed=1000 + 100 * si + ki)
            want = mxrt.quantize_mx_dual(x, fmt, scale_mode=mode, block_2d=block_2d, backend="numpy")
            xd = to_device(x)
            got = mxrt.quantize_mx_dual(
                xd if xd is not None else x, fmt, scale_mode=mode, block_2d=block_2d, backend="gpu"
            )
            tag = f"{fmt}/{mode}/{dtype}/{'2d' if block_2d else '1d'} {shape} {kind}"
            for part in ("row", "col"):
                g, w = getattr(got, part), getattr(want, part)
                assert g.shape == w.shape
                assert_same("quantize_mx_dual", f"{part} scales {tag}", g.scales, w.scales)
                assert_same("quantize_mx_dual", f"{part} data {tag}", g.data, w.data)


def test_numpy_in_numpy_out_any_axis() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((40, 3, 70), "random", np.float32, seed=7)
    for axis in (0, 1, 2):
        want = mxrt.quantize_mx(x, "e2m1", axis=axis, backend="numpy")
        got = mxrt.quantize_mx(x, "e2m1", axis=axis, backend="gpu")
        assert isinstance(got.data, np.ndarray)
        assert_same("quantize_mx", f"scales axis {axis}", got.scales, want.scales)
        assert_same("quantize_mx", f"data axis {axis}", got.data, want.data)


def test_float64_numpy_rounds_to_float32_first() -> None:
    _skip_unless_supported("quantize_mx")
    x = np.random.default_rng(3).standard_normal((5, 64))
    want = mxrt.quantize_mx(x, backend="numpy")
    got = mxrt.quantize_mx(x, backend="gpu")
    assert_same("quantize_mx", "data f64", got.data, want.data)


def test_cupy_runs_on_the_current_stream() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((64, 256), "random", np.float32, seed=9)
    want = mxrt.quantize_mx(x, backend="numpy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        xd = cupy.asarray(x)
        got = mxrt.quantize_mx(xd)  # auto: a CuPy array runs on the GPU
        stream.synchronize()
    assert_same("quantize_mx", "data on a side stream", got.data, want.data)


def test_cupy_layout_errors() -> None:
    _skip_unless_supported("quantize_mx")
    xd = cupy.asarray(make_input((64, 64), "random", np.float32, seed=1))
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.quantize_mx(xd[:, ::2])
    with pytest.raises(mxrt.LayoutError, match="last axis"):
        mxrt.quantize_mx(xd, axis=0)
    with pytest.raises(mxrt.DtypeError, match="float64"):
        mxrt.quantize_mx(xd.astype(cupy.float64))
    with pytest.raises(mxrt.UnsupportedArchError, match="block_size"):
        mxrt.quantize_mx(xd, block_size=16)
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.quantize_mx(xd, backend="numpy")


def test_unaligned_cupy_views_take_the_scalar_path() -> None:
    _skip_unless_supported("quantize_mx")
    x = make_input((9, 4097), "random", np.float32, seed=4)
    xd = cupy.asarray(x).reshape(-1)[1:].reshape(4, 9218)  # 4 bytes past an aligned address, odd row bytes
    want = mxrt.quantize_mx(cupy.asnumpy(xd), "e4m3", backend="numpy")
    got = mxrt.quantize_mx(xd, "e4m3")
    assert_same("quantize_mx", "unaligned data", got.data, want.data)


@pytest.mark.parametrize("shape", [(0, 32), (4, 0)])
def test_empty(shape: tuple[int, int]) -> None:
    _skip_unless_supported("quantize_mx")
    x = np.zeros(shape, np.float32)
    want = mxrt.quantize_mx(x, backend="numpy")
    got = mxrt.quantize_mx(cupy.asarray(x))
    assert got.data.shape == want.data.shape and got.scales.shape == want.scales.shape
    dual = mxrt.quantize_mx_dual(cupy.asarray(x))
    ref = mxrt.quantize_mx_dual(x, backend="numpy")
    assert dual.col.data.shape == ref.col.data.shape and dual.col.scales.shape == ref.col.scales.shape


def test_compile_cache_and_arch() -> None:
    arch = mxrt.runtime.get_arch()
    assert arch is mxrt.runtime.get_arch()
    assert arch.target in specs.KNOWN_TARGETS or arch.target.startswith(("sm_", "gfx"))
    spec = specs.select("quantize_mx", arch.target)
    k1 = mxrt.runtime.build(spec, spec.variants[0], arch)
    assert mxrt.runtime.build(spec, spec.variants[0], arch) is k1
