"""The small-M decode path ``sm90_decode`` (kernels_src/gemm/gemm_mx_decode_sm90.hip) on an sm_90a GPU: every
shape inside its envelope runs it (never a skip), against the float64 reference of the dequantized inputs (bf16 /
fp16 calc_diff <= 1e-5; fp32 relative <= 1e-5 for e2m1 x e2m1) and the unquantized inputs; format pairs, token
tiles, K-warp / unroll configurations, split-K modes, extreme and NaN scale pairs, tails in m and n, bitwise reruns,
CUDA-graph capture, and the auto dispatch (m <= 64 here, m = 65 on sm90_wgmma). Preshuffled scale layouts read in
place (every layout, on the weights, the tokens or both): the same references, and bitwise the row-major run.
Outputs start poisoned.

Marker ``gpu``: skips without cupy, a device, or an sm_90a target.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxrt
from mxrt.problems.gemm import GEMM_FORMAT_PAIRS

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from support.gemm_cases import check_result, host_result, operands, to_device  # noqa: E402

from mxrt.ops import gemm as gemm_op  # noqa: E402
from mxrt.ops import gemm_decode  # noqa: E402
from mxrt.ops import gemm_decode_kernels as K  # noqa: E402
from mxrt.ops.gemm_paths import select_gemm_path  # noqa: E402
from mxrt.problems import gemm_problem  # noqa: E402
from mxrt.runtime import device_available, get_arch  # noqa: E402

if not device_available() or get_arch().target != "sm_90a":
    pytest.skip("the decode path runs on sm_90a", allow_module_level=True)

POISON = 0xFF


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as session:
        yield session


@pytest.fixture(autouse=True)
def decode_keeps_its_envelope(monkeypatch):
    """These tests run the mma.sync kernel at every m of its envelope: the hand-over of m > 8 fp8 calls and of m > 8
    e2m1-weight calls to sm90_decode_wg (its own tests, test_gpu_gemm_decode_wg.py) is switched off here."""
    from mxrt.ops import gemm_decode_wg
    from mxrt.ops.gemm_paths import invalidate_plans

    monkeypatch.setattr(gemm_decode_wg, "DEFAULT_MIN_M", None)
    monkeypatch.setattr(gemm_decode_wg, "E2M1_MIN_M", None)
    invalidate_plans()
    yield
    invalidate_plans()


def decode(a, b, **kw):
    """gemm_mx on the decode path; the problem must be inside the envelope (a decline fails the test)."""
    p = gemm_problem(a, b, **kw)
    dg = gemm_op.device_gemm(p)
    assert gemm_decode.supports(dg) is None, gemm_decode.supports(dg)
    assert select_gemm_path(dg).name == "sm90_decode"
    return mxrt.gemm_mx(a, b, **kw)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 16, 17, 33, 64])
@pytest.mark.parametrize("nk", [(1, 128), (15, 256), (100, 384), (1000, 2048), (17, 4096)], ids=str)
def test_shapes(m, nk, out_dtype):
    n, k = nk
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=m * 7 + n)
    got = decode(to_device(qa), to_device(qb), out_dtype=out_dtype)
    # vs the unquantized product only where enough outputs average the quantization noise (DeepGEMM's 1e-3 bar)
    unq = dict(x=x, w=w) if m * n >= 256 else {}
    assert not check_result(got, qa, qb, out_dtype, **unq)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("pair", GEMM_FORMAT_PAIRS, ids="x".join)
@pytest.mark.parametrize("m", [1, 5, 24, 64])
def test_format_pairs(pair, out_dtype, m):
    n, k = 136, 384
    x, w, qa, qb = operands(m, n, k, *pair, seed=m)
    a, b = to_device(qa), to_device(qb)
    if out_dtype == "float32" and pair != ("e2m1", "e2m1"):
        dg = gemm_op.device_gemm(gemm_problem(a, b, out_dtype=out_dtype))
        assert "float32 output" in gemm_decode.supports(dg)
        return
    got = decode(a, b, out_dtype=out_dtype)
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w)


@pytest.mark.parametrize("mt", K.DECODE_MT)
def test_every_configuration(mt):
    """Each token tile with every warp count and ring depth that fits: the same problem, the reference each time."""
    m, n, k = min(8 * mt, 37), 70, 1024
    x, w, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=mt)
    a, b = to_device(qa), to_device(qb)
    dg = gemm_op.device_gemm(gemm_problem(a, b, out_dtype="bfloat16"))
    fa, fb = (mxrt.codes.FMT_CODES[f] for f in ("e4m3", "e2m1"))
    for kw in K.DECODE_KW:
        for st in K.DECODE_STAGES:
            if K.smem_bytes(fa, fb, mt, kw, st) > K.DECODE_SMEM_MAX:
                continue
            dg.out.fill(0xFFFF)
            gemm_decode.run(dg, mt=mt, kw=kw, stages=st, rt=1)
            assert not check_result(dg.out, qa, qb, "bfloat16", x=x, w=w), (kw, st)


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split", [2, 3, "max"])
@pytest.mark.parametrize("case", [(1, 200, 1024, "e4m3", "e4m3", "bfloat16"), (13, 65, 384, "e2m1", "e2m1", "float32"),
                                  (40, 33, 256, "e4m3", "e2m1", "float16")], ids=str)  # fmt: skip
def test_split_k(case, split, deterministic):
    m, n, k, fa, fb, out_dtype = case
    split_k = k // 32 if split == "max" else split
    x, w, qa, qb = operands(m, n, k, fa, fb, seed=split_k)
    got = decode(to_device(qa), to_device(qb), out_dtype=out_dtype, split_k=split_k, deterministic=deterministic)
    rounded = split_k if (not deterministic and out_dtype != "float32") else 1
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w, splits_rounded=rounded)


@pytest.mark.parametrize("mt", K.DECODE_MT)
@pytest.mark.parametrize("pair", [("e5m2", "e4m3"), ("e2m1", "e4m3"), ("e4m3", "e2m1"), ("e2m1", "e2m1")], ids="x".join)
def test_every_row_tile(mt, pair):
    """Each weight row-tile count (define RT) a token tile takes, at two warp counts, with n a tail of the CTA's
    16 * RT rows and an odd m: the reference each time."""
    m, n, k = 8 * mt - 3 if mt > 1 else 5, 150, 1024
    x, w, qa, qb = operands(m, n, k, *pair, seed=10 + mt)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb), out_dtype="bfloat16"))
    for rt in K.DECODE_RT:
        if not K.valid_rt(mt, rt):
            continue
        for kw, split in ((2, 1), (4, 2)):
            dg.out.fill(0xFFFF)
            gemm_decode.run(dg, mt=mt, kw=kw, stages=2, rt=rt, split=split)
            assert not check_result(dg.out, qa, qb, "bfloat16", x=x, w=w), (rt, kw, split)


@pytest.mark.parametrize("m", [11, 29, 40])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids="x".join)
def test_extreme_scale_pairs(pair, out_dtype, m):
    """Legal extreme pairs (sa = 0 with sb = 254, ...; products near 2^0), one block of zero codes under 2^254
    factors (0, not NaN), and NaN scale bytes: the reference's NaN rows and columns exactly, the rest in the bar.
    m 11 / 29 / 40: token tiles 2 / 4 / 8, whose default builds own 32 / 64 / 32 weight rows per CTA (RT 2 / 4 / 2)."""
    n, k = 72, 384
    rng = np.random.default_rng(3)
    _, _, qa, qb = operands(m, n, k, *pair, seed=3)
    off = {0: 36, 1: 20, 2: 12}[pair.count("e2m1")] if out_dtype == "float16" else 0
    kb = k // 32
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - off - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254 - off
    sa[:, -1], sb[:, -1] = 254 - off, 0
    a_codes = qa.data.copy()
    sa[:, 4], sb[:, 4] = 254, 254
    if pair[0] == "e2m1":
        a_codes[:, 4 * 16 : 5 * 16] = 0
    else:
        a_codes[:, 4 * 32 : 5 * 32] = 0
    sa[6, 2], sb[40, 7] = 255, 255
    a = (cupy.asarray(a_codes), cupy.asarray(sa), pair[0], k)
    b = (cupy.asarray(qb.data), cupy.asarray(sb), pair[1], k)
    want = mxrt.reference.gemm_mx((a_codes, sa, pair[0], k), (qb.data, sb, pair[1], k), out_dtype="float64")
    got = host_result(decode(a, b, out_dtype=out_dtype), out_dtype)
    nan = np.isnan(want)
    assert nan[6].all() and nan[:, 40].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ok = ~nan
    assert np.isfinite(got[ok]).all() and np.isfinite(want[ok].astype(out_dtype)).all()
    assert mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


@pytest.mark.parametrize("m", [3, 11, 40])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e4m3", "e2m1"), ("e2m1", "e2m1")], ids="x".join)
def test_one_row_or_token_leaves_the_window(pair, m):
    """A stage that is fast for every row and token but one: weight rows 5 and 50 carry a scale byte of 250 / 3 over
    zero codes and token 2 one of 60 (exact, but only the wide promotion takes them). The lanes holding those rows
    and the others must take one promotion together: a per-lane choice ran mma.sync in divergent code (undefined;
    every earlier extreme-scale test left the window in all lanes of a stage at once)."""
    n, k = 72, 512
    _, _, qa, qb = operands(m, n, k, *pair, seed=9)
    a_codes, b_codes, sa, sb = qa.data.copy(), qb.data.copy(), qa.scales.copy(), qb.scales.copy()
    bw = 16 if pair[1] == "e2m1" else 32  # code bytes per block
    for row, blk, s in ((5, 5, 250), (50, 13, 3)):
        sb[row, blk] = s
        b_codes[row, blk * bw : (blk + 1) * bw] = 0
    sa[2 % m, 9] = 60
    qa = mxrt.MXArray(a_codes, sa, qa.fmt, 32, 1, qa.shape, qa.scale_mode)
    qb = mxrt.MXArray(b_codes, sb, qb.fmt, 32, 1, qb.shape, qb.scale_mode)
    for out_dtype in ("bfloat16", "float16"):
        got = decode(to_device(qa), to_device(qb), out_dtype=out_dtype)
        assert not check_result(got, qa, qb, out_dtype), out_dtype


@pytest.mark.parametrize("m", [3, 11, 40])
@pytest.mark.parametrize("pair", [("e4m3", "e2m1"), ("e2m1", "e2m1"), ("e4m3", "e4m3")], ids="x".join)
def test_token_scales_outside_the_f16_window(pair, m):
    """e4m3 tokens x e2m1 weights scale the tokens in f16 before the HMMAs where every token scale byte of a stage lies
    in [113, 134] (DEC_TSC). Token 1 carries ~2^24 times the values in the first half of K (scale bytes ~150) and token
    0 ~2^-30 times in the second (~95): those stages take the two-factor promotion, the others the token-scaled one;
    each output row against the float64 reference on its own (the large row would hide the others in one calc_diff).
    The other pairs run the same operands as a control."""
    n, k = 72, 1024
    rng = np.random.default_rng(11)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    x[1 % m, : k // 2] *= 2.0**24
    x[0, k // 2 :] *= 2.0**-30
    qa, qb = mxrt.quantize_mx(x, pair[0], backend="numpy"), mxrt.quantize_mx(w, pair[1], backend="numpy")
    assert qa.scales.max() > 134 and qa.scales.min() < 113
    ref = mxrt.reference.gemm_mx(qa, qb, out_dtype="float64")
    got = host_result(decode(to_device(qa), to_device(qb), out_dtype="bfloat16"), "bfloat16")
    assert np.isfinite(got).all()
    for i in range(m):
        assert mxrt.reference.calc_diff(got[i], ref[i]) <= 1e-5, i


def test_bitwise_reruns_and_auto_dispatch():
    _, _, qa, qb = operands(64, 300, 1024, "e4m3", "e4m3", seed=1)
    a, b = to_device(qa), to_device(qb)
    first = decode(a, b).get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.gemm_mx(a, b).get(), first)
    _, _, qa65, _ = operands(65, 300, 1024, "e4m3", "e4m3", seed=1)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa65), b))
    assert select_gemm_path(dg).name != "sm90_decode"
    assert "decode envelope" in gemm_decode.supports(dg)


def test_declines_outside_the_envelope():
    _, _, qa, qb = operands(4, 64, 160, "e4m3", "e4m3", seed=2)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb)))
    assert "multiple of 128" in gemm_decode.supports(dg)
    assert select_gemm_path(dg).name != "sm90_decode"
    got = mxrt.gemm_mx(to_device(qa), to_device(qb))  # served by another path
    assert not check_result(got, qa, qb, "bfloat16")


def test_cuda_graph_capture():
    """Captured once per accumulation mode; new operands written into the same buffers between replays."""
    m, n, k = 4, 520, 2048
    _, _, qa1, qb1 = operands(m, n, k, "e4m3", "e4m3", seed=31)
    _, _, qa2, qb2 = operands(m, n, k, "e4m3", "e4m3", seed=32)
    with mxrt.runtime.debug():
        a, b = to_device(qa1), to_device(qb1)
        for kw in ({"split_k": 1}, {"split_k": 3}, {"split_k": 4, "deterministic": False}):
            out = cupy.empty((m, n), cupy.uint16)
            decode(a, b, out=out, **kw)
            cupy.cuda.Device().synchronize()
            stream = cupy.cuda.Stream()
            with stream:
                stream.begin_capture()
                mxrt.gemm_mx(a, b, out=out, **kw)
                graph = stream.end_capture()
            for qa, qb in ((qa2, qb2), (qa1, qb1)):
                for dst, src in ((a.data, qa.data), (a.scales, qa.scales), (b.data, qb.data), (b.scales, qb.scales)):
                    dst[...] = cupy.asarray(src)
                out.fill(0xFFFF)
                cupy.cuda.Device().synchronize()
                graph.launch(stream=stream)
                stream.synchronize()
                rounded = kw["split_k"] if kw.get("deterministic") is False else 1
                assert not check_result(out, qa, qb, "bfloat16", splits_rounded=rounded), kw


# ---- preshuffled scale layouts read in place (defines SLA / SLB) --------------------------------------------------
#: every scale form the path reads: test id -> (layout, storage dtype of mxrt.preshuffle_scales)
LAYOUT_FORMS = {
    "aiter32x8": ("aiter32x8", None),
    "turbo16x4": ("turbo16x4", None),
    "turbo16x4_u32": ("turbo16x4", np.uint32),
    "cublas128x4": ("cublas128x4", None),
    "deepgemm_ue8m0": ("deepgemm_ue8m0", None),
}
LAYOUT_PAIRS = [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")]  # MXFP8, MXFP4, mixed e4m3 x e2m1


def in_layout(codes, s, fmt, k, form):
    """A device operand (codes, scales, fmt, k) whose row-major host scales ``s`` are preshuffled on the GPU into
    ``form`` (None: row-major), and its ``*_scale_layout`` argument."""
    s = cupy.asarray(s)
    if form is None:
        return (cupy.asarray(codes), s, fmt, k), None
    layout, dtype = LAYOUT_FORMS[form]
    return (cupy.asarray(codes), mxrt.preshuffle_scales(s, layout, dtype=dtype), fmt, k), layout


def decode_in_layouts(qa, qb, k, la, lb, **kw):
    """gemm_mx on the decode path with the tokens' scales in form ``la`` and the weights' in ``lb``."""
    a, a_layout = in_layout(qa.data, qa.scales, qa.fmt, k, la)
    b, b_layout = in_layout(qb.data, qb.scales, qb.fmt, k, lb)
    dg = gemm_op.device_gemm(gemm_problem(a, b, a_scale_layout=a_layout, b_scale_layout=b_layout, **kw))
    assert gemm_decode._layouts(dg) != (0, 0) or la is lb is None
    return decode(a, b, a_scale_layout=a_layout, b_scale_layout=b_layout, **kw)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("m", [1, 8, 64])
@pytest.mark.parametrize("pair", LAYOUT_PAIRS, ids="x".join)
@pytest.mark.parametrize("form", list(LAYOUT_FORMS))
def test_weight_scale_layouts(form, pair, m, out_dtype):
    """Weights' scales in each layout (the decode case: a preshuffled checkpoint), tokens row-major. n = 300: past
    cublas128x4's 128-row and short of aiter32x8's 256-row tiles, a tail of every CTA's 16 * RT rows; k = 2048:
    the path splits K 4 ways (16 groups of 4 blocks). Against the float64 reference of the dequantized inputs and
    the unquantized product, and bitwise the row-major run (same build but SLB, same plan)."""
    n, k = 300, 2048
    x, w, qa, qb = operands(m, n, k, *pair, seed=m + n)
    if out_dtype == "float32" and pair != ("e2m1", "e2m1"):
        b, layout = in_layout(qb.data, qb.scales, pair[1], k, form)
        dg = gemm_op.device_gemm(gemm_problem(to_device(qa), b, b_scale_layout=layout, out_dtype=out_dtype))
        assert "float32 output" in gemm_decode.supports(dg)
        return
    got = decode_in_layouts(qa, qb, k, None, form, out_dtype=out_dtype)
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w)
    row_major = decode(to_device(qa), to_device(qb), out_dtype=out_dtype)
    np.testing.assert_array_equal(got.get(), row_major.get())


@pytest.mark.parametrize("form", list(LAYOUT_FORMS))
def test_token_and_weight_scale_layouts(form):
    """Both operands' scales in the layout (quantize_mx(..., scale_layout=...) on the activations too): m = 8, one
    token tile; n = 136, k = 384 (aiter32x8 pads 12 K blocks to 16; no K split: 3 groups), mixed e4m3 x e2m1."""
    m, n, k = 8, 136, 384
    x, w, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=41)
    got = decode_in_layouts(qa, qb, k, form, form, out_dtype="bfloat16")
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w)
    np.testing.assert_array_equal(got.get(), decode(to_device(qa), to_device(qb), out_dtype="bfloat16").get())


@pytest.mark.parametrize(
    "la,lb",
    [("deepgemm_ue8m0", "turbo16x4_u32"), ("aiter32x8", "cublas128x4"), ("cublas128x4", "turbo16x4")],
    ids=lambda f: f,
)
def test_mixed_scale_layouts(la, lb):
    """Different layouts on the two operands (one and four staged words per row), m = 64 (8 token tiles)."""
    m, n, k = 64, 200, 1024
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=43)
    got = decode_in_layouts(qa, qb, k, la, lb, out_dtype="bfloat16")
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w)
    np.testing.assert_array_equal(got.get(), decode(to_device(qa), to_device(qb), out_dtype="bfloat16").get())


@pytest.mark.parametrize("form", list(LAYOUT_FORMS))
def test_scale_layouts_extreme_and_nan_scales(form):
    """Extreme scale pairs over the whole E8M0 range (the wide promotion), 2^254 factors on zero codes, and NaN
    scale bytes, both operands in the layout: the reference's NaN rows and columns exactly, the rest in the bar."""
    m, n, k = 8, 72, 384
    rng = np.random.default_rng(5)
    _, _, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=5)
    kb = k // 32
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254
    sa[:, -1], sb[:, -1] = 254, 0
    a_codes = qa.data.copy()
    sa[:, 4], sb[:, 4] = 254, 254
    a_codes[:, 4 * 32 : 5 * 32] = 0
    sa[6, 2], sb[40, 7] = 255, 255
    want = mxrt.reference.gemm_mx((a_codes, sa, "e4m3", k), (qb.data, sb, "e2m1", k), out_dtype="float64")
    a, a_layout = in_layout(a_codes, sa, "e4m3", k, form)
    b, b_layout = in_layout(qb.data, sb, "e2m1", k, form)
    got = host_result(decode(a, b, a_scale_layout=a_layout, b_scale_layout=b_layout), "bfloat16")
    nan = np.isnan(want)
    assert nan[6].all() and nan[:, 40].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ok = ~nan
    assert np.isfinite(got[ok]).all() and mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("form", list(LAYOUT_FORMS))
def test_scale_layouts_split_k(form, deterministic):
    """An explicit split_k = 3 (8 groups of 4 MX blocks split 2 / 3 / 3: each split starts its layout reads at
    its own group) in both modes, weights' scales in the layout, fp16 out."""
    m, n, k, split_k = 5, 96, 1024, 3
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=47)
    got = decode_in_layouts(qa, qb, k, None, form, out_dtype="float16", split_k=split_k, deterministic=deterministic)
    rounded = 1 if deterministic else split_k
    assert not check_result(got, qa, qb, "float16", x=x, w=w, splits_rounded=rounded)


@pytest.mark.parametrize("layout", mxrt.SCALE_LAYOUTS)
def test_quantize_mx_with_scale_layout_feeds_the_decode_path(layout):
    """The GPU quantizer emits the weights' scales preshuffled (MXArray.scale_layout); the decode path reads them
    as they are."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((4, 384)).astype(np.float32), rng.standard_normal((136, 384)).astype(np.float32)
    qa = mxrt.quantize_mx(cupy.asarray(x), "e4m3")
    qb = mxrt.quantize_mx(cupy.asarray(w), "e4m3", scale_layout=layout)
    assert qb.scale_layout == layout
    got = decode(qa, qb)
    ha, hb = (mxrt.quantize_mx(v, "e4m3", backend="numpy") for v in (x, w))
    assert not check_result(got, ha, hb, "bfloat16", x=x, w=w)
