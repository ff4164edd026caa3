"""Expert-parallel layout math (mxrt.layouts.ep) against a plain loop over ranks, experts and tokens, W in 1..8."""

from __future__ import annotations

import numpy as np
import pytest

from mxrt.errors import DtypeError, ShapeError
from mxrt.layouts.ep import (
    grouped_to_recv,
    recv_to_grouped,
    send_layout,
    simulate_combine,
    simulate_dispatch,
)

# (world size, tokens per rank (one list entry per rank pattern), experts, topk); includes empty ranks, odd T,
# experts nobody routes to, topk = 1
CASES = [
    (1, [5], 4, 2),
    (1, [0], 4, 2),
    (2, [7, 0], 4, 3),
    (2, [33, 17], 8, 8),
    (4, [1, 9, 0, 31], 8, 2),
    (4, [16, 16, 16, 16], 16, 1),
    (8, [3, 0, 11, 5, 7, 1, 2, 13], 16, 4),
    (8, [40] * 8, 256, 8),
]


def _routes(rng, tokens, e, k, *, skew=False):
    ids, wts = [], []
    for t in tokens:
        p = None
        if skew:  # most pairs on two experts, many experts empty
            p = np.full(e, 0.1 / (e - 2))
            p[[0, e - 1]] = 0.45
        r = np.stack([rng.choice(e, k, replace=False, p=p) for _ in range(t)]) if t else np.zeros((0, k), int)
        ids.append(r.astype(np.int64))
        wts.append(rng.random((t, k)).astype(np.float32))
    return ids, wts


def _loop_dispatch(rows, ids, e, w):
    """Straightforward: rank d's rows are, for each local expert, each source rank, each (token, slot) in order."""
    el = e // w
    out, lens = [], []
    for d in range(w):
        got, gl = [], []
        for le in range(el):
            n = 0
            for s in range(w):
                for t in range(ids[s].shape[0]):
                    for j in range(ids[s].shape[1]):
                        if ids[s][t, j] == d * el + le:
                            got.append(rows[s][t])
                            n += 1
            gl.append(n)
        out.append(np.array(got).reshape(-1, *rows[0].shape[1:]))
        lens.append(np.array(gl))
    return out, lens


def _loop_combine(y_rows_of, ids, wts, n):
    """out[s][t] = sum_j w * y(expert of (t, j)) with y looked up per pair."""
    return [
        np.array(
            [
                sum(float(wts[s][t, j]) * y_rows_of(s, t, j) for j in range(ids[s].shape[1]))
                for t in range(ids[s].shape[0])
            ]
        ).reshape(ids[s].shape[0], n)
        for s in range(len(ids))
    ]


@pytest.mark.parametrize("skew", [False, True], ids=["uniform", "skewed"])
@pytest.mark.parametrize(("w", "tokens", "e", "k"), CASES, ids=[f"W{c[0]}-T{sum(c[1])}-E{c[2]}-k{c[3]}" for c in CASES])
def test_dispatch_and_combine_match_loop(w, tokens, e, k, skew):
    rng = np.random.default_rng(w * 1000 + sum(tokens) + skew)
    ids, wts = _routes(rng, tokens, e, k, skew=skew and e > 2)
    # payload: each row carries (rank, token, 6 random bytes) so a misplaced row is visible
    rows = [
        np.concatenate([np.full((t, 1), s), np.arange(t)[:, None], rng.integers(0, 256, (t, 6))], 1).astype(np.int64)
        for s, t in enumerate(tokens)
    ]
    grouped, lens, h = simulate_dispatch(rows, ids, e)
    want, want_lens = _loop_dispatch(rows, ids, e, w)
    for d in range(w):
        np.testing.assert_array_equal(grouped[d], want[d], err_msg=f"rank {d} grouped rows")
        np.testing.assert_array_equal(lens[d], want_lens[d], err_msg=f"rank {d} group_lens")
        assert lens[d].sum() == h.recv_counts[d].sum()
    # counts and splits of each source
    for s in range(w):
        sl = send_layout(ids[s], e, w)
        flat = ids[s].ravel()
        for d in range(w):
            for le in range(e // w):
                assert sl.counts[d, le] == int((flat == d * (e // w) + le).sum())
        assert sl.send_splits.sum() == flat.size
        assert sorted(sl.order.tolist()) == list(range(flat.size))
        assert (np.diff(flat[sl.order]) >= 0).all()
    # combine: the expert "output" of a row is a function of the row, so the loop can recompute it per pair
    y = [g[:, 2:].astype(np.float64) * 0.5 + g[:, :1] for g in grouped]
    out = simulate_combine(y, wts, h)
    ref = _loop_combine(lambda s, t, j: rows[s][t, 2:].astype(np.float64) * 0.5 + s, ids, wts, 6)
    for s in range(w):
        np.testing.assert_allclose(out[s], ref[s], rtol=1e-12, atol=0)


@pytest.mark.parametrize("w", [1, 2, 4, 8])
def test_recv_permutation_and_inverse(w):
    rng = np.random.default_rng(w)
    c = rng.integers(0, 5, (w, 3))
    c[0, :] = 0  # a source that sends nothing
    fwd, inv = recv_to_grouped(c), grouped_to_recv(c)
    assert sorted(fwd.tolist()) == list(range(c.sum()))
    np.testing.assert_array_equal(fwd[inv], np.arange(c.sum()))
    np.testing.assert_array_equal(inv[fwd], np.arange(c.sum()))
    # loop: received (s, e, i) -> grouped (e, s, i)
    recv_keys = [(s, e, i) for s in range(w) for e in range(3) for i in range(c[s, e])]
    grouped_keys = sorted(recv_keys, key=lambda x: (x[1], x[0], x[2]))
    np.testing.assert_array_equal(fwd, [grouped_keys.index(key) for key in recv_keys])


def test_bad_input_is_typed():
    with pytest.raises(ShapeError, match="multiple of the world size 3"):
        send_layout(np.zeros((2, 2), np.int64), 8, 3)
    with pytest.raises(ShapeError, match=r"holds the id 8, expected ids in \[0, 8\)"):
        send_layout(np.array([[1, 8]]), 8, 2)
    with pytest.raises(ShapeError, match="holds the id -1"):
        send_layout(np.array([[-1, 0]]), 8, 2)
    with pytest.raises(DtypeError, match="integer dtype"):
        send_layout(np.zeros((2, 2), np.float32), 8, 2)
    with pytest.raises(ShapeError, match="2-D"):
        send_layout(np.zeros(4, np.int64), 8, 2)
    with pytest.raises(ShapeError, match="rank 0 has 3 rows and 2 ids"):
        simulate_dispatch([np.zeros((3, 1))], [np.zeros((2, 1), np.int64)], 2)
