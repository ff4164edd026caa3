"""MoE decode on the GPU (mxrt.moe_gemm_mx -> gemm_mx_decode_sm90_moe): the device result against the numpy twin
and an independent per-slot float64 loop, on layouts from mxrt.moe_align_block_size (device-built too), gate/up
(a_div = top_k) and down (a_div = 1), topk weights, expert parallelism (-1 experts), format pairs, tails,
several block sizes (token chunks), poisoned out, CUDA-graph capture with new routing between replays.

Marker ``gpu``: skips without cupy, a device, or an sm_90a target.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mxrt

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import device_available, get_arch  # noqa: E402

if not device_available() or get_arch().target != "sm_90a":
    pytest.skip("the MoE decode kernel runs on sm_90a", allow_module_level=True)

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=0xFF, sync_after_launch=True) as session:
        yield session


def routing(rng, t, e, top_k, block_size, emap=None):
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    w = rng.random((t, top_k)).astype(np.float32)
    return ids, w, mxrt.moe_align_block_size(ids, block_size, e, emap, backend="numpy")


def loop_ref(x, w, ids, topk_w, a_div, emap=None):
    """Independent float64 per-slot loop on the unquantized-then-dequantized operands."""
    dx, dw = mxrt.dequantize_mx(x).astype(np.float64), mxrt.dequantize_mx(w).astype(np.float64)
    flat = ids.reshape(-1)
    out = np.zeros((flat.size, dw.shape[1]))
    for i, ge in enumerate(flat):
        e = ge if emap is None else emap[ge]
        if e < 0:
            continue
        out[i] = dx[i // a_div] @ dw[e].T * (1.0 if topk_w is None else topk_w.reshape(-1)[i])
    return out


def dev(q):
    return mxrt.MXArray(cupy.asarray(q.data), cupy.asarray(q.scales), q.fmt, q.block_size, q.axis, q.shape,
                        q.scale_mode)  # fmt: skip


def host(d, out_dtype):
    h = d.get()
    return (h.view(BF16) if out_dtype == "bfloat16" else h).astype(np.float64)


def check(got, want, out_dtype):
    assert np.isfinite(got).all()
    if out_dtype == "float32":
        assert np.linalg.norm(got - want) <= 1e-5 * max(np.linalg.norm(want), 1e-30)
    elif np.abs(want).max(initial=0) > 0:
        assert mxrt.calc_diff(got, want) <= 1e-5


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
@pytest.mark.parametrize("t,e,top_k,block_size", [(1, 8, 2, 16), (3, 64, 8, 16), (17, 16, 4, 64), (5, 4, 4, 128),
                                                  (64, 32, 8, 32), (2, 1, 1, 1)])  # fmt: skip
def test_against_the_twin_and_a_loop(t, e, top_k, block_size, gemm, out_dtype):
    rng = np.random.default_rng(t * 100 + e)
    n, k = (2 * 144, 256) if gemm == "gate_up" else (136, 384)
    ids, topk_w, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, block_size)
    a_div = top_k if gemm == "gate_up" else 1
    x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), axis=2)
    kw = dict(top_k=top_k, block_size=block_size, a_div=a_div, out_dtype=out_dtype)
    tw = topk_w if gemm == "down" else None
    got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                           topk_weights=None if tw is None else cupy.asarray(tw), **kw)  # fmt: skip
    twin = mxrt.moe_gemm_mx(x, w, sorted_ids, eids, ntpp, topk_weights=tw, backend="numpy", **kw)
    h = host(got, out_dtype)
    check(h, twin.astype(np.float64), out_dtype)
    check(h, loop_ref(x, w, ids, tw, a_div), out_dtype)


@pytest.mark.parametrize(
    "build",
    [(4, 3, 2), (2, 3, 4), (4, 2, 4), (4, 3, 4), (8, 2, 2), (3, 2, 4), (1, 3, 4), (2, 2, 4), (2, 2, 2)],
    ids=lambda b: "kw{}-st{}-rt{}".format(*b),
)
@pytest.mark.parametrize("wf", ["e4m3", "e2m1"])
def test_row_tiles_per_cta(monkeypatch, build, wf):
    """Builds with 16 * RT weight rows per CTA (mxrt.ops.moe_gemm.moe_build): n not a multiple of 16 * RT (the
    last tile's rows past the expert's n belong to the next expert or lie past E * N: computed, never stored), every
    block size's MT, gate/up and down, against the loop."""
    from mxrt.ops import moe_gemm as moe_ops

    for table in (moe_ops.MOE_DEFAULT, moe_ops.MOE_DEFAULT_E2M1, moe_ops.MOE_FEW_E2M1, moe_ops.MOE_CHUNKED_FP8_SHORT_K):
        for mt in table:
            kw, st, rt = build
            b = (kw, st, rt if rt * mt <= 16 else 1)
            monkeypatch.setitem(table, mt, b if table is moe_ops.MOE_CHUNKED_FP8_SHORT_K else (b, b))
    rng = np.random.default_rng(31)
    for t, e, top_k, bs, gemm in [(1, 64, 8, 16, "down"), (9, 16, 4, 16, "gate_up"), (5, 8, 2, 64, "down"),
                                  (3, 4, 4, 1, "gate_up")]:  # fmt: skip
        n, k = (2 * 152, 256) if gemm == "gate_up" else (200, 384)
        ids, topk_w, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
        a_div = top_k if gemm == "gate_up" else 1
        x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
        w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), wf, axis=2)
        got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                               top_k=top_k, block_size=bs, a_div=a_div, topk_weights=cupy.asarray(topk_w))  # fmt: skip
        check(host(got, "bfloat16"), loop_ref(x, w, ids, topk_w, a_div), "bfloat16")


def exact64(q):
    """The dequantised values of ``q`` in float64 from its codes at unit scale and 2^(s - 127) per block (NaN for
    scale 255): exact for every E8M0 scale, where float32 dequantisation overflows or flushes."""
    unit = mxrt.MXArray(q.data, np.full_like(q.scales, 127), q.fmt, 32, q.axis, q.shape, q.scale_mode)
    s = q.scales.astype(np.float64)
    f = np.where(s == 255, np.nan, 2.0 ** (s - 127))
    return mxrt.dequantize_mx(unit).astype(np.float64) * np.repeat(f, 32, axis=-1)[..., : q.shape[-1]]


@pytest.mark.parametrize("wf", ["e4m3", "e2m1"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_extreme_and_nan_scales(wf, gemm):
    """Extreme E8M0 pairs (weight 254 / token 0, 0 / 254, 1 / 253: true factors of 1) in K groups 1 and 2 (k 384),
    and a NaN weight scale: the wide promotion on every weight format, NaN exactly where the float64 loop has it."""
    rng = np.random.default_rng(47)
    t, e, top_k, bs, n, k = 5, 8, 4, 16, 136, 384
    ids, topk_w, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
    a_div = top_k if gemm == "gate_up" else 1
    x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), wf, axis=2)
    xs, ws = x.scales.copy(), w.scales.copy()
    for blk, sw, sx in ((5, 254, 0), (6, 0, 254), (9, 1, 253)):
        ws[:, :, blk], xs[:, blk] = sw, sx
    e0 = int(ids[0, 0])
    ws[e0, 7, 10] = 255  # NaN: expert e0's row 7, block 10
    x = mxrt.MXArray(x.data, xs, x.fmt, 32, 1, x.shape, x.scale_mode)
    w = mxrt.MXArray(w.data, ws, w.fmt, 32, 2, w.shape, w.scale_mode)
    got = host(mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                                top_k=top_k, block_size=bs, a_div=a_div, topk_weights=cupy.asarray(topk_w)),
               "bfloat16")  # fmt: skip
    dx, dw = exact64(x), exact64(w)
    flat = ids.reshape(-1)
    want = np.stack([dx[i // a_div] @ dw[ge].T * topk_w.reshape(-1)[i] for i, ge in enumerate(flat)])
    nan = np.isnan(want)
    assert nan.any() and (np.isnan(got) == nan).all()
    check(got[~nan], want[~nan], "bfloat16")


@pytest.mark.parametrize("wf", ["e4m3", "e2m1"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_one_row_or_token_leaves_the_window(wf, gemm):
    """Stages fast for every row and slot but one: weight rows 5 and 70 of every expert carry a scale byte of 250 /
    3 over zero codes, one activation row one of 60 (exact, but only the wide promotion takes them). The lanes
    holding them and the others must take one promotion together (a per-lane choice ran mma.sync divergently)."""
    rng = np.random.default_rng(59)
    t, e, top_k, bs, n, k = 5, 4, 2, 16, 136, 512
    ids, _, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
    a_div = top_k if gemm == "gate_up" else 1
    x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), wf, axis=2)
    xs, ws, wc = x.scales.copy(), w.scales.copy(), w.data.copy()
    bw = 16 if wf == "e2m1" else 32  # code bytes per block
    for row, blk, s in ((5, 5, 250), (70, 13, 3)):
        ws[:, row, blk] = s
        wc[:, row, blk * bw : (blk + 1) * bw] = 0
    xs[1, 9] = 60
    x = mxrt.MXArray(x.data, xs, x.fmt, 32, 1, x.shape, x.scale_mode)
    w = mxrt.MXArray(wc, ws, w.fmt, 32, 2, w.shape, w.scale_mode)
    got = host(mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                                top_k=top_k, block_size=bs, a_div=a_div), "bfloat16")  # fmt: skip
    dx, dw = exact64(x), exact64(w)
    want = np.stack([dx[i // a_div] @ dw[ge].T for i, ge in enumerate(ids.reshape(-1))])
    check(got, want, "bfloat16")


@pytest.mark.parametrize("wf", ["e4m3", "e2m1"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_token_scales_outside_the_f16_window(wf, gemm):
    """e2m1 weights scale the e4m3 tokens in f16 before the HMMAs where every token scale byte of a stage lies in [113,
    134]: activation row 1 carries ~2^24 times its values in the first half of K, row 0 ~2^-30 times in the second, so
    their stages take the two-factor promotion (e4m3 weights: a control); each slot's row against the float64 loop."""
    rng = np.random.default_rng(61)
    t, e, top_k, bs, n, k = 5, 4, 2, 16, 136, 1024
    ids, _, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
    a_div = top_k if gemm == "gate_up" else 1
    xf = rng.standard_normal((t * top_k // a_div, k)).astype(np.float32)
    xf[1, : k // 2] *= 2.0**24
    xf[0, k // 2 :] *= 2.0**-30
    x = mxrt.quantize_mx(xf)
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), wf, axis=2)
    assert x.scales.max() > 134 and x.scales.min() < 113
    got = host(mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                                top_k=top_k, block_size=bs, a_div=a_div), "bfloat16")  # fmt: skip
    dx, dw = exact64(x), exact64(w)
    want = np.stack([dx[i // a_div] @ dw[ge].T for i, ge in enumerate(ids.reshape(-1))])
    assert np.isfinite(got).all()
    for i in range(want.shape[0]):
        assert mxrt.calc_diff(got[i], want[i]) <= 1e-5, i


@pytest.mark.parametrize("wf", ["e4m3", "e2m1"])
@pytest.mark.parametrize("t,e,hot", [(40, 4, 38), (40, 16, 30)], ids=["grid-chunks", "chunk-loop"])
def test_one_expert_holds_most_slots(wf, t, e, hot):
    """``hot`` of ``t`` slots routed to expert 0, blocks of 64: the CTA's MT follows the mean slots per expert
    (mxrt.ops.moe_gemm.plan_build), so expert 0's block has two live chunks: grid chunks with few live blocks, the
    chunk loop (one CTA running them in turn) with more."""
    from mxrt.ops import moe_gemm as moe_ops

    rng = np.random.default_rng(53)
    bs, n, k = 64, 72, 256
    ids = np.zeros((t, 1), np.int32)
    ids[hot:, 0] = np.arange(1, t - hot + 1) % e
    sorted_ids, eids, ntpp = mxrt.moe_align_block_size(ids, bs, e, backend="numpy")
    mt, chunks, loop, _ = moe_ops.plan_build(bs, t, e, wf, k, eids.size)
    assert 8 * mt < hot < 16 * mt and chunks > 1 and loop == (e == 16)
    x = mxrt.quantize_mx(rng.standard_normal((t, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), wf, axis=2)
    got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                           top_k=1, block_size=bs, a_div=1)  # fmt: skip
    check(host(got, "bfloat16"), loop_ref(x, w, ids, None, 1), "bfloat16")


def test_call_plans():
    """Plain calls of one signature (the second and later run mxrt.api.moe_gemm's plan: a memset and one prepared
    launch) with new routing and new activations each time, and routing weights, against the loop; a call with
    another out dtype makes its own plan, and so do calls into the caller's ``out`` (poisoned between calls)."""
    from mxrt.api import moe_gemm as api_moe

    api_moe.clear_plans()
    rng = np.random.default_rng(41)
    t, e, top_k, bs, n, k = 4, 16, 4, 16, 200, 256
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), axis=2)
    wd = dev(w)
    for i in range(4):
        ids, topk_w, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
        # moe_align_block_size's capacity depends only on T, top_k, E and the block: one key for every routing
        x = mxrt.quantize_mx(rng.standard_normal((t * top_k, k)).astype(np.float32))
        od = "float16" if i == 3 else "bfloat16"
        got = mxrt.moe_gemm_mx(dev(x), wd, cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                               top_k=top_k, block_size=bs, a_div=1, topk_weights=cupy.asarray(topk_w),
                               out_dtype=od)  # fmt: skip
        check(host(got, od), loop_ref(x, w, ids, topk_w, 1), od)
    assert len(api_moe._PLANS) == 2
    out = cupy.full((t * top_k, n), 0x7F7F, cupy.uint16)  # the caller's out (vLLM passes its own): its own plan
    for _ in range(3):
        ids, topk_w, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs)
        x = mxrt.quantize_mx(rng.standard_normal((t * top_k, k)).astype(np.float32))
        layout = (cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp))
        got = mxrt.moe_gemm_mx(dev(x), wd, *layout, top_k=top_k, block_size=bs, a_div=1,
                               topk_weights=cupy.asarray(topk_w), out=out)  # fmt: skip
        assert got is out
        check(host(out, "bfloat16"), loop_ref(x, w, ids, topk_w, 1), "bfloat16")
        out.fill(0x7F7F)  # the next call must zero what it does not write
    assert len(api_moe._PLANS) == 3


def test_call_plans_torch(monkeypatch):
    """The same with CUDA torch tensors (MXArray fields and layout arrays): torch in, torch out (bfloat16), the
    second and later calls planned (outside the poisoning session, where torch plans run), each against the loop."""
    torch = pytest.importorskip("torch")
    from mxrt.api import moe_gemm as api_moe
    from mxrt.ops import moe_gemm as moe_ops
    from mxrt.runtime import alloc

    api_moe.clear_plans()
    planned = []
    run = moe_ops.PreparedMoe.__call__
    monkeypatch.setattr(moe_ops.PreparedMoe, "__call__", lambda self, *a: (planned.append(a), run(self, *a))[1])
    rng = np.random.default_rng(43)
    t, e, top_k, bs, n, k = 3, 8, 2, 16, 136, 256

    def tq(q):
        return mxrt.MXArray(torch.from_dlpack(cupy.asarray(q.data)), torch.from_dlpack(cupy.asarray(q.scales)), q.fmt,
                            q.block_size, q.axis, q.shape, q.scale_mode)  # fmt: skip

    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), axis=2)
    wt = tq(w)
    token = alloc._SESSION.set(None)  # leave the autouse poisoning session: torch plans step aside inside one
    try:
        results = []
        for _ in range(3):
            ids, _, layout = routing(rng, t, e, top_k, bs)
            x = mxrt.quantize_mx(rng.standard_normal((t, k)).astype(np.float32))
            got = mxrt.moe_gemm_mx(tq(x), wt, *(torch.from_dlpack(cupy.asarray(a)) for a in layout), top_k=top_k,
                                   block_size=bs)  # fmt: skip
            results.append((got, x, ids))
        torch.cuda.synchronize()
    finally:
        alloc._SESSION.reset(token)
    assert len(planned) == 2 and len(api_moe._PLANS) == 1
    for got, x, ids in results:
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16 and got.shape == (t * top_k, n)
        check(got.float().cpu().numpy().astype(np.float64), loop_ref(x, w, ids, None, top_k), "bfloat16")


def test_live_blocks_bound():
    """The grid covers min(len(expert_ids), numel) blocks (mxrt.problems.moe_gemm): every block of a
    moe_align_block_size layout with a slot lies below it (T = 1 of 64 experts: 8 of 61 blocks, every slot against
    the loop), and a slot placed past it (behind all-padding blocks) is not read, as in the twin."""
    rng = np.random.default_rng(21)
    n, k = 136, 256
    w = mxrt.quantize_mx(rng.standard_normal((64, n, k)).astype(np.float32), axis=2)
    x = mxrt.quantize_mx(rng.standard_normal((1, k)).astype(np.float32))
    ids, _, (sorted_ids, eids, ntpp) = routing(rng, 1, 64, 8, 16)
    assert eids.size == 61 and int(ntpp[0]) == 8 * 16
    got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp),
                           top_k=8, block_size=16)  # fmt: skip
    check(host(got, "bfloat16"), loop_ref(x, w, ids, None, 8), "bfloat16")
    numel = 8  # a_div 1: x has 8 rows; slot 3 sits in block 8 behind 8 blocks of padding
    x8 = mxrt.quantize_mx(rng.standard_normal((numel, k)).astype(np.float32))
    bad = np.concatenate([np.full(8 * 16, numel), [3], np.full(15, numel)]).astype(np.int32)
    args = (np.zeros(9, np.int32), np.array([9 * 16], np.int32))
    kw = dict(top_k=8, block_size=16, a_div=1)
    got = mxrt.moe_gemm_mx(dev(x8), dev(w), cupy.asarray(bad), *(cupy.asarray(a) for a in args), **kw)
    twin = mxrt.moe_gemm_mx(x8, w, bad, *args, backend="numpy", **kw)
    assert not twin.astype(np.float32).any() and not host(got, "bfloat16").any()


@pytest.mark.parametrize("pair", [("e4m3", "e2m1"), ("e2m1", "e2m1"), ("e5m2", "e4m3")], ids="x".join)
def test_format_pairs_and_expert_parallel(pair):
    rng = np.random.default_rng(7)
    t, e, top_k, bs = 6, 16, 4, 16
    emap = np.where(np.arange(e) % 2 == 0, np.arange(e) // 2, -1).astype(np.int32)  # half the experts local
    ids, _, (sorted_ids, eids, ntpp) = routing(rng, t, e, top_k, bs, emap)
    x = mxrt.quantize_mx(rng.standard_normal((t, 512)).astype(np.float32), pair[0])
    w = mxrt.quantize_mx(rng.standard_normal((e // 2, 200, 512)).astype(np.float32), pair[1], axis=2)
    out_dtype = "float32" if pair == ("e2m1", "e2m1") else "bfloat16"
    kw = dict(top_k=top_k, block_size=bs, out_dtype=out_dtype)
    got = mxrt.moe_gemm_mx(dev(x), dev(w), cupy.asarray(sorted_ids), cupy.asarray(eids), cupy.asarray(ntpp), **kw)
    h = host(got, out_dtype)
    check(h, loop_ref(x, w, ids, None, top_k, emap), out_dtype)
    flat = ids.reshape(-1)
    assert (h[emap[flat] < 0] == 0).all()  # slots of non-local experts stay zero


def test_device_built_layout_and_graph_capture():
    """moe_align_block_size on the device feeds the GEMM; both captured once, replayed with new routing."""
    rng = np.random.default_rng(11)
    t, e, top_k, bs, n, k = 8, 32, 8, 16, 256, 512
    x = dev(mxrt.quantize_mx(rng.standard_normal((t, k)).astype(np.float32)))
    wq = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), axis=2)
    w = dev(wq)
    ids_d = cupy.asarray(np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32))
    with mxrt.runtime.debug():
        out = cupy.empty((t * top_k, n), cupy.uint16)

        def step():
            s, b, p = mxrt.moe_align_block_size(ids_d, bs, e)
            mxrt.moe_gemm_mx(x, w, s, b, p, top_k=top_k, block_size=bs, out=out)

        step()
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            step()
            graph = stream.end_capture()
        xh = mxrt.MXArray(x.data.get(), x.scales.get(), x.fmt, 32, 1, x.shape, x.scale_mode)
        for seed in (1, 2):
            new = np.stack([np.random.default_rng(seed + r).choice(e, top_k, replace=False) for r in range(t)])
            ids_d[...] = cupy.asarray(new.astype(np.int32))
            out.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            check(host(out, "bfloat16"), loop_ref(xh, wq, new, None, top_k), "bfloat16")


def test_weights_near_2gb():
    """A 2.08 GB MXFP8 weight (31 experts x 4096 x 16384, just inside mxrt's 2^31-1 element limit; past it every op
    raises ShapeError before allocating, tests/test_decode_guards.py): slots routed to the last experts read bytes
    ~2^31 from the base; checked slot by slot against float64 math of the dequantized expert."""
    e, n, k, t, top_k = 31, 4096, 16384, 2, 2
    rng = cupy.random.default_rng(5)
    codes = rng.integers(0, 2**62, e * n * k // 8, dtype=cupy.int64).view(cupy.uint8).reshape(e, n, k)
    codes &= 0xBF  # exponent below 15: no NaN codes
    scales = rng.integers(118, 126, (e, n, k // 32), dtype=cupy.int32).astype(cupy.uint8)
    assert codes.nbytes > 2 * 10**9
    w = mxrt.MXArray(codes, scales, "e4m3", 32, 2, (e, n, k), "rceil")
    xh = mxrt.quantize_mx(np.random.default_rng(6).standard_normal((t, k)).astype(np.float32))
    ids = np.array([[30, 0], [29, 21]], np.int32)
    s, b, p = mxrt.moe_align_block_size(ids, 16, e, backend="numpy")
    got = host(mxrt.moe_gemm_mx(dev(xh), w, cupy.asarray(s), cupy.asarray(b), cupy.asarray(p), top_k=top_k,
                                block_size=16), "bfloat16")  # fmt: skip
    dx = mxrt.dequantize_mx(xh).astype(np.float64)
    for slot, ex in enumerate(ids.reshape(-1)):
        we = mxrt.MXArray(codes[ex].get(), scales[ex].get(), "e4m3", 32, 1, (n, k), "rceil")
        want = dx[slot // top_k] @ mxrt.dequantize_mx(we).astype(np.float64).T
        assert mxrt.calc_diff(got[slot], want) <= 1e-5, slot


def test_aiter_moe_sorting_layout_on_the_device():
    """layout="aiter" with device arrays: the id conversion runs on the device; same rows as the vLLM layout."""
    rng = np.random.default_rng(21)
    t, e, top_k, bs, k, n = 9, 16, 4, 16, 256, 96
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    tw = rng.random((t, top_k)).astype(np.float32)
    x = mxrt.quantize_mx(rng.standard_normal((t, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e, n, k)).astype(np.float32), axis=2)
    s_ids, _, s_exp, nvalid = mxrt.moe_sorting(ids, tw, e, bs)
    c = cupy.asarray
    got = mxrt.moe_gemm_mx(dev(x), dev(w), c(s_ids), c(s_exp), c(nvalid), top_k=top_k, block_size=bs,
                           topk_weights=c(tw), layout="aiter")  # fmt: skip
    check(host(got, "bfloat16"), loop_ref(x, w, ids, tw, top_k), "bfloat16")
