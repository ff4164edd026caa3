"""Dense MX GEMM on the CPU: the float64 reference against an independent block-wise oracle and the unquantized
product; the public op against its twin for every format pair, out dtype, shape, split_k, raw-pieces layout."""

from __future__ import annotations

import itertools
import zlib

import ml_dtypes
import numpy as np
import pytest

import mxrt
import mxrt.runtime
from mxrt import reference
from mxrt.checks.gemm import blockwise_gemm, calc_diff_limit
from mxrt.problems import gemm_problem

PAIRS = list(mxrt.GEMM_FORMAT_PAIRS)
OUT_DTYPES = ["bfloat16", "float16", "float32"]
# (m, n, k): tiny, odd, aligned, K tails (k % 32 != 0, odd k for fp4), one block, empty
SHAPES = [(1, 1, 1), (7, 13, 33), (64, 96, 128), (33, 65, 100), (5, 3, 31), (16, 16, 32), (9, 17, 257)]
EMPTY = [(0, 5, 64), (4, 0, 64), (0, 0, 0), (3, 5, 0)]
# DeepGEMM QuantConfig.max_diff(): fp8 x fp8, one fp4 operand, fp4 x fp4 (MX_REFERENCE.md 5)
THRESH = {0: 1e-3, 1: 1e-2, 2: 2e-2}


def pid(p):
    return "x".join(p)


def operands(m, n, k, fa, fb, seed):
    """Inputs whose rows span 2^-6..2^6, so scales vary from row to row; and their MX quantizations."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)) * np.exp2(rng.integers(-6, 7, (m, 1)))
    w = rng.standard_normal((n, k)) * np.exp2(rng.integers(-6, 7, (n, 1)))
    return x, w, mxrt.quantize_mx(x, fa), mxrt.quantize_mx(w, fb)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("pair", PAIRS, ids=pid)
def test_reference_vs_blockwise_oracle_and_unquantized(pair, shape):
    m, n, k = shape
    _, _, qa, qb = operands(m, n, k, *pair, seed=zlib.crc32(repr((pair, shape)).encode()))
    d64 = reference.gemm_mx(qa, qb, out_dtype="float64")
    want = blockwise_gemm(qa, qb)  # ml_dtypes decode, per-block dots
    assert d64.dtype == np.float64 and d64.shape == (m, n)
    assert reference.relative_error(want, d64) <= 1e-13


@pytest.mark.parametrize("shape", [(64, 96, 128), (33, 65, 100), (128, 64, 512)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("pair", PAIRS, ids=pid)
def test_calc_diff_against_unquantized_product(pair, shape):
    """Semantic drift: DeepGEMM's calc_diff thresholds on randn inputs (its generators.py), fresh per case."""
    m, n, k = shape
    rng = np.random.default_rng(zlib.crc32(repr((pair, shape, "cd")).encode()))
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    d = reference.gemm_mx(mxrt.quantize_mx(x, pair[0]), mxrt.quantize_mx(w, pair[1]), out_dtype="float64")
    limit = calc_diff_limit(*pair)
    assert limit == (4e-3 if "e5m2" in pair else THRESH[pair.count("e2m1")])
    assert reference.calc_diff(d, x @ w.T) <= limit


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("pair", PAIRS, ids=pid)
def test_public_op_equals_reference_rounding_once(pair, out_dtype):
    _, _, qa, qb = operands(33, 65, 100, *pair, seed=7)
    d = mxrt.gemm_mx(qa, qb, out_dtype=out_dtype, backend="numpy")
    d64 = reference.gemm_mx(qa, qb, out_dtype="float64")
    with np.errstate(over="ignore"):  # float16 overflows to inf here, as it does in the op
        want = d64.astype(np.dtype(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else np.dtype(out_dtype))
    assert d.dtype == want.dtype and d.shape == (33, 65)
    bits = np.uint16 if d.itemsize == 2 else np.uint32
    np.testing.assert_array_equal(d.view(bits), want.view(bits))
    np.testing.assert_array_equal(reference.gemm_mx(qa, qb, out_dtype=out_dtype).view(np.uint8), d.view(np.uint8))


def test_default_out_dtype_is_bfloat16_and_reference_float32():
    _, _, qa, qb = operands(4, 5, 64, "e4m3", "e4m3", seed=1)
    assert mxrt.gemm_mx(qa, qb).dtype == np.dtype(ml_dtypes.bfloat16)
    assert reference.gemm_mx(qa, qb).dtype == np.float32


@pytest.mark.parametrize("shape", [(7, 13, 33), (17, 9, 300), (4, 4, 1024)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
def test_split_k_equals_split_1(shape, out_dtype):
    m, n, k = shape
    _, _, qa, qb = operands(m, n, k, "e4m3", "e2m1", seed=k)
    kb = -(-k // 32)
    base = mxrt.gemm_mx(qa, qb, out_dtype=out_dtype)
    for split_k in sorted({s for s in (2, 3, kb) if s <= kb}):
        for det in (True, False):
            d = mxrt.gemm_mx(qa, qb, out_dtype=out_dtype, split_k=split_k, deterministic=det)
            np.testing.assert_array_equal(d.view(np.uint8), base.view(np.uint8), err_msg=f"split_k={split_k}")


@pytest.mark.parametrize(
    ("k", "split_k"),
    [(k, sk) for k in (1, 31, 32, 33, 100, 256, 1000) for sk in (1, 2, 3, 5, 8) if sk <= -(-k // 32)],
)
def test_k_ranges_partition_k_on_scale_boundaries(k, split_k):
    kb = -(-k // 32)
    q = mxrt.quantize_mx(np.ones((1, k)), "e4m3")
    p = gemm_problem(q, q, split_k=split_k)
    r = p.k_ranges
    assert len(r) == split_k and r[0][0] == 0 and r[-1][1] == k
    assert all(a1 == b0 for (_, a1), (b0, _) in itertools.pairwise(r))
    assert all(k0 % 32 == 0 and k1 > k0 for k0, k1 in r)
    sizes = [-(-(k1 - k0) // 32) for k0, k1 in r]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == kb


def test_split_partials_sum_to_the_whole():
    """The per-range partial products (what a split-K kernel writes to its workspace) add up to the full GEMM."""
    _, _, qa, qb = operands(9, 11, 200, "e5m2", "e4m3", seed=3)
    p = gemm_problem(qa, qb, split_k=3)
    from mxrt.reference.gemm import gemm_f64

    parts = [gemm_f64(p, r) for r in p.k_ranges]
    assert not any(np.allclose(part, 0) for part in parts)
    assert reference.relative_error(gemm_f64(p), sum(parts)) <= 1e-14


@pytest.mark.parametrize("layout", [None, *mxrt.SCALE_LAYOUTS])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e2m1", "e4m3")], ids=pid)
def test_raw_pieces_with_every_scale_layout(pair, layout):
    m, n, k = 37, 19, 160
    _, _, qa, qb = operands(m, n, k, *pair, seed=11)
    want = mxrt.gemm_mx(qa, qb, out_dtype="float32")
    sa = qa.scales if layout is None else mxrt.preshuffle_scales(qa.scales, layout)
    sb = qb.scales if layout is None else mxrt.preshuffle_scales(qb.scales, layout)
    got = mxrt.gemm_mx(
        (qa.data, sa, pair[0]),
        (qb.data, sb, pair[1]),
        out_dtype="float32",
        a_scale_layout=layout,
        b_scale_layout=layout,
    )
    np.testing.assert_array_equal(got, want)
    # a layout-shuffled buffer read as row-major (or vice versa) must not silently give the same answer
    if layout == "aiter32x8":
        flat = mxrt.preshuffle_scales(qa.scales, "turbo16x4")
        other = mxrt.gemm_mx((qa.data, flat, pair[0]), qb, out_dtype="float32", a_scale_layout="turbo16x4")
        np.testing.assert_array_equal(other, want)
        padded_row_major = np.full(mxrt.scale_layout_shape("aiter32x8", *qa.scales.shape), 127, np.uint8)
        padded_row_major[:m, : qa.scales.shape[1]] = qa.scales
        wrong = mxrt.gemm_mx(
            (qa.data, padded_row_major, pair[0]),
            qb,
            out_dtype="float32",
            a_scale_layout="aiter32x8",
        )
        assert not np.array_equal(wrong, want)


def test_raw_pieces_fp4_odd_k_and_float8_views():
    _, _, qa, qb = operands(6, 7, 45, "e2m1", "e4m3", seed=5)
    want = mxrt.gemm_mx(qa, qb, out_dtype="float32")
    got = mxrt.gemm_mx(
        (qa.data, qa.scales.view(ml_dtypes.float8_e8m0fnu), "mxfp4", 45),
        (qb.data.view(ml_dtypes.float8_e4m3fn), qb.scales, "float8_e4m3fn"),
        out_dtype="float32",
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", EMPTY, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
def test_empty_dims(shape, out_dtype):
    m, n, k = shape
    qa = mxrt.quantize_mx(np.ones((m, k), np.float32), "e4m3")
    qb = mxrt.quantize_mx(np.ones((n, k), np.float32), "e2m1")
    d = mxrt.gemm_mx(qa, qb, out_dtype=out_dtype)
    assert d.shape == (m, n) and d.dtype.name == out_dtype and not d.astype(np.float32).any()
    assert reference.gemm_mx(qa, qb).shape == (m, n)
    out = np.full((m, n), 7, np.dtype(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else out_dtype)
    assert mxrt.gemm_mx(qa, qb, out_dtype=out_dtype, out=out) is out and not out.astype(np.float32).any()


def test_out_argument_is_written_and_returned():
    _, _, qa, qb = operands(8, 9, 64, "e4m3", "e5m2", seed=2)
    out = np.full((8, 9), np.nan, np.float32)
    d = mxrt.gemm_mx(qa, qb, out_dtype="float32", out=out)
    assert d is out
    np.testing.assert_array_equal(out, reference.gemm_mx(qa, qb))


def test_nan_scale_poisons_its_row_only_and_overflow_saturates_to_inf():
    _, _, qa, qb = operands(4, 3, 64, "e4m3", "e4m3", seed=9)
    s = qa.scales.copy()
    s[1, 1] = 0xFF
    bad = mxrt.MXArray(qa.data, s, "e4m3", 32, 1, qa.shape, qa.scale_mode)
    d = mxrt.gemm_mx(bad, qb, out_dtype="float32")
    assert np.isnan(d[1]).all() and np.isfinite(np.delete(d, 1, axis=0)).all()
    big = mxrt.MXArray(np.full((1, 32), 0x7E, np.uint8), np.full((1, 1), 254, np.uint8), "e4m3", 32, 1, (1, 32), "x")
    assert np.isposinf(mxrt.gemm_mx(big, big, out_dtype="float32")).all()
    assert np.isfinite(reference.gemm_mx(big, big, out_dtype="float64")).all()


def test_gpu_backends_plug_in_through_the_problem(monkeypatch):
    """gemm_mx validates once and hands the frozen problem to the GPU twin (mxrt.ops.gemm.gemm_mx_gpu)."""
    import mxrt.ops.gemm

    seen = {}

    def fake_gpu(p):
        seen["p"] = p
        return np.zeros((p.m, p.n), p.out_dtype)

    _, _, qa, qb = operands(5, 6, 96, "e2m1", "e2m1", seed=4)
    sb = mxrt.preshuffle_scales(qb.scales, "aiter32x8")
    monkeypatch.setattr(mxrt.ops.gemm, "gemm_mx_gpu", fake_gpu)
    monkeypatch.setattr(mxrt.runtime, "device_available", lambda: True)
    mxrt.gemm_mx(qa, (qb.data, sb, "e2m1"), split_k=2, deterministic=False, backend="gpu", b_scale_layout="aiter32x8")
    p = seen["p"]
    assert isinstance(p, mxrt.GemmProblem)
    assert (p.m, p.n, p.k, p.a_fmt, p.b_fmt, p.split_k, p.deterministic) == (5, 6, 96, "e2m1", "e2m1", 2, False)
    assert p.b_scale_layout == "aiter32x8" and p.b_scales_given is sb
    np.testing.assert_array_equal(p.b.scales, qb.scales)
    assert p.k_ranges == ((0, 32), (32, 96))
    with pytest.raises(AttributeError):
        p.m = 3  # frozen


def test_readme_gemm_example_runs():
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    section = text[text.index("<!-- api:gemm -->") : text.index("<!-- /api:gemm -->")]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md:gemm", "exec"), {})
