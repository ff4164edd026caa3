"""The GPU path of the grouped GEMMs end to end without a GPU: a stand-in ``cupy`` module (numpy arrays whose type
lives in a module named ``cupy``, so mxrt treats them as device arrays) and a stand-in kernel build that runs the
host SIMT build of gemm_mx_grouped_generic.hip (tests/support/simt_gemm_host.cpp). This executes everything the
lead's H100 run executes in Python (interop, device validation, the launch plan, argument packing, in-place
outputs, the DeepGEMM device conversions) before any device time is spent; the kernel itself is proven in
tests/test_grouped_gemm_host.py. What it cannot show: CuPy's real launch, streams and graph capture."""

from __future__ import annotations

import ctypes
import dataclasses
import sys
import types

import ml_dtypes
import numpy as np
import pytest
from _hostcc import host_compiler
from test_grouped_gemm_host import _lib

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt.ops import grouped_gemm_kernels
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_numpy


class _Ptr:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class FakeDeviceArray(np.ndarray):
    """A numpy array mxrt takes for a CuPy array (``type(x).__module__ == "cupy"``)."""

    @property
    def data(self):  # CuPy: .data.ptr is the device pointer
        return _Ptr(self.ctypes.data)

    def get(self) -> np.ndarray:
        return np.array(self)


FakeDeviceArray.__module__ = "cupy"


def _fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.ndarray = FakeDeviceArray
    cp.asarray = lambda x, dtype=None: np.array(x, dtype=dtype, copy=True).view(FakeDeviceArray)
    cp.empty = lambda shape, dtype="uint8": np.empty(shape, dtype).view(FakeDeviceArray)
    cp.zeros = lambda shape, dtype="uint8": np.zeros(shape, dtype).view(FakeDeviceArray)
    cp.ascontiguousarray = lambda x: np.ascontiguousarray(x).view(FakeDeviceArray)
    for name in ("uint8", "uint16", "int32", "int64", "float32"):
        setattr(cp, name, getattr(np, name))
    return cp


@pytest.fixture
def device(monkeypatch, tmp_path_factory):
    """Fake cupy in sys.modules, builds that run the SIMT host kernel; records the launches."""
    if host_compiler() is None:
        pytest.skip("no host C++ compiler")
    build_dir = tmp_path_factory.mktemp("simt_dev")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    # the stand-in builds run the generic kernel; the fake sm_90a device would otherwise pick gemm_mx_grouped_sm90
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
    launches = []

    def build(spec, d, arch, **_kw):
        assert spec is grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC
        lib = _lib(build_dir, 11, **{k: v for k, v in d if k != "THREADS"})

        def kernel(grid, block, args, shared_mem=0):
            assert block == (256, 1, 1) and len(args) == 15
            ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args[:6]]
            assert all(isinstance(a, np.ndarray) and type(a).__module__ == "cupy" for a in args[:6])
            u = np.array([int(v) for v in args[6:14]], np.uint32)
            assert all(isinstance(v, np.uint32) for v in args[6:14])
            assert isinstance(args[14], np.uint64) and int(args[14]) == 0  # no gate: the plain launch
            rc = lib.simt_gemm(*ptrs, ctypes.c_void_p(u.ctypes.data), u.size, *grid, 2)
            assert rc == 0, lib.simt_error().decode()
            launches.append((dict(d), grid))

        return kernel

    from mxrt.runtime import arch as arch_mod
    from mxrt.runtime import compiler

    fake_arch = arch_mod.Arch("nvidia", "sm_90a", "fake", 32, 132, 232448)
    monkeypatch.setattr(compiler, "build", build)
    monkeypatch.setattr(arch_mod, "get_arch", lambda *a, **k: fake_arch)
    return launches


def dev(q: mxrt.MXArray) -> mxrt.MXArray:
    cp = sys.modules["cupy"]
    return dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))


def _x(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _close(got, want, dtype):
    g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    assert np.isfinite(g).all()
    if dtype == "float32":
        assert np.abs(g - w).max(initial=0) <= 1e-5 * max(np.abs(w).max(initial=0), 1e-30)
    else:
        assert mxrt.calc_diff(g, w) <= 1e-5 or not np.abs(w).max(initial=0)


def test_forward_dgrad_wgrad_through_the_device_path(device):
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(0)
    lens = np.array([37, 0, 150, 1])
    m, n, k = int(lens.sum()), 72, 96
    x, w, dy = _x(rng, (m, k)), _x(rng, (4, n, k)), _x(rng, (m, n))
    qx, qw, qdy = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(dy)
    for a, b in ((qx, qw.row), (qdy, qw.col)):
        got = mxrt.grouped_gemm_mx(dev(a), dev(b), cp.asarray(lens, np.int32))
        assert type(got).__module__ == "cupy" and got.dtype == np.uint16  # bf16 bits, CuPy's form
        want = grouped_gemm_numpy(grouped_gemm_problem(a, b, lens))
        _close(got.get().view(ml_dtypes.bfloat16), want, "bfloat16")
    out = cp.asarray(np.full((m, n), np.nan, np.float32))
    res = mxrt.grouped_gemm_mx(dev(qx), dev(qw.row), cp.asarray(lens), out_dtype="float32", out=out)
    assert res is out
    _close(out, grouped_gemm_numpy(grouped_gemm_problem(qx, qw.row, lens, out_dtype="float32")), "float32")
    qg = mxrt.quantize_mx_grouped(dy, lens, colwise=True, col_align=32)
    qc = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32)
    start = _x(rng, (4, n, k))
    acc = cp.asarray(start)
    mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qc.col), cp.asarray(lens), out=acc, accumulate=True)
    p = wgrad_problem(qg, qc, lens, out=start.copy(), accumulate=True)
    _close(acc, grouped_gemm_numpy(p), "float32")
    assert [d["MODE"] for d, _ in device] == [0, 0, 0, 3]


def test_numpy_inputs_with_backend_gpu(device, monkeypatch):
    from mxrt.api import dispatch

    rng = np.random.default_rng(1)
    lens = np.array([5, 60, 0])
    qx, qw = mxrt.quantize_mx(_x(rng, (65, 64))), mxrt.quantize_mx(_x(rng, (3, 40, 64)), axis=2)
    monkeypatch.setattr(dispatch.runtime, "device_available", lambda: True)
    got = mxrt.grouped_gemm_mx(qx, qw, lens, backend="gpu")
    assert isinstance(got, np.ndarray) and got.dtype == ml_dtypes.bfloat16
    _close(got, grouped_gemm_numpy(grouped_gemm_problem(qx, qw, lens)), "bfloat16")
    assert len(device) == 1


def test_deepgemm_device_calls(device):
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(2)
    lens = np.array([50, 0, 130, 7])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 64, 256, 4
    x, w = _x(rng, (m, k)), _x(rng, (g, n, k))
    ca, sa = mxrt.per_token_cast_to_fp8(x, True)
    cb, sb = zip(*(mxrt.per_block_cast_to_fp8(w[i], True) for i in range(g)), strict=True)
    sa_b = (sa.view(np.uint32) >> 23).astype(np.uint8)
    sb_b = (np.stack(sb).view(np.uint32) >> 23).astype(np.uint8)
    host_d = np.full((m, n), 7.0, ml_dtypes.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((ca, sa_b), (np.stack(cb), sb_b), host_d, ids)  # numpy twin
    assert not device
    d = cp.asarray(np.full((m, n), 7.0, ml_dtypes.bfloat16).view(np.uint16))
    a_dev, b_dev = (cp.asarray(ca), cp.asarray(sa_b)), (cp.asarray(np.stack(cb)), cp.asarray(sb_b))
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a_dev, b_dev, d, cp.asarray(ids))
    got = d.get().view(ml_dtypes.bfloat16)
    assert (got[ids < 0].astype(np.float32) == 7).all()
    _close(got[ids >= 0], host_d[ids >= 0], "bfloat16")
    # masked, every masked_m from 0 to max_m
    max_m = 130
    qa = mxrt.quantize_mx(_x(rng, (g, max_m, k)), axis=2)
    qb = mxrt.quantize_mx(w, axis=2)
    mm = np.array([0, 1, 129, 130], np.int32)
    dm = cp.asarray(np.full((g, max_m, n), 3.0, ml_dtypes.bfloat16).view(np.uint16))
    deep_gemm.m_grouped_fp8_gemm_nt_masked(
        (cp.asarray(qa.data), cp.asarray(qa.scales)),
        (cp.asarray(qb.data), cp.asarray(qb.scales)),
        dm,
        cp.asarray(mm),
        64,
    )
    ref = np.full((g, max_m, n), 3.0, ml_dtypes.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((qa.data, qa.scales), (qb.data, qb.scales), ref, mm, 64)
    _close(dm.get().view(ml_dtypes.bfloat16), ref, "bfloat16")
    own = np.arange(max_m)[None, :] < mm[:, None]
    assert (dm.get().view(ml_dtypes.bfloat16)[~own].astype(np.float32) == 3).all()
    # DeepGEMM's Hopper recipe: float32 1x128 / 128x128 scales (kernel SCALE_F32), against the host twin
    sa_f, sb_f = (
        mxrt.per_token_cast_to_fp8(x, False)[1],
        np.stack([mxrt.per_block_cast_to_fp8(w[i], False)[1] for i in range(g)]),
    )
    ca_f = mxrt.per_token_cast_to_fp8(x, False)[0]
    cb_f = np.stack([mxrt.per_block_cast_to_fp8(w[i], False)[0] for i in range(g)])
    host_f = np.full((m, n), 7.0, ml_dtypes.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((ca_f, sa_f), (cb_f, sb_f), host_f, ids)
    df = cp.asarray(np.full((m, n), 7.0, ml_dtypes.bfloat16).view(np.uint16))
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (cp.asarray(ca_f), cp.asarray(sa_f)), (cp.asarray(cb_f), cp.asarray(sb_f)), df, cp.asarray(ids)
    )
    got_f = df.get().view(ml_dtypes.bfloat16)
    assert (got_f[ids < 0].astype(np.float32) == 7).all()
    _close(got_f[ids >= 0], host_f[ids >= 0], "bfloat16")
    dmf = cp.asarray(np.full((g, max_m, n), 3.0, ml_dtypes.bfloat16).view(np.uint16))
    pa = [mxrt.per_token_cast_to_fp8(v, False) for v in mxrt.dequantize_mx(qa, np.float32)]
    a_f = (np.stack([q for q, _ in pa]), np.stack([s_ for _, s_ in pa]))
    deep_gemm.m_grouped_fp8_gemm_nt_masked(
        (cp.asarray(a_f[0]), cp.asarray(a_f[1])), (cp.asarray(cb_f), cp.asarray(sb_f)), dmf, cp.asarray(mm), 64
    )
    ref_f = np.full((g, max_m, n), 3.0, ml_dtypes.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a_f, (cb_f, sb_f), ref_f, mm, 64)
    _close(dmf.get().view(ml_dtypes.bfloat16), ref_f, "bfloat16")
    assert [(dd["MODE"], dd["SCALE_F32"]) for dd, _ in device] == [(1, 0), (2, 0), (1, 1), (2, 1)]


@pytest.mark.parametrize("recipe", ["f32", "ue8m0_128", "mx32"])
@pytest.mark.parametrize("c_mode", ["c_is_d", "c_other", "no_c"])
def test_deepgemm_k_grouped_device(device, recipe, c_mode):
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(4)
    gk = 32 if recipe == "mx32" else 128
    ks, m, n = [128, 0, 256, 384], 48, 72
    starts = np.cumsum([0, *ks[:-1]])
    a, b = _x(rng, (sum(ks), m)), _x(rng, (sum(ks), n))

    def cast(v):
        q, sf = mxrt.per_token_cast_to_fp8(np.ascontiguousarray(v.T), recipe != "f32", gk)
        flat = np.concatenate([q[:, s : s + kk].reshape(-1) for s, kk in zip(starts, ks, strict=True)])
        if recipe != "f32":
            sf = (sf.view(np.uint32) >> 23).astype(np.uint8)
        return flat, sf

    qa, qb = cast(a), cast(b)
    c = _x(rng, (4, m, n)) * 8
    want = c.copy() if c_mode != "no_c" else np.zeros_like(c)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
        qa, qb, want, ks, np.array(ks, np.int32), c=None if c_mode == "no_c" else c, recipe=(1, 1, gk)
    )
    d = cp.asarray(np.full((4, m, n), np.nan, np.float32))
    cd = {"c_is_d": None, "c_other": cp.asarray(c), "no_c": None}[c_mode]
    if c_mode == "c_is_d":
        d[...] = c
        cd = d
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
        (cp.asarray(qa[0]), cp.asarray(qa[1])),
        (cp.asarray(qb[0]), cp.asarray(qb[1])),
        d,
        ks,
        cp.asarray(np.array(ks, np.int32)),
        c=cd,
        recipe=(1, 1, gk),
    )
    _close(d.get(), want, "float32")
    assert [(dd["MODE"], dd["ACCUM"], dd["SCALE_F32"]) for dd, _ in device] == [
        (4, int(c_mode != "no_c"), int(recipe == "f32"))
    ]


def test_device_argument_errors(device):
    cp = sys.modules["cupy"]
    rng = np.random.default_rng(3)
    lens = np.array([5, 60, 0])
    qx, qw = dev(mxrt.quantize_mx(_x(rng, (65, 64)))), dev(mxrt.quantize_mx(_x(rng, (3, 40, 64)), axis=2))
    with pytest.raises(mxrt.DtypeError, match="group_lens"):
        mxrt.grouped_gemm_mx(qx, qw, lens)  # host lens with device operands
    with pytest.raises(mxrt.DtypeError, match="int32 or int64"):
        mxrt.grouped_gemm_mx(qx, qw, cp.asarray(lens, np.float32))
    with pytest.raises(mxrt.ShapeError, match=r"\(3,\)"):
        mxrt.grouped_gemm_mx(qx, qw, cp.asarray(lens[:2]))
    with pytest.raises(mxrt.DtypeError, match="grouped_layout"):  # host ids with device operands
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
            (qx.data, qx.scales), (qw.data, qw.scales), cp.zeros((65, 40), np.uint16), np.zeros(65, np.int32)
        )
    with pytest.raises(mxrt.DtypeError, match="different sides"):
        mxrt.grouped_gemm_mx(qx, mxrt.quantize_mx(_x(rng, (3, 40, 64)), axis=2), cp.asarray(lens))
    assert not device


def _on_device(f):
    return lambda *a, **kw: np.asarray(f(*a, **kw)).view(FakeDeviceArray)


def test_deepgemm_psum_layout_on_the_device(device):
    """A device psum layout becomes per-row ids by device ops (numpy stands in for them here): same rows as the host."""
    cp = sys.modules["cupy"]
    for name in ("concatenate", "full", "arange", "searchsorted", "minimum", "where"):  # device ops, on numpy here
        setattr(cp, name, _on_device(getattr(np, name)))
    rng = np.random.default_rng(5)
    lens = np.array([50, 0, 130, 7])
    psum = mxrt.contiguous_psum_layout(lens)
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k = ids.size, 64, 128
    qa, qb = mxrt.quantize_mx(_x(rng, (m, k))), mxrt.quantize_mx(_x(rng, (4, n, k)), axis=2)
    ref = np.full((m, n), 5.0, ml_dtypes.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (qa.data, qa.scales), (qb.data, qb.scales), ref, psum, use_psum_layout=True
    )
    d = cp.asarray(np.full((m, n), 5.0, ml_dtypes.bfloat16).view(np.uint16))
    a_dev, b_dev = (cp.asarray(qa.data), cp.asarray(qa.scales)), (cp.asarray(qb.data), cp.asarray(qb.scales))
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a_dev, b_dev, d, cp.asarray(psum), use_psum_layout=True)
    got = d.get().view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got[ids < 0].astype(np.float32), 5.0)
    _close(got, ref, "bfloat16")
