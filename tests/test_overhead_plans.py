"""The small-call plans of ``gemm_mx`` and ``quantize_mx`` (issue 9, host overhead) on the CPU, through the stand-in
CuPy of tests/support/fake_cupy.py: a planned call launches exactly what the unplanned route launches (kernel,
grid, block, shared memory and every packed parameter, read back from the driver route's parameter block and
compared with CuPy's route), and a change of anything the plan was made from (buffer alignment, dtype, shape,
the forced path, the launch route, the current device, a reloaded tuned table) never reuses a stale plan."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from support import fake_cupy

import mxrt
from mxrt.api import gemm as api_gemm
from mxrt.api import moe_gemm as api_moe
from mxrt.api import quant as api_quant
from mxrt.errors import LayoutError
from mxrt.ops import moe_gemm as moe_ops  # imported before the stand-in CuPy is (its build is patched then)


@pytest.fixture
def dev():
    with fake_cupy.install(record=True) as state:
        yield state


def _cp():
    return sys.modules["cupy"]


def _operands(m, n, k, seed=0, fa="e4m3", fb="e4m3"):
    cp = _cp()
    rng = np.random.default_rng(seed)
    out = []
    for rows, fmt in ((m, fa), (n, fb)):
        q = mxrt.quantize_mx(rng.standard_normal((rows, k), dtype=np.float32), fmt, backend="numpy")
        out.append(dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales)))
    return out


def _normalised(launches, known):
    """Launch records with pointers the test does not know (fresh outputs, workspaces) numbered by first use
    within ``launches``, so two routes' calls compare equal when they pass the same buffers to the same slots."""
    fresh: dict = {}
    out = []
    for _, name, grid, block, smem, vals in launches:
        norm = []
        for v in vals or ():
            if isinstance(v, int) and v > 2**32 and v not in known:
                v = fresh.setdefault(v, f"new{len(fresh)}")
            elif isinstance(v, bytes):
                words = np.frombuffer(v, np.uint64)  # the stand-in map: address, dims, box
                ptr = int(words[0])
                v = (known.get(ptr, fresh.setdefault(ptr, f"new{len(fresh)}")), *map(int, words[1:5]))
            norm.append(known.get(v, v) if isinstance(v, int) else v)
        out.append((name, grid, block, smem, tuple(norm)))
    return out


def _known(*mx):
    names = {}
    for i, q in enumerate(mx):
        names[q.data.data.ptr] = f"op{i}.data"
        names[q.scales.data.ptr] = f"op{i}.scales"
    return names


def _gemm_calls(dev, monkeypatch, qa, qb, **kw):
    """(routes, results): the launches of one call through CuPy's route, then three driver-route calls (the first
    makes the plan, the next two run it), normalised."""
    known = _known(qa, qb)
    routes = []
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    api_gemm.clear_plans()
    dev["launches"].clear()
    outs = [mxrt.gemm_mx(qa, qb, **kw)]
    routes.append(_normalised(dev["launches"], known))
    monkeypatch.delenv("MXRT_LAUNCH")
    api_gemm.clear_plans()
    for _ in range(3):
        dev["launches"].clear()
        outs.append(mxrt.gemm_mx(qa, qb, **kw))
        routes.append(_normalised(dev["launches"], known))
    return routes, outs


CASES = [
    # m, n, k, kwargs: decode (own split, split_k=2 deterministic), sm90_ws (m > 64), sm90_wgmma (split-K), fp16
    (1, 128, 128, {}),
    (1, 7168, 4096, {}),
    (4, 256, 512, {"split_k": 2}),
    (3, 256, 256, {"out_dtype": "float16"}),
    (100, 256, 256, {}),
    (100, 256, 512, {"split_k": 4}),
]


@pytest.mark.parametrize(("m", "n", "k", "kw"), CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}-{c[3]}" for c in CASES])
def test_planned_calls_launch_what_the_unplanned_route_launches(dev, monkeypatch, m, n, k, kw):
    qa, qb = _operands(m, n, k)
    routes, outs = _gemm_calls(dev, monkeypatch, qa, qb, **kw)
    assert routes[0] and all(r == routes[0] for r in routes[1:]), routes
    assert [r[0] for r in dev["launches"]] == ["driver"] * len(routes[0])  # the planned call used the driver
    plan = next(iter(api_gemm._PLANS.values()))
    assert plan.runner is not None
    for o in outs:
        assert o.shape == (m, n) and o.dtype == np.dtype("float16" if kw.get("out_dtype") else "uint16")
    assert len({o.data.ptr for o in outs}) == len(outs)  # a fresh result per call


def test_planned_call_writes_the_returned_buffer(dev):
    qa, qb = _operands(1, 128, 128)
    mxrt.gemm_mx(qa, qb)
    dev["launches"].clear()
    out = mxrt.gemm_mx(qa, qb)
    ((_, name, _, _, _, vals),) = dev["launches"]
    assert name == "gemm_mx_decode_sm90" and vals[4] == out.data.ptr
    assert vals[2:4] == (qa.scales.data.ptr, qb.scales.data.ptr)


def test_e2m1_and_atomic_split_stay_on_the_path_run(dev):
    qa, qb = _operands(2, 128, 256, fa="e2m1", fb="e2m1")
    for _ in range(2):
        mxrt.gemm_mx(qa, qb, out_dtype="float32", backend="gpu")
    qa, qb = _operands(100, 128, 256)
    for _ in range(2):
        mxrt.gemm_mx(qa, qb, split_k=2, deterministic=False)
    runners = [p.runner for p in api_gemm._PLANS.values()]
    assert len(runners) == 2 and runners[1] is None  # atomic split-K: no prepared form


#: the decode path's scale forms: (layout, storage dtype) -> define SLA / SLB
LAYOUT_FORMS = {
    ("aiter32x8", None): 1,
    ("turbo16x4", None): 2,
    ("turbo16x4", np.uint32): 5,
    ("cublas128x4", None): 3,
    ("deepgemm_ue8m0", None): 4,
}


def _in_layout(q, layout, dtype):
    """q with its scales preshuffled on the host, as a stand-in device array over the layout's whole storage (for
    deepgemm_ue8m0 the MN-major int32 storage behind the [rows, sn/4] view, as the GPU preshuffle returns it)."""
    p = mxrt.preshuffle_scales(np.asarray(q.scales), layout, dtype=dtype, backend="numpy")
    if layout != "deepgemm_ue8m0":
        return _cp().asarray(p)
    sm = p.strides[1] // 4
    full = _cp().asarray(np.lib.stride_tricks.as_strided(p, (p.shape[1], sm), (4 * sm, 4)))
    return full.T[: p.shape[0]]


@pytest.mark.parametrize("side", ["b", "both"])
@pytest.mark.parametrize("form", list(LAYOUT_FORMS), ids=lambda f: f"{f[0]}{'_u32' if f[1] else ''}")
def test_preshuffled_scales_run_the_decode_kernel_in_place(dev, monkeypatch, form, side):
    """Device scales in a preshuffled layout stay on sm90_decode: the build carries SLA / SLB = the layout codes,
    the kernel gets the storage pointers as given (nothing unshuffled on the way), shared memory grows by the
    staged scale words, and the planned call launches what the unplanned one does."""
    from mxrt.ops import gemm_decode_kernels as K

    layout, dtype = form
    qa, qb = _operands(8, 300, 2048)
    qb = dataclasses.replace(qb, scales=_in_layout(qb, layout, dtype), scale_layout=layout)
    if side == "both":
        qa = dataclasses.replace(qa, scales=_in_layout(qa, layout, dtype), scale_layout=layout)
    routes, _ = _gemm_calls(dev, monkeypatch, qa, qb)
    assert routes[0] and all(r == routes[0] for r in routes[1:]), routes
    assert next(iter(api_gemm._PLANS.values())).runner is not None  # the planned (prepared) form ran
    (name, grid, _, smem, vals), reduce = routes[0]  # the path's own 4-way K split: fp32 slices, then the reduce
    assert name == "gemm_mx_decode_sm90" and reduce[0] == "gemm_mx_splitk_reduce"
    assert vals[2:4] == ("op0.scales", "op1.scales") and grid[2] == 4
    code = LAYOUT_FORMS[form]
    (build,) = [x for x in dev["builds"] if x.name == "gemm_mx_decode_sm90"]
    d = build.defines
    assert (d["SLA"], d["SLB"]) == ((code if side == "both" else 0), code)
    assert smem == K.smem_bytes(0, 0, d["MT"], d["KW"], d["STAGES"], d["RT"], d["SLA"], d["SLB"])
    words = K.scale_words(code)
    assert smem - K.smem_bytes(0, 0, d["MT"], d["KW"], d["STAGES"], d["RT"]) == d["KW"] * d["STAGES"] * (
        (16 * d["RT"] + (8 * d["MT"] if side == "both" else 0)) * 4 * (words - 1)
    )


def _new_plan_count(qa, qb, **kw):
    before = dict(api_gemm._PLANS)
    mxrt.gemm_mx(qa, qb, **kw)
    return sum(1 for key, p in api_gemm._PLANS.items() if before.get(key) is not p)


def test_plan_keys_buffer_alignment_dtype_shape(dev):
    cp = _cp()
    qa, qb = _operands(1, 128, 256)
    assert _new_plan_count(qa, qb) == 1
    assert _new_plan_count(qa, qb) == 0
    qa2, _ = _operands(1, 128, 256, seed=5)  # new buffers, same key
    assert _new_plan_count(qa2, qb) == 0
    # codes 8 bytes past a 16-byte boundary: decode declines (TMA / cp.async), another path serves it
    big = cp.asarray(np.zeros(qa.data.size + 8, np.uint8))
    odd = big[8:].reshape(qa.data.shape)
    odd[...] = qa.data
    qa_odd = dataclasses.replace(qa, data=odd)
    assert _new_plan_count(qa_odd, qb) == 1
    dev["launches"].clear()
    mxrt.gemm_mx(qa_odd, qb)
    assert [r[1] for r in dev["launches"]] == ["gemm_mx_generic"]
    # scales 4 bytes off a 16-byte boundary: a new key (the decode path reads them with cp.async)
    bigs = cp.asarray(np.zeros(qa.scales.size + 4, np.uint8))
    s4 = bigs[4:].reshape(qa.scales.shape)
    s4[...] = qa.scales
    assert _new_plan_count(dataclasses.replace(qa, scales=s4), qb) == 1
    # the codes' dtype: int8 codes are a typed error, never the uint8 plan
    with pytest.raises(mxrt.DtypeError):
        mxrt.gemm_mx(dataclasses.replace(qa, data=qa.data.view(np.int8)), qb)
    # the codes array reshaped in place after the key was kept on the MXArray: validated again (typed error)
    data = qa.data
    data.shape = (2, data.shape[1] // 2)
    with pytest.raises(mxrt.ShapeError):
        mxrt.gemm_mx(qa, qb)
    data.shape = (1, data.shape[1] * 2)
    assert _new_plan_count(qa, qb) == 0
    # a tampered MXArray (dataclasses.replace) is a new object: validated, typed error
    with pytest.raises(mxrt.ShapeError):
        mxrt.gemm_mx(dataclasses.replace(qa, shape=(1, 128)), qb)


def test_plan_keys_env_route_device_table(dev, monkeypatch):
    qa, qb = _operands(1, 256, 256)
    mxrt.gemm_mx(qa, qb)
    dev["launches"].clear()
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_wgmma")  # the forced path is part of the key
    mxrt.gemm_mx(qa, qb)
    mxrt.gemm_mx(qa, qb)
    assert [r[1] for r in dev["launches"]] == ["gemm_mx_sm90"] * 2
    monkeypatch.setenv("MXRT_GEMM_PATH", "nope")
    with pytest.raises(mxrt.UnsupportedArchError, match="GEMM path 'nope'"):
        mxrt.gemm_mx(qa, qb)
    monkeypatch.delenv("MXRT_GEMM_PATH")
    dev["launches"].clear()
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")  # the plan stays, its launches go through CuPy's call
    mxrt.gemm_mx(qa, qb)
    monkeypatch.delenv("MXRT_LAUNCH")
    dev["device"] = 1  # another current device: not the prepared launch's
    mxrt.gemm_mx(qa, qb)
    dev["device"] = 0
    mxrt.gemm_mx(qa, qb)
    assert [(r[0], r[1]) for r in dev["launches"]] == [
        ("cupy", "gemm_mx_decode_sm90"),
        ("driver", "gemm_mx_decode_sm90"),
        ("driver", "gemm_mx_decode_sm90"),
    ]
    ((key, plan),) = ((k, p) for k, p in api_gemm._PLANS.items() if k[-1] is None)
    from mxrt.ops import gemm_decode

    gemm_decode.reload_table()  # a new tuned table may route or split differently: the plan is made again
    mxrt.gemm_mx(qa, qb)
    assert api_gemm._PLANS[key] is not plan and api_gemm._PLANS[key].generation > plan.generation


def test_planned_calls_keep_the_debug_hook(dev):
    qa, qb = _operands(1, 128, 256)
    mxrt.gemm_mx(qa, qb)
    with mxrt.runtime.debug(poison=0xA5, sync_after_launch=True) as dbg:
        out = mxrt.gemm_mx(qa, qb, split_k=2)
        out = mxrt.gemm_mx(qa, qb, split_k=2)  # planned: workspace and out still poisoned, launches recorded
    assert (np.asarray(out).view(np.uint8) == 0xA5).all()
    assert [d[1] for d in dbg.launches] == ["gemm_mx_decode_sm90", "gemm_mx_splitk_reduce"] * 2


# ---- quantize_mx ------------------------------------------------------------------------------------------


def _quant_calls(dev, monkeypatch, x, **kw):
    known = {x.data.ptr: "x"}
    routes, outs = [], []
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    api_quant.clear_plans()
    dev["launches"].clear()
    outs.append(mxrt.quantize_mx(x, **kw))
    routes.append(_normalised(dev["launches"], known))
    monkeypatch.delenv("MXRT_LAUNCH")
    for _ in range(3):
        dev["launches"].clear()
        outs.append(mxrt.quantize_mx(x, **kw))
        routes.append(_normalised(dev["launches"], known))
    return routes, outs


QCASES = [
    ((1, 4096), np.float32, {}),
    ((3, 5, 96), np.float16, {"fmt": "e2m1"}),
    ((7, 100), np.float32, {"fmt": "e5m2", "scale_mode": "floor"}),
    ((64, 256), np.float32, {"scale_layout": "aiter32x8"}),
    ((40, 128), np.float16, {"scale_layout": "deepgemm_ue8m0"}),
    ((128,), np.float32, {}),
]


@pytest.mark.parametrize(("shape", "dt", "kw"), QCASES, ids=[f"{c[0]}-{c[1].__name__}-{c[2]}" for c in QCASES])
def test_quantize_plan_launches_and_returns_what_the_unplanned_route_does(dev, monkeypatch, shape, dt, kw):
    x = _cp().asarray(np.random.default_rng(0).standard_normal(shape).astype(dt))
    routes, outs = _quant_calls(dev, monkeypatch, x, backend="gpu", **kw)
    assert routes[0] and all(r == routes[0] for r in routes[1:]), routes
    assert len(api_quant._QPLANS) == 1
    ref = outs[0]
    for q in outs[1:]:
        assert type(q.data).__module__ == "cupy" and type(q.scales).__module__ == "cupy"
        for f in ("fmt", "block_size", "axis", "shape", "scale_mode", "scale_layout"):
            assert getattr(q, f) == getattr(ref, f)
        for a, b in ((q.data, ref.data), (q.scales, ref.scales)):
            assert (a.shape, a.strides, a.dtype) == (b.shape, b.strides, b.dtype)


def test_quantize_plan_keys(dev, monkeypatch):
    cp = _cp()
    x = cp.asarray(np.ones((4, 256), np.float32))
    mxrt.quantize_mx(x)
    mxrt.quantize_mx(x, backend="gpu")  # auto and gpu mean the same for a device input
    assert len(api_quant._QPLANS) == 1
    big = cp.asarray(np.ones(4 * 256 + 1, np.float32))
    off = big[1:].reshape(4, 256)  # 4 bytes off: no vector loads; a key of its own
    routes, _ = _quant_calls(dev, monkeypatch, off)
    assert all(r == routes[0] for r in routes[1:])
    flags = routes[0][0][4][-1]
    assert flags != _quant_calls(dev, monkeypatch, x)[0][0][0][4][-1]  # (clears the plans first)
    assert len(api_quant._QPLANS) == 1
    mxrt.quantize_mx(x.astype(np.float16))
    mxrt.quantize_mx(x, "e5m2")
    mxrt.quantize_mx(x, block_size=32, scale_mode="floor")
    assert len(api_quant._QPLANS) == 4
    mxrt.quantize_mx(x, scale_mode=mxrt.ScaleMode.RCEIL)  # not a plain value: no plan, same result
    mxrt.quantize_mx(x, block_size=np.int64(32))
    assert len(api_quant._QPLANS) == 4
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.quantize_mx(cp.asarray(np.ones((256, 4), np.float32)).T)
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.quantize_mx(x, backend="numpy")
    with pytest.raises(mxrt.UnsupportedArchError, match="block_size"):
        mxrt.quantize_mx(x, block_size=16)
    with pytest.raises(mxrt.UnknownNameError):
        mxrt.quantize_mx(x, backend="GPU")


def test_quantize_plan_keeps_the_debug_hook(dev):
    x = _cp().asarray(np.ones((2, 64), np.float32))
    mxrt.quantize_mx(x)
    with mxrt.runtime.debug(poison=0x5A) as dbg:
        q = mxrt.quantize_mx(x)
    assert (np.asarray(q.data) == 0x5A).all() and (np.asarray(q.scales) == 0x5A).all()
    assert [d[1] for d in dbg.launches] == ["quantize_mx_rowwise"]


def test_wall_interleaved_round_robin_and_errors():
    from mxrt.bench.overhead import wall_interleaved

    order = []
    syncs = []

    def boom():
        raise RuntimeError("no kernel")

    cases = [("a", lambda: order.append("a")), ("bad", boom), ("b", lambda: order.append("b"))]
    walls, errors = wall_interleaved(cases, lambda: syncs.append(1), calls=2, reps=3)
    assert set(walls) == {"a", "b"} and all(w >= 0 for w in walls.values())
    assert list(errors) == ["bad"] and isinstance(errors["bad"], RuntimeError)
    assert order[6:] == ["a", "a", "b", "b"] * 3  # after 3 warm-up calls each: rounds alternate the cases


def test_copied_mxarray_does_not_reuse_its_originals_key(dev):
    import copy

    qa, qb = _operands(1, 128, 256)
    mxrt.gemm_mx(qa, qb)
    key = api_gemm._operand_key(qa)
    cp_a = copy.deepcopy(qa)  # new buffers (a stand-in array copies its memory), the original's cached key inside
    assert cp_a.data.data.ptr != qa.data.data.ptr
    assert api_gemm._operand_key(cp_a)[-5:] == key[-5:]  # scales' metadata re-read from the copy
    assert cp_a.__dict__[api_gemm._KEY_ATTR][9] == cp_a.data.data.ptr  # the key was made again for the copy


# ---- moe_gemm_mx (session 20): the same plans for the MoE decode GEMM ------------------------------------------


def _moe_inputs(t=1, e=8, top_k=2, bs=16, n=256, k=512, gate=True, weights=False, w_fmt="e4m3", seed=3):
    cp = _cp()
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    layout = [cp.asarray(a) for a in mxrt.moe_align_block_size(ids, bs, e, backend="numpy")]
    rows = t if gate else t * top_k
    qx = mxrt.quantize_mx(rng.standard_normal((rows, k), dtype=np.float32), backend="numpy")
    qw = mxrt.quantize_mx(rng.standard_normal((e, n, k), dtype=np.float32), w_fmt, axis=2, backend="numpy")
    x, w = (dataclasses.replace(q, data=cp.asarray(q.data), scales=cp.asarray(q.scales)) for q in (qx, qw))
    kw = dict(top_k=top_k, block_size=bs, a_div=top_k if gate else 1)
    if weights:
        kw["topk_weights"] = cp.asarray(rng.random((t, top_k), dtype=np.float32))
    return (x, w, *layout), kw


def _moe_known(args, kw):
    x, w, ids, experts, ntpp = args
    names = _known(x, w)
    names.update({ids.data.ptr: "ids", experts.data.ptr: "experts", ntpp.data.ptr: "ntpp"})
    if "topk_weights" in kw:
        names[kw["topk_weights"].data.ptr] = "topk_weights"
    return names


@pytest.mark.parametrize(
    "case",
    [{}, {"weights": True, "gate": False}, {"w_fmt": "e2m1", "t": 5, "bs": 64}, {"e": 64, "top_k": 8, "t": 1}],
    ids=["gate_up", "down-weights", "e2m1-bs64", "T1-E64"],
)
def test_moe_plan_launches_and_returns_what_the_unplanned_route_does(dev, monkeypatch, case):
    """The planned call packs the same kernel, grid, block, shared memory and parameters as the unplanned route
    (CuPy's call and the driver route), zeroes a fresh ``out`` of the same shape and dtype, and returns it."""
    args, kw = _moe_inputs(**case)
    known = _moe_known(args, kw)
    routes, outs = [], []
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    api_moe.clear_plans()
    dev["launches"].clear()
    outs.append(mxrt.moe_gemm_mx(*args, **kw))
    routes.append(_normalised(dev["launches"], known))
    monkeypatch.delenv("MXRT_LAUNCH")
    api_moe.clear_plans()
    for _ in range(3):
        dev["launches"].clear()
        outs.append(mxrt.moe_gemm_mx(*args, **kw))
        routes.append(_normalised(dev["launches"], known))
    assert len(api_moe._PLANS) == 1
    assert routes[0] and all(r == routes[0] for r in routes[1:]), routes
    assert [r[0] for r in dev["launches"]] == ["driver"]
    for o in outs:
        assert type(o) is type(outs[0]) and o.shape == outs[0].shape and o.dtype == outs[0].dtype == np.uint16
    assert len({o.data.ptr for o in outs}) == len(outs)  # a fresh result per call
    ((_, name, _, _, _, vals),) = dev["launches"]
    assert name == "gemm_mx_decode_sm90_moe" and vals[4] == outs[-1].data.ptr


def test_moe_plan_zeroes_its_output(dev):
    """A planned call's ``out`` starts at zero (cudaMemsetAsync), as the unplanned route's ``out.fill(0)``."""
    args, kw = _moe_inputs()
    mxrt.moe_gemm_mx(*args, **kw)
    cp = _cp()
    junk = cp.asarray(np.full((16, 256), 0x7F7F, np.uint16))  # a pool block that held data
    del junk
    out = mxrt.moe_gemm_mx(*args, **kw)
    assert not np.asarray(out).any()


def test_moe_plan_keys(dev, monkeypatch):
    """A change of anything the plan was made from never reuses it: the layout arrays' shapes and dtypes, the
    routing weights, the scalars, the out dtype, the build table, an ``out`` buffer (its own key; a strided one none),
    a copied operand; a new pointer of the same kind reuses it."""
    args, kw = _moe_inputs()
    x, w, ids, experts, ntpp = args
    mxrt.moe_gemm_mx(*args, **kw)
    assert len(api_moe._PLANS) == 1
    cp = _cp()
    mxrt.moe_gemm_mx(x, w, cp.asarray(np.asarray(ids)), experts, ntpp, **kw)  # same kind: the plan
    assert len(api_moe._PLANS) == 1
    mxrt.moe_gemm_mx(*args, **kw, out_dtype="float16")
    assert len(api_moe._PLANS) == 2
    mxrt.moe_gemm_mx(*args, **kw, topk_weights=cp.asarray(np.ones(x.shape[0] * 2, np.float32)))
    assert len(api_moe._PLANS) == 3
    monkeypatch.setitem(moe_ops.MOE_DEFAULT, 2, ((2, 3, 1), (2, 3, 1)))  # another build: another key
    mxrt.moe_gemm_mx(*args, **kw)
    assert len(api_moe._PLANS) == 4
    out = cp.asarray(np.full((x.shape[0] * 2, 256), 0x7F7F, np.uint16))
    assert mxrt.moe_gemm_mx(*args, **kw, out=out) is out  # out given: its own key, written in place
    assert len(api_moe._PLANS) == 5
    out[...] = 0x7F7F
    dev["launches"].clear()
    assert mxrt.moe_gemm_mx(*args, **kw, out=out) is out  # planned: zeroed, then the kernel's out
    ((_, _, _, _, _, vals),) = dev["launches"]
    assert vals[4] == out.data.ptr and not np.asarray(out).any()
    with pytest.raises(LayoutError, match="'out' has strides"):  # strided: no plan, validation's typed error
        mxrt.moe_gemm_mx(*args, **kw, out=cp.zeros((x.shape[0] * 2, 512), np.uint16)[:, :256])
    assert len(api_moe._PLANS) == 5
    y = dataclasses.replace(x, data=x.data.copy(), scales=x.scales.copy())
    dev["launches"].clear()
    mxrt.moe_gemm_mx(y, w, ids, experts, ntpp, **kw)  # a copy's own key (its pointers) is the same kind
    ((_, _, _, _, _, vals),) = dev["launches"]
    assert vals[1] == y.data.data.ptr
