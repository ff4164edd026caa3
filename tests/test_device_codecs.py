"""The device codecs of kernels_src/common/mx_codecs.h, built for the host, against the numpy reference.

The same header is compiled into every GPU kernel, so this pins the kernels' arithmetic without a GPU:
scale rules on every bf16-representable amax plus random and boundary fp32 values, element encoding on every
bf16 pattern at many scale exponents, fp16 widening on all 65,536 patterns.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from _hostcc import build_host_lib, host_compiler

from mxrt.formats.codecs import FORMATS
from mxrt.formats.mx import encode_with_scales
from mxrt.formats.scales import ScaleMode, compute_scales

ROOT = Path(__file__).resolve().parents[1]
FMT_IDS = {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4}
MODE_IDS = {ScaleMode.FLOOR: 0, ScaleMode.CEIL: 1, ScaleMode.EVEN: 2, ScaleMode.RCEIL: 3}


def _compiler() -> list[str] | None:
    return host_compiler()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_host_lib(tmp_path_factory.mktemp("codecs"), "codecs_host.cpp")
    for name in ("host_scales", "host_encode", "host_f16_to_f32"):
        getattr(so, name).restype = None
    return so


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _amax_cases() -> np.ndarray:
    rng = np.random.default_rng(1)
    bf16 = np.arange(0, 0x7F81, dtype=np.uint32) << 16  # every non-negative bf16 up to +Inf
    rand = rng.integers(0, 0x7F800000, 200_000, dtype=np.uint32)
    maxes = np.array([f.max_value for f in FORMATS.values()], np.float32)
    pow2 = np.ldexp(np.float32(1.0), np.arange(-149, 128)).astype(np.float32)
    with np.errstate(over="ignore"):
        near = (maxes[:, None] * pow2[None, :]).astype(np.float32).view(np.uint32).ravel()
    # EVEN rounds up from half an element ulp below the next binade: (2 - 2^-(MBITS+1)) * 2^k, each side
    mbits = np.array(sorted({f.mbits for f in FORMATS.values()}), np.float32)
    with np.errstate(over="ignore"):
        half = ((2 - np.exp2(-(mbits + 1)))[:, None] * pow2[None, :]).astype(np.float32).view(np.uint32).ravel()
    near = np.concatenate([near, half])
    near = near[near < 0x7F800000]
    near = np.concatenate([near - 1, near, near + 1])
    special = np.array([0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 1, 0x400000, 0x7F7FFFFF], np.uint32)
    return np.concatenate([bf16, rand, near, special])


@pytest.mark.parametrize("mode", list(ScaleMode), ids=lambda m: m.value)
@pytest.mark.parametrize("fmt", list(FMT_IDS))
def test_scales_bitexact(lib, fmt, mode):
    a = _amax_cases()
    a = a[(a & 0x7FFFFFFF) == a]
    got = np.empty(a.size, np.uint8)
    lib.host_scales(FMT_IDS[fmt], MODE_IDS[mode], _ptr(a), _ptr(got), ctypes.c_long(a.size))
    want = compute_scales(a.view(np.float32), FORMATS[fmt], mode)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{fmt}/{mode.value}: amax bits {a[bad[0]]:#010x}: got {got[bad[0]]}, want {want[bad[0]]}"


@pytest.mark.parametrize("fmt", list(FMT_IDS))
def test_encode_bitexact(lib, fmt):
    f = FORMATS[fmt]
    rng = np.random.default_rng(2)
    finite = np.arange(1 << 16, dtype=np.uint32) << 16
    finite = finite[(finite & 0x7F800000) != 0x7F800000]
    exps = np.array([-127, -126, -125, -100, -60, -20, -9, -3, -1, 0, 1, 2, 5, 20, 60, 100, 120, 127])
    x = np.concatenate(
        [np.tile(finite, exps.size), rng.integers(0, 1 << 32, 300_000, dtype=np.uint64).astype(np.uint32)]
    )
    x = np.where((x & 0x7F800000) == 0x7F800000, x & 0x807FFFFF, x).astype(np.uint32)  # finite only
    e = np.concatenate([np.repeat(exps, finite.size), rng.integers(-127, 128, 300_000)]).astype(np.int32)
    got = np.empty(x.size, np.uint8)
    lib.host_encode(FMT_IDS[fmt], _ptr(x), _ptr(e), _ptr(got), ctypes.c_long(x.size))
    want = encode_with_scales(x.view(np.float32)[:, None], (e + 127).astype(np.uint8)[:, None], f, 1)[:, 0]
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{fmt}: x bits {x[bad[0]]:#010x}, e {e[bad[0]]}: got {got[bad[0]]:#x}, want {want[bad[0]]:#x}"
    )


def test_f16_widening_exhaustive(lib):
    h = np.arange(1 << 16, dtype=np.uint16)
    got = np.empty(h.size, np.uint32)
    lib.host_f16_to_f32(_ptr(h), _ptr(got), ctypes.c_long(h.size))
    with np.errstate(invalid="ignore"):
        want = h.view(np.float16).astype(np.float32).view(np.uint32)
    nan = np.isnan(h.view(np.float16))
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & 0x7F800000) == 0x7F800000) and np.all(got[nan] & 0x7FFFFF)


def test_bf16_is_a_shift():
    x = np.arange(1 << 16, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        want = x.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
    assert np.array_equal(x.astype(np.uint32) << 16, want)
