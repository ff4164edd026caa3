"""Grouped MX GEMMs on the host: the numpy twins of mxrt.grouped_gemm_mx / grouped_gemm_mx_wgrad and the
DeepGEMM-compatible entry points (mxrt.deep_gemm), against float64 math written here from the dequantized inputs
(exact bar) and from the unquantized inputs (calc_diff bar), torch CPU tensors in and out, and typed errors."""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

import mxrt
import mxrt.deep_gemm as deep_gemm

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
LENS = {
    "balanced": [32, 32, 32, 32],
    "unbalanced": [1, 90, 0, 37],
    "empty_groups": [0, 70, 0, 0],
    "one_group": [130],
    "g32": [0, 3, 17, 0, 1, 40, 0, 0, 5, 9, 28, 2, 0, 0, 0, 7] * 2,
    "no_rows": [0, 0],
}


def _x(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _per_group(lens, fn):
    offs = mxrt.group_offsets(np.asarray(lens))
    return [fn(g, slice(int(offs[g]), int(offs[g + 1]))) for g in range(len(lens))]


@pytest.mark.parametrize("name", list(LENS))
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_forward_and_dgrad(name, out_dtype):
    rng = np.random.default_rng(len(name))
    lens = np.array(LENS[name])
    m, n, k, g = int(lens.sum()), 48, 96, lens.size
    x, w, go = _x(rng, (m, k)), _x(rng, (g, n, k)), _x(rng, (m, n))
    qx, qw, qgo = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(go)
    d = mxrt.grouped_gemm_mx(qx, qw.row, lens, out_dtype=out_dtype)
    xd, wd = mxrt.dequantize_mx(qx, np.float64), mxrt.dequantize_mx(qw.row, np.float64)[:, :, :k]
    exact = np.zeros((m, n))
    for g_, rows in enumerate(_per_group(lens, lambda gg, r: r)):
        exact[rows] = xd[rows] @ wd[g_].T
    np.testing.assert_array_equal(d, exact.astype(d.dtype))  # one rounding of the float64 product
    if m:
        ref = np.concatenate(_per_group(lens, lambda gg, r: x[r] @ w[gg].T))
        assert mxrt.calc_diff(d.astype(np.float64), ref) < 1e-3
    dx = mxrt.grouped_gemm_mx(qgo, qw.col, lens, out_dtype=out_dtype)  # dgrad: W_g^T quantized along n
    assert dx.shape == (m, k)
    if m:
        ref = np.concatenate(_per_group(lens, lambda gg, r: go[r] @ w[gg]))
        assert mxrt.calc_diff(dx.astype(np.float64), ref) < 1e-3


@pytest.mark.parametrize("name", ["balanced", "unbalanced", "empty_groups", "g32"])
@pytest.mark.parametrize("align", [32, 128])
def test_wgrad(name, align):
    rng = np.random.default_rng(7)
    lens = np.array(LENS[name])
    m, n, k = int(lens.sum()), 40, 72
    go, x = _x(rng, (m, n)), _x(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, colwise=True, col_align=align)
    qx = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=align)
    dw = mxrt.grouped_gemm_mx_wgrad(qg, qx, lens, align=align)
    assert dw.shape == (lens.size, n, k) and dw.dtype == np.float32
    gd, xd = mxrt.dequantize_mx(qg.col, np.float64), mxrt.dequantize_mx(qx.col, np.float64)
    offs = mxrt.pad_group_layout(lens, align)[1]
    for g in range(lens.size):
        c0, c1 = int(offs[g]), int(offs[g]) + int(lens[g])
        np.testing.assert_array_equal(dw[g], (gd[:, c0:c1] @ xd[:, c0:c1].T).astype(np.float32))
    ref = np.stack(_per_group(lens, lambda gg, r: go[r].T @ x[r]))
    assert mxrt.calc_diff(dw.astype(np.float64), ref) < 1e-3
    acc = np.ones_like(dw)
    out = mxrt.grouped_gemm_mx_wgrad(qg.col, qx.col, lens, align=align, out=acc, accumulate=True)
    assert out is acc
    np.testing.assert_allclose(acc, dw.astype(np.float64) + 1, rtol=1e-6, atol=1e-6)
    bf = mxrt.grouped_gemm_mx_wgrad(qg, qx, lens, align=align, out_dtype="bfloat16")
    assert bf.dtype == BF16


def test_errors_name_the_argument():
    rng = np.random.default_rng(1)
    qx = mxrt.quantize_mx(_x(rng, (10, 64)))
    qw = mxrt.quantize_mx(_x(rng, (3, 8, 64)), axis=2)
    cases = [
        (dict(group_lens=[5, 5, 5]), mxrt.ShapeError, "sums to 15"),
        (dict(group_lens=[12, -2, 0]), mxrt.ShapeError, "group_lens"),
        (dict(group_lens=[5, 5]), mxrt.ShapeError, "G = 3"),
        (dict(b=mxrt.quantize_mx(_x(rng, (3, 8, 32)), axis=2)), mxrt.ShapeError, "k = 32"),
        (dict(b=mxrt.quantize_mx(_x(rng, (8, 64)))), mxrt.ShapeError, "3-D"),
        (dict(b=mxrt.quantize_mx(_x(rng, (3, 64, 64)), axis=1)), mxrt.ShapeError, "axis 1"),
        (dict(out_dtype="float64"), mxrt.DtypeError, "out_dtype"),
    ]
    for kw, err, text in cases:
        args = dict(a=qx, b=qw, group_lens=[5, 0, 5]) | kw
        with pytest.raises(err, match=f"^grouped_gemm_mx: .*{text}"):
            mxrt.grouped_gemm_mx(**args)
    q = mxrt.quantize_mx_grouped(_x(rng, (10, 8)), [5, 0, 5], colwise=True, col_align=32)
    with pytest.raises(mxrt.ShapeError, match="'align' is 48"):
        mxrt.grouped_gemm_mx_wgrad(q, q, [5, 0, 5], align=48)
    with pytest.raises(mxrt.ShapeError, match="needs 256 columns"):
        mxrt.grouped_gemm_mx_wgrad(q, q, [100, 0, 100])
    with pytest.raises(mxrt.ShapeError, match="'out' is None"):
        mxrt.grouped_gemm_mx_wgrad(q, q, [5, 0, 5], accumulate=True)
    with pytest.raises(mxrt.ShapeError, match="colwise"):
        mxrt.grouped_gemm_mx_wgrad(mxrt.quantize_mx_grouped(_x(rng, (10, 8)), [5, 0, 5]), q, [5, 0, 5])


# ---- DeepGEMM entry points ------------------------------------------------------------------------------------


def _ue8m0_bytes(sf: np.ndarray) -> np.ndarray:
    return (sf.view(np.uint32) >> 23).astype(np.uint8)


def _contiguous_case(rng, recipe: str, alignment: int = 128):
    lens = np.array([50, 0, 130, 7])
    ids = mxrt.contiguous_m_indices(lens, alignment)
    m, n, k, g = ids.size, 64, 256, 4
    x, w = _x(rng, (m, k)), _x(rng, (g, n, k))
    x[ids < 0] = 0
    if recipe == "mx":
        qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)
        a, b = (qa.data.view(E4M3), qa.scales.view(ml_dtypes.float8_e8m0fnu)), (qb.data.view(E4M3), qb.scales)
        deq = mxrt.dequantize_mx(qa, np.float64), mxrt.dequantize_mx(qb, np.float64)
    else:
        ue8m0 = recipe != "f32"
        ca, sa = mxrt.per_token_cast_to_fp8(x, ue8m0)
        cb, sb = zip(*(mxrt.per_block_cast_to_fp8(w[i], ue8m0) for i in range(g)), strict=True)
        cb, sb = np.stack(cb), np.stack(sb)
        deq = (
            mxrt.decode(ca, "e4m3").astype(np.float64) * np.repeat(sa.astype(np.float64), 128, axis=1)[:, :k],
            mxrt.decode(cb, "e4m3").astype(np.float64)
            * np.repeat(np.repeat(sb.astype(np.float64), 128, axis=1)[:, :n], 128, axis=2)[:, :, :k],
        )
        if recipe == "ue8m0_bytes":
            sa, sb = _ue8m0_bytes(sa), _ue8m0_bytes(sb)
        elif recipe == "ue8m0_packed":  # 4 bytes per int32 along K (DeepGEMM SM100 form)
            pa = np.zeros((m, 4), np.uint8)
            pa[:, : sa.shape[1]] = _ue8m0_bytes(sa)
            pb = np.zeros((g, sb.shape[1], 4), np.uint8)
            pb[:, :, : sb.shape[2]] = _ue8m0_bytes(sb)
            sa, sb = pa.view(np.int32), pb.view(np.int32)
        a, b = (ca.view(E4M3), sa), (cb.view(E4M3), sb)
    exact = np.zeros((m, n))
    for i in range(g):
        exact[ids == i] = deq[0][ids == i].astype(np.float64) @ deq[1][i].astype(np.float64).T
    ref = np.zeros((m, n))
    for i in range(g):
        ref[ids == i] = x[ids == i] @ w[i].T
    return a, b, ids, exact, ref


@pytest.mark.parametrize("recipe", ["f32", "ue8m0_f32", "ue8m0_bytes", "ue8m0_packed", "mx"])
def test_deepgemm_contiguous(recipe):
    rng = np.random.default_rng(3)
    a, b, ids, exact, ref = _contiguous_case(rng, recipe)
    d = np.full(exact.shape, 7.0, BF16)
    assert deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ids) is None
    ok = ids >= 0
    np.testing.assert_array_equal(d[~ok].astype(np.float32), 7.0)  # -1 rows untouched
    np.testing.assert_array_equal(d[ok], exact[ok].astype(BF16))
    assert mxrt.calc_diff(d[ok].astype(np.float64), ref[ok]) < 1e-3


def test_deepgemm_contiguous_psum_and_any_ids():
    rng = np.random.default_rng(4)
    a, b, ids, exact, _ = _contiguous_case(rng, "mx")
    lens = np.bincount(ids[ids >= 0], minlength=4)
    d = np.full(exact.shape, 7.0, BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, mxrt.contiguous_psum_layout(lens), use_psum_layout=True)
    ok = ids >= 0
    np.testing.assert_array_equal(d[ok], exact[ok].astype(BF16))
    np.testing.assert_array_equal(d[~ok].astype(np.float32), 7.0)
    with pytest.raises(mxrt.LayoutError, match="grouped_layout"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, np.where(ids == 2, 4, ids))


@pytest.mark.parametrize("recipe", ["f32", "mx"])
def test_deepgemm_masked(recipe):
    rng = np.random.default_rng(5)
    g, max_m, n, k = 4, 130, 64, 128
    xm, w = _x(rng, (g, max_m, k)), _x(rng, (g, n, k))
    masked = np.array([0, 50, 130, 7], np.int32)
    if recipe == "mx":
        qa, qb = mxrt.quantize_mx(xm, axis=2), mxrt.quantize_mx(w, axis=2)
        a, b = (qa.data, qa.scales), (qb.data, qb.scales)
        xd, wd = mxrt.dequantize_mx(qa, np.float64), mxrt.dequantize_mx(qb, np.float64)
    else:
        pa = [mxrt.per_token_cast_to_fp8(xm[i], False) for i in range(g)]
        pb = [mxrt.per_block_cast_to_fp8(w[i], False) for i in range(g)]
        a = (np.stack([p[0] for p in pa]).view(E4M3), np.stack([p[1] for p in pa]))
        b = (np.stack([p[0] for p in pb]).view(E4M3), np.stack([p[1] for p in pb]))
        xd = mxrt.decode(a[0].view(np.uint8), "e4m3").astype(np.float64) * np.repeat(
            a[1].astype(np.float64), 128, axis=2
        )
        wd = (
            mxrt.decode(b[0].view(np.uint8), "e4m3").astype(np.float64)
            * np.repeat(np.repeat(b[1].astype(np.float64), 128, axis=1), 128, axis=2)[:, :n]
        )
    d = np.full((g, max_m, n), 3.0, BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked, expected_m=64)
    own = np.arange(max_m)[None, :] < masked[:, None]
    exact = np.einsum("gmk,gnk->gmn", xd.astype(np.float64), wd.astype(np.float64))
    np.testing.assert_array_equal(d[own], exact[own].astype(BF16))
    np.testing.assert_array_equal(d[~own].astype(np.float32), 3.0)


@pytest.mark.parametrize("gran_k", [128, 32])
def test_deepgemm_k_grouped(gran_k):
    rng = np.random.default_rng(6)
    ks, m, n = [128, 0, 256, 384], 48, 40
    kt = sum(ks)
    a, b = _x(rng, (kt, m)), _x(rng, (kt, n))
    c = _x(rng, (4, m, n)) * 32
    starts = np.cumsum([0, *ks[:-1]])

    def cast(v):  # per-channel along K (DeepGEMM per_channel_cast_to_fp8 of [K, mn]), then K-major per group
        q, sf = mxrt.per_token_cast_to_fp8(np.ascontiguousarray(v.T), False, gran_k)
        flat = np.concatenate([q[:, s : s + kk].reshape(-1) for s, kk in zip(starts, ks, strict=True)])
        deq = mxrt.decode(q, "e4m3").astype(np.float64) * np.repeat(sf, gran_k, axis=1)
        return (flat.view(E4M3), sf), deq

    (qa, da), (qb, db) = cast(a), cast(b)
    d = c.copy()
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(qa, qb, d, ks, np.array(ks, np.int32), c=d, recipe=(1, 1, gran_k))
    for i, (s, kk) in enumerate(zip(starts, ks, strict=True)):
        want = (c[i].astype(np.float64) + da[:, s : s + kk] @ db[:, s : s + kk].T).astype(np.float32)
        np.testing.assert_allclose(d[i], want, rtol=1e-6, atol=1e-4)
        if kk:
            unq = a[s : s + kk].T.astype(np.float64) @ b[s : s + kk]
            assert mxrt.calc_diff(d[i].astype(np.float64) - c[i], unq) < 1e-3


def test_deepgemm_module_surface():
    for name in (
        "m_grouped_fp8_gemm_nt_contiguous",
        "m_grouped_fp8_gemm_nt_masked",
        "k_grouped_fp8_gemm_nt_contiguous",
    ):
        assert getattr(deep_gemm, name) is getattr(mxrt, name)
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    assert deep_gemm.fp8_m_grouped_gemm_nt_masked is deep_gemm.m_grouped_fp8_gemm_nt_masked


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_cpu_in_and_out():
    import torch

    rng = np.random.default_rng(8)
    lens = torch.tensor([3, 0, 5])
    qx = mxrt.quantize_mx(torch.from_numpy(_x(rng, (8, 64))).to(torch.bfloat16))
    qw = mxrt.quantize_mx(torch.from_numpy(_x(rng, (3, 16, 64))).to(torch.bfloat16), axis=2)
    d = mxrt.grouped_gemm_mx(qx, qw, lens)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.bfloat16 and d.shape == (8, 16)
    # DeepGEMM call with torch tensors: d written in place
    a, b, ids, exact, _ = _contiguous_case(rng, "ue8m0_bytes")
    ta = (torch.from_numpy(a[0].view(np.uint8)).view(torch.float8_e4m3fn), torch.from_numpy(a[1]))
    tb = (torch.from_numpy(b[0].view(np.uint8)).view(torch.float8_e4m3fn), torch.from_numpy(b[1]))
    td = torch.full(exact.shape, 7.0, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ta, tb, td, torch.from_numpy(ids))
    ok = torch.from_numpy(ids >= 0)
    np.testing.assert_array_equal(td[ok].float().numpy(), exact[ids >= 0].astype(BF16).astype(np.float32))
    assert (td[~ok] == 7).all()


def test_readme_grouped_gemm_examples_run():
    # every python block of the section: the API example and the MoE layer forward and backward in ten lines
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    section = text[text.index("<!-- api:grouped_gemm -->") : text.index("<!-- /api:grouped_gemm -->")]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) >= 2 and any("grouped_gemm_mx_wgrad(col(" in b for b in blocks)
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md:grouped_gemm[{i}]", "exec"), {})
