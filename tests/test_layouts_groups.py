"""Group layouts: offsets, per-group padding, DeepGEMM contiguous / psum / masked; loops, round trips, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mxrt
from mxrt.checks.layouts import m_indices_oracle, pad_rows_oracle

LENS = [[], [0], [5], [0, 0, 0], [3, 0, 5], [1, 31, 32, 33, 0, 255, 256, 257], [128, 128]]
lens_st = st.lists(
    st.one_of(st.sampled_from([0, 1, 7, 31, 32, 33, 127, 128, 129, 255, 256, 257]), st.integers(0, 300)), max_size=8
)


def ceil_to(v: int, a: int) -> int:
    return (v + a - 1) // a * a


@pytest.mark.parametrize("lens", LENS, ids=str)
def test_offsets_and_padded_layout_loop(lens):
    offs = mxrt.group_offsets(np.array(lens, np.int64))
    assert offs.dtype == np.int64 and offs.tolist() == [sum(lens[:g]) for g in range(len(lens) + 1)]
    for align in (1, 32, 128):
        lp, op = mxrt.pad_group_layout(np.array(lens, np.int32), align)
        assert lp.dtype == np.int64 and op.dtype == np.int64
        assert lp.tolist() == [ceil_to(m, align) for m in lens]
        assert op.tolist() == [sum(ceil_to(m, align) for m in lens[:g]) for g in range(len(lens) + 1)]
        assert op[-1] <= mxrt.padded_rows_upper_bound(sum(lens), len(lens), align)


def test_offsets_example_and_upper_bound_formula():
    assert mxrt.group_offsets([3, 0, 5]).tolist() == [0, 3, 3, 8]
    # Primus-Turbo: M_pad_row = ceil((total + G*32)/32)*32
    assert mxrt.padded_rows_upper_bound(1000, 8, 32) == 1280
    assert mxrt.padded_rows_upper_bound(1001, 8, 128) == 2048
    assert mxrt.padded_rows_upper_bound(0, 0, 32) == 0


@settings(max_examples=40, deadline=None)
@given(lens=lens_st, align=st.sampled_from([1, 16, 32, 128]), seed=st.integers(0, 2**31))
def test_hypothesis_pad_rows_and_layouts(lens, align, seed):
    rng = np.random.default_rng(seed)
    g_lens = np.array(lens, np.int64)
    x = rng.standard_normal((sum(lens), 3)).astype(np.float32)
    y = mxrt.pad_rows(x, g_lens, align, pad_value=np.nan)
    np.testing.assert_array_equal(y, pad_rows_oracle(x, lens, align, np.nan))
    np.testing.assert_array_equal(mxrt.unpad_rows(y, g_lens, align), x)
    bound = mxrt.padded_rows_upper_bound(sum(lens), len(lens), align)
    yb = mxrt.pad_rows(x, g_lens, align, rows=bound)
    assert yb.shape[0] == bound and np.all(yb[y.shape[0] :] == 0)
    np.testing.assert_array_equal(mxrt.unpad_rows(yb, g_lens, align), x)

    mi = mxrt.contiguous_m_indices(g_lens, align)
    assert mi.dtype == np.int32 and mi.tolist() == m_indices_oracle(lens, align)
    np.testing.assert_array_equal(mxrt.group_lens_from_m_indices(mi, len(lens), align), g_lens)

    psum = mxrt.contiguous_psum_layout(g_lens, align)
    end, prev = [], 0
    for m in lens:  # DeepGEMM: group g covers [align(end[g-1]), end[g])
        prev = ceil_to(prev, align) + m
        end.append(prev)
    assert psum.dtype == np.int32 and psum.tolist() == end
    np.testing.assert_array_equal(mxrt.group_lens_from_psum(psum, align), g_lens)
    if lens:  # psum start rows equal the padded offsets, so pad_rows places A for both layouts
        starts = [0] + [ceil_to(e, align) for e in end[:-1]]
        assert starts == mxrt.pad_group_layout(g_lens, align)[1][:-1].tolist()

    max_m = max(lens, default=0) + int(rng.integers(0, 3))
    xm, mm = mxrt.to_masked(x, g_lens, max_m)
    assert xm.shape == (len(lens), max_m, 3) and mm.dtype == np.int32 and mm.tolist() == lens
    src = 0
    for g, m in enumerate(lens):
        np.testing.assert_array_equal(xm[g, :m], x[src : src + m])
        assert np.all(xm[g, m:] == 0)
        src += m
    np.testing.assert_array_equal(mxrt.from_masked(xm, mm), x)


def test_m_indices_example():
    mi = mxrt.contiguous_m_indices([2, 0, 3], alignment=4)
    assert mi.tolist() == [0, 0, -1, -1, 2, 2, 2, -1]  # empty group 1 owns no row
    assert mxrt.contiguous_psum_layout([2, 0, 3], alignment=4).tolist() == [2, 4, 7]


def test_to_masked_default_max_m():
    x = np.arange(12).reshape(6, 2)
    xm, mm = mxrt.to_masked(x, [2, 4])
    assert xm.shape == (2, 4, 2) and mm.tolist() == [2, 4]
    assert xm[0].tolist() == [[0, 1], [2, 3], [0, 0], [0, 0]]


def test_errors():
    with pytest.raises(mxrt.ShapeError, match=r"group_offsets: argument 'group_lens' has group_lens\[1\] = -2"):
        mxrt.group_offsets([3, -2])
    with pytest.raises(mxrt.DtypeError, match="integer dtype"):
        mxrt.group_offsets(np.array([1.0, 2.0]))
    with pytest.raises(mxrt.DtypeError, match="integer dtype"):
        mxrt.group_offsets(np.array([True]))
    with pytest.raises(mxrt.ShapeError, match="1-D"):
        mxrt.group_offsets(np.ones((2, 2), np.int64))
    with pytest.raises(mxrt.ShapeError, match="2\\^63-1"):
        mxrt.group_offsets(np.array([2**62, 2**62], np.int64))
    for bad in (0, -32):
        with pytest.raises(mxrt.ShapeError, match="'align' is"):
            mxrt.pad_group_layout([1], bad)
        with pytest.raises(mxrt.ShapeError, match="'alignment' is"):
            mxrt.contiguous_m_indices([1], bad)
    with pytest.raises(mxrt.DtypeError, match="'align'"):
        mxrt.pad_group_layout([1], 32.0)
    with pytest.raises(mxrt.ShapeError, match="total_rows"):
        mxrt.padded_rows_upper_bound(-1, 2, 32)
    with pytest.raises(mxrt.ShapeError, match=r"expected \[4, \.\.\.\]"):
        mxrt.pad_rows(np.zeros((5, 2)), [1, 3], 32)
    with pytest.raises(mxrt.ShapeError, match="'rows' is 10"):
        mxrt.pad_rows(np.zeros((4, 2)), [1, 3], 32, rows=10)
    with pytest.raises(mxrt.ShapeError, match="at least 64 rows"):
        mxrt.unpad_rows(np.zeros((40, 2)), [1, 3], 32)
    with pytest.raises(mxrt.ShapeError, match="2\\^31-1"):
        mxrt.contiguous_m_indices(np.array([2**31 - 1, 1], np.int64), 1)
    with pytest.raises(mxrt.ShapeError, match="2\\^31-1"):
        mxrt.contiguous_psum_layout(np.array([2**30, 2**30], np.int64), 128)
    with pytest.raises(mxrt.ShapeError, match="2\\^31-1"):
        mxrt.to_masked(np.zeros((1, 1)), [1], max_m=2**31)
    with pytest.raises(mxrt.ShapeError, match="max_m"):
        mxrt.to_masked(np.zeros((5, 1)), [2, 3], max_m=2)
    with pytest.raises(mxrt.LayoutError, match="not a contiguous layout"):
        mxrt.group_lens_from_m_indices(np.array([0, -1, 0, -1], np.int32), 1, 2)
    with pytest.raises(mxrt.LayoutError, match="expected -1 or"):
        mxrt.group_lens_from_m_indices(np.array([0, 3], np.int32), 2, 2)
    with pytest.raises(mxrt.LayoutError, match="before the group's start"):
        mxrt.group_lens_from_psum(np.array([3, 2], np.int32), 4)
    with pytest.raises(mxrt.ShapeError, match="masked_m"):
        mxrt.from_masked(np.zeros((2, 3, 1)), [1, 4])
    with pytest.raises(mxrt.ShapeError, match="x_masked"):
        mxrt.from_masked(np.zeros((3, 3, 1)), [1, 2])
