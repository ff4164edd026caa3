"""The AMD decode paths' envelope and plan on the CPU (no compiler, no emulator): which problems ``auto`` sends to
``gfx950_decode`` / ``gfx942_decode`` on a gfx950 / gfx942 device, the typed declines that hand the rest to the
dense AMD paths, and the path's own K split. The kernels themselves: tests/test_gemm_decode_amd_host.py (slow)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import mxrt
from mxrt.errors import UnsupportedArchError
from mxrt.ops import gemm_decode_amd
from mxrt.ops.gemm_paths import DeviceGemm, gemm_paths, select_gemm_path
from mxrt.problems import gemm_problem
from mxrt.runtime.arch import Arch

TARGETS = ("gfx950", "gfx942")
DENSE = {"gfx950": "gfx950_mfma_scale", "gfx942": "gfx942_mfma_fp8"}


def _aligned(c: np.ndarray, offset: int = 0) -> np.ndarray:
    buf = np.zeros(c.size + 32, np.uint8)
    start = (-buf.ctypes.data) % 16 + offset
    out = buf[start : start + c.size].reshape(c.shape)
    out[...] = c
    return out


def _dg(target, m, n, k, fa="e4m3", fb="e4m3", *, offset=0, layouts=(None, None), shuffled=False, **kw):
    """A DeviceGemm of host buffers (``shuffled``: b's codes in the aiter 16x16 weight layout, as a device call
    hands them to the paths)."""
    rng = np.random.default_rng(m * 1000 + n + k)
    qa = mxrt.quantize_mx(rng.standard_normal((m, k)), fa, axis=1)
    qb = mxrt.quantize_mx(rng.standard_normal((n, k)), fb, axis=1)
    sa, sb = np.asarray(qa.scales), np.asarray(qb.scales)
    if layouts[0]:
        sa = mxrt.preshuffle_scales(sa, layouts[0], backend="numpy")
    if layouts[1]:
        sb = mxrt.preshuffle_scales(sb, layouts[1], backend="numpy")
    a, b = _aligned(np.asarray(qa.data), offset), _aligned(np.asarray(qb.data))
    if shuffled:
        b = _aligned(mxrt.preshuffle_weight(np.asarray(qb.data), "aiter16x16"))
        kw = dict(kw, b_weight_layout="aiter16x16")
    p = gemm_problem((a, sa, fa, k), (b, sb, fb, k), a_scale_layout=layouts[0], b_scale_layout=layouts[1], **kw)
    out = np.empty((m, n), np.float32)
    return DeviceGemm(p, a, b, sa, sb, out, Arch("amd", target, "fake", 64, 304, 65536))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 64])
def test_auto_picks_decode_for_m_up_to_64(target, m):
    for fa, fb in (("e4m3", "e4m3"), ("e4m3", "e2m1"), ("e2m1", "e2m1"), ("e5m2", "e4m3")):
        assert select_gemm_path(_dg(target, m, 96, 256, fa, fb)).name == f"{target}_decode"


@pytest.mark.parametrize("target", TARGETS)
def test_preshuffled_scales_and_every_out_dtype_stay_on_decode(target):
    dg = _dg(target, 4, 96, 256, layouts=("aiter32x8", "turbo16x4"))
    assert select_gemm_path(dg).name == f"{target}_decode"
    for out_dtype in ("float32", "bfloat16", "float16"):
        assert select_gemm_path(_dg(target, 4, 96, 256, out_dtype=out_dtype)).name == f"{target}_decode"


@pytest.mark.parametrize("target", TARGETS)
def test_declines_hand_over_to_the_dense_path(target):
    dg = _dg(target, 65, 96, 256)
    assert "m = 65 > 64" in gemm_decode_amd.unsupported(target, dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales)
    assert select_gemm_path(dg).name == DENSE[target]
    for dg in (_dg(target, 4, 96, 48, "e4m3", "e2m1"), _dg(target, 4, 96, 256, offset=1), _dg(target, 4, 96, 40)):
        why = gemm_decode_amd.unsupported(target, dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales)
        assert "16-byte aligned" in why and DENSE[target] in why
        assert select_gemm_path(dg).name == DENSE[target]


def test_other_targets_have_no_decode_kernel():
    dg = _dg("gfx950", 4, 96, 256)
    assert "no AMD decode kernel" in gemm_decode_amd.unsupported("gfx90a", dg.p, dg.a_codes, dg.b_codes, None, None)


@pytest.mark.parametrize(
    "n,k,cus,split_k,want",
    [
        (7168, 4096, 304, 1, 6),  # 112 CTAs for 608 wanted: ceil(608 / 112)
        (7168, 4096, 256, 1, 5),
        (4096, 512, 304, 1, 1),  # 16 blocks: no split leaves a wave without a step
        (64, 16384, 304, 1, 16),  # capped
        (40000, 4096, 304, 1, 1),  # enough CTAs
        (7168, 4096, 304, 3, 3),  # the caller's split
    ],
)
def test_the_paths_own_split(n, k, cus, split_k, want):
    p = gemm_problem(
        (np.zeros((1, k), np.uint8), np.zeros((1, k // 32), np.uint8), "e4m3", k),
        (np.zeros((n, k), np.uint8), np.zeros((n, k // 32), np.uint8), "e4m3", k),
        split_k=split_k,
    )
    assert gemm_decode_amd.split_for(p, cus) == want
    pl = gemm_decode_amd.plan("gfx950", p, cus)
    assert pl.config.grid == (-(-n // 64), 1, want) and dict(pl.defines)["MT"] == 1


# ---- weight codes in the aiter 16x16 layout (b_weight_layout="aiter16x16", define WLB = 1) ----------------------


def _why(target, dg):
    return gemm_decode_amd.unsupported(target, dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales)


@pytest.mark.parametrize("target", TARGETS)
def test_both_paths_list_the_layout(target):
    (path,) = [q for q in gemm_paths(target) if q.name == f"{target}_decode"]
    assert path.weight_layouts == ("aiter16x16",)
    assert all(q.weight_layouts == () for q in gemm_paths(target) if q is not path)  # only decode reads it here


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "m,n,k,fa,fb,layouts",
    [
        (1, 72, 208, "e4m3", "e4m3", (None, None)),  # n and row-byte tails: [80, 224] padded buffer
        (17, 136, 320, "e5m2", "e4m3", (None, None)),
        (33, 4096, 256, "e4m3", "e2m1", (None, None)),
        (64, 100, 224, "e2m1", "e2m1", (None, None)),
        (4, 144, 256, "e4m3", "e4m3", ("aiter32x8", "turbo16x4")),  # a preshuffled scale layout: n = np_
    ],
)
def test_select_offers_the_layout_to_the_decode_path(target, m, n, k, fa, fb, layouts):
    """select_gemm_path offers shuffled weights to the decode path, which declines nothing that it takes
    row-major; the plan is the row-major one plus WLB = 1."""
    plain = _dg(target, m, n, k, fa, fb, layouts=layouts)
    sh = _dg(target, m, n, k, fa, fb, layouts=layouts, shuffled=True)
    assert sh.p.b_weight_layout == "aiter16x16" and sh.b_codes.shape == ((n + 15) // 16 * 16, sh.b_codes.shape[1])
    assert _why(target, plain) is None and _why(target, sh) is None
    assert select_gemm_path(sh).name == f"{target}_decode" == select_gemm_path(plain).name
    a, b = gemm_decode_amd.plan(target, plain.p, 304), gemm_decode_amd.plan(target, sh.p, 304)
    assert dict(b.defines) == {**dict(a.defines), "WLB": 1} and "WLB" not in dict(a.defines)
    assert (b.config, b.split, b.spec) == (a.config, a.split, a.spec)


@pytest.mark.parametrize("target", TARGETS)
def test_shuffled_declines_are_the_row_major_ones(target):
    """Outside the envelope (m > 64, unaligned rows) the decode path declines shuffled weights for the same reason;
    no other AMD path reads the layout, so the selection declines and gemm_mx's fallback unshuffles them."""
    for m, n, k, fb in ((65, 96, 256, "e4m3"), (4, 96, 40, "e4m3"), (4, 96, 48, "e2m1")):
        plain, sh = _dg(target, m, n, k, "e4m3", fb), _dg(target, m, n, k, "e4m3", fb, shuffled=True)
        why, why_sh = (re.sub("base 0x[0-9a-f]+", "base", _why(target, d) or "") for d in (plain, sh))
        assert why_sh == why != ""
        with pytest.raises(UnsupportedArchError, match="reads row-major weight codes, not b_weight_layout"):
            select_gemm_path(sh)


def test_the_2_31_limit_counts_the_padded_buffer():
    """n * k = 2^30 bytes of e4m3 codes fit; shuffled, k = 16 pads each row to 32 bytes: 2^31 bytes, declined."""
    dg, sh = _dg("gfx950", 1, 64, 16), _dg("gfx950", 1, 64, 16, shuffled=True)
    big, big_sh = (dataclasses.replace(d.p, n=2**26) for d in (dg, sh))
    assert gemm_decode_amd.code_bytes(big, "b", big.n, "e4m3") == 2**30
    assert gemm_decode_amd.code_bytes(big_sh, "b", big_sh.n, "e4m3") == 2**31
    assert gemm_decode_amd.unsupported("gfx950", big, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales) is None
    why = gemm_decode_amd.unsupported("gfx950", big_sh, sh.a_codes, sh.b_codes, sh.a_scales, sh.b_scales)
    assert why == "b codes hold 2147483648 bytes, the kernel's 32-bit offsets reach < 2^31"
    # the token codes keep their plain size: a = m rows of k bytes
    assert gemm_decode_amd.code_bytes(big_sh, "a", 3, "e4m3") == 48
