"""How the sm_90a decode kernel reads preshuffled scale layouts in place (kernels_src/gemm/gemm_decode_sm90_scales.h,
built for the host): for every row and group of 4 MX blocks, the words it stages and the 4 scale bytes it gathers
from them, against the row-major scales the numpy twin :func:`mxrt.preshuffle_scales` shuffled, bit for bit.

The kernel itself (TMA, mbarriers, cp.async, mma.sync in inline PTX) has no host build and no SIMT emulation; its
scale reads go through exactly these two functions (``DecScales::word`` for the cp.async sources, ``DecScales::bytes``
at the fragment's scale read), so this pins the index maps, the word alignment the 4-byte cp.async needs, the
storage bounds and the byte gather of the scattered layouts. tests/test_gpu_gemm_decode.py runs the kernel.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _hostcc import build_host_lib
from support.inputs import layout_storage

import mxrt
from mxrt.codes import SCALE_LAYOUT_CODES, SCALE_LAYOUT_TURBO16X4_U32
from mxrt.ops import gemm_decode_kernels as K

#: (layout name or None, storage dtype): every form the decode path accepts
FORMS = [(None, None), *((name, None) for name in mxrt.SCALE_LAYOUTS), ("turbo16x4", np.uint32)]
#: scale matrices [rows, k/32] (k % 128 == 0): rows past one layout tile and short of the next, K past aiter's 8
SHAPES = [(1, 4), (7, 12), (64, 36), (129, 8), (300, 132), (1000, 20)]


def _code(layout: str | None, dtype) -> int:
    return SCALE_LAYOUT_TURBO16X4_U32 if dtype is np.uint32 else SCALE_LAYOUT_CODES[layout]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_host_lib(tmp_path_factory.mktemp("decode_scales"), "decode_scales_host.cpp")
    so.host_decode_scales.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_uint, ctypes.c_uint]
    so.host_decode_scales.argtypes += [ctypes.c_void_p]
    return so


def test_words_per_row_match_the_launcher(lib) -> None:
    """The kernel's staged words per row (DEC_SWORDS) are what the launcher sizes shared memory with."""
    for code in K.DECODE_LAYOUTS:
        assert lib.host_decode_words(code) == K.scale_words(code), code
    assert {c for c in K.DECODE_LAYOUTS if K.scale_words(c) == 4} == set(K.SCATTERED_LAYOUTS)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f[0]}{'_u32' if f[1] else ''}")
def test_staged_words_give_the_row_major_bytes(lib, form, shape) -> None:
    layout, dtype = form
    rows, cols = shape
    rng = np.random.default_rng(rows * 7 + cols)
    s = rng.integers(0, 256, (rows, cols), dtype=np.uint8)
    if layout is None:
        storage = s.ravel()
    else:
        p = mxrt.preshuffle_scales(s, layout, dtype=dtype, pad_value=0xA5, backend="numpy")
        storage = np.ascontiguousarray(layout_storage(p, layout)).view(np.uint8)
    buf = np.zeros(storage.size + 16, np.uint8)  # a 16-byte aligned copy, as device buffers are
    start = (-buf.ctypes.data) % 16
    buf = buf[start : start + storage.size]
    buf[...] = storage
    out = np.full((rows, cols // 4), 0xDEADBEEF, np.uint32)
    rc = lib.host_decode_scales(_code(layout, dtype), buf.ctypes.data, buf.size, rows, cols, out.ctypes.data)
    assert rc == 0, "a staged word is unaligned or outside the storage"
    want = np.ascontiguousarray(s).view("<u4")  # byte j of group gi = block 4 gi + j
    bad = np.argwhere(out != want)
    if bad.size:
        i = tuple(bad[0])
        pytest.fail(f"{len(bad)} groups differ, first (row, group) {i}: {out[i]:#010x} vs {want[i]:#010x}")
