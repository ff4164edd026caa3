"""kernels_src/common/mx_dequant.h built for the host: both routes of the GPU dequantizer (exact integer
construction, fast fp32 product) against the numpy twin :func:`mxrt.formats.dequantize_mx`, bitwise, on every code
of every format times every scale byte, for float32, bfloat16 and float16 out (NaN compared as NaN)."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from _hostcc import build_host_lib

from mxrt.codes import FMT_CODES, GEMM_OUT_DTYPE_CODES
from mxrt.formats import MXArray
from mxrt.formats import mx as mx_np

NCODES = {"e4m3": 256, "e5m2": 256, "e2m3": 64, "e3m2": 64, "e2m1": 16}
OUT = {
    "float32": (np.float32, np.uint32),
    "bfloat16": (ml_dtypes.bfloat16, np.uint16),
    "float16": (np.float16, np.uint16),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_host_lib(tmp_path_factory.mktemp("dequant"), "dequant_host.cpp")
    so.host_dequant.restype = None
    return so


def _reference(fmt: str, out: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, scales, numpy twin bits) over every (code, scale byte) pair: one row per scale byte."""
    n = NCODES[fmt]
    k = max(n, 32)
    codes = np.tile((np.arange(k) % n).astype(np.uint8), (256, 1))
    scales = np.arange(256, dtype=np.uint8).reshape(256, 1).repeat(k // 32, axis=1)
    data = codes if fmt != "e2m1" else (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    q = MXArray(data=data, scales=scales, fmt=fmt, block_size=32, axis=1, shape=(256, k), scale_mode="floor")
    ref = mx_np.dequantize_mx(q, OUT[out][0])
    return codes, np.broadcast_to(np.arange(256, dtype=np.uint8)[:, None], codes.shape), ref


@pytest.mark.parametrize("out", list(OUT))
@pytest.mark.parametrize("fmt", list(NCODES))
def test_dequant_element_matches_numpy(lib, fmt: str, out: str) -> None:
    codes, scales, ref = _reference(fmt, out)
    c = np.ascontiguousarray(codes, np.uint32).ravel()
    s = np.ascontiguousarray(scales, np.uint32).ravel()
    ref_bits = ref.ravel().view(OUT[out][1]).astype(np.uint32)
    ref_nan = np.isnan(ref.ravel().astype(np.float64))
    for fast in (0, 1, 2) if out != "float16" else (0, 1):  # exact, fp32 product, bit route
        got = np.empty_like(c)
        lib.host_dequant(
            ctypes.c_int(FMT_CODES[fmt]),
            ctypes.c_int(GEMM_OUT_DTYPE_CODES[out]),
            ctypes.c_int(fast),
            *(ctypes.c_void_p(a.ctypes.data) for a in (c, s, got)),
            ctypes.c_long(c.size),
        )
        used = got != 0xDEADBEEF if fast else np.ones(c.size, bool)
        if fast:  # the fast route must cover the bulk of the scale bytes
            assert used.reshape(256, -1)[:, 0].sum() >= 220, used.reshape(256, -1)[:, 0].sum()
        got_vals = got.astype(OUT[out][1]).view(OUT[out][0]).astype(np.float64)
        bad = used & ~((got == ref_bits) | (ref_nan & np.isnan(got_vals)))
        assert not bad.any(), (
            f"{fmt} -> {out} ({['exact', 'fp32 product', 'bits'][fast]}): {bad.sum()} mismatches, first code "
            f"{c[bad][0]:#x} scale {s[bad][0]}: got {got[bad][0]:#x}, numpy {ref_bits[bad][0]:#x}"
        )
