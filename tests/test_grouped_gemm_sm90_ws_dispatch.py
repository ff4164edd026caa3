"""The Hopper grouped engine's host side (CPU only, mxrt/ops/grouped_gemm_sm90_ws.py): which problems
gemm_mx_grouped_sm90_ws takes on sm_90a (16-bit lens, DeepGEMM ids / masked) and why it declines the others (they
fall back to gemm_mx_grouped_sm90, then the generic kernel), its persistent grid, shared memory and defines (each one
a variant that `mxrt compile-check` builds), MXRT_GROUPED_GEMM_KERNEL=sm90 / sm90_ws / sm90_wgmma, and the launch
itself through the stand-in CuPy of tests/support/fake_cupy.py: the parameters packed for the driver, read back in
the kernel's own argument order (checked against its signature)."""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from support import fake_cupy

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt import codes
from mxrt.errors import UnsupportedArchError
from mxrt.ops import grouped_gemm_kernels, grouped_gemm_sm90, grouped_gemm_sm90_ws
from mxrt.ops.grouped_gemm import choose_kernel, grouped_plan
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem

ROOT = Path(__file__).resolve().parents[1]
WS = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90_WS
SM90 = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90
GENERIC = grouped_gemm_kernels.GEMM_MX_GROUPED_GENERIC
PAIRS = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2"), ("e2m1", "e2m1"), ("e4m3", "e2m1")]
SMEM_MAX = 232448  # 227 KB: a block's shared memory on sm_90


@pytest.fixture(autouse=True)
def auto(monkeypatch):
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)


def _lens(fa="e4m3", fb="e4m3", lens=(37, 0, 150, 1), n=72, k=96, out_dtype="bfloat16", kb=None):
    rng = np.random.default_rng(0)
    lens = np.asarray(lens)
    qa = mxrt.quantize_mx(rng.standard_normal((int(lens.sum()), k)), fa)
    qb = mxrt.quantize_mx(rng.standard_normal((lens.size, n, kb or k)), fb, axis=2)
    return grouped_gemm_problem(qa, qb, lens, out_dtype=out_dtype)


def _indices(lens=(50, 0, 7), n=40, k=64):
    rng = np.random.default_rng(2)
    ids = mxrt.contiguous_m_indices(np.array(lens), 32)
    qa = mxrt.quantize_mx(rng.standard_normal((ids.size, k)))
    qb = mxrt.quantize_mx(rng.standard_normal((len(lens), n, k)), axis=2)
    return grouped_gemm_problem(qa, qb, ids, kind="indices", out=np.zeros((ids.size, n), ml_dtypes.bfloat16))


def _masked(masked=(0, 5, 32), max_m=32, n=40, k=64):
    rng = np.random.default_rng(3)
    g = len(masked)
    qa = mxrt.quantize_mx(rng.standard_normal((g * max_m, k)))
    qb = mxrt.quantize_mx(rng.standard_normal((g, n, k)), axis=2)
    out = np.zeros((g * max_m, n), ml_dtypes.bfloat16)
    return grouped_gemm_problem(qa, qb, np.array(masked), kind="masked", max_m=max_m, out=out)


def _check_plan(p, mode, num_sms=132):
    plan = grouped_plan(p, "sm_90a", num_sms)
    assert plan.spec is WS and plan.defines in WS.variants  # compile-check builds what the launcher asks
    d = dict(plan.defines)
    fmt = lambda f: codes.FMT_CODES["e4m3" if f == "e2m1" else f]  # noqa: E731
    assert (d["A_FMT"], d["B_FMT"], d["MODE"], d["STAGES"]) == (fmt(p.a_fmt), fmt(p.b_fmt), mode, 4)
    assert d["OUT_DTYPE"] == codes.GEMM_OUT_DTYPE_CODES[str(np.dtype(p.out_dtype))]
    assert plan.cfg.block == (384, 1, 1) and plan.cfg.shared_mem == grouped_gemm_sm90_ws.smem_bytes() <= SMEM_MAX
    assert plan.cfg.grid == (min(num_sms, grouped_gemm_sm90_ws.tiles_bound(p)), 1, 1)
    return plan


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_lens_runs_on_the_engine_with_16_bit_out(pair, out_dtype):
    for lens in ((37, 0, 150, 1), (600, 700)):
        p = _lens(*pair, lens=lens, out_dtype=out_dtype)
        why = grouped_gemm_sm90_ws.unsupported("sm_90a", p)
        if out_dtype == "float32":
            assert "float32 output" in why
            assert choose_kernel(p, "sm_90a") is (SM90 if pair == ("e2m1", "e2m1") else GENERIC)
            continue
        assert why is None, why
        assert choose_kernel(p, "sm_90a") is WS
        _check_plan(p, 0)
    # the tile bound: every group's row tiles, the tail's, times the column tiles
    p = _lens(lens=(37, 0, 150, 1), n=200)
    assert grouped_gemm_sm90_ws.tiles_bound(p) == (-(-188 // 128) + 4 + 1) * 2
    assert grouped_plan(p, "sm_90a", 132).cfg.grid == (14, 1, 1)  # fewer tiles than SMs: one CTA per tile
    big = dataclasses.replace(p, m=15000, n=4096)  # sizes only: the plan is host math
    assert grouped_plan(big, "sm_90a", 132).cfg.grid == (132, 1, 1) and grouped_plan(big, "sm_90a").cfg.grid[0] > 132


@pytest.mark.parametrize("pair", PAIRS[:4], ids="x".join)
def test_deepgemm_layouts_run_on_the_engine(pair):
    for make, mode in ((_indices, 1), (_masked, 2)):
        p = dataclasses.replace(make(), a_fmt=pair[0], b_fmt=pair[1])
        assert grouped_gemm_sm90_ws.unsupported("sm_90a", p) is None
        _check_plan(p, mode)
    assert grouped_gemm_sm90_ws.tiles_bound(_indices(n=200)) == -(-(50 + 32 + 32) // 128) * 2
    assert grouped_gemm_sm90_ws.tiles_bound(_masked(max_m=300, n=40)) == 3 * 3


def _f32(p):
    """``p`` (ids / masked) with DeepGEMM's Hopper recipe: float32 scales, a 1x128, b 128x128 per group."""
    rng = np.random.default_rng(5)
    kb = -(-p.k // 128)
    sa = rng.random((p.m, kb), np.float32)
    sb = rng.random((p.num_groups * -(-p.n // 128), kb), np.float32)
    a, b = dataclasses.replace(p.a, scales=sa), dataclasses.replace(p.b, scales=sb)
    return dataclasses.replace(p, a=a, b=b, scale_f32=True, sf_gmn_b=128)


def test_deepgemm_hopper_recipe_runs_on_the_engine():
    """float32 scales (a 1x128, b 128x128): the SCALE_F32 builds of the DeepGEMM layouts, every fp8 pair."""
    for make, mode in ((_indices, 1), (_masked, 2)):
        for pair in PAIRS[:4]:
            p = _f32(dataclasses.replace(make(k=320), a_fmt=pair[0], b_fmt=pair[1]))
            assert grouped_gemm_sm90_ws.unsupported("sm_90a", p) is None
            assert choose_kernel(p, "sm_90a") is WS
            assert dict(_check_plan(p, mode).defines)["SCALE_F32"] == 1
        assert "SCALE_F32" not in dict(_check_plan(make(), mode).defines)  # E8M0 builds unchanged
        p = _f32(make())
        bad = dataclasses.replace(p, a=dataclasses.replace(p.a, scales=p.a.scales[:, :0]))
        assert "float32 scales of shapes" in grouped_gemm_sm90_ws.unsupported("sm_90a", bad)
        assert choose_kernel(bad, "sm_90a") is GENERIC
        why = grouped_gemm_sm90_ws.unsupported("sm_90a", dataclasses.replace(p, sf_gmn_b=1))
        assert "DeepGEMM's recipe only" in why
        m, k, ns = 2**20, 2**16, types.SimpleNamespace  # sizes only: 2^20 rows x 512 words of 4 bytes
        a = dataclasses.replace(p.a, shape=(m, k), scales=ns(shape=(m, k // 128)))
        b = dataclasses.replace(p.b, shape=(3 * p.n, k), scales=ns(shape=(3, k // 128)))
        big = dataclasses.replace(p, m=m, k=k, a=a, b=b)
        assert "2^31" in grouped_gemm_sm90_ws.unsupported("sm_90a", big)


def _wgrad():
    rng = np.random.default_rng(1)
    lens = np.array([5, 0, 90])
    qg = mxrt.quantize_mx_grouped(rng.standard_normal((95, 40)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(rng.standard_normal((95, 24)), lens, colwise=True, col_align=32)
    return wgrad_problem(qg, qx, lens, out_dtype="bfloat16")


class _Ptr:  # a device array's .data.ptr
    def __init__(self, ptr):
        self.data = types.SimpleNamespace(ptr=ptr)


def test_declines_and_where_they_go():
    p = _lens()
    w = _wgrad()
    reasons = {
        "kind 'wgrad'": (w, SM90),  # the variable-K wgrad stays on the older kernel
        "float32 output": (_lens("e2m1", "e2m1", out_dtype="float32"), SM90),
        "masked groups": (dataclasses.replace(_masked(), num_groups=1025), SM90),  # the schedule in shared memory
        # G * ceil(max_m / 128) * 128 = 2^31 rows of the padded schedule (the older kernel's grid z takes it)
        "ceil(max_m / 128) * 128": (
            dataclasses.replace(_masked(k=32), num_groups=1024, max_m=2**21 - 64, m=1024 * (2**21 - 64)),
            SM90,
        ),
        "float32 scales": (dataclasses.replace(p, scale_f32=True), GENERIC),
        "k % 16": (_lens(k=72), GENERIC),
        "k = 0": (dataclasses.replace(p, k=0), GENERIC),
        "no group": (dataclasses.replace(p, num_groups=0), None),
        "target": (p, None),
    }
    for word, (q, fallback) in reasons.items():
        why = grouped_gemm_sm90_ws.unsupported("gfx950" if word == "target" else "sm_90a", q)
        assert why is not None and word in why, (word, why)
        if fallback is not None:
            assert choose_kernel(q, "sm_90a") is fallback, word
    # device problems: scale bases the scale warps copy as 32-bit words, code bases TMA reads
    dev = dataclasses.replace(p, device=True, a=dataclasses.replace(p.a, data=_Ptr(4096), scales=_Ptr(4098)),
                              b=dataclasses.replace(p.b, data=_Ptr(8192), scales=_Ptr(4100)))  # fmt: skip
    assert "4-byte aligned" in grouped_gemm_sm90_ws.unsupported("sm_90a", dev)
    dev = dataclasses.replace(dev, a=dataclasses.replace(dev.a, scales=_Ptr(4096)))
    assert grouped_gemm_sm90_ws.unsupported("sm_90a", dev) is None
    dev = dataclasses.replace(dev, a=dataclasses.replace(dev.a, data=_Ptr(4104)))
    assert "16-byte aligned" in grouped_gemm_sm90_ws.unsupported("sm_90a", dev)


def test_forced_kernels():
    p, p4 = _lens(), _lens("e2m1", "e2m1", out_dtype="float32")
    assert choose_kernel(p, "sm_90a", force="sm90_ws") is WS
    assert choose_kernel(p, "sm_90a", force="sm90_wgmma") is SM90  # the A/B of benchmarks/bench_grouped_gemm.py
    assert choose_kernel(p, "sm_90a", force="sm90") is WS and choose_kernel(p4, "sm_90a", force="sm90") is SM90
    with pytest.raises(UnsupportedArchError, match=r"MXRT_GROUPED_GEMM_KERNEL=sm90_ws cannot run.*float32 output"):
        choose_kernel(p4, "sm_90a", force="sm90_ws")
    with pytest.raises(UnsupportedArchError, match="kind 'wgrad'"):
        choose_kernel(_wgrad(), "sm_90a", force="sm90_ws")
    assert choose_kernel(_wgrad(), "sm_90a", force="sm90") is SM90


def test_schedule_bytes_mirror_the_kernel():
    """SCHED_BYTES is the walk header's GWS_SCHED_BYTES at 384 threads and MXRT_MAX_GROUPS groups; with the dense
    engine's ring and staging it fits a block."""
    text = (ROOT / "kernels_src" / "gemm" / "gemm_grouped_ws_walk.h").read_text()
    expr = re.search(r"#define GWS_SCHED_BYTES \((.*)\)\n", text).group(1)
    value = eval(expr, {"THREADS": 384, "MXRT_MAX_GROUPS": codes.GROUPED_MAX_GROUPS})
    assert value == grouped_gemm_sm90_ws.SCHED_BYTES
    assert grouped_gemm_sm90_ws.smem_bytes() <= SMEM_MAX


# ---- the launch through the stand-in CuPy: the packed parameters -------------------------------------------------


def _signature_format() -> str:
    """The struct format of gemm_mx_grouped_sm90_ws's parameters, from its extern "C" signature."""
    text = (ROOT / "kernels_src" / "gemm" / "gemm_mx_grouped_sm90_ws.hip").read_text()
    params = re.search(r"gemm_mx_grouped_sm90_ws\(([^)]*)\)", text.split('extern "C" __global__')[1]).group(1)
    fmt = "="
    for decl in params.split(","):
        decl = " ".join(decl.split())
        fmt += "128s" if "mxrt_tmap" in decl else "Q" if "*" in decl else "I" if decl.startswith("u32") else "?"
    return fmt


def test_param_format_matches_the_kernel_signature():
    assert fake_cupy.PARAM_FORMATS["gemm_mx_grouped_sm90_ws"] == _signature_format()


def _launches(state, symbol="gemm_mx_grouped_sm90_ws"):
    return [rec for rec in state["launches"] if rec[1] == symbol]


def test_launch_packs_lens_indices_and_masked():
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        dev = lambda q: dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))  # noqa: E731
        rng = np.random.default_rng(4)
        # lens, int64 lens on the device, odd n (no pair stores), b padded past k (B's row stride)
        lens = np.array([300, 0, 77, 1000])
        m, n, k, kb = int(lens.sum()), 199, 208, 256
        qa = mxrt.quantize_mx(rng.standard_normal((m, k)))
        qb = mxrt.quantize_mx(rng.standard_normal((4, n, kb)), axis=2)
        a, b = dev(qa), dev(qb)
        mxrt.grouped_gemm_mx(a, b, cp.asarray(lens))
        (rec,) = _launches(state)
        _, _, grid, block, smem, vals = rec
        tiles = (-(-m // 128) + 4 + 1) * 2
        assert grid == (min(132, tiles), 1, 1) and block == (384, 1, 1) and smem == grouped_gemm_sm90_ws.smem_bytes()
        tma, tmb = (np.frombuffer(v, np.uint64)[:5].tolist() for v in vals[:2])
        assert tma[0] == a.data.data.ptr and tmb[0] == b.data.data.ptr
        assert sorted(tma[1:3]) == sorted([k, m]) and sorted(tmb[1:3]) == sorted([k, 4 * n]) and 128 in tmb[3:5]
        assert vals[2:4] == (a.scales.data.ptr, b.scales.data.ptr)
        assert vals[6:] == (m, n, k, -(-k // 32), kb // 32, 4, 0, 2)  # flags: int64 lens, no pairs (odd n)
        # DeepGEMM contiguous: int32 ids, out given, n even (pair stores)
        state["launches"].clear()
        ids = mxrt.contiguous_m_indices(np.array([50, 0, 130]), 128)
        qa = mxrt.quantize_mx(rng.standard_normal((ids.size, 128)))
        qb = mxrt.quantize_mx(rng.standard_normal((3, 64, 128)), axis=2)
        d = cp.zeros((ids.size, 64), np.uint16)
        ids_d = cp.asarray(ids)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
            (cp.asarray(qa.data), cp.asarray(qa.scales)), (cp.asarray(qb.data), cp.asarray(qb.scales)), d, ids_d
        )
        (rec,) = _launches(state)
        assert rec[2] == (-(-ids.size // 128), 1, 1)
        assert rec[5][4:6] == (d.data.ptr, ids_d.data.ptr)
        assert rec[5][6:] == (ids.size, 64, 128, 4, 4, 3, 0, 1)  # flags: pairs
        # DeepGEMM masked: max_m reaches the kernel, int32 masked_m
        state["launches"].clear()
        g, max_m = 4, 130
        qa = mxrt.quantize_mx(rng.standard_normal((g, max_m, 128)), axis=2)
        qb = mxrt.quantize_mx(rng.standard_normal((g, 64, 128)), axis=2)
        dm = cp.zeros((g, max_m, 64), np.uint16)
        mm = cp.asarray(np.array([0, 1, 129, 130], np.int32))
        deep_gemm.m_grouped_fp8_gemm_nt_masked(
            (cp.asarray(qa.data), cp.asarray(qa.scales)), (cp.asarray(qb.data), cp.asarray(qb.scales)), dm, mm, 64
        )
        (rec,) = _launches(state)
        assert rec[2] == (g * 2, 1, 1)
        assert rec[5][5] == mm.data.ptr and rec[5][6:] == (g * max_m, 64, 128, 4, 4, g, max_m, 1)
        # e2m1 operands: expanded first (two expansion launches), then the engine on the expanded codes
        state["launches"].clear()
        lens = np.array([40, 88])
        qa = mxrt.quantize_mx(rng.standard_normal((128, 64)), "e2m1")
        qb = mxrt.quantize_mx(rng.standard_normal((2, 32, 64)), "e2m1", axis=2)
        mxrt.grouped_gemm_mx(dev(qa), dev(qb), cp.asarray(lens, np.int32))
        assert [r[1] for r in state["launches"]] == ["e2m1_to_e4m3", "e2m1_to_e4m3", "gemm_mx_grouped_sm90_ws"]
        assert state["launches"][-1][5][6:] == (128, 32, 64, 2, 2, 2, 0, 1)  # int32 lens


def test_launch_packs_the_float32_recipe():
    """DeepGEMM's Hopper recipe on the engine: both operands' float32 scales as given (b's per 128 x 128 block, read
    per block row by the kernel), strides of one float32 word per 128-K stage, one launch (nothing widened first)."""
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        rng = np.random.default_rng(6)
        lens, n, k, g = np.array([50, 0, 130]), 200, 384, 3
        ids = mxrt.contiguous_m_indices(lens, 128)
        x, w = rng.standard_normal((ids.size, k)), rng.standard_normal((g, n, k))
        ca, sa = mxrt.per_token_cast_to_fp8(x, False)
        cb, sb = (np.stack(v) for v in zip(*(mxrt.per_block_cast_to_fp8(w[i], False) for i in range(g)), strict=True))
        d = cp.zeros((ids.size, n), np.uint16)
        ids_d, sa_d, sb_d = cp.asarray(ids), cp.asarray(sa), cp.asarray(sb)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((cp.asarray(ca), sa_d), (cp.asarray(cb), sb_d), d, ids_d)
        assert [r[1] for r in state["launches"]] == ["gemm_mx_grouped_sm90_ws"]
        vals = state["launches"][0][5]
        assert vals[2:6] == (sa_d.data.ptr, sb_d.data.ptr, d.data.ptr, ids_d.data.ptr)
        assert vals[6:] == (ids.size, n, k, 4 * 3, 4 * 3, g, 0, 1)  # strides: 3 float32 words a row


def _f32_masked_args(cp, rng, g=3, max_m=130, n=200, k=384):
    x, w = rng.standard_normal((g, max_m, k)), rng.standard_normal((g, n, k))
    ca = np.stack([mxrt.per_token_cast_to_fp8(x[i], False)[0] for i in range(g)])
    sa = np.stack([mxrt.per_token_cast_to_fp8(x[i], False)[1] for i in range(g)])
    cb, sb = (np.stack(v) for v in zip(*(mxrt.per_block_cast_to_fp8(w[i], False) for i in range(g)), strict=True))
    a, b = (cp.asarray(ca), cp.asarray(sa)), (cp.asarray(cb), cp.asarray(sb))
    return a, b, cp.zeros((g, max_m, n), np.uint16), cp.asarray(np.array([0, 7, 130], np.int32))


def test_deepgemm_call_plans(monkeypatch):
    """A repeated masked / contiguous call on the same C-contiguous device arrays launches the kept engine launch
    again (no validation, no route search: the validated body is not entered), with the same packed parameters; other
    arrays are another key; arrays the route would convert (int64 masked_m) and MXRT_GROUPED_PLANS=0 get no plan."""
    from mxrt.api import deep_gemm as api

    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        rng = np.random.default_rng(7)
        a, b, d, mm = _f32_masked_args(cp, rng)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        assert len(api._PLANS) == 1
        first = state["launches"][-1]
        calls = []
        body = api._masked
        monkeypatch.setattr(api, "_masked", lambda *args: calls.append(1) or body(*args))
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        assert calls == [] and state["launches"][-1][1:] == first[1:]  # the plan: same kernel, grid, parameters
        d2 = cp.zeros(d.shape, np.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d2, mm, 64)  # another output buffer: another key, validated
        assert calls == [1] and len(api._PLANS) == 2 and state["launches"][-1][5][4] == d2.data.ptr
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 32)  # another scalar: another key
        assert calls == [1, 1]
        mm64 = cp.asarray(np.array([0, 7, 130], np.int64))
        for _ in range(2):  # int64 masked_m: launched as int64 (flag), same pointers, so planned as well
            deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm64, 64)
        assert calls == [1, 1, 1]
        # contiguous: int64 ids are converted to int32 on the device (a new buffer): never planned
        ids = mxrt.contiguous_m_indices(np.array([50, 0, 130]), 128)
        qa = mxrt.per_token_cast_to_fp8(rng.standard_normal((ids.size, 384)), False)
        ac = (cp.asarray(qa[0]), cp.asarray(qa[1]))
        dc = cp.zeros((ids.size, 200), np.uint16)
        n_plans = len(api._PLANS)
        for dtype in (np.int64, np.int64):
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, b, dc, cp.asarray(ids.astype(dtype)))
        assert len(api._PLANS) == n_plans
        ids32 = cp.asarray(ids)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, b, dc, ids32)
        assert len(api._PLANS) == n_plans + 1
        monkeypatch.setenv("MXRT_GROUPED_PLANS", "0")
        api.clear_plans()
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        assert calls == [1, 1, 1, 1, 1] and api._PLANS == {}


def test_ue8m0_per_128_recipe_runs_the_per_128_build(monkeypatch):
    """UE8M0 bytes at DeepGEMM's granularity (a 1x128, b 128x128) on device operands: one problem for the engine's
    SCALE_F32 2 build (scales read in place, strides of one byte per 128 K); with the generic kernel forced (or off
    sm_90a) the scales are widened to 1x32 as before. The older kernel and the generic plan refuse such problems."""
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        rng = np.random.default_rng(8)
        g, max_m, n, k = 3, 130, 200, 384
        x, w = rng.standard_normal((g, max_m, k)), rng.standard_normal((g, n, k))
        ca = np.stack([mxrt.per_token_cast_to_fp8(x[i], True)[0] for i in range(g)])
        sa = np.stack([mxrt.per_token_cast_to_fp8(x[i], True)[1] for i in range(g)])
        cb, sb = (np.stack(v) for v in zip(*(mxrt.per_block_cast_to_fp8(w[i], True) for i in range(g)), strict=True))
        ue = lambda s: (s.view(np.uint32) >> 23).astype(np.uint8)  # noqa: E731  (powers of two: their exponents)
        sa_d, sb_d = cp.asarray(ue(sa)), cp.asarray(ue(sb))
        a, b = (cp.asarray(ca), sa_d), (cp.asarray(cb), sb_d)
        d, mm = cp.zeros((g, max_m, n), np.uint16), cp.asarray(np.array([0, 7, 130], np.int32))
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        (rec,) = _launches(state)
        kernel = next(kk for kk in state["builds"] if kk.name == "gemm_mx_grouped_sm90_ws")
        assert kernel.defines["SCALE_F32"] == 2 and kernel.defines in [dict(v) for v in WS.variants]
        assert rec[5][2:4] == (sa_d.data.ptr, sb_d.data.ptr)  # read in place: nothing widened
        assert rec[5][6:] == (g * max_m, n, k, 3, 3, g, max_m, 1)  # strides: one byte per 128 K
        state["launches"].clear()
        monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
        assert [r[1] for r in state["launches"]] == ["gemm_mx_grouped_generic"]
    p = _f32(_masked())
    p = dataclasses.replace(p, scale_f32=False, sf_k128=True)
    assert "UE8M0 per 128 K" in grouped_gemm_sm90.unsupported("sm_90a", p)
    with pytest.raises(UnsupportedArchError, match="UE8M0 scales per 128 K"):
        grouped_plan(p, "sm_90a", force="generic")


def test_engine_call_plans(monkeypatch):
    """A repeated grouped_gemm_mx signature on the engine (no torch route here: CPU torch) runs its kept launch: no
    validation (the problem is not built again), the same kernel, grid and packed parameters with a new result
    buffer, or the caller's ``out``; int32 / int64 lens, odd n (no pair stores), fp16 out; a caller ``out`` not
    aligned for the prepared pair stores takes the validated route; e2m1 operands (expanded first) keep no launch."""
    from mxrt.api import grouped_gemm as api
    from mxrt.problems import grouped_gemm as problems

    monkeypatch.delenv("MXRT_GROUPED_PLANS", raising=False)
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        dev = lambda q: dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))  # noqa: E731
        rng = np.random.default_rng(8)
        built = []
        make = problems.grouped_gemm_problem
        monkeypatch.setattr(api, "grouped_gemm_problem", lambda *a, **k: built.append(1) or make(*a, **k))
        for lens, n, k, ldt, out_dtype in (((300, 0, 77), 72, 96, np.int64, "bfloat16"),
                                           ((5, 130), 199, 64, np.int32, "float16")):  # fmt: skip
            api.clear_plans()
            built.clear()
            lens = np.array(lens)
            m = int(lens.sum())
            a = dev(mxrt.quantize_mx(rng.standard_normal((m, k))))
            b = dev(mxrt.quantize_mx(rng.standard_normal((lens.size, n, k)), axis=2))
            dl = cp.asarray(lens.astype(ldt))
            recs, outs = [], []
            for _ in range(3):
                state["launches"].clear()
                outs.append(mxrt.grouped_gemm_mx(a, b, dl, out_dtype=out_dtype))
                (rec,) = _launches(state)
                recs.append(rec)
            assert built == [1] and len(api._PLANS) == 1  # one validated call, then the plan
            ((_, plan),) = api._PLANS.items()
            assert isinstance(plan.route, grouped_gemm_sm90_ws.PreparedEngine) and not plan.torch
            for rec, o in zip(recs, outs, strict=True):
                assert rec[0] == "driver" and rec[1:5] == recs[0][1:5]
                assert rec[5][:4] == recs[0][5][:4] and rec[5][5:] == recs[0][5][5:]  # all but out
                assert rec[5][4] == o.data.ptr and o.shape == (m, n) and o.flags.c_contiguous
                assert o.dtype == (np.uint16 if out_dtype == "bfloat16" else np.float16)
            assert recs[0][5][5] == dl.data.ptr and recs[0][5][-1] == (2 if ldt == np.int64 else 0) | (n % 2 == 0)
            assert len({o.data.ptr for o in outs}) == 3  # a fresh result each call
        # the caller's out: written in place and returned; one not aligned for pair stores: validated again
        lens = np.array([64, 64])
        a = dev(mxrt.quantize_mx(rng.standard_normal((128, 64))))
        b = dev(mxrt.quantize_mx(rng.standard_normal((2, 32, 64)), axis=2))
        dl = cp.asarray(lens)
        out = cp.zeros((128, 32), np.uint16)
        api.clear_plans()
        built.clear()
        for _ in range(2):
            assert mxrt.grouped_gemm_mx(a, b, dl, out=out) is out
        assert built == [1] and _launches(state)[-1][5][4] == out.data.ptr
        flat = cp.zeros(128 * 32 + 1, np.uint16)
        odd = flat[1:].reshape(128, 32)  # C-contiguous, 2 bytes off a 4-byte boundary
        assert odd.data.ptr % 4 == 2
        state["launches"].clear()
        assert mxrt.grouped_gemm_mx(a, b, dl, out=odd) is odd
        assert built == [1, 1] and _launches(state)[-1][5][-1] == 2  # validated: int64 lens, no pair stores
        # e2m1 operands: expanded into pool buffers first, so no engine launch is kept
        api.clear_plans()
        qa = dev(mxrt.quantize_mx(rng.standard_normal((128, 64)), "e2m1"))
        qb = dev(mxrt.quantize_mx(rng.standard_normal((2, 32, 64)), "e2m1", axis=2))
        for _ in range(2):
            mxrt.grouped_gemm_mx(qa, qb, dl)
        ((_, plan),) = api._PLANS.items()  # kept as "no plan": later calls do not ask again
        assert plan.route is None


def _norm(records, known):
    """Launch records with pointers named: the call's arrays by ``known``, every other pointer (workspaces, gate
    words, group ends, new results) by first use; tensor maps as (their named address, their other bytes)."""
    fresh: dict = {}

    def name(v):
        return known.get(v) or fresh.setdefault(v, f"new{len(fresh)}")

    out = []
    for _route, sym, grid, block, smem, vals in records:
        norm = []
        for v in vals or ():
            if isinstance(v, bytes):
                words = np.frombuffer(v, np.uint64)
                norm.append((name(int(words[0])), v[8:]))
            elif isinstance(v, int) and v > 2**26:
                norm.append(name(v))
            else:
                norm.append(v)
        out.append((sym, grid, block, smem, tuple(norm) if vals is not None else None))
    return out


@pytest.mark.parametrize("case", ["wgrad", "wgrad-accumulate", "fwd-f32"])
def test_bf16_route_call_plans(monkeypatch, case):
    """A repeated signature on the bf16 route (the float32 wgrad, its accumulate form, the float32 forward) runs its
    kept launches: no validation, the same five kernels, grids and packed parameters as the validated call (the
    workspaces named by first use: one pool allocation holds them in the plan), the gate word cleared first."""
    from mxrt.api import grouped_gemm as api
    from mxrt.ops import grouped_wgrad_bf16
    from mxrt.problems import grouped_gemm as problems

    monkeypatch.delenv("MXRT_GROUPED_PLANS", raising=False)
    with fake_cupy.install(record=True) as state:
        cp = sys.modules["cupy"]
        dev = lambda q: dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))  # noqa: E731
        rng = np.random.default_rng(9)
        lens = np.array([64, 0, 96])
        m = int(lens.sum())
        built = []
        for fn in ("wgrad_problem", "grouped_gemm_problem"):
            make = getattr(problems, fn)
            monkeypatch.setattr(api, fn, lambda *a, _m=make, **k: built.append(1) or _m(*a, **k))
        if case == "fwd-f32":
            a = dev(mxrt.quantize_mx(rng.standard_normal((m, 96))))
            b = dev(mxrt.quantize_mx(rng.standard_normal((3, 40, 96)), axis=2))
            dl, out = cp.asarray(lens.astype(np.int32)), None
            call = lambda: mxrt.grouped_gemm_mx(a, b, dl, out_dtype="float32")  # noqa: E731
        else:
            grad = rng.standard_normal((m, 40)).astype(np.float32)
            x = rng.standard_normal((m, 72)).astype(np.float32)
            kw = dict(colwise=True, col_align=32, backend="numpy")
            a = dev(mxrt.quantize_mx_grouped(grad, lens, **kw).col)
            b = dev(mxrt.quantize_mx_grouped(x, lens, **kw).col)
            dl = cp.asarray(lens)
            acc = case == "wgrad-accumulate"
            out = cp.zeros((3, 40, 72), np.float32) if acc else None
            call = lambda: mxrt.grouped_gemm_mx_wgrad(a, b, dl, out=out, accumulate=acc)  # noqa: E731
        known = {a.data.data.ptr: "a", a.scales.data.ptr: "sa", b.data.data.ptr: "b", b.scales.data.ptr: "sb"}
        known[dl.data.ptr] = "lens"
        if out is not None:
            known[out.data.ptr] = "out"
        api.clear_plans()
        runs, results = [], []
        for _ in range(3):
            state["launches"].clear()
            results.append(call())
            if out is None:
                known[results[-1].data.ptr] = "out"
            runs.append(_norm(state["launches"], known))
        assert built == [1]  # validated once
        ((_, plan),) = api._PLANS.items()
        assert isinstance(plan.route, grouped_wgrad_bf16.PreparedBf16)
        names = ["dequantize_mx", "dequantize_mx", "grouped_offsets", "gemm_wgrad_bf16_sm90", "gemm_mx_grouped_generic"]
        assert [r[0] for r in runs[0]] == names
        assert runs[1] == runs[0] and runs[2] == runs[0], (runs[0], runs[1])
        assert all(r[0] == "driver" for r in state["launches"])
        assert (results[-1] is out) if out is not None else results[-1].dtype == np.float32
