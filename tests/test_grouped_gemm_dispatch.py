"""Which grouped GEMM kernel each target runs (CPU only): backend="auto" on a gfx950 / gfx942 device takes the AMD
grouped kernel for the lens (forward / dgrad) and wgrad problems, on sm_90a the Hopper grouped engine for the 16-bit
lens and DeepGEMM ids / masked problems (tests/test_grouped_gemm_sm90_ws_dispatch.py) and the older Hopper grouped
kernel for the bf16 wgrad (tests/test_grouped_gemm_sm90_dispatch.py), the generic kernel
elsewhere; the launch plan's grid and defines follow the chosen kernel (mxrt/ops/grouped_gemm.py choose_kernel /
grouped_plan)."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt import codes
from mxrt.ops import grouped_gemm_amd, grouped_gemm_kernels, kernels
from mxrt.ops.grouped_gemm import choose_kernel, grouped_plan
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem

GENERIC = grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC
AMD = {"gfx950": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX950, "gfx942": grouped_gemm_kernels.GEMM_MX_GROUPED_GFX942}
SM90 = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90
SM90_WS = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90_WS
TARGETS = ["gfx950", "gfx942", "sm_90a", "sm_80", "gfx90a", "generic"]


def _lens(fa="e4m3", fb="e4m3", lens=(37, 0, 150, 1), n=72, k=96, out_dtype="bfloat16"):
    rng = np.random.default_rng(0)
    lens = np.asarray(lens)
    qa = mxrt.quantize_mx(rng.standard_normal((int(lens.sum()), k)), fa)
    qb = mxrt.quantize_mx(rng.standard_normal((lens.size, n, k)), fb, axis=2)
    return grouped_gemm_problem(qa, qb, lens, out_dtype=out_dtype)


def _wgrad(lens=(5, 0, 90), accumulate=False):
    rng = np.random.default_rng(1)
    lens = np.asarray(lens)
    m = int(lens.sum())
    qg = mxrt.quantize_mx_grouped(rng.standard_normal((m, 40)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(rng.standard_normal((m, 24)), lens, colwise=True, col_align=32)
    out = np.zeros((lens.size, 40, 24), np.float32) if accumulate else None
    return wgrad_problem(qg, qx, lens, out=out, accumulate=accumulate)


def _indices():
    rng = np.random.default_rng(2)
    ids = mxrt.contiguous_m_indices(np.array([50, 0, 7]), 32)
    qa = mxrt.quantize_mx(rng.standard_normal((ids.size, 64)))
    qb = mxrt.quantize_mx(rng.standard_normal((3, 40, 64)), axis=2)
    return grouped_gemm_problem(qa, qb, ids, kind="indices", out=np.zeros((ids.size, 40), ml_dtypes.bfloat16))


def _masked():
    rng = np.random.default_rng(3)
    qa = mxrt.quantize_mx(rng.standard_normal((3 * 32, 64)))
    qb = mxrt.quantize_mx(rng.standard_normal((3, 40, 64)), axis=2)
    masked = np.array([0, 5, 32])
    return grouped_gemm_problem(qa, qb, masked, kind="masked", max_m=32, out=np.zeros((96, 40), ml_dtypes.bfloat16))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["lens", "wgrad", "wgrad_accumulate"])
def test_auto_picks_the_amd_kernel_on_gfx950_and_gfx942(target, kind):
    p = {"lens": _lens, "wgrad": _wgrad, "wgrad_accumulate": lambda: _wgrad(accumulate=True)}[kind]()
    want = SM90_WS if target == "sm_90a" and kind == "lens" else AMD.get(target, GENERIC)
    assert choose_kernel(p, target) is want


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("make", [_indices, _masked], ids=["indices", "masked"])
def test_deepgemm_layouts_stay_generic_off_sm90(target, make):
    p = make()
    assert choose_kernel(p, target) is (SM90_WS if target == "sm_90a" else GENERIC)
    if target in AMD:
        assert "kind" in grouped_gemm_amd.unsupported(target, p)


@pytest.mark.parametrize("target", ["gfx950", "gfx942"])
@pytest.mark.parametrize(
    "pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids=lambda p: "x".join(p)
)
def test_every_format_pair_and_out_dtype_has_an_amd_build(target, pair):
    for out_dtype in ("bfloat16", "float16", "float32"):
        p = _lens(*pair, out_dtype=out_dtype)
        plan = grouped_plan(p, target)
        assert plan.spec is AMD[target]
        assert plan.defines in AMD[target].variants  # the compile check builds exactly what the launcher asks for
        d = dict(plan.defines)
        assert (d["A_FMT"], d["B_FMT"]) == (codes.FMT_CODES[pair[0]], codes.FMT_CODES[pair[1]])
        assert d["OUT_DTYPE"] == codes.GEMM_OUT_DTYPE_CODES[out_dtype] and d["MODE"] == 0 and d["ACCUM"] == 0


def test_amd_plans_use_the_128_by_128_tile():
    p = _lens(lens=(37, 0, 150, 1), n=200)
    for target in ("gfx950", "gfx942"):
        plan = grouped_plan(p, target)
        assert plan.cfg.grid == (2, -(-p.m // 128) + 4 + 1, 1) and plan.cfg.block == (256, 1, 1)
        w = _wgrad(accumulate=True)
        wp = grouped_plan(w, target)
        assert wp.cfg.grid == (1, 1, 3) and dict(wp.defines)["MODE"] == 3 and dict(wp.defines)["ACCUM"] == 1
        assert wp.defines in AMD[target].variants
        assert (wp.m, wp.n, wp.k, wp.num_groups, wp.extra) == (w.m, w.n, w.k, 3, 32)
    generic = grouped_plan(p, "sm_80")
    assert generic.spec is GENERIC and generic.cfg.grid == (4, -(-p.m // 128) + 4 + 1, 1)  # 128 x 64 tiles
    assert grouped_plan(p) == generic  # the default target is the generic kernel


def test_dispatch_table_rows():
    for op in ("grouped_gemm_mx", "grouped_gemm_mx_wgrad"):
        assert kernels.select(op, "gfx950") is AMD["gfx950"]
        assert kernels.select(op, "gfx942") is AMD["gfx942"]
    # the grouped engine for fwd / dgrad (what it declines falls back to the older kernel, then generic); the
    # older kernel for the wgrad with bf16 out (fp32 with fp8 falls back to generic)
    assert kernels.select("grouped_gemm_mx", "sm_90a") is SM90_WS
    assert kernels.select("grouped_gemm_mx_wgrad", "sm_90a") is SM90
    assert grouped_gemm_kernels.FALLBACK == {SM90_WS: SM90}
    assert SM90_WS in kernels.ALL_SPECS
    for spec in AMD.values():
        assert spec in kernels.ALL_SPECS


def test_problems_past_the_amd_limits_fall_back():
    p = _lens()
    big = dataclasses.replace(p, m=2**31)  # a's codes past the 32-bit buffer offsets
    assert "2^31" in grouped_gemm_amd.unsupported("gfx950", big)
    assert choose_kernel(big, "gfx950") is GENERIC
    assert "float32 scales" in grouped_gemm_amd.unsupported("gfx942", dataclasses.replace(p, scale_f32=True))
    assert "no AMD grouped" in grouped_gemm_amd.unsupported("sm_90a", p)
    assert grouped_gemm_amd.unsupported("gfx950", p) is None


def test_bf16_wgrad_route_envelope():
    """The sm90_bf16 route (mxrt/ops/grouped_wgrad_bf16.py) on sm_90a only: the wgrad with group ranges of whole k16
    steps (Mc and align multiples of 16), the lens forward / dgrad with float32 out and k % 16 == 0 (b may be padded
    past k), 1..GROUPED_MAX_GROUPS groups, sizes below 2^31."""
    from types import SimpleNamespace as NS

    from mxrt import codes
    from mxrt.ops import grouped_wgrad_bf16 as R

    def p(**kw):
        base = dict(kind="wgrad", k=256, align=32, num_groups=4, m=64, n=96, op="grouped_gemm_mx_wgrad")
        base.update(b=NS(shape=(96, 256)), out_dtype=np.dtype("float32"))
        return NS(**{**base, **kw})

    assert R.unsupported("sm_90a", p()) is None
    assert "sm_90a" in R.unsupported("gfx950", p())
    assert "layout" in R.unsupported("sm_90a", p(kind="masked"))
    lens = dict(kind="lens", b=NS(shape=(4, 96, 288)))  # b padded past k: read up to k only
    assert R.unsupported("sm_90a", p(**lens)) is None
    assert "float32 only" in R.unsupported("sm_90a", p(**lens, out_dtype=np.dtype("float16")))
    assert "multiple of 16" in R.unsupported("sm_90a", p(**lens, k=264))
    assert "multiples of 16" in R.unsupported("sm_90a", p(k=264))
    assert "multiples of 16" in R.unsupported("sm_90a", p(align=8))
    assert "groups" in R.unsupported("sm_90a", p(num_groups=codes.GROUPED_MAX_GROUPS + 1))
    assert "2^31" in R.unsupported("sm_90a", p(m=2**31))
    assert "2^31" in R.unsupported("sm_90a", p(m=2**20 * 128, n=2**12 * 128))  # 2^32 output tiles: the grid
    assert R.smem_bytes(5, 128) == 5 * 32768 + 80 + 1024 and R.smem_bytes(4, 256) == 4 * 49152 + 64 + 1024


def test_bf16_route_takes_the_k_grouped_wgrad():
    """DeepGEMM's k-grouped wgrad on sm_90a runs the sm90_bf16 route (was the generic kernel): fp8 codes and sum(ks)
    a multiple of 128 (the API's ks are multiples of gran_k; the pass checks the device ks)."""
    from types import SimpleNamespace as NS

    from mxrt.ops import grouped_wgrad_bf16 as R

    def p(**kw):
        base = dict(kind="kgrouped", k=1024, align=0, num_groups=4, m=200, n=328, op="k_grouped", scale_f32=True)
        base.update(b=NS(shape=(328, 1024)), out_dtype=np.dtype("float32"), a_fmt="e4m3", b_fmt="e5m2")
        return NS(**{**base, **kw})

    assert R.unsupported("sm_90a", p()) is None
    assert "multiple of 32" in R.unsupported("sm_90a", p(k=1040, scale_f32=False))  # UE8M0: chunks of 32 columns
    assert R.unsupported("sm_90a", p(k=1056, scale_f32=False)) is None
    assert "of 128 with float32" in R.unsupported("sm_90a", p(k=1056))
    assert "formats" in R.unsupported("sm_90a", p(a_fmt="e2m1"))
    assert "groups" in R.unsupported("sm_90a", p(num_groups=0))
    assert "2^31" in R.unsupported("sm_90a", p(m=2**31))
    assert "2^31" in R.unsupported("sm_90a", p(m=2**16, n=2**16, num_groups=2**9))  # G m n output elements


@pytest.mark.parametrize("recipe", ["f32", "ue8m0"])
def test_k_grouped_launches_through_the_bf16_route(recipe):
    """The launches of one k-grouped call on sm_90a (fake CuPy): the ends, one bf16 pass per operand (codes alone for
    float32 scales, UE8M0 folded in), the bf16 GEMM (MODE 2 on 128-wide tiles with the scales transposed to a row
    of factors per 128 columns; MODE 0 on 256-wide tiles), then the gated generic kernel (returns unless the gate
    is raised); each build one compile-check builds."""
    import sys

    from support import fake_cupy

    import mxrt.deep_gemm as deep_gemm

    spec = {k.symbol: k for k in grouped_gemm_kernels.SPECS}
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        rng = np.random.default_rng(0)
        ks, m, n = [256, 0, 512, 128], 200, 328
        total = sum(ks)
        a = cp.asarray(rng.integers(0, 100, total * m, dtype=np.uint8))
        b = cp.asarray(rng.integers(0, 100, total * n, dtype=np.uint8))
        if recipe == "f32":
            sa, sb = (cp.asarray(rng.random((r, total // 128), np.float32)) for r in (m, n))
        else:
            sa, sb = (cp.asarray(rng.integers(120, 130, (r, total // 128), dtype=np.uint8)) for r in (m, n))
        d = cp.zeros((len(ks), m, n), np.float32)
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((a, sa), (b, sb), d, ks, cp.asarray(np.array(ks, np.int32)), c=d)
        names = [rec[1] for rec in state["launches"]]
        passes = ["kgrouped_to_bf16"] * 2
        assert names == ["grouped_offsets", *passes, "gemm_wgrad_bf16_sm90", "gemm_mx_grouped_generic"]
        for k in state["builds"]:
            assert dict(k.defines) in [dict(v) for v in spec[k.name].variants], (k.name, k.defines)
        gemm = next(k for k in state["builds"] if k.name == "gemm_wgrad_bf16_sm90").defines
        passes = [k.defines for k in state["builds"] if k.name == "kgrouped_to_bf16"]
        if recipe == "f32":
            assert (gemm["MODE"], gemm["BN"], gemm["ACCUM"]) == (2, 128, 1)
            assert [dd["SCALED"] for dd in passes] == [0]  # both operands e4m3 codes: one build
        else:
            assert "MODE" not in gemm and (gemm["BN"], gemm["ACCUM"]) == (256, 1)
            assert [dd["SCALED"] for dd in passes] == [1]
        grid, block = state["launches"][3][2:4]
        bn = 128 if recipe == "f32" else 256
        assert grid == (-(-m // 128) * -(-n // bn), 1, len(ks)) and block == (384, 1, 1)
        rows = [(m, total), (n, total)]
        for rec, (r, t) in zip(state["launches"][1:3], rows, strict=True):
            assert rec[2] == (-(-r * t // (16 * 256)), 1, 1) and rec[3] == (256, 1, 1)
