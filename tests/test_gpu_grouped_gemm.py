"""Grouped MX GEMMs on the GPU (backend "auto": the generic kernel kernels_src/gemm/gemm_mx_grouped_generic.hip, and
on sm_90a the Hopper grouped engine / kernel where they take the problem; tests/test_gpu_grouped_gemm_sm90.py forces
them):
forward, dgrad and wgrad of mxrt.grouped_gemm_mx / grouped_gemm_mx_wgrad and the DeepGEMM entry points
(mxrt.deep_gemm), against float64 math of the dequantized inputs (bf16 / fp16 calc_diff <= 1e-5, fp32 relative
<= 1e-5) and of the unquantized inputs (calc_diff <= 1e-3 for e4m3). Marker ``gpu``: skips without cupy or a device.

Outputs start poisoned (0xFF bytes, NaN) and every launch is synchronised and checked, except in the CUDA-graph
tests, which capture the op once and replay it after writing new group sizes into the same device buffer: any
host read of the groups would invalidate the capture or freeze the sizes.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import ml_dtypes
import numpy as np
import pytest
from support.grouped_cases import check, dev, group_lens, host, values

import mxrt
import mxrt.deep_gemm as deep_gemm
from mxrt.problems.grouped_gemm import grouped_gemm_problem, wgrad_problem
from mxrt.reference.grouped_gemm import grouped_gemm_f64

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.runtime import get_arch  # noqa: E402

POISON = 0xFF
BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def poisoned():
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as session:
        yield session


CASES = [(g, kind) for g in (1, 4, 32, 256) for kind in ("balanced", "unbalanced", "empty")]


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("g,kind", CASES, ids=lambda v: str(v))
def test_forward_and_dgrad(g, kind, out_dtype):
    rng = np.random.default_rng(g)
    m, n, k = 1024, 192, 256
    lens = group_lens(kind, g, m, rng)
    m = int(lens.sum())
    x, w, go = values(rng, (m, k)), values(rng, (g, n, k)), values(rng, (m, n))
    qx, qw, qgo = mxrt.quantize_mx(x), mxrt.quantize_mx_dual_grouped(w), mxrt.quantize_mx(go)
    for a, b, ref_fn in (
        (qx, qw.row, lambda gg, r: x[r] @ w[gg].T),  # forward
        (qgo, qw.col, lambda gg, r: go[r] @ w[gg]),  # dgrad: W_g^T quantized along n
    ):
        got = mxrt.grouped_gemm_mx(dev(a), dev(b), cupy.asarray(lens, cupy.int32), out_dtype=out_dtype)
        assert type(got).__module__.startswith("cupy")
        p = grouped_gemm_problem(a, b, lens, out_dtype="float32")
        want, _ = grouped_gemm_f64(p)
        h = host(got, out_dtype)
        check(h, want, out_dtype, f"G={g} {kind}")
        offs = mxrt.group_offsets(lens)
        unq = np.concatenate([ref_fn(i, slice(int(offs[i]), int(offs[i + 1]))) for i in range(g)])
        assert mxrt.calc_diff(h, unq) <= 1e-3


@pytest.mark.parametrize("pair", [("e4m3", "e5m2"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids="x".join)
def test_format_pairs(pair):
    rng = np.random.default_rng(5)
    lens = np.array([100, 0, 300, 1])
    m, n, k = int(lens.sum()), 130, 160
    qa, qb = mxrt.quantize_mx(values(rng, (m, k)), pair[0]), mxrt.quantize_mx(values(rng, (4, n, k)), pair[1], axis=2)
    got = mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(lens), out_dtype="float32")
    want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))
    check(host(got, "float32"), want, "float32")


def test_numpy_inputs_on_the_gpu_backend_and_bitwise_reruns():
    rng = np.random.default_rng(6)
    lens = np.array([33, 0, 200, 7])
    m, n, k = int(lens.sum()), 96, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (4, n, k)), axis=2)
    got = mxrt.grouped_gemm_mx(qa, qb, lens, backend="gpu")
    assert isinstance(got, np.ndarray) and got.dtype == BF16
    check(got.astype(np.float64), grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens))[0], "bfloat16")
    a, b, dl = dev(qa), dev(qb), cupy.asarray(lens)
    first = mxrt.grouped_gemm_mx(a, b, dl).get()
    for _ in range(3):
        np.testing.assert_array_equal(mxrt.grouped_gemm_mx(a, b, dl).get(), first)


@pytest.mark.parametrize("bad", [[10, 20, 5, 0], [400, 400, 400, 400], [-5, 300, -1, 2]], ids=str)
def test_device_lens_the_host_cannot_check(bad):
    """Lens summing short of M (rows past the last group become zeros), past M (cut), negative (0): no fault."""
    rng = np.random.default_rng(7)
    lens = np.array([100, 100, 100, 100])
    qa, qb = mxrt.quantize_mx(values(rng, (400, 64))), mxrt.quantize_mx(values(rng, (4, 72, 64)), axis=2)
    got = host(mxrt.grouped_gemm_mx(dev(qa), dev(qb), cupy.asarray(bad), out_dtype="float32"), "float32")
    clamped = np.clip(np.asarray(bad), 0, 400)
    eff = np.diff(np.concatenate([[0], np.minimum(np.cumsum(clamped), 400)]))
    p = dataclasses.replace(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"), groups=eff)
    check(got, grouped_gemm_f64(p)[0], "float32")


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("g,kind", [(1, "balanced"), (4, "unbalanced"), (32, "empty"), (256, "unbalanced")])
def test_wgrad(g, kind, out_dtype):
    rng = np.random.default_rng(g + 1)
    lens = group_lens(kind, g, 2048, rng)
    m, n, k = int(lens.sum()), 160, 96
    go, x = values(rng, (m, n)), values(rng, (m, k))
    qg = mxrt.quantize_mx_grouped(go, lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(x, lens, colwise=True, col_align=32)
    got = mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qx.col), cupy.asarray(lens), out_dtype=out_dtype)
    want, _ = grouped_gemm_f64(wgrad_problem(qg, qx, lens))
    h = host(got, out_dtype)
    check(h, want, out_dtype, f"wgrad G={g} {kind}")
    offs = mxrt.group_offsets(lens)
    unq = np.stack([go[offs[i] : offs[i + 1]].T @ x[offs[i] : offs[i + 1]] for i in range(g)])
    assert mxrt.calc_diff(h, unq) <= 1e-3


def test_wgrad_accumulate():
    rng = np.random.default_rng(9)
    lens = np.array([5, 0, 300, 64])
    m, n, k = int(lens.sum()), 96, 64
    qg = mxrt.quantize_mx_grouped(values(rng, (m, n)), lens, colwise=True, col_align=32)
    qx = mxrt.quantize_mx_grouped(values(rng, (m, k)), lens, colwise=True, col_align=32)
    start = values(rng, (4, n, k))
    out = cupy.asarray(start)
    res = mxrt.grouped_gemm_mx_wgrad(dev(qg.col), dev(qx.col), cupy.asarray(lens), out=out, accumulate=True)
    assert res is out
    want, _ = grouped_gemm_f64(wgrad_problem(qg, qx, lens))
    check(out.get().astype(np.float64), want + start, "float32")
    np.testing.assert_array_equal(out.get()[1], start[1])  # an empty group leaves out unchanged


def test_deepgemm_contiguous_minus_one_rows_untouched():
    rng = np.random.default_rng(10)
    lens = np.array([50, 0, 300, 7, 129])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 256, 384, lens.size
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    ca, sa = mxrt.per_token_cast_to_fp8(x, True)  # DeepGEMM's UE8M0 recipe: 1x128 / 128x128, power-of-two sf
    cb, sb = zip(*(mxrt.per_block_cast_to_fp8(w[i], True) for i in range(g)), strict=True)
    sa_b, sb_b = (sa.view(np.uint32) >> 23).astype(np.uint8), (np.stack(sb).view(np.uint32) >> 23).astype(np.uint8)
    a, b = (cupy.asarray(ca), cupy.asarray(sa_b)), (cupy.asarray(np.stack(cb)), cupy.asarray(sb_b))
    d = cupy.empty((m, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(ids))
    h = d.get()
    assert (h[ids < 0] == 0xFFFF).all()  # -1 rows untouched (still poison)
    ha, hb = (ca, sa_b), (np.stack(cb), sb_b)
    ref = np.full((m, n), 0xFFFF, np.uint16).view(BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ha, hb, ref, ids)  # the host twin
    ok = ids >= 0
    check(h.view(BF16)[ok].astype(np.float64), ref[ok].astype(np.float64), "bfloat16")
    unq = np.concatenate([x[ids == i] @ w[i].T for i in range(g)])
    assert mxrt.calc_diff(h.view(BF16)[ok].astype(np.float64), unq) <= 1e-3


def test_deepgemm_masked_all_masked_m():
    rng = np.random.default_rng(11)
    g, max_m, n, k = 6, 256, 128, 256
    qa, qb = mxrt.quantize_mx(values(rng, (g, max_m, k)), axis=2), mxrt.quantize_mx(values(rng, (g, n, k)), axis=2)
    a, b = (cupy.asarray(qa.data), cupy.asarray(qa.scales)), (cupy.asarray(qb.data), cupy.asarray(qb.scales))
    for masked in ([0, 0, 0, 0, 0, 0], [0, 1, 127, 128, 129, 256], [256] * 6):
        mm = np.array(masked, np.int32)
        d = cupy.empty((g, max_m, n), cupy.uint16)
        d.view(cupy.uint8).fill(POISON)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, cupy.asarray(mm), expected_m=64)
        ref = np.zeros((g, max_m, n), BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked((qa.data, qa.scales), (qb.data, qb.scales), ref, mm, 64)
        own = np.arange(max_m)[None, :] < mm[:, None]
        h = d.get()
        assert (h[~own] == 0xFFFF).all(), masked
        if own.any():
            check(h.view(BF16)[own].astype(np.float64), ref[own].astype(np.float64), "bfloat16", str(masked))


def test_cuda_graph_capture_follows_new_groupgroup_lens():
    """grouped_gemm_mx (group_lens), the wgrad and the masked DeepGEMM call are captured once; between replays new
    sizes are written into the same device buffers and the replay must compute with them."""
    if get_arch().vendor != "nvidia":
        pytest.skip("the capture test uses CUDA stream capture")
    rng = np.random.default_rng(12)
    g, m, n, k = 8, 1024, 128, 128
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    qa, qb = mxrt.quantize_mx(x), mxrt.quantize_mx(w, axis=2)
    a, b = dev(qa), dev(qb)
    lens_sets = [group_lens("balanced", g, m, rng), group_lens("unbalanced", g, m, rng), group_lens("empty", g, m, rng)]
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        lens_d = cupy.asarray(lens_sets[0])
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.grouped_gemm_mx(a, b, lens_d, out=out)  # compile, warm the pool
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


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_cuda_tensors_in_and_out():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    rng = np.random.default_rng(13)
    lens = np.array([70, 0, 186])
    m, n, k = int(lens.sum()), 64, 128
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (3, n, k)), axis=2)
    t = lambda v: torch.from_numpy(np.ascontiguousarray(v)).cuda()  # noqa: E731
    ta = dataclasses.replace(qa, data=t(qa.data), scales=t(qa.scales))
    tb = dataclasses.replace(qb, data=t(qb.data), scales=t(qb.scales))
    got = mxrt.grouped_gemm_mx(ta, tb, t(lens))
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == torch.bfloat16
    want, _ = grouped_gemm_f64(grouped_gemm_problem(qa, qb, lens, out_dtype="float32"))
    check(got.float().cpu().numpy().astype(np.float64), want, "bfloat16")
    d = torch.full((m, n), 7.0, dtype=torch.bfloat16, device="cuda")
    ids = mxrt.contiguous_m_indices(lens, 1)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (t(qa.data).view(torch.float8_e4m3fn), t(qa.scales)),
        (t(qb.data).view(torch.float8_e4m3fn), t(qb.scales)),
        d,
        t(ids),
    )
    check(d.float().cpu().numpy().astype(np.float64), want, "bfloat16")


def test_deepgemm_hopper_recipe_float32_scales():
    """DeepGEMM's SM90 recipe (float32 1x128 activations, 128x128 weights, any values) on the GPU (SCALE_F32)."""
    rng = np.random.default_rng(14)
    lens = np.array([200, 0, 56, 300])
    ids = mxrt.contiguous_m_indices(lens, 128)
    m, n, k, g = ids.size, 256, 512, lens.size
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    ca, sa = mxrt.per_token_cast_to_fp8(x, False)
    cb, sb = (np.stack(v) for v in zip(*(mxrt.per_block_cast_to_fp8(w[i], False) for i in range(g)), strict=True))
    d = cupy.empty((m, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    dev_a, dev_b = (cupy.asarray(ca), cupy.asarray(sa)), (cupy.asarray(cb), cupy.asarray(sb))
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(dev_a, dev_b, d, cupy.asarray(ids))
    ref = np.zeros((m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((ca, sa), (cb, sb), ref, ids)
    h = d.get()
    ok = ids >= 0
    assert (h[~ok] == 0xFFFF).all()
    check(h.view(BF16)[ok].astype(np.float64), ref[ok].astype(np.float64), "bfloat16")
    unq = np.concatenate([x[ids == i] @ w[i].T for i in range(g)])
    assert mxrt.calc_diff(h.view(BF16)[ok].astype(np.float64), unq) <= 1e-3


@pytest.mark.parametrize("recipe", ["f32", "ue8m0"])
def test_deepgemm_k_grouped(recipe):
    rng = np.random.default_rng(15)
    ks, m, n = [256, 0, 512, 128, 1024], 256, 384
    starts = np.cumsum([0, *ks[:-1]])
    a, b = values(rng, (sum(ks), m)), values(rng, (sum(ks), n))

    def cast(v):  # DeepGEMM per_channel_cast_to_fp8 of [K, mn], then K-major per group
        q, sf = mxrt.per_token_cast_to_fp8(np.ascontiguousarray(v.T), recipe != "f32")
        flat = np.concatenate([q[:, s : s + kk].reshape(-1) for s, kk in zip(starts, ks, strict=True)])
        return flat, sf if recipe == "f32" else (sf.view(np.uint32) >> 23).astype(np.uint8)

    qa, qb = cast(a), cast(b)
    c = values(rng, (len(ks), m, n)) * 32
    want = c.copy()
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(qa, qb, want, ks, np.array(ks, np.int32), c=want)
    d = cupy.asarray(c)
    dev = lambda q: (cupy.asarray(q[0]), cupy.asarray(q[1]))  # noqa: E731
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(dev(qa), dev(qb), d, ks, cupy.asarray(np.array(ks, np.int32)), c=d)
    check(d.get().astype(np.float64), want.astype(np.float64), "float32")
    for i, (s, kk) in enumerate(zip(starts, ks, strict=True)):
        if kk:
            unq = a[s : s + kk].T.astype(np.float64) @ b[s : s + kk]
            assert mxrt.calc_diff(d.get()[i].astype(np.float64) - c[i], unq) <= 1e-3


def test_deepgemm_psum_layout_on_the_device():
    rng = np.random.default_rng(16)
    lens = np.array([50, 0, 300, 7, 129])
    psum, ids = mxrt.contiguous_psum_layout(lens), mxrt.contiguous_m_indices(lens, 128)
    m, n, k = ids.size, 128, 256
    qa, qb = mxrt.quantize_mx(values(rng, (m, k))), mxrt.quantize_mx(values(rng, (lens.size, n, k)), axis=2)
    d = cupy.empty((m, n), cupy.uint16)
    d.view(cupy.uint8).fill(POISON)
    a, b = (cupy.asarray(qa.data), cupy.asarray(qa.scales)), (cupy.asarray(qb.data), cupy.asarray(qb.scales))
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(psum), use_psum_layout=True)
    ref = np.zeros((m, n), BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((qa.data, qa.scales), (qb.data, qb.scales), ref, ids)
    h = d.get()
    assert (h[ids < 0] == 0xFFFF).all()
    check(h.view(BF16)[ids >= 0].astype(np.float64), ref[ids >= 0].astype(np.float64), "bfloat16")
