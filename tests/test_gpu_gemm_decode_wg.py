"""The wgmma decode path ``sm90_decode_wg`` (kernels_src/gemm/gemm_mx_decode_sm90_wg.hip) on an sm_90a GPU, forced
through ``MXRT_GEMM_PATH`` (the public call, its plans and prepared launches) or run per build: against the float64
reference of the dequantized inputs (bf16 / fp16 calc_diff <= 1e-5) and the unquantized inputs; fp8 format pairs and
e2m1 weights (widened by the producer warps), every token tile / warpgroup count / ring depth, tails in m and n,
split-K in both modes (splits without groups included), extreme and NaN scale pairs (the wide promotion), bitwise
reruns, CUDA-graph capture, the declines and the hand-over from ``sm90_decode``. Outputs start poisoned.

Marker ``gpu``: skips without cupy, a device, or an sm_90a target.
"""

from __future__ import annotations

import numpy as np
import pytest

import mxrt

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from support.gemm_cases import check_result, host_result, operands, to_device  # noqa: E402

from mxrt.ops import gemm as gemm_op  # noqa: E402
from mxrt.ops import gemm_decode, gemm_decode_wg  # noqa: E402
from mxrt.ops import gemm_decode_kernels as K  # noqa: E402
from mxrt.ops.gemm_paths import select_gemm_path  # noqa: E402
from mxrt.problems import gemm_problem  # noqa: E402
from mxrt.runtime import device_available, get_arch  # noqa: E402

if not device_available() or get_arch().target != "sm_90a":
    pytest.skip("the wgmma decode path runs on sm_90a", allow_module_level=True)

POISON = 0xFF
FP8_PAIRS = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2")]


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as session:
        yield session


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("MXRT_GEMM_PATH", gemm_decode_wg.NAME)


def wg(a, b, **kw):
    """gemm_mx on the wgmma decode path (forced); the problem must be inside its envelope."""
    dg = gemm_op.device_gemm(gemm_problem(a, b, **kw))
    assert gemm_decode_wg.supports(dg) is None, gemm_decode_wg.supports(dg)
    assert select_gemm_path(dg).name == gemm_decode_wg.NAME
    return mxrt.gemm_mx(a, b, **kw)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", [1, 8, 16, 17, 32, 33, 48, 64])
@pytest.mark.parametrize("nk", [(1, 128), (70, 384), (1000, 2048), (129, 4096)], ids=str)
def test_shapes(forced, m, nk, out_dtype):
    n, k = nk
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=m * 7 + n)
    got = wg(to_device(qa), to_device(qb), out_dtype=out_dtype)
    unq = dict(x=x, w=w) if m * n >= 256 else {}
    assert not check_result(got, qa, qb, out_dtype, **unq)


@pytest.mark.parametrize("pair", FP8_PAIRS, ids="x".join)
@pytest.mark.parametrize("m", [3, 24, 64])
def test_format_pairs(forced, pair, m):
    n, k = 136, 384
    x, w, qa, qb = operands(m, n, k, *pair, seed=m)
    got = wg(to_device(qa), to_device(qb), out_dtype="bfloat16")
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w)


@pytest.mark.parametrize("weights", ["e4m3", "e2m1"])
@pytest.mark.parametrize("nt", K.WG_NT)
def test_every_configuration(nt, weights):
    """Each token tile with every warpgroup count, token-part count, producer-warp count and ring depth that builds
    (with e2m1 weights: those that fit the staging slots too, and every staging depth of the default shape at 8
    stages; each producer warp fetches, widens and fills its own slots): one problem (tails in m and n, more groups
    than the ring holds), the reference each time."""
    w4 = weights == "e2m1"
    m, n, k = (nt - 5, 130, 3072) if w4 else (nt - 3, 200, 2048)
    x, w, qa, qb = operands(m, n, k, "e4m3", weights, seed=nt + w4)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb), out_dtype="bfloat16"))
    ran = 0
    for nc in K.WG_NC:
        for ns in K.WG_NS:
            for pw in K.WG_PW:
                for st in K.WG_STAGES:
                    pfs = K.WG_PF if w4 and (nc, ns, st) == (2, 1, 8) else (0,)
                    for pf in pfs:
                        if not K.wg_valid(nt, nc, st, ns, pw, w4, pf or K.wg_pf(nt, nc, st, ns, pw)):
                            continue
                        dg.out.view(cupy.uint8).fill(0xFF)
                        gemm_decode_wg.run(dg, nt=nt, nc=nc, stages=st, ns=ns, pw=pw, pf=pf, split=1)
                        assert not check_result(dg.out, qa, qb, "bfloat16", x=x, w=w), (nc, ns, pw, st, pf)
                        ran += 1
    assert ran >= 12


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("m", [5, 20, 33, 64])
def test_token_parts(m, split):
    """NS = 2: the token tile's halves on different warpgroups (two of them, or four also splitting K where the
    halves are 16 wide); m = 5 / 20 leave the second half empty or partial; n = 300 ends inside a CTA."""
    n, k = 300, 1536
    x, w, qa, qb = operands(m, n, k, "e5m2", "e4m3", seed=m + split)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb), out_dtype="float16", split_k=split))
    nt = max(32, next(t for t in K.WG_NT if t >= m))
    ran = 0
    for nc in (2, 4):
        if not K.wg_valid(nt, nc, 4, 2, 2):
            continue
        dg.out.view(cupy.uint8).fill(0xFF)
        gemm_decode_wg.run(dg, nt=nt, nc=nc, ns=2, stages=4, pw=2)
        assert not check_result(dg.out, qa, qb, "float16", x=x, w=w), nc
        ran += 1
    assert ran == (2 if nt == 32 else 1)


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split", [2, 3, "max", "past"])
@pytest.mark.parametrize("case", [(1, 200, 1024, "bfloat16"), (40, 65, 768, "float16"), (64, 300, 2048, "bfloat16")],
                         ids=str)  # fmt: skip
def test_split_k(forced, case, split, deterministic):
    """split_k 2, 3, one per group of 4 blocks, and more splits than groups (splits without work store zeros)."""
    m, n, k, out_dtype = case
    split_k = {"max": k // 128, "past": k // 128 + 3}.get(split, split)
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=split_k)
    got = wg(to_device(qa), to_device(qb), out_dtype=out_dtype, split_k=split_k, deterministic=deterministic)
    rounded = split_k if not deterministic else 1
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w, splits_rounded=rounded)


SK_CASES = [(16, 300, 1536, "bfloat16"), (37, 1000, 2048, "float16"), (64, 129, 4096, "bfloat16")]


@pytest.mark.parametrize("weights", ["e4m3", "e2m1"])
@pytest.mark.parametrize("case", SK_CASES, ids=str)
def test_stream_k(case, weights):
    """The stream-K grid (a split_k=1 call): CTA counts that put 1, a few or many units on a CTA, slabs split across
    two or more CTAs and held whole, tails in m and n; each against the reference, bitwise again on a rerun (the slab
    counters reset themselves) and close to the older grid (another summation order)."""
    m, n, k, out_dtype = case
    x, w, qa, qb = operands(m, n, k, "e4m3", weights, seed=m + n)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb), out_dtype=out_dtype))
    units = -(-n // K.WG_ROWS) * (k // 128)
    dg.out.view(cupy.uint8).fill(0xFF)
    gemm_decode_wg.run(dg, ctas=0)  # the older grid
    older = dg.out.copy()
    for ctas in sorted({1, 2, 3, 7, units // 4, units // 2 + 1, units, gemm_decode_wg.sk_ctas(n, k, 132)}):
        dg.out.view(cupy.uint8).fill(0xFF)
        gemm_decode_wg.run(dg, ctas=ctas)
        first = dg.out.copy()
        assert not check_result(first, qa, qb, out_dtype, x=x, w=w), ctas
        dg.out.view(cupy.uint8).fill(0xFF)
        gemm_decode_wg.run(dg, ctas=ctas)
        assert cupy.array_equal(dg.out.view(cupy.uint16), first.view(cupy.uint16)), ctas
        o, f = (cupy.asnumpy(v).view(np.uint16) for v in (older, first))
        assert np.count_nonzero(o != f) <= o.size // 4, ctas  # mostly bitwise: only rounding-boundary outputs move
    # captured in a CUDA graph: each replay finds the slab counters the previous one left at zero
    stream = cupy.cuda.Stream()
    with mxrt.runtime.debug(), stream:
        gemm_decode_wg.run(dg, ctas=7)
        stream.synchronize()
        stream.begin_capture()
        gemm_decode_wg.run(dg, ctas=7)
        graph = stream.end_capture()
    want = dg.out.copy()
    for _ in range(3):
        dg.out.view(cupy.uint8).fill(0xFF)
        cupy.cuda.Device().synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
        assert cupy.array_equal(dg.out.view(cupy.uint16), want.view(cupy.uint16))
    assert not check_result(want, qa, qb, out_dtype, x=x, w=w)
    # first use on a stream under capture: the older grid is captured (no counters allocated inside the graph), and
    # the next eager call on that stream allocates them and runs stream-K
    fresh = cupy.cuda.Stream()
    with mxrt.runtime.debug(), fresh:
        fresh.begin_capture()
        gemm_decode_wg.run(dg, ctas=7)
        graph = fresh.end_capture()
    assert (cupy.cuda.Device().id, fresh.ptr) not in gemm_decode_wg._SK_BUFFERS
    dg.out.view(cupy.uint8).fill(0xFF)
    cupy.cuda.Device().synchronize()
    graph.launch(stream=fresh)
    fresh.synchronize()
    assert not check_result(dg.out, qa, qb, out_dtype, x=x, w=w)
    with fresh:
        dg.out.view(cupy.uint8).fill(0xFF)
        gemm_decode_wg.run(dg, ctas=7)
        fresh.synchronize()
    assert cupy.array_equal(dg.out.view(cupy.uint16), want.view(cupy.uint16))


@pytest.mark.parametrize("m", [11, 29, 40, 64])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e2m1")], ids="x".join)
def test_extreme_scale_pairs(forced, pair, out_dtype, m):
    """Legal extreme pairs (sa = 0 with sb = 254, ...; products near 2^0), one block of zero codes under 2^254
    factors (0, not NaN), and NaN scale bytes: the reference's NaN rows and columns exactly, the rest in the bar."""
    n, k = 72, 384
    rng = np.random.default_rng(3)
    _, _, qa, qb = operands(m, n, k, *pair, seed=3)
    off = 36 if out_dtype == "float16" else 0
    kb = k // 32
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - off - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254 - off
    sa[:, -1], sb[:, -1] = 254 - off, 0
    a_codes = qa.data.copy()
    sa[:, 4], sb[:, 4] = 254, 254
    a_codes[:, 4 * 32 : 5 * 32] = 0
    sa[6, 2], sb[40, 7] = 255, 255
    a = (cupy.asarray(a_codes), cupy.asarray(sa), pair[0], k)
    b = (cupy.asarray(qb.data), cupy.asarray(sb), pair[1], k)
    want = mxrt.reference.gemm_mx((a_codes, sa, pair[0], k), (qb.data, sb, pair[1], k), out_dtype="float64")
    got = host_result(wg(a, b, out_dtype=out_dtype), out_dtype)
    nan = np.isnan(want)
    assert nan[6].all() and nan[:, 40].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ok = ~nan
    assert np.isfinite(got[ok]).all() and np.isfinite(want[ok].astype(out_dtype)).all()
    assert mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


def test_one_wide_stage_among_fast_ones(forced):
    """A single scale byte outside [64, 190] in one stage of one CTA: that stage takes the wide promotion, the others
    the fast one; the result matches the reference everywhere (the flag is per warpgroup and stage)."""
    m, n, k = 32, 192, 2048
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=9)
    sb = qb.scales.copy()
    sb[70, 37] = 30  # CTA 1, group 9; 2^-97 on that block only
    b = (cupy.asarray(qb.data), cupy.asarray(sb), "e4m3", k)
    want = mxrt.reference.gemm_mx((qa.data, qa.scales, "e4m3", k), (qb.data, sb, "e4m3", k), out_dtype="float64")
    got = host_result(wg(to_device(qa), b, out_dtype="bfloat16"), "bfloat16")
    assert mxrt.reference.calc_diff(got, want) <= 1e-5


@pytest.mark.parametrize("weights", ["e4m3", "e2m1"])
def test_bitwise_reruns_and_large_cell(forced, weights):
    """The decode cell the issue names (N, K = 7168, 4096) at m = 64 against the reference, bitwise on reruns."""
    m, n, k = 64, 7168, 4096
    x, w, qa, qb = operands(m, n, k, "e4m3", weights, seed=1)
    a, b = to_device(qa), to_device(qb)
    first = wg(a, b)
    assert not check_result(first, qa, qb, "bfloat16", x=x, w=w)
    first = first.get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.gemm_mx(a, b).get(), first)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", [1, 16, 17, 33, 64])
@pytest.mark.parametrize("nk", [(70, 384), (1000, 2048), (129, 4096)], ids=str)
def test_e2m1_weights(forced, m, nk, out_dtype):
    """MXFP4 weights (e4m3 tokens: mxrt's only pair with one e2m1 operand): each stage's packed tile copied by cp.async
    and widened to e4m3 by its producer warp (all 16 e2m1 codes, -0 included); n = 70 / 1000 / 129 leave rows past n
    in the last CTA (not copied)."""
    n, k = nk
    x, w, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=m * 5 + n)
    assert np.unique(qb.data & 15).size == 16 and np.unique(qb.data >> 4).size == 16
    got = wg(to_device(qa), to_device(qb), out_dtype=out_dtype)
    unq = dict(x=x, w=w) if m * n >= 256 else {}
    assert not check_result(got, qa, qb, out_dtype, **unq)


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split", [3, "past"])
def test_e2m1_split_k(forced, split, deterministic):
    m, n, k = 40, 264, 2048
    split_k = {"past": k // 128 + 3}.get(split, split)
    x, w, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=split_k)
    got = wg(to_device(qa), to_device(qb), out_dtype="float16", split_k=split_k, deterministic=deterministic)
    rounded = split_k if not deterministic else 1
    assert not check_result(got, qa, qb, "float16", x=x, w=w, splits_rounded=rounded)


def test_declines():
    cases = {
        "fp8 tokens": (operands(8, 64, 256, "e2m1", "e2m1", seed=2), {}),
        "fp8 tokens, fp8 or e2m1 weights": (operands(8, 64, 256, "e2m1", "e4m3", seed=2), {}),
        "float32 output": (operands(8, 64, 256, "e4m3", "e4m3", seed=2), {"out_dtype": "float32"}),
        "multiple of 128": (operands(8, 64, 160, "e4m3", "e4m3", seed=2), {}),
        "decode envelope": (operands(65, 64, 256, "e4m3", "e4m3", seed=2), {}),
    }
    for why, ((_, _, qa, qb), kw) in cases.items():
        dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb), **kw))
        assert why in gemm_decode_wg.supports(dg), (why, gemm_decode_wg.supports(dg))
    _, _, qa, qb = operands(8, 300, 256, "e4m3", "e4m3", seed=2)
    s = mxrt.preshuffle_scales(cupy.asarray(qb.scales), "cublas128x4")
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), (cupy.asarray(qb.data), s, "e4m3", 256),
                                          b_scale_layout="cublas128x4"))  # fmt: skip
    assert "preshuffled" in gemm_decode_wg.supports(dg)


def test_hand_over_from_sm90_decode(monkeypatch):
    """The envelope default: above DEFAULT_MIN_M tokens sm90_decode hands fp8 row-major calls to this path, e2m1
    weights above E2M1_MIN_M, and keeps the rest (e2m1 tokens here); MXRT_GEMM_PATH=sm90_decode keeps them all."""
    monkeypatch.setattr(gemm_decode_wg, "DEFAULT_MIN_M", 16)
    _, _, qa, qb = operands(32, 200, 1024, "e4m3", "e4m3", seed=4)
    dg = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb)))
    assert "routes it to sm90_decode_wg" in gemm_decode.supports(dg)
    assert select_gemm_path(dg).name == gemm_decode_wg.NAME
    _, _, qa16, _ = operands(16, 200, 1024, "e4m3", "e4m3", seed=4)
    assert select_gemm_path(gemm_op.device_gemm(gemm_problem(to_device(qa16), to_device(qb)))).name == "sm90_decode"
    _, _, qa4, qb4 = operands(32, 200, 1024, "e2m1", "e2m1", seed=4)
    assert select_gemm_path(gemm_op.device_gemm(gemm_problem(to_device(qa4), to_device(qb4)))).name == "sm90_decode"
    dg4 = gemm_op.device_gemm(gemm_problem(to_device(qa), to_device(qb4)))
    assert "with e2m1 weights: routed to sm90_decode_wg" in gemm_decode.supports(dg4)
    assert select_gemm_path(dg4).name == gemm_decode_wg.NAME
    _, _, qa8, _ = operands(8, 200, 1024, "e4m3", "e4m3", seed=4)
    dg4 = gemm_op.device_gemm(gemm_problem(to_device(qa8), to_device(qb4)))
    assert select_gemm_path(dg4).name == "sm90_decode"  # e2m1 weights at m <= E2M1_MIN_M (8)
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_decode")
    assert gemm_decode.supports(dg) is None


@pytest.mark.parametrize("weights", ["e4m3", "e2m1"])
def test_cuda_graph_capture(forced, weights):
    """Captured once per accumulation mode; new operands written into the same buffers between replays."""
    m, n, k = 40, 520, 2048
    _, _, qa1, qb1 = operands(m, n, k, "e4m3", weights, seed=31)
    _, _, qa2, qb2 = operands(m, n, k, "e4m3", weights, seed=32)
    with mxrt.runtime.debug():
        a, b = to_device(qa1), to_device(qb1)
        for kw in ({"split_k": 1}, {"split_k": 3}, {"split_k": 4, "deterministic": False}):
            out = cupy.empty((m, n), cupy.uint16)
            wg(a, b, out=out, **kw)
            cupy.cuda.Device().synchronize()
            stream = cupy.cuda.Stream()
            with stream:
                stream.begin_capture()
                mxrt.gemm_mx(a, b, out=out, **kw)
                graph = stream.end_capture()
            for qa, qb in ((qa2, qb2), (qa1, qb1)):
                for dst, src in ((a.data, qa.data), (a.scales, qa.scales), (b.data, qb.data), (b.scales, qb.scales)):
                    dst[...] = cupy.asarray(src)
                out.view(cupy.uint8).fill(0xFF)
                cupy.cuda.Device().synchronize()
                graph.launch(stream=stream)
                stream.synchronize()
                rounded = kw["split_k"] if kw.get("deterministic") is False else 1
                assert not check_result(out, qa, qb, "bfloat16", splits_rounded=rounded), kw
