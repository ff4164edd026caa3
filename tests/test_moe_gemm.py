"""``mxrt.moe_gemm_mx`` (MoE decode GEMM on vLLM's ``moe_align_block_size`` layout): the numpy side.

The reference here is an independent per-slot loop in float64 over the layout exactly as vLLM's fused-MoE kernel
walks it (block by block, slot by slot), not the twin's per-expert matmuls. MX products and their sums over the
small K used here are exact in float64, so the twin's rounded result must equal the loop's bit for bit.
"""

from __future__ import annotations

import dataclasses
import itertools

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.errors import DtypeError, LayoutError, ShapeError, UnknownNameError, UnsupportedArchError
from mxrt.problems import MoeGemmProblem, moe_gemm_problem
from mxrt.reference.moe_gemm import moe_gemm_f64

OP = "moe_gemm_mx"
PAIRS = [("e4m3", "e4m3"), ("e4m3", "e2m1"), ("e2m1", "e2m1")]
OUT_DTYPES = ("bfloat16", "float16", "float32")
NP_DTYPES = {"bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16), "float32": np.float32}
GRID = list(itertools.product((1, 8, 64), (1, 2, 8), (1, 3, 17), (1, 4, 16, 64)))  # E, top_k, T, block_size


def _topk_ids(rng: np.random.Generator, t: int, e: int, top_k: int) -> np.ndarray:
    """Random top-k routing: distinct experts per token where E allows it (else with repeats)."""
    if top_k <= e:
        return np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32).reshape(t, top_k)
    return rng.integers(0, e, (t, top_k), dtype=np.int32)


def _loop_ref(x64, w64, ids, experts, ntpp, block_size, numel, a_div, tw) -> tuple[np.ndarray, np.ndarray]:
    """(out float64 [numel, n], written bool [numel]) by walking the layout block by block, slot by slot."""
    n = w64.shape[1]
    out = np.zeros((numel, n), np.float64)
    written = np.zeros(numel, bool)
    cap = len(ids)
    for b, e in enumerate(experts.tolist()):
        # at most numel live blocks (mxrt.problems.moe_gemm; vLLM's small-batch EM bound, taken everywhere)
        if b >= numel or b * block_size >= int(ntpp[0]) or not 0 <= e < w64.shape[0]:
            continue
        for r in range(block_size):
            i = b * block_size + r
            if i >= cap:
                break
            slot = int(ids[i])
            if not 0 <= slot < numel:
                continue
            row = np.array([np.dot(w64[e, j], x64[slot // a_div]) for j in range(n)])
            out[slot] = row if tw is None else row * float(np.ravel(tw)[slot])
            written[slot] = True
    return out, written


def _quantized(rng, rows, e, n, k, pair):
    fx, fw = pair
    x = (rng.standard_normal((rows, k)) * 2).astype(np.float32)
    w = rng.standard_normal((e, n, k)).astype(np.float32)
    return mxrt.quantize_mx(x, fx), mxrt.quantize_mx(w, fw, axis=2)


def _check(qx, qw, layout, *, top_k, block_size, a_div, tw, out_dtype, written_want=None):
    ids, experts, ntpp = layout
    ad = top_k if a_div is None else a_div
    numel = qx.shape[0] * ad
    x64 = mxrt.dequantize_mx(qx, np.float64)
    w64 = mxrt.dequantize_mx(qw, np.float64)
    ref, written = _loop_ref(x64, w64, ids, experts, ntpp, block_size, numel, ad, tw)
    kw = dict(top_k=top_k, block_size=block_size, topk_weights=tw, a_div=a_div)
    p = moe_gemm_problem(qx, qw, ids, experts, ntpp, **kw, out_dtype=out_dtype)
    np.testing.assert_array_equal(moe_gemm_f64(p), ref)
    got = mxrt.moe_gemm_mx(qx, qw, ids, experts, ntpp, **kw, out_dtype=out_dtype)
    dt = NP_DTYPES[out_dtype]
    assert got.dtype == dt and got.shape == (numel, qw.shape[1])
    np.testing.assert_array_equal(got.view(np.uint8), ref.astype(dt).view(np.uint8))
    assert not got[~written].astype(np.float32).any()  # slots never reached stay 0
    if written_want is not None:
        np.testing.assert_array_equal(written, written_want)
    return got, written


@pytest.mark.parametrize(
    ("e", "top_k", "t", "block_size"), GRID, ids=[f"E{a}-top{b}-T{c}-bs{d}" for a, b, c, d in GRID]
)
def test_matches_per_slot_loop(e: int, top_k: int, t: int, block_size: int) -> None:
    i = GRID.index((e, top_k, t, block_size))
    rng = np.random.default_rng(i)
    pair, out_dtype = PAIRS[i % 3], OUT_DTYPES[(i // 3) % 3]
    topk_ids = _topk_ids(rng, t, e, top_k)
    layout = mxrt.moe_align_block_size(topk_ids, block_size, e)
    n, k = 24, 64
    tw = rng.random((t, top_k), dtype=np.float32)
    qx, qw = _quantized(rng, t, e, n, k, pair)  # gate/up: x [T, k], a_div = top_k
    qx2, _ = _quantized(rng, t * top_k, 1, n, k, pair)  # down: x [T * top_k, k], a_div = 1
    every = np.ones(t * top_k, bool)  # without an expert map, every routed slot is written
    for weights in (None, tw):
        _check(qx, qw, layout, top_k=top_k, block_size=block_size, a_div=None, tw=weights, out_dtype=out_dtype,
               written_want=every)  # fmt: skip
        _check(qx2, qw, layout, top_k=top_k, block_size=block_size, a_div=1, tw=weights, out_dtype=out_dtype,
               written_want=every)  # fmt: skip


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("pair", PAIRS, ids=["x".join(p) for p in PAIRS])
def test_every_format_pair_and_out_dtype(pair: tuple[str, str], out_dtype: str) -> None:
    rng = np.random.default_rng(7)
    t, e, top_k, bs = 5, 8, 2, 4
    layout = mxrt.moe_align_block_size(_topk_ids(rng, t, e, top_k), bs, e)
    qx, qw = _quantized(rng, t, e, 40, 96, pair)
    qx2, _ = _quantized(rng, t * top_k, 1, 40, 96, pair)
    tw = rng.random(t * top_k, dtype=np.float32)  # flat weights
    _check(qx, qw, layout, top_k=top_k, block_size=bs, a_div=None, tw=tw, out_dtype=out_dtype)
    _check(qx2, qw, layout, top_k=top_k, block_size=bs, a_div=1, tw=None, out_dtype=out_dtype)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_expert_map_non_local_slots_stay_zero(block_size: int) -> None:
    """Expert parallelism: global experts mapped to -1 are not local; their blocks are skipped, their rows 0."""
    rng = np.random.default_rng(3)
    t, e_global, top_k = 17, 8, 2
    topk_ids = _topk_ids(rng, t, e_global, top_k)
    emap = np.array([-1, 0, -1, 1, 2, -1, 3, -1], np.int32)  # 4 local experts
    layout = mxrt.moe_align_block_size(topk_ids, block_size, e_global, expert_map=emap)
    qx, qw = _quantized(rng, t, 4, 16, 64, ("e4m3", "e4m3"))
    local = emap[topk_ids.ravel()] >= 0
    assert local.any() and not local.all()
    tw = rng.random((t, top_k), dtype=np.float32)
    got, _ = _check(qx, qw, layout, top_k=top_k, block_size=block_size, a_div=None, tw=tw, out_dtype="float32",
                    written_want=local)  # fmt: skip
    assert not got[~local].any() and got[local].any()


def test_layout_edge_cases() -> None:
    """Sentinel padding, blocks past num_tokens_post_padded, a cap that is not a multiple of block_size, blocks past
    the live blocks' bound numel."""
    rng = np.random.default_rng(5)
    qx, qw = _quantized(rng, 3, 2, 8, 32, ("e4m3", "e4m3"))
    numel = 6  # T = 3, top_k = a_div = 2
    ids = np.array([0, 5, 6, 6, 2, 3, 6, 1, 4], np.int32)  # cap 9, blocks of 4: [0 5 6 6] [2 3 6 1] [4]
    experts = np.array([1, 0, 1], np.int32)
    for ntpp, want in ((9, [0, 1, 2, 3, 4, 5]), (8, [0, 1, 2, 3, 5]), (5, [0, 1, 2, 3, 5]), (4, [0, 5]), (0, [])):
        written = np.isin(np.arange(numel), want)
        layout = (ids, experts, np.array([ntpp], np.int32))
        _check(qx, qw, layout, top_k=2, block_size=4, a_div=None, tw=None, out_dtype="float32", written_want=written)
    # a block whose expert is -1 (not local) is skipped as a whole
    layout = (ids, np.array([1, -1, 1], np.int32), np.array([9], np.int32))
    _check(qx, qw, layout, top_k=2, block_size=4, a_div=None, tw=None, out_dtype="float32",
           written_want=np.isin(np.arange(numel), [0, 4, 5]))  # fmt: skip
    # at most numel = 6 live blocks: a slot in block 6 (behind 6 blocks of padding no moe_align_block_size layout
    # has) is not read, however far num_tokens_post_padded reaches
    ids = np.array([6] * 24 + [3, 6, 6, 6, 2], np.int32)
    layout = (ids, np.zeros(8, np.int32), np.array([29], np.int32))
    _check(qx, qw, layout, top_k=2, block_size=4, a_div=None, tw=None, out_dtype="float32",
           written_want=np.zeros(numel, bool))  # fmt: skip


def test_empty_problems() -> None:
    rng = np.random.default_rng(1)
    qx, qw = _quantized(rng, 0, 3, 8, 32, ("e4m3", "e4m3"))
    ids, experts, ntpp = mxrt.moe_align_block_size(np.zeros((0, 2), np.int32), 4, 3)
    d = mxrt.moe_gemm_mx(qx, qw, ids, experts, ntpp, top_k=2, block_size=4)
    assert d.shape == (0, 8) and d.dtype == NP_DTYPES["bfloat16"]
    qx, qw = _quantized(rng, 2, 3, 0, 32, ("e4m3", "e4m3"))  # n = 0
    ids, experts, ntpp = mxrt.moe_align_block_size(np.array([[0, 2], [1, 2]]), 4, 3)
    assert mxrt.moe_gemm_mx(qx, qw, ids, experts, ntpp, top_k=2, block_size=4).shape == (4, 0)
    qx, qw = _quantized(rng, 2, 3, 5, 0, ("e4m3", "e4m3"))  # k = 0: zeros
    d = mxrt.moe_gemm_mx(qx, qw, ids, experts, ntpp, top_k=2, block_size=4, out_dtype="float32")
    assert d.shape == (4, 5) and not d.any()


def test_out_buffer_is_written_entirely_and_returned() -> None:
    rng = np.random.default_rng(2)
    t, e, top_k, bs = 4, 4, 2, 4
    layout = mxrt.moe_align_block_size(_topk_ids(rng, t, e, top_k), bs, e)
    qx, qw = _quantized(rng, t, e, 16, 64, ("e4m3", "e2m1"))
    want = mxrt.moe_gemm_mx(qx, qw, *layout, top_k=top_k, block_size=bs)
    out = np.full((t * top_k, 16), 7, NP_DTYPES["bfloat16"])
    got = mxrt.moe_gemm_mx(qx, qw, *layout, top_k=top_k, block_size=bs, out=out)
    assert got is out
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    # rows no block reaches are zeroed too ("start from zeros")
    out[...] = 7
    ids, experts, ntpp = layout
    mxrt.moe_gemm_mx(qx, qw, ids, np.full_like(experts, -1), ntpp, top_k=top_k, block_size=bs, out=out)
    assert not out.astype(np.float32).any()


def test_raw_piece_operands() -> None:
    rng = np.random.default_rng(4)
    t, e, top_k, bs, n, k = 3, 4, 2, 4, 12, 40  # a K tail (40 = 32 + 8)
    layout = mxrt.moe_align_block_size(_topk_ids(rng, t, e, top_k), bs, e)
    for pair in PAIRS:
        qx, qw = _quantized(rng, t, e, n, k, pair)
        want = mxrt.moe_gemm_mx(qx, qw, *layout, top_k=top_k, block_size=bs, out_dtype="float32")
        wp = (qw.data, qw.scales, qw.fmt, k)
        xps = [(qx.data, qx.scales, qx.fmt, k)]
        if qx.fmt != "e2m1":  # packed e2m1 without k means k = 2 * bytes (here 40 either way, but be explicit)
            xps.append((qx.data, qx.scales, qx.fmt))
        if qw.fmt != "e2m1":
            wp3 = (qw.data, qw.scales, qw.fmt)
            got = mxrt.moe_gemm_mx(qx, wp3, *layout, top_k=top_k, block_size=bs, out_dtype="float32")
            np.testing.assert_array_equal(got, want)
        for xp in xps:
            got = mxrt.moe_gemm_mx(xp, wp, *layout, top_k=top_k, block_size=bs, out_dtype="float32")
            np.testing.assert_array_equal(got, want)
    # float8 views of the codes, float8_e8m0fnu scales
    qx, qw = _quantized(rng, t, e, n, 64, ("e4m3", "e4m3"))
    want = mxrt.moe_gemm_mx(qx, qw, *layout, top_k=top_k, block_size=bs)
    xp = (qx.data.view(ml_dtypes.float8_e4m3fn), qx.scales.view(ml_dtypes.float8_e8m0fnu), "e4m3")
    got = mxrt.moe_gemm_mx(xp, (qw.data, qw.scales, "e4m3"), *layout, top_k=top_k, block_size=bs)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_problem_fields() -> None:
    rng = np.random.default_rng(6)
    t, e, top_k, bs = 3, 4, 2, 4
    ids, experts, ntpp = mxrt.moe_align_block_size(_topk_ids(rng, t, e, top_k), bs, e)
    qx, qw = _quantized(rng, t, e, 12, 64, ("e4m3", "e2m1"))
    tw = rng.random((t, top_k), dtype=np.float32)
    p = moe_gemm_problem(qx, qw, ids, experts, ntpp, top_k=top_k, block_size=bs, topk_weights=tw, out_dtype="float16")
    names = [f.name for f in dataclasses.fields(MoeGemmProblem)]
    assert names == [
        "op", "x_codes", "x_scales", "x_fmt", "w_codes", "w_scales", "w_fmt", "m_act", "e", "n", "k",
        "sorted_token_ids", "expert_ids", "num_tokens_post_padded", "top_k", "a_div", "numel", "block_size",
        "topk_weights", "out", "out_dtype", "device",
    ]  # fmt: skip
    assert (p.op, p.x_fmt, p.w_fmt, p.m_act, p.e, p.n, p.k) == (OP, "e4m3", "e2m1", 3, 4, 12, 64)
    assert (p.top_k, p.a_div, p.numel, p.block_size, p.out_dtype, p.device) == (2, 2, 6, 4, "float16", False)
    assert p.x_codes.shape == (3, 64) and p.x_scales.shape == (3, 2)
    assert p.w_codes.shape == (4, 12, 32) and p.w_scales.shape == (4, 12, 2)
    assert p.w_codes.dtype == p.w_scales.dtype == p.x_codes.dtype == np.uint8
    assert p.topk_weights.shape == (6,) and p.topk_weights.dtype == np.float32
    assert p.sorted_token_ids.dtype == p.expert_ids.dtype == p.num_tokens_post_padded.dtype == np.int32
    assert (p.cap, p.num_blocks, p.out_shape, p.out) == (ids.size, experts.size, (6, 12), None)
    assert isinstance(mxrt.MoeGemmProblem, type) and mxrt.MoeGemmProblem is MoeGemmProblem
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.k = 3  # frozen
    # host layout arrays in any int32 byte order / stride come back native and contiguous
    p2 = moe_gemm_problem(qx, qw, ids.astype(">i4")[::-1][::-1], experts, ntpp, top_k=top_k, block_size=bs)
    assert p2.sorted_token_ids.dtype == np.int32 and p2.sorted_token_ids.dtype.isnative
    assert p2.sorted_token_ids.flags.c_contiguous and (p2.sorted_token_ids == ids).all()
    p3 = moe_gemm_problem(qx, qw, np.minimum(ids, 3), experts, ntpp, top_k=top_k, block_size=bs, a_div=1)
    assert (p3.a_div, p3.numel) == (1, 3)


# ---- typed errors --------------------------------------------------------------------------------------------


def _setup():
    rng = np.random.default_rng(11)
    t, e, top_k, bs = 3, 4, 2, 4
    layout = mxrt.moe_align_block_size(_topk_ids(rng, t, e, top_k), bs, e)
    qx, qw = _quantized(rng, t, e, 8, 64, ("e4m3", "e4m3"))
    return dict(x=qx, w=qw, sorted_token_ids=layout[0], expert_ids=layout[1], num_tokens_post_padded=layout[2],
                top_k=top_k, block_size=bs)  # fmt: skip


def _bad_cases():
    g = _setup()
    ids, experts, ntpp = g["sorted_token_ids"], g["expert_ids"], g["num_tokens_post_padded"]
    qw = g["w"]
    w32 = mxrt.quantize_mx(np.ones((4, 8, 32), np.float32), axis=2)
    return [
        ("k_mismatch", dict(w=w32), ShapeError, "'w'|w has k"),
        ("w_2d", dict(w=mxrt.quantize_mx(np.ones((8, 64), np.float32))), ShapeError, "w has shape"),
        ("w_axis1", dict(w=mxrt.quantize_mx(np.ones((4, 64, 64), np.float32), axis=1)), ShapeError, "axis"),
        ("w_pieces_2d", dict(w=(qw.data[0], qw.scales[0], "e4m3")), ShapeError, "w codes"),
        ("w_scales_n", dict(w=(qw.data, qw.scales[:, :7], "e4m3")), ShapeError, "w scales"),
        ("w_scales_e", dict(w=(qw.data, qw.scales[:3], "e4m3")), ShapeError, "w scales"),
        ("w_scales_k", dict(w=(qw.data, qw.scales[:, :, :1], "e4m3")), ShapeError, "w.scales"),
        ("w_type", dict(w=[1, 2]), DtypeError, "'w'"),
        ("x_3d", dict(x=qw), ShapeError, "x has shape"),
        ("pair", dict(x=mxrt.quantize_mx(np.ones((3, 64), np.float32), "e2m1"),
                      w=mxrt.quantize_mx(np.ones((4, 8, 64), np.float32), "e5m2", axis=2)), DtypeError, "formats"),
        ("ids_int64", dict(sorted_token_ids=ids.astype(np.int64)), DtypeError, "'sorted_token_ids'"),
        ("ids_uint32", dict(sorted_token_ids=ids.astype(np.uint32)), DtypeError, "'sorted_token_ids'"),
        ("ids_float", dict(sorted_token_ids=ids.astype(np.float32)), DtypeError, "'sorted_token_ids'"),
        ("ids_list", dict(sorted_token_ids=ids.tolist()), DtypeError, "'sorted_token_ids'"),
        ("ids_none", dict(sorted_token_ids=None), DtypeError, "'sorted_token_ids'"),
        ("ids_2d", dict(sorted_token_ids=ids[None]), ShapeError, "'sorted_token_ids'"),
        ("experts_int64", dict(expert_ids=experts.astype(np.int64)), DtypeError, "'expert_ids'"),
        ("experts_0d", dict(expert_ids=experts[0]), ShapeError, "'expert_ids'"),
        ("ntpp_int64", dict(num_tokens_post_padded=ntpp.astype(np.int64)), DtypeError, "'num_tokens_post_padded'"),
        ("ntpp_shape", dict(num_tokens_post_padded=np.zeros(2, np.int32)), ShapeError, "'num_tokens_post_padded'"),
        ("ntpp_2d", dict(num_tokens_post_padded=ntpp[None]), ShapeError, "'num_tokens_post_padded'"),
        ("nblocks_short", dict(expert_ids=experts[:-1]), ShapeError, "'expert_ids'"),
        ("nblocks_long", dict(expert_ids=np.append(experts, 0).astype(np.int32)), ShapeError, "ceil\\(cap"),
        ("nblocks_bs", dict(block_size=8), ShapeError, "'expert_ids'"),
        ("block_size_0", dict(block_size=0), ShapeError, "'block_size'"),
        ("block_size_float", dict(block_size=4.0), DtypeError, "'block_size'"),
        ("top_k_0", dict(top_k=0), ShapeError, "'top_k'"),
        ("top_k_none", dict(top_k=None), DtypeError, "'top_k'"),
        ("a_div_0", dict(a_div=0), ShapeError, "'a_div'"),
        ("a_div_bool", dict(a_div=True), DtypeError, "'a_div'"),
        ("tw_size", dict(topk_weights=np.ones(5, np.float32)), ShapeError, "'topk_weights'"),
        ("tw_shape", dict(topk_weights=np.ones((2, 3), np.float32)), ShapeError, "'topk_weights'"),
        ("tw_float64", dict(topk_weights=np.ones(6)), DtypeError, "'topk_weights'"),
        ("tw_bf16", dict(topk_weights=np.ones(6, ml_dtypes.bfloat16)), DtypeError, "'topk_weights'"),
        ("out_shape", dict(out=np.zeros((6, 7), ml_dtypes.bfloat16)), ShapeError, "'out'"),
        ("out_dtype_mismatch", dict(out=np.zeros((6, 8), np.float32)), DtypeError, "'out'"),
        ("out_list", dict(out=[[0.0] * 8] * 6), DtypeError, "'out'"),
        ("out_dtype", dict(out_dtype="float64"), DtypeError, "'out_dtype'"),
        ("ids_past_numel", dict(sorted_token_ids=np.where(ids == 6, 7, ids).astype(np.int32)), ShapeError,
         "'sorted_token_ids'.*\\[0, 7\\]"),
        ("ids_negative", dict(sorted_token_ids=np.where(ids == 6, -1, ids).astype(np.int32)), ShapeError,
         "'sorted_token_ids'.*-1"),
        ("ids_past_numel_down", dict(a_div=1), ShapeError, "sentinel numel = 3"),  # numel 3, ids up to 5 / 6
        ("expert_past_e", dict(expert_ids=np.where(experts == 3, 4, experts).astype(np.int32)), ShapeError,
         "'expert_ids' holds 4"),
        ("backend", dict(backend="cuda"), UnknownNameError, "'backend'"),
    ]  # fmt: skip


BAD = _bad_cases()


@pytest.mark.parametrize(("case", "kw", "err", "pattern"), BAD, ids=[b[0] for b in BAD])
def test_typed_errors(case: str, kw: dict, err: type, pattern: str) -> None:
    with pytest.raises(err, match=pattern) as info:
        mxrt.moe_gemm_mx(**{**_setup(), **kw})
    assert str(info.value).startswith(f"{OP}: ")


def test_negative_expert_ids_are_fine_on_the_host() -> None:
    g = _setup()
    g["expert_ids"] = np.full_like(g["expert_ids"], -7)
    assert not mxrt.moe_gemm_mx(**g, out_dtype="float32").any()


def test_backend_gpu_without_a_device() -> None:
    from mxrt import runtime

    if runtime.device_available():
        pytest.skip("a GPU is present")
    with pytest.raises(UnsupportedArchError, match=f"^{OP}: backend 'gpu'"):
        mxrt.moe_gemm_mx(**_setup(), backend="gpu")
    np.testing.assert_array_equal(
        mxrt.moe_gemm_mx(**_setup(), backend="numpy").view(np.uint16),
        mxrt.moe_gemm_mx(**_setup()).view(np.uint16),
    )


def test_errors_are_typed_builtins() -> None:
    assert issubclass(ShapeError, ValueError) and issubclass(DtypeError, TypeError)
    assert issubclass(LayoutError, ValueError)


# ---- torch in -> torch out ------------------------------------------------------------------------------------


def test_torch_cpu_in_torch_out() -> None:
    torch = pytest.importorskip("torch")
    g = _setup()
    qx, qw = g["x"], g["w"]
    tw = np.random.default_rng(0).random((3, 2), dtype=np.float32)
    want = mxrt.moe_gemm_mx(**g, topk_weights=tw)
    t = torch.from_numpy
    xp = (t(qx.data).view(torch.float8_e4m3fn), t(qx.scales).view(torch.float8_e8m0fnu), "e4m3")
    wq = mxrt.MXArray(t(qw.data), t(qw.scales), "e4m3", 32, 2, qw.shape, "given")
    layout = dict(
        sorted_token_ids=t(g["sorted_token_ids"]),
        expert_ids=t(g["expert_ids"]),
        num_tokens_post_padded=t(g["num_tokens_post_padded"]),
    )
    d = mxrt.moe_gemm_mx(xp, wq, **layout, top_k=2, block_size=4, topk_weights=t(tw))
    assert isinstance(d, torch.Tensor) and d.dtype == torch.bfloat16 and tuple(d.shape) == (6, 8)
    np.testing.assert_array_equal(d.view(torch.int16).numpy().view(np.uint16), want.view(np.uint16))
    out = torch.full((6, 8), 7.0, dtype=torch.float32)
    got = mxrt.moe_gemm_mx(xp, wq, **layout, top_k=2, block_size=4, topk_weights=t(tw), out=out, out_dtype="float32")
    assert got is out
    want32 = mxrt.moe_gemm_mx(**g, topk_weights=tw, out_dtype="float32")
    np.testing.assert_array_equal(out.numpy(), want32)
    with pytest.raises(DtypeError, match="'sorted_token_ids'"):
        mxrt.moe_gemm_mx(xp, wq, **{**layout, "sorted_token_ids": layout["sorted_token_ids"].long()}, top_k=2,
                         block_size=4)  # fmt: skip


# ---- README ----------------------------------------------------------------------------------------------------


def test_readme_moe_gemm_example_runs() -> None:
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    section = text[text.index("<!-- api:moe_gemm -->") : text.index("<!-- /api:moe_gemm -->")]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) == 1 and "moe_gemm_mx(" in blocks[0] and "moe_align_block_size(" in blocks[0]
    exec(compile(blocks[0], "README.md:moe_gemm", "exec"), {})


# ---- device arrays (validated from metadata only) and the GPU dispatch, without a GPU ------------------------------


class _Flags:
    def __init__(self, c: bool) -> None:
        self.c_contiguous = c


class FakeDevice:
    """Looks like a CuPy array to mxrt (its type's module starts with 'cupy'); carries a numpy array's metadata."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        self.shape, self.dtype, self.strides, self.ndim, self.size = a.shape, a.dtype, a.strides, a.ndim, a.size
        self.flags = _Flags(a.flags.c_contiguous)

    def reshape(self, *shape: int) -> FakeDevice:
        return FakeDevice(self._a.reshape(*shape))

    def min(self):  # the host must never read a device array
        raise AssertionError("device array read on the host")

    max = min


FakeDevice.__module__ = "cupy._fake"


def _dev(g: dict) -> dict:
    qx, qw = g["x"], g["w"]
    d = dict(g)
    d["x"] = mxrt.MXArray(FakeDevice(qx.data), FakeDevice(qx.scales), qx.fmt, 32, 1, qx.shape, "given")
    d["w"] = mxrt.MXArray(FakeDevice(qw.data), FakeDevice(qw.scales), qw.fmt, 32, 2, qw.shape, "given")
    for name in ("sorted_token_ids", "expert_ids", "num_tokens_post_padded"):
        d[name] = FakeDevice(g[name])
    return d


def test_device_problem_validates_without_reading() -> None:
    g = _setup()
    d = _dev(g)
    ids = g["sorted_token_ids"].copy()
    ids[0] = 99  # out of range: the host cannot see it on the device, the kernel skips it
    d["sorted_token_ids"] = FakeDevice(ids)
    d["expert_ids"] = FakeDevice(np.full_like(g["expert_ids"], 17))
    tw = FakeDevice(np.ones((3, 2), np.float32))
    out = FakeDevice(np.zeros((6, 8), np.uint16))  # bfloat16 bits
    p = moe_gemm_problem(**d, topk_weights=tw, out=out)
    assert p.device and (p.m_act, p.e, p.n, p.k, p.numel, p.a_div) == (3, 4, 8, 64, 6, 2)
    assert p.sorted_token_ids is d["sorted_token_ids"] and p.expert_ids is d["expert_ids"]
    assert p.num_tokens_post_padded is d["num_tokens_post_padded"] and p.out is out
    assert p.x_codes is d["x"].data and p.x_scales is d["x"].scales
    assert p.w_codes.shape == (4, 8, 64) and p.w_scales.shape == (4, 8, 2) and p.w_codes._a.base is not None
    assert p.topk_weights.shape == (6,) and p.out_dtype == "bfloat16"


@pytest.mark.parametrize(
    ("change", "err", "pattern"),
    [
        (dict(sorted_token_ids=FakeDevice(np.zeros(20, np.int64))), DtypeError, "'sorted_token_ids' is a CuPy"),
        (dict(expert_ids=FakeDevice(np.zeros((5, 2), np.int32)[:, 0])), LayoutError, "'expert_ids' has strides"),
        (dict(num_tokens_post_padded=np.zeros(1, np.int32)), DtypeError, "'num_tokens_post_padded' is a host"),
        (dict(topk_weights=FakeDevice(np.ones(6, np.float64))), DtypeError, "'topk_weights'"),
        (dict(out=FakeDevice(np.zeros((6, 8), np.float32))), DtypeError, "'out'"),
        (dict(out=np.zeros((6, 8), ml_dtypes.bfloat16)), DtypeError, "'out'"),
        (dict(backend="numpy"), DtypeError, "backend='numpy'"),
    ],
    ids=["ids_int64", "experts_strided", "ntpp_host", "tw_float64", "out_float32", "out_host", "backend_numpy"],
)
def test_device_misuse_is_typed(change: dict, err: type, pattern: str) -> None:
    with pytest.raises(err, match=pattern) as info:
        mxrt.moe_gemm_mx(**{**_dev(_setup()), **change})
    assert str(info.value).startswith(f"{OP}: ")


class _FakeOps:
    """Stands in for mxrt/ops/moe_gemm.py (the GPU module): records the problems it is handed."""

    def __init__(self, reason: str | None = None) -> None:
        self.reason, self.runs, self.asked = reason, [], []

    def unsupported(self, p: MoeGemmProblem) -> str | None:
        self.asked.append(p)
        return self.reason

    def moe_gemm_mx_gpu(self, p: MoeGemmProblem):
        self.runs.append(p)
        if p.device:
            return p.out if p.out is not None else FakeDevice(np.zeros(p.out_shape, np.uint16))
        from mxrt.reference.moe_gemm import moe_gemm_numpy

        return moe_gemm_numpy(p)  # a host problem comes back on the host


@pytest.fixture
def fake_ops(monkeypatch):
    import sys

    import mxrt.ops

    def install(reason: str | None = None, device: bool = False) -> _FakeOps:
        ops = _FakeOps(reason)
        monkeypatch.setitem(sys.modules, "mxrt.ops.moe_gemm", ops)
        monkeypatch.setattr(mxrt.ops, "moe_gemm", ops, raising=False)
        monkeypatch.setattr(mxrt.runtime, "device_available", lambda: device)
        return ops

    return install


def test_device_inputs_run_the_gpu_op(fake_ops) -> None:
    d = _dev(_setup())  # before the fake GPU appears (quantize_mx would pick it)
    ops = fake_ops(device=True)
    got = mxrt.moe_gemm_mx(**d)
    assert len(ops.runs) == 1 and ops.runs[0].device and ops.asked == ops.runs
    assert isinstance(got, FakeDevice) and got.dtype == np.uint16 and got.shape == (6, 8)  # CuPy in, CuPy out
    out = FakeDevice(np.zeros((6, 8), np.float16))
    assert mxrt.moe_gemm_mx(**d, out=out, out_dtype="float16") is out and ops.runs[1].out is out
    ops.reason = "no kernel for this shape"
    with pytest.raises(UnsupportedArchError, match=f"^{OP}: no kernel for this shape"):
        mxrt.moe_gemm_mx(**d)


def test_host_inputs_dispatch(fake_ops) -> None:
    g = _setup()
    want = mxrt.moe_gemm_mx(**g, backend="numpy")
    ops = fake_ops(device=True)  # auto on a GPU machine: the GPU op when it covers the problem
    np.testing.assert_array_equal(mxrt.moe_gemm_mx(**g).view(np.uint16), want.view(np.uint16))
    assert len(ops.runs) == 1 and not ops.runs[0].device
    ops = fake_ops(reason="declined", device=True)  # auto falls back to the numpy twin when it does not
    np.testing.assert_array_equal(mxrt.moe_gemm_mx(**g).view(np.uint16), want.view(np.uint16))
    assert ops.asked and not ops.runs
    with pytest.raises(UnsupportedArchError, match="declined"):
        mxrt.moe_gemm_mx(**g, backend="gpu")
    ops = fake_ops(device=False)  # no GPU: auto never asks the GPU module
    mxrt.moe_gemm_mx(**g)
    assert not ops.asked and not ops.runs


def test_builds_for_few_blocks() -> None:
    """The e2m1 builds of grids with at most MOE_FEW_BLOCKS live blocks (T = 1 at top-8) where the table has them;
    every other case keeps MOE_DEFAULT / MOE_DEFAULT_E2M1 (mxrt.ops.moe_gemm.moe_build)."""
    from mxrt.ops import moe_gemm as M

    few = M.MOE_FEW_BLOCKS
    assert M.moe_build(2, "e2m1", 7168, few) == M.MOE_FEW_E2M1[2][0] == (3, 2, 4)
    assert M.moe_build(2, "e2m1", 2048, few) == M.MOE_FEW_E2M1[2][1] == (1, 3, 4)
    assert M.moe_build(2, "e2m1", 7168, few + 1) == M.MOE_DEFAULT_E2M1[2][0]
    assert M.moe_build(2, "e2m1", 2048) == M.MOE_DEFAULT_E2M1[2][1]
    assert M.moe_build(2, "e4m3", 7168, 1) == M.MOE_DEFAULT[2][0]
    assert M.moe_build(8, "e2m1", 2048, 1) == M.MOE_DEFAULT_E2M1[8][1]  # no entry for MT 8: the default
    assert all(rt * mt <= 16 for mt, builds in M.MOE_FEW_E2M1.items() for _, _, rt in builds)


def test_token_tiles_follow_the_slots_per_expert() -> None:
    """mxrt.ops.moe_gemm.plan_build: MT covers twice the mean slots per local expert (at least 16), chunks cover the
    rest of a block (a chunk loop per CTA beyond MOE_FEW_BLOCKS live blocks); the few-block short-K build with one
    chunk only."""
    from mxrt.ops import moe_gemm as M

    assert M.plan_build(16, 8, 64, "e2m1", 2048, 8) == (2, 1, False, M.MOE_FEW_E2M1[2][1])  # T 1, blocks of 16
    assert M.plan_build(32, 8, 64, "e2m1", 2048, 8) == (2, 2, False, M.MOE_DEFAULT_E2M1[2][1])  # T 1: grid chunks
    assert M.plan_build(32, 8, 64, "e2m1", 7168, 8) == (2, 2, False, M.MOE_FEW_E2M1[2][0])  # long K: few-block too
    assert M.plan_build(64, 512, 64, "e4m3", 7168, 600) == (2, 4, True, M.MOE_DEFAULT[2][0])  # T 64: the chunk loop
    assert M.plan_build(64, 4096, 64, "e4m3", 7168, 600)[:3] == (8, 1, False)  # 64 per expert: the block's own MT
    assert M.plan_build(8, 8, 64, "e2m1", 7168, 8)[:3] == (1, 1, False)  # blocks of 8 keep MT 1
    assert M.plan_build(128, 68, 16, "e4m3", 256, 60) == (2, 8, True, M.MOE_CHUNKED_FP8_SHORT_K[2])  # fp8 short K
    assert M.plan_build(16, 68, 16, "e4m3", 256, 60) == (2, 1, False, M.MOE_DEFAULT[2][1])


@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_aiter_moe_sorting_layout_gives_the_vllm_result(gemm):
    """layout="aiter": moe_sorting's packed (slot << 24) | token ids, local expert ids (masked experts) and
    num_valid_ids give the same rows as moe_align_block_size's layout with the equivalent expert_map."""
    rng = np.random.default_rng(3)
    t, e, top_k, bs, k, n = 7, 8, 2, 4, 64, 40
    ids = np.stack([rng.choice(e, top_k, replace=False) for _ in range(t)]).astype(np.int32)
    tw = rng.random((t, top_k)).astype(np.float32)
    mask = (np.arange(e) != 3).astype(np.int32)
    local = np.where(mask == 1, np.cumsum(mask) - 1, -1).astype(np.int32)
    a_div = top_k if gemm == "gate_up" else 1
    x = mxrt.quantize_mx(rng.standard_normal((t * top_k // a_div, k)).astype(np.float32))
    w = mxrt.quantize_mx(rng.standard_normal((e - 1, n, k)).astype(np.float32), axis=2)
    s_ids, _, s_exp, nvalid = mxrt.moe_sorting(ids, tw, e, bs, mask)
    kw = dict(top_k=top_k, block_size=bs, a_div=a_div, topk_weights=tw, out_dtype="float32", backend="numpy")
    got = mxrt.moe_gemm_mx(x, w, s_ids, s_exp, nvalid, layout="aiter", **kw)
    v = mxrt.moe_align_block_size(ids, bs, e, local, backend="numpy")
    want = mxrt.moe_gemm_mx(x, w, *v, **kw)
    np.testing.assert_array_equal(got, want)
    assert (got[local[ids.reshape(-1)] < 0] == 0).all() and np.abs(got).sum() > 0
    with pytest.raises(mxrt.errors.DtypeError, match="layout"):
        mxrt.moe_gemm_mx(x, w, s_ids, s_exp, nvalid, layout="sglang", **kw)
    with pytest.raises(mxrt.errors.ShapeError, match="num_valid_ids"):
        mxrt.moe_gemm_mx(x, w, s_ids, s_exp, nvalid[:1], layout="aiter", **kw)
