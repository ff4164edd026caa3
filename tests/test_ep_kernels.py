"""mxrt.ep.dispatch's device layout kernels (kernels_src/moe/ep_*.hip) without a GPU: the numpy twin
:func:`mxrt.layouts.ep.route` against :func:`send_layout`, the kernels built for the host SIMT emulator
(tests/support/simt_ep_host.cpp) against the twins bit for bit, the launch plans, and the launchers of
:mod:`mxrt.ops.ep_route` and the fused dispatch flow end to end through a stand-in CuPy whose driver runs every
launch's packed parameters on the emulator (the Python -> kernel argument contract). GPU: tests/test_ep.py."""

from __future__ import annotations

import ctypes
import importlib
import struct
from pathlib import Path

import numpy as np
import pytest
from _hostcc import build_simt_lib, host_compiler
from support import fake_cupy

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


def _lib(build_dir: Path, id_bytes: int = 8, unit: int = 16, threads: int = _THREADS) -> ctypes.CDLL:
    key = (id_bytes, unit, threads)
    if key not in _LIBS:
        flags = [f"-DTHREADS={threads}", f"-DID_BYTES={id_bytes}", f"-DUNIT={unit}"]
        so = build_simt_lib(build_dir / f"ep_i{id_bytes}_u{unit}_t{threads}.so", "simt_ep_host.cpp", flags)
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        so.simt_route_count.argtypes = [vp, vp, i, i, i, i, i]
        so.simt_route_scatter.argtypes = [vp] * 5 + [i] * 7
        so.simt_gather.argtypes = [vp] * 5 + [ll] * 8 + [i, i]
        so.simt_recv_map.argtypes = [vp] * 4 + [ll] + [i] * 5
        _LIBS[key] = so
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


# ---- the launchers through a stand-in CuPy whose driver runs the kernels on the emulator -------------------------

_ENTRY = {
    "ep_route_count": "simt_route_count",
    "ep_route_scatter": "simt_route_scatter",
    "ep_gather_rows": "simt_gather",
    "ep_recv_map": "simt_recv_map",
}


@pytest.fixture
def simt_gpu(build_dir):
    """fake_cupy with a driver that unpacks each launch's parameter block (the bytes cuLaunchKernel would get) and
    runs that kernel there and then on the SIMT emulator, built with the launch's block size and defines."""
    with fake_cupy.install(record=True) as state:

        def driver(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> int:
            k = next(b for b in state["builds"] if b.kernel.ptr == func)
            fmt = fake_cupy.PARAM_FORMATS[k.name]
            base = ctypes.c_void_p.from_address(params).value
            vals = struct.unpack(fmt, ctypes.string_at(base, struct.calcsize(fmt)))
            assert (gy, gz, by, bz, smem) == (1, 1, 1, 1, 0) and bx == k.defines["THREADS"]
            so = _lib(build_dir, k.defines.get("ID_BYTES", 8), k.defines.get("UNIT", 16), bx)
            state["launches"].append((k.name, gx, vals))
            rc = getattr(so, _ENTRY[k.name])(*vals, gx, 2)
            state["error"] = so.simt_error().decode() if rc else ""
            return rc

        importlib.import_module("mxrt.runtime.launch")._DRIVER = driver  # install() restores its own on exit
        yield state


def test_launchers_pack_what_the_kernels_read(simt_gpu):
    rng = np.random.default_rng(3)
    t, k, e, w = 300, 8, 16, 4  # 2400 pairs: 3 route CTAs of 1024
    ids = np.argsort(rng.random((t, e)), 1)[:, :k].astype(np.int32)
    ids[7, 2] = 99  # one bad id
    p = t * k
    plan = ep_route.plan_route(p)
    hist = np.zeros(plan.num_ctas * (e + 1), np.int32)
    order, pos = np.full(p, POISON, np.int64), np.full(p, POISON, np.int64)
    counts = np.full((w, e // w + 1), POISON, np.int64)
    ptr = lambda a: a.ctypes.data  # noqa: E731
    ep_route.launch_route(ptr(ids), 4, p, e, w, ptr(hist), ptr(order), ptr(pos), ptr(counts), plan)
    assert simt_gpu["error"] == "" and [n for n, _, _ in simt_gpu["launches"]] == ["ep_route_count", "ep_route_scatter"]
    want = ep_np.route(ids, e, w)
    np.testing.assert_array_equal(order, want.order)
    np.testing.assert_array_equal(pos, want.pos)
    np.testing.assert_array_equal(counts, want.counts)
    # the send gather: codes | scales packed per pair (16-byte units), then the receive split (8-byte units)
    codes = rng.integers(0, 256, (t, 64), np.uint8)
    scales = rng.integers(0, 256, (t, 16), np.uint8)
    send = np.zeros((p, 80), np.uint8)
    segs = [(ptr(send), 80, ptr(codes), 64, 64), (ptr(send) + 64, 80, ptr(scales), 16, 16)]
    ep_route.launch_gather(segs, ptr(order), p, k)
    np.testing.assert_array_equal(send, np.concatenate([codes, scales], 1)[order // k])
    c_out, s_out = np.zeros((p, 64), np.uint8), np.zeros((p, 8), np.uint8)
    segs = [(ptr(c_out), 64, ptr(send), 80, 64), (ptr(s_out), 8, ptr(send) + 72, 80, 8)]
    ep_route.launch_gather(segs, ptr(pos), p, 1)
    np.testing.assert_array_equal(c_out, send[pos, :64])
    np.testing.assert_array_equal(s_out, send[pos, 72:])
    assert [(n, v[-8:]) for n, _, v in simt_gpu["launches"][-2:]] == [
        ("ep_gather_rows", (p, k, 4, 1, 5, 5, 4, 1)),
        ("ep_gather_rows", (p, 1, 8, 1, 8, 1, 10, 10)),
    ]
    # the receive maps
    rc = np.concatenate([counts[:, :-1] * 2 + 1, np.zeros((w, 1), np.int64)], 1)
    r = int(rc[:, :-1].sum())
    g2r, perm, lens = np.zeros(r, np.int64), np.zeros(r, np.int64), np.zeros(e // w, np.int64)
    ep_route.launch_recv_map(ptr(rc), e // w + 1, w, e // w, r, ptr(g2r), ptr(perm), ptr(lens))
    np.testing.assert_array_equal(g2r, ep_np.grouped_to_recv(rc[:, :-1]))
    np.testing.assert_array_equal(perm, ep_np.recv_to_grouped(rc[:, :-1]))
    np.testing.assert_array_equal(lens, rc[:, :-1].sum(0))


@pytest.fixture(scope="module")
def gloo_world1():
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("no torch.distributed, or a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield torch
    dist.destroy_process_group()


@pytest.mark.parametrize(
    ("t", "h", "k", "first"), [(37, 128, 3, 1000), (37, 128, 3, None), (20, 96, 2, 1), (0, 64, 2, None)]
)
def test_fused_dispatch_through_the_launchers(simt_gpu, gloo_world1, monkeypatch, t, h, k, first):
    """The fused flow of mxrt.ep with the CUDA kernel class (pointers, launchers, kernels on the emulator) on CPU
    tensors in a gloo world of one: bitwise the torch layout; the send gather in one launch or split in two around
    the counts' all-to-all (``first``: FIRST_GATHER_BYTES)."""
    torch = gloo_world1
    import mxrt
    from mxrt.ep import _fused, dispatch

    e = 8
    g = torch.Generator().manual_seed(t + h)
    x = mxrt.quantize_mx(torch.randn(t, h, generator=g).to(torch.bfloat16))
    ids = torch.argsort(torch.rand(t, e, generator=g), 1)[:, :k].contiguous()
    w = torch.rand(t, k, generator=g)
    monkeypatch.setenv("MXRT_EP_DISPATCH", "torch")
    gt, ht = dispatch(x, ids, w, num_experts=e)
    monkeypatch.setenv("MXRT_EP_DISPATCH", "fused")
    monkeypatch.setattr(_fused, "_kernels", lambda dev: _fused._CudaKernels(dev))
    if first is not None:
        monkeypatch.setattr(_fused, "FIRST_GATHER_BYTES", first)
    gf, hf = dispatch(x, ids, w, num_experts=e)
    names = [n for n, _, _ in simt_gpu["launches"]]
    gather = ["ep_gather_rows"] if t else []  # no rows: no gather launched
    send = gather * (2 if first is not None else 1)
    assert names == ["ep_route_count", "ep_route_scatter", *send, "ep_recv_map", *gather]
    assert torch.equal(gt.data, gf.data) and torch.equal(gt.scales, gf.scales)
    for name in ("order", "recv_to_grouped", "group_lens", "recv_counts"):
        assert torch.equal(getattr(ht, name), getattr(hf, name)), name
    assert torch.equal(hf.pair_rows[hf.order], torch.arange(t * k))
