"""The bf16 route ``sm90_bf16`` of the grouped GEMMs (the variable-K wgrad; the forward / dgrad with float32 out) on an
sm_90a GPU (mxrt/ops/grouped_wgrad_bf16.py, kernels_src/gemm/gemm_wgrad_bf16_sm90.hip), forced with
MXRT_GROUPED_GEMM_KERNEL=sm90_bf16: balanced, unbalanced, empty and one-group splits, tile edges in both output
dimensions, float32 (the wgrad's default) and bfloat16 out, plain and accumulating, both tile widths, every format pair,
the float32-out forward / dgrad (MODE 1), extreme scale pairs and NaN scales (the exact gated fallback, which must find
``out`` untouched when accumulating), device lens the host cannot check, bitwise reruns and CUDA-graph replays with new
group sizes. Against float64 math of the dequantized inputs (fp32 relative <= 1e-5, bf16 calc_diff <= 1e-5). Outputs
start poisoned. Marker ``gpu``: skips without cupy, a device, or off sm_90a."""

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
from mxrt.errors import UnsupportedArchError
from mxrt.ops import grouped_wgrad_bf16
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


POISON = 0xFF
KERNEL = "gemm_wgrad_bf16_sm90"
OUT_NP = {"float32": np.float32, "bfloat16": np.uint16}


@pytest.fixture(autouse=True)
def session(monkeypatch):
    with forced_sm90_kernel(monkeypatch, "sm90_bf16", POISON) as s:
        yield s


def ran(session) -> None:
    names = [launch[1] for launch in session.launches]
    assert KERNEL in names, names[-4:]


def _start(rng, shape, out_dtype):
    s = values(rng, shape)
    if out_dtype == "bfloat16":
        s = s.astype(ml_dtypes.bfloat16)
        return s, cupy.asarray(s.view(np.uint16))
    s = s.astype(OUT_NP[out_dtype])
    return s, cupy.asarray(s)


CASES = [(1, "balanced", 2048), (4, "balanced", 4096), (4, "unbalanced", 1000), (32, "unbalanced", 2051),
         (32, "one", 777), (4, "one", 4096)]  # fmt: skip


@pytest.fixture(params=[128, 256], ids=["bn128", "bn256"])
def bn(request, monkeypatch):
    monkeypatch.setattr(grouped_wgrad_bf16, "BN", request.param)
    return request.param


@pytest.mark.parametrize("accumulate", [False, True], ids=["plain", "accumulate"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n,k", [(256, 136), (96, 199), (300, 129)], ids=["tiles", "odd", "edges"])
@pytest.mark.parametrize("g,kind,m", CASES, ids=str)
def test_wgrad(session, bn, g, kind, m, n, k, out_dtype, accumulate):
    """Splits with empty and unaligned groups, output tiles cut in both dimensions; accumulate adds to ``out`` in
    fp32 and rounds once; empty groups store zeros (plain) or leave out bit-identical (accumulate: out + 0)."""
    rng = np.random.default_rng(g * 7 + m + n + k)
    lens = group_lens(kind, g, m, rng)
    align = 128 if kind == "balanced" else 32
    qg, qx = wgrad_operands(rng, lens, n, k, align=align)
    p = wgrad_problem(qg, qx, lens, align=align, out_dtype=out_dtype)
    want, _ = grouped_gemm_f64(p)
    if accumulate:
        start, out = _start(rng, (g, n, k), out_dtype)
        res = mxrt.grouped_gemm_mx_wgrad(
            dev(qg), dev(qx), cupy.asarray(lens), align=align, out_dtype=out_dtype, out=out, accumulate=True
        )
        assert res is out
        got = host(out, out_dtype)
        want = want + start.astype(np.float64)
    else:
        got = host(mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens), align=align, out_dtype=out_dtype),
                   out_dtype)  # fmt: skip
    ran(session)
    check(got, want, out_dtype, f"wgrad G={g} {kind} m={m} {out_dtype} accumulate={accumulate}")
    for e in np.flatnonzero(lens == 0):
        if accumulate:
            np.testing.assert_array_equal(got[e], start[e].astype(np.float64))
        else:
            assert (got[e] == 0).all()


@pytest.mark.parametrize("pair", [("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2"), ("e2m1", "e2m1"),
                                  ("e4m3", "e2m1"), ("e2m1", "e4m3")], ids="x".join)  # fmt: skip
def test_format_pairs(session, pair):
    rng = np.random.default_rng(15)
    lens = np.array([100, 0, 300, 1, 623])
    qg, qx = wgrad_operands(rng, lens, 130, 160, pair)
    p = wgrad_problem(qg, qx, lens)
    got = mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(lens))
    ran(session)
    check(host(got, "float32"), grouped_gemm_f64(p)[0], "float32", str(pair))


@pytest.mark.parametrize("accumulate", [False, True], ids=["plain", "accumulate"])
def test_extreme_scale_pairs_and_nan_take_the_exact_fallback(session, accumulate):
    """Legal extreme pairs (sa = 0 with sb = 254, ...) leave the bf16 window: the kernel writes nothing and the gated
    generic kernel computes the reference (adding to the untouched out when accumulating); a NaN scale byte gives
    exactly the reference's NaN entries, only inside its own group."""
    rng = np.random.default_rng(22)
    a, b, lens = extreme_wgrad_operands(rng)
    for sa_nan in (None, (17, 6)):  # column block 6 = columns 192..223: group 2 (offsets 0, 160, 160, 256)
        a2 = a
        if sa_nan is not None:
            s2 = a.scales.copy()
            s2[sa_nan] = 255
            a2 = dataclasses.replace(a, scales=s2)
        want, _ = grouped_gemm_f64(wgrad_problem(a2, b, lens))
        kw = {}
        if accumulate:
            start, out = _start(rng, (4, 136, 72), "float32")
            kw = dict(out=out, accumulate=True)
            want = want + start.astype(np.float64)
        got = host(mxrt.grouped_gemm_mx_wgrad(dev(a2), dev(b), cupy.asarray(lens), **kw), "float32")
        ran(session)
        nan = np.isnan(want)
        assert nan.any() == (sa_nan is not None) and not nan[[0, 1, 3]].any()
        np.testing.assert_array_equal(np.isnan(got), nan)
        check(got[~nan], want[~nan], "float32", f"extreme pairs, NaN {sa_nan}")


def test_bitwise_stable_over_reruns(session):
    rng = np.random.default_rng(18)
    lens = np.array([33, 0, 700, 7, 1300])
    qg, qx = wgrad_operands(rng, lens, 384, 256)
    a, b, dl = dev(qg), dev(qx), cupy.asarray(lens)
    first = mxrt.grouped_gemm_mx_wgrad(a, b, dl).get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.grouped_gemm_mx_wgrad(a, b, dl).get(), first)


def test_call_plans_replay_the_route(session, monkeypatch):
    """A repeated signature runs its prepared launches (mxrt/api/grouped_gemm.py, session 21): the bits of the
    validated call (plans off) on fresh poisoned results, into the caller's ``out`` when accumulating, and through the
    gated exact fallback where a scale leaves the bf16 window."""
    from mxrt.api import grouped_gemm as api

    rng = np.random.default_rng(23)
    lens = np.array([33, 0, 700, 7, 1300])
    qg, qx = wgrad_operands(rng, lens, 384, 256)
    ea, eb, elens = extreme_wgrad_operands(rng)
    cases = [(dev(qg), dev(qx), cupy.asarray(lens)), (dev(ea), dev(eb), cupy.asarray(elens))]
    for a, b, dl in cases:
        monkeypatch.setenv("MXRT_GROUPED_PLANS", "0")
        want = mxrt.grouped_gemm_mx_wgrad(a, b, dl).get()
        start = cupy.asarray(values(rng, want.shape).astype(np.float32))
        out = start.copy()
        want_acc = mxrt.grouped_gemm_mx_wgrad(a, b, dl, out=out, accumulate=True).get()
        monkeypatch.delenv("MXRT_GROUPED_PLANS")
        api.clear_plans()
        for i in range(3):
            got = mxrt.grouped_gemm_mx_wgrad(a, b, dl)
            ran(session)
            np.testing.assert_array_equal(got.get(), want, err_msg=f"call {i}")
            out[...] = start
            assert mxrt.grouped_gemm_mx_wgrad(a, b, dl, out=out, accumulate=True) is out
            np.testing.assert_array_equal(out.get(), want_acc, err_msg=f"accumulate, call {i}")
        routes = [pl.route for pl in api._PLANS.values()]
        assert len(routes) == 2 and all(isinstance(r, grouped_wgrad_bf16.PreparedBf16) for r in routes)


def test_device_lens_the_host_cannot_check(session):
    """Lens past the columns (cut at k), negative (0): no fault, the clamped result (the generic kernel's rule)."""
    rng = np.random.default_rng(19)
    lens = np.array([100, 100, 100, 100])
    qg, qx = wgrad_operands(rng, lens, 64, 40)
    mc = qg.shape[1]
    for bad in ([10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2]):
        got = host(mxrt.grouped_gemm_mx_wgrad(dev(qg), dev(qx), cupy.asarray(bad)), "float32")
        pad = -(-np.clip(np.asarray(bad), 0, mc) // 32) * 32
        offs = np.minimum(np.concatenate([[0], np.cumsum(pad)]), mc)
        dq = [mxrt.dequantize_mx(q).astype(np.float64) for q in (qg, qx)]
        want = np.stack([dq[0][:, c0:c1] @ dq[1][:, c0:c1].T for c0, c1 in itertools.pairwise(offs)])
        check(got, want, "float32", str(bad))


# ---- MODE 1: the forward / dgrad by group_lens with float32 out ---------------------------------------------------


@pytest.mark.parametrize("n,k", [(192, 256), (304, 176)], ids=["tiles", "edges"])
@pytest.mark.parametrize("g,kind", [(1, "balanced"), (4, "unbalanced"), (32, "empty"), (256, "unbalanced")], ids=str)
def test_forward_and_dgrad_float32(session, g, kind, n, k):
    """Each group's row tiles against its own weight rows (tiles straddling groups, n past a tile, a last K tile of
    48 columns); dgrad with the dual-quantized weights padded past k; the unquantized product within 1e-3."""
    rng = np.random.default_rng(g + n)
    lens = group_lens(kind, g, 1024, rng)
    m = int(lens.sum())
    x, w, go = values(rng, (m, k)), values(rng, (g, n, k)), values(rng, (m, n))
    qx, qw, qgo = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(go)
    for a, b in ((qx, qw.row), (qgo, qw.col)):
        got = mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens), out_dtype="float32")
        ran(session)
        want, _ = grouped_gemm_f64(grouped_gemm_problem(a, b, lens, out_dtype="float32"))
        check(host(got, "float32"), want, "float32", f"G={g} {kind} b={b.shape}")


def test_forward_device_lens_the_host_cannot_check(session):
    """Lens summing short of M (the rows past the last group stored as zeros), past M (cut), negative (0)."""
    rng = np.random.default_rng(7)
    lens = np.array([100, 100, 100, 100])
    qa, qb = mxrt.quantize_mx(values(rng, (400, 64))), mxrt.quantize_mx(values(rng, (4, 72, 64)), axis=2)
    for bad in ([10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2]):
        out = cupy.full((400, 72), np.nan, np.float32)
        mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(bad), out_dtype="float32", out=out)
        ran(session)
        eff = np.diff(np.concatenate([[0], np.minimum(np.cumsum(np.clip(np.asarray(bad), 0, 400)), 400)]))
        p = dataclasses.replace(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"), groups=eff)
        check(host(out, "float32"), grouped_gemm_f64(p)[0], "float32", str(bad))


def test_forward_extreme_scales_take_the_exact_fallback(session):
    rng = np.random.default_rng(9)
    lens = np.array([70, 0, 130])
    qa, qb = mxrt.quantize_mx(values(rng, (200, 128))), mxrt.quantize_mx(values(rng, (3, 64, 128)), axis=2)
    sa = qa.scales.copy()
    sa[:, 1], sa[5, 2] = 0, 255  # far below the window (products near 2^-127 x values), and a NaN row
    sb = qb.scales.copy()
    sb[:, :, 1] = 254
    a, b = dataclasses.replace(qa, scales=sa), dataclasses.replace(qb, scales=sb)
    want, _ = grouped_gemm_f64(grouped_gemm_problem(a, b, lens, out_dtype="float32"))
    got = host(mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens), out_dtype="float32"), "float32")
    ran(session)
    nan = np.isnan(want)
    assert nan[5].all() and nan.sum() == 64
    np.testing.assert_array_equal(np.isnan(got), nan)
    check(got[~nan], want[~nan], "float32", "extreme scales")


def test_forced_on_another_layout_raises(session):
    """Forced on a bf16-out forward call (the route's forward / dgrad write float32 only): a typed error."""
    rng = np.random.default_rng(3)
    lens = np.array([20, 30])
    x, w = mxrt.quantize_mx(values(rng, (50, 64))), mxrt.quantize_mx(values(rng, (2, 32, 64)), axis=2)
    with pytest.raises(UnsupportedArchError, match="float32 only"):
        mxrt.grouped_gemm_mx(dev(x), dev(w), cupy.asarray(lens))


def test_cuda_graph_capture_follows_new_group_lens():
    """Captured once, accumulating in fp32; between replays new sizes are written into the same device lens (the
    column ranges come from the device) and out is reset to its start."""
    rng = np.random.default_rng(20)
    g, m, n, k = 8, 4096, 256, 192
    lens_sets = [group_lens("balanced", g, m, rng), group_lens("unbalanced", g, m, rng), group_lens("one", g, m, rng)]
    qg, qx = wgrad_operands(rng, lens_sets[1], n, k)  # the most padded layout: every set fits its columns
    a, b = dev(qg), dev(qx)
    start = values(rng, (g, n, k)).astype(np.float32)
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        lens_d = cupy.asarray(lens_sets[0])
        out = cupy.asarray(start)
        mxrt.grouped_gemm_mx_wgrad(a, b, lens_d, out=out, accumulate=True)  # compile, warm the pool
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            mxrt.grouped_gemm_mx_wgrad(a, b, lens_d, out=out, accumulate=True)
            graph = stream.end_capture()
        for lens in lens_sets[::-1]:
            lens_d[...] = cupy.asarray(lens)
            out[...] = cupy.asarray(start)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            want, _ = grouped_gemm_f64(wgrad_problem(qg, qx, lens))
            check(host(out, "float32"), want + start.astype(np.float64), "float32", f"replay {lens}")
