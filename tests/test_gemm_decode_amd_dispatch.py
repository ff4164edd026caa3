"""The AMD decode paths' envelope and plan on the CPU (no compiler, no emulator): which problems ``auto`` sends to
``gfx950_decode`` / ``gfx942_decode`` on a gfx950 / gfx942 device, the typed declines that hand the rest to the
dense AMD paths, and the path's own K split. The kernels themselves: tests/test_gemm_decode_amd_host.py (slow)."""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.ops import gemm_decode_amd
from mxrt.ops.gemm_paths import DeviceGemm, select_gemm_path
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


def _dg(target, m, n, k, fa="e4m3", fb="e4m3", *, offset=0, layouts=(None, None), **kw):
    rng = np.random.default_rng(m * 1000 + n + k)
    qa = mxrt.quantize_mx(rng.standard_normal((m, k)), fa, axis=1)
    qb = mxrt.quantize_mx(rng.standard_normal((n, k)), fb, axis=1)
    sa, sb = np.asarray(qa.scales), np.asarray(qb.scales)
    if layouts[0]:
        sa = mxrt.preshuffle_scales(sa, layouts[0], backend="numpy")
    if layouts[1]:
        sb = mxrt.preshuffle_scales(sb, layouts[1], backend="numpy")
    a, b = _aligned(np.asarray(qa.data), offset), _aligned(np.asarray(qb.data))
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
