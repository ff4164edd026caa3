"""The older Hopper grouped GEMM kernel's host side (CPU only): which problems gemm_mx_grouped_sm90 takes on sm_90a and
why it declines the others (they fall back to the generic kernel), its tiles, grid and defines (each one a variant
that `mxrt compile-check` builds), and MXRT_GROUPED_GEMM_KERNEL (mxrt/ops/grouped_gemm_sm90.py, choose_kernel). The
grouped engine gemm_mx_grouped_sm90_ws runs the 16-bit lens / ids / masked problems before it
(tests/test_grouped_gemm_sm90_ws_dispatch.py); here MXRT_GROUPED_GEMM_KERNEL=sm90_wgmma forces this kernel where the
engine would run."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt import codes
from mxrt.errors import UnsupportedArchError
from mxrt.ops import grouped_gemm_kernels, grouped_gemm_sm90
from mxrt.ops.grouped_gemm import choose_kernel, grouped_plan
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem

SM90 = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90
SM90_WS = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90_WS
GENERIC = grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC
PAIRS = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2"), ("e2m1", "e2m1"), ("e4m3", "e2m1")]


def _lens(fa="e4m3", fb="e4m3", lens=(37, 0, 150, 1), n=72, k=96, out_dtype="bfloat16", kb=None):
    rng = np.random.default_rng(0)
    lens = np.asarray(lens)
    qa = mxrt.quantize_mx(rng.standard_normal((int(lens.sum()), k)), fa)
    qb = mxrt.quantize_mx(rng.standard_normal((lens.size, n, kb or k)), fb, axis=2)
    return grouped_gemm_problem(qa, qb, lens, out_dtype=out_dtype)


def _indices(k=64):
    rng = np.random.default_rng(2)
    ids = mxrt.contiguous_m_indices(np.array([50, 0, 7]), 32)
    qa = mxrt.quantize_mx(rng.standard_normal((ids.size, k)))
    qb = mxrt.quantize_mx(rng.standard_normal((3, 40, k)), axis=2)
    return grouped_gemm_problem(qa, qb, ids, kind="indices", out=np.zeros((ids.size, 40), ml_dtypes.bfloat16))


def _masked():
    rng = np.random.default_rng(3)
    qa = mxrt.quantize_mx(rng.standard_normal((3 * 32, 64)))
    qb = mxrt.quantize_mx(rng.standard_normal((3, 40, 64)), axis=2)
    out = np.zeros((96, 40), ml_dtypes.bfloat16)
    return grouped_gemm_problem(qa, qb, np.array([0, 5, 32]), kind="masked", max_m=32, out=out)


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_lens_plans_are_built_variants_or_declined(monkeypatch, pair, out_dtype):
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    for lens in ((37, 0, 150, 1), (600, 700)):  # 128-row tile, 256-row tile (>= 512 rows per group, 16-bit out)
        p = _lens(*pair, lens=lens, out_dtype=out_dtype)
        why = grouped_gemm_sm90.unsupported("sm_90a", p)
        if out_dtype == "float32" and pair != ("e2m1", "e2m1"):
            assert "float32 output with an fp8 operand" in why
            assert choose_kernel(p, "sm_90a") is GENERIC
            continue
        assert why is None
        assert choose_kernel(p, "sm_90a") is (SM90 if out_dtype == "float32" else SM90_WS)  # the engine first
        monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_wgmma")
        plan = grouped_plan(p, "sm_90a")
        monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL")
        assert plan.spec is SM90 and plan.defines in SM90.variants  # compile-check builds what the launcher asks
        d = dict(plan.defines)
        fmt = lambda f: codes.FMT_CODES["e4m3" if f == "e2m1" else f]  # noqa: E731
        assert (d["A_FMT"], d["B_FMT"], d["MODE"]) == (fmt(pair[0]), fmt(pair[1]), 0)
        large = sum(lens) >= 512 * len(lens) and out_dtype != "float32"
        assert d["BM"] == (256 if large else 128)
        tiles = -(-p.m // d["BM"]) + len(lens) + 1
        assert plan.cfg.grid == (-(-p.n // 128) * tiles, 1, 1) and plan.cfg.block == (256, 1, 1)
        assert plan.cfg.shared_mem <= 232448 - 1024


@pytest.mark.parametrize("pair", PAIRS[:4], ids="x".join)
def test_deepgemm_layouts_run_on_the_128_row_tile(monkeypatch, pair):
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_wgmma")
    for make, mode, dbuf in ((_indices, 1, 0), (_masked, 2, 1)):
        p = make()
        p = dataclasses.replace(p, a_fmt=pair[0], b_fmt=pair[1])
        plan = grouped_plan(p, "sm_90a")
        assert plan.spec is SM90 and plan.defines in SM90.variants
        d = dict(plan.defines)
        assert (d["MODE"], d["BM"], d["DBUF"]) == (mode, 128, dbuf)
    assert grouped_plan(_masked(), "sm_90a").cfg.grid == (1, 1, 3)
    assert grouped_plan(_indices(), "sm_90a").cfg.grid == (1, 1, 1)


def test_declines_fall_back_to_generic():
    p = _lens()
    reasons = {
        "kgrouped": grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, kind="kgrouped")),
        "float32 output": grouped_gemm_sm90.unsupported("sm_90a", wgrad_problem(*_wgrad_operands())),
        "float32 scales": grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, scale_f32=True)),
        "k % 16": grouped_gemm_sm90.unsupported("sm_90a", _lens(k=72)),
        "at most": grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, num_groups=2000)),
        "2^31": grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, m=2**31)),
        "k = 0": grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, k=0)),
        "target": grouped_gemm_sm90.unsupported("gfx950", p),
    }
    for word, why in reasons.items():
        assert why is not None and word in why, (word, why)
    assert choose_kernel(_lens(k=72), "sm_90a") is GENERIC
    assert choose_kernel(wgrad_problem(*_wgrad_operands()), "sm_90a") is GENERIC  # float32 out (the default)
    assert grouped_gemm_sm90.unsupported("sm_90a", _lens(k=96, kb=128)) is None  # kb padded past k by whole blocks


def _wgrad_operands():
    rng = np.random.default_rng(1)
    lens = np.array([5, 0, 90])
    qg = mxrt.quantize_mx_grouped(rng.standard_normal((95, 40)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(rng.standard_normal((95, 24)), lens, colwise=True, col_align=32)
    return qg, qx, lens


def _wgrad(pair=("e4m3", "e4m3"), n=40, k=24, out_dtype="bfloat16", accumulate=False, lens=(5, 0, 90)):
    rng = np.random.default_rng(1)
    lens = np.asarray(lens)
    m = int(lens.sum())
    qg = mxrt.quantize_mx_grouped(rng.standard_normal((m, n)), lens, pair[0], colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(rng.standard_normal((m, k)), lens, pair[1], colwise=True, col_align=32)
    out = np.zeros((lens.size, n, k), ml_dtypes.bfloat16 if out_dtype == "bfloat16" else out_dtype)
    return wgrad_problem(qg, qx, lens, out_dtype=out_dtype, out=out if accumulate else None, accumulate=accumulate)


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_wgrad_plans_are_built_variants_or_declined(monkeypatch, pair, out_dtype, accumulate):
    """bf16 wgrad on the sm90 kernel (MODE 3, grid z = the groups, 256 rows past 128 rows of out); float32 out only
    for e2m1 x e2m1 (the fp8 partials miss 1e-5), the others fall back to generic with that reason."""
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    for n in (40, 200):
        p = _wgrad(pair, n=n, out_dtype=out_dtype, accumulate=accumulate)
        why = grouped_gemm_sm90.unsupported("sm_90a", p)
        if out_dtype == "float32" and pair != ("e2m1", "e2m1"):
            assert "float32 output with an fp8 operand" in why
            assert choose_kernel(p, "sm_90a") is GENERIC
            continue
        assert why is None, why
        plan = grouped_plan(p, "sm_90a")
        assert plan.spec is SM90 and plan.defines in SM90.variants
        d = dict(plan.defines)
        assert (d["MODE"], d["ACCUM"]) == (3, int(accumulate))
        assert d["BM"] == (256 if n > 128 and out_dtype != "float32" else 128)
        assert plan.cfg.grid == (-(-n // d["BM"]) * 1, 1, 3)  # k = 24: one column tile; z = G
        assert plan.cfg.shared_mem <= 232448 - 1024


def test_wgrad_declines():
    p = _wgrad()
    assert "align" in grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, align=48))
    assert "at most" in grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, num_groups=2000))
    assert "2^31" in grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, num_groups=2**10, m=2**11, n=2**10))
    assert grouped_gemm_sm90.unsupported("sm_90a", dataclasses.replace(p, k=p.k + 8)) is not None  # k % 16


def test_forced_kernel(monkeypatch):
    p, p32 = _lens(), _lens(out_dtype="float32")
    p4 = _lens("e2m1", "e2m1", out_dtype="float32")
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
    assert choose_kernel(p, "sm_90a") is GENERIC
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90")  # the Hopper grouped kernels: the engine, else this one
    assert choose_kernel(p, "sm_90a") is SM90_WS and choose_kernel(p4, "sm_90a") is SM90
    with pytest.raises(UnsupportedArchError, match="float32 output") as e:
        choose_kernel(p32, "sm_90a")
    assert "gemm_mx_grouped_sm90_ws: " in str(e.value) and "gemm_mx_grouped_sm90: " in str(e.value)  # both reasons
    with pytest.raises(UnsupportedArchError, match="sm_90a"):
        choose_kernel(p, "gfx950")
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_wgmma")
    assert choose_kernel(p, "sm_90a") is SM90
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "fast")
    with pytest.raises(UnsupportedArchError, match="expected auto, generic"):
        choose_kernel(p, "sm_90a")
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "auto")
    assert choose_kernel(p, "sm_90a") is SM90_WS and choose_kernel(p32, "sm_90a") is GENERIC
    assert choose_kernel(p4, "sm_90a") is SM90
    assert choose_kernel(p, "sm_90a", force="generic") is GENERIC
