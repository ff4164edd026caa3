"""GPU scale preshuffles against their numpy twins, bit for bit (marker ``gpu``; skips without cupy or a device).

Every output buffer is poisoned with 0xA5 bytes before the kernel writes (so an unwritten padding byte shows),
every launch is followed by a device synchronisation, and skips come from the dispatch tables.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.ops import kernels

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

SHAPES = [(1, 1), (7, 3), (255, 9), (256, 8), (1000, 57), (0, 5), (3, 0)]
FORMS = [
    ("aiter32x8", None),
    ("turbo16x4", None),
    ("turbo16x4", np.uint32),
    ("cublas128x4", None),
    ("deepgemm_ue8m0", None),
]
FORM_IDS = [f"{layout}{'-u32' if dtype else ''}" for layout, dtype in FORMS]
PADS = (127, 0, 255)
POISON = 0xA5


@pytest.fixture(autouse=True)
def poisoned_outputs():
    """Outputs start as 0xA5 bytes and every launch is synchronised and checked (the runtime's test hook)."""
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True):
        yield


def _skip_unless_supported(op: str) -> None:
    target = mxrt.runtime.get_arch().target
    if not kernels.op_supports(op, target):
        pytest.skip(f"{op}: no kernel for {target} in the dispatch table")


def codes(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def storage_bytes(p, layout, shape):
    """The flat storage bytes behind a result (numpy or CuPy), padding rows of deepgemm_ue8m0 included."""
    sm, sn = mxrt.scale_layout_shape(layout, *shape)
    if layout == "deepgemm_ue8m0":
        if isinstance(p, np.ndarray):
            st = np.lib.stride_tricks.as_strided(p, (sn // 4, sm), (4 * sm, 4), writeable=False)
            return np.ascontiguousarray(st).view(np.uint8).ravel()
        st = cupy.lib.stride_tricks.as_strided(p, (sn // 4, sm), (4 * sm, 4))
        return cupy.asnumpy(cupy.ascontiguousarray(st)).view(np.uint8).ravel()
    host = cupy.asnumpy(p) if not isinstance(p, np.ndarray) else p
    return np.ascontiguousarray(host).view(np.uint8).ravel()


def assert_same_result(got, want, layout, shape, tag):
    host = cupy.asnumpy(got) if not isinstance(got, np.ndarray) else got
    assert host.shape == want.shape and host.dtype == want.dtype, f"{tag}: {host.dtype}{host.shape} vs {want.shape}"
    if want.size:  # CuPy and numpy may give empty arrays different strides
        assert got.strides == want.strides, f"{tag}: strides {got.strides} vs {want.strides}"
    bad = np.argwhere(host != want)
    assert bad.size == 0, f"{tag}: {len(bad)} mismatches, first at {tuple(bad[0])}: {host[tuple(bad[0])]}"
    gs, ws = storage_bytes(got, layout, shape), storage_bytes(want, layout, shape)
    bad = np.flatnonzero(gs != ws)
    assert bad.size == 0, f"{tag}: storage byte {bad[0]} is {gs[bad[0]]:#04x}, want {ws[bad[0]]:#04x}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("layout", "dtype"), FORMS, ids=FORM_IDS)
def test_preshuffle_bitexact(layout, dtype, shape) -> None:
    _skip_unless_supported("preshuffle_scales")
    s = codes(shape, 100 * SHAPES.index(shape) + FORMS.index((layout, dtype)))
    for pad in PADS:
        want = mxrt.preshuffle_scales(s, layout, pad_value=pad, dtype=dtype, backend="numpy")
        tag = f"{layout}/{dtype} pad {pad} {shape}"
        got = mxrt.preshuffle_scales(cupy.asarray(s), layout, pad_value=pad, dtype=dtype)  # CuPy in -> CuPy out
        assert type(got).__module__.startswith("cupy")
        assert_same_result(got, want, layout, shape, tag + " cupy")
        host = mxrt.preshuffle_scales(s, layout, pad_value=pad, dtype=dtype, backend="gpu")  # numpy in -> numpy out
        assert isinstance(host, np.ndarray)
        assert_same_result(host, want, layout, shape, tag + " numpy-in")


@pytest.mark.parametrize(("layout", "dtype"), FORMS, ids=FORM_IDS)
def test_preshuffle_strided_and_e8m0_inputs(layout, dtype) -> None:
    _skip_unless_supported("preshuffle_scales")
    big = codes((600, 80), 3)
    dbig = cupy.asarray(big)
    views = {
        "column slice": (dbig[:255, 3:12], big[:255, 3:12]),
        "row step": (dbig[::3, :57], big[::3, :57]),
        "transposed": (dbig[:40, :70].T, big[:40, :70].T),
        "negative stride": (dbig[::-1, ::-2], big[::-1, ::-2]),
    }
    for name, (dv, hv) in views.items():
        want = mxrt.preshuffle_scales(hv, layout, dtype=dtype, backend="numpy")
        got = mxrt.preshuffle_scales(dv, layout, dtype=dtype)
        assert_same_result(got, want, layout, hv.shape, f"{layout} {name}")
    e8 = big[:9, :7].view(ml_dtypes.float8_e8m0fnu)
    want = mxrt.preshuffle_scales(e8, layout, dtype=dtype, backend="numpy")
    assert_same_result(mxrt.preshuffle_scales(e8, layout, dtype=dtype, backend="gpu"), want, layout, (9, 7), "e8m0")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("layout", "dtype"), FORMS, ids=FORM_IDS)
def test_unshuffle_round_trip_on_device(layout, dtype, shape) -> None:
    _skip_unless_supported("unshuffle_scales")
    s = codes(shape, 11)
    p = mxrt.preshuffle_scales(cupy.asarray(s), layout, dtype=dtype)
    back = mxrt.unshuffle_scales(p, layout, shape)
    assert type(back).__module__.startswith("cupy") and back.dtype == cupy.uint8
    np.testing.assert_array_equal(cupy.asnumpy(back), s)
    hp = mxrt.preshuffle_scales(s, layout, dtype=dtype, backend="numpy")
    np.testing.assert_array_equal(mxrt.unshuffle_scales(hp, layout, shape, backend="gpu"), s)
    if layout != "deepgemm_ue8m0":  # the flat form
        np.testing.assert_array_equal(cupy.asnumpy(mxrt.unshuffle_scales(p.ravel(), layout, shape)), s)
    else:  # any strides: a C-contiguous int32 [rows, sn/4] copy reads the same
        np.testing.assert_array_equal(cupy.asnumpy(mxrt.unshuffle_scales(cupy.ascontiguousarray(p), layout, shape)), s)


def test_device_errors() -> None:
    _skip_unless_supported("preshuffle_scales")
    s = cupy.asarray(codes((8, 8), 0))
    with pytest.raises(mxrt.DtypeError, match="uint8"):
        mxrt.preshuffle_scales(s.astype(cupy.int16), "aiter32x8")
    with pytest.raises(mxrt.ShapeError, match="2-D"):
        mxrt.preshuffle_scales(s.ravel(), "aiter32x8")
    with pytest.raises(mxrt.LayoutError, match="layout"):
        mxrt.preshuffle_scales(s, "nope")
    with pytest.raises(mxrt.ShapeError, match="pad_value"):
        mxrt.preshuffle_scales(s, "aiter32x8", pad_value=256)
    with pytest.raises(mxrt.DtypeError, match="dtype"):
        mxrt.preshuffle_scales(s, "aiter32x8", dtype=np.uint32)
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.preshuffle_scales(s, "aiter32x8", backend="numpy")
    p = mxrt.preshuffle_scales(s, "turbo16x4", dtype=np.uint32)
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.unshuffle_scales(cupy.asfortranarray(p), "turbo16x4", (8, 8))
    p[0, 0] = 300
    with pytest.raises(mxrt.ShapeError, match="<= 255"):
        mxrt.unshuffle_scales(p, "turbo16x4", (8, 8))
    with pytest.raises(mxrt.ShapeError, match="shape"):
        mxrt.unshuffle_scales(cupy.zeros((4, 1), cupy.int32), "deepgemm_ue8m0", (4, 8))
