"""quantize_mx_grouped / quantize_mx_dual_grouped (numpy) against independent compositions and per-group loops."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.layouts.grouped_quant import PAD_SCALE, dual_grouped_shapes

FMTS = ("e4m3", "e5m2", "e2m1")


def split(total: int, num_groups: int, seed: int, empty: int = 0) -> np.ndarray:
    """Unbalanced group_lens summing to total, with ``empty`` zero-length groups."""
    rng = np.random.default_rng(seed)
    if num_groups == 0:
        return np.zeros(0, np.int64)
    w = rng.exponential(1.0, num_groups)
    w[rng.choice(num_groups, min(empty, num_groups - 1), replace=False)] = 0
    lens = np.floor(w / w.sum() * total).astype(np.int64)
    lens[int(np.argmax(w))] += total - lens.sum()
    return lens


# (total_m, k, G, empty groups)
GROUPED_CASES = [(0, 64, 0, 0), (0, 64, 3, 0), (1, 32, 1, 0), (77, 33, 1, 0), (100, 70, 7, 2), (257, 31, 7, 0)]
GROUPED_CASES += [(300, 96, 32, 5), (64, 1, 32, 31), (500, 130, 7, 3)]


def make_x(m: int, k: int, seed: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32) * np.exp2(rng.integers(-8, 8, (m, 1))).astype(np.float32)
    if x.size > 40:
        x.reshape(-1)[:32] = 0.0  # a real all-zero block keeps scale 0
    return x.astype(dtype)


def composition(x, lens, fmt, align, col_align, mode="rceil"):
    """The definition, spelled out: pad_rows + quantize_mx, pad-only blocks get scale 127."""
    total, num_groups = x.shape[0], lens.size
    m_ub = mxrt.padded_rows_upper_bound(total, num_groups, align)
    q = mxrt.quantize_mx(mxrt.pad_rows(x, lens, align, rows=m_ub), fmt, scale_mode=mode, backend="numpy")
    real = mxrt.pad_rows(np.ones(total, bool), lens, align, False, rows=m_ub)
    s = q.scales.copy()
    s[~real] = PAD_SCALE
    mc = mxrt.padded_rows_upper_bound(total, num_groups, col_align)
    xc = mxrt.pad_rows(x, lens, col_align, rows=mc).T.copy()
    qc = mxrt.quantize_mx(xc, fmt, scale_mode=mode, backend="numpy")
    real_c = mxrt.pad_rows(np.ones(total, bool), lens, col_align, False, rows=mc).reshape(-1, 32).any(1)
    sc = qc.scales.copy()
    sc[:, ~real_c] = PAD_SCALE
    return q.data, s, qc.data, sc


def per_group_loop(x, lens, fmt, align, col_align):
    """Each group quantized on its own and placed at its padded offset; the rest zero codes / scale 127."""
    total, k = x.shape
    offs = mxrt.group_offsets(lens)
    f = mxrt.FORMATS[fmt]
    kb = -(-k // 2) if f.bits == 4 else k
    m_ub = mxrt.padded_rows_upper_bound(total, lens.size, align)
    mc = mxrt.padded_rows_upper_bound(total, lens.size, col_align)
    q = np.zeros((m_ub, kb), np.uint8)
    s = np.full((m_ub, -(-k // 32)), PAD_SCALE, np.uint8)
    qc = np.zeros((k, mc // 2 if f.bits == 4 else mc), np.uint8)
    sc = np.full((k, mc // 32), PAD_SCALE, np.uint8)
    r = c = 0
    for g, n in enumerate(lens):
        xg = x[offs[g] : offs[g + 1]]
        qg = mxrt.quantize_mx(xg, fmt, backend="numpy")
        q[r : r + n], s[r : r + n] = qg.data, qg.scales
        r += -(-n // align) * align
        n_col = -(-n // col_align) * col_align
        xgc = np.zeros((k, n_col), np.float32)
        xgc[:, :n] = xg.T.astype(np.float32)
        qgc = mxrt.quantize_mx(xgc, fmt, backend="numpy")
        width = n_col // 2 if f.bits == 4 else n_col
        qc[:, (c // 2 if f.bits == 4 else c) :][:, :width] = qgc.data
        nb_real = -(-n // 32)
        sc[:, c // 32 : c // 32 + nb_real] = qgc.scales[:, :nb_real]
        c += n_col
    return q, s, qc, sc


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize(("total", "k", "num_groups", "empty"), GROUPED_CASES, ids=str)
def test_grouped_equals_composition_and_per_group_loop(total, k, num_groups, empty, fmt) -> None:
    lens = split(total, num_groups, seed=total + k, empty=empty)
    x = make_x(total, k, seed=k)
    got = mxrt.quantize_mx_grouped(x, lens, fmt, colwise=True, backend="numpy")
    want = composition(x, lens, fmt, 32, 128)
    loop = per_group_loop(x, lens, fmt, 32, 128)
    parts = (got.row.data, got.row.scales, got.col.data, got.col.scales)
    for name, a, b, c in zip(("row data", "row scales", "col data", "col scales"), parts, want, loop, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=f"{name} vs composition")
        np.testing.assert_array_equal(a, c, err_msg=f"{name} vs per-group loop")
    np.testing.assert_array_equal(got.offs_pad_row, mxrt.pad_group_layout(lens, 32)[1])
    np.testing.assert_array_equal(got.offs_pad_col, mxrt.pad_group_layout(lens, 128)[1])
    assert got.row.shape == (mxrt.padded_rows_upper_bound(total, num_groups, 32), k)
    assert got.col.shape == (k, mxrt.padded_rows_upper_bound(total, num_groups, 128))
    # the dequantized real rows are those of the plain quantizer
    back = mxrt.unpad_rows(got.row.dequantize(), lens, 32)
    np.testing.assert_array_equal(back, mxrt.quantize_mx(x, fmt, backend="numpy").dequantize())


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_grouped_input_dtypes_and_alignments(dtype) -> None:
    lens = np.array([5, 0, 40, 1], np.int32)
    x = make_x(46, 64, seed=1, dtype=dtype)
    for align, col_align in ((1, 32), (16, 64), (32, 128), (128, 256)):
        got = mxrt.quantize_mx_grouped(x, lens, "e4m3", align=align, colwise=True, col_align=col_align)
        want = composition(x, lens, "e4m3", align, col_align)
        for a, b in zip((got.row.data, got.row.scales, got.col.data, got.col.scales), want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_grouped_rowwise_only_and_scale_modes() -> None:
    lens = split(200, 7, seed=3, empty=2)
    x = make_x(200, 96, seed=3)
    for mode in ("floor", "ceil", "even", "rceil"):
        got = mxrt.quantize_mx_grouped(x, lens, "e5m2", scale_mode=mode)
        assert got.col is None and got.offs_pad_col is None
        want = composition(x, lens, "e5m2", 32, 128, mode)
        np.testing.assert_array_equal(got.row.data, want[0])
        np.testing.assert_array_equal(got.row.scales, want[1])


def test_grouped_pad_rows_are_defined() -> None:
    lens = np.array([3, 0, 33])
    got = mxrt.quantize_mx_grouped(make_x(36, 40, seed=5), lens, colwise=True)
    real = mxrt.pad_rows(np.ones(36, bool), lens, 32, False, rows=got.row.shape[0])
    assert (got.row.data[~real] == 0).all() and (got.row.scales[~real] == 127).all()
    assert got.row.shape[0] == 32 * 2 + 96  # ceil((36 + 3*32) / 32) * 32 = 160 rows: the host bound
    real_c = mxrt.pad_rows(np.ones(36, bool), lens, 128, False, rows=got.col.shape[1])
    assert (got.col.data[:, ~real_c] == 0).all()


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        ({"group_lens": np.array([1.0, 2.0])}, mxrt.DtypeError),
        ({"group_lens": np.array([[1, 2]])}, mxrt.ShapeError),
        ({"group_lens": np.array([5, -2])}, mxrt.ShapeError),
        ({"group_lens": np.array([1, 1])}, mxrt.ShapeError),  # sums to 2, x has 3 rows
        ({"group_lens": np.array([3]), "align": 0}, mxrt.ShapeError),
        ({"group_lens": np.array([3]), "colwise": True, "col_align": 48}, mxrt.ShapeError),
        ({"group_lens": np.array([3]), "colwise": 1}, mxrt.DtypeError),
    ],
)
def test_grouped_typed_errors(kwargs, err) -> None:
    x = np.ones((3, 32), np.float32)
    with pytest.raises(err, match="quantize_mx_grouped"):
        mxrt.quantize_mx_grouped(x, **kwargs)


def test_grouped_rejects_non_2d_x() -> None:
    with pytest.raises(mxrt.ShapeError, match="2-D"):
        mxrt.quantize_mx_grouped(np.ones((2, 3, 32), np.float32), np.array([2]))
    with pytest.raises(mxrt.DtypeError):
        mxrt.quantize_mx_grouped(np.ones((2, 32), np.int32), np.array([2]))


# ---- quantize_mx_dual_grouped ----------------------------------------------------------------------------

DUAL_CASES = [(1, 1, 1), (3, 40, 70), (2, 33, 31), (7, 64, 96), (0, 8, 8), (2, 0, 32), (2, 5, 0)]


@pytest.mark.parametrize("pad", [32, 128])
@pytest.mark.parametrize("block_2d", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize(("g", "n", "k"), DUAL_CASES, ids=str)
def test_dual_grouped_equals_per_group_dual(g, n, k, fmt, block_2d, pad) -> None:
    w = np.stack([make_x(n, k, seed=i) for i in range(g)]) if g else np.zeros((0, n, k), np.float32)
    got = mxrt.quantize_mx_dual_grouped(w, fmt, block_2d=block_2d, pad=pad, backend="numpy")
    k_pad, n_pad = dual_grouped_shapes(n, k, pad)
    assert got.row.shape == (g, n, k_pad) and got.col.shape == (g, k, n_pad)
    packed = fmt == "e2m1"
    for i in range(g):
        d = mxrt.quantize_mx_dual(w[i], fmt, block_2d=block_2d, backend="numpy")  # unpadded
        for part, real_len, pad_len in (("row", k, k_pad), ("col", n, n_pad)):
            got_p, want_p = getattr(got, part), getattr(d, part)
            codes = got_p.codes[i]
            np.testing.assert_array_equal(codes[:, :real_len], want_p.codes, err_msg=f"{part} codes")
            assert (codes[:, real_len:] == 0).all()
            nb = -(-real_len // 32)
            np.testing.assert_array_equal(got_p.scales[i][:, :nb], want_p.scales, err_msg=f"{part} scales")
            assert (got_p.scales[i][:, nb:] == PAD_SCALE).all()
            assert got_p.data.shape[-1] == (-(-pad_len // 2) if packed else pad_len)


def test_dual_grouped_dequantizes_to_the_padded_dual() -> None:
    w = np.stack([make_x(40, 50, seed=i, dtype=ml_dtypes.bfloat16) for i in range(3)])
    got = mxrt.quantize_mx_dual_grouped(w, "e4m3", block_2d=True)
    deq = got.row.dequantize()
    assert deq.shape == (3, 40, 64) and (deq[:, :, 50:] == 0).all()
    ref = np.stack([mxrt.quantize_mx_dual(w[i], "e4m3", block_2d=True).row.dequantize() for i in range(3)])
    np.testing.assert_array_equal(deq[:, :, :50], ref)
    np.testing.assert_array_equal(got.col.dequantize()[:, :, :40], deq[:, :, :50].transpose(0, 2, 1))


@pytest.mark.parametrize(
    ("w", "kwargs", "err"),
    [
        (np.ones((4, 32), np.float32), {}, mxrt.ShapeError),
        (np.ones((1, 4, 32), np.int8), {}, mxrt.DtypeError),
        (np.ones((1, 4, 32), np.float32), {"pad": 48}, mxrt.ShapeError),
        (np.ones((1, 4, 32), np.float32), {"pad": 0}, mxrt.ShapeError),
        (np.ones((1, 4, 32), np.float32), {"block_2d": "yes"}, mxrt.DtypeError),
    ],
)
def test_dual_grouped_typed_errors(w, kwargs, err) -> None:
    with pytest.raises(err, match="quantize_mx_dual_grouped"):
        mxrt.quantize_mx_dual_grouped(w, **kwargs)
