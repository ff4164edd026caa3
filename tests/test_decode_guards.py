"""Shape-only checks of the decode paths' host guards (CPU, no GPU): the 2^31 limits, the envelope, alignment,
the scale layouts read in place, and the path's own K split, on stand-in problems (no buffers are allocated)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

import mxrt
from mxrt.ops import gemm_decode, moe_gemm
from mxrt.ops import gemm_decode_kernels as K
from mxrt.runtime.arch import Arch

H100 = Arch(vendor="nvidia", target="sm_90a", name="H100", wave_size=32, num_cus=132, smem_per_block=232448)


def buf(ptr=0x10000, dtype=np.uint8):
    return NS(data=NS(ptr=ptr), dtype=np.dtype(dtype))


def dense(m=1, n=7168, k=4096, **kw):
    p = dict(m=m, n=n, k=k, k_blocks=-(-k // 32), split_k=1, a_scale_layout=None, b_scale_layout=None,
             b_weight_layout=None, out_dtype="bfloat16", a_fmt="e4m3", b_fmt="e4m3")  # fmt: skip
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


#: every scale form the decode path reads in place: (layout, storage dtype) -> define SLA / SLB
FORMS = {
    ("aiter32x8", np.uint8): 1,
    ("turbo16x4", np.uint8): 2,
    ("turbo16x4", np.uint32): 5,
    ("cublas128x4", np.uint8): 3,
    ("deepgemm_ue8m0", np.int32): 4,
}


@pytest.mark.parametrize("side", ["a", "b", "both"])
@pytest.mark.parametrize("form", list(FORMS), ids=lambda f: f"{f[0]}-{np.dtype(f[1]).name}")
def test_preshuffled_scale_layouts_are_read_in_place(form, side):
    """Each layout on the tokens, the weights or both stays on the decode path, with its build's define."""
    layout, dtype = form
    assert {name for name, _ in FORMS} == set(mxrt.SCALE_LAYOUTS)  # every layout mxrt knows
    kw = {f"{x}_scale_layout": layout for x in ("a", "b") if side in (x, "both")}
    for m in (1, 8, 64):
        dg = dense(m=m, **kw)
        dg.a_scales, dg.b_scales = buf(dtype=dtype), buf(dtype=dtype)
        assert gemm_decode.supports(dg) is None
        code = FORMS[form]
        assert gemm_decode._layouts(dg) == (code if side != "b" else 0, code if side != "a" else 0)


def test_layout_declines_name_the_layout_and_the_reason():
    dg = dense(b_scale_layout="nvfp4_swizzle")  # a layout name this kernel has no index map for
    why = gemm_decode.supports(dg)
    assert "b_scale_layout='nvfp4_swizzle' is not read by this kernel" in why
    assert all(name in why for name in mxrt.SCALE_LAYOUTS) and "row-major" in why
    # aiter32x8 pads rows to 256 and K blocks to 8: its storage passes 2^31 bytes where row-major scales do not
    n, k = 2**24 + 1, 31 * 128
    assert n * (k // 32) < 2**31
    assert gemm_decode.supports(dense(n=n, k=k)) is None
    why = gemm_decode.supports(dense(n=n, k=k, b_scale_layout="aiter32x8"))
    assert why == "a aiter32x8 scale storage of 2^31 elements or more (32-bit scale offsets)"
    # the other checks keep their order and reasons with a layout
    assert "decode envelope" in gemm_decode.supports(dense(m=65, a_scale_layout="cublas128x4"))
    assert "multiple of 128" in gemm_decode.supports(dense(k=4096 + 32, b_scale_layout="cublas128x4"))
    dg = dense(b_scale_layout="cublas128x4")
    dg.b_scales = buf(0x10002)
    assert "4-byte aligned" in gemm_decode.supports(dg)


@pytest.mark.parametrize("layouts", [(0, 0), (0, 3), (5, 0), (1, 5), (5, 5)], ids=str)
def test_plans_fit_shared_memory_with_the_layouts_staged_words(layouts):
    """The scattered layouts stage 4 words per row: every envelope plan keeps its rings in shared memory."""
    for m in (1, 2, 8, 9, 16, 33, 64):
        for n, k in ((1280, 8192), (7168, 4096), (4096, 512), (18432, 7168)):
            c, split = gemm_decode.plan(m, n, k, 1, 132, layouts=layouts)
            assert K.smem_bytes(K.E4M3, K.E4M3, c.mt, c.kw, c.stages, c.rt, *layouts) <= K.DECODE_SMEM_MAX
            rm, rm_split = gemm_decode.plan(m, n, k, 1, 132)
            assert split == rm_split and (c.mt, c.stages, c.rt) == (rm.mt, rm.stages, rm.rt) and c.kw <= rm.kw


def test_plan_splits_small_grids_only():
    c, split = gemm_decode.plan(1, 1280, 8192, 1, 132)  # 80 CTAs < 132 SMs: split K
    assert split > 1 and c.mt == 1
    assert gemm_decode.plan(1, 7168, 4096, 1, 132)[1] == 1
    assert gemm_decode.plan(1, 1280, 8192, 3, 132)[1] == 3  # an explicit split is kept
    assert gemm_decode.plan(64, 7168, 4096, 1, 132)[0].mt == 8


def moe(e=256, n=4096, k=7168, m_act=8, **kw):
    p = dict(e=e, n=n, k=k, m_act=m_act, numel=m_act * 8, block_size=16, expert_ids=NS(size=300), x_fmt="e4m3",
             w_fmt="e4m3", out_dtype="bfloat16", device=False, sorted_token_ids=NS(size=4800), a_div=8)  # fmt: skip
    p.update(kw)
    return NS(**p)


def test_moe_guards(monkeypatch):
    monkeypatch.setattr(moe_gemm, "get_arch", lambda: H100)
    assert moe_gemm.unsupported(moe()) is None  # 256 experts x 4096 x 7168: 7.5 GB of weights, 1 M rows: fine
    assert "2^31" in moe_gemm.unsupported(moe(e=2**20, n=2**12))
    assert "multiple of 128" in moe_gemm.unsupported(moe(k=7168 + 32))
    # the grid's y is the live blocks' bound min(len(expert_ids), numel) (mxrt.problems.moe_gemm)
    assert moe_gemm.unsupported(moe(expert_ids=NS(size=70000))) is None  # numel = 64
    assert "grid" in moe_gemm.unsupported(moe(expert_ids=NS(size=70000), m_act=10000))
    assert "float32 output" in moe_gemm.unsupported(moe(out_dtype="float32"))
    # gfx950 / gfx942: the AMD MoE kernels' own envelope (mxrt/ops/moe_gemm_amd.py: any k % 16, fp32 out, one
    # expert's codes below 2^31 bytes); another target: no kernel
    monkeypatch.setattr(moe_gemm, "get_arch", lambda: Arch("amd", "gfx950", "MI355", 64, 256, 163840))
    assert moe_gemm.unsupported(moe()) is None and moe_gemm.unsupported(moe(k=7168 + 32, out_dtype="float32")) is None
    assert "one expert of w" in moe_gemm.unsupported(moe(n=2**18, k=2**13))
    monkeypatch.setattr(moe_gemm, "get_arch", lambda: Arch("nvidia", "sm_80", "A100", 32, 108, 166912))
    assert "sm_90a, gfx950 and gfx942" in moe_gemm.unsupported(moe())


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
