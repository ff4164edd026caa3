"""Grouped GPU quantizers against their numpy twins, bit for bit (marker ``gpu``; skips without cupy or a device).

Outputs (codes, scales and the int64 offsets) are poisoned with 0xA5 and every launch is synchronised, except
in the CUDA-graph test, which proves that quantize_mx_grouped never synchronises with the host: the whole op is
captured on a blocking stream (any stream synchronisation or device-to-host copy invalidates the capture) and
the replayed graph must follow new data and new group sizes written to the same device buffers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.ops import kernels

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
FMTS = ("e4m3", "e5m2", "e2m1")
KINDS = ("random", "wide", "edge", "tiny")
POISON = 0xA5
# (total_m, k, G, empty groups): empty input, G = 1, 7, 32, odd k, unbalanced, many empty groups
CASES = [
    (0, 64, 0, 0),
    (0, 64, 3, 0),
    (1, 1, 1, 0),
    (77, 33, 1, 0),
    (300, 96, 7, 2),
    (257, 31, 7, 0),
    (600, 130, 32, 5),
]
CASES += [(64, 256, 32, 31), (513, 300, 7, 3)]
# k % 16 == 0 (below) and k >= 2560 (test_rowcol_scales_transposed): the row+col kernel's s_col stored transposed and
# put in place by transpose_u8 (flag SCALES_T), over several units along M and a 16-column last column tile
T_CASES = [(300, 96, 7, 2), (64, 256, 32, 31), (2100, 400, 32, 4), (700, 2880, 8, 1)]
DUAL_SHAPES = [(1, 1, 1), (3, 40, 70), (2, 33, 31), (4, 64, 256), (2, 100, 130)]


@pytest.fixture
def poisoned():
    """Outputs start as 0xA5 bytes and every launch is synchronised and checked (the runtime's test hook)."""
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as session:
        yield session


def _skip_unless_supported(op: str) -> None:
    target = mxrt.runtime.get_arch().target
    if not kernels.op_supports(op, target):
        pytest.skip(f"{op}: no kernel for {target} in the dispatch table")


def split(total: int, num_groups: int, seed: int, empty: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if num_groups == 0:
        return np.zeros(0, np.int64)
    w = rng.exponential(1.0, num_groups)
    w[rng.choice(num_groups, min(empty, num_groups - 1), replace=False)] = 0
    lens = np.floor(w / w.sum() * total).astype(np.int64)
    lens[int(np.argmax(w))] += total - lens.sum()
    return lens


def make_input(shape: tuple[int, ...], kind: str, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        flat = x.reshape(-1)
        n = flat.size
        if kind == "wide":
            x = np.ldexp(x, rng.integers(-140, 120, shape)).astype(np.float32)
        elif kind == "tiny":  # block amax near 2^-100 .. 2^-135: the fp8 fast path's boundary, subnormals
            lead = (*shape[:-1], 1)
            x = np.ldexp(x, rng.integers(-135, -95, lead)).astype(np.float32)
            if n:
                x.reshape(-1)[rng.integers(0, n, max(1, n // 8))] = np.float32(1e-40)
        elif kind == "edge" and n:
            specials = np.array(
                [0.0, -0.0, 1e-40, -1e-45, 3.0e38, -3.4e38, 448.0, 57344.0, 6.0, 7.5, 2.0**-127, 2.0**-149], np.float32
            )
            idx = rng.integers(0, n, max(1, n // 4))
            flat[idx] = rng.choice(specials, idx.size)
            flat[: min(n, 40)] = 0.0
            if n > 100:
                flat[rng.integers(0, n)] = np.nan
                flat[rng.integers(0, n)] = np.inf
                flat[rng.integers(0, n)] = -np.inf
        return x.astype(dtype)


def to_device(x: np.ndarray):
    try:
        return cupy.asarray(x)
    except (TypeError, ValueError):
        return None  # this CuPy has no such dtype: bfloat16 goes through numpy-in


def assert_same(what: str, got, want) -> None:
    got = cupy.asnumpy(got) if not isinstance(got, np.ndarray) else got
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    )
    bad = np.argwhere(got != want)
    assert bad.size == 0, (
        f"{what}: {len(bad)} mismatches, first at {tuple(bad[0])}: got {got[tuple(bad[0])]}, want "
        f"{want[tuple(bad[0])]}; poison left: {int(np.count_nonzero(got == POISON))}"
    )


def compare_grouped(tag: str, got: mxrt.MXGrouped, want: mxrt.MXGrouped) -> None:
    assert got.row.shape == want.row.shape
    assert_same(f"row scales {tag}", got.row.scales, want.row.scales)
    assert_same(f"row data {tag}", got.row.data, want.row.data)
    assert_same(f"offs_pad_row {tag}", got.offs_pad_row, want.offs_pad_row)
    assert (got.col is None) == (want.col is None)
    if want.col is not None:
        assert got.col.shape == want.col.shape
        assert_same(f"col scales {tag}", got.col.scales, want.col.scales)
        assert_same(f"col data {tag}", got.col.data, want.col.data)
        assert_same(f"offs_pad_col {tag}", got.offs_pad_col, want.offs_pad_col)


@pytest.mark.parametrize("variant", ["row-u1", "row-u2", "rowcol"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FMTS)
def test_grouped_bitexact(poisoned, monkeypatch: pytest.MonkeyPatch, fmt: str, dtype: str, variant: str) -> None:
    _skip_unless_supported("quantize_mx_grouped")
    from mxrt.ops import grouped

    colwise = variant == "rowcol"
    if not colwise:  # both builds of the rowwise kernel (define UNROLL)
        monkeypatch.setattr(grouped, "ROWWISE_UNROLL", int(variant[-1]))
    for ci, (total, k, num_groups, empty) in enumerate(CASES):
        lens = split(total, num_groups, seed=ci, empty=empty)
        for ki, kind in enumerate(KINDS):
            x = make_input((total, k), kind, DTYPES[dtype], seed=10 * ci + ki)
            want = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=colwise, backend="numpy")
            xd = to_device(x)
            lens_d = cupy.asarray(lens.astype(np.int32 if ki % 2 else np.int64))
            if xd is None:
                got = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=colwise, backend="gpu")
                assert isinstance(got.row.data, np.ndarray)
            else:
                got = mxrt.quantize_mx_grouped(xd, lens_d, fmt, colwise=colwise)
                assert isinstance(got.row.data, cupy.ndarray) and isinstance(got.offs_pad_row, cupy.ndarray)
            compare_grouped(f"{fmt}/{dtype} T={total} k={k} G={num_groups} {kind}", got, want)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_rowcol_scales_transposed(poisoned, monkeypatch: pytest.MonkeyPatch, fmt: str, dtype: str) -> None:
    """The row+col kernel with s_col stored transposed (flag SCALES_T) and transpose_u8 after it, on every k % 16 == 0
    (the launcher's k >= 2560 lifted, and at its size): bitwise the numpy twin, poisoned outputs."""
    _skip_unless_supported("quantize_mx_grouped")
    from mxrt.ops import grouped

    assert grouped.rowcol_scales_transposed(2880, 64) and not grouped.rowcol_scales_transposed(2048, 64)
    monkeypatch.setattr(grouped, "ROWCOL_SCALES_T_MIN_K", 0)
    for ci, (total, k, num_groups, empty) in enumerate(T_CASES):
        assert grouped.rowcol_scales_transposed(k, 32)
        lens = split(total, num_groups, seed=50 + ci, empty=empty)
        x = make_input((total, k), KINDS[ci % len(KINDS)], DTYPES[dtype], seed=500 + ci)
        want = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=True, backend="numpy")
        xd = to_device(x)
        if xd is None:  # bfloat16: numpy in and out
            got = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=True, backend="gpu")
        else:
            got = mxrt.quantize_mx_grouped(xd, cupy.asarray(lens), fmt, colwise=True)
        compare_grouped(f"T {fmt}/{dtype} T={total} k={k} G={num_groups}", got, want)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
@pytest.mark.parametrize("mode", ["floor", "ceil", "even", "rceil"])
def test_grouped_scale_modes_and_alignments(poisoned, fmt: str, mode: str) -> None:
    _skip_unless_supported("quantize_mx_grouped")
    lens = np.array([5, 0, 40, 1, 0, 100], np.int64)
    x = make_input((146, 200), "wide", np.float32, seed=4)
    for align, col_align in ((32, 128), (1, 32), (16, 64), (128, 256)):
        want = mxrt.quantize_mx_grouped(
            x, lens, fmt, align=align, colwise=True, col_align=col_align, scale_mode=mode, backend="numpy"
        )
        got = mxrt.quantize_mx_grouped(
            cupy.asarray(x), cupy.asarray(lens), fmt, align=align, colwise=True, col_align=col_align, scale_mode=mode
        )
        compare_grouped(f"{fmt}/{mode} align {align}/{col_align}", got, want)


def clamp_model(x: np.ndarray, lens: np.ndarray, fmt: str, colwise: bool) -> mxrt.MXGrouped:
    """What the kernels do with inconsistent lens (mxrt.ops.grouped docstring): clamp, cut at total_m, then the
    ordinary layout of the cut lens; buffers keep the host bound of the real total_m."""
    total = x.shape[0]
    s = np.minimum(np.concatenate([[0], np.cumsum(np.clip(lens, 0, total))]), total)
    cut = np.diff(s)
    sub = mxrt.quantize_mx_grouped(x[: int(s[-1])], cut, fmt, colwise=colwise, backend="numpy")
    m_ub = mxrt.padded_rows_upper_bound(total, lens.size, 32)
    row_q = np.zeros((m_ub, sub.row.data.shape[1]), np.uint8)
    row_s = np.full((m_ub, sub.row.scales.shape[1]), 127, np.uint8)
    row_q[: sub.row.data.shape[0]], row_s[: sub.row.scales.shape[0]] = sub.row.data, sub.row.scales
    row = mxrt.MXArray(row_q, row_s, fmt, 32, 1, (m_ub, x.shape[1]), "rceil")
    col = None
    if colwise:
        mc = mxrt.padded_rows_upper_bound(total, lens.size, 128)
        packed = fmt == "e2m1"
        col_q = np.zeros((x.shape[1], mc // 2 if packed else mc), np.uint8)
        col_s = np.full((x.shape[1], mc // 32), 127, np.uint8)
        col_q[:, : sub.col.data.shape[1]], col_s[:, : sub.col.scales.shape[1]] = sub.col.data, sub.col.scales
        col = mxrt.MXArray(col_q, col_s, fmt, 32, 1, (x.shape[1], mc), "rceil")
    return mxrt.MXGrouped(row, col, sub.offs_pad_row, sub.offs_pad_col)


@pytest.mark.parametrize("colwise", [False, True], ids=["row", "rowcol"])
def test_grouped_inconsistent_lens_are_clamped_and_cut(poisoned, colwise: bool) -> None:
    _skip_unless_supported("quantize_mx_grouped")
    x = make_input((200, 96), "random", np.float32, seed=9)
    for lens in ([50, 0, 60], [150, 100, 80], [-5, 120, 300], [0, 0, 0], [10**12, 1, 1], [-(2**40), 200, 0]):
        lens = np.array(lens, np.int64)
        got = mxrt.quantize_mx_grouped(cupy.asarray(x), cupy.asarray(lens), "e4m3", colwise=colwise)
        compare_grouped(f"lens {lens.tolist()}", got, clamp_model(x, lens, "e4m3", colwise))


def test_grouped_cuda_graph_capture_never_syncs() -> None:
    _skip_unless_supported("quantize_mx_grouped")
    if mxrt.runtime.get_arch().vendor != "nvidia":
        pytest.skip("the capture test uses CUDA stream capture")
    rng = np.random.default_rng(0)
    total, k = 1000, 256
    lens1 = np.array([100, 0, 333, 7, 560], np.int64)
    lens2 = np.array([0, 999, 1, 0, 0], np.int64)  # same total, other split
    x1 = make_input((total, k), "random", np.float16, seed=1)
    x2 = (rng.standard_normal((total, k)) * 100).astype(np.float16)
    xd, lens_d = cupy.asarray(x1), cupy.asarray(lens1)
    for colwise in (False, True):
        mxrt.quantize_mx_grouped(xd, lens_d, "e4m3", colwise=colwise)  # compile and warm the memory pool
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()  # a blocking stream: a legacy-stream sync during capture fails too
        with stream:
            stream.begin_capture()
            got = mxrt.quantize_mx_grouped(xd, lens_d, "e4m3", colwise=colwise)
            graph = stream.end_capture()  # raises if anything in the op synchronised (capture invalidated)
        for x, lens in ((x1, lens1), (x2, lens2), (x1, lens2)):
            xd[...] = cupy.asarray(x)
            lens_d[...] = cupy.asarray(lens)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            want = mxrt.quantize_mx_grouped(x, lens, "e4m3", colwise=colwise, backend="numpy")
            compare_grouped(f"graph replay colwise={colwise} lens {lens.tolist()}", got, want)


def test_grouped_device_argument_errors(poisoned) -> None:
    _skip_unless_supported("quantize_mx_grouped")
    from mxrt.ops import grouped

    xd = cupy.zeros((10, 32), cupy.float32)
    with pytest.raises(mxrt.DtypeError, match="on the device"):
        mxrt.quantize_mx_grouped(xd, np.array([10]))
    with pytest.raises(mxrt.DtypeError, match="int32 or int64"):
        mxrt.quantize_mx_grouped(xd, cupy.array([10.0]))
    with pytest.raises(mxrt.DtypeError, match="int32 or int64"):
        mxrt.quantize_mx_grouped(xd, cupy.array([10], cupy.uint32))
    with pytest.raises(mxrt.ShapeError, match="1-D"):
        mxrt.quantize_mx_grouped(xd, cupy.array([[10]]))
    # kernel limits: UnsupportedArchError through the public op (mxrt.api.dispatch), ShapeError from the op
    with pytest.raises(mxrt.UnsupportedArchError, match="at most 1024"):
        mxrt.quantize_mx_grouped(xd, cupy.zeros(1025, cupy.int64))
    with pytest.raises(mxrt.ShapeError, match="at most 1024"):
        grouped.quantize_mx_grouped_gpu(xd, cupy.zeros(1025, cupy.int64))
    with pytest.raises(mxrt.LayoutError, match="contiguous"):
        mxrt.quantize_mx_grouped(xd, cupy.zeros(8, cupy.int64)[::2])
    with pytest.raises(mxrt.UnsupportedArchError, match="multiple of align"):
        mxrt.quantize_mx_grouped(xd, cupy.array([10]), colwise=True, align=96, col_align=128)
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.quantize_mx_grouped(cupy.zeros((32, 10), cupy.float32).T, cupy.array([10]))
    # numpy in, numpy lens: checked on the host like the twin
    with pytest.raises(mxrt.ShapeError, match="sums to"):
        mxrt.quantize_mx_grouped(np.zeros((10, 32), np.float32), np.array([3, 3]), backend="gpu")


@pytest.mark.parametrize("pad", [32, 128])
@pytest.mark.parametrize("block_2d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FMTS)
def test_dual_grouped_bitexact(poisoned, fmt: str, dtype: str, block_2d: bool, pad: int) -> None:
    _skip_unless_supported("quantize_mx_dual_grouped")
    for si, shape in enumerate(DUAL_SHAPES):
        for ki, kind in enumerate(KINDS):
            w = make_input(shape, kind, DTYPES[dtype], seed=100 * si + ki)
            want = mxrt.quantize_mx_dual_grouped(w, fmt, block_2d=block_2d, pad=pad, backend="numpy")
            wd = to_device(w)
            got = mxrt.quantize_mx_dual_grouped(
                wd if wd is not None else w, fmt, block_2d=block_2d, pad=pad, backend="gpu"
            )
            tag = f"{fmt}/{dtype}/{'2d' if block_2d else '1d'}/pad {pad} {shape} {kind}"
            for part in ("row", "col"):
                g, wt = getattr(got, part), getattr(want, part)
                assert g.shape == wt.shape
                assert_same(f"{part} scales {tag}", g.scales, wt.scales)
                assert_same(f"{part} data {tag}", g.data, wt.data)


def test_dual_grouped_scale_modes(poisoned) -> None:
    _skip_unless_supported("quantize_mx_dual_grouped")
    w = make_input((3, 70, 100), "wide", np.float32, seed=5)
    for fmt in ("e2m3", "e3m2", "e4m3"):
        for mode in ("floor", "ceil", "even", "rceil"):
            want = mxrt.quantize_mx_dual_grouped(w, fmt, scale_mode=mode, block_2d=True, backend="numpy")
            got = mxrt.quantize_mx_dual_grouped(cupy.asarray(w), fmt, scale_mode=mode, block_2d=True)
            for part in ("row", "col"):
                assert_same(f"{part} {fmt}/{mode}", getattr(got, part).data, getattr(want, part).data)
                assert_same(f"{part} {fmt}/{mode}", getattr(got, part).scales, getattr(want, part).scales)
