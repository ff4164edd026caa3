"""The ``sm90_wgmma`` GEMM path: what it declines (CPU, no GPU needed) and, on an sm_90a device (marker ``gpu``),
the path itself and its e2m1 -> e4m3 expansion against numpy. The reference and graph-capture tests run on both
sm90 paths, ``sm90_wgmma`` and the engine ``sm90_ws`` (tests/test_gemm_sm90_ws.py has the engine's own cases).

The path as a whole is also covered by the shared GPU GEMM tests, which parametrize over every registered path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support.gemm_cases import fake_device_gemm

import mxrt
from mxrt.formats.codecs import decode, unpack_fp4
from mxrt.ops import gemm_paths, gemm_sm90, gemm_sm90_kernels, gemm_sm90_ws
from mxrt.problems import gemm_problem
from mxrt.reference import calc_diff, gemm_mx


def _dg(m=256, n=256, k=512, **kw):
    return fake_device_gemm(m=m, n=n, k=k, **kw)


def test_registered() -> None:
    path = next(p for p in gemm_paths.gemm_paths("sm_90a") if p.name == "sm90_wgmma")
    assert (path.target, path.priority) == ("sm_90a", 20)
    assert path.name not in [p.name for p in gemm_paths.gemm_paths("gfx950")]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"split_k": 65536, "k": 32 * 65536}, "split_k"),
        ({"layouts": ("aiter32x8", None), "m": 2**20, "k": 32 * 2041}, "aiter32x8 scale storage"),
        ({"k": 520}, "k % 16"),
        ({"a_fmt": "e4m3", "b_fmt": "e2m1", "k": 40}, "k % 16"),
        ({"a_ptr": (1 << 20) + 8}, "16-byte aligned"),
        ({"m": 2**31}, "2^31"),
        ({"out_dtype": "float32"}, "float32"),
        ({"out_dtype": "float32", "a_fmt": "e2m1"}, "float32"),
    ],
    ids=["split_k_grid_z", "layout_size", "k_tail_fp8", "k_tail_mixed", "misaligned", "huge", "fp32_fp8", "fp32_mixed"],
)
def test_declines(kw: dict, why: str) -> None:
    got = gemm_sm90.supports(_dg(**kw))
    assert got is not None and why in got


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"k": 16},
        {"a_fmt": "e5m2"},
        {"a_fmt": "e2m1", "b_fmt": "e2m1", "k": 40},
        {"out_dtype": "float16"},
        {"m": 1, "n": 3},
        {"a_fmt": "e2m1", "b_fmt": "e2m1", "a_ptr": 3},
        {"split_k": 4},
        {"split_k": 16, "deterministic": False, "m": 16},
        {"layouts": ("aiter32x8", "cublas128x4")},
        {"layouts": ("turbo16x4", "deepgemm_ue8m0"), "m": 1, "k": 40 * 32},
    ],
    ids=[
        "base", "k16", "e5m2", "fp4_k_tail", "f16", "tiny", "fp4_unaligned_codes", "split_k", "split_k_atomic",
        "layouts", "layouts_decode",
    ],
)  # fmt: skip
def test_accepts(kw: dict) -> None:
    assert gemm_sm90.supports(_dg(**kw)) is None


@pytest.mark.parametrize(
    ("layout", "dtype", "code"),
    [(None, np.uint8, 0), ("aiter32x8", np.uint8, 1), ("turbo16x4", np.uint8, 2), ("turbo16x4", np.uint32, 5),
     ("cublas128x4", np.uint8, 3), ("deepgemm_ue8m0", np.uint8, 4)],
)  # fmt: skip
def test_scale_layout_defines(layout, dtype, code) -> None:
    """SLA / SLB are the layout codes of mxrt.codes (turbo16x4 in uint32 words: its own code), and the compile
    check builds every code the launcher can ask for."""
    assert gemm_sm90.scale_layout_code(layout, np.empty(4, dtype)) == code
    built = {(dict(d)["SLA"], dict(d)["SLB"]) for d in gemm_sm90_kernels.GEMM_MX_SM90.variants}
    assert any(code in pair for pair in built)


@pytest.mark.parametrize(
    ("m", "writes_f32", "tile"),
    [(1, False, (64, 128)), (64, True, (64, 128)), (65, False, (128, 128)), (128, False, (128, 128)),
     (129, False, (256, 128)), (4096, False, (256, 128)), (4096, True, (128, 128))],
)  # fmt: skip
def test_plan(m: int, writes_f32: bool, tile: tuple[int, int]) -> None:
    c = gemm_sm90.plan(m, writes_f32)
    assert (c.bm, c.bn) == tile
    assert c.threads == (256 if c.bm == 256 else 2 * c.bm)
    assert gemm_sm90.smem_bytes(c.bm, c.bn, c.stages) <= 232448  # a block's shared-memory limit (227 KB)


def test_small_tile_fits_two_ctas_per_sm() -> None:
    """The m <= 64 tile is meant to run two CTAs per SM (228 KB per SM, 1 KB reserved per block)."""
    c = gemm_sm90.SMALL
    assert 2 * (gemm_sm90.smem_bytes(c.bm, c.bn, c.stages) + 1024) <= 228 * 1024


def test_tensor_map_argument_is_one_128_byte_scalar() -> None:
    """The map travels by value: a numpy scalar of exactly 128 bytes whose bytes are the encoded map."""
    raw = np.arange(128, dtype=np.uint8)
    arg = raw.view(gemm_sm90.TMAP_DTYPE)[0]
    assert isinstance(arg, np.generic) and arg.dtype.itemsize == 128
    assert bytes(arg.tobytes()) == raw.tobytes()


# ---- on an sm_90a GPU ---------------------------------------------------------------------------------------


@pytest.fixture
def cupy_sm90():
    cupy = pytest.importorskip("cupy")
    from mxrt.runtime import get_arch

    if get_arch().target != "sm_90a":
        pytest.skip("sm90_wgmma runs on sm_90a only")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "k"), [(1, 1), (3, 31), (5, 32), (7, 100), (64, 1024)])
def test_e2m1_expansion_exact(cupy_sm90, rows: int, k: int) -> None:
    cupy = cupy_sm90
    rng = np.random.default_rng(rows * 1000 + k)
    packed = rng.integers(0, 256, size=(rows, -(-k // 2)), dtype=np.uint8)
    kp = -(-k // 16) * 16
    got = cupy.asnumpy(gemm_sm90._expand_e2m1(cupy.asarray(packed), rows, k, kp, mxrt.runtime.get_arch()))
    cupy.cuda.runtime.deviceSynchronize()
    vals = decode(unpack_fp4(packed, k, axis=1), "e2m1")  # float32 [rows, k], every value exact in e4m3
    want = np.zeros((rows, kp), np.uint8)
    want[:, :k] = vals.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(got, want)


SM90_PATHS = [gemm_sm90, gemm_sm90_ws]  # the launcher modules of both sm_90a dense paths (ids: their NAME)


@pytest.mark.gpu
@pytest.mark.parametrize("mod", SM90_PATHS, ids=lambda mod: mod.NAME)
@pytest.mark.parametrize(
    "pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids=lambda p: f"{p[0]}x{p[1]}"
)
@pytest.mark.parametrize(("m", "n", "k"), [(300, 200, 272), (7, 130, 48), (128, 128, 4096)], ids=str)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_path_vs_reference(cupy_sm90, monkeypatch, mod, pair, m: int, n: int, k: int, out_dtype: str) -> None:
    cupy = cupy_sm90
    monkeypatch.setenv("MXRT_GEMM_PATH", mod.NAME)  # forced: sm90_ws serves these small grids only when asked
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    xa = rng.standard_normal((m, k)).astype(np.float32)
    xb = rng.standard_normal((n, k)).astype(np.float32)
    qa, qb = mxrt.quantize_mx(xa, pair[0], backend="numpy"), mxrt.quantize_mx(xb, pair[1], backend="numpy")
    p = gemm_problem(qa, qb, out_dtype=out_dtype)
    cp_dt = {"bfloat16": cupy.uint16, "float16": cupy.float16, "float32": cupy.float32}[out_dtype]
    out = cupy.empty((m, n), dtype=cp_dt)
    out.view(cupy.uint8).fill(0xFF)  # poisoned: NaN in every out dtype (a fill value would warn on the cast)
    dg = gemm_paths.DeviceGemm(
        p,
        cupy.asarray(qa.data),
        cupy.asarray(qb.data),
        cupy.asarray(qa.scales),
        cupy.asarray(qb.scales),
        out,
        mxrt.runtime.get_arch(),
    )
    why = mod.supports(dg)
    if why is not None:
        pytest.skip(f"declined: {why}")
    mod.run(dg)
    cupy.cuda.runtime.deviceSynchronize()
    h = cupy.asnumpy(out)
    got = (h.view(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else h).astype(np.float64)
    ref = gemm_mx(qa, qb, out_dtype="float64")
    assert np.isfinite(got).all()
    if out_dtype == "float32":
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-5
    else:
        assert calc_diff(got, ref) <= 1e-5
    x64 = xa.astype(np.float64) @ xb.astype(np.float64).T
    # the issue's bars; e5m2's own quantization error (~1.7e-3) is over 1e-3, so as close as the reference passes
    bar = max(2e-2 if "e2m1" in pair else 1e-3, 1.05 * calc_diff(ref, x64))
    assert calc_diff(got, x64) <= bar


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("split_k", [1, 2, 5, 8])
@pytest.mark.parametrize(("m", "n", "k"), [(16, 700, 4096), (64, 384, 2080), (200, 300, 1056)], ids=str)
def test_split_k_small_m(cupy_sm90, monkeypatch, m: int, n: int, k: int, split_k: int, deterministic: bool) -> None:
    """Decode-like shapes (the 64 x 128 and 128 x 128 tiles), split-K with both accumulation modes, bf16 out."""
    from support.gemm_cases import check_result, operands, to_device

    cupy = cupy_sm90
    monkeypatch.setenv("MXRT_GEMM_PATH", "sm90_wgmma")
    x, w, qa, qb = operands(m, n, k, "e4m3", "e4m3", seed=m + split_k)
    out = cupy.empty((m, n), cupy.uint16)
    out.view(cupy.uint8).fill(0xFF)
    got = mxrt.gemm_mx(to_device(qa), to_device(qb), out=out, split_k=split_k, deterministic=deterministic)
    rounded = split_k if not deterministic else 1
    assert not check_result(got, qa, qb, "bfloat16", x=x, w=w, splits_rounded=rounded)


@pytest.mark.gpu
@pytest.mark.parametrize("path", [mod.NAME for mod in SM90_PATHS])
@pytest.mark.parametrize(
    ("pair", "kw"),
    [
        (("e4m3", "e4m3"), {"split_k": 1}),
        (("e4m3", "e4m3"), {"split_k": 3}),
        (("e4m3", "e4m3"), {"split_k": 4, "deterministic": False}),
        (("e2m1", "e4m3"), {"split_k": 1}),
    ],
    ids=["fp8", "fp8_det3", "fp8_atomic4", "fp4xfp8"],
)
def test_graph_capture_on_fresh_buffers(cupy_sm90, monkeypatch, path, pair, kw) -> None:
    """A CUDA graph captured on buffers this path has never seen (no warm-up call on them, host map cache
    cleared): the tensor maps travel as kernel parameters, so the capture needs no host-to-device copy; replays
    after new data is written into the same buffers compute the new product."""
    from support.gemm_cases import check_result, operands, to_device

    cupy = cupy_sm90
    if path == gemm_sm90_ws.NAME and kw["split_k"] != 1:
        pytest.skip("sm90_ws declines split-K")
    monkeypatch.setenv("MXRT_GEMM_PATH", path)
    m, n, k = 200, 160, 640
    _, _, qa0, qb0 = operands(m, n, k, *pair, seed=40)
    mxrt.gemm_mx(to_device(qa0), to_device(qb0), **kw)  # builds the kernels (compilation is not under test)
    cupy.cuda.Device().synchronize()
    _, _, qa1, qb1 = operands(m, n, k, *pair, seed=41)
    _, _, qa2, qb2 = operands(m, n, k, *pair, seed=42)
    a, b = to_device(qa1), to_device(qb1)
    out = cupy.empty((m, n), cupy.uint16)
    gemm_sm90._maps.clear()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        mxrt.gemm_mx(a, b, out=out, **kw)
        graph = stream.end_capture()
    rounded = kw["split_k"] if kw.get("deterministic") is False else 1
    for qa, qb in ((qa1, qb1), (qa2, qb2), (qa1, qb1)):
        for dst, src in ((a.data, qa.data), (a.scales, qa.scales), (b.data, qb.data), (b.scales, qb.scales)):
            dst.set(np.ascontiguousarray(src))  # in place: no pool allocation between capture and replay
        out.view(cupy.uint8).fill(0xFF)
        cupy.cuda.Device().synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
        assert not check_result(out, qa, qb, "bfloat16", splits_rounded=rounded), kw
