"""Shape-only checks of the decode paths' host guards (CPU, no GPU): the 2^31 limits, the envelope, alignment,
and the path's own K split, on stand-in problems (no buffers are allocated)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from mxrt.ops import gemm_decode, moe_gemm
from mxrt.runtime.arch import Arch

H100 = Arch(vendor="nvidia", target="sm_90a", name="H100", wave_size=32, num_cus=132, smem_per_block=232448)


def buf(ptr=0x10000):
    return NS(data=NS(ptr=ptr))


def dense(m=1, n=7168, k=4096, **kw):
    p = dict(m=m, n=n, k=k, k_blocks=-(-k // 32), split_k=1, a_scale_layout=None, b_scale_layout=None,
             out_dtype="bfloat16", a_fmt="e4m3", b_fmt="e4m3")  # fmt: skip
    p.update(kw)
    return NS(p=NS(**p), a_codes=buf(), b_codes=buf(), a_scales=buf(), b_scales=buf())


@pytest.mark.parametrize(
    "change,why",
    [
        (dict(m=65), "decode envelope"),
        (dict(k=4096 + 32), "multiple of 128"),
        (dict(n=2**31), "2^31"),
        (dict(n=2**24, k=2**13 * 32), "2^31"),  # n * k / 32 scale bytes
        (dict(out_dtype="float32"), "float32 output"),
        (dict(a_scale_layout="aiter32x8"), "preshuffled"),
        (dict(split_k=70000), "split_k"),
    ],
)
def test_dense_declines(change, why):
    assert why in gemm_decode.supports(dense(**change))


def test_dense_alignment_and_the_envelope():
    assert gemm_decode.supports(dense()) is None
    assert gemm_decode.supports(dense(out_dtype="float32", a_fmt="e2m1", b_fmt="e2m1")) is None
    dg = dense()
    dg.b_codes = buf(0x10008)
    assert "16-byte aligned" in gemm_decode.supports(dg)
    dg = dense()
    dg.a_scales = buf(0x10002)
    assert "4-byte aligned" in gemm_decode.supports(dg)


def test_plan_splits_small_grids_only():
    c, split = gemm_decode.plan(1, 1280, 8192, 1, 132)  # 80 CTAs < 132 SMs: split K
    assert split > 1 and c.mt == 1
    assert gemm_decode.plan(1, 7168, 4096, 1, 132)[1] == 1
    assert gemm_decode.plan(1, 1280, 8192, 3, 132)[1] == 3  # an explicit split is kept
    assert gemm_decode.plan(64, 7168, 4096, 1, 132)[0].mt == 8


def moe(e=256, n=4096, k=7168, m_act=8, **kw):
    p = dict(e=e, n=n, k=k, m_act=m_act, numel=m_act * 8, block_size=16, expert_ids=NS(size=300), x_fmt="e4m3",
             w_fmt="e4m3", out_dtype="bfloat16", device=False)  # fmt: skip
    p.update(kw)
    return NS(**p)


def test_moe_guards(monkeypatch):
    monkeypatch.setattr(moe_gemm, "get_arch", lambda: H100)
    assert moe_gemm.unsupported(moe()) is None  # 256 experts x 4096 x 7168: 7.5 GB of weights, 1 M rows: fine
    assert "2^31" in moe_gemm.unsupported(moe(e=2**20, n=2**12))
    assert "multiple of 128" in moe_gemm.unsupported(moe(k=7168 + 32))
    assert "grid" in moe_gemm.unsupported(moe(expert_ids=NS(size=70000)))
    assert "float32 output" in moe_gemm.unsupported(moe(out_dtype="float32"))
    monkeypatch.setattr(moe_gemm, "get_arch", lambda: Arch("amd", "gfx950", "MI355", 64, 256, 163840))
    assert "sm_90a" in moe_gemm.unsupported(moe())


def test_past_the_size_limit_is_a_typed_error_before_any_allocation():
    """mxrt's 2^31-1 element limit (mxrt.errors.SIZE_LIMIT): a 2.7 G-element weight is refused by name and size."""
    import numpy as np

    import mxrt
    from mxrt.errors import ShapeError

    e, n, k = 40, 4096, 16384
    codes = np.zeros((e, n, k), np.uint8)  # calloc: no page is touched
    w = mxrt.MXArray(codes, np.zeros((e, n, k // 32), np.uint8), "e4m3", 32, 2, (e, n, k), "rceil")
    x = mxrt.quantize_mx(np.ones((1, k), np.float32))
    s, b, p = mxrt.moe_align_block_size(np.array([[0]], np.int32), 16, e, backend="numpy")
    with pytest.raises(ShapeError, match=r"w\.shape \(40, 4096, 16384\).*2684354560.*2\^31-1"):
        mxrt.moe_gemm_mx(x, w, s, b, p, top_k=1, block_size=16, backend="numpy")
