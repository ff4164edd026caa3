"""The Hopper grouped MX GEMM kernels on an sm_90a GPU, forced with MXRT_GROUPED_GEMM_KERNEL=sm90 (a problem neither
takes raises, so every test here runs one of them): the grouped engine (kernels_src/gemm/gemm_mx_grouped_sm90_ws.hip)
for forward / dgrad by device group_lens, DeepGEMM contiguous (ids, psum) and masked with 16-bit out, the older
kernel (kernels_src/gemm/gemm_mx_grouped_sm90.hip) for the variable-K wgrad (MODE 3) and fp32 out; each test asserts
which kernel ran (the debug session's launches). Against float64 math of the dequantized inputs (bf16 / fp16
calc_diff <= 1e-5, fp32 relative <= 1e-5). Outputs start poisoned (0xFF bytes); rows the op does not own must keep
the poison. Marker ``gpu``: skips without cupy, a device, or off sm_90a."""

from __future__ import annotations

import dataclasses
import itertools

import ml_dtypes
import numpy as np
import pytest
from support.grouped_cases import (
    check,
    dev,
    extreme_wgrad_operands,
    forced_sm90_kernel,
    group_lens,
    host,
    values,
    wgrad_operands,
)

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt.ops import grouped_gemm_kernels, grouped_gemm_sm90, grouped_gemm_sm90_ws
from mxrt.ops.grouped_gemm import choose_kernel
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import get_arch  # noqa: E402

POISON = 0xFF
BF16 = ml_dtypes.bfloat16
SM90 = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90
WS = grouped_gemm_kernels.GEMM_MX_GROUPED_SM90_WS


@pytest.fixture(autouse=True)
def forced(monkeypatch):
    with forced_sm90_kernel(monkeypatch, "sm90", POISON) as session:
        yield session


def _uses(p, spec=WS) -> None:
    assert choose_kernel(p, "sm_90a") is spec


def ran(session, spec=WS) -> None:
    """The last launch of the debug session was ``spec``'s kernel (e2m1 expansions launch before it)."""
    assert session.launches, "nothing launched"
    assert session.launches[-1][1] == spec.symbol, [launch[1] for launch in session.launches[-3:]]


LENS_CASES = [(1, "balanced", 1024), (4, "balanced", 4096), (4, "unbalanced", 1000), (32, "unbalanced", 2051),
              (32, "one", 777), (4, "one", 4096)]  # fmt: skip


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("g,kind,m", LENS_CASES, ids=str)
def test_forward_and_dgrad(forced, g, kind, m, out_dtype):
    """Both tiles (256 rows at >= 512 rows per group, else 128), unaligned groups, empty groups, one group holding
    every row; forward with an odd n = 199 (single-element stores, a partial column tile), reductions of 272 and
    208 = 16 mod 32 (a half MX block at the end)."""
    rng = np.random.default_rng(g + m)
    n, k, nd = 199, 272, 208
    lens = group_lens(kind, g, m, rng)
    x, w, go, w2 = values(rng, (m, k)), values(rng, (g, n, k)), values(rng, (m, nd)), values(rng, (g, nd, k))
    qw2 = mxrt.quantize_mx_dual_grouped(w2)  # col: [G, k, nd] along nd, the dgrad operand
    for a, b in ((mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)), (mxrt.quantize_mx(go), qw2.col)):
        _uses(grouped_gemm_problem(a, b, lens, out_dtype=out_dtype))
        got = mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens, cupy.int32), out_dtype=out_dtype)
        ran(forced)
        p = grouped_gemm_problem(a, b, lens, out_dtype="float32")
        want, _ = grouped_gemm_f64(p)
        check(host(got, out_dtype), want, out_dtype, f"G={g} {kind} m={m}")


@pytest.mark.parametrize(
    "pair,out_dtype",
    [(("e5m2", "e4m3"), "bfloat16"), (("e4m3", "e5m2"), "float16"), (("e5m2", "e5m2"), "bfloat16"),
     (("e2m1", "e2m1"), "float32"), (("e2m1", "e2m1"), "bfloat16"), (("e4m3", "e2m1"), "bfloat16")],
    ids=str,
)  # fmt: skip
def test_format_pairs(forced, pair, out_dtype):
    rng = np.random.default_rng(5)
    lens = np.array([100, 0, 300, 1, 623])
    m, n, k = int(lens.sum()), 130, 160
    qa, qb = mxrt.quantize_mx(values(rng, (m, k)), pair[0]), mxrt.quantize_mx(values(rng, (5, n, k)), pair[1], axis=2)
    got = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens), out_dtype=out_dtype)
    ran(forced, SM90 if out_dtype == "float32" else WS)  # fp32 out (e2m1 x e2m1): the older kernel
    want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))
    check(host(got, out_dtype), want, out_dtype, str(pair))


def test_padded_b_rows_are_not_read(forced):
    """b [G, n, kb] with kb > k (quantize_mx_dual_grouped's k_pad): codes past k hold NaN codes and must not reach
    the result (the B map stops at k, its row stride is kb)."""
    rng = np.random.default_rng(6)
    lens = np.array([130, 70, 0, 300])
    m, n, k, kb = int(lens.sum()), 136, 208, 256
    qa = mxrt.quantize_mx(values(rng, (m, k)))
    qb = mxrt.quantize_mx(values(rng, (4, n, kb)), axis=2)
    codes = qb.data.copy()
    codes[:, :, k:] = 0x7F  # e4m3 NaN
    qb = dataclasses.replace(qb, data=codes)
    qb_k = mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)  # a twin of b with only k columns for the reference
    qb_k = dataclasses.replace(qb_k, data=np.ascontiguousarray(codes[:, :, :k]), scales=qb.scales[:, :, : k // 32 + 1])
    got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens)), "bfloat16")
    ran(forced)
    want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb_k, lens, out_dtype="float32"))
    check(got, want, "bfloat16")


def test_device_lens_the_host_cannot_check(forced):
    """Lens short of m (the tail rows become zeros), past m (cut), negative (0): no fault, the clamped result."""
    rng = np.random.default_rng(7)
    qa, qb = mxrt.quantize_mx(values(rng, (400, 64))), mxrt.quantize_mx(values(rng, (4, 72, 64)), axis=2)
    lens = np.array([100, 100, 100, 100])
    for bad in ([10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2]):
        got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(bad)), "bfloat16")
        ran(forced)
        clamped = np.clip(np.asarray(bad), 0, 400)
        eff = np.diff(np.concatenate([[0], np.minimum(np.cumsum(clamped), 400)]))
        p = dataclasses.replace(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"), groups=eff)
        check(got, grouped_gemm_f64(p)[0], "bfloat16", str(bad))


def test_bitwise_stable_over_reruns(forced):
    rng = np.random.default_rng(8)
    lens = np.array([33, 0, 700, 7, 1300])
    m, n, k = int(lens.sum()), 384, 512
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (5, n, k)), axis=2)
    a, b, dl = dev(qa), dev(qb), cupy.asarray(lens)
    first = mxrt.grouped_gemm_mx(a, b, dl).get()
    ran(forced)
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.grouped_gemm_mx(a, b, dl).get(), first)


def test_call_plans_replay_the_engine(forced):
    """A repeated grouped_gemm_mx signature runs its prepared engine launch (mxrt/api/grouped_gemm.py, session 21):
    the first call's bits on a fresh poisoned result each time, or the caller's ``out`` written in place."""
    from mxrt.api import grouped_gemm as api

    rng = np.random.default_rng(12)
    lens = np.array([33, 0, 700, 7])
    m, n, k = int(lens.sum()), 200, 256
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
    a, b, dl = dev(qa), dev(qb), cupy.asarray(lens)
    want = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0]
    api.clear_plans()
    for out_dtype in ("bfloat16", "float16"):
        first = mxrt.grouped_gemm_mx(a, b, dl, out_dtype=out_dtype)
        ran(forced)
        check(host(first, out_dtype), want, out_dtype)
        for _ in range(2):
            got = mxrt.grouped_gemm_mx(a, b, dl, out_dtype=out_dtype)
            ran(forced)
            assert got.data.ptr != first.data.ptr
            np.testing.assert_array_equal(got.get(), first.get())
    plans = [pl.route for pl in api._PLANS.values()]
    assert len(plans) == 2 and all(isinstance(r, grouped_gemm_sm90_ws.PreparedEngine) for r in plans)
    out = cupy.full((m, n), 0xFFFF, np.uint16)
    for _ in range(2):
        assert mxrt.grouped_gemm_mx(a, b, dl, out=out) is out
        check(host(out), want, "bfloat16")
        out.fill(0xFFFF)
    torch = pytest.importorskip("torch")  # CUDA torch operands: torch results from the planned engine call
    t = lambda v: torch.from_numpy(np.ascontiguousarray(v)).cuda()  # noqa: E731
    ta = dataclasses.replace(qa, data=t(qa.data), scales=t(qa.scales))
    tb = dataclasses.replace(qb, data=t(qb.data), scales=t(qb.scales))
    ref = mxrt.grouped_gemm_mx(a, b, dl, out_dtype="float16").get()
    for _ in range(3):
        got = mxrt.grouped_gemm_mx(ta, tb, t(lens), out_dtype="float16")
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float16 and got.shape == (m, n)
        np.testing.assert_array_equal(got.cpu().numpy(), ref)
    assert any(pl.torch and isinstance(pl.route, grouped_gemm_sm90_ws.PreparedEngine) for pl in api._PLANS.values())


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
def test_extreme_scale_pairs(forced, out_dtype):
    """Legal extreme scale pairs (sa = 0 with sb = 254, ...) give the reference; NaN scale bytes give exactly the
    reference's NaN rows / columns, and only inside their own group."""
    rng = np.random.default_rng(21)
    lens = np.array([150, 0, 90, 310])
    m, n, k, g = int(lens.sum()), 136, 320, 4
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    off = 36 if out_dtype == "float16" else 0
    kb = k // 32
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - off - base + rng.integers(-6, 7, (g, n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, :, 0] = 0, 254 - off
    sa[:, -1], sb[:, :, -1] = 254 - off, 0
    a = dataclasses.replace(qa, scales=sa)
    b = dataclasses.replace(qb, scales=sb)
    want, _ = grouped_gemm_f64(grouped_gemm_problem(a, b, lens, out_dtype="float32"))
    assert np.isfinite(want.astype(out_dtype)).all()
    got = host(mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens), out_dtype=out_dtype), out_dtype)
    ran(forced)
    check(got, want, out_dtype, "extreme pairs")
    # NaN bytes: row 200 of a (group 2 or 3), column 17 of group 3's b
    sa2, sb2 = sa.copy(), sb.copy()
    sa2[200, 3], sb2[3, 17, 2] = 255, 255
    a2, b2 = dataclasses.replace(qa, scales=sa2), dataclasses.replace(qb, scales=sb2)
    want, _ = grouped_gemm_f64(grouped_gemm_problem(a2, b2, lens, out_dtype="float32"))
    got = host(mxrt.grouped_gemm_mx(dev(a2), dev(b2), cupy.asarray(lens), out_dtype=out_dtype), out_dtype)
    nan = np.isnan(want)
    assert nan.any()
    np.testing.assert_array_equal(np.isnan(got), nan)
    check(got[~nan], want[~nan], out_dtype, "NaN bytes, the rest")


def test_deepgemm_contiguous_minus_one_rows_untouched(forced):
    rng = np.random.default_rng(10)
    lens = np.array([50, 0, 300, 7, 129, 128])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 256, 384, lens.size
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)
    a, b = (cupy.asarray(qa.data), cupy.asarray(qa.scales)), (cupy.asarray(qb.data), cupy.asarray(qb.scales))
    ref = np.full((m, n), 0xFFFF, np.uint16).view(BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qa.data, qa.scales), (qb.data, qb.scales), ref, ids)  # host twin
    for layout in ("ids", "psum", "ids mixed"):
        d = cupy.empty((m, n), cupy.uint16)
        d.view(cupy.uint8).fill(POISON)
        if layout == "psum":
            psum = mxrt.contiguous_psum_layout(lens)
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(psum), use_psum_layout=True)
            want_ids = ids
        elif layout == "ids":
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(ids))
            want_ids = ids
        else:  # several groups (and -1 rows) inside one 128-row tile: the kernel loops over them
            want_ids = np.where(rng.random(m) < 0.2, -1, rng.integers(0, g, m)).astype(np.int32)
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(want_ids))
            ref = np.full((m, n), 0xFFFF, np.uint16).view(BF16)
            deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qa.data, qa.scales), (qb.data, qb.scales), ref, want_ids)
        ran(forced)
        h = d.get()
        ok = want_ids >= 0
        assert (h[~ok] == 0xFFFF).all(), layout  # -1 rows untouched (still poison)
        check(h.view(BF16)[ok].astype(np.float64), ref[ok].astype(np.float64), "bfloat16", layout)


def test_deepgemm_masked_every_masked_m(forced):
    rng = np.random.default_rng(11)
    g, max_m, n, k = 6, 256, 200, 256
    qa, qb = mxrt.quantize_mx(values(rng, (g, max_m, k)), axis=2), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    a, b = (cupy.asarray(qa.data), cupy.asarray(qa.scales)), (cupy.asarray(qb.data), cupy.asarray(qb.scales))
    for masked in ([0, 0, 0, 0, 0, 0], [0, 1, 127, 128, 129, 256], [256] * 6, [-3, 300, 5, 0, 255, 64]):
        mm = np.array(masked, np.int32)
        d = cupy.empty((g, max_m, n), cupy.uint16)
        d.view(cupy.uint8).fill(POISON)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, cupy.asarray(mm), expected_m=64)
        ran(forced)
        eff = np.clip(mm, 0, max_m)
        ref = np.zeros((g, max_m, n), BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked((qa.data, qa.scales), (qb.data, qb.scales), ref, eff, 64)
        own = np.arange(max_m)[None, :] < eff[:, None]
        h = d.get()
        assert (h[~own] == 0xFFFF).all(), masked
        if own.any():
            check(h.view(BF16)[own].astype(np.float64), ref[own].astype(np.float64), "bfloat16", str(masked))


def test_cuda_graph_capture_follows_new_groupgroup_lens(forced):
    """Captured once; between replays new sizes are written into the same device buffer (tensor maps by value,
    group sizes read on the device only)."""
    rng = np.random.default_rng(12)
    g, m, n, k = 8, 4096, 256, 256
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    a, b = dev(qa), dev(qb)
    lens_sets = [group_lens("balanced", g, m, rng), group_lens("unbalanced", g, m, rng), group_lens("one", g, m, rng)]
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        lens_d = cupy.asarray(lens_sets[0])
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.grouped_gemm_mx(a, b, lens_d, out=out)  # compile, warm the pool
        assert choose_kernel(grouped_gemm_problem(qa, qb, lens_sets[0]), "sm_90a") is WS
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            mxrt.grouped_gemm_mx(a, b, lens_d, out=out)
            graph = stream.end_capture()
        for lens in lens_sets[::-1]:
            lens_d[...] = cupy.asarray(lens)
            out.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))
            check(host(out, "bfloat16"), want, "bfloat16", f"replay lens {lens.tolist()}")


def test_forced_kernel_declines_with_a_reason():
    rng = np.random.default_rng(13)
    lens = np.array([40, 24])
    qa, qb = mxrt.quantize_mx(values(rng, (64, 64))), mxrt.quantize_mx(values(rng, (2, 32, 64)), axis=2)
    with pytest.raises(mxrt.errors.UnsupportedArchError, match="float32 output with an fp8 operand"):
        mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens), out_dtype="float32")


def test_many_tiles_per_cta(forced):
    """More tiles than SMs (the persistent walk runs several per CTA, computed ones and the tail's zero tiles mixed):
    8 groups with empty and unaligned ones, lens summing short of m (tail rows: zeros), int64 lens."""
    rng = np.random.default_rng(24)
    lens = np.array([0, 1500, 3, 0, 777, 2100, 129, 1])  # 4510 of 4600 rows: 90 tail rows
    m, n, k, s = 4600, 1024, 256, int(lens.sum())
    x = values(rng, (m, k))
    qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(values(rng, (8, n, k)), axis=2)
    p = grouped_gemm_problem(mxrt.quantize_mx(x[:s]), qb, lens, out_dtype="float32")  # the grouped rows (rowwise)
    assert grouped_gemm_sm90_ws.tiles_bound(dataclasses.replace(p, m=m)) > 2 * get_arch().num_cus
    got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens, cupy.int64)), "bfloat16")
    ran(forced)
    want = np.zeros((m, n))
    want[:s] = grouped_gemm_f64(p)[0]
    check(got, want, "bfloat16", "many tiles")
    assert (got[s:] == 0).all()


@pytest.mark.parametrize("g", [1, 4, 32])
def test_deepgemm_group_counts(forced, g):
    """G in {1, 4, 32}: masked with masked_m drawn from 0..max_m (0 and max_m always present), and the contiguous
    layout of random group sizes (empty ones included) with its -1 padding rows, against the host twin."""
    rng = np.random.default_rng(25 + g)
    max_m, n, k = 192, 136, 256
    qa, qb = mxrt.quantize_mx(values(rng, (g, max_m, k)), axis=2), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    mm = rng.integers(0, max_m + 1, g).astype(np.int32)
    mm[0] = max_m
    mm[-1] = 0 if g > 1 else mm[-1]
    a, b = (cupy.asarray(qa.data), cupy.asarray(qa.scales)), (cupy.asarray(qb.data), cupy.asarray(qb.scales))
    d = cupy.empty((g, max_m, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, cupy.asarray(mm), expected_m=64)
    ran(forced)
    ref = np.zeros((g, max_m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((qa.data, qa.scales), (qb.data, qb.scales), ref, mm, 64)
    own = np.arange(max_m)[None, :] < mm[:, None]
    h = d.get()
    assert (h[~own] == 0xFFFF).all()
    check(h.view(BF16)[own].astype(np.float64), ref[own].astype(np.float64), "bfloat16", f"masked G={g}")
    lens = rng.integers(0, 200, g)
    lens[g // 2] = 0 if g > 1 else 77
    ids = mxrt.contiguous_m_indices(lens, 128)
    qx = mxrt.quantize_mx(values(rng, (ids.size, k)))
    d = cupy.empty((ids.size, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (cupy.asarray(qx.data), cupy.asarray(qx.scales)), b, d, cupy.asarray(ids)
    )
    ran(forced)
    ref = np.zeros((ids.size, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qx.data, qx.scales), (qb.data, qb.scales), ref, ids)
    h, ok = d.get(), ids >= 0
    assert (h[~ok] == 0xFFFF).all()
    check(h.view(BF16)[ok].astype(np.float64), ref[ok].astype(np.float64), "bfloat16", f"contiguous G={g}")


def test_older_kernel_forced(forced, monkeypatch):
    """MXRT_GROUPED_GEMM_KERNEL=sm90_wgmma (the A/B switch of benchmarks/bench_grouped_gemm.py) still runs the older
    kernel's lens and masked paths (its launcher now shares the tensor maps and flags with the engine's)."""
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_wgmma")
    rng = np.random.default_rng(26)
    lens = np.array([100, 0, 300, 1, 623])
    m, n, k = int(lens.sum()), 130, 160
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (5, n, k)), axis=2)
    got = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens))
    ran(forced, SM90)
    want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))
    check(host(got, "bfloat16"), want, "bfloat16", "sm90_wgmma lens")
    g, max_m = 3, 130
    qa, qb = mxrt.quantize_mx(values(rng, (g, max_m, k)), axis=2), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    mm = np.array([0, 129, 130], np.int32)
    d = cupy.empty((g, max_m, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    dq = lambda q: (cupy.asarray(q.data), cupy.asarray(q.scales))  # noqa: E731
    deep_gemm.m_grouped_fp8_gemm_nt_masked(dq(qa), dq(qb), d, cupy.asarray(mm), expected_m=64)
    ran(forced, SM90)
    ref = np.zeros((g, max_m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((qa.data, qa.scales), (qb.data, qb.scales), ref, mm, 64)
    own = np.arange(max_m)[None, :] < mm[:, None]
    h = d.get()
    assert (h[~own] == 0xFFFF).all()
    check(h.view(BF16)[own].astype(np.float64), ref[own].astype(np.float64), "bfloat16", "sm90_wgmma masked")


# ---- the variable-K wgrad (MODE 3): out[g] (+)= a_g @ b_g.T over group g's padded columns ------------------------

WGRAD_CASES = [(1, "balanced", 2048), (4, "balanced", 4096), (4, "unbalanced", 1000), (32, "unbalanced", 2051),
               (32, "one", 777), (4, "one", 4096)]  # fmt: skip


def _bf16_start(rng, shape):
    return values(rng, shape).astype(BF16)


@pytest.mark.parametrize("accumulate", [False, True], ids=["plain", "accumulate"])
@pytest.mark.parametrize("n,k", [(200, 136), (96, 199)], ids=["tile256", "tile128-odd"])
@pytest.mark.parametrize("g,kind,m", WGRAD_CASES, ids=str)
def test_wgrad(g, kind, m, n, k, accumulate):
    """bf16 wgrad over balanced / unaligned / empty groups, both tiles (256 rows past 128 rows of out), an odd
    column count (single-element stores); accumulate adds to a bf16 out in fp32 and rounds once; empty groups
    store zeros (plain) or leave out bit-identical (accumulate: out + 0)."""
    rng = np.random.default_rng(g * 7 + m + n)
    lens = group_lens(kind, g, m, rng)
    qg, qx = wgrad_operands(rng, lens, n, k, align=128 if kind == "balanced" else 32)
    align = 128 if kind == "balanced" else 32
    p = wgrad_problem(qg, qx, lens, align=align, out_dtype="bfloat16")
    _uses(p, SM90)
    want, _ = grouped_gemm_f64(p)
    if accumulate:
        start = _bf16_start(rng, (g, n, k))
        out = cupy.asarray(start.view(np.uint16))
        res = mxrt.grouped_gemm_mx_wgrad(
            dev(qg), dev(qx), cupy.asarray(lens), align=align, out_dtype="bfloat16", out=out, accumulate=True
        )
        assert res is out
        got = host(out, "bfloat16")
        want = want + start.astype(np.float64)
    else:
        got = host(mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens), align=align, out_dtype="bfloat16"),
                   "bfloat16")  # fmt: skip
    check(got, want, "bfloat16", f"wgrad G={g} {kind} m={m} tile={grouped_gemm_sm90.tile(p)}")
    for e in np.flatnonzero(lens == 0):
        if accumulate:
            np.testing.assert_array_equal(got[e], start[e].astype(np.float64))
        else:
            assert (got[e] == 0).all()


@pytest.mark.parametrize("pair,out_dtype", [(("e5m2", "e4m3"), "bfloat16"), (("e4m3", "e5m2"), "bfloat16"),
                                            (("e5m2", "e5m2"), "bfloat16"), (("e2m1", "e2m1"), "float32"),
                                            (("e2m1", "e2m1"), "bfloat16"), (("e4m3", "e2m1"), "bfloat16")],
                         ids=str)  # fmt: skip
def test_wgrad_format_pairs(pair, out_dtype):
    rng = np.random.default_rng(15)
    lens = np.array([100, 0, 300, 1, 623])
    qg, qx = wgrad_operands(rng, lens, 130, 160, pair)
    p = wgrad_problem(qg, qx, lens, out_dtype=out_dtype)
    _uses(p, SM90)
    got = mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens), out_dtype=out_dtype)
    check(host(got, out_dtype), grouped_gemm_f64(p)[0], out_dtype, str(pair))


def test_wgrad_extreme_scale_pairs():
    """Legal extreme pairs (sa = 0 with sb = 254, ...) over every block of every group give the reference; a NaN
    scale byte gives exactly the reference's NaN entries, only inside its own group."""
    a, b, lens = extreme_wgrad_operands(np.random.default_rng(22))
    p = wgrad_problem(a, b, lens, out_dtype="bfloat16")
    want, _ = grouped_gemm_f64(p)
    assert np.isfinite(want.astype(BF16)).all()
    got = host(mxrt.grouped_gemm_mx_wgrad(dev(a), dev(b), cupy.asarray(lens), out_dtype="bfloat16"), "bfloat16")
    check(got, want, "bfloat16", "extreme pairs")
    sa2 = a.scales.copy()
    sa2[17, 6] = 255  # column block 6 = columns 192..223: group 2 (offsets 0, 160, 160, 256)
    a2 = dataclasses.replace(a, scales=sa2)
    want, _ = grouped_gemm_f64(wgrad_problem(a2, b, lens, out_dtype="bfloat16"))
    got = host(mxrt.grouped_gemm_mx_wgrad(dev(a2), dev(b), cupy.asarray(lens), out_dtype="bfloat16"), "bfloat16")
    nan = np.isnan(want)
    assert nan.any() and not nan[[0, 1, 3]].any()
    np.testing.assert_array_equal(np.isnan(got), nan)
    check(got[~nan], want[~nan], "bfloat16", "NaN byte, the rest")


def test_wgrad_bitwise_stable_over_reruns():
    rng = np.random.default_rng(18)
    lens = np.array([33, 0, 700, 7, 1300])
    qg, qx = wgrad_operands(rng, lens, 384, 256)
    a, b, dl = dev(qg), dev(qx), cupy.asarray(lens)
    first = mxrt.grouped_gemm_mx_wgrad(a, b, dl, out_dtype="bfloat16").get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.grouped_gemm_mx_wgrad(a, b, dl, out_dtype="bfloat16").get(), first)


def test_wgrad_device_lens_the_host_cannot_check():
    """Lens past the columns (cut at k), negative (0): no fault, the clamped result (the generic kernel's rule)."""
    rng = np.random.default_rng(19)
    lens = np.array([100, 100, 100, 100])
    qg, qx = wgrad_operands(rng, lens, 64, 40)
    mc = qg.shape[1]
    for bad in ([10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2]):
        got = host(mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(bad), out_dtype="bfloat16"), "bfloat16")
        # the reference over the same column ranges: padded lens cut at the operands' width
        pad = -(-np.clip(np.asarray(bad), 0, mc) // 32) * 32
        offs = np.minimum(np.concatenate([[0], np.cumsum(pad)]), mc)
        want = np.stack([_cols(qg, c0, c1) @ _cols(qx, c0, c1).T for c0, c1 in itertools.pairwise(offs)])
        check(got, want, "bfloat16", str(bad))


def _cols(q, c0, c1):
    return mxrt.dequantize_mx(q).astype(np.float64)[:, c0:c1]


def test_wgrad_cuda_graph_capture_follows_new_groupgroup_lens():
    """Captured once; between replays new sizes are written into the same device lens (the column ranges come from
    the device; the operands stay, each lens set reads its own columns of them)."""
    rng = np.random.default_rng(20)
    g, m, n, k = 8, 4096, 256, 192
    lens_sets = [group_lens("balanced", g, m, rng), group_lens("unbalanced", g, m, rng), group_lens("one", g, m, rng)]
    qg, qx = wgrad_operands(rng, lens_sets[1], n, k)  # the most padded layout: every set fits its columns
    a, b = dev(qg), dev(qx)
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        lens_d = cupy.asarray(lens_sets[0])
        out = cupy.empty((g, n, k), cupy.uint16)
        mxrt.grouped_gemm_mx_wgrad(a, b, lens_d, out_dtype="bfloat16", out=out)  # compile, warm the pool
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            mxrt.grouped_gemm_mx_wgrad(a, b, lens_d, out_dtype="bfloat16", out=out)
            graph = stream.end_capture()
        for lens in lens_sets[::-1]:
            lens_d[...] = cupy.asarray(lens)
            out.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            want, _ = grouped_gemm_f64(wgrad_problem(qg, qx, lens, out_dtype="bfloat16"))
            check(host(out, "bfloat16"), want, "bfloat16", f"replay lens {lens.tolist()}")


def test_wgrad_forced_kernel_declines_float32_with_fp8():
    rng = np.random.default_rng(23)
    lens = np.array([40, 24])
    qg, qx = wgrad_operands(rng, lens, 64, 32)
    with pytest.raises(mxrt.errors.UnsupportedArchError, match="float32 output with an fp8 operand"):
        mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens))
