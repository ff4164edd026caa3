"""mxrt.gemm_mx on the GPU: every registered GEMM path of this device against the float64 reference (marker ``gpu``;
skips without cupy or a device).

Every test is parametrized over ``gemm_paths(target)`` of the current device and forces the path with
``MXRT_GEMM_PATH``, so a kernel family that registers a path later gets the same matrix; a case its ``supports()``
declines is skipped with its reason. Tolerances (tests/support/gemm_cases.py): fp32 out relative Frobenius <= 1e-5
and bf16/fp16 calc_diff <= 1e-5 against the dequantized inputs (atomic 16-bit split-K: 1e-5 per split, each split
adds one rounding), calc_diff against the unquantized inputs <= 1e-3 (fp8), 4e-3 (e5m2), 1e-2 / 2e-2 (fp4).
Outputs start poisoned (NaN bytes) and every launch is synchronised, except in the CUDA-graph test.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import check_result, host_result, operands, to_device

import mxrt
from mxrt.problems import GEMM_FORMAT_PAIRS, GEMM_OUT_DTYPES

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")

from mxrt.ops import gemm as gemm_op  # noqa: E402
from mxrt.ops.gemm_paths import gemm_paths  # noqa: E402
from mxrt.runtime import device_available, get_arch  # noqa: E402

POISON = 0xFF  # NaN in fp32, fp16 and bf16
SHAPES = [(1, 1, 1), (7, 13, 33), (129, 65, 100), (256, 256, 512), (1000, 520, 1056), (3, 200, 31), (64, 1, 64)]
PATHS = [p.name for p in gemm_paths(get_arch().target)] if device_available() else ["generic"]
LAYOUTS = (None, *mxrt.SCALE_LAYOUTS)


def poison(shape, dtype):
    """A caller's ``out`` buffer of 0xFF bytes (NaN)."""
    x = cupy.empty(shape, dtype)
    x.view(cupy.uint8).fill(POISON)
    return x


@pytest.fixture(autouse=True)
def poisoned():
    """Outputs start as 0xFF bytes (NaN), workspaces too; every launch is synchronised and checked (the runtime's
    test hook)."""
    with mxrt.runtime.debug(poison=POISON, sync_after_launch=True) as session:
        yield session


def use_path(monkeypatch: pytest.MonkeyPatch, path: str, p_args: tuple, **kw) -> None:
    """Force ``path``; skip when its supports() declines this problem."""
    from mxrt.problems import gemm_problem

    monkeypatch.setenv("MXRT_GEMM_PATH", path)
    p = gemm_problem(*p_args, **kw)
    dg = gemm_op.device_gemm(p)
    why = next(g for g in gemm_paths(get_arch().target) if g.name == path).supports(dg)
    if why is not None:
        pytest.skip(f"{path}: {why}")


def run(monkeypatch, path, a, b, **kw):
    use_path(monkeypatch, path, (a, b), **{k: v for k, v in kw.items() if k != "backend"})
    return mxrt.gemm_mx(a, b, **kw)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", GEMM_OUT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes(monkeypatch, path, shape, out_dtype):
    m, n, k = shape
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=m * 7 + n + k)
    got = run(monkeypatch, path, to_device(qa), to_device(qb), out_dtype=out_dtype)
    assert type(got).__module__.startswith("cupy") and got.shape == (m, n)
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", GEMM_OUT_DTYPES)
@pytest.mark.parametrize("pair", GEMM_FORMAT_PAIRS, ids="x".join)
@pytest.mark.parametrize("shape", [(77, 130, 300), (128, 64, 256)], ids=lambda s: "x".join(map(str, s)))
def test_format_pairs(monkeypatch, path, pair, out_dtype, shape):
    m, n, k = shape
    x, w, qa, qb = operands(m, n, k, *pair, seed=hash(pair) % 1000)
    got = run(monkeypatch, path, to_device(qa), to_device(qb), out_dtype=out_dtype)
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w)


def _device_scales(q, layout):
    s = cupy.asarray(q if isinstance(q, np.ndarray) else q.scales)
    if layout is None:
        return s
    if layout == "turbo16x4:u8":
        return mxrt.preshuffle_scales(s, "turbo16x4")  # the byte form (the default dtype)
    if layout == "turbo16x4":
        return mxrt.preshuffle_scales(s, layout, dtype=np.uint32)  # the zero-extended form: 4 bytes per scale
    return mxrt.preshuffle_scales(s, layout)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lb", LAYOUTS, ids=str)
@pytest.mark.parametrize("la", LAYOUTS, ids=str)
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e4m3")], ids="x".join)
def test_scale_layouts(monkeypatch, path, pair, la, lb):
    m, n, k = 70, 300, 200
    x, w, qa, qb = operands(m, n, k, *pair, seed=3)
    a = (cupy.asarray(qa.data), _device_scales(qa, la), pair[0], k)
    b = (cupy.asarray(qb.data), _device_scales(qb, lb), pair[1], k)
    got = run(monkeypatch, path, a, b, out_dtype="float32", a_scale_layout=la, b_scale_layout=lb)
    assert not check_result(got, qa, qb, "float32", x=x, w=w)


_FORMS = (*mxrt.SCALE_LAYOUTS, "turbo16x4:u8")  # turbo16x4: uint32 words (_device_scales) and bytes
LAYOUT_PAIRS = (
    [(f, None) for f in _FORMS]
    + [(None, f) for f in _FORMS]
    + [
        ("aiter32x8", "cublas128x4"),
        ("deepgemm_ue8m0", "turbo16x4:u8"),
    ]
)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("pair_layouts", LAYOUT_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize(
    "case",
    [(300, 260, 456, 1, "e4m3", "e4m3"), (40, 300, 520, 3, "e2m1", "e4m3"), (130, 70, 200, 2, "e2m1", "e2m1")],
    ids=["large_tile", "small_tile_split3", "fp4_split2"],
)
def test_scale_layouts_16bit_out_extreme_scales(monkeypatch, path, case, pair_layouts):
    """Preshuffled scales read in place with bf16 out (what sm90_wgmma serves for fp8): several tiles, rows and
    columns past a layout's tile, split-K splits off the 4-block stage grid, and scale pairs over the whole E8M0
    range (wide stages) plus a block of 254 x 254 on zero codes."""
    m, n, k, split, fa, fb = case
    la, lb = pair_layouts
    rng = np.random.default_rng(m * 3 + n)
    _, _, qa, qb = operands(m, n, k, fa, fb, seed=m + k)
    sa, sb = _extreme_pairs(m, n, k, rng, 0)
    a_codes = qa.data.copy()
    sa[:, 2], sb[:, 2] = 254, 254
    bpb = 16 if fa == "e2m1" else 32  # code bytes per MX block
    a_codes[:, 2 * bpb : 3 * bpb] = 0
    want = mxrt.reference.gemm_mx((a_codes, sa, fa, k), (qb.data, sb, fb, k), out_dtype="float64")
    assert np.isfinite(want.astype(ml_dtypes.bfloat16)).all() and np.abs(want).max() > 0
    a = (cupy.asarray(a_codes), _device_scales(sa, la), fa, k)
    b = (cupy.asarray(qb.data), _device_scales(sb, lb), fb, k)
    name = {"turbo16x4:u8": "turbo16x4"}
    kw = dict(out_dtype="bfloat16", split_k=split, a_scale_layout=name.get(la, la), b_scale_layout=name.get(lb, lb))
    got = host_result(run(monkeypatch, path, a, b, **kw), "bfloat16")
    assert np.isfinite(got).all(), f"{int((~np.isfinite(got)).sum())} non-finite outputs"
    assert mxrt.reference.calc_diff(got, want) <= 1e-5


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", mxrt.SCALE_LAYOUTS)
def test_quantize_mx_with_scale_layout_feeds_the_gemm(monkeypatch, path, layout):
    """The GPU quantizer emits preshuffled scales (MXArray.scale_layout) and the GEMM reads them as they are."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((100, 160)).astype(np.float32), rng.standard_normal((33, 160)).astype(np.float32)
    qa = mxrt.quantize_mx(cupy.asarray(x), "e4m3", scale_layout=layout)
    qb = mxrt.quantize_mx(cupy.asarray(w), "e4m3")
    assert qa.scale_layout == layout
    got = run(monkeypatch, path, qa, qb, out_dtype="float32")
    ha = mxrt.quantize_mx(x, "e4m3", backend="numpy")
    assert not check_result(got, ha, mxrt.quantize_mx(w, "e4m3", backend="numpy"), "float32", x=x, w=w)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", GEMM_OUT_DTYPES)
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split", [1, 2, 3, "max"])
@pytest.mark.parametrize(
    "case", [(129, 65, 1056, "e4m3", "e4m3"), (34, 65, 300, "e2m1", "e4m3"), (16, 64, 100, "e5m2", "e5m2")], ids=str
)
def test_split_k(monkeypatch, path, case, split, deterministic, out_dtype):
    m, n, k, fa, fb = case
    split_k = -(-k // 32) if split == "max" else split
    x, w, qa, qb = operands(m, n, k, fa, fb, seed=split_k)
    got = run(
        monkeypatch,
        path,
        to_device(qa),
        to_device(qb),
        out_dtype=out_dtype,
        split_k=split_k,
        deterministic=deterministic,
    )
    rounded = split_k if (not deterministic and out_dtype != "float32") else 1
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w, splits_rounded=rounded)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_deterministic_split_k_is_bitwise_stable(monkeypatch, path, out_dtype):
    x, w, qa, qb = operands(200, 96, 1000, "e4m3", "e4m3", seed=11)
    a, b = to_device(qa), to_device(qb)
    first = run(monkeypatch, path, a, b, out_dtype=out_dtype, split_k=7).copy()
    diff = 0
    for _ in range(100):
        again = mxrt.gemm_mx(a, b, out_dtype=out_dtype, split_k=7)
        diff += int((again.view(cupy.uint8) != first.view(cupy.uint8)).sum())
    assert diff == 0
    assert not check_result(first, qa, qb, out_dtype, x=x, w=w)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", GEMM_OUT_DTYPES)
@pytest.mark.parametrize("mode", ["split1", "det3", "atomic3"])
def test_poisoned_out_argument(monkeypatch, path, out_dtype, mode):
    """A caller's ``out`` full of NaN bytes is overwritten everywhere (atomic mode zeroes it first)."""
    m, n, k = 65, 67, 200
    x, w, qa, qb = operands(m, n, k, "e4m3", "e5m2", seed=2)
    dt = gemm_op.DEVICE_OUT_DTYPES[out_dtype]
    out = poison((m, n), dt)
    split_k = 1 if mode == "split1" else 3
    got = run(
        monkeypatch,
        path,
        to_device(qa),
        to_device(qb),
        out_dtype=out_dtype,
        out=out,
        split_k=split_k,
        deterministic=mode != "atomic3",
    )
    assert got is out
    assert not check_result(got, qa, qb, out_dtype, x=x, w=w, splits_rounded=3 if mode == "atomic3" else 1)


@pytest.mark.parametrize("path", PATHS)
def test_unaligned_16bit_out_in_atomic_mode(monkeypatch, path):
    """A bf16 out view starting 2 bytes into its buffer: no packed word may reach outside it."""
    m, n, k = 9, 31, 96
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=4)
    buf = cupy.full(m * n + 2, 0x7F80, cupy.uint16)  # guards: bf16 +Inf on both sides
    out = buf[1 : m * n + 1].reshape(m, n)
    got = run(
        monkeypatch,
        path,
        to_device(qa),
        to_device(qb),
        out_dtype="bfloat16",
        out=out,
        split_k=3,
        deterministic=False,
    )
    assert not check_result(got, qa, qb, "bfloat16", splits_rounded=3)
    assert int(buf[0]) == 0x7F80 and int(buf[-1]) == 0x7F80


@pytest.mark.parametrize("path", PATHS)
def test_extreme_scales_and_nan(monkeypatch, path):
    """Scales over the whole E8M0 range (products kept in fp32's normal range) and 0xFF (NaN) rows/blocks."""
    m, n, k = 40, 36, 160
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=8)
    rng = np.random.default_rng(8)
    base = np.linspace(0, 254, qa.scales.shape[1]).astype(np.int64)  # 0, 63, 127, 190, 254 per K block
    sa = np.clip(base + rng.integers(-6, 7, qa.scales.shape), 0, 254).astype(np.uint8)
    sb = np.clip(254 - base + rng.integers(-6, 7, qb.scales.shape), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254  # the extreme bytes themselves (2^-127 is an fp32 subnormal), products 2^0
    sa[:, -1], sb[:, -1] = 254, 0
    sa[3, 1] = 255
    sb[5, 4] = 255
    a = (cupy.asarray(qa.data), cupy.asarray(sa), "e4m3", k)
    b = (cupy.asarray(qb.data), cupy.asarray(sb), "e4m3", k)
    want = mxrt.reference.gemm_mx((qa.data, sa, "e4m3", k), (qb.data, sb, "e4m3", k), out_dtype="float64")
    got = host_result(run(monkeypatch, path, a, b, out_dtype="float32"), "float32")
    nan = np.isnan(want)
    assert nan[3].all() and nan[:, 5].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ok = ~nan
    assert mxrt.reference.relative_error(want[ok], got[ok]) <= 1e-5


def _extreme_pairs(m, n, k, rng, off):
    """Scale bytes over the whole E8M0 range in pairs whose product stays near 2^-off (sa + sb = 254 - off +- 12),
    the extreme bytes themselves (0 with 254 - off, 254 - off with 0); the caller adds one K block where both
    sides are 254 on zero codes (a factor 2^254 times P = 0 must give 0, not NaN)."""
    kb = -(-k // 32)
    base = np.linspace(0, 254, kb).astype(np.int64)
    sa = np.clip(base + rng.integers(-6, 7, (m, kb)), 0, 254).astype(np.uint8)
    sb = np.clip(254 - off - base + rng.integers(-6, 7, (n, kb)), 0, 254).astype(np.uint8)
    sa[:, 0], sb[:, 0] = 0, 254 - off
    sa[:, -1], sb[:, -1] = 254 - off, 0
    return sa, sb


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids="x".join)
def test_extreme_scale_pairs_every_out_dtype(monkeypatch, path, pair, out_dtype):
    """Every path and out dtype (the sm90 path serves 16-bit out for fp8): legal extreme pairs such as sa = 0 with
    sb = 254 (true factor 2^0) must give the reference, never inf / NaN from an intermediate factor."""
    m, n, k = 150, 136, 320
    rng = np.random.default_rng(21)
    _, _, qa, qb = operands(m, n, k, *pair, seed=21)
    # fp16: products scaled down into fp16's range (and not below it), by how large the pair's values get
    off = {0: 36, 1: 20, 2: 12}[pair.count("e2m1")] if out_dtype == "float16" else 0
    sa, sb = _extreme_pairs(m, n, k, rng, off)
    a_codes, b_codes = qa.data.copy(), qb.data.copy()
    zb = 4  # K block 4: both scales 254 on zero codes
    sa[:, zb], sb[:, zb] = 254, 254
    if pair[0] == "e2m1":
        a_codes[:, zb * 16 : zb * 16 + 16] = 0
    else:
        a_codes[:, zb * 32 : zb * 32 + 32] = 0
    a = (cupy.asarray(a_codes), cupy.asarray(sa), pair[0], k)
    b = (cupy.asarray(b_codes), cupy.asarray(sb), pair[1], k)
    want = mxrt.reference.gemm_mx((a_codes, sa, pair[0], k), (b_codes, sb, pair[1], k), out_dtype="float64")
    assert np.isfinite(want.astype(out_dtype)).all() and np.abs(want).max() > 0
    got = host_result(run(monkeypatch, path, a, b, out_dtype=out_dtype), out_dtype)
    assert np.isfinite(got).all(), f"{int((~np.isfinite(got)).sum())} non-finite outputs"
    if out_dtype == "float32":
        assert mxrt.reference.relative_error(want, got) <= 1e-5
    else:
        assert mxrt.reference.calc_diff(got, want) <= 1e-5


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
def test_extreme_scales_nan_16bit_out(monkeypatch, path, out_dtype):
    """NaN scale bytes (0xFF) with 16-bit outputs: exactly the reference's NaN rows and columns, the rest finite
    and within the bar; tiles without any extreme byte sit beside tiles with them (several CTAs)."""
    m, n, k = 300, 260, 512
    rng = np.random.default_rng(9)
    _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=9)
    off = 20 if out_dtype == "float16" else 0  # keeps every product inside fp16's range
    sa = rng.integers(112, 140 - off, qa.scales.shape).astype(np.uint8)
    sb = rng.integers(112, 140 - off, qb.scales.shape).astype(np.uint8)
    sa[:64, 3], sa[64:, 3], sb[:, 3] = 40, 64, 190 - off  # K block 3 is wide (40) in the first row tile only
    sa[200, 7] = 255
    sb[17, 2] = 255
    a = (cupy.asarray(qa.data), cupy.asarray(sa), "e4m3", k)
    b = (cupy.asarray(qb.data), cupy.asarray(sb), "e4m3", k)
    want = mxrt.reference.gemm_mx((qa.data, sa, "e4m3", k), (qb.data, sb, "e4m3", k), out_dtype="float64")
    got = host_result(run(monkeypatch, path, a, b, out_dtype=out_dtype), out_dtype)
    nan = np.isnan(want)
    assert nan[200].all() and nan[:, 17].all() and nan.sum() == m + n - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ok = ~nan
    assert np.isfinite(got[ok]).all() and np.isfinite(want[ok].astype(out_dtype)).all()
    assert mxrt.reference.calc_diff(got[ok], want[ok]) <= 1e-5


@pytest.mark.parametrize("path", PATHS)
def test_numpy_inputs_on_the_gpu_backend(monkeypatch, path):
    x, w, qa, qb = operands(50, 40, 130, "e2m1", "e2m1", seed=6)
    out = np.full((50, 40), np.nan, np.float32)
    got = run(monkeypatch, path, qa, qb, out_dtype="float32", out=out, backend="gpu", split_k=2)
    assert got is out and isinstance(got, np.ndarray)
    assert not check_result(got, qa, qb, "float32", x=x, w=w)
    bf = run(monkeypatch, path, qa, qb, backend="gpu")
    assert isinstance(bf, np.ndarray) and bf.dtype == np.dtype("bfloat16")
    assert not check_result(bf, qa, qb, "bfloat16", x=x, w=w)


def test_auto_backend_runs_device_inputs_on_the_gpu():
    _, _, qa, qb = operands(8, 8, 64, "e4m3", "e4m3", seed=1)
    got = mxrt.gemm_mx(to_device(qa), to_device(qb), out_dtype="float32")
    assert type(got).__module__.startswith("cupy")
    assert not check_result(got, qa, qb, "float32")


@pytest.mark.parametrize("shape", [(0, 5, 64), (5, 0, 64), (6, 5, 0), (0, 0, 0)], ids=str)
@pytest.mark.parametrize("out_dtype", GEMM_OUT_DTYPES)
def test_empty_dims_launch_nothing(poisoned, shape, out_dtype):
    m, n, k = shape
    a = (cupy.zeros((m, k), cupy.uint8), cupy.full((m, -(-k // 32)), 127, cupy.uint8), "e4m3")
    b = (cupy.zeros((n, k), cupy.uint8), cupy.full((n, -(-k // 32)), 127, cupy.uint8), "e4m3")
    got = mxrt.gemm_mx(a, b, out_dtype=out_dtype, split_k=1)
    assert got.shape == (m, n) and not poisoned.launches, poisoned.launches
    assert not host_result(got, out_dtype).any()


def test_cuda_graph_capture_never_syncs():
    """The whole op (the device's default path: deterministic split-K with its workspace and reduce, and atomic
    split-K with its zeroing) is captured on a blocking stream: any host synchronisation would invalidate the
    capture. tests/test_gemm_sm90.py captures the sm90 path on fresh buffers without a warm-up on them."""
    if get_arch().vendor != "nvidia":
        pytest.skip("the capture test uses CUDA stream capture")
    with mxrt.runtime.debug():  # real allocations, no per-launch synchronisation inside the capture
        _capture_and_replay()


def _capture_and_replay():
    m, n, k = 96, 80, 640
    _, _, qa1, qb1 = operands(m, n, k, "e4m3", "e4m3", seed=21)
    _, _, qa2, qb2 = operands(m, n, k, "e4m3", "e4m3", seed=22)
    a, b = to_device(qa1), to_device(qb1)
    for kw in ({"split_k": 3}, {"split_k": 4, "deterministic": False}, {"split_k": 1}):
        out = cupy.empty((m, n), cupy.uint16)
        mxrt.gemm_mx(a, b, out=out, **kw)  # compile and warm the memory pool
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


def test_device_misuse_raises_typed_errors(monkeypatch):
    _, _, qa, qb = operands(8, 16, 256, "e4m3", "e4m3", seed=1)
    a, b = to_device(qa), to_device(qb)
    with pytest.raises(mxrt.DtypeError, match="same side"):
        mxrt.gemm_mx(a, qb)
    with pytest.raises(mxrt.DtypeError, match="mixes host and device"):
        mxrt.gemm_mx((a.data, qa.scales, "e4m3"), b)
    with pytest.raises(mxrt.DtypeError, match="backend='numpy'"):
        mxrt.gemm_mx(a, b, backend="numpy")
    with pytest.raises(mxrt.DtypeError, match="expected a CuPy array"):
        mxrt.gemm_mx(a, b, out=np.zeros((8, 16), np.float32), out_dtype="float32")
    with pytest.raises(mxrt.DtypeError, match="uint16 or bfloat16"):
        mxrt.gemm_mx(a, b, out=cupy.zeros((8, 16), cupy.float32))
    with pytest.raises(mxrt.ShapeError, match=r"expected \(8, 16\)"):
        mxrt.gemm_mx(a, b, out=cupy.zeros((16, 8), cupy.float32), out_dtype="float32")
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.gemm_mx(a, b, out=cupy.zeros((16, 8), cupy.float32).T, out_dtype="float32")
    wide = cupy.zeros((8, 512), cupy.uint8)
    with pytest.raises(mxrt.LayoutError, match="C-contiguous"):
        mxrt.gemm_mx((wide[:, ::2], a.scales, "e4m3"), b)
    with pytest.raises(mxrt.ShapeError, match=r"a\.scales is a CuPy array"):
        mxrt.gemm_mx((a.data, a.scales[:, :1], "e4m3"), b)
    with pytest.raises(mxrt.ShapeError, match="scale_layout_shape"):
        mxrt.gemm_mx((a.data, a.scales, "e4m3"), b, a_scale_layout="aiter32x8")
    dg = mxrt.preshuffle_scales(a.scales, "deepgemm_ue8m0")
    with pytest.raises(mxrt.LayoutError, match="MN-major"):
        mxrt.gemm_mx((a.data, cupy.ascontiguousarray(dg), "e4m3"), b, a_scale_layout="deepgemm_ue8m0")
    with pytest.raises(mxrt.DtypeError, match="host-only"):
        mxrt.reference.gemm_mx(a, b)
    monkeypatch.setenv("MXRT_GEMM_PATH", "nope")
    with pytest.raises(mxrt.UnsupportedArchError, match="GEMM path 'nope'"):
        mxrt.gemm_mx(a, b)


def test_launch_plans_and_the_driver_launch(monkeypatch):
    """The small-problem dispatch: the first call on CuPy MXArrays makes a plan, later calls on new buffers of the
    same key reuse it (and are right); a key change (split_k) makes another; CuPy's own launch gives the same bits."""
    from mxrt.api import gemm as api_gemm

    api_gemm.clear_plans()
    for seed in (1, 2, 3):
        _, _, qa, qb = operands(33, 300, 256, "e4m3", "e4m3", seed=seed)
        da, db = to_device(qa), to_device(qb)
        got = mxrt.gemm_mx(da, db)
        assert not check_result(got, qa, qb, "bfloat16")
    assert len(api_gemm._PLANS) == 1
    sk = mxrt.gemm_mx(da, db, split_k=2)
    assert len(api_gemm._PLANS) == 2 and not check_result(sk, qa, qb, "bfloat16")
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    assert (mxrt.gemm_mx(da, db) == got).all()
    assert (mxrt.gemm_mx(da, db, split_k=2) == sk).all()


def test_prepared_stream_k_plan(monkeypatch):
    """The wgmma decode path's plan on a stream-K grid (7 CTAs forced on a small cell): the prepared launches give the
    bits of CuPy's own launch on fresh buffers, and a planned call first seen on a stream under capture records the
    older grid (its counters cannot be zeroed inside a graph) and is still right."""
    from mxrt.api import gemm as api_gemm
    from mxrt.ops import gemm_decode_wg

    monkeypatch.setenv("MXRT_GEMM_PATH", gemm_decode_wg.NAME)
    monkeypatch.setattr(gemm_decode_wg, "sk_ctas", lambda n, k, sms: 7)
    api_gemm.clear_plans()
    for seed in (1, 2):
        _, _, qa, qb = operands(24, 1000, 2048, "e4m3", "e4m3", seed=seed)
        da, db = to_device(qa), to_device(qb)
        first = mxrt.gemm_mx(da, db)
        assert (mxrt.gemm_mx(da, db) == first).all()
        assert not check_result(first, qa, qb, "bfloat16")
    assert any(p.runner is not None for p in api_gemm._PLANS.values())
    monkeypatch.setenv("MXRT_LAUNCH", "cupy")
    assert (mxrt.gemm_mx(da, db) == first).all()
    monkeypatch.delenv("MXRT_LAUNCH")
    out = cupy.empty_like(first)
    fresh = cupy.cuda.Stream(non_blocking=True)
    mxrt.gemm_mx(da, db, out=out)  # the plan of this out buffer, made on the default stream
    cupy.cuda.Device().synchronize()
    with mxrt.runtime.debug(), fresh:  # no synchronisation after launches while capturing
        fresh.begin_capture()
        try:
            mxrt.gemm_mx(da, db, out=out)
        finally:
            graph = fresh.end_capture()
    out.view(cupy.uint8).fill(0xFF)
    cupy.cuda.Device().synchronize()
    graph.launch(stream=fresh)
    fresh.synchronize()
    assert not check_result(out, qa, qb, "bfloat16")


@pytest.mark.parametrize(
    ("m", "n", "k", "kw"),
    [(1, 256, 512, {}), (1, 7168, 4096, {}), (3, 300, 512, {"split_k": 3}), (100, 256, 256, {}),
     (70, 128, 512, {"split_k": 2, "out_dtype": "float16"}), (1536, 1536, 256, {}),
     (1536, 1536, 256, {"out_dtype": "float16"})],
    ids=["decode", "decode-7168x4096", "decode-sk3", "wgmma", "wgmma-sk2-f16", "sm90_ws", "sm90_ws-f16"],
)  # fmt: skip
def test_prepared_plans_are_bitwise_the_unplanned_route(monkeypatch, m, n, k, kw):
    """The prepared launches of a plan (only pointers change per call) give the bits of the first (unplanned) call
    and of CuPy's own launch, on fresh buffers of the same key; poisoned outputs are fully written."""
    from mxrt.api import gemm as api_gemm

    monkeypatch.setattr("mxrt.runtime.cublas.available", lambda: False)  # sm90_cublas has no prepared form
    out_dtype = kw.get("out_dtype", "bfloat16")
    api_gemm.clear_plans()
    for seed in (1, 2):
        _, _, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=seed)
        da, db = to_device(qa), to_device(qb)
        first = mxrt.gemm_mx(da, db, **kw)
        with mxrt.runtime.debug(poison=0xFF):
            planned = [mxrt.gemm_mx(da, db, **kw) for _ in range(2)]
        plan = api_gemm._PLANS[api_gemm._plan_key(da, db, out_dtype, kw.get("split_k", 1), True, None, "auto",
                                                  None, None)]  # fmt: skip
        assert plan.runner is not None
        assert not check_result(first, qa, qb, out_dtype, splits_rounded=kw.get("split_k", 1))
        for d in planned:
            assert (d == first).all()
        monkeypatch.setenv("MXRT_LAUNCH", "cupy")
        assert (mxrt.gemm_mx(da, db, **kw) == first).all()
        monkeypatch.delenv("MXRT_LAUNCH")
