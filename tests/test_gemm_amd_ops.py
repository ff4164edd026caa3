"""mxrt/ops/gemm_amd.py on the CPU: registration, supports() reasons and the launch plan, with fake DeviceGemm
objects (SimpleNamespace buffers with device addresses) instead of CuPy arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import mxrt
from mxrt.ops import gemm_amd, gemm_amd_kernels, gemm_paths, kernels
from mxrt.problems import GEMM_FORMAT_PAIRS, gemm_problem


def _buf(ptr: int, dtype=np.uint8):
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr), dtype=np.dtype(dtype))


def _problem(m=70, n=130, k=300, pair=("e4m3", "e4m3"), layouts=(None, None), **kw):
    rng = np.random.default_rng(0)
    qa = mxrt.quantize_mx(rng.standard_normal((m, k)), pair[0], axis=1)
    qb = mxrt.quantize_mx(rng.standard_normal((n, k)), pair[1], axis=1)

    def pieces(q, layout):
        s = np.asarray(q.scales)
        if layout is not None:
            s = mxrt.preshuffle_scales(s, layout, backend="numpy")
        return (q.data, s, q.fmt, k)

    return gemm_problem(
        pieces(qa, layouts[0]), pieces(qb, layouts[1]), a_scale_layout=layouts[0], b_scale_layout=layouts[1], **kw
    )


def _dg(p, target="gfx950", ptrs=(0x1000, 0x2000, 0x3000, 0x4000, 0x5000), scale_dtypes=(np.uint8, np.uint8)):
    return SimpleNamespace(
        p=p,
        a_codes=_buf(ptrs[0]),
        b_codes=_buf(ptrs[1]),
        a_scales=_buf(ptrs[2], scale_dtypes[0]),
        b_scales=_buf(ptrs[3], scale_dtypes[1]),
        out=_buf(ptrs[4], p.out_dtype),
        arch=SimpleNamespace(target=target),
    )


def test_paths_are_registered_for_their_targets():
    from mxrt.ops import gemm_decode_amd

    # the decode paths (priority 30, m <= 64) first, then the dense ones (tests/test_gemm_decode_amd_dispatch.py)
    assert gemm_paths.gemm_paths("gfx950")[:2] == [gemm_decode_amd.GFX950_DECODE_PATH, gemm_amd.GFX950_PATH]
    assert gemm_paths.gemm_paths("gfx942")[:2] == [gemm_decode_amd.GFX942_DECODE_PATH, gemm_amd.GFX942_PATH]
    assert (gemm_amd.GFX950_PATH.name, gemm_amd.GFX950_PATH.priority) == ("gfx950_mfma_scale", 20)
    assert (gemm_amd.GFX942_PATH.name, gemm_amd.GFX942_PATH.target) == ("gfx942_mfma_fp8", "gfx942")
    assert gemm_amd.GFX950_PATH not in gemm_paths.gemm_paths("sm_90a")


@pytest.mark.parametrize("target", ["gfx950", "gfx942"])
@pytest.mark.parametrize("pair", list(GEMM_FORMAT_PAIRS), ids=lambda p: "x".join(p))
def test_every_format_pair_is_supported_and_planned(target, pair):
    p = _problem(pair=pair, out_dtype="bfloat16")
    dg = _dg(p, target)
    path = gemm_amd.GFX950_PATH if target == "gfx950" else gemm_amd.GFX942_PATH
    assert path.supports(dg) is None
    pl = gemm_amd.plan(target, p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)
    fmt = {"e4m3": 0, "e5m2": 1, "e2m1": 4}
    assert dict(pl.defines) == {"A_FMT": fmt[pair[0]], "B_FMT": fmt[pair[1]], "EDGE": 1, "THREADS": 256}
    assert pl.defines in pl.spec.variants and pl.spec.supports(target)
    assert pl.config.grid == (2, 1, 1) and pl.config.block == (256, 1, 1)
    # k = 300: fp8 rows are not 16-byte multiples (byte path), fp4 rows are 150 bytes (neither)
    assert pl.scalars == (70, 130, 300, 1, 0, 0, 1, gemm_amd.MODE_STORE, 0)
    assert pl.workspace == 0 and pl.counters == 0


def test_vec_flags_follow_alignment_of_base_and_rows():
    p = _problem(k=256)
    dg = _dg(p, ptrs=(0x1000, 0x2008, 0x3000, 0x4000, 0x5000))
    pl = gemm_amd.plan("gfx950", p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)
    assert pl.scalars[8] == gemm_amd.FLAG_VEC_A  # b's base is 8 bytes off a 16-byte boundary
    p4 = _problem(k=256, pair=("e2m1", "e2m1"))  # 128-byte packed rows
    pl = gemm_amd.plan("gfx942", p4, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float32))
    assert pl.scalars[8] == gemm_amd.FLAG_VEC_A | gemm_amd.FLAG_VEC_B


@pytest.mark.parametrize("target", ["gfx950", "gfx942"])
def test_edge_free_build_only_for_interior_problems(target):
    def edge(**kw):
        p = _problem(**kw)
        pl = gemm_amd.plan(target, p, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float32))
        return dict(pl.defines)["EDGE"]

    assert edge(m=256, n=128, k=512) == 0
    assert edge(m=256, n=128, k=512, split_k=2) == 0  # 8 blocks per split: 256 K each
    assert edge(m=256, n=128, k=512, pair=("e2m1", "e4m3")) == 0
    assert edge(m=200, n=128, k=512) == 1  # M edge
    assert edge(m=256, n=120, k=512) == 1  # N edge
    assert edge(m=256, n=128, k=500) == 1  # K tail
    assert edge(m=256, n=128, k=512, split_k=3) == 1  # splits of 5/5/6 blocks
    assert edge(m=256, n=128, k=192) == (1 if target == "gfx950" else 0)  # 192 = 3 x 64, not a multiple of 128
    p = _problem(m=256, n=128, k=512)
    pl = gemm_amd.plan(target, p, _buf(0x1008), _buf(0x2000), _buf(0x3000), _buf(0x4000), _buf(0x5000, np.float32))
    assert dict(pl.defines)["EDGE"] == 1  # a codes not 16-byte aligned


def test_split_k_modes_and_workspace():
    p = _problem(m=300, n=130, k=330, split_k=3)
    pl = gemm_amd.plan("gfx942", p, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float32))
    assert pl.mode == gemm_amd.MODE_WORKSPACE and pl.config.grid == (2, 3, 3)
    assert pl.workspace == 3 * 300 * 130 and pl.counters == 6
    p = _problem(split_k=2, deterministic=False, out_dtype="float16")
    pl = gemm_amd.plan("gfx950", p, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float16))
    assert pl.mode == gemm_amd.MODE_ATOMIC and pl.workspace == 0 and pl.scalars[6] == 2


def test_scale_layout_codes():
    p = _problem(layouts=("aiter32x8", "turbo16x4"))
    dg = _dg(p, scale_dtypes=(np.uint8, np.uint32))
    assert gemm_amd.GFX950_PATH.supports(dg) is None
    pl = gemm_amd.plan("gfx950", p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)
    assert pl.scalars[4:6] == (1, gemm_amd.SL_TURBO16X4_U32)


@pytest.mark.parametrize(
    "case,needle",
    [
        ("cublas", "cublas128x4"),
        ("aiter_misaligned", "4-byte aligned"),
        ("atomic_odd_n", "n even"),
        ("atomic_misaligned_out", "4-byte aligned out"),
        ("wrong_target", "no AMD MFMA GEMM kernel"),
    ],
)
def test_supports_declines_with_a_reason(case, needle):
    if case == "cublas":
        dg = _dg(_problem(layouts=("cublas128x4", None)))
    elif case == "aiter_misaligned":
        dg = _dg(_problem(layouts=(None, "aiter32x8")), ptrs=(0x1000, 0x2000, 0x3000, 0x4002, 0x5000))
    elif case == "atomic_odd_n":
        dg = _dg(_problem(n=131, split_k=2, deterministic=False, out_dtype="bfloat16"))
    elif case == "atomic_misaligned_out":
        dg = _dg(_problem(split_k=2, deterministic=False, out_dtype="bfloat16"), ptrs=(1, 2, 3, 4, 0x5002))
    else:
        dg = _dg(_problem(), target="gfx90a")
        assert needle in gemm_amd.unsupported("gfx90a", dg.p, dg.a_codes, dg.b_codes, dg.a_scales, dg.b_scales, dg.out)
        return
    why = gemm_amd.GFX950_PATH.supports(dg)
    assert why is not None and needle in why
    assert gemm_amd.GFX942_PATH.supports(dg) == why


def test_atomic_float32_accepts_odd_n_and_any_alignment():
    dg = _dg(_problem(n=131, split_k=2, deterministic=False, out_dtype="float32"), ptrs=(1, 2, 3, 4, 0x5002))
    assert gemm_amd.GFX942_PATH.supports(dg) is None


def test_size_limits_are_checked_without_allocating():
    p = _problem()
    big = SimpleNamespace(**{**vars(p), "m": 2**20, "k": 2**12})  # a codes: 2^32 bytes
    why = gemm_amd.unsupported("gfx950", big, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float32))
    assert why is not None and "2^31" in why
    tall = SimpleNamespace(**{**vars(p), "m": 128 * 65536, "k": 32})
    why = gemm_amd.unsupported("gfx942", tall, *(_buf(0x1000) for _ in range(4)), _buf(0x5000, np.float32))
    assert why is not None and "grid" in why


def test_specs_mirror_the_kernel_headers():
    for spec in (gemm_amd_kernels.GEMM_MX_GFX950, gemm_amd_kernels.GEMM_MX_GFX942):
        assert spec in kernels.ALL_SPECS and len(spec.variants) == 14
    assert gemm_amd_kernels.GEMM_MX_GFX950.expected_mma("gfx950") == ("v_mfma_scale_f32_16x16x128_f8f6f4",)
    assert gemm_amd_kernels.GEMM_MX_GFX942.targets == ("gfx942",)
