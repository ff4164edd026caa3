"""MoE routing: vLLM moe_align_block_size and aiter moe_sorting against loops and the worked example; errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mxrt
from mxrt.checks.layouts import moe_align_oracle, moe_sorting_oracle

EXAMPLE = np.array([[2, 3, 0], [1, 2, 0], [1, 3, 0], [1, 2, 3]])


def test_worked_example_4c():
    s, e, n = mxrt.moe_align_block_size(EXAMPLE, 4, 4)
    assert s.dtype == e.dtype == n.dtype == np.int32
    assert s.tolist() == [2, 5, 8, 12, 3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12] + [12] * 8
    assert e.tolist() == [0, 1, 2, 3, 0, 0] and n.tolist() == [16]


def test_pad_sorted_ids_and_expert_map():
    s, e, _ = mxrt.moe_align_block_size(EXAMPLE, 5, 4, pad_sorted_ids=True)
    assert s.size == 30 and e.size == 6  # 12 + 4*4 = 28 -> 30
    emap = np.array([-1, 0, -1, 1], np.int32)
    _, e_local, _ = mxrt.moe_align_block_size(EXAMPLE, 4, 4, expert_map=emap)
    assert e_local.tolist() == [-1, 0, -1, 1, -1, -1]  # vLLM: expert_map[expert_ids], unused entries map expert 0


def test_experts_without_tokens_get_no_block():
    ids = np.array([[5], [5], [0]])
    s, e, n = mxrt.moe_align_block_size(ids, 2, 8)
    assert n.tolist() == [4] and s[:4].tolist() == [2, 3, 0, 1] and e[:2].tolist() == [0, 5]


def test_ids_at_or_above_num_experts_are_skipped():
    ids = np.array([[0, 4], [9, 1], [1, 0]])
    s, e, n = mxrt.moe_align_block_size(ids, 2, 4)
    assert n.tolist() == [4] and s[:4].tolist() == [0, 5, 3, 4] and e[:2].tolist() == [0, 1]
    assert 1 not in s and 2 not in s  # flat indices 1 (id 4) and 2 (id 9) get no slot
    so, _, se, nv = mxrt.moe_sorting(ids, np.ones(ids.shape, np.float32), 4, 2)
    assert nv.tolist() == [4, 3] and se[:2].tolist() == [0, 1]
    assert so[:4].tolist() == [0, 2 | (1 << 24), 1 | (1 << 24), 2]


@settings(max_examples=40, deadline=None)
@given(
    t=st.sampled_from([0, 1, 7, 31, 33, 64]),
    topk=st.integers(1, 8),
    num_e=st.integers(1, 40),
    bs=st.sampled_from([1, 2, 16, 32, 64]),
    seed=st.integers(0, 2**31),
    overflow=st.booleans(),
)
def test_hypothesis_vs_loops(t, topk, num_e, bs, seed, overflow):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, num_e + (3 if overflow else 0), (t, topk)).astype(rng.choice([np.int32, np.int64]))
    s, e, n = mxrt.moe_align_block_size(ids, bs, num_e)
    es, ee, en = moe_align_oracle(ids, bs, num_e)
    assert s.tolist() == es and e.tolist() == ee and n.tolist() == [en]
    assert s.size == ids.size + num_e * (bs - 1) and e.size == -(-s.size // bs) and n[0] % bs == 0
    w = rng.random((t, topk)).astype(np.float32)
    num_e = max(num_e, topk)  # aiter's capacity needs topk <= num_experts
    mask = rng.integers(0, 2, num_e) if seed % 2 else None
    got = mxrt.moe_sorting(ids, w, num_e, bs, expert_mask=mask)
    exp = moe_sorting_oracle(ids, w, num_e, bs, mask)
    assert got[0].tolist() == exp[0] and got[2].tolist() == exp[2] and got[3].tolist() == exp[3]
    np.testing.assert_array_equal(got[1], np.array(exp[1], np.float32))
    assert got[0].dtype == got[2].dtype == got[3].dtype == np.int32 and got[1].dtype == np.float32


def test_moe_sorting_example():
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 16
    so, sw, se, nv = mxrt.moe_sorting(EXAMPLE, w, 4, 4, expert_mask=np.array([1, 0, 1, 1]))
    pad = (3 << 24) | 4
    assert so.size == 12 + 16 - 3 and se.size == 7
    assert so[:12].tolist() == [
        2 << 24,
        (2 << 24) | 1,
        (2 << 24) | 2,
        pad,
        0,
        (1 << 24) | 1,
        (1 << 24) | 3,
        pad,
        1 << 24,
        (1 << 24) | 2,
        (2 << 24) | 3,
        pad,
    ]
    assert sw[:3].tolist() == [w[0, 2], w[1, 2], w[2, 2]] and sw[3] == 0
    assert se.tolist() == [0, 1, 2, -1, -1, -1, -1] and nv.tolist() == [12, 4]


def test_errors():
    with pytest.raises(mxrt.ShapeError, match="moe_align_block_size: argument 'topk_ids' holds -1"):
        mxrt.moe_align_block_size(np.array([[0, -1]]), 4, 4)
    with pytest.raises(mxrt.DtypeError, match="integer dtype"):
        mxrt.moe_align_block_size(np.array([[0.0]]), 4, 4)
    for bad in (0, -1):
        with pytest.raises(mxrt.ShapeError, match="'block_size' is"):
            mxrt.moe_align_block_size(EXAMPLE, bad, 4)
        with pytest.raises(mxrt.ShapeError, match="'block_size' is"):
            mxrt.moe_sorting(EXAMPLE, np.ones((4, 3)), 4, bad)
    with pytest.raises(mxrt.ShapeError, match="'num_experts' is 0"):
        mxrt.moe_align_block_size(EXAMPLE, 4, 0)
    with pytest.raises(mxrt.DtypeError, match="'block_size'"):
        mxrt.moe_align_block_size(EXAMPLE, 4.0, 4)
    with pytest.raises(mxrt.ShapeError, match="2\\^31-1"):
        mxrt.moe_align_block_size(EXAMPLE, 2**20, 2**12)
    with pytest.raises(mxrt.ShapeError, match="expert_map"):
        mxrt.moe_align_block_size(EXAMPLE, 4, 4, expert_map=np.zeros(3, np.int32))
    with pytest.raises(mxrt.DtypeError, match="pad_sorted_ids"):
        mxrt.moe_align_block_size(EXAMPLE, 4, 4, pad_sorted_ids=1)
    with pytest.raises(mxrt.UnknownNameError, match="backend"):
        mxrt.moe_align_block_size(EXAMPLE, 4, 4, backend="x")
    with pytest.raises(mxrt.ShapeError, match="2-D"):
        mxrt.moe_sorting(EXAMPLE.ravel(), np.ones(12), 4)
    with pytest.raises(mxrt.ShapeError, match="topk_weights"):
        mxrt.moe_sorting(EXAMPLE, np.ones((4, 2)), 4)
    with pytest.raises(mxrt.DtypeError, match="topk_weights"):
        mxrt.moe_sorting(EXAMPLE, np.ones((4, 3), np.int32), 4)
    with pytest.raises(mxrt.ShapeError, match="topk = 128"):
        mxrt.moe_sorting(np.zeros((1, 128), np.int32), np.ones((1, 128)), 4)
    with pytest.raises(mxrt.ShapeError, match="expert_mask"):
        mxrt.moe_sorting(EXAMPLE, np.ones((4, 3)), 4, expert_mask=np.ones(3, np.int32))
    with pytest.raises(mxrt.ShapeError, match="topk = 3 > num_experts = 2"):
        mxrt.moe_sorting(EXAMPLE, np.ones((4, 3)), 2)
    with pytest.raises(mxrt.ShapeError, match="holds -3"):
        mxrt.moe_sorting(np.array([[1, -3]]), np.ones((1, 2)), 4)
