"""The call plans of the grouped GEMMs' torch route (issue 11, host cost; mxrt/api/grouped_gemm.py) on the CPU:
tests/support/fake_cupy.py stands in for CuPy and the driver, CPU torch for the route's tensors, and the route's
kernels that feed torch (``dequantize_mx``, ``grouped_offsets``) do their work through their numpy twins, so
``torch._grouped_mm`` multiplies real operands. A planned call launches what the validated route launches (kernels,
grids, every packed parameter, read back), returns the same bits, writes ``out`` in place and reuses one plan per
call signature; anything validation reads gives a new key, so a bad input on a cached signature raises the same
typed error as without plans; a CUDA-graph capture, another device or CuPy's launch route take the validated route.
The route on a GPU: tests/test_gpu_grouped_torch.py (``test_plan_*``)."""

from __future__ import annotations

import dataclasses
import gc
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest
from support import fake_cupy

import mxrt
from mxrt.api import grouped_gemm as api
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64

torch = pytest.importorskip("torch")


@pytest.fixture
def dev(monkeypatch):
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    monkeypatch.delenv("MXRT_GROUPED_PLANS", raising=False)
    with fake_cupy.install(record=True, effects=True) as state, fake_cupy.route_on_cpu():
        yield state


def _cp():
    return sys.modules["cupy"]


def _d(q):
    """An MXArray with stand-in device fields."""
    cp = _cp()
    return dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales))


def _x(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _lens_case(n=24, k=64, fa="e4m3", fb="e4m3", lens=(5, 0, 11, 16), seed=0):
    rng = np.random.default_rng(seed)
    lens = np.array(lens)
    m = int(lens.sum())
    qa = mxrt.quantize_mx(_x(rng, (m, k)), fa, backend="numpy")
    qb = mxrt.quantize_mx(_x(rng, (len(lens), n, k)), fb, axis=2, backend="numpy")
    return qa, qb, lens


def _wgrad_case(n=40, k=24, lens=(40, 0, 24), seed=1):
    rng = np.random.default_rng(seed)
    lens = np.array(lens)
    m = int(lens.sum())
    qg = mxrt.quantize_mx_grouped(_x(rng, (m, n)), lens, colwise=True, col_align=32, backend="numpy").col
    qx = mxrt.quantize_mx_grouped(_x(rng, (m, k)), lens, colwise=True, col_align=32, backend="numpy").col
    return qg, qx, lens


def _normalised(launches, known):
    """Launch records with unknown pointers (workspaces, gate words, new results) numbered by first use, so calls
    that pass the same buffers to the same slots compare equal (as tests/test_overhead_plans.py)."""
    fresh: dict = {}
    out = []
    for _, name, grid, block, smem, vals in launches:
        norm = []
        for v in vals or ():
            if isinstance(v, int) and v > 2**26 and v not in known:  # host addresses may sit below 2^32
                v = fresh.setdefault(v, f"new{len(fresh)}")
            norm.append(known.get(v, v) if isinstance(v, int) else v)
        out.append((name, grid, block, smem, tuple(norm)))
    return out


def _known(a, b, lens, out):
    names = {a.data.data.ptr: "a", a.scales.data.ptr: "sa", b.data.data.ptr: "b", b.scales.data.ptr: "sb"}
    names[lens.data.ptr] = "lens"
    if out is not None:
        names[out.data.ptr] = "out"
    return names


def _calls(dev, monkeypatch, fn, known, n=3):
    """(routes, results): one call through CuPy's launch route (no plan: its launches cannot be prepared), then
    ``n`` driver-route calls (the first makes the plan, the others run it)."""
    routes, outs = [], []
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    api.clear_plans()
    dev["launches"].clear()
    outs.append(np.array(fn()))
    routes.append(_normalised(dev["launches"], known))
    assert not api._PLANS  # CuPy's call: nothing to prepare, so nothing kept
    monkeypatch.delenv("MXRT_LAUNCH")
    for _ in range(n):
        dev["launches"].clear()
        outs.append(np.array(fn()))
        routes.append(_normalised(dev["launches"], known))
    return routes, outs


def _bf16(x):
    return np.asarray(x).view(ml_dtypes.bfloat16).astype(np.float64)


LENS_CASES = [
    # n, k, formats, lens dtype, out given
    (24, 64, ("e4m3", "e4m3"), "int64", False),
    (24, 64, ("e4m3", "e4m3"), "int32", True),
    (50, 36, ("e5m2", "e4m3"), "int64", False),  # torch pads the result's rows (n % 8 != 0), k % 8 != 0
    (50, 96, ("e4m3", "e2m1"), "int32", True),
    (65, 160, ("e2m1", "e2m1"), "int64", True),
]


@pytest.mark.parametrize(("n", "k", "fmts", "ldt", "with_out"), LENS_CASES, ids=[str(c) for c in LENS_CASES])
def test_planned_forward_launches_and_returns_what_the_route_does(dev, monkeypatch, n, k, fmts, ldt, with_out):
    qa, qb, lens = _lens_case(n, k, *fmts)
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens.astype(ldt))
    m = int(lens.sum())
    out = _cp().asarray(np.full((m, n), 0xFFFF, np.uint16)) if with_out else None
    routes, outs = _calls(dev, monkeypatch, lambda: mxrt.grouped_gemm_mx(a, b, dl, out=out), _known(a, b, dl, out))
    assert [r[0] for r in routes[0]] == ["dequantize_mx", "dequantize_mx", "grouped_offsets", "gemm_mx_grouped_generic"]
    assert all(r == routes[0] for r in routes[1:]), routes
    assert [r[0] for r in dev["launches"]] == ["driver"] * 4  # the planned call: prepared launches
    ((_, plan),) = api._PLANS.items()
    assert plan.route is not None and plan.route.kind == "lens" and not plan.torch
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    want = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))[0]
    assert mxrt.calc_diff(_bf16(outs[-1]), want) <= 1e-5
    got = mxrt.grouped_gemm_mx(a, b, dl, out=out)
    assert (got is out) if with_out else (got.flags.c_contiguous and got.shape == (m, n) and got.dtype == np.uint16)


@pytest.mark.parametrize("with_out", [False, True])
@pytest.mark.parametrize("n", [40, 50])
def test_planned_wgrad_launches_and_returns_what_the_route_does(dev, monkeypatch, n, with_out):
    qg, qx, lens = _wgrad_case(n=n)
    a, b, dl = _d(qg), _d(qx), _cp().asarray(lens)
    k = qx.shape[0]
    out = _cp().asarray(np.full((3, n, k), 0xFFFF, np.uint16)) if with_out else None

    def fn():
        return mxrt.grouped_gemm_mx_wgrad(a, b, dl, out_dtype="bfloat16", out=out)

    routes, outs = _calls(dev, monkeypatch, fn, _known(a, b, dl, out))
    assert all(r == routes[0] for r in routes[1:]), routes
    ((_, plan),) = api._PLANS.items()
    assert plan.route.kind == "wgrad"
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    want = grouped_gemm_f64(wgrad_problem(qg, qx, lens))[0]
    assert mxrt.calc_diff(_bf16(outs[-1]), want) <= 1e-5
    np.testing.assert_array_equal(_bf16(outs[-1])[1], 0)  # the empty group: zeros


def test_a_hit_reuses_one_plan_and_holds_no_buffer(dev):
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens)
    mxrt.grouped_gemm_mx(a, b, dl)
    ((key, plan),) = api._PLANS.items()
    for _ in range(3):
        mxrt.grouped_gemm_mx(a, b, dl)
    a2, b2, dl2 = _d(qa), _d(qb), _cp().asarray(lens)  # new buffers of the same signature: the same plan
    first = np.array(mxrt.grouped_gemm_mx(a, b, dl))
    np.testing.assert_array_equal(np.array(mxrt.grouped_gemm_mx(a2, b2, dl2)), first)
    assert list(api._PLANS.items()) == [(key, plan)]
    refs = [weakref.ref(x) for x in (a2.data, a2.scales, b2.data, b2.scales, dl2)]
    del a2, b2, dl2
    gc.collect()
    assert all(r() is None for r in refs)  # a plan keeps sizes and launches, never the caller's buffers


def _new_plans(fn):
    before = dict(api._PLANS)
    fn()
    return sum(1 for key, p in api._PLANS.items() if before.get(key) is not p)


def test_the_key_changes_with_everything_validation_reads(dev, monkeypatch):
    cp = _cp()
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), cp.asarray(lens)
    m, n = int(lens.sum()), 24
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl)) == 1
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl, backend="gpu")) == 0  # auto = gpu on the device
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, cp.asarray(lens.astype(np.int32)))) == 1
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl, out=cp.empty((m, n), np.uint16))) == 1
    big = cp.asarray(np.zeros(qa.data.size + 8, np.uint8))  # codes 8 bytes off a 16-byte boundary
    odd = big[8:].reshape(qa.data.shape)
    odd[...] = qa.data
    a_odd = dataclasses.replace(a, data=odd)
    dev["launches"].clear()
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a_odd, b, dl)) == 1
    flags = [r[-1][-1] for r in dev["launches"] if r[1] == "dequantize_mx"]
    dev["launches"].clear()
    mxrt.grouped_gemm_mx(a_odd, b, dl)  # its plan: the dequantiser without vector loads, as validated
    assert [r[-1][-1] for r in dev["launches"] if r[1] == "dequantize_mx"] == flags and flags[0] != flags[1]
    qa5, qb5, _ = _lens_case(fa="e5m2", fb="e5m2")
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(_d(qa5), _d(qb5), dl)) == 1
    qa2, qb2, lens2 = _lens_case(n=32, lens=(8, 8, 8, 9))
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(_d(qa2), _d(qb2), cp.asarray(lens2))) == 1
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl, out_dtype="float32")) == 1  # the bf16 route's plan
    ((_, f32),) = ((k, p) for k, p in api._PLANS.items() if k[5] == "float32")
    assert type(f32.route).__name__ == "PreparedBf16" and f32.out == ((m, n), "float32", "float32")
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "torch")
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl)) == 1
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
    dev["launches"].clear()
    assert _new_plans(lambda: mxrt.grouped_gemm_mx(a, b, dl)) == 1
    mxrt.grouped_gemm_mx(a, b, dl)
    assert [r[1] for r in dev["launches"]] == ["gemm_mx_grouped_generic"] * 2  # forced: never the cached route
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL")
    qg, qx, wl = _wgrad_case()
    g, x, dwl = _d(qg), _d(qx), cp.asarray(wl)
    assert _new_plans(lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dwl, out_dtype="bfloat16")) == 1
    assert _new_plans(lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dwl, out_dtype="bfloat16", align=64)) == 1
    assert _new_plans(lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dwl, align=np.int64(32))) == 0  # not planned
    monkeypatch.setenv("MXRT_GROUPED_PLANS", "0")
    api.clear_plans()
    mxrt.grouped_gemm_mx(a, b, dl)
    mxrt.grouped_gemm_mx(a, b, dl)
    assert not api._PLANS


def _error(fn, i):
    try:
        fn()
    except mxrt.MxrtError as e:
        return type(e), str(e)
    raise AssertionError(f"bad input {i} raised nothing")


def test_a_bad_input_on_a_cached_signature_raises_the_same_typed_error(dev, monkeypatch):
    cp = _cp()
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), cp.asarray(lens)
    m, n = int(lens.sum()), 24
    y = cp.empty((m, n), np.uint16)
    mxrt.grouped_gemm_mx(a, b, dl)
    mxrt.grouped_gemm_mx(a, b, dl, out=y)
    qg, qx, wl = _wgrad_case()
    g, x, dwl = _d(qg), _d(qx), cp.asarray(wl)
    mxrt.grouped_gemm_mx_wgrad(g, x, dwl, out_dtype="bfloat16")
    assert len(api._PLANS) == 3 and all(p.route is not None for p in api._PLANS.values())
    bad = [
        lambda: mxrt.grouped_gemm_mx(a, b, cp.asarray(lens[:3])),  # G - 1 lengths
        lambda: mxrt.grouped_gemm_mx(a, b, cp.asarray(lens.astype(np.float32))),
        lambda: mxrt.grouped_gemm_mx(a, b, lens),  # host lengths with device operands
        lambda: mxrt.grouped_gemm_mx(a, b, cp.asarray(np.stack([lens, lens]))[:, 0]),  # strided lengths
        lambda: mxrt.grouped_gemm_mx(a, b, dl, out=cp.empty((m, n + 1), np.uint16)),
        lambda: mxrt.grouped_gemm_mx(a, b, dl, out=cp.empty((m, n), np.float32)),
        lambda: mxrt.grouped_gemm_mx(a, b, dl, out=cp.empty((n, m), np.uint16).T),
        lambda: mxrt.grouped_gemm_mx(a, b, dl, out=np.empty((m, n), ml_dtypes.bfloat16)),
        lambda: mxrt.grouped_gemm_mx(a, b, dl, out_dtype="bf16"),
        lambda: mxrt.grouped_gemm_mx(a, b, dl, backend="numpy"),
        lambda: mxrt.grouped_gemm_mx(a, dataclasses.replace(b, shape=(4, 24, 48)), dl),
        lambda: mxrt.grouped_gemm_mx(dataclasses.replace(a, data=a.data.view(np.int8)), b, dl),
        lambda: mxrt.grouped_gemm_mx(dataclasses.replace(a, fmt="e3m4"), b, dl),
        lambda: mxrt.grouped_gemm_mx(a, dataclasses.replace(b, data=b.data[:, ::-1]), dl),  # not C-contiguous
        lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dwl, out_dtype="bfloat16", align=48),
        lambda: mxrt.grouped_gemm_mx_wgrad(g, x, dwl, out_dtype="bfloat16", accumulate=True),
        lambda: mxrt.grouped_gemm_mx_wgrad(g, x, cp.asarray(wl.astype(np.int16)), out_dtype="bfloat16"),
    ]
    planned = [_error(f, i) for i, f in enumerate(bad)]
    monkeypatch.setenv("MXRT_GROUPED_PLANS", "0")
    assert [_error(f, i) for i, f in enumerate(bad)] == planned
    assert len({t for t, _ in planned}) > 2  # DtypeError, ShapeError, LayoutError, ...
    monkeypatch.delenv("MXRT_GROUPED_PLANS")
    dev["launches"].clear()
    mxrt.grouped_gemm_mx(a, b, dl)  # the cached signature still runs its plan
    assert [r[0] for r in dev["launches"]] == ["driver"] * 4 and len(api._PLANS) == 3


def test_capture_device_and_launch_route_take_the_validated_route(dev, monkeypatch):
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens)
    first = np.array(mxrt.grouped_gemm_mx(a, b, dl))
    ((key, plan),) = api._PLANS.items()
    dev["launches"].clear()
    dev["capturing"] = True  # CuPy's stream captures: the route steps aside for the capture-safe engine
    mxrt.grouped_gemm_mx(a, b, dl)
    dev["capturing"] = False
    assert [r[1] for r in dev["launches"]] == ["gemm_mx_grouped_sm90_ws"]
    dev["launches"].clear()
    dev["device"] = 1  # another current device than the plan's launches: the validated route
    np.testing.assert_array_equal(np.array(mxrt.grouped_gemm_mx(a, b, dl)), first)
    dev["device"] = 0
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    np.testing.assert_array_equal(np.array(mxrt.grouped_gemm_mx(a, b, dl)), first)
    monkeypatch.delenv("MXRT_LAUNCH")
    np.testing.assert_array_equal(np.array(mxrt.grouped_gemm_mx(a, b, dl)), first)
    assert [r[0] for r in dev["launches"]] == ["driver"] * 4 + ["cupy"] * 4 + ["driver"] * 4
    assert list(api._PLANS.items()) == [(key, plan)]  # none of them replaced the plan


def test_a_capture_on_the_first_call_keeps_no_plan(dev):
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens)
    dev["capturing"] = True
    mxrt.grouped_gemm_mx(a, b, dl)
    dev["capturing"] = False
    assert not api._PLANS  # a later eager call must still find the route
    mxrt.grouped_gemm_mx(a, b, dl)
    ((_, plan),) = api._PLANS.items()
    assert plan.route is not None


def test_planned_calls_keep_the_debug_hook(dev):
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens)
    mxrt.grouped_gemm_mx(a, b, dl)
    with mxrt.runtime.debug(sync_after_launch=True) as dbg:
        mxrt.grouped_gemm_mx(a, b, dl)
    assert [d[1] for d in dbg.launches] == ["dequantize_mx", "dequantize_mx", "grouped_offsets",
                                            "gemm_mx_grouped_generic"]  # fmt: skip


def test_device_b_buffers_are_checked_against_its_shape(dev):
    """A device MXArray b whose codes or scales do not have its [G, n, ...] leading shape: a typed ShapeError naming the
    buffer, before anything is flattened or launched (plans or not)."""
    qa, qb, lens = _lens_case()
    a, b, dl = _d(qa), _d(qb), _cp().asarray(lens)
    g, n, k = qb.shape
    bad_scales = dataclasses.replace(b, scales=_cp().asarray(np.zeros((g, n + 1, k // 32), np.uint8)))
    with pytest.raises(mxrt.errors.ShapeError, match=r"b\.scales has shape .* expected \[4, 24, \.\.\.\]"):
        mxrt.grouped_gemm_mx(a, bad_scales, dl)
    bad_data = dataclasses.replace(b, data=_cp().asarray(np.zeros((g * n, k), np.uint8)))
    with pytest.raises(mxrt.errors.ShapeError, match=r"b\.data has shape \(96, 64\)"):
        mxrt.grouped_gemm_mx(a, bad_data, dl)
    assert not api._PLANS  # nothing planned from a refused call
