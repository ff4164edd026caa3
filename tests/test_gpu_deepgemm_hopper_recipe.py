"""DeepGEMM's entry points on sm_90a with DeepGEMM's Hopper recipe (float32 scales: activations 1x128, weights 128x128).
The contiguous and masked calls on the grouped engine's ``SCALE_F32`` builds (``MXRT_GROUPED_GEMM_KERNEL=sm90_ws``,
kernels_src/gemm/gemm_mx_grouped_sm90_ws.hip): against the float64 dequantised inputs (calc_diff <= 1e-5 in bf16, and
each row on its own; the unquantised inputs' bar, calc_diff <= 1e-3, is in test_gpu_grouped_gemm.py), rows the call
does not own left poisoned, bitwise-stable, every fp8 pair, K and n tails, scales over many binades, groups sharing a
tile, a CUDA-graph replay with new masked_m. The k-grouped wgrad on the sm90_bf16 route (kgrouped_to_bf16 +
gemm_wgrad_bf16_sm90 MODE 2 / MODE 0): float32 and UE8M0 scales, c none / separate / in place, fp32 relative error <=
1e-5 per group, bitwise-stable, the gate's exact fallback, 64 groups and a graph replay with new device ks, device ks
the host cannot check. Marker ``gpu``; skips off sm_90a."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.grouped_cases import check, forced_sm90_kernel, group_lens, values

import mxrt
import mxrt.deep_gemm as deep_gemm

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

POISON = 0xFF
BF16 = ml_dtypes.bfloat16
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
PAIRS = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2")]


@pytest.fixture(autouse=True)
def engine(monkeypatch):
    with forced_sm90_kernel(monkeypatch, "sm90_ws", POISON) as session:
        yield session


def _cast(x: np.ndarray, fmt: str, gmn: int, rng: np.random.Generator, spread: int) -> tuple[np.ndarray, np.ndarray]:
    """DeepGEMM's cast of ``x [..., mn, k]`` to ``fmt`` with float32 scales per 1 x 128 (``gmn`` 1) or 128 x 128 blocks
    (amax / fmt max), each block's scale then multiplied by 2^[-spread, spread] (the codes stay those of the cast)."""
    fmax = float(ml_dtypes.finfo(FP8[fmt]).max)
    *lead, mn, k = x.shape
    kb, mb = -(-k // 128), -(-mn // gmn)
    pad = np.zeros((*lead, mb * gmn, kb * 128), np.float32)
    pad[..., :mn, :k] = x
    blocks = pad.reshape(*lead, mb, gmn, kb, 128)
    amax = np.maximum(np.abs(blocks).max(axis=(-3, -1)), 1e-4).astype(np.float32)
    sf = (amax / fmax).astype(np.float32)
    codes = (blocks / sf[..., :, None, :, None]).astype(FP8[fmt])
    codes = codes.reshape(*lead, mb * gmn, kb * 128)[..., :mn, :k]
    sf = (sf * np.exp2(rng.integers(-spread, spread + 1, sf.shape))).astype(np.float32)
    return np.ascontiguousarray(codes), sf


def _dequant(codes: np.ndarray, sf: np.ndarray, gmn: int) -> np.ndarray:
    mn, k = codes.shape[-2:]
    s = np.repeat(np.repeat(sf.astype(np.float64), gmn, axis=-2)[..., :mn, :], 128, axis=-1)[..., :k]
    return codes.astype(np.float64) * s


def _dev(pair: tuple[np.ndarray, np.ndarray]) -> tuple:
    """Device operands: CuPy has no fp8 dtype (its uint8 codes mean e4m3), so e5m2 codes go in as torch fp8 tensors,
    as a DeepGEMM user passes them; e4m3 as CuPy uint8 codes."""
    codes, sf = pair
    if codes.dtype != FP8["e5m2"]:
        return cupy.asarray(codes.view(np.uint8)), cupy.asarray(sf)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(codes.view(np.uint8)).cuda().view(torch.float8_e5m2)
    return t, torch.from_numpy(sf).cuda()


def _rows_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Each row on its own within bf16 rounding (relative 2-norm <= 1e-2): rows and blocks span many binades here,
    so the whole-array calc_diff alone would not see an error in the small ones."""
    num = np.linalg.norm(got - want, axis=-1)
    den = np.linalg.norm(want, axis=-1)
    bad = num > 1e-2 * den
    assert not bad.any(), f"{what}: {int(bad.sum())} rows off, worst {np.max(num / np.maximum(den, 1e-300)):.3g}"


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
@pytest.mark.parametrize("g,kind", [(1, "balanced"), (4, "unbalanced"), (8, "empty"), (32, "unbalanced")])
def test_contiguous(pair, g, kind):
    rng = np.random.default_rng(g)
    n, k = 200, 320  # an n tail and a 64-wide last K block
    lens = group_lens(kind, g, 96 * g + 37, rng)
    ids = mxrt.contiguous_m_indices(lens, 128)
    m = ids.size
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    ca, sa = _cast(x, pair[0], 1, rng, 20)
    cb, sb = _cast(w, pair[1], 128, rng, 20)
    d = cupy.full((m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(_dev((ca, sa)), _dev((cb, sb)), d, cupy.asarray(ids))
    h = d.get()
    own = ids >= 0
    assert (h[~own] == 0xFFFF).all(), "rows of no group were written"
    a64, b64 = _dequant(ca, sa, 1), _dequant(cb, sb, 128)
    want = np.concatenate([a64[ids == i] @ b64[i].T for i in range(g)]) if own.any() else np.zeros((0, n))
    got = h.view(BF16)[own].astype(np.float64)  # rows of the groups in order, as `want`
    check(got, want, "bfloat16", f"{pair} {kind} G={g}")
    _rows_close(got, want, f"{pair} {kind} G={g}")
    d2 = cupy.full((m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(_dev((ca, sa)), _dev((cb, sb)), d2, cupy.asarray(ids))
    assert (d2.get() == h).all(), "not bitwise-stable"


def _check_masked(h: np.ndarray, masked, a64: np.ndarray, b64: np.ndarray, what: str = "") -> None:
    """A masked call's result ``h`` (bf16 bits ``[G, max_m, n]``, poisoned 0xFFFF before the call): rows at or past
    ``masked[g]`` untouched, the others against the float64 reference (calc_diff and each row on its own)."""
    for i, r in enumerate(int(v) for v in masked):
        assert (h[i, r:] == 0xFFFF).all(), f"{what} group {i}: rows past masked_m written"
        if r:
            got, want = h[i, :r].view(BF16).astype(np.float64), a64[i, :r] @ b64[i].T
            check(got, want, "bfloat16", f"{what} group {i}")
            _rows_close(got, want, f"{what} group {i}")


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
def test_masked(pair):
    rng = np.random.default_rng(11)
    g, max_m, n, k = 6, 200, 256, 448
    masked = np.array([0, 1, 128, 199, 200, 77], np.int32)
    x, w = values(rng, (g, max_m, k)), values(rng, (g, n, k))
    ca, sa = _cast(x, pair[0], 1, rng, 30)
    cb, sb = _cast(w, pair[1], 128, rng, 30)
    d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(_dev((ca, sa)), _dev((cb, sb)), d, cupy.asarray(masked), max_m)
    _check_masked(d.get(), masked, _dequant(ca, sa, 1), _dequant(cb, sb, 128))


def test_masked_graph_replay_with_new_masked_m():
    rng = np.random.default_rng(12)
    g, max_m, n, k = 4, 256, 128, 256
    x, w = values(rng, (g, max_m, k)), values(rng, (g, n, k))
    ca, sa = _cast(x, "e4m3", 1, rng, 4)
    cb, sb = _cast(w, "e4m3", 128, rng, 4)
    a, b = _dev((ca, sa)), _dev((cb, sb))
    a64, b64 = _dequant(ca, sa, 1), _dequant(cb, sb, 128)
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        mm = cupy.asarray(np.array([256, 0, 5, 130], np.int32))
        d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, max_m)  # compile, warm the pool
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, max_m)
            graph = stream.end_capture()
        for masked in ([1, 255, 0, 256], [0, 0, 0, 0], [256, 256, 256, 256]):
            mm[...] = cupy.asarray(np.array(masked, np.int32))
            d.fill(0xFFFF)
            cupy.cuda.Device().synchronize()
            graph.launch(stream=stream)
            stream.synchronize()
            _check_masked(d.get(), masked, a64, b64, str(masked))


# ---- k-grouped wgrad (the sm90_bf16 route: kgrouped_to_bf16 + gemm_wgrad_bf16_sm90 MODE 2 / MODE 0) ----------------


def _kgrouped(rng, ks, m, n, pair, recipe, spread):
    """DeepGEMM's k-grouped operands of fresh values: a ``[sum(ks), m]`` / b ``[sum(ks), n]`` cast per channel (1 x 128
    along K; ``recipe`` "f32" float32 scales times 2^[-spread, spread], "ue8m0" power-of-two bytes), each group's
    ``[mn, K_g]`` block K-major one after another. Returns the pairs and the float64 dequantised operands."""
    starts = np.cumsum([0, *ks[:-1]])
    out = []
    for v, fmt in ((values(rng, (sum(ks), m)), pair[0]), (values(rng, (sum(ks), n)), pair[1])):
        codes, sf = _cast(np.ascontiguousarray(v.T), fmt, 1, rng, spread)  # [mn, total], [mn, total / 128]
        if recipe == "ue8m0":
            e = np.clip(np.ceil(np.log2(sf)), -100, 100)
            codes = codes.astype(np.float64) * (sf / np.exp2(e)).repeat(128, axis=1)[:, : codes.shape[1]]
            codes = codes.astype(FP8[fmt])
            sf = (e + 127).astype(np.uint8)
        flat = np.concatenate([codes[:, s : s + kk].reshape(-1) for s, kk in zip(starts, ks, strict=True)])
        f = sf.astype(np.float64) if recipe == "f32" else np.exp2(sf.astype(np.float64) - 127)
        out.append(((flat, sf), codes.astype(np.float64) * np.repeat(f, 128, axis=1)[:, : codes.shape[1]]))
    return out


def _kg_dev(pair):
    flat, sf = pair
    if flat.dtype != FP8["e5m2"]:
        return cupy.asarray(flat.view(np.uint8)), cupy.asarray(sf)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(flat.view(np.uint8)).cuda().view(torch.float8_e5m2), torch.from_numpy(sf).cuda()


@pytest.mark.parametrize("pair", PAIRS, ids="x".join)
@pytest.mark.parametrize("recipe", ["f32", "ue8m0"])
@pytest.mark.parametrize("c_mode", ["none", "separate", "in_place"])
def test_k_grouped(monkeypatch, pair, recipe, c_mode):
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_bf16")
    rng = np.random.default_rng(21)
    ks, m, n = [256, 0, 512, 128, 1024, 0], 200, 328  # m, n tails of the 128-row / -column tiles
    (qa, a64), (qb, b64) = _kgrouped(rng, ks, m, n, pair, recipe, 12)
    starts = np.cumsum([0, *ks[:-1]])
    c = values(rng, (len(ks), m, n)) * 8
    want = np.stack([a64[:, s : s + kk] @ b64[:, s : s + kk].T for s, kk in zip(starts, ks, strict=True)])
    if c_mode != "none":
        want = want + c
    d = cupy.full((len(ks), m, n), np.nan, cupy.float32)
    cc = None if c_mode == "none" else (d if c_mode == "in_place" else cupy.asarray(c))
    if c_mode == "in_place":
        d[...] = cupy.asarray(c)
    ksd = cupy.asarray(np.array(ks, np.int32))
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(_kg_dev(qa), _kg_dev(qb), d, ks, ksd, c=cc)
    h = d.get().astype(np.float64)
    check(h, want, "float32", f"{pair} {recipe} c {c_mode}")
    for i in range(len(ks)):  # each group on its own (its scales may sit binades from the others')
        err = np.linalg.norm(h[i] - want[i]) / max(np.linalg.norm(want[i]), 1e-300)
        assert err <= 1e-5, f"group {i}: relative error {err}"
    d2 = cupy.full((len(ks), m, n), np.nan, cupy.float32)
    if c_mode == "in_place":
        d2[...] = cupy.asarray(c)
    cc2 = None if c_mode == "none" else (d2 if c_mode == "in_place" else cc)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(_kg_dev(qa), _kg_dev(qb), d2, ks, ksd, c=cc2)
    assert (d2.get().view(np.uint32) == d.get().view(np.uint32)).all(), "not bitwise-stable"


@pytest.mark.parametrize("case", ["nan_code", "scale_out_of_window"])
def test_k_grouped_gate_falls_back_exactly(monkeypatch, case):
    """Blocks the bf16 operands cannot carry exactly (a NaN code; a UE8M0 scale outside the window) raise the gate:
    the bf16 GEMM returns before writing and the generic kernel computes every output (NaN rows where the float64
    reference has them)."""
    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    rng = np.random.default_rng(22)
    ks, m, n = [128, 256], 128, 128
    recipe = "f32" if case == "nan_code" else "ue8m0"
    (qa, a64), (qb, b64) = _kgrouped(rng, ks, m, n, ("e4m3", "e4m3"), recipe, 2)
    if case == "nan_code":
        qa[0].view(np.uint8)[5] = 0x7F  # group 0, row 0, column 5
        a64[0, 5] = np.nan
    else:  # b row 3, group 1's first block (columns 128..255) scaled by 2^(200 - 127)
        old = int(qb[1][3, 1])
        qb[1][3, 1] = 200
        b64[3, 128:256] *= 2.0 ** (200 - old)
    d = cupy.full((2, m, n), 0.0, cupy.float32)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(_kg_dev(qa), _kg_dev(qb), d, ks, cupy.asarray(np.array(ks, np.int32)))
    h = d.get().astype(np.float64)
    want = np.stack([a64[:, :128] @ b64[:, :128].T, a64[:, 128:] @ b64[:, 128:].T])
    assert np.array_equal(np.isnan(h), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.linalg.norm(h[ok] - want[ok]) <= 1e-5 * np.linalg.norm(want[ok])


def test_contiguous_groups_sharing_a_tile():
    """ids aligned to 32 rows only (several groups in one 128-row tile: the engine's per-id rounds) and -1 rows
    between them, with float32 scales."""
    rng = np.random.default_rng(31)
    lens = np.array([40, 0, 17, 100, 3, 64])
    ids = mxrt.contiguous_m_indices(lens, 32)
    m, n, k, g = ids.size, 136, 256, lens.size
    x, w = values(rng, (m, k)), values(rng, (g, n, k))
    ca, sa = _cast(x, "e4m3", 1, rng, 6)
    cb, sb = _cast(w, "e4m3", 128, rng, 6)
    d = cupy.full((m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(_dev((ca, sa)), _dev((cb, sb)), d, cupy.asarray(ids))
    h = d.get()
    own = ids >= 0
    assert (h[~own] == 0xFFFF).all()
    a64, b64 = _dequant(ca, sa, 1), _dequant(cb, sb, 128)
    want = np.concatenate([a64[ids == i] @ b64[i].T for i in range(g)])
    got = h.view(BF16)[own].astype(np.float64)
    check(got, want, "bfloat16")
    _rows_close(got, want, "groups sharing tiles")


def test_k_grouped_many_groups_and_graph_replay(monkeypatch):
    """64 groups (some empty), then a CUDA-graph replay after new ks are written into the same device buffer (same
    total): the route reads its group ends on the device."""
    monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "sm90_bf16")
    rng = np.random.default_rng(32)
    g, m, n = 64, 128, 256
    ks = list(rng.choice([0, 128, 256], g))
    (qa, _), (qb, _) = _kgrouped(rng, ks, m, n, ("e4m3", "e4m3"), "f32", 4)
    total = sum(ks)

    def cat(q, rows, kk):  # the flat blocks read under the split kk: [rows, total] dequantised
        flat, sf = q
        offs = np.cumsum([0, *(rows * c for c in kk)])
        codes = np.concatenate([flat[o : o + rows * c].reshape(rows, c) for o, c in zip(offs, kk, strict=False)], 1)
        return codes.astype(np.float64) * np.repeat(sf.astype(np.float64), 128, axis=1)

    def want_for(kk):
        av, bv = cat(qa, m, kk), cat(qb, n, kk)
        starts = np.cumsum([0, *kk[:-1]])
        return np.stack([av[:, s : s + c] @ bv[:, s : s + c].T for s, c in zip(starts, kk, strict=True)])

    a, b = _kg_dev(qa), _kg_dev(qb)
    ksd = cupy.asarray(np.array(ks, np.int32))
    d = cupy.full((g, m, n), np.nan, cupy.float32)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ksd)
    check(d.get().astype(np.float64), want_for(ks), "float32", "64 groups")
    with mxrt.runtime.debug():  # real allocations, no synchronisation inside the capture
        stream = cupy.cuda.Stream()
        with stream:
            stream.begin_capture()
            deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ksd)
            graph = stream.end_capture()
        new = list(np.roll(ks, 5))  # same total, other split (the host ks are not re-read by the device)
        ksd[...] = cupy.asarray(np.array(new, np.int32))
        d.fill(np.nan)
        cupy.cuda.Device().synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
    assert sum(new) == total
    check(d.get().astype(np.float64), want_for(new), "float32", "replay with new ks")


@pytest.mark.parametrize("recipe", ["f32", "ue8m0"])
def test_k_grouped_device_ks_the_host_cannot_check(monkeypatch, recipe):
    """Device ks that differ from the host's (not multiples of the route's 128 / 32 columns, or not summing to
    sum(ks)) raise the route's gate: the generic kernel computes every output, so auto gives its bits exactly."""
    rng = np.random.default_rng(33)
    ks, m, n = [128, 256, 128], 64, 96
    (qa, _), (qb, _) = _kgrouped(rng, ks, m, n, ("e4m3", "e4m3"), recipe, 2)
    a, b = _kg_dev(qa), _kg_dev(qb)
    for dev_ks in ([192, 64, 256], [16, 496, 0], [128, 128, 0]):
        ksd = cupy.asarray(np.array(dev_ks, np.int32))
        got = cupy.full((3, m, n), np.nan, cupy.float32)
        monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, got, ks, ksd)
        want = cupy.full((3, m, n), np.nan, cupy.float32)
        monkeypatch.setenv("MXRT_GROUPED_GEMM_KERNEL", "generic")
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, want, ks, ksd)
        g, w = got.get(), want.get()
        ends = np.cumsum(dev_ks)
        gated = sum(dev_ks) != sum(ks) or bool((ends % (128 if recipe == "f32" else 32)).any())
        if gated:
            assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), f"device ks {dev_ks}"
        else:  # a split the route takes (UE8M0 at 32 columns): the same math on the tensor cores
            check(g.astype(np.float64), w.astype(np.float64), "float32", f"device ks {dev_ks}")


def test_planned_calls_match_unplanned(monkeypatch):
    """The second call of a signature runs its kept launch (mxrt.api.deep_gemm call plans): bitwise the unplanned
    result (MXRT_GROUPED_PLANS=0), rows it does not own untouched, and new device contents (masked_m, codes) read."""
    from mxrt.api import deep_gemm as api

    monkeypatch.delenv("MXRT_GROUPED_GEMM_KERNEL", raising=False)
    rng = np.random.default_rng(34)
    g, max_m, n, k = 4, 200, 256, 384
    x, w = values(rng, (g, max_m, k)), values(rng, (g, n, k))
    ca, sa = _cast(x, "e4m3", 1, rng, 3)
    cb, sb = _cast(w, "e4m3", 128, rng, 3)
    a, b = _dev((ca, sa)), _dev((cb, sb))
    mm = cupy.asarray(np.array([0, 1, 199, 200], np.int32))
    api.clear_plans()
    outs = []
    d = cupy.empty((g, max_m, n), cupy.uint16)
    for plans in ("0", "1", "1"):  # unplanned, the key's first (validated) call, the plan
        monkeypatch.setenv("MXRT_GROUPED_PLANS", plans)
        d.fill(0xFFFF)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 128)
        outs.append(d.get().copy())
    assert len(api._PLANS) == 1
    assert (outs[0] == outs[1]).all() and (outs[0] == outs[2]).all()
    mm[...] = cupy.asarray(np.array([3, 0, 50, 7], np.int32))  # new device contents, same buffer: the plan reads them
    a[0][...] = cupy.asarray(np.roll(ca.view(np.uint8), 1, axis=1))
    d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 128)  # a new d: a new key (validated route)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 128)  # planned
    assert len(api._PLANS) == 2
    ca2 = np.roll(ca.view(np.uint8), 1, axis=1).view(ca.dtype)
    a64, b64 = _dequant(ca2, sa, 1), _dequant(cb, sb, 128)
    _check_masked(d.get(), [3, 0, 50, 7], a64, b64, "planned")


@pytest.mark.parametrize("kind", ["masked", "contiguous"])
def test_ue8m0_per_128_on_the_engine(kind):
    """UE8M0 bytes at DeepGEMM's granularity (a 1x128, b 128x128) run the engine's per-128 build: scale bytes far
    outside the fast window on both sides (wide stages: a's 2^-107..2^-7, b's 2^13..2^93) against the float64
    dequantised reference, each row on its own; K and n tails."""
    rng = np.random.default_rng(35)
    g, n, k = 4, 200, 320
    kb = -(-k // 128)
    if kind == "masked":
        max_m = 160
        rows_shape, masked = (g, max_m, k), np.array([0, 1, 159, 160], np.int32)
    else:
        lens = np.array([130, 0, 77, 256])
        ids = mxrt.contiguous_m_indices(lens, 128)
        rows_shape = (ids.size, k)
    ca = (rng.standard_normal(rows_shape) * 4).astype(FP8["e4m3"])
    cb = (rng.standard_normal((g, n, k)) * 4).astype(FP8["e4m3"])
    sa = rng.integers(20, 121, (*rows_shape[:-1], kb)).astype(np.uint8)
    sb = rng.integers(140, 221, (g, -(-n // 128), kb)).astype(np.uint8)
    a64 = ca.astype(np.float64) * np.repeat(np.exp2(sa.astype(np.float64) - 127), 128, axis=-1)[..., :k]
    fb = np.repeat(np.repeat(np.exp2(sb.astype(np.float64) - 127), 128, axis=-2)[:, :n], 128, axis=-1)[..., :k]
    b64 = cb.astype(np.float64) * fb
    a = (cupy.asarray(ca.view(np.uint8)), cupy.asarray(sa))
    b = (cupy.asarray(cb.view(np.uint8)), cupy.asarray(sb))
    if kind == "masked":
        d = cupy.full((g, max_m, n), 0xFFFF, cupy.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, cupy.asarray(masked), 64)
        _check_masked(d.get(), masked, a64, b64, "ue8m0")
    else:
        d = cupy.full((ids.size, n), 0xFFFF, cupy.uint16)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, cupy.asarray(ids))
        h = d.get()
        own = ids >= 0
        assert (h[~own] == 0xFFFF).all()
        want = np.concatenate([a64[ids == i] @ b64[i].T for i in range(g)])
        got = h.view(BF16)[own].astype(np.float64)
        check(got, want, "bfloat16")
        _rows_close(got, want, "contiguous")
