"""mxrt.ep.dispatch's device layout kernels (kernels_src/moe/ep_*.hip) without a GPU: the numpy twin
:func:`mxrt.layouts.ep.route` against :func:`send_layout`, the kernels built for the host SIMT emulator
(tests/support/simt_ep_host.cpp) against the twins bit for bit, and the launch plans. GPU: tests/test_ep.py."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from _hostcc import build_simt_lib, host_compiler

from mxrt.layouts import ep as ep_np
from mxrt.ops import ep_kernels as K
from mxrt.ops import ep_route

POISON = -7


# ---- the twin --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("t", "k", "e", "w"), [(13, 3, 8, 2), (40, 8, 16, 4), (0, 2, 4, 1), (5, 1, 6, 3)])
def test_route_twin_is_send_layout_for_valid_ids(t, k, e, w):
    ids = np.random.default_rng(t * k + e).integers(0, e, (t, k))
    r = ep_np.route(ids, e, w)
    s = ep_np.send_layout(ids, e, w)
    np.testing.assert_array_equal(r.order, s.order)
    np.testing.assert_array_equal(r.counts[:, :-1], s.counts)
    assert (r.counts[:, -1] == 0).all()
    np.testing.assert_array_equal(r.pos, ep_np.pair_rows(r.order))


def test_route_twin_puts_bad_ids_last_and_counts_them_in_every_row():
    ids = np.array([[3, -1], [9, 0], [2, 3], [-5, 8]], np.int64)  # E = 8: -1, 9, -5, 8 are bad
    r = ep_np.route(ids, 8, 2)
    np.testing.assert_array_equal(r.order, [3, 4, 0, 5, 1, 2, 6, 7])
    np.testing.assert_array_equal(r.counts, [[1, 0, 1, 2, 4], [0, 0, 0, 0, 4]])
    u = ep_np.route(np.array([[2**63 + 1, 1]], np.uint64), 4, 1)  # unsigned ids above E are bad too
    np.testing.assert_array_equal(u.order, [1, 0])
    np.testing.assert_array_equal(u.counts, [[0, 1, 0, 0, 1]])


# ---- launch plans -----------------------------------------------------------------------------------------------


def test_route_plan_and_gather_unit():
    p = ep_route.plan_route(131072)
    assert p.num_ctas == 128 and p.chunk == 1024 and p.num_ctas * p.chunk >= 131072
    big = ep_route.plan_route(10**7)
    assert big.num_ctas <= K.MAX_ROUTE_CTAS and big.chunk % K.THREADS == 0 and big.num_ctas * big.chunk >= 10**7
    assert ep_route.plan_route(0) == ep_route.RoutePlan(K.THREADS, 1)
    assert ep_route.plan_route(1).num_ctas == 1
    assert ep_route.gather_unit(7392, 7168, 224, 2**20) == 16
    assert ep_route.gather_unit(264, 256, 8) == 8
    assert ep_route.gather_unit(99, 96, 3) == 1
    assert ep_route.gather_unit(0, 0, 6) == 2
    assert ep_route.gather_config(131072).grid == (K.MAX_GATHER_CTAS, 1, 1)
    assert ep_route.gather_config(3).grid == (1, 1, 1)
    assert ep_route.map_config(0).grid == (1, 1, 1)
    assert ep_route.unsupported(131072, 256) is None
    assert "experts" in ep_route.unsupported(8, 8192)
    assert "32 bits" in ep_route.unsupported(2**31 - 100, 256)


# ---- the kernels on the host SIMT emulator ----------------------------------------------------------------------

_LIBS: dict[tuple, ctypes.CDLL] = {}
_THREADS = 64  # the kernels' smallest block: the emulator runs every thread as a fiber


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    if host_compiler() is None:
        pytest.skip("no host C++ compiler (g++, clang++ or the ziglang wheel)")
    return tmp_path_factory.mktemp("simt_ep")


def _lib(build_dir: Path, id_bytes: int = 8, unit: int = 16) -> ctypes.CDLL:
    key = (id_bytes, unit)
    if key not in _LIBS:
        flags = [f"-DTHREADS={_THREADS}", f"-DID_BYTES={id_bytes}", f"-DUNIT={unit}"]
        _LIBS[key] = build_simt_lib(build_dir / f"ep_i{id_bytes}_u{unit}.so", "simt_ep_host.cpp", flags)
    return _LIBS[key]


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def host_route(build_dir, ids: np.ndarray, e: int, w: int, chunk: int, order_mode: int = 2):
    flat = np.ascontiguousarray(ids).ravel()
    numel = flat.size
    nctas = max(1, -(-numel // chunk))
    hist = np.full(nctas * (e + 1), POISON, np.int32)
    order = np.full(numel, POISON, np.int64)
    pos = np.full(numel, POISON, np.int64)
    counts = np.full((w, e // w + 1), POISON, np.int64)
    so = _lib(build_dir, flat.dtype.itemsize)
    i = ctypes.c_int
    rc = so.simt_route(_ptr(flat), _ptr(hist), _ptr(order), _ptr(pos), _ptr(counts), i(numel), i(e), i(w), i(chunk),
                       i(nctas), i(order_mode))  # fmt: skip
    assert rc == 0, so.simt_error().decode()
    return order, pos, counts


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    ("t", "k", "e", "w", "chunk"),
    [(37, 3, 8, 2, 64), (300, 8, 16, 4, 128), (200, 8, 256, 2, 640), (5, 2, 4, 1, 64), (0, 8, 8, 2, 64)],
)
def test_host_route_is_the_twin(build_dir, dtype, t, k, e, w, chunk):
    rng = np.random.default_rng(t + e)
    ids = np.argsort(rng.random((t, e)), 1)[:, :k].astype(dtype)
    ids[: t // 7, 0] = rng.integers(0, 2, t // 7) * e  # a popular expert: long runs inside a tile
    order, pos, counts = host_route(build_dir, ids, e, w, chunk)
    want = ep_np.route(ids, e, w)
    np.testing.assert_array_equal(order, want.order)
    np.testing.assert_array_equal(pos, want.pos)
    np.testing.assert_array_equal(counts, want.counts)


def test_host_route_bad_ids_and_thread_orders(build_dir):
    ids = np.random.default_rng(1).integers(-3, 11, (150, 4)).astype(np.int32)  # E = 8: -3..-1 and 8..10 are bad
    want = ep_np.route(ids, 8, 4)
    assert want.counts[0, -1] > 0
    for mode in (0, 1, 2):  # threads forward, backward, scrambled between barriers
        order, pos, counts = host_route(build_dir, ids, 8, 4, 64, mode)
        np.testing.assert_array_equal(order, want.order)
        np.testing.assert_array_equal(pos, want.pos)
        np.testing.assert_array_equal(counts, want.counts)


def host_gather(build_dir, unit, segs, idx, rows, div, gx=3):
    """segs: (dst, src) 2-D uint8 arrays (rows may be strided views of larger buffers)."""
    so = _lib(build_dir, 8, unit)
    full = [*segs, (np.zeros((1, 0), np.uint8), np.zeros((1, 0), np.uint8))][:2]
    args = []
    for dst, src in full:
        args += [dst, src]
    (d0, s0), (d1, s1) = full
    ll = ctypes.c_longlong
    ix = np.ascontiguousarray(idx, np.int64)
    u = unit
    rc = so.simt_gather(
        _ptr(d0), _ptr(d1), _ptr(s0), _ptr(s1), _ptr(ix), ll(rows), ll(div),
        ll(d0.shape[1] // u), ll(d1.shape[1] // u if len(segs) == 2 else 0),
        ll(d0.strides[0] // u), ll(d1.strides[0] // u), ll(s0.strides[0] // u), ll(s1.strides[0] // u),
        ctypes.c_int(gx), ctypes.c_int(2),
    )  # fmt: skip
    assert rc == 0, so.simt_error().decode()


@pytest.mark.parametrize("unit", [16, 8, 4, 2, 1])
def test_host_gather_packs_and_splits_rows(build_dir, unit):
    rng = np.random.default_rng(unit)
    t, k, cb, sb = 11, 3, 20 * unit, 3 * unit  # codes and scales widths, multiples of the unit
    codes = rng.integers(0, 256, (t, cb), np.uint8)
    scales = rng.integers(0, 256, (t, sb), np.uint8)
    order = rng.permutation(t * k)
    send = np.full((t * k, cb + sb), 0xA5, np.uint8)
    host_gather(build_dir, unit, [(send[:, :cb], codes), (send[:, cb:], scales)], order, t * k, k)
    np.testing.assert_array_equal(send, np.concatenate([codes, scales], 1)[order // k])
    # the receive side: the packed rows back into two buffers through a permutation
    g2r = rng.permutation(t * k)
    c_out = np.full((t * k, cb), 0x5A, np.uint8)
    s_out = np.full((t * k, sb), 0x5A, np.uint8)
    host_gather(build_dir, unit, [(c_out, send[:, :cb]), (s_out, send[:, cb:])], g2r, t * k, 1, gx=2)
    np.testing.assert_array_equal(c_out, send[g2r, :cb])
    np.testing.assert_array_equal(s_out, send[g2r, cb:])


def test_host_gather_one_segment_wide_rows_and_padded_strides(build_dir):
    rng = np.random.default_rng(5)
    src_store = rng.integers(0, 256, (9, 16 * 300), np.uint8)  # rows of 16 * 290 bytes inside a 16 * 300 stride
    src = src_store[:, : 16 * 290]
    dst_store = np.zeros((14, 16 * 296), np.uint8)
    dst = dst_store[:, : 16 * 290]
    idx = rng.integers(0, 9, 14)
    host_gather(build_dir, 16, [(dst, src)], idx, 14, 1, gx=1)  # 2 warps, 14 rows: the grid-stride loop
    np.testing.assert_array_equal(dst, src[idx])
    assert (dst_store[:, 16 * 290 :] == 0).all()  # nothing past the width


def host_map(build_dir, rc: np.ndarray, gx=2, order_mode=2):
    w, ldc = rc.shape
    el = ldc - 1
    r = int(rc[:, :el].sum())
    g2r = np.full(r, POISON, np.int64)
    perm = np.full(r, POISON, np.int64)
    lens = np.full(el, POISON, np.int64)
    so = _lib(build_dir)
    rcc = np.ascontiguousarray(rc, np.int64)
    i = ctypes.c_int
    rc_ = so.simt_recv_map(_ptr(rcc), _ptr(g2r), _ptr(perm), _ptr(lens), ctypes.c_longlong(r), i(w), i(el), i(ldc),
                           i(gx), i(order_mode))  # fmt: skip
    assert rc_ == 0, so.simt_error().decode()
    return g2r, perm, lens


@pytest.mark.parametrize(("w", "el"), [(1, 4), (2, 8), (4, 3), (3, 40)])
def test_host_recv_map_is_the_twin(build_dir, w, el):
    rng = np.random.default_rng(w * el)
    counts = rng.integers(0, 6, (w, el))
    counts[0, 1] = 0  # empty segments
    counts[-1, -1] = 0
    rc = np.concatenate([counts, np.full((w, 1), 99)], 1)  # the bad-id column is not read
    g2r, perm, lens = host_map(build_dir, rc)
    np.testing.assert_array_equal(g2r, ep_np.grouped_to_recv(counts))
    np.testing.assert_array_equal(perm, ep_np.recv_to_grouped(counts))
    np.testing.assert_array_equal(lens, counts.sum(0))


def test_host_recv_map_nothing_received(build_dir):
    g2r, perm, lens = host_map(build_dir, np.zeros((2, 5), np.int64), gx=1)
    assert g2r.size == 0 and perm.size == 0
    np.testing.assert_array_equal(lens, [0, 0, 0, 0])
