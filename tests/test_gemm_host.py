"""The GEMM device helpers of kernels_src/common/mx_gemm.h, built for the host, against numpy / ml_dtypes: exact
element decode on every code, fp32 -> bf16 / fp16 round-to-nearest-even on edge and random values (subnormals,
ties, overflow, NaN), and the two normal scale factors of every E8M0 pair."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from _hostcc import build_host_lib

ML = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2, 4: ml_dtypes.float4_e2m1fn}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_host_lib(tmp_path_factory.mktemp("gemm"), "gemm_host.cpp")
    for name in ("host_decode", "host_to_16", "host_scale_steps"):
        getattr(so, name).restype = None
    return so


def _p(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("fmt", [0, 1, 4], ids=["e4m3", "e5m2", "e2m1"])
def test_decode_every_code(lib, fmt):
    n = 16 if fmt == 4 else 256
    codes = np.arange(n, dtype=np.uint32)
    out = np.empty(n, np.float32)
    lib.host_decode(fmt, _p(codes), _p(out), n)
    want = codes.astype(np.uint8).view(ML[fmt]).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(out[ok].view(np.uint32), want[ok].view(np.uint32))  # signed zeros too


def _f32_cases() -> np.ndarray:
    rng = np.random.default_rng(0)
    rand = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32)
    # bf16 / fp16 ties and their neighbours, around every exponent
    e = np.arange(1, 255, dtype=np.uint32) << 23
    ties = np.concatenate([e | 0x8000, e | 0x18000, e | 0x1000, e | 0x3000, e | 0x2000])
    near = np.concatenate([ties - 1, ties, ties + 1])
    special = np.array(
        [
            0,
            1,
            0x400000,
            0x7F7FFFFF,
            0x7F800000,
            0x7FC00000,
            0x477FEFFF,
            0x477FF000,
            0x33000000,
            0x33000001,
            0x387FFFFF,
            0x38800000,
            0x33800000,
        ],
        np.uint32,
    )
    bits = np.concatenate([rand, near, special])
    return np.concatenate([bits, bits | 0x80000000]).view(np.float32)


@pytest.mark.parametrize("code,dtype", [(1, ml_dtypes.bfloat16), (2, np.float16)], ids=["bf16", "f16"])
def test_round_to_16_bits(lib, code, dtype):
    x = _f32_cases()
    out = np.empty(x.size, np.uint16)
    lib.host_to_16(code, _p(x), _p(out), x.size)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(dtype)
    got = out.view(dtype)
    nan = np.isnan(x)
    assert np.isnan(got.astype(np.float32)[nan]).all()
    bad = np.nonzero(got[~nan].view(np.uint16) != want[~nan].view(np.uint16))[0]
    assert bad.size == 0, f"first mismatch: x={x[~nan][bad[0]]!r} got {got[~nan][bad[0]]} want {want[~nan][bad[0]]}"


def test_scale_steps_are_normal_and_exact(lib):
    sa, sb = (v.ravel().astype(np.uint32) for v in np.meshgrid(np.arange(255), np.arange(255)))
    f1, f2 = np.empty(sa.size, np.float32), np.empty(sa.size, np.float32)
    lib.host_scale_steps(_p(sa), _p(sb), _p(f1), _p(f2), sa.size)
    assert (f1 >= 2.0**-126).all() and (f2 >= 2.0**-126).all() and np.isfinite(f1).all() and np.isfinite(f2).all()
    e = sa.astype(np.int64) + sb - 254
    exact = e >= -252
    np.testing.assert_array_equal((f1.astype(np.float64) * f2)[exact], np.ldexp(1.0, e[exact]))
    assert (f1.astype(np.float64) * f2)[~exact].max() <= 2.0**-252  # only products below every MX partial's reach
