"""The index maps of kernels_src/common/scale_layouts.h built for the host: the GPU preshuffle/unshuffle index
maps against :func:`mxrt.layouts.scale_index` (forward) and as its exact inverse, on every position of padded shapes."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from _hostcc import build_host_lib, host_compiler

from mxrt.codes import SCALE_LAYOUT_CODES
from mxrt.layouts import SCALE_LAYOUTS, scale_index, scale_layout_shape

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(1, 1), (7, 3), (255, 9), (256, 8), (1000, 57), (300, 130)]


def _compiler() -> list[str] | None:
    return host_compiler()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_host_lib(tmp_path_factory.mktemp("scale_maps"), "scale_maps_host.cpp")
    so.host_scale_maps.restype = None
    return so


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("layout", SCALE_LAYOUTS)
def test_device_maps_match_scale_index(lib, layout: str, shape: tuple[int, int]) -> None:
    sm, sn = scale_layout_shape(layout, *shape)
    r, c = (a.ravel().astype(np.uint32) for a in np.indices((sm, sn)))
    o, r2, c2 = (np.empty(r.size, np.uint32) for _ in range(3))
    lib.host_scale_maps(
        ctypes.c_int(SCALE_LAYOUT_CODES[layout]),
        *(_ptr(a) for a in (r, c, o, r2, c2)),
        ctypes.c_long(r.size),
        ctypes.c_uint(sm),
        ctypes.c_uint(sn),
    )
    np.testing.assert_array_equal(o, scale_index(layout, r, c, shape))
    assert np.array_equal(np.sort(o), np.arange(sm * sn)), "forward map is not a bijection onto the storage"
    np.testing.assert_array_equal(r2, r)
    np.testing.assert_array_equal(c2, c)
