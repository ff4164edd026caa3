"""The ``sm90_wgmma`` GEMM path: what it declines (CPU, no GPU needed) and, on an sm_90a device (marker ``gpu``),
the path itself and its e2m1 -> e4m3 expansion against numpy.

The path as a whole is also covered by the shared GPU GEMM tests, which parametrize over every registered path.
"""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import mxrt
from mxrt.formats.codecs import decode, unpack_fp4
from mxrt.ops import gemm_paths, gemm_sm90
from mxrt.reference import calc_diff, gemm_mx, gemm_problem


def _ptr(addr: int) -> SimpleNamespace:
    return SimpleNamespace(data=SimpleNamespace(ptr=addr))


def _dg(
    m=256,
    n=256,
    k=512,
    a_fmt="e4m3",
    b_fmt="e4m3",
    out_dtype="bfloat16",
    split_k=1,
    layouts=(None, None),
    a_ptr=1 << 20,
    b_ptr=1 << 21,
):
    dt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[out_dtype]
    p = SimpleNamespace(
        op="gemm_mx",
        m=m,
        n=n,
        k=k,
        a_fmt=a_fmt,
        b_fmt=b_fmt,
        out_dtype=np.dtype(dt),
        split_k=split_k,
        a_scale_layout=layouts[0],
        b_scale_layout=layouts[1],
        k_blocks=-(-k // 32),
        is_empty=m == 0 or n == 0 or k == 0,
    )
    return gemm_paths.DeviceGemm(p, _ptr(a_ptr), _ptr(b_ptr), None, None, None, SimpleNamespace(target="sm_90a"))


def test_registered() -> None:
    path = next(p for p in gemm_paths.gemm_paths("sm_90a") if p.name == "sm90_wgmma")
    assert (path.target, path.priority) == ("sm_90a", 20)
    assert path.name not in [p.name for p in gemm_paths.gemm_paths("gfx950")]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"split_k": 2}, "split_k"),
        ({"layouts": ("aiter32x8", None)}, "preshuffled"),
        ({"k": 520}, "k % 16"),
        ({"a_fmt": "e4m3", "b_fmt": "e2m1", "k": 40}, "k % 16"),
        ({"a_ptr": (1 << 20) + 8}, "16-byte aligned"),
        ({"m": 2**31}, "2^31"),
        ({"out_dtype": "float32"}, "float32"),
        ({"out_dtype": "float32", "a_fmt": "e2m1"}, "float32"),
    ],
    ids=["split_k", "layout", "k_tail_fp8", "k_tail_mixed", "misaligned", "huge", "fp32_fp8", "fp32_mixed"],
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
    ],
    ids=["base", "k16", "e5m2", "fp4_k_tail", "f16", "tiny", "fp4_unaligned_codes"],
)
def test_accepts(kw: dict) -> None:
    assert gemm_sm90.supports(_dg(**kw)) is None


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


@pytest.mark.gpu
@pytest.mark.parametrize(
    "pair", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e4m3", "e2m1")], ids=lambda p: f"{p[0]}x{p[1]}"
)
@pytest.mark.parametrize(("m", "n", "k"), [(300, 200, 272), (7, 130, 48), (128, 128, 4096)], ids=str)
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
def test_path_vs_reference(cupy_sm90, pair, m: int, n: int, k: int, out_dtype: str) -> None:
    cupy = cupy_sm90
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
    why = gemm_sm90.supports(dg)
    if why is not None:
        pytest.skip(f"declined: {why}")
    gemm_sm90.run(dg)
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
